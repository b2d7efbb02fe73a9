//! `cargo xtask fuzz`: every cargo-fuzz target in `fuzz/`, each from its stored corpus
//! (`fuzz/corpus/TARGET`, read only) into a working corpus under `target/fuzz/`, for a
//! time or a number of runs, with the executions counted from libFuzzer's final stats.
//!
//! It needs the nightly toolchain and cargo-fuzz: it installs cargo-fuzz with
//! `cargo install cargo-fuzz --locked` when missing, and says how to get nightly when
//! rustup has none.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use super::common::Error;

/// How long or how far to fuzz.
#[derive(Debug, Clone, Copy)]
pub enum Budget {
    /// Seconds per target.
    Seconds(u64),
    /// Executions per target.
    Runs(u64),
    /// Executions per target, or seconds if they come first.
    RunsWithin(u64, u64),
}

/// What one target did.
#[derive(Debug, Clone)]
pub struct TargetResult {
    /// The target's name.
    pub target: String,
    /// Inputs executed (libFuzzer's `stat::number_of_executed_units`).
    pub executions: u64,
    /// Wall time of the run (the build is before it).
    pub seconds: f64,
    /// Corpus entries after the run.
    pub corpus: usize,
}

/// The fuzz targets: the `[[bin]]` names in `fuzz/Cargo.toml`.
///
/// # Errors
/// When the manifest cannot be read or names no target.
pub fn targets(root: &Path) -> Result<Vec<String>, Error> {
    let manifest = root.join("fuzz/Cargo.toml");
    let text = std::fs::read_to_string(&manifest)
        .map_err(|e| format!("cannot read {}: {e}", manifest.display()))?;
    let names = bin_names(&text);
    if names.is_empty() {
        return Err(format!("{} names no [[bin]] target", manifest.display()));
    }
    Ok(names)
}

/// The `name = "..."` values of `[[bin]]` tables in a manifest.
fn bin_names(manifest: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut in_bin = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_bin = line == "[[bin]]";
        } else if in_bin {
            if let Some(v) = line.strip_prefix("name").map(str::trim_start) {
                if let Some(v) = v.strip_prefix('=') {
                    names.push(v.trim().trim_matches('"').to_owned());
                }
            }
        }
    }
    names
}

/// The executions in libFuzzer's output (`stat::number_of_executed_units: N`, printed
/// with `-print_final_stats=1`, or the last `#N` status line).
fn executions(log: &str) -> Option<u64> {
    log.lines()
        .find_map(|l| l.strip_prefix("stat::number_of_executed_units:"))
        .and_then(|v| v.trim().parse().ok())
        .or_else(|| {
            log.lines()
                .rev()
                .find_map(|l| l.strip_prefix('#')?.split_whitespace().next()?.parse().ok())
        })
}

fn ensure_tools(root: &Path) -> Result<(), Error> {
    let nightly = Command::new("rustup")
        .args(["run", "nightly", "rustc", "--version"])
        .current_dir(root)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !nightly {
        return Err(
            "cargo-fuzz needs the nightly toolchain, which rustup does not have: \
                    rustup toolchain install nightly --profile minimal"
                .into(),
        );
    }
    let have_fuzz = Command::new("cargo")
        .args(["+nightly", "fuzz", "--version"])
        .current_dir(root)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !have_fuzz {
        eprintln!("xtask fuzz: installing cargo-fuzz (cargo install cargo-fuzz --locked)");
        let status = Command::new("cargo")
            .args(["install", "cargo-fuzz", "--locked"])
            .status()
            .map_err(|e| format!("cannot start cargo install: {e}"))?;
        if !status.success() {
            return Err(format!(
                "cargo install cargo-fuzz --locked failed ({status})"
            ));
        }
    }
    Ok(())
}

/// The longest input libFuzzer makes for `target` (`-max_len`): what one unit of that
/// parser's input can sensibly be. Without it libFuzzer takes the largest stored corpus
/// file (58 KiB for the captures) or 4096 bytes.
pub fn max_len(target: &str) -> usize {
    match target {
        // One datagram or a buffer of a few: a jumbo frame's payload and more.
        "spead_assemble" => 9216,
        // A capture of a few dozen frames (the stored captures are 58 KiB).
        "pcap_file" => 65536,
        // One frame, jumbo included.
        "frames" => 9216,
        // The seed and 256 two-byte operations, all the target reads.
        "slot_pool" => 8 + 2 * 256,
        // JSON lines, scenario files, RC packet records: a few KiB of text or records.
        _ => 4096,
    }
}

/// The libFuzzer arguments of one run of `target`: the working corpus first (new inputs
/// go there), then the stored one, and the budget.
fn libfuzzer_args(root: &Path, target: &str, budget: Budget) -> Vec<String> {
    let stored = root.join("fuzz/corpus").join(target);
    let artifacts = root.join("target/fuzz/artifacts").join(target);
    let mut args = vec![work_corpus(root, target).display().to_string()];
    if stored.is_dir() {
        args.push(stored.display().to_string());
    }
    args.push(format!("-artifact_prefix={}/", artifacts.display()));
    args.push(format!("-max_len={}", max_len(target)));
    args.push("-print_final_stats=1".into());
    match budget {
        Budget::Seconds(s) => args.push(format!("-max_total_time={s}")),
        Budget::Runs(n) => args.push(format!("-runs={n}")),
        Budget::RunsWithin(n, s) => {
            args.push(format!("-runs={n}"));
            args.push(format!("-max_total_time={s}"));
        }
    }
    args
}

fn work_corpus(root: &Path, target: &str) -> PathBuf {
    root.join("target/fuzz/corpus").join(target)
}

