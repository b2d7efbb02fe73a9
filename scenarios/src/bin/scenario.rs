//! `scenario`: run scenarios on the simulator and show what happened.
//!
//! - `scenario demo [--seed N] [--out DIR]`: the default scenario (corpus/demo.toml), its
//!   per-receiver table, `DIR/demo.pcap`, `DIR/demo.svg`, and the pcap's replay through
//!   the same receivers.
//! - `scenario run FILE.toml [--seed N] [--pcap OUT]`: a scenario file, its table and
//!   invariant check (exit 1 on violations); with `--pcap`, every frame the fabric carried,
//!   as its sender put it on the wire (frames later lost or dropped by a check included,
//!   a buggy sender's corrupted ones as they left).
//! - `scenario run FILE.toml --seeds A..B [--threads N]`: the scenario once with each seed,
//!   the seeds in parallel, one line per seed (exit 1 on violations).
//! - `scenario replay FILE.pcap [--seed N] [--loss P] [--reorder W] [--dup P]
//!   [--group G:PORT] [--out DIR]`: a capture through the simulated verbs receiver.
//! - `scenario meerkat [--seed N]`: 64 senders, 16 groups, 16 receivers, ~10^6 frames;
//!   wall time and peak memory.
//! - `scenario swarm --seeds A..B [--threads N] [--shrink N] [--out DIR]`: one random
//!   scenario per seed on every core, each checked and run twice; failing seeds are
//!   shrunk and written to DIR as TOML with the command that reruns them.
//!
//! Logging: silent unless `RUST_LOG` is set, as `target=level,...` (for example
//! `RUST_LOG=scenarios=debug,backend_sim=debug` for the runs, their fault plans and
//! replays, `backend_sim=trace` for every fabric event), on stderr.
//!
//! Exit status: 0 when everything holds, 1 on invariant violations or a replay that
//! differs, 2 on errors (bad file, failed run).

use std::net::SocketAddrV4;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, Subcommand};
use scenarios::report::{demo, replay, simrun, svg, table};
use scenarios::{check, Scenario};

/// The MeerKAT-scale scenario, as committed in `scenarios/corpus/meerkat.toml`.
const MEERKAT_TOML: &str = include_str!("../../corpus/meerkat.toml");

#[derive(Debug, Parser)]
#[command(
    name = "scenario",
    version,
    about = "SPEAD scenarios on the simulated verbs fabric"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The default scenario: table, pcap, SVG plot, and the pcap replayed.
    Demo {
        /// Seed (default: the scenario file's).
        #[arg(long)]
        seed: Option<u64>,
        /// Output directory for demo.pcap and demo.svg.
        #[arg(long, default_value = "target/demo")]
        out: PathBuf,
    },
    /// Runs a scenario file on the simulator and checks the invariants; with `--seeds
    /// A..B`, once per seed, the seeds in parallel on every core, one line each.
    Run {
        /// The scenario (TOML).
        file: PathBuf,
        /// Seed (default: the file's).
        #[arg(long, conflicts_with = "seeds")]
        seed: Option<u64>,
        /// Write every frame the fabric carried to this pcap, as transmitted (bad ones
        /// included).
        #[arg(long, conflicts_with = "seeds")]
        pcap: Option<PathBuf>,
        /// Seeds, as A..B (B excluded): the scenario once with each.
        #[arg(long, value_parser = scenarios::swarm::parse_seeds)]
        seeds: Option<std::ops::Range<u64>>,
        /// Worker threads for `--seeds` (default: every core).
        #[arg(long, requires = "seeds", value_parser = clap::value_parser!(u32).range(1..=1024))]
        threads: Option<u32>,
    },
    /// Replays a capture through the simulated verbs receiver.
    Replay {
        /// The capture (pcap or pcapng; Ethernet, Linux SLL/SLL2, raw IPv4).
        file: PathBuf,
        /// Seed of the fabric's random faults.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Loss probability per frame.
        #[arg(long, default_value_t = 0.0, value_parser = probability)]
        loss: f64,
        /// Reordering window, in frames.
        #[arg(long, default_value_t = 0)]
        reorder: u32,
        /// Duplication probability per frame.
        #[arg(long, default_value_t = 0.0, value_parser = probability)]
        dup: f64,
        /// The destination (address:port) whose datagrams to replay; default: the
        /// first datagram's.
        #[arg(long)]
        group: Option<SocketAddrV4>,
        /// Output directory for the plot.
        #[arg(long, default_value = "target/replay")]
        out: PathBuf,
    },
    /// The MeerKAT-scale scenario (corpus/meerkat.toml): wall time and peak memory.
    Meerkat {
        /// Seed (default: the file's).
        #[arg(long)]
        seed: Option<u64>,
    },
    /// Random scenarios, one per seed, on every core: invariants and repeatable traces.
    Swarm {
        /// The seeds, as A..B (B excluded): one scenario each.
        #[arg(long, value_parser = scenarios::swarm::parse_seeds)]
        seeds: std::ops::Range<u64>,
        /// Worker threads (default: every core).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
        threads: Option<u32>,
        /// Runs the shrinker may spend on each failing seed (0: do not shrink).
        #[arg(long, default_value_t = 256)]
        shrink: u32,
        /// Where failing scenarios are written (seed-N.toml, and shrunk-N.toml).
        #[arg(long, default_value = "target/swarm")]
        out: PathBuf,
    },
}

