//! `scenario demo`: the default scenario (corpus/demo.toml) on the simulator, its table,
//! pcap and plot, then the pcap replayed through the same receivers on a fresh fabric.
//!
//! What the replay shows: a fresh simulation with the same hosts, seed and fault plan,
//! the same receivers built by the same code with the same configuration, and no
//! senders; the captured frames are transmitted from the sender's port at their recorded
//! times. For every receiver the heaps it delivers — heap counter, complete or not,
//! bytes received and (for complete heaps) the payload digest, in delivery order — and
//! its packet counters (received, accepted, dropped by cause) must equal the original
//! run's. The capture holds every frame as its sender put it on the wire (before the
//! link faults; a buggy sender's corrupted payload included); the replay sends the frames
//! again in the captured order, each from its source host at its recorded virtual time
//! ([`backend_sim::Fabric::replay_by_source`]). Every link draws its faults from streams
//! of its own (one per link and fault kind, from the seed), so the same frames crossing
//! a link in the same order are lost, duplicated, corrupted and delayed alike, however
//! many senders share the fabric.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::simrun::{self, Options, ReplaySource, Run};
use super::{svg, table};
use crate::invariants::check;
use crate::model::Scenario;
use crate::outcome::ReceiverReport;
use crate::runner::drive::RunError;

/// The default scenario, as committed in `scenarios/corpus/demo.toml`.
pub const DEMO_TOML: &str = include_str!("../../corpus/demo.toml");

/// The default scenario with `seed` (if given) in place of the file's.
///
/// # Errors
/// A parse error of the embedded file (caught by its test).
pub fn scenario(seed: Option<u64>) -> Result<Scenario, RunError> {
    let mut s = Scenario::from_toml(DEMO_TOML)?;
    if let Some(seed) = seed {
        s.seed = seed;
    }
    Ok(s)
}

/// What one receiver delivered, as the replay compares it.
pub fn fingerprint(rep: &ReceiverReport) -> Vec<(u64, bool, u64, Option<u64>)> {
    rep.heaps
        .iter()
        .map(|h| (h.cnt, h.complete, h.received, h.digest))
        .collect()
}

/// Per receiver: does the replay deliver the same heaps with the same counters?
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comparison {
    /// Receiver index.
    pub receiver: usize,
    /// Same heaps (counter, completeness, bytes, digest) in the same order.
    pub same_heaps: bool,
    /// Same packets received, accepted and dropped by cause.
    pub same_counters: bool,
    /// Complete / incomplete heaps, original and replay.
    pub original: (usize, usize),
    /// As `original`, for the replay.
    pub replay: (usize, usize),
}

fn counts(rep: &ReceiverReport) -> (usize, usize) {
    let c = rep.heaps.iter().filter(|h| h.complete).count();
    (c, rep.heaps.len() - c)
}

/// Compares two runs receiver by receiver.
pub fn compare(a: &[ReceiverReport], b: &[ReceiverReport]) -> Vec<Comparison> {
    a.iter()
        .zip(b)
        .enumerate()
        .map(|(r, (x, y))| Comparison {
            receiver: r,
            same_heaps: fingerprint(x) == fingerprint(y),
            same_counters: x.packets_received == y.packets_received
                && x.packets_accepted == y.packets_accepted
                && x.dropped == y.dropped,
            original: counts(x),
            replay: counts(y),
        })
        .collect()
}

/// Everything the demo did.
#[derive(Debug)]
pub struct Demo {
    /// The scenario run.
    pub scenario: Scenario,
    /// The original run.
    pub run: Run,
    /// The replay of its pcap.
    pub replay: Run,
    /// Receiver by receiver.
    pub comparison: Vec<Comparison>,
    /// The report text (deterministic: no wall-clock values).
    pub text: String,
    /// Where the pcap went.
    pub pcap: PathBuf,
    /// Where the plot went.
    pub svg: PathBuf,
}

