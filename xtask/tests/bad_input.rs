//! Bad input for every `cargo xtask` command: an out-of-range or malformed number, a bad
//! seed range, a missing, empty, non-text or directory file, an output in a folder that
//! does not exist, a bad host name or environment entry. Each row says the exit status
//! (2 for a usage error, as clap's; 1 for a file xtask cannot use) and the words of the
//! one-line error, which names what was wrong. Every row is refused before xtask installs,
//! builds or boots anything: the table runs with `CARGO` pointing nowhere, so a row that
//! got as far as a cargo build would fail with another message. (`demo`, `scenario` and
//! `replay` hand their arguments to the `scenario` tool unchanged and exit with its status;
//! its own table is `scenarios/tests/bad_input.rs`.)

use std::path::PathBuf;
use std::process::{Command, Stdio};

use cli_oneline::refusals::Refusals;

const XTASK: &str = env!("CARGO_BIN_EXE_xtask");

/// A scratch folder with bad files.
fn files() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("xtask-bad-input");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("a-directory")).unwrap();
    std::fs::write(dir.join("empty.toml"), b"").unwrap();
    std::fs::write(dir.join("binary.toml"), [b'[', 0xff, 0xfe, b'\n']).unwrap();
    dir
}

#[test]
fn every_command_refuses_bad_input_with_a_clear_error() {
    let dir = files();
    let f = |name: &str| dir.join(name).display().to_string();
    let s = |v: &[&str]| v.iter().map(|a| (*a).to_owned()).collect::<Vec<String>>();
    let missing = f("missing.toml");
    // (arguments, exit status, words of the error)
    let rows: Vec<(Vec<String>, i32, String)> = vec![
        (s(&[]), 2, "no command given; the commands: test, ci, demo, scenario, replay, bench, emu, miri, dist, swarm, fuzz, soak, vm".into()),
        (s(&["nope"]), 2, "unrecognized subcommand 'nope'".into()),
        // test
        (s(&["test", "--backend", "gpu"]), 2, "invalid value 'gpu' for '--backend <BACKEND>' [possible values: sim, hw, emu]".into()),
        (s(&["test", "--backend", "hw", "--vm", "--timeout", "0"]), 2, "invalid value '0' for '--timeout <TIMEOUT>': 0 is not allowed: give at least 1".into()),
        (s(&["test", "--timeout", "soon"]), 2, "invalid value 'soon' for '--timeout <TIMEOUT>': `soon` is not a whole number".into()),
        (s(&["test", "--wire", "--interop", "--case", "ud-ll"]), 2, "invalid value 'ud-ll' for '--case <NAME>': no interop case `ud-ll`; the cases: rc-emulated-server, ".into()),
        (s(&["test", "--wire", "--case", "rc-vm-server"]), 2, "the following required arguments were not provided:".into()),
        // ci, bench, miri take nothing
        (s(&["ci", "--fast"]), 2, "unexpected argument '--fast' found".into()),
        (s(&["bench", "spead"]), 2, "invalid value 'spead' for '[WHAT]' [possible values: emu, fabric]".into()),
        (s(&["miri", "-p", "spead"]), 2, "unexpected argument '-p' found".into()),
        // fuzz
        (s(&["fuzz", "--time", "0"]), 2, "invalid value '0' for '--time <TIME>': 0 is not allowed: give at least 1".into()),
        (s(&["fuzz", "--time", "-5"]), 2, "unexpected argument '-5' found".into()),
        (s(&["fuzz", "--time", "1h"]), 2, "invalid value '1h' for '--time <TIME>': `1h` is not a whole number".into()),
        (s(&["fuzz", "--runs", "0"]), 2, "invalid value '0' for '--runs <RUNS>': 0 is not allowed: give at least 1".into()),
        (s(&["fuzz", "--runs", "1e7"]), 2, "invalid value '1e7' for '--runs <RUNS>': `1e7` is not a whole number".into()),
        (s(&["fuzz", "--target", "nope"]), 2, "invalid value 'nope' for '--target <TARGET>': no fuzz target `nope`; the targets: spead_assemble,".into()),
        // swarm
        (s(&["swarm"]), 2, "the following required arguments were not provided: --seeds <SEEDS>".into()),
        (s(&["swarm", "--seeds", "5..2"]), 2, "invalid value '5..2' for '--seeds <SEEDS>': the seed range `5..2` is empty (A..B needs A < B)".into()),
        (s(&["swarm", "--seeds", "3..3"]), 2, "the seed range `3..3` is empty".into()),
        (s(&["swarm", "--seeds", "5"]), 2, "invalid value '5' for '--seeds <SEEDS>': `5` is not a seed range A..B".into()),
        (s(&["swarm", "--seeds", "x..3"]), 2, "`x` in `x..3` is not a seed".into()),
        (s(&["swarm", "--seeds", "0..99999999999999999999"]), 2, "`99999999999999999999` in `0..99999999999999999999` is not a seed: number too large".into()),
        (s(&["swarm", "--seeds", "0..10", "--threads", "0"]), 2, "invalid value '0' for '--threads <THREADS>': 0 is not in 1..=1024".into()),
        (s(&["swarm", "--seeds", "0..10", "--shrink", "-1"]), 2, "unexpected argument '-1' found".into()),
        // soak
        (s(&["bench", "emu", "--runs", "0"]), 2, "invalid value '0' for '--runs <RUNS>': 0 is not in 1..=100".into()),
        (s(&["bench", "fabric", "--pairs", "0"]), 2, "invalid value '0' for '--pairs <PAIRS>': 0 is not in 1..=50".into()),
        (s(&["bench", "fabric", "--pairs", "1,x"]), 2, "invalid value 'x' for '--pairs <PAIRS>'".into()),
        (s(&["bench", "gpu"]), 2, "invalid value 'gpu' for '[WHAT]' [possible values: emu, fabric]".into()),
        (s(&["soak", "--minutes", "0"]), 2, "invalid value '0' for '--minutes <MINUTES>': 0 is not in 1..=1440".into()),
        (s(&["soak", "--minutes", "2000"]), 2, "invalid value '2000' for '--minutes <MINUTES>': 2000 is not in 1..=1440".into()),
        (s(&["soak", "--minutes", "ten"]), 2, "invalid value 'ten' for '--minutes <MINUTES>'".into()),
        // emu: options, then files (refused before anything is installed or built)
        (s(&["emu"]), 2, "the following required arguments were not provided: <CMD>...".into()),
        (s(&["emu", "--fabric-only", "--no-fabric"]), 2, "the argument '--fabric-only' cannot be used with '--no-fabric'".into()),
        (s(&["emu", "--no-fabric", "--pcap", "x.pcap", "--", "true"]), 2, "the argument '--no-fabric' cannot be used with '--pcap <OUT>'".into()),
        (s(&["emu", "--seed", "-1", "--", "true"]), 2, "unexpected argument '-1' found".into()),
        (s(&["emu", "--seed", "seven", "--", "true"]), 2, "invalid value 'seven' for '--seed <SEED>'".into()),
        (s(&["emu", "--host", "", "--", "true"]), 2, "invalid value '' for '--host <HOST>'".into()),
        (s(&["emu", "--host", "h1;reboot", "--", "true"]), 2, "`h1;reboot` is not a host name".into()),
        (s(&["emu", "--topology", &missing, "--", "true"]), 1, format!("--topology {missing}: No such file or directory")),
        (s(&["emu", "--topology", &f("empty.toml"), "--", "true"]), 1, format!("--topology {}: empty file", f("empty.toml"))),
        (s(&["emu", "--topology", &f("binary.toml"), "--", "true"]), 1, format!("--topology {}: not UTF-8 text (byte 1)", f("binary.toml"))),
        (s(&["emu", "--topology", &f("a-directory"), "--", "true"]), 1, format!("--topology {}: Is a directory", f("a-directory"))),
        (s(&["emu", "--pcap", &f("no-such-dir/out.pcap"), "--", "true"]), 1, format!("--pcap {}: {}: No such file or directory", f("no-such-dir/out.pcap"), f("no-such-dir"))),
        (s(&["emu", "--pcap", &f("a-directory"), "--", "true"]), 1, format!("--pcap {}: Is a directory", f("a-directory"))),
        (s(&["emu", "--pcap", &f("empty.toml/out.pcap"), "--", "true"]), 1, format!("--pcap {}: {} is not a directory", f("empty.toml/out.pcap"), f("empty.toml"))),
        // vm
        (s(&["vm"]), 2, "the following required arguments were not provided: <CMD>...".into()),
        (s(&["vm", "--smoke", "--", "true"]), 2, "the argument '--smoke' cannot be used with '[CMD]...'".into()),
        (s(&["vm", "--timeout", "0", "--", "true"]), 2, "invalid value '0' for '--timeout <TIMEOUT>': 0 is not allowed: give at least 1".into()),
        (s(&["vm", "--memory", "0", "--", "true"]), 2, "invalid value '0' for '--memory <MEMORY>': 0 is not in 256..=65536".into()),
        (s(&["vm", "--memory", "100000", "--", "true"]), 2, "100000 is not in 256..=65536".into()),
        (s(&["vm", "-e", "FOO", "--", "true"]), 2, "invalid value 'FOO' for '--env <KEY=VALUE>': `FOO` is not KEY=VALUE".into()),
        (s(&["vm", "-e", "=1", "--", "true"]), 2, "`` in `=1` is not an environment variable name".into()),
        (s(&["vm", "--fabric", &missing, "--", "true"]), 2, format!("invalid value '{missing}' for '--fabric <SOCK>': {missing}: No such file or directory")),
        (s(&["vm", "--fabric", &f("empty.toml"), "--", "true"]), 2, format!("{} is not a Unix socket", f("empty.toml"))),
        (s(&["vm", "--fabric-ip", "10.100.0.20", "--", "true"]), 2, "the following required arguments were not provided: --fabric <SOCK>".into()),
        (s(&["vm", "-e", "A B=1", "--", "true"]), 2, "`A B` in `A B=1` is not an environment variable name".into()),
    ];
    let mut table = Refusals::one_line();
    for (args, status, words) in &rows {
        let out = Command::new(XTASK)
            .args(args)
            // A row that reached a cargo build would fail here with another message.
            .env("CARGO", "/nonexistent/cargo-for-the-bad-input-table")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        table.check(
            &format!("xtask {args:?}"),
            &out,
            *status,
            "xtask: error: ",
            words,
        );
        if !out.stdout.is_empty() {
            table.fail(format!(
                "xtask {args:?} printed on stdout: {}",
                String::from_utf8_lossy(&out.stdout)
            ));
        }
    }
    table.assert_all_refused();
}

#[test]
fn help_is_not_an_error() {
    for args in [&["--help"][..], &["swarm", "--help"], &["soak", "--help"]] {
        let out = Command::new(XTASK).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("Usage:"),
            "{args:?}"
        );
    }
}