/// A probability: a number from 0 to 1.
fn probability(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(p) if (0.0..=1.0).contains(&p) => Ok(p),
        Ok(_) => Err(format!("{text} is not a probability (0 to 1)")),
        Err(_) => Err(format!("{text} is not a number")),
    }
}

/// Parses the command line: `--help` prints and exits 0; any other error prints as one
/// line, `scenario: error: ...`, and exits 2.
fn parse() -> Cli {
    cli_oneline::parse("scenario")
}

/// Logs `tracing` events and spans on stderr when `RUST_LOG` is set (its targets and
/// levels, `tracing_subscriber`'s `Targets` syntax); a value that does not parse is
/// reported and logging stays off.
fn init_log() {
    use tracing_subscriber::filter::Targets;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let Ok(spec) = std::env::var("RUST_LOG") else {
        return;
    };
    match spec.parse::<Targets>() {
        Ok(targets) => tracing_subscriber::registry()
            .with(
                tracing_subscriber::fmt::layer()
                    .with_writer(std::io::stderr)
                    .with_ansi(false),
            )
            .with(targets)
            .init(),
        Err(e) => eprintln!("scenario: RUST_LOG={spec}: {e}; logging stays off"),
    }
}

fn main() -> ExitCode {
    init_log();
    match parse().command {
        Command::Demo { seed, out } => cmd_demo(seed, &out),
        Command::Run {
            file,
            seed,
            pcap,
            seeds: None,
            ..
        } => cmd_run(&file, seed, pcap.as_deref()),
        Command::Run {
            file,
            seeds: Some(seeds),
            threads,
            ..
        } => cmd_run_seeds(&file, seeds, threads),
        Command::Replay {
            file,
            seed,
            loss,
            reorder,
            dup,
            group,
            out,
        } => cmd_replay(
            &file,
            &replay::ReplayArgs {
                seed,
                loss,
                reorder,
                dup,
                group,
            },
            &out,
        ),
        Command::Meerkat { seed } => cmd_meerkat(seed),
        Command::Swarm {
            seeds,
            threads,
            shrink,
            out,
        } => cmd_swarm(seeds, threads, shrink, &out),
    }
}

fn fail(e: impl std::fmt::Display) -> ExitCode {
    eprintln!("scenario: {e}");
    ExitCode::from(2)
}

