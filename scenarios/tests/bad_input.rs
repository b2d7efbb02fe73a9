//! Bad input for the `scenario` tool, as a new user or a damaged file gives it: a missing,
//! empty, non-text, garbage, truncated or directory file, a scenario with an impossible
//! value or a dangling reference, an out-of-range number, an empty seed range, a bad
//! endpoint, an output in a folder that does not exist. Each row says the words of the
//! one-line error (`scenario: ...`), which names what was wrong; the tool's status for an
//! error is 2 (1 means invariants were violated). No row may panic.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use cli_oneline::refusals::Refusals;

const SCENARIO: &str = env!("CARGO_BIN_EXE_scenario");

/// A scratch folder of bad (and good) scenario files and captures.
struct Files {
    dir: PathBuf,
}

impl Files {
    fn new() -> Files {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("scenario-bad-input");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("a-directory")).unwrap();
        let f = Files { dir };
        let good =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/corpus/demo.toml"))
                .unwrap();
        let write = |name: &str, text: &str| std::fs::write(f.path(name), text).unwrap();
        let edit = |name: &str, from: &str, to: &str| {
            assert!(good.contains(from), "{from}");
            write(name, &good.replacen(from, to, 1));
        };
        write("good.toml", &good);
        write("empty.toml", "");
        std::fs::write(f.path("binary.toml"), [b'n', 0xff, 0xfe, b'\n']).unwrap();
        write("garbage.toml", "this is not TOML\n");
        // Cut inside the first [[hosts]] table.
        let cut = good.find("ip = \"10.0.0.1\"").unwrap() + 8;
        write("cut.toml", &good[..cut]);
        edit(
            "dangling-host.toml",
            "host = \"sender\"",
            "host = \"nobody\"",
        );
        edit("bad-ip.toml", "ip = \"10.0.0.1\"", "ip = \"10.0.0\"");
        edit("tiny-packet.toml", "packet_size = 1472", "packet_size = 7");
        edit("big-port.toml", "port = 7148", "port = 70000");
        edit(
            "unicast-group.toml",
            "addr = \"239.10.0.1\"",
            "addr = \"10.1.1.1\"",
        );
        edit("no-such-group.toml", "groups = [0]", "groups = [5]");
        edit("negative-size.toml", "heap_size = 16384", "heap_size = -3");
        let pcap = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/data/spead2_lo_eth.pcap"
        ))
        .unwrap();
        std::fs::write(f.path("good.pcap"), &pcap).unwrap();
        std::fs::write(f.path("cut.pcap"), &pcap[..100]).unwrap();
        std::fs::write(f.path("empty.pcap"), b"").unwrap();
        f
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn arg(&self, name: &str) -> String {
        self.path(name).display().to_string()
    }
}