impl Demo {
    /// True when the invariants hold and every receiver's replay matches.
    pub fn ok(&self) -> bool {
        check(&self.scenario, &self.run.outcome).is_empty()
            && self.comparison.len() == self.scenario.receivers.len()
            && self
                .comparison
                .iter()
                .all(|c| c.same_heaps && c.same_counters)
    }
}

/// Labels for the plot's legend.
pub fn labels(s: &Scenario) -> Vec<String> {
    s.receivers
        .iter()
        .enumerate()
        .map(|(i, r)| format!("rx {i} on {} ({:?})", r.host, r.transport).to_lowercase())
        .collect()
}

/// Runs the demo: `s` with its pcap in `out/demo.pcap` and plot in `out/demo.svg`.
///
/// # Errors
/// A run error, or an output file that cannot be written.
pub fn run(s: &Scenario, out: &Path, progress: bool) -> Result<Demo, RunError> {
    simrun::ensure_dir(out).map_err(|e| RunError::File(format!("{}: {e}", out.display())))?;
    let pcap = out.join("demo.pcap");
    let svg_path = out.join("demo.svg");
    let run = simrun::run(
        s,
        &Options {
            capture: Some(pcap.clone()),
            replay: None,
            progress,
        },
    )?;
    let mut text = String::new();
    let _ = writeln!(
        text,
        "scenario {:?}: seed {}, {} sender(s), {} receiver(s); faults: loss {}, reorder window {}, dup {}",
        s.name,
        s.seed,
        s.senders.len(),
        s.receivers.len(),
        s.faults.loss,
        s.faults.reorder_window,
        s.faults.dup
    );
    let _ = writeln!(
        text,
        "{} heaps sent, {} frames; simulated time {:.3} ms; trace hash {:016x}\n",
        run.outcome.sent.len(),
        run.outcome.packets_sent,
        run.sim.now() as f64 / 1e6,
        run.outcome.trace_hash.unwrap_or(0)
    );
    text.push_str(&table::render(&table::rows(s, &run, true)));
    let _ = writeln!(
        text,
        "{}",
        table::fabric_line(&run.sim.with_fabric(|f| f.stats()))
    );
    let violations = check(s, &run.outcome);
    if violations.is_empty() {
        let _ = writeln!(text, "invariants: all hold");
    } else {
        let _ = writeln!(text, "invariants: {} violated", violations.len());
        for v in &violations {
            let _ = writeln!(text, "  {v}");
        }
    }
    std::fs::write(
        &svg_path,
        svg::plot(
            &format!(
                "{}: complete heaps over simulated time (seed {})",
                s.name, s.seed
            ),
            &run.outcome.receivers,
            &labels(s),
        ),
    )
    .map_err(|e| RunError::File(format!("{}: {e}", svg_path.display())))?;
    let _ = writeln!(text, "wrote {} and {}", pcap.display(), svg_path.display());

    let from = s
        .senders
        .first()
        .and_then(|x| s.host_index(&x.host))
        .unwrap_or(0);
    let mut replay = simrun::run(
        s,
        &Options {
            capture: None,
            replay: Some((ReplaySource::CaptureBySource(pcap.clone()), from)),
            progress: false,
        },
    )?;
    replay.outcome.sent = run.outcome.sent.clone();
    replay.outcome.packets_sent = run.outcome.packets_sent;
    let comparison = compare(&run.outcome.receivers, &replay.outcome.receivers);
    let _ = writeln!(
        text,
        "\nreplay: {} frames of {}, each sent again from its source host at its recorded time, on a fresh fabric (same hosts, seed {} and fault plan; same receivers, no senders)",
        replay.replayed_frames,
        pcap.display(),
        s.seed
    );
    text.push_str(&table::render(&table::rows(s, &replay, true)));
    let _ = writeln!(
        text,
        "{}",
        table::fabric_line(&replay.sim.with_fabric(|f| f.stats()))
    );
    let _ = writeln!(
        text,
        "compared per receiver: every delivered heap (counter, complete or not, bytes, payload digest) in delivery order, and packets received / accepted / dropped by cause"
    );
    for c in &comparison {
        let _ = writeln!(
            text,
            "  rx {}: original {} complete + {} incomplete deliveries, replay {} + {}: heaps {}, counters {}",
            c.receiver,
            c.original.0,
            c.original.1,
            c.replay.0,
            c.replay.1,
            if c.same_heaps { "same" } else { "DIFFERENT" },
            if c.same_counters { "same" } else { "DIFFERENT" },
        );
    }
    let same = comparison.iter().all(|c| c.same_heaps && c.same_counters);
    let _ = writeln!(
        text,
        "replay {}",
        if same {
            "matches the original run"
        } else {
            "DIFFERS from the original run"
        }
    );
    Ok(Demo {
        scenario: s.clone(),
        run,
        replay,
        comparison,
        text,
        pcap,
        svg: svg_path,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_demo_replays_to_the_same_result_and_repeats_exactly() {
        let dir = std::env::temp_dir().join(format!("scenario-demo-test-{}", std::process::id()));
        let s = scenario(None).unwrap();
        assert_eq!(s.senders.len(), 1);
        assert_eq!(s.receivers.len(), 4);
        let a = run(&s, &dir.join("a"), false).unwrap();
        assert!(a.ok(), "{}", a.text);
        assert!(a.text.contains("replay matches the original run"));
        let f = a.run.sim.with_fabric(|f| f.stats());
        assert!(f.dropped_loss > 0, "the fabric is lossy");
        assert!(a
            .run
            .outcome
            .receivers
            .iter()
            .all(|r| r.heaps.iter().any(|h| !h.complete)));
        assert!(std::fs::metadata(&a.pcap).unwrap().len() > 0);
        let svg = std::fs::read_to_string(&a.svg).unwrap();
        assert_eq!(svg.matches("<polyline").count(), 4);
        // The same seed prints the same report (the paths aside).
        let b = run(&s, &dir.join("b"), false).unwrap();
        let strip = |t: &str, d: &str| t.replace(d, "DIR");
        assert_eq!(
            strip(&a.text, &dir.join("a").display().to_string()),
            strip(&b.text, &dir.join("b").display().to_string())
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The replay check holds beyond the demo: UD (RoCE frames), corruption of every
    /// kind, partitions, drops and duplicates at the sender, reordering, and several
    /// senders (two, and four on four hosts with every link fault).
    #[test]
    fn corpus_scenarios_replay_to_the_same_result() {
        let dir = std::env::temp_dir().join(format!("scenario-replay-test-{}", std::process::id()));
        for name in [
            "ud-rxe",
            "corruption",
            "partition",
            "drop-list",
            "reorder",
            "two-senders",
            "four-senders",
        ] {
            let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("corpus/{name}.toml"));
            let s = Scenario::from_toml(&std::fs::read_to_string(path).unwrap()).unwrap();
            let d = run(&s, &dir.join(name), false).unwrap();
            assert!(d.ok(), "{name}:\n{}", d.text);
            assert_eq!(d.comparison.len(), s.receivers.len(), "{name}");
            if name == "four-senders" {
                assert_eq!(s.senders.len(), 4);
                let f = d.run.sim.with_fabric(|f| f.stats());
                assert!(f.dropped_loss > 0 && f.dropped_burst > 0 && f.duplicated > 0);
                assert!(f.dropped_fcs > 0 && f.corrupted_switch > 0, "{f:?}");
                // Not a trivial match: the faults cost every receiver something.
                assert!(d
                    .comparison
                    .iter()
                    .all(|c| c.original.1 > 0 || c.original.0 < 80));
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_different_seed_gives_a_different_run() {
        let a = scenario(Some(1)).unwrap();
        let b = scenario(Some(2)).unwrap();
        assert_ne!(a.seed, b.seed);
        assert_eq!(a.senders, b.senders);
    }
}