fn cmd_demo(seed: Option<u64>, out: &Path) -> ExitCode {
    let s = match demo::scenario(seed) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    let started = Instant::now();
    match demo::run(&s, out, true) {
        Ok(d) => {
            print!("{}", d.text);
            println!(
                "wall time (not part of the results): {:.2} s",
                started.elapsed().as_secs_f64()
            );
            if d.ok() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => fail(e),
    }
}

/// Runs `s` with a progress bar (capturing to `pcap` if given) and prints its table and
/// invariant check; true when every invariant holds.
fn run_and_report(
    s: &Scenario,
    pcap: Option<&Path>,
) -> Result<(bool, simrun::Run), scenarios::runner::RunError> {
    let run = simrun::run(
        s,
        &simrun::Options {
            progress: true,
            capture: pcap.map(Path::to_path_buf),
            ..simrun::Options::default()
        },
    )?;
    println!(
        "scenario {:?}: seed {}, {} host(s), {} sender(s), {} receiver(s)",
        s.name,
        s.seed,
        s.hosts.len(),
        s.senders.len(),
        s.receivers.len()
    );
    println!(
        "{} heaps sent, {} frames; simulated time {:.3} ms; trace hash {:016x}\n",
        run.outcome.sent.len(),
        run.outcome.packets_sent,
        run.sim.now() as f64 / 1e6,
        run.outcome.trace_hash.unwrap_or(0)
    );
    print!("{}", table::render(&table::rows(s, &run, true)));
    println!(
        "{}",
        table::fabric_line(&run.sim.with_fabric(|f| f.stats()))
    );
    if let Some(path) = pcap {
        println!(
            "wrote {}: {} frames as transmitted (lost and corrupted ones included)",
            path.display(),
            run.sim.with_fabric(|f| f.stats().transmitted)
        );
    }
    let v = check(s, &run.outcome);
    if v.is_empty() {
        println!("invariants: all hold");
    } else {
        println!("invariants: {} violated", v.len());
        for x in &v {
            println!("  {x}");
        }
    }
    Ok((v.is_empty(), run))
}

/// The scenario in `file`.
fn load(file: &Path) -> Result<Scenario, String> {
    let bytes = std::fs::read(file).map_err(|e| format!("{}: {e}", file.display()))?;
    if bytes.is_empty() {
        return Err(format!("{}: empty file", file.display()));
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        format!(
            "{}: not a scenario (TOML text): not UTF-8 at byte {}",
            file.display(),
            e.utf8_error().valid_up_to()
        )
    })?;
    Scenario::from_toml(&text).map_err(|e| format!("{}: {e}", file.display()))
}

/// Worker threads: `threads`, or every core.
fn threads_or_cores(threads: Option<u32>) -> usize {
    threads.map_or_else(
        || std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get),
        |t| t as usize,
    )
}

