//! A scenario on the simulator for the `scenario` tool: the runner's fabric and drive
//! loop, plus what the tool adds — a progress bar, capture, and replaying a pcap in
//! place of the senders (the receivers built exactly as for a normal run).

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use backend_sim::pcap::PcapFile;
use backend_sim::{CaptureFilter, HostId, PortId, ReplayOptions, Sim};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::model::Scenario;
use crate::outcome::Outcome;
use crate::runner::drive::{build, AsReceived, Clock, Recorder, RunError};
use crate::runner::sim::{backend, finish, SimHosts};

/// Where replayed frames come from.
#[derive(Debug, Clone)]
pub enum ReplaySource {
    /// A pcap file, as recorded (link types the simulator replays).
    File(PathBuf),
    /// Records already converted (e.g. re-addressed datagrams of a foreign capture).
    Records(PcapFile),
    /// A capture of this scenario's fabric: every frame is sent again, in the order it
    /// was recorded and at the virtual time it was, from the host whose MAC is its
    /// source (the given host when none is); see [`backend_sim::Fabric::replay_by_source`].
    CaptureBySource(PathBuf),
}

/// How to run.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Capture every frame the fabric carries to this pcap.
    pub capture: Option<PathBuf>,
    /// Instead of running the senders, replay these frames as if host `.1` (an index
    /// into the scenario's hosts) sent them.
    pub replay: Option<(ReplaySource, usize)>,
    /// Show a progress bar (on stderr, only when it is a terminal).
    pub progress: bool,
}

/// A finished run.
#[derive(Debug)]
pub struct Run {
    /// What the receivers made of it (`sent` is empty for a replay).
    pub outcome: Outcome,
    /// The simulation afterwards (statistics, trace hash).
    pub sim: Sim,
    /// The scenario's hosts in the simulation.
    pub hosts: Vec<HostId>,
    /// Their ports.
    pub ports: Vec<PortId>,
    /// Frames the replay scheduled (0 when senders ran).
    pub replayed_frames: usize,
    /// Wall time of the run (never part of the compared results).
    pub wall: Duration,
}

/// The simulator's clock, ticking a progress bar with the fabric's transmitted frames.
struct ProgressClock<'a> {
    sim: &'a Sim,
    bar: Option<ProgressBar>,
    calls: Cell<u64>,
}

impl ProgressClock<'_> {
    fn tick(&self) {
        let n = self.calls.get().wrapping_add(1);
        self.calls.set(n);
        if n & 8191 == 0 {
            if let Some(bar) = &self.bar {
                bar.set_position(self.sim.with_fabric(|f| f.stats().transmitted));
            }
        }
    }
}

impl Clock for ProgressClock<'_> {
    fn now(&self) -> u64 {
        self.tick();
        self.sim.now()
    }
    fn step(&self) -> bool {
        self.tick();
        self.sim.step()
    }
    fn advance(&self, ns: u64) {
        self.sim.run_for(ns);
    }
}

/// Frames the senders of `s` put on the wire, estimated from heap and packet sizes
/// (the progress bar's length).
pub fn estimated_packets(s: &Scenario) -> u64 {
    s.senders
        .iter()
        .map(|snd| {
            let per = (snd.packet_size & !7)
                .saturating_sub(crate::model::SPEAD_OVERHEAD + 32)
                .max(1);
            let receivers_kinds = s
                .receivers
                .iter()
                .filter(|r| r.groups.contains(&snd.group))
                .map(|r| r.transport == crate::model::Transport::Ud)
                .collect::<std::collections::BTreeSet<_>>()
                .len()
                .max(1) as u64;
            u64::from(snd.heaps) * snd.heap_size.div_ceil(per) as u64 * receivers_kinds
        })
        .sum()
}

/// Runs `s` on a fresh simulator.
///
/// # Errors
/// As the runner: an invalid scenario, an unsupported transport, a failing transport,
/// or a capture or replay file that cannot be written or read.
pub fn run(s: &Scenario, opts: &Options) -> Result<Run, RunError> {
    run_with(s, opts, &mut AsReceived)
}

