//! The fault swarm as ordinary tests: one test per block of seeds, so that cargo-nextest
//! can list them and split them across machines (`--partition count:K/N`), and its JUnit
//! output records each block. Each test runs [`scenarios::swarm::run`], the function that
//! `scenario swarm` (and so `cargo xtask swarm`) runs, on its block's seeds; a failing
//! test's message is [`Failure::report`] for each failing seed: the seed, the command that
//! reruns it, its problems and what the shrunk scenario still breaks.
//!
//! Tests are named by their first and last seed, zero-padded ([`swarm::block_name`]):
//! `seeds_0000_0063`, `seeds_0064_0127`, ... Recipes: `scenarios/SWARM.md`.
//!
//! Set by environment variables (read when the binary lists its tests and when it runs
//! them, so nextest's listing and its runs agree); the defaults are CI's short form:
//!
//! | variable | default | meaning |
//! | --- | --- | --- |
//! | `SWARM_SEEDS` | `0..400` | the seeds, `A..B` (B excluded) |
//! | `SWARM_BLOCK` | `64` | seeds per test (the last block may be shorter) |
//! | `SWARM_THREADS` | `1` | threads each test runs its block on (the test runner already runs tests in parallel) |
//! | `SWARM_SHRINK` | `256` | runs the shrinker may spend on each failing seed (0: none) |
//! | `SWARM_INJECT_FAILURE_SEED` | unset | the harness's own self-test only: report this seed as failing |
//!
//! `SWARM_INJECT_FAILURE_SEED=N` exists so that `tests/swarm_partitions.rs` can check, with
//! a real nextest run, that a failing block's seed and rerun command reach the JUnit
//! record. It adds a failure, marked as injected, for seed N to the report of N's block
//! (N's scenario still runs and is checked as usual); it changes nothing when unset.
//!
//! The long form: `SWARM_SEEDS=0..10000 cargo nextest run -p scenarios --test swarm`.

use std::ops::Range;
use std::process::ExitCode;
use std::sync::Mutex;

use libtest_mimic::{Arguments, Failed, Trial};
use scenarios::swarm::{self, Failure, SwarmConfig};

/// What `--help` prints before libtest-mimic's own options.
const HELP: &str = "\
The fault swarm, one test per block of seeds (scenarios/SWARM.md).

Environment (the defaults are CI's short form):
  SWARM_SEEDS=A..B               the seeds, B excluded (default 0..400)
  SWARM_BLOCK=N                  seeds per test (default 64)
  SWARM_THREADS=N                threads per test (default 1)
  SWARM_SHRINK=N                 shrinker runs per failing seed (default 256; 0: none)
  SWARM_INJECT_FAILURE_SEED=N    for the harness's own self-test only: report seed N as
                                 failing (marked as injected)

Long form:  SWARM_SEEDS=0..10000 cargo nextest run -p scenarios --test swarm
One shard:  cargo nextest run -p scenarios --test swarm --profile ci --partition count:1/4

";

/// The swarm's settings, from the environment.
#[derive(Debug, Clone)]
struct Settings {
    seeds: Range<u64>,
    block: u64,
    threads: usize,
    shrink: u32,
    inject: Option<u64>,
}

/// The value of `name`, parsed by `parse`, or `default` when it is unset.
fn var<T>(name: &str, default: T, parse: impl Fn(&str) -> Result<T, String>) -> Result<T, String> {
    match std::env::var(name) {
        Ok(text) => parse(&text).map_err(|e| format!("{name}={text}: {e}")),
        Err(std::env::VarError::NotPresent) => Ok(default),
        Err(e) => Err(format!("{name}: {e}")),
    }
}

/// A whole number of at least `min`.
fn at_least<T: std::str::FromStr + PartialOrd + std::fmt::Display>(
    min: T,
) -> impl Fn(&str) -> Result<T, String> {
    move |text| match text.parse::<T>() {
        Ok(n) if n >= min => Ok(n),
        Ok(_) => Err(format!("must be at least {min}")),
        Err(_) => Err("not a whole number".into()),
    }
}

impl Settings {
    fn from_env() -> Result<Self, String> {
        Ok(Self {
            seeds: var("SWARM_SEEDS", 0..400, swarm::parse_seeds)?,
            block: var("SWARM_BLOCK", 64, at_least(1u64))?,
            threads: var("SWARM_THREADS", 1, at_least(1usize))?,
            shrink: var("SWARM_SHRINK", 256, at_least(0u32))?,
            inject: var("SWARM_INJECT_FAILURE_SEED", None, |t| {
                at_least(0u64)(t).map(Some)
            })?,
        })
    }
}

/// Runs one block: every seed's scenario, checked and run twice. Fails with the report of
/// every failing seed.
fn run_block(settings: &Settings, block: Range<u64>) -> Result<(), Failed> {
    let report = swarm::run(
        &SwarmConfig {
            seeds: block.clone(),
            threads: settings.threads,
            shrink_budget: settings.shrink,
        },
        &|_, _| {},
    );
    let mut failures = report.failures;
    if let Some(seed) = settings.inject.filter(|s| block.contains(s)) {
        let problem = format!(
            "injected by SWARM_INJECT_FAILURE_SEED={seed} (the harness's self-test of its \
             failure report; not a result of the scenario)"
        );
        match failures.iter_mut().find(|f| f.seed == seed) {
            Some(f) => f.problems.push(problem),
            None => failures.push(Failure {
                seed,
                problems: vec![problem],
                shrunk: None,
            }),
        }
        failures.sort_by_key(|f| f.seed);
    }
    println!(
        "swarm seeds {}..{}: {} scenarios (each run twice); {} frames sent, {} heaps \
         delivered; {} failing",
        block.start,
        block.end,
        report.scenarios,
        report.packets_sent,
        report.heaps_delivered,
        failures.len()
    );
    if failures.is_empty() {
        return Ok(());
    }
    let mut message = String::new();
    for f in &failures {
        message.push_str(&f.report());
    }
    message.push_str("(the rerun writes the seed's scenario and its shrunk form to target/swarm)");
    FAILED
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(message.clone());
    Err(message.into())
}

/// The messages of the blocks that failed in this process, for the closing `Error:` lines.
static FAILED: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn main() -> ExitCode {
    if std::env::args().any(|a| a == "--help" || a == "-h") {
        print!("{HELP}");
    }
    let args = Arguments::from_args();
    let settings = match Settings::from_env() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("swarm: {e}");
            return ExitCode::from(2);
        }
    };
    let trials = swarm::blocks(settings.seeds.clone(), settings.block)
        .into_iter()
        .map(|block| {
            let name = swarm::block_name(&block, &settings.seeds);
            let settings = settings.clone();
            Trial::test(name, move || run_block(&settings, block))
        })
        .collect();
    let conclusion = libtest_mimic::run(&args, trials);
    // The failing blocks' reports once more on stderr, after `Error: ` as a `main` that
    // returns an error prints: nextest takes that text as the test's failure message
    // (the `message` and text of its JUnit `<failure>`), as it does a panic's.
    let failed = FAILED.lock().unwrap_or_else(|p| p.into_inner());
    if !failed.is_empty() {
        eprintln!("Error: {}", failed.join("\n"));
    }
    conclusion.exit_code()
}