/// Fuzzes `only` (or every target) with `budget` each, printing a table; fails on the
/// first finding, naming the reproducer. Builds every chosen target once
/// (`cargo fuzz build`: release, with debug assertions and AddressSanitizer), then runs
/// each binary itself, so a long run spends its time fuzzing.
///
/// # Errors
/// Missing tools, a failed build, or a finding.
pub fn run(root: &Path, only: Option<&str>, budget: Budget) -> Result<Vec<TargetResult>, Error> {
    let all = targets(root)?;
    let chosen: Vec<String> = match only {
        Some(t) if all.iter().any(|a| a == t) => vec![t.to_owned()],
        Some(t) => {
            return Err(format!(
                "no fuzz target `{t}`; the targets: {}",
                all.join(", ")
            ))
        }
        None => all,
    };
    ensure_tools(root)?;
    let mut build = Command::new("cargo");
    build.current_dir(root).args(["+nightly", "fuzz", "build"]);
    if let Some(t) = only {
        build.arg(t);
    }
    eprintln!("xtask fuzz: building: {build:?}");
    let status = build
        .status()
        .map_err(|e| format!("cannot start cargo fuzz build: {e}"))?;
    if !status.success() {
        return Err(format!("cargo fuzz build failed ({status})"));
    }
    let bin_dir = root.join("fuzz/target/x86_64-unknown-linux-gnu/release");
    let mut results = Vec::new();
    for target in &chosen {
        let work = work_corpus(root, target);
        let artifacts = root.join("target/fuzz/artifacts").join(target);
        for d in [&work, &artifacts] {
            std::fs::create_dir_all(d)
                .map_err(|e| format!("cannot create {}: {e}", d.display()))?;
        }
        // libFuzzer's output goes to a log file, to follow a long run with `tail -f`.
        let log_path = root.join("target/fuzz/logs").join(format!("{target}.log"));
        let log_file = log_path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::File::create(&log_path))
            .map_err(|e| format!("cannot create {}: {e}", log_path.display()))?;
        let mut c = Command::new(bin_dir.join(target));
        c.current_dir(root)
            .args(libfuzzer_args(root, target, budget));
        eprintln!(
            "xtask fuzz: {target}: {c:?}\nxtask fuzz: {target}: its output: {}",
            log_path.display()
        );
        let started = Instant::now();
        let status = c
            .stdout(Stdio::null())
            .stderr(log_file)
            .status()
            .map_err(|e| format!("cannot start fuzz target {target}: {e}"))?;
        let log = std::fs::read(&log_path)
            .map_err(|e| format!("cannot read {}: {e}", log_path.display()))?;
        let log = String::from_utf8_lossy(&log);
        if !status.success() {
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            return Err(format!(
                "fuzz target {target} failed ({}); the reproducer is in {}; the end of its output:\n{}",
                status,
                artifacts.display(),
                tail.join("\n")
            ));
        }
        let executions = executions(&log)
            .ok_or_else(|| format!("fuzz target {target}: no execution count in its output"))?;
        let corpus = std::fs::read_dir(&work).map_or(0, Iterator::count);
        let r = TargetResult {
            target: target.clone(),
            executions,
            seconds: started.elapsed().as_secs_f64(),
            corpus,
        };
        eprintln!(
            "xtask fuzz: {target}: {} executions in {:.1} s, corpus {}, no finding",
            r.executions, r.seconds, r.corpus
        );
        results.push(r);
    }
    println!(
        "{:<18} {:>14} {:>9} {:>8} {:>8}",
        "target", "executions", "seconds", "max_len", "corpus"
    );
    for r in &results {
        println!(
            "{:<18} {:>14} {:>9.1} {:>8} {:>8}",
            r.target,
            r.executions,
            r.seconds,
            max_len(&r.target),
            r.corpus
        );
    }
    println!("no findings");
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bin_names_are_read_from_bin_tables_only() {
        let m = "[package]\nname = \"x\"\n[[bin]]\nname = \"a\"\npath = \"p\"\n\n[[bin]]\nname=\"b\"\n[dependencies]\nname = \"no\"\n";
        assert_eq!(bin_names(m), ["a", "b"]);
    }

    #[test]
    fn executions_come_from_the_final_stats_or_the_last_status_line() {
        let log =
            "#2\tINITED cov: 10\n#4096\tpulse cov: 12\nstat::number_of_executed_units: 123456\n";
        assert_eq!(executions(log), Some(123_456));
        assert_eq!(
            executions("#2\tINITED\n#8192\tpulse  cov: 3\nDone 8192 runs"),
            Some(8192)
        );
        assert_eq!(executions("nothing"), None);
    }

    #[test]
    fn each_run_gets_its_corpora_its_max_len_and_its_budget() {
        let root = Path::new("/w");
        let args = libfuzzer_args(root, "slot_pool", Budget::RunsWithin(10_000_000, 900));
        assert_eq!(
            args,
            [
                "/w/target/fuzz/corpus/slot_pool",
                "-artifact_prefix=/w/target/fuzz/artifacts/slot_pool/",
                "-max_len=520",
                "-print_final_stats=1",
                "-runs=10000000",
                "-max_total_time=900",
            ]
        );
        let args = libfuzzer_args(root, "pcap_file", Budget::Seconds(15));
        assert!(args.contains(&"-max_len=65536".to_owned()));
        assert_eq!(args.last().map(String::as_str), Some("-max_total_time=15"));
    }

    #[test]
    fn the_manifest_names_every_target_file() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        for t in targets(root).unwrap() {
            let file = root.join(format!("fuzz/fuzz_targets/{t}.rs"));
            assert!(file.is_file(), "{} is missing", file.display());
        }
    }
}
