//! The split conformance step of `cargo xtask test --wire`: the cases of
//! `tests/src/conformance/split` (program `split-peer`) with one QP on real rxe in the
//! Soft-RoCE VM and the other on the emulated rxe of fabric host h1, both ways round,
//! compared with both QPs on rxe.
//!
//! Two VM boots, each on its own `verbs-emu-fabric` (topology
//! `emulator/topologies/vm-on-fabric.toml`, the VM at 10.100.0.20 on the fabric's QEMU
//! port, a capture):
//!
//! 1. every case three ways: both sides on rxe0 in the VM (two processes, the baseline),
//!    then the VM's side active against the emulated h1 passive, then the other way
//!    round (one `split-peer` in the VM and one on the host, as the emulated h1 with the
//!    emulated libibverbs first on `LD_LIBRARY_PATH`; the VM connects to the host's over
//!    QEMU's user-mode network, 10.0.2.2);
//! 2. the `lossy_` cases again, both ways round, on a fabric that loses 2% of the frames
//!    the switch sends to h1 and out of the VM's port ([`LOSSY_TOPOLOGY`], seed 7).
//!
//! Every outcome text (each case's completions, bytes and QP states, as `split-peer`
//! writes them) must equal the baseline's, line for line, and the baseline must equal
//! the committed one (`tests/data/split-both-rxe.txt`, which `super::split_emu` holds
//! both sides emulated to where no VM runs); a difference is printed as a unified diff
//! (`diff -u`). In the lossy capture, the data packets each stack sent again
//! are counted, and each must have sent some (so both stacks' retransmission paths ran).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::common::{cargo, root, Error};
use super::fabric::FabricProcess;
use super::roce_capture::{resent, roce_frames};
use crate::vm::{self, qemu::FabricNic, VmOptions};

/// The topology of the first boot.
const TOPOLOGY: &str = "emulator/topologies/vm-on-fabric.toml";
// The second boot's topology is the interop step's lossy one ([`TOPOLOGY`]'s hosts, 2%
// loss on the frames the switch sends to h1 and out of the VM's port).
use super::interop::LOSSY_TOPOLOGY;
/// The VM's address on the fabric.
const VM_IP: &str = "10.100.0.20";
/// The emulated host of the host's side, and its address.
const HOST: &str = "h1";
const HOST_IP: &str = "10.100.0.1";
/// The port the host's `split-peer` listens on (host loopback; 10.0.2.2 from the guest).
const HOST_PORT: u16 = 18610;
/// The port of the baseline's two processes inside the VM.
const VM_PORT: u16 = 18611;
/// The cases that run again under loss.
const LOSSY: &str = "lossy_";
/// The longest one boot may take (all cases three ways on TCG).
const BOOT_TIMEOUT: Duration = Duration::from_secs(1200);

/// One case's outcome: its name and lines.
pub(super) type Outcome = (String, Vec<String>);

/// Parses `split-peer`'s outcome file: `case NAME`, lines, `end NAME`.
pub(super) fn parse_outcomes(text: &str) -> Result<Vec<Outcome>, Error> {
    let mut out: Vec<Outcome> = Vec::new();
    let mut open: Option<Outcome> = None;
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("case ") {
            if open.is_some() {
                return Err(format!("case {name} starts inside another"));
            }
            open = Some((name.to_owned(), Vec::new()));
        } else if let Some(name) = line.strip_prefix("end ") {
            match open.take() {
                Some(o) if o.0 == name => out.push(o),
                _ => return Err(format!("`end {name}` without its case")),
            }
        } else {
            match open.as_mut() {
                Some(o) => o.1.push(line.to_owned()),
                None => return Err(format!("a line outside any case: {line:?}")),
            }
        }
    }
    match open {
        Some(o) => Err(format!("case {} does not end", o.0)),
        None => Ok(out),
    }
}

