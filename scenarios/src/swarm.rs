//! The fault swarm: many random scenarios, each derived from one seed, run on the
//! simulator on every core, each checked against the [invariants](crate::invariants) and
//! run twice to check that the same seed gives the same trace.
//!
//! A seed is the whole input: `scenario_for_seed(seed)` builds the same scenario on any
//! machine, so a seed range is a shard (`--seeds 0..5000` on one machine, `5000..10000`
//! on another) and a failing seed is a complete bug report. A failing scenario is shrunk
//! with proptest's value tree (fewer hosts, heaps, bytes and faults) and written as TOML,
//! with the command that reruns it.
//!
//! The seeds are also split into [`blocks`], one test each of the test binary `swarm`
//! (`tests/swarm.rs`, named by [`block_name`]), so that cargo-nextest can partition them
//! across machines (`cargo nextest run -p scenarios --test swarm --partition count:K/N`);
//! `contrib/slurm/swarm.sbatch` gives Slurm array task K block K. Recipes:
//! `scenarios/SWARM.md`.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use proptest::prelude::*;
use proptest::strategy::{BoxedStrategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

use crate::invariants::check;
use crate::model::Scenario;
use crate::runner::sim::{run_sim, run_sim_with};
use crate::strategy::{all_faults, scenario_of, Shape};

/// The scenarios the swarm draws from: mostly small ones (2-4 hosts, 1-2 groups, 1-2
/// senders, 1-3 receivers, every fault kind: [`all_faults`]), and one in eight wide (up to 64 senders,
/// groups and receivers on up to 16 hosts, with few small heaps each, so a wide scenario
/// costs about what a small one does).
pub fn swarm_scenario() -> BoxedStrategy<Scenario> {
    prop_oneof![7 => crate::strategy::every_fault_scenario(), 1 => wide_scenario()].boxed()
}

/// A wide scenario: 2-16 hosts, 1-64 groups, 1-64 senders and 1-64 receivers, each sender
/// with at most two heaps of 4 KiB, and every fault kind.
fn wide_scenario() -> impl Strategy<Value = Scenario> {
    scenario_of(
        Shape {
            hosts: (2, 16),
            groups: (1, 64),
            senders: (1, 64),
            receivers: (1, 64),
            max_heaps: 2,
            max_heap_size: 4096,
            name: "swarm-wide",
        },
        |packets, hosts| all_faults(packets, hosts).boxed(),
    )
}

/// The proptest runner whose random stream is a function of `seed` alone.
fn runner_for(seed: u64) -> TestRunner {
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    key[8..16].copy_from_slice(b"swarm-v1");
    TestRunner::new_with_rng(
        Config {
            failure_persistence: None,
            ..Config::default()
        },
        TestRng::from_seed(RngAlgorithm::ChaCha, &key),
    )
}

/// The value tree of seed `seed`'s scenario (its current value is the scenario; it
/// shrinks).
fn tree_for(seed: u64) -> Box<dyn ValueTree<Value = Scenario>> {
    let mut runner = runner_for(seed);
    // A strategy of these types never rejects a value, so new_tree cannot fail.
    swarm_scenario()
        .new_tree(&mut runner)
        .expect("the swarm strategy filters nothing")
}

/// Seed `seed`'s scenario: the same on every machine and every run.
pub fn scenario_for_seed(seed: u64) -> Scenario {
    tree_for(seed).current()
}

/// What one scenario's run showed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeedResult {
    /// Frames the senders put on the wire.
    pub packets_sent: u64,
    /// Heaps the receivers delivered.
    pub heaps_delivered: u64,
    /// The trace hash (the same on both runs when the result is clean).
    pub trace_hash: u64,
}

/// Runs `s` twice and checks every invariant, that no verbs object outlives the run, and
/// that both runs leave the same trace.
///
/// # Errors
/// Every problem found, one line each.
pub fn check_scenario(s: &Scenario) -> Result<SeedResult, Vec<String>> {
    let run = run_sim_with(s, None).map_err(|e| vec![format!("run failed: {e}")])?;
    let first = run.outcome;
    let mut problems: Vec<String> = check(s, &first).iter().map(ToString::to_string).collect();
    // The run has dropped every receiver and sender: nothing of theirs may be left.
    let live = run.sim.live_objects();
    if live.total() != 0 {
        problems.push(format!("verbs objects left after the run: {live:?}"));
    }
    match run_sim(s) {
        Ok(second) if second.trace_hash != first.trace_hash => problems.push(format!(
            "the same seed gave two traces: {:016x?} then {:016x?}",
            first.trace_hash, second.trace_hash
        )),
        Ok(second) if second != first => {
            problems.push("the same seed gave two different outcomes".into());
        }
        Ok(_) => {}
        Err(e) => problems.push(format!("second run failed: {e}")),
    }
    if problems.is_empty() {
        Ok(SeedResult {
            packets_sent: first.packets_sent,
            heaps_delivered: first.receivers.iter().map(|r| r.heaps.len() as u64).sum(),
            trace_hash: first.trace_hash.unwrap_or(0),
        })
    } else {
        Err(problems)
    }
}