#[test]
fn the_scenario_tool_refuses_bad_input_with_a_clear_error() {
    let f = Files::new();
    let s = |v: &[&str]| v.iter().map(|a| (*a).to_owned()).collect::<Vec<String>>();
    let a = |name: &str| f.arg(name);
    let good = a("good.toml");
    let pcap = a("good.pcap");
    // (arguments, words of the error)
    let rows: Vec<(Vec<String>, String)> = vec![
        (s(&[]), "error: no command given; the commands: demo, run, replay, meerkat, swarm".into()),
        (s(&["walk"]), "error: unrecognized subcommand 'walk'".into()),
        // run: files
        (s(&["run"]), "error: the following required arguments were not provided: <FILE>".into()),
        (s(&["run", &a("missing.toml")]), format!("{}: No such file or directory", a("missing.toml"))),
        (s(&["run", &a("empty.toml")]), format!("{}: empty file", a("empty.toml"))),
        (s(&["run", &a("binary.toml")]), format!("{}: not a scenario (TOML text): not UTF-8 at byte 1", a("binary.toml"))),
        (s(&["run", &a("garbage.toml")]), format!("{}: line 1, column 6: expected `.`, `=`", a("garbage.toml"))),
        (s(&["run", &a("cut.toml")]), format!("{}: line 10, column 9: invalid basic string", a("cut.toml"))),
        (s(&["run", &a("a-directory")]), format!("{}: Is a directory", a("a-directory"))),
        (s(&["run", &pcap]), format!("{pcap}: not a scenario (TOML text): not UTF-8 at byte")),
        // run: impossible values and dangling references
        (s(&["run", &a("dangling-host.toml")]), format!("{}: sender 0 refers to host \"nobody\", which does not exist", a("dangling-host.toml"))),
        (s(&["run", &a("bad-ip.toml")]), format!("{}: line 10, column 6: invalid IPv4 address syntax", a("bad-ip.toml"))),
        (s(&["run", &a("tiny-packet.toml")]), format!("{}: sender 0: packet size 7 is outside [88, 9000]", a("tiny-packet.toml"))),
        (s(&["run", &a("big-port.toml")]), format!("{}: line 30, column 8: invalid value: integer `70000`, expected u16", a("big-port.toml"))),
        (s(&["run", &a("unicast-group.toml")]), format!("{}: group 0 address 10.1.1.1 is not IPv4 multicast", a("unicast-group.toml"))),
        (s(&["run", &a("no-such-group.toml")]), format!("{}: receiver 0 refers to group 5, which does not exist", a("no-such-group.toml"))),
        (s(&["run", &a("negative-size.toml")]), format!("{}: line 38, column 13: invalid value: integer `-3`, expected usize", a("negative-size.toml"))),
        // run: options
        (s(&["run", &good, "--seed", "-1"]), "error: unexpected argument '-1' found".into()),
        (s(&["run", &good, "--seeds", "5..2"]), "error: invalid value '5..2' for '--seeds <SEEDS>': the seed range `5..2` is empty (A..B needs A < B)".into()),
        (s(&["run", &good, "--seeds", "5"]), "`5` is not a seed range A..B".into()),
        (s(&["run", &good, "--seeds", "0..2", "--threads", "0"]), "invalid value '0' for '--threads <THREADS>': 0 is not in 1..=1024".into()),
        (s(&["run", &good, "--threads", "2"]), "error: the following required arguments were not provided: --seeds <SEEDS>".into()),
        (s(&["run", &good, "--seed", "1", "--seeds", "0..2"]), "error: the argument '--seed <SEED>' cannot be used with '--seeds <SEEDS>'".into()),
        (s(&["run", &good, "--pcap", &a("no-such-dir/x.pcap")]), format!("{}: capture I/O: No such file or directory", a("no-such-dir/x.pcap"))),
        (s(&["run", &good, "--pcap", &a("a-directory")]), format!("{}: capture I/O: Is a directory", a("a-directory"))),
        // replay: files
        (s(&["replay", &a("missing.pcap")]), format!("{}: I/O error at byte 0: No such file or directory", a("missing.pcap"))),
        (s(&["replay", &a("empty.pcap")]), format!("{}: file truncated at byte 0", a("empty.pcap"))),
        (s(&["replay", &good]), format!("{good}: not a pcap or pcapng file (magic 0x")),
        (s(&["replay", &a("cut.pcap")]), format!("{}: file truncated at byte 24", a("cut.pcap"))),
        (s(&["replay", &a("a-directory")]), format!("{}: I/O error at byte 0: Is a directory", a("a-directory"))),
        // replay: numbers and endpoints
        (s(&["replay", &pcap, "--loss", "2"]), "invalid value '2' for '--loss <LOSS>': 2 is not a probability (0 to 1)".into()),
        (s(&["replay", &pcap, "--loss", "NaN"]), "NaN is not a probability (0 to 1)".into()),
        (s(&["replay", &pcap, "--dup", "lots"]), "invalid value 'lots' for '--dup <DUP>': lots is not a number".into()),
        (s(&["replay", &pcap, "--reorder", "99999999999"]), "invalid value '99999999999' for '--reorder <REORDER>'".into()),
        (s(&["replay", &pcap, "--group", "239.1.1.1"]), "invalid value '239.1.1.1' for '--group <GROUP>': invalid IPv4 socket address syntax".into()),
        (s(&["replay", &pcap, "--group", "239.9.9.9:1"]), format!("{pcap}: no UDP datagrams to 239.9.9.9:1")),
        // demo, meerkat, swarm
        (s(&["demo", "--seed", "x"]), "invalid value 'x' for '--seed <SEED>'".into()),
        (s(&["demo", "--out", &a("empty.toml/out")]), format!("{}: Not a directory", a("empty.toml/out"))),
        (s(&["meerkat", "--seed", "-1"]), "error: unexpected argument '-1' found".into()),
        (s(&["swarm"]), "error: the following required arguments were not provided: --seeds <SEEDS>".into()),
        (s(&["swarm", "--seeds", "5..2"]), "the seed range `5..2` is empty (A..B needs A < B)".into()),
        (s(&["swarm", "--seeds", "0..0"]), "the seed range `0..0` is empty".into()),
        (s(&["swarm", "--seeds", "..9"]), "`` in `..9` is not a seed".into()),
        (s(&["swarm", "--seeds", "0..2", "--threads", "0"]), "0 is not in 1..=1024".into()),
        (s(&["swarm", "--seeds", "0..2", "--shrink", "-4"]), "error: unexpected argument '-4' found".into()),
    ];
    let mut table = Refusals::new();
    for (args, words) in &rows {
        let out = Command::new(SCENARIO)
            .args(args)
            .env_remove("RUST_LOG")
            .current_dir(&f.dir)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        table.check(&format!("scenario {args:?}"), &out, 2, "scenario: ", words);
    }
    table.assert_all_refused();
}
