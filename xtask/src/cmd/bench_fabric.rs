//! `cargo xtask bench fabric [--pairs 1,2,4] [--runs N]`: what one fabric process
//! (`verbs-emu-fabric`, release build) carries. For each count of pairs, a topology of
//! that many sending hosts `s1..sN` (10.100.0.1..N) and receiving hosts `r1..rN`
//! (10.100.0.101..), all mlx5; sender `i` runs our `spead-send` on its emulated NIC (a
//! RAW_PACKET QP, as spead2's writer) to the group 239.20.0.i, which receiver `i`'s
//! `spead-recv` (spead2's RAW_PACKET reader) joins; every frame crosses the fabric once
//! (multicast always does). The senders start together and send as fast as their NICs
//! and the fabric take the frames.
//!
//! Each run reads the fabric's CPU time (`/proc/PID/stat`: user + system) before the
//! senders start and after they end, the frames it carried from its summary, and checks
//! that every receiver got every heap. The table gives frames per second of wall time (on
//! a machine with fewer cores than processes, all of them share the cores) and frames per
//! CPU-second of the fabric: what one fabric process carries on one core of this machine.
//! Dividing it by what one sending host puts out alone (the one-pair run's frames per
//! second) gives how many such hosts, sending at once, one fabric process serves before a
//! second one (joined by VXLAN, docs/emulator.md) is needed.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::common::{root, Error};
use super::fabric::FabricProcess;
use crate::vm;

/// Heaps each sender sends, and their payload: 40,000 heaps of 64 KiB in 1472-byte
/// packets are about 1.8 million frames of 1,514 bytes (2.6 GB of payload, one heap sent
/// again and again) per sender.
const HEAPS: &str = "40000";
const HEAP_SIZE: &str = "65536";
/// The longest one run may take.
const RUN_TIMEOUT: Duration = Duration::from_secs(600);
/// How long a receiver may take to end by itself after the senders have.
const STOP_WAIT: Duration = Duration::from_secs(10);

/// One run's figures.
#[derive(Debug, Clone, Copy)]
struct Run {
    pairs: usize,
    frames: u64,
    /// Frames the receivers' spead2 readers delivered (the rest their NICs dropped, the
    /// receive rings being full: the senders outpace them).
    received: u64,
    wall_s: f64,
    fabric_cpu_s: f64,
}

impl Run {
    fn frames_per_s(&self) -> f64 {
        self.frames as f64 / self.wall_s
    }

    fn frames_per_cpu_s(&self) -> f64 {
        self.frames as f64 / self.fabric_cpu_s
    }
}

/// Runs the benchmark for each count in `pairs`, `runs` times each, and prints its table.
///
/// # Errors
/// A build, a program or a check failing, named.
pub fn run(pairs: &[usize], runs: u32) -> Result<(), Error> {
    vm::packages::ensure_installed(&[vm::packages::EMU_PACKAGES])?;
    super::common::build_release(
        &[
            "-p",
            "emulator",
            "-p",
            "spead-tools",
            "--features",
            "spead-tools/hw",
            "--bins",
        ],
        "the emulated library, the fabric and the SPEAD tools",
    )?;
    let release = root().join("target/release");
    let lib = super::common::link_emulated_libraries(
        &release.join("libibverbs.so"),
        &root().join("target/emu/release-lib"),
    )?;
    let dir = root().join("target/bench-fabric");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let mut all = Vec::new();
    for r in 1..=runs {
        for &n in pairs {
            eprintln!("xtask bench fabric: run {r} of {runs}, {n} pairs");
            let run = one_run(&release, &lib, &dir, n)?;
            eprintln!("xtask bench fabric: {run:?}");
            all.push(run);
        }
    }
    print!("{}", table(pairs, &all));
    Ok(())
}

/// The topology of `n` pairs.
fn topology(n: usize) -> String {
    let mut t = String::new();
    for (prefix, base) in [("s", 0), ("r", 100)] {
        for i in 1..=n {
            let _ = writeln!(
                t,
                "[[host]]\nname = \"{prefix}{i}\"\nip = \"10.100.0.{}\"\npersonality = \"mlx5\"\n",
                base + i
            );
        }
    }
    t
}