fn cmd_run_seeds(file: &Path, seeds: std::ops::Range<u64>, threads: Option<u32>) -> ExitCode {
    let s = match load(file) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    let threads = threads_or_cores(threads);
    let started = Instant::now();
    let results = scenarios::swarm::par_seeds(
        seeds.clone(),
        threads,
        |seed| {
            let mut s = s.clone();
            s.seed = seed;
            scenarios::runner::run_sim(&s).map(|o| {
                let violations: Vec<String> =
                    check(&s, &o).iter().map(ToString::to_string).collect();
                let complete = o
                    .receivers
                    .iter()
                    .flat_map(|r| &r.heaps)
                    .filter(|h| h.complete)
                    .count();
                (
                    o.trace_hash.unwrap_or(0),
                    o.packets_sent,
                    complete,
                    violations,
                )
            })
        },
        &|_, _| {},
    );
    let mut failing = 0;
    let mut frames = 0;
    for (seed, r) in &results {
        match r {
            Ok((hash, sent, complete, violations)) => {
                frames += sent;
                let verdict = if violations.is_empty() {
                    "invariants: all hold".to_string()
                } else {
                    failing += 1;
                    format!(
                        "invariants: {} violated: {}",
                        violations.len(),
                        violations[0]
                    )
                };
                println!("seed {seed}: trace hash {hash:016x}, {sent} frames, {complete} complete heaps; {verdict}");
            }
            Err(e) => {
                failing += 1;
                println!("seed {seed}: run failed: {e}");
            }
        }
    }
    let wall = started.elapsed().as_secs_f64();
    println!(
        "{:?} seeds {}..{}: {} runs on {threads} threads in {wall:.2} s wall ({:.0} frames/s); {failing} failing",
        s.name,
        seeds.start,
        seeds.end,
        results.len(),
        frames as f64 / wall
    );
    if failing == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn cmd_run(file: &Path, seed: Option<u64>, pcap: Option<&Path>) -> ExitCode {
    let mut s = match load(file) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    if let Some(seed) = seed {
        s.seed = seed;
    }
    let started = Instant::now();
    match run_and_report(&s, pcap) {
        Ok((ok, _)) => {
            println!(
                "wall time (not part of the results): {:.2} s",
                started.elapsed().as_secs_f64()
            );
            if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => fail(e),
    }
}

fn cmd_replay(file: &Path, args: &replay::ReplayArgs, out: &Path) -> ExitCode {
    let r = match replay::replay(file, args) {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    print!("{}", r.text);
    let stem = file.file_stem().map_or_else(
        || "replay".to_string(),
        |s| s.to_string_lossy().into_owned(),
    );
    let path = out.join(format!("{stem}.svg"));
    let plot = svg::plot(
        &format!("{}: complete heaps over simulated time", r.scenario.name),
        &r.run.outcome.receivers,
        &[format!("rx on {}", r.group)],
    );
    if let Err(e) = std::fs::create_dir_all(out).and_then(|()| std::fs::write(&path, plot)) {
        return fail(format!("{}: {e}", path.display()));
    }
    println!("wrote {}", path.display());
    ExitCode::SUCCESS
}

fn cmd_meerkat(seed: Option<u64>) -> ExitCode {
    let mut s = match Scenario::from_toml(MEERKAT_TOML) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    if let Some(seed) = seed {
        s.seed = seed;
    }
    let started = Instant::now();
    match run_and_report(&s, None) {
        Ok((ok, run)) => {
            let wall = started.elapsed();
            let frames = run.sim.with_fabric(|f| f.stats()).transmitted;
            let cpu = simrun::cpu_seconds();
            println!(
                "wall time: {:.2} s ({:.0} frames/s); cpu time: {}; peak memory (VmHWM): {}",
                wall.as_secs_f64(),
                frames as f64 / wall.as_secs_f64(),
                cpu.map_or_else(
                    || "unknown (no /proc/self/stat)".to_string(),
                    |c| format!("{c:.2} s ({:.0} frames/s)", frames as f64 / c)
                ),
                simrun::peak_rss_kib().map_or_else(
                    || "unknown (no /proc/self/status)".to_string(),
                    |k| format!("{:.1} MiB", k as f64 / 1024.0)
                )
            );
            if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => fail(e),
    }
}

fn cmd_swarm(
    seeds: std::ops::Range<u64>,
    threads: Option<u32>,
    shrink: u32,
    out: &Path,
) -> ExitCode {
    use scenarios::swarm;
    let threads = threads_or_cores(threads);
    let total = seeds.end - seeds.start;
    let bar = simrun::progress_bar(total, "scenarios");
    let started = Instant::now();
    let report = swarm::run(
        &swarm::SwarmConfig {
            seeds: seeds.clone(),
            threads,
            shrink_budget: shrink,
        },
        &|done, failed| {
            bar.set_position(done);
            bar.set_message(format!("{failed} failing"));
        },
    );
    bar.finish_and_clear();
    let wall = started.elapsed().as_secs_f64();
    println!(
        "swarm seeds {}..{}: {} scenarios (each run twice) on {threads} threads in {wall:.1} s; \
         {} frames sent, {} heaps delivered; {} failing",
        seeds.start,
        seeds.end,
        report.scenarios,
        report.packets_sent,
        report.heaps_delivered,
        report.failures.len()
    );
    if report.failures.is_empty() {
        return ExitCode::SUCCESS;
    }
    if let Err(e) = std::fs::create_dir_all(out) {
        return fail(format!("cannot create {}: {e}", out.display()));
    }
    for f in &report.failures {
        print!("{}", f.report());
        let original = swarm::scenario_for_seed(f.seed);
        write_scenario(&out.join(format!("seed-{}.toml", f.seed)), &original);
        if let Some((small, _)) = &f.shrunk {
            let path = out.join(format!("shrunk-{}.toml", f.seed));
            write_scenario(&path, small);
            println!(
                "  rerun the shrunk scenario: cargo xtask scenario run {}",
                path.display()
            );
        }
    }
    ExitCode::from(1)
}

fn write_scenario(path: &Path, s: &Scenario) {
    match s.to_toml() {
        Ok(text) => {
            if let Err(e) = std::fs::write(path, text) {
                eprintln!("scenario: cannot write {}: {e}", path.display());
            }
        }
        Err(e) => eprintln!("scenario: cannot write {}: {e}", path.display()),
    }
}