pub(super) fn read_outcomes(path: &Path) -> Result<Vec<Outcome>, Error> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the outcomes {}: {e}", path.display()))?;
    parse_outcomes(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// The outcome with both sides on rxe0 as a run of this step wrote it, committed: what
/// the step's own baseline must equal, and what both sides emulated are compared with
/// where no VM runs (`super::split_emu`).
pub(super) const GOLDEN: &str = "tests/data/split-both-rxe.txt";

/// Prints `diff -u` of two outcome texts of one case (written under `dir`).
fn print_diff(dir: &Path, case: &str, base: &[String], got: &[String], label: &str) {
    let a = dir.join(format!("{case}.both-rxe"));
    let b = dir.join(format!("{case}.{label}"));
    let text = |l: &[String]| l.iter().map(|s| format!("{s}\n")).collect::<String>();
    if std::fs::write(&a, text(base)).is_err() || std::fs::write(&b, text(got)).is_err() {
        return;
    }
    let out = Command::new("diff").arg("-u").arg(&a).arg(&b).output();
    match out {
        Ok(o) => eprint!("{}", String::from_utf8_lossy(&o.stdout)),
        Err(e) => eprintln!("xtask split: cannot run diff: {e}"),
    }
}

/// The names of the cases of `got` that differ from `base` (each printed as a diff);
/// every case of `base` selected by `only` must be in `got`.
pub(super) fn compare(
    base: &[Outcome],
    got: &[Outcome],
    only: Option<&str>,
    label: &str,
    dir: &Path,
) -> Vec<String> {
    let mut bad = Vec::new();
    for (name, lines) in base
        .iter()
        .filter(|(n, _)| only.is_none_or(|p| n.starts_with(p)))
    {
        match got.iter().find(|(n, _)| n == name) {
            None => {
                eprintln!("xtask split: {label}: case {name} has no outcome");
                bad.push(format!("{name} ({label}: missing)"));
            }
            Some((_, g)) if g != lines => {
                eprintln!("xtask split: {label}: case {name} differs from both on rxe:");
                print_diff(dir, name, lines, g, label);
                bad.push(format!("{name} ({label})"));
            }
            Some(_) => {}
        }
    }
    bad
}

/// One boot: its folder, topology, fabric flags, and what runs.
struct Boot<'a> {
    dir: PathBuf,
    topology: PathBuf,
    fabric_args: Vec<String>,
    /// Run the baseline (both sides in the VM) first.
    baseline: bool,
    /// Only the cases starting with this.
    cases: Option<&'a str>,
}

impl Boot<'_> {
    fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn cases_arg(&self) -> Vec<String> {
        self.cases
            .map(|c| vec!["--cases".to_owned(), c.to_owned()])
            .unwrap_or_default()
    }
}

pub(super) fn peer_bin() -> PathBuf {
    root().join("target/debug/split-peer")
}

/// The host's `split-peer` as the emulated h1: passive, then active.
fn host_peer(boot: &Boot<'_>, fabric: &str, lib: &Path) -> Result<Child, Error> {
    let file = |name: &str| {
        let p = boot.file(name);
        std::fs::File::create(&p).map_err(|e| format!("cannot create {}: {e}", p.display()))
    };
    let mut c = Command::new(peer_bin());
    c.args(["--sides", "passive,active", "--listen"])
        .arg(format!("127.0.0.1:{HOST_PORT}"))
        .arg("--out")
        .arg(boot.file("emulated-active.txt"))
        .args(boot.cases_arg())
        .env("LD_LIBRARY_PATH", lib)
        .env("VERBS_EMU_FABRIC", fabric)
        .env("VERBS_EMU_HOST", HOST)
        .env("VERBS_EMU_TOPOLOGY", &boot.topology)
        .stdin(Stdio::null())
        .stdout(file("host.out")?)
        .stderr(file("host.err")?);
    eprintln!("xtask split: host (emulated {HOST}): {c:?}");
    c.spawn().map_err(|e| format!("cannot start {c:?}: {e}"))
}

/// The VM's shell script: the baseline (if asked), then active and passive against the
/// host.
fn vm_script(boot: &Boot<'_>) -> String {
    let q = |p: &Path| vm::sh_quote(&p.to_string_lossy());
    let peer = q(&peer_bin());
    let cases = boot.cases_arg().join(" ");
    let mut s = String::from("R=0\n");
    if boot.baseline {
        s.push_str(&format!(
            "{peer} --sides passive --listen 127.0.0.1:{VM_PORT} {cases} & S=$!\n\
             {peer} --sides active --connect 127.0.0.1:{VM_PORT} {cases} --out {out} || R=1\n\
             wait $S || R=1\n",
            out = q(&boot.file("both-rxe.txt")),
        ));
    }
    s.push_str(&format!(
        "{peer} --sides active,passive --connect 10.0.2.2:{HOST_PORT} {cases} --out {out} || R=1\nexit $R\n",
        out = q(&boot.file("rxe-active.txt")),
    ));
    s
}