fn one_run(release: &Path, lib: &Path, dir: &Path, n: usize) -> Result<Run, Error> {
    let topo = dir.join(format!("pairs-{n}.toml"));
    std::fs::write(&topo, topology(n))
        .map_err(|e| format!("cannot write {}: {e}", topo.display()))?;
    let err_file = |name: &str| -> Result<(PathBuf, std::fs::File), Error> {
        let p = dir.join(format!("{name}.err"));
        let f =
            std::fs::File::create(&p).map_err(|e| format!("cannot create {}: {e}", p.display()))?;
        Ok((p, f))
    };
    let (fabric_err, f) = err_file("fabric")?;
    let mut c = Command::new(release.join("verbs-emu-fabric"));
    c.arg("--topology").arg(&topo).stderr(f);
    let fabric = FabricProcess::start(c)?;
    let program = |tool: &str, host: &str| {
        let mut c = Command::new(release.join(tool));
        c.env("LD_LIBRARY_PATH", lib)
            .env("VERBS_EMU_FABRIC", &fabric.socket)
            .env("VERBS_EMU_TOPOLOGY", &topo)
            .env("VERBS_EMU_HOST", host)
            .stdout(Stdio::null());
        c
    };
    let group = |i: usize| format!("ibv:239.20.0.{i}:7148");
    let mut receivers = Vec::new();
    for i in 1..=n {
        let (p, f) = err_file(&format!("r{i}"))?;
        let ip = format!("10.100.0.{}", 100 + i);
        let mut c = program("spead-recv", &format!("r{i}"));
        c.args(["--backend", "hw", "--ibv-interface", &ip, &group(i)])
            .stderr(f);
        let child = c
            .spawn()
            .map_err(|e| format!("cannot start spead-recv: {e}"))?;
        receivers.push((child, p, format!("receiving on {}", group(i))));
    }
    for (child, p, ready) in &mut receivers {
        wait_for_line(child, p, ready)?;
    }
    let cpu_before = cpu_seconds(fabric.pid())?;
    let begin = Instant::now();
    let mut senders = Vec::new();
    for i in 1..=n {
        let (p, f) = err_file(&format!("s{i}"))?;
        let ip = format!("10.100.0.{i}");
        let mut c = program("spead-send", &format!("s{i}"));
        c.args(["--heaps", HEAPS, "--heap-size", HEAP_SIZE])
            .args(["--backend", "hw", "--ibv-interface", &ip, &group(i)])
            .stderr(f);
        let child = c
            .spawn()
            .map_err(|e| format!("cannot start spead-send: {e}"))?;
        senders.push((child, p));
    }
    let mut sent = 0;
    for (child, p) in &mut senders {
        let text = finish(child, p, "spead-send")?;
        sent += text
            .trim()
            .strip_prefix("spead-send: ")
            .and_then(|t| t.split(' ').next())
            .and_then(|t| t.parse::<u64>().ok())
            .ok_or_else(|| format!("spead-send's summary does not parse: {text}"))?;
    }
    let wall_s = begin.elapsed().as_secs_f64();
    let fabric_cpu_s = cpu_seconds(fabric.pid())? - cpu_before;
    // A receiver ends at the stop heap; one whose NIC dropped it (its receive ring was
    // full) is told to stop with SIGINT, on which spead-recv prints its counters too.
    let mut received = 0;
    for (child, p, _) in &mut receivers {
        let quiet = Instant::now();
        while child.try_wait().ok().flatten().is_none() && quiet.elapsed() < STOP_WAIT {
            std::thread::sleep(Duration::from_millis(20));
        }
        if child.try_wait().ok().flatten().is_none() {
            let _ = Command::new("kill")
                .arg("-INT")
                .arg(child.id().to_string())
                .status();
        }
        let text = finish(child, p, "spead-recv")?;
        received += text
            .lines()
            .filter_map(|l| l.split_once(" frames, "))
            .find_map(|(_, rest)| rest.split(' ').next()?.parse::<u64>().ok())
            .ok_or_else(|| format!("spead-recv's counters do not parse: {text}"))?;
    }
    fabric.stop()?;
    let summary = std::fs::read_to_string(&fabric_err)
        .map_err(|e| format!("cannot read {}: {e}", fabric_err.display()))?;
    let frames = summary
        .lines()
        .filter_map(|l| l.strip_prefix("verbs-emu-fabric: "))
        .find_map(|l| l.split_once(" frames from hosts"))
        .and_then(|(n, _)| n.parse::<u64>().ok())
        .ok_or_else(|| format!("no summary from the fabric: {summary}"))?;
    if frames < sent {
        return Err(format!(
            "the fabric carried {frames} frames but the senders sent {sent}"
        ));
    }
    Ok(Run {
        pairs: n,
        frames,
        received,
        wall_s,
        fabric_cpu_s,
    })
}