/// A seed whose scenario broke an invariant.
#[derive(Debug, Clone)]
pub struct Failure {
    /// The seed.
    pub seed: u64,
    /// What went wrong with the seed's own scenario.
    pub problems: Vec<String>,
    /// The smallest scenario found that still fails, and what went wrong with it.
    pub shrunk: Option<(Scenario, Vec<String>)>,
}

impl Failure {
    /// The command that reruns this seed alone.
    #[must_use]
    pub fn command(&self) -> String {
        format!("cargo xtask swarm --seeds {}..{}", self.seed, self.seed + 1)
    }

    /// The failure as text: a line naming the seed and the command that reruns it, each
    /// problem on its own indented line, and what the shrunk scenario still breaks. The
    /// `scenario swarm` command and the `swarm` test binary both print this.
    #[must_use]
    pub fn report(&self) -> String {
        let mut text = format!("seed {} FAILED (rerun: {}):\n", self.seed, self.command());
        for p in &self.problems {
            text.push_str(&format!("  {p}\n"));
        }
        if let Some((small, problems)) = &self.shrunk {
            text.push_str(&format!(
                "  shrunk to {} senders, {} receivers, {} heaps: {}\n",
                small.senders.len(),
                small.receivers.len(),
                small.senders.iter().map(|s| s.heaps).sum::<u32>(),
                problems.first().map_or("", String::as_str),
            ));
        }
        text
    }
}

/// Parses a seed range `A..B` (B excluded, A < B).
///
/// # Errors
/// A message naming the text when it is not two seeds around `..`, or the range is
/// empty.
pub fn parse_seeds(text: &str) -> Result<Range<u64>, String> {
    let (a, b) = text
        .split_once("..")
        .ok_or_else(|| format!("`{text}` is not a seed range A..B"))?;
    let a: u64 = a
        .parse()
        .map_err(|e| format!("`{a}` in `{text}` is not a seed: {e}"))?;
    let b: u64 = b
        .parse()
        .map_err(|e| format!("`{b}` in `{text}` is not a seed: {e}"))?;
    if a >= b {
        return Err(format!(
            "the seed range `{text}` is empty (A..B needs A < B)"
        ));
    }
    Ok(a..b)
}

/// The blocks of `seeds`, `block` seeds each (the last one may be shorter): block `k` is
/// `seeds.start + k * block` up to `block` seeds further, cut at `seeds.end`. A block is
/// the swarm's unit of sharding: one test of the `swarm` test binary, or one task of a
/// Slurm array (`contrib/slurm/swarm.sbatch` computes the same blocks).
///
/// # Panics
/// When `block` is 0.
#[must_use]
pub fn blocks(seeds: Range<u64>, block: u64) -> Vec<Range<u64>> {
    assert!(block > 0, "a block holds at least one seed");
    let mut out = Vec::new();
    let mut start = seeds.start;
    while start < seeds.end {
        let end = seeds.end.min(start.saturating_add(block));
        out.push(start..end);
        start = end;
    }
    out
}

/// The name of the test that runs `block`, a block of `seeds`: `seeds_A_B` with the first
/// and last seed (B included), zero-padded to the digits of the swarm's last seed (at
/// least four), so that names sort in seed order: `seeds_0000_0063`.
#[must_use]
pub fn block_name(block: &Range<u64>, seeds: &Range<u64>) -> String {
    let width = seeds.end.saturating_sub(1).to_string().len().max(4);
    format!(
        "seeds_{:0width$}_{:0width$}",
        block.start,
        block.end.saturating_sub(1)
    )
}

/// The seeds that a test named by [`block_name`] runs; `None` for any other name.
#[must_use]
pub fn block_of_name(name: &str) -> Option<Range<u64>> {
    let (first, last) = name.strip_prefix("seeds_")?.split_once('_')?;
    let first: u64 = first.parse().ok()?;
    let last: u64 = last.parse().ok()?;
    let end = last.checked_add(1)?;
    (first <= last).then_some(first..end)
}

/// Shrinks seed `seed`'s failing scenario: proptest's simplify/complicate walk over the
/// value tree, at most `budget` runs.
pub fn shrink(seed: u64, budget: u32) -> Option<(Scenario, Vec<String>)> {
    let mut tree = tree_for(seed);
    let mut best = None;
    for _ in 0..budget {
        let candidate = tree.current();
        let failed = match check_scenario(&candidate) {
            Err(problems) => {
                best = Some((candidate, problems));
                true
            }
            Ok(_) => false,
        };
        let moved = if failed {
            tree.simplify()
        } else {
            tree.complicate()
        };
        if !moved {
            break;
        }
    }
    best
}