/// As [`run`], with the receivers' heaps recorded by `recorder`.
///
/// # Errors
/// As [`run`].
pub fn run_with(
    s: &Scenario,
    opts: &Options,
    recorder: &mut dyn Recorder,
) -> Result<Run, RunError> {
    let _span = crate::runner::sim::run_span(s).entered();
    let started = Instant::now();
    let SimHosts {
        sim,
        hosts,
        ports,
        macs,
    } = SimHosts::new(s)?;
    if let Some(path) = &opts.capture {
        sim.capture_to_file(path, CaptureFilter::All)
            .map_err(|e| RunError::File(format!("{}: {e}", path.display())))?;
    }
    let mut drive = build(s, |h| sim.verbs(hosts[h]), |h| s.hosts[h].ip, |h| macs[h])?;
    let mut replayed_frames = 0;
    if let Some((source, from)) = &opts.replay {
        drive.senders.clear();
        let port = *ports
            .get(*from)
            .ok_or_else(|| backend(format!("replay from host {from}, which does not exist")))?;
        replayed_frames = match source {
            ReplaySource::File(path) => {
                sim.with_fabric(|f| f.replay_file(port, path, ReplayOptions::default()))
                    .map_err(backend)?
                    .frames
            }
            ReplaySource::Records(pcap) => {
                sim.with_fabric(|f| f.replay(port, pcap, ReplayOptions::default()))
                    .map_err(backend)?
                    .frames
            }
            ReplaySource::CaptureBySource(path) => {
                let pcap = PcapFile::read(path).map_err(backend)?;
                // The recorded times are the run's virtual times: start where it did.
                let opts = ReplayOptions {
                    start_at: pcap.records.first().map(|r| r.ts_ns),
                };
                sim.with_fabric(|f| f.replay_by_source(port, &pcap, opts))
                    .map_err(backend)?
                    .frames
            }
        };
    }
    let bar = (opts.progress && opts.replay.is_none()).then(|| {
        let bar = progress_bar(estimated_packets(s), "frames");
        bar.set_message(s.name.clone());
        bar
    });
    let clock = ProgressClock {
        sim: &sim,
        bar,
        calls: Cell::new(0),
    };
    let mut outcome = drive.run_with(s, &clock, 64, recorder)?;
    if let Some(bar) = &clock.bar {
        bar.finish_and_clear();
    }
    finish(&sim, &mut outcome);
    if opts.capture.is_some() {
        sim.finish_capture().map_err(backend)?;
    }
    Ok(Run {
        outcome,
        sim,
        hosts,
        ports,
        replayed_frames,
        wall: started.elapsed(),
    })
}

/// Peak resident memory of this process (VmHWM from /proc/self/status), in KiB.
pub fn peak_rss_kib() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Seconds this process has spent on a CPU, user and system (`/proc/self/stat`'s utime
/// and stime, in the kernel's fixed 100 Hz USER_HZ ticks), or None off Linux. On a
/// shared machine this, unlike wall time, does not count time other processes had.
pub fn cpu_seconds() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) may hold spaces; the fields after it are plain.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i)?.parse::<u64>().ok();
    // utime and stime are fields 14 and 15; `rest` starts at field 3.
    Some((ticks(11)? + ticks(12)?) as f64 / 100.0)
}

/// A path's parent directory, created if missing.
///
/// # Errors
/// The I/O error of creating it.
pub fn ensure_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}

/// A progress bar on stderr (drawn only when stderr is a terminal) counting `len` `unit`.
pub fn progress_bar(len: u64, unit: &str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr_with_hz(4));
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{{spinner}} {{msg}} [{{bar:40}}] {{pos}}/{{len}} {unit} ({{elapsed}}, eta {{eta}})"
        ))
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    bar
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_reads_and_never_runs_backwards() {
        let a = cpu_seconds().expect("/proc/self/stat on Linux");
        let b = cpu_seconds().expect("/proc/self/stat on Linux");
        assert!(a >= 0.0 && b >= a, "{a} then {b}");
    }
}