/// Waits until the file `p` (a child's stderr) holds `line`; fails if the child exits
/// first or it takes longer than [`RUN_TIMEOUT`].
fn wait_for_line(child: &mut Child, p: &Path, line: &str) -> Result<(), Error> {
    let begin = Instant::now();
    loop {
        let text = std::fs::read_to_string(p).unwrap_or_default();
        if text.contains(line) {
            return Ok(());
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("exited ({status}) before {line:?}: {text}"));
        }
        if begin.elapsed() > RUN_TIMEOUT {
            let _ = child.kill();
            return Err(format!("never printed {line:?}: {text}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits for `child` to exit with 0 (at most [`RUN_TIMEOUT`]) and returns its stderr.
fn finish(child: &mut Child, p: &Path, what: &str) -> Result<String, Error> {
    let begin = Instant::now();
    let status = loop {
        if let Some(s) = child
            .try_wait()
            .map_err(|e| format!("waiting for {what}: {e}"))?
        {
            break s;
        }
        if begin.elapsed() > RUN_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("{what} did not finish within {RUN_TIMEOUT:?}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let text = std::fs::read_to_string(p).unwrap_or_default();
    if status.success() {
        Ok(text)
    } else {
        Err(format!("{what} failed ({status}): {text}"))
    }
}

/// User plus system CPU time of process `pid`, in seconds (`/proc/PID/stat` fields 14
/// and 15, in clock ticks of 1/100 s, Linux's `USER_HZ` on every architecture we build
/// for).
fn cpu_seconds(pid: u32) -> Result<f64, Error> {
    let p = format!("/proc/{pid}/stat");
    let stat = std::fs::read_to_string(&p).map_err(|e| format!("cannot read {p}: {e}"))?;
    // The command name (field 2) is in parentheses and may hold spaces: count after it.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .ok_or_else(|| format!("{p} does not parse: {stat}"))?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| -> Result<u64, Error> {
        f.get(i)
            .and_then(|t| t.parse().ok())
            .ok_or_else(|| format!("{p} does not parse: {stat}"))
    };
    // After the name, field 3 (state) is index 0: utime (14) is 11, stime (15) is 12.
    Ok((ticks(11)? + ticks(12)?) as f64 / 100.0)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The table: per count of pairs, every run and the medians; then the number of hosts one
/// fabric process serves.
fn table(pairs: &[usize], all: &[Run]) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "| pairs | frames per run | received | wall s | frames/s (wall) | fabric CPU s | frames per fabric CPU-second |"
    );
    let _ = writeln!(t, "| --- | --- | --- | --- | --- | --- | --- |");
    // Per count of pairs: the median frames per fabric CPU-second.
    let mut per_cpu: Vec<(usize, f64)> = Vec::new();
    let mut one_host = None;
    for &n in pairs {
        let runs: Vec<&Run> = all.iter().filter(|r| r.pairs == n).collect();
        if runs.is_empty() {
            continue;
        }
        let list = |f: fn(&Run) -> f64, digits: usize| {
            runs.iter()
                .map(|r| format!("{:.digits$}", f(r)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let med = |f: fn(&Run) -> f64| median(runs.iter().map(|r| f(r)).collect());
        let _ = writeln!(
            t,
            "| {n} | {} | {} | {} | {} (median {:.0}) | {} | {} (median {:.0}) |",
            runs[0].frames,
            list(|r| r.received as f64 / r.frames as f64 * 100.0, 1) + " %",
            list(|r| r.wall_s, 2),
            list(Run::frames_per_s, 0),
            med(Run::frames_per_s),
            list(|r| r.fabric_cpu_s, 2),
            list(Run::frames_per_cpu_s, 0),
            med(Run::frames_per_cpu_s),
        );
        per_cpu.push((n, med(Run::frames_per_cpu_s)));
        if n == 1 {
            one_host = Some(med(Run::frames_per_s));
        }
    }
    // The least of the medians: the fabric spends more CPU per frame when it shares the
    // cores with more processes (it looks for frames while the senders wait for a core).
    let least = per_cpu.iter().copied().min_by(|a, b| a.1.total_cmp(&b.1));
    if let (Some(host), Some((n, cap))) = (one_host, least) {
        let _ = writeln!(
            t,
            "\none fabric process on one core: {cap:.0} frames/s (the least median, at {n} \
             pairs); one sending host alone: {host:.0} frames/s; hosts sending at once that \
             one fabric serves: {:.1}",
            cap / host
        );
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_topology_names_senders_and_receivers() {
        let t = topology(2);
        assert_eq!(t.matches("[[host]]").count(), 4);
        assert!(t.contains("name = \"s2\"\nip = \"10.100.0.2\""));
        assert!(t.contains("name = \"r1\"\nip = \"10.100.0.101\""));
    }

    #[test]
    fn the_table_gives_hosts_per_fabric_from_the_one_pair_rate() {
        let runs = [
            Run {
                pairs: 1,
                frames: 1000,
                received: 1000,
                wall_s: 1.0,
                fabric_cpu_s: 0.25,
            },
            Run {
                pairs: 2,
                frames: 2000,
                received: 1500,
                wall_s: 2.0,
                fabric_cpu_s: 0.4,
            },
        ];
        let t = table(&[1, 2], &runs);
        assert!(t.contains(
            "| 1 | 1000 | 100.0 % | 1.00 | 1000 (median 1000) | 0.25 | 4000 (median 4000) |"
        ));
        assert!(
            t.contains("hosts sending at once that one fabric serves: 4.0"),
            "{t}"
        );
    }
}