/// How to run a swarm.
#[derive(Debug, Clone)]
pub struct SwarmConfig {
    /// The seeds: one scenario each.
    pub seeds: Range<u64>,
    /// Worker threads (at least one).
    pub threads: usize,
    /// Runs the shrinker may spend on each failing seed (0: do not shrink).
    pub shrink_budget: u32,
}

/// The totals of a swarm.
#[derive(Debug, Clone, Default)]
pub struct SwarmReport {
    /// Scenarios run (each twice).
    pub scenarios: u64,
    /// Frames sent over all scenarios (first runs).
    pub packets_sent: u64,
    /// Heaps delivered over all scenarios (first runs).
    pub heaps_delivered: u64,
    /// The failing seeds, in seed order.
    pub failures: Vec<Failure>,
}

/// Runs `work` for every seed of `seeds` on `threads` threads (independent scenarios
/// on every core) and returns the results in seed order, whatever the thread count:
/// seeds are handed out in order from a shared counter. `done` is called after each seed
/// with the number of seeds finished so far and that seed's result.
pub fn par_seeds<T: Send>(
    seeds: Range<u64>,
    threads: usize,
    work: impl Fn(u64) -> T + Sync,
    done: &(dyn Fn(u64, &T) + Sync),
) -> Vec<(u64, T)> {
    let next = AtomicU64::new(seeds.start);
    let finished = AtomicU64::new(0);
    let results = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| loop {
                let seed = next.fetch_add(1, Ordering::Relaxed);
                if seed >= seeds.end {
                    break;
                }
                let result = work(seed);
                done(finished.fetch_add(1, Ordering::Relaxed) + 1, &result);
                results
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push((seed, result));
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_else(|p| p.into_inner());
    results.sort_by_key(|(seed, _)| *seed);
    results
}

/// Runs every seed of `config.seeds` on `config.threads` threads ([`par_seeds`]),
/// calling `progress` after each scenario with (scenarios done, failures so far). The
/// report does not depend on the thread count.
pub fn run(config: &SwarmConfig, progress: &(dyn Fn(u64, u64) + Sync)) -> SwarmReport {
    let failing = AtomicU64::new(0);
    let results = par_seeds(
        config.seeds.clone(),
        config.threads,
        |seed| {
            let outcome = check_scenario(&scenario_for_seed(seed));
            let failure = outcome.as_ref().err().map(|problems| Failure {
                seed,
                problems: problems.clone(),
                shrunk: (config.shrink_budget > 0)
                    .then(|| shrink(seed, config.shrink_budget))
                    .flatten(),
            });
            (outcome.ok(), failure)
        },
        &|done, (_, failure): &(Option<SeedResult>, Option<Failure>)| {
            let failures = failing.fetch_add(u64::from(failure.is_some()), Ordering::Relaxed)
                + u64::from(failure.is_some());
            progress(done, failures);
        },
    );
    let mut report = SwarmReport::default();
    for (_, (ok, failure)) in results {
        report.scenarios += 1;
        if let Some(res) = ok {
            report.packets_sent += res.packets_sent;
            report.heaps_delivered += res.heaps_delivered;
        }
        report.failures.extend(failure);
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_run_on_every_thread_come_back_in_seed_order() {
        let calls = AtomicU64::new(0);
        for threads in [1, 2, 5] {
            let got = par_seeds(10..17, threads, |seed| seed * seed, &|_, _| {
                calls.fetch_add(1, Ordering::Relaxed);
            });
            let want: Vec<(u64, u64)> = (10..17).map(|s| (s, s * s)).collect();
            assert_eq!(got, want, "{threads} threads");
        }
        assert_eq!(calls.load(Ordering::Relaxed), 21);
    }

    #[test]
    fn a_seed_always_gives_the_same_valid_scenario() {
        for seed in [0, 1, 42, u64::MAX] {
            let s = scenario_for_seed(seed);
            assert_eq!(s, scenario_for_seed(seed), "seed {seed}");
            assert_eq!(s.validate(), Ok(()), "seed {seed}");
        }
        assert_ne!(scenario_for_seed(1), scenario_for_seed(2));
    }

    #[test]
    fn every_fault_kind_is_drawn() {
        let faults: Vec<crate::model::Faults> = (0..400)
            .map(|seed| scenario_for_seed(seed).faults)
            .collect();
        let some =
            |f: &dyn Fn(&crate::model::Faults) -> bool| faults.iter().filter(|x| f(x)).count();
        assert!(some(&|f| f.loss > 0.0) > 40);
        assert!(some(&|f| f.burst.is_some()) > 20);
        assert!(some(&|f| f.dup > 0.0) > 20);
        assert!(some(&|f| f.reorder_window > 0) > 40);
        assert!(some(&|f| f.corrupt > 0.0) > 20);
        assert!(some(&|f| f.corrupt_switch > 0.0) > 20);
        assert!(some(&|f| f.corrupt_payload > 0.0) > 10);
        assert!(some(&|f| f.jitter_ns > 0) > 20);
        assert!(some(&|f| !f.partitions.is_empty()) > 20);
        assert!(some(&|f| !f.drop.is_empty()) > 40);
    }

    #[test]
    fn wide_scenarios_are_drawn_and_valid() {
        let wide: Vec<Scenario> = (0..200)
            .map(scenario_for_seed)
            .filter(|s| s.name.starts_with("swarm-wide-"))
            .collect();
        assert!(
            wide.len() >= 10,
            "{} wide scenarios in 200 seeds",
            wide.len()
        );
        for s in &wide {
            assert_eq!(s.validate(), Ok(()), "{}", s.name);
            assert!(s.senders.len() <= 64 && s.receivers.len() <= 64 && s.groups.len() <= 64);
        }
        assert!(wide.iter().any(|s| s.senders.len() > 16));
    }

    #[test]
    fn the_report_does_not_depend_on_the_thread_count() {
        let run_with = |threads| {
            let r = run(
                &SwarmConfig {
                    seeds: 100..108,
                    threads,
                    shrink_budget: 0,
                },
                &|_, _| {},
            );
            (
                r.scenarios,
                r.packets_sent,
                r.heaps_delivered,
                r.failures.len(),
            )
        };
        let one = run_with(1);
        assert_eq!(one.0, 8);
        assert!(one.1 > 0 && one.2 > 0, "{one:?}");
        assert_eq!(one, run_with(3));
    }

    #[test]
    fn a_failing_scenario_is_reported_with_its_problem_and_rerun_command() {
        let mut s = scenario_for_seed(5);
        s.receivers[0].groups = vec![s.groups.len() + 3];
        let problems = check_scenario(&s).unwrap_err();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].starts_with("run failed: "), "{problems:?}");
        let f = Failure {
            seed: 17,
            problems,
            shrunk: None,
        };
        assert_eq!(f.command(), "cargo xtask swarm --seeds 17..18");
        let report = f.report();
        assert!(
            report.starts_with(
                "seed 17 FAILED (rerun: cargo xtask swarm --seeds 17..18):\n  run failed: "
            ),
            "{report}"
        );
    }

    #[test]
    fn a_report_names_the_shrunk_scenario() {
        let small = scenario_for_seed(3);
        let f = Failure {
            seed: 9,
            problems: vec!["first".into(), "second".into()],
            shrunk: Some((small.clone(), vec!["still broken".into()])),
        };
        assert_eq!(
            f.report(),
            format!(
                "seed 9 FAILED (rerun: cargo xtask swarm --seeds 9..10):\n  first\n  second\n  \
                 shrunk to {} senders, {} receivers, {} heaps: still broken\n",
                small.senders.len(),
                small.receivers.len(),
                small.senders.iter().map(|s| s.heaps).sum::<u32>()
            )
        );
    }

    #[test]
    fn seed_ranges_parse_and_empty_ones_are_refused() {
        assert_eq!(parse_seeds("0..400"), Ok(0..400));
        assert_eq!(parse_seeds("7..8"), Ok(7..8));
        for bad in ["5..5", "6..5", "0-400", "a..4", "1..", ""] {
            assert!(parse_seeds(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn blocks_cover_every_seed_once_and_their_names_give_them_back() {
        let seeds = 0..400;
        let got = blocks(seeds.clone(), 64);
        assert_eq!(got.len(), 7);
        assert_eq!(got[0], 0..64);
        assert_eq!(got[6], 384..400);
        let flat: Vec<u64> = got.iter().cloned().flatten().collect();
        assert_eq!(flat, seeds.clone().collect::<Vec<_>>());
        assert_eq!(block_name(&got[0], &seeds), "seeds_0000_0063");
        assert_eq!(block_name(&got[6], &seeds), "seeds_0384_0399");
        for b in &got {
            assert_eq!(block_of_name(&block_name(b, &seeds)), Some(b.clone()));
        }
        let wide = 95_000..100_001;
        assert_eq!(blocks(wide.clone(), 10_000).len(), 1);
        assert_eq!(
            block_name(&(100_000..100_001), &wide),
            "seeds_100000_100000"
        );
        assert_eq!(blocks(5..6, 64), vec![5..6]);
        assert_eq!(blocks(u64::MAX - 3..u64::MAX, 2).len(), 2);
        assert_eq!(block_of_name("seeds_0009_0003"), None);
        assert_eq!(block_of_name("seeds_0001"), None);
        assert_eq!(block_of_name("other_0001_0002"), None);
    }
}
