//! The split conformance cases with both sides emulated, where no VM runs (part of
//! `cargo xtask test --backend emu`): two `split-peer`s on the host as two emulated rxe
//! hosts of one fabric, the passive as h1 and the active as h3, whose outcome must equal
//! the committed outcome of both sides on real rxe (`tests/data/split-both-rxe.txt`,
//! written by the split step of `cargo xtask test --wire`, which checks it stays true).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::common::{root, Error};
use super::fabric::FabricProcess;
use super::split::{build, compare, peer_bin, read_outcomes, GOLDEN};

/// Two rxe hosts on one switch.
const TOPOLOGY: &str = r#"[[host]]
name = "h1"
ip = "10.100.0.1"
personality = "rxe"

[[host]]
name = "h3"
ip = "10.100.0.3"
personality = "rxe"
"#;
/// The passive side's control port (host loopback).
const PORT: u16 = 18612;
/// The longest the two programs may take.
const TIMEOUT: Duration = Duration::from_secs(300);

/// One side as emulated `host`, its output in `dir`.
fn side(args: &[&str], host: &str, env: (&Path, &str, &Path), dir: &Path) -> Result<Child, Error> {
    let (lib, fabric, topology) = env;
    let file = |ext: &str| {
        let p = dir.join(format!("{host}.{ext}"));
        std::fs::File::create(&p).map_err(|e| format!("cannot create {}: {e}", p.display()))
    };
    let mut c = Command::new(peer_bin());
    c.args(args)
        .env("LD_LIBRARY_PATH", lib)
        .env("VERBS_EMU_FABRIC", fabric)
        .env("VERBS_EMU_HOST", host)
        .env("VERBS_EMU_TOPOLOGY", topology)
        .stdin(Stdio::null())
        .stdout(file("out")?)
        .stderr(file("err")?);
    eprintln!("xtask split (emulated): {host}: {c:?}");
    c.spawn().map_err(|e| format!("cannot start {c:?}: {e}"))
}

/// Waits for both programs until the deadline, then kills what is left; their exit codes.
fn wait_both(mut kids: [Child; 2]) -> Result<[i32; 2], Error> {
    let start = Instant::now();
    let mut codes = [None, None];
    while codes.iter().any(Option::is_none) {
        for (k, c) in kids.iter_mut().zip(codes.iter_mut()) {
            if c.is_none() {
                if let Some(s) = k.try_wait().map_err(|e| format!("wait: {e}"))? {
                    *c = Some(s.code().unwrap_or(1));
                }
            }
        }
        if start.elapsed() > TIMEOUT {
            for k in &mut kids {
                let _ = k.kill();
                let _ = k.wait();
            }
            return Err(format!(
                "the split cases (both emulated) did not finish within {} s",
                TIMEOUT.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok([codes[0].unwrap_or(1), codes[1].unwrap_or(1)])
}

/// Runs every split case with both sides emulated and compares with [`GOLDEN`].
///
/// # Errors
/// A build, the fabric or a program failed, or an outcome differs (printed as diffs).
pub fn run() -> Result<(), Error> {
    let t = Instant::now();
    let lib = build()?;
    let dir = root().join("target/split/emulated");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let topology = dir.join("topology.toml");
    std::fs::write(&topology, TOPOLOGY)
        .map_err(|e| format!("cannot write {}: {e}", topology.display()))?;
    let err_path = dir.join("fabric.err");
    let err = std::fs::File::create(&err_path)
        .map_err(|e| format!("cannot create {}: {e}", err_path.display()))?;
    let mut c = Command::new(root().join("target/debug/verbs-emu-fabric"));
    c.arg("--topology").arg(&topology).stderr(Stdio::from(err));
    let fabric = FabricProcess::start(c)?;
    let out = dir.join("both-emulated.txt");
    let listen = format!("127.0.0.1:{PORT}");
    let out_s = out.to_string_lossy().into_owned();
    let env = (lib.as_path(), fabric.socket.as_str(), topology.as_path());
    let mut passive = side(
        &["--sides", "passive", "--listen", &listen],
        "h1",
        env,
        &dir,
    )?;
    let active = side(
        &["--sides", "active", "--connect", &listen, "--out", &out_s],
        "h3",
        env,
        &dir,
    );
    let active = match active {
        Ok(a) => a,
        Err(e) => {
            let _ = passive.kill();
            let _ = passive.wait();
            return Err(e);
        }
    };
    let codes = wait_both([passive, active]);
    let status = fabric.stop()?;
    let codes = codes?;
    if codes != [0, 0] || !status.success() {
        let read = |n: &str| std::fs::read_to_string(dir.join(n)).unwrap_or_default();
        return Err(format!(
            "the split cases (both emulated) failed: passive exit {}, active exit {}, fabric {status}\n--- h1:\n{}--- h3:\n{}",
            codes[0],
            codes[1],
            read("h1.err"),
            read("h3.err")
        ));
    }
    let golden = read_outcomes(&root().join(GOLDEN))?;
    let got = read_outcomes(&out)?;
    let bad = compare(&golden, &got, None, "both-emulated", &dir);
    eprintln!(
        "xtask split (emulated): {} cases, both sides emulated, in {:.1} s: {} differ from {GOLDEN}",
        golden.len(),
        t.elapsed().as_secs_f64(),
        bad.len()
    );
    if bad.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "split cases whose outcome both emulated differs from both on rxe: {}",
            bad.join(", ")
        ))
    }
}