/// Waits for the host's program (killing it after a minute) and returns its exit code.
fn finish_host(mut child: Child) -> Result<i32, Error> {
    let start = Instant::now();
    loop {
        if let Some(s) = child.try_wait().map_err(|e| format!("wait: {e}"))? {
            return Ok(s.code().unwrap_or(1));
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            return Err("the host's split-peer did not finish a minute after the VM".into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs one boot (see the module docs); returns the fabric's summary.
fn run_boot(boot: &Boot<'_>, lib: &Path) -> Result<String, Error> {
    let t = Instant::now();
    let err_path = boot.file("fabric.err");
    let err = std::fs::File::create(&err_path)
        .map_err(|e| format!("cannot create {}: {e}", err_path.display()))?;
    let mut c = Command::new(root().join("target/debug/verbs-emu-fabric"));
    c.arg("--topology")
        .arg(&boot.topology)
        .args(&boot.fabric_args)
        .arg("--pcap")
        .arg(boot.file("fabric.pcap"))
        .stderr(Stdio::from(err));
    let fabric = FabricProcess::start(c).map_err(|e| {
        format!(
            "{e}: {}",
            std::fs::read_to_string(&err_path).unwrap_or_default()
        )
    })?;
    let host = host_peer(boot, &fabric.socket, lib)?;
    let opts = VmOptions {
        timeout: BOOT_TIMEOUT,
        echo: true,
        fabric: Some(FabricNic {
            socket: boot.file("vm.sock"),
            ip: VM_IP.parse().expect("VM_IP is an address"),
            forward: vec![],
        }),
        ..VmOptions::default()
    };
    let script = vm_script(boot);
    eprintln!("xtask split: VM:\n{script}");
    let out = vm::run_in_vm(&["sh".into(), "-c".into(), script], &opts);
    let host_code = finish_host(host);
    let status = fabric.stop()?;
    let summary = std::fs::read_to_string(&err_path).unwrap_or_default();
    eprint!("{summary}");
    let host_err = std::fs::read_to_string(boot.file("host.err")).unwrap_or_default();
    let out = out?;
    let host_code = host_code?;
    if out.exit_code != 0 || host_code != 0 {
        return Err(format!(
            "split-peer failed: in the VM exit {}, on the host exit {host_code}; the host's stderr:\n{host_err}",
            out.exit_code
        ));
    }
    if !status.success() {
        return Err(format!("the fabric failed ({status}): {summary}"));
    }
    eprintln!(
        "xtask split: boot in {} done in {:.1} s (VM boot+setup {:.1} s)",
        boot.dir.display(),
        t.elapsed().as_secs_f64(),
        out.boot_time.unwrap_or_default().as_secs_f64()
    );
    Ok(summary)
}

/// Builds the emulator and `split-peer` (debug) and links the emulated libraries under
/// the names programs load; returns that folder (for `LD_LIBRARY_PATH`).
///
/// # Errors
/// A build or a link failed.
pub(super) fn build() -> Result<PathBuf, Error> {
    let mut build = cargo();
    build.args(["build", "-p", "emulator"]);
    super::common::run(build, "building the emulator (debug)")?;
    let mut build = cargo();
    build.args([
        "build",
        "-p",
        "workspace-tests",
        "--features",
        "hw",
        "--bin",
        "split-peer",
    ]);
    super::common::run(build, "building split-peer")?;
    super::common::link_emulated_libraries(
        &root().join("target/debug/libibverbs.so"),
        &root().join("target/emu/split-lib"),
    )
}

/// `cargo xtask test --wire`'s split step (see the module docs).
///
/// # Errors
/// A failing build, boot or program, a case whose outcome differs (named, with diffs),
/// or a stack that never retransmitted under loss.
pub fn run() -> Result<(), Error> {
    let start = Instant::now();
    vm::packages::ensure_installed(&[vm::packages::EMU_PACKAGES, vm::packages::TOOL_PACKAGES])?;
    let lib = build()?;
    let dir = root().join("target/split");
    let _ = std::fs::remove_dir_all(&dir);

    let plain = Boot {
        dir: dir.join("plain"),
        topology: root().join(TOPOLOGY),
        fabric_args: vec![
            "--qemu-stream".into(),
            dir.join("plain/vm.sock").to_string_lossy().into_owned(),
        ],
        baseline: true,
        cases: None,
    };
    let lossy_dir = dir.join("lossy");
    let lossy = Boot {
        topology: lossy_dir.join("topology.toml"),
        dir: lossy_dir,
        fabric_args: vec!["--seed".into(), "7".into()],
        baseline: false,
        cases: Some(LOSSY),
    };
    for d in [&plain.dir, &lossy.dir] {
        std::fs::create_dir_all(d).map_err(|e| format!("cannot create {}: {e}", d.display()))?;
    }
    std::fs::write(
        &lossy.topology,
        LOSSY_TOPOLOGY.replace("@SOCK@", &lossy.file("vm.sock").to_string_lossy()),
    )
    .map_err(|e| format!("cannot write {}: {e}", lossy.topology.display()))?;

    run_boot(&plain, &lib)?;
    let base = read_outcomes(&plain.file("both-rxe.txt"))?;
    // The baseline is what the committed outcome says (else rxe changed, or the cases
    // did: copy both-rxe.txt over it).
    let golden = read_outcomes(&root().join(GOLDEN))?;
    let mut bad = compare(&golden, &base, None, "both-rxe", &plain.dir);
    for (file, label) in [
        ("rxe-active.txt", "rxe-active"),
        ("emulated-active.txt", "emulated-active"),
    ] {
        let got = read_outcomes(&plain.file(file))?;
        bad.extend(compare(&base, &got, None, label, &plain.dir));
    }
    eprintln!(
        "xtask split: {} cases, both on rxe / rxe active, emulated passive / emulated active, rxe passive: {} differ",
        base.len(),
        bad.len()
    );

    run_boot(&lossy, &lib)?;
    for (file, label) in [
        ("rxe-active.txt", "lossy-rxe-active"),
        ("emulated-active.txt", "lossy-emulated-active"),
    ] {
        let got = read_outcomes(&lossy.file(file))?;
        bad.extend(compare(&base, &got, Some(LOSSY), label, &lossy.dir));
    }
    let frames = roce_frames(&lossy.file("fabric.pcap"))?;
    // Every host's MAC is `02:00` and its address, as the VM's NIC is given.
    let mac = |ip: &str| {
        FabricNic {
            socket: PathBuf::new(),
            ip: ip.parse().expect("a constant address"),
            forward: vec![],
        }
        .mac()
    };
    let (vm_again, h1_again) = (resent(&frames, &mac(VM_IP)), resent(&frames, &mac(HOST_IP)));
    eprintln!(
        "xtask split: lossy capture: {} RoCE frames; data packets sent again: {vm_again} by rxe in the VM, {h1_again} by the emulated h1",
        frames.len()
    );
    let lossy_cases = base.iter().filter(|(n, _)| n.starts_with(LOSSY)).count();
    eprintln!(
        "xtask split: done in {:.1} s: {} cases three ways, {lossy_cases} again both ways under 2% loss",
        start.elapsed().as_secs_f64(),
        base.len()
    );
    if !bad.is_empty() {
        return Err(format!(
            "split cases whose outcome differs from both sides on rxe: {}",
            bad.join(", ")
        ));
    }
    if vm_again == 0 || h1_again == 0 {
        return Err(format!(
            "with 2% loss both stacks should have retransmitted: the VM {vm_again}, h1 {h1_again}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_parse_in_blocks_and_refuse_broken_ones() {
        let o = parse_outcomes("case x\nl1\nl2\nend x\ncase y\nend y\n").unwrap();
        assert_eq!(
            o,
            vec![
                ("x".to_owned(), vec!["l1".to_owned(), "l2".to_owned()]),
                ("y".to_owned(), vec![])
            ]
        );
        assert!(parse_outcomes("case x\nl1\n").is_err());
        assert!(parse_outcomes("l1\n").is_err());
        assert!(parse_outcomes("case x\ncase y\nend y\nend x\n").is_err());
        assert!(parse_outcomes("case x\nend y\n").is_err());
    }

    #[test]
    fn compare_names_differing_and_missing_cases() {
        let dir = std::env::temp_dir().join(format!("xtask-split-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let base = parse_outcomes("case a\n1\nend a\ncase lossy_b\n2\nend lossy_b\n").unwrap();
        let same = base.clone();
        assert!(compare(&base, &same, None, "x", &dir).is_empty());
        let other = parse_outcomes("case a\n3\nend a\n").unwrap();
        assert_eq!(
            compare(&base, &other, None, "x", &dir),
            ["a (x)", "lossy_b (x: missing)"]
        );
        assert_eq!(
            compare(&base, &other, Some("lossy_"), "x", &dir),
            ["lossy_b (x: missing)"]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_vm_runs_the_baseline_then_both_sides_against_the_host() {
        let boot = Boot {
            dir: "/w/target/split/plain".into(),
            topology: "/t".into(),
            fabric_args: vec![],
            baseline: true,
            cases: None,
        };
        let s = vm_script(&boot);
        assert!(
            s.contains("--sides passive --listen 127.0.0.1:18611  & S=$!"),
            "{s}"
        );
        assert!(
            s.contains("--out '/w/target/split/plain/both-rxe.txt' || R=1"),
            "{s}"
        );
        assert!(
            s.contains("--sides active,passive --connect 10.0.2.2:18610  --out"),
            "{s}"
        );
        let lossy = Boot {
            baseline: false,
            cases: Some(LOSSY),
            ..boot
        };
        let s = vm_script(&lossy);
        assert!(!s.contains("127.0.0.1"), "{s}");
        assert!(s.contains("--cases lossy_ --out"), "{s}");
        let parsed = Command::new("sh").args(["-n", "-c", &s]).status().unwrap();
        assert!(parsed.success());
    }
}
