//! Checks of the fault swarm's sharding (scenarios/SWARM.md), each through the program a
//! user runs:
//!
//! - four nextest partitions (`cargo nextest list --partition count:K/4`) of the `swarm`
//!   test binary hold every block exactly once, and so every seed;
//! - a failing block's JUnit record (a real `cargo nextest run` with the
//!   `swarm-selftest` profile) names the failing seed and the command that reruns it;
//! - the Slurm script (`contrib/slurm/swarm.sbatch`) gives array task K block K, the
//!   same block as the test binary's K-th test, and runs it with `scenario swarm`.
//!
//! The first two run cargo-nextest as a subprocess (in this package, so its build is this
//! test's own); without it they fail, saying how to install it.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use scenarios::swarm;

/// A `cargo` command in this package's folder, with none of the caller's `SWARM_*`
/// settings, nor the `NEXTEST*` variables that an outer nextest run sets for its tests.
fn cargo() -> Command {
    let mut c = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    for (key, _) in std::env::vars_os() {
        let key_text = key.to_string_lossy();
        if key_text.starts_with("SWARM_") || key_text.starts_with("NEXTEST") {
            c.env_remove(&key);
        }
    }
    c.current_dir(env!("CARGO_MANIFEST_DIR"));
    c
}

/// Runs `cargo nextest ARGS` with `env` set; fails the test when cargo-nextest is missing.
fn nextest(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = cargo();
    c.arg("nextest").args(args).envs(env.iter().copied());
    let out = c
        .output()
        .unwrap_or_else(|e| panic!("cannot start {c:?}: {e}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("no such command"),
        "cargo-nextest is missing: install it with `cargo install cargo-nextest --locked`"
    );
    out
}

/// The swarm's tests as `cargo nextest list --partition count:K/N` shows them: every test
/// of the binary, and the ones in partition K.
fn listed(k: u32, n: u32, env: &[(&str, &str)]) -> (Vec<String>, Vec<String>) {
    let partition = format!("count:{k}/{n}");
    let out = nextest(
        &[
            "list",
            "-p",
            "scenarios",
            "--test",
            "swarm",
            "--partition",
            &partition,
            "--message-format",
            "json",
        ],
        env,
    );
    assert!(
        out.status.success(),
        "nextest list {partition} {env:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let list: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("nextest list prints JSON");
    let cases = list["rust-suites"]["scenarios::swarm"]["testcases"]
        .as_object()
        .unwrap_or_else(|| panic!("no scenarios::swarm suite in {list}"));
    let all = cases.keys().cloned().collect();
    let chosen = cases
        .iter()
        .filter(|(_, case)| case["filter-match"]["status"] == "matches")
        .map(|(name, _)| name.clone())
        .collect();
    (all, chosen)
}

#[test]
fn four_nextest_partitions_run_every_seed_exactly_once() {
    // CI's short form (the defaults), the long form, and a range that starts past 0 and
    // ends inside a block.
    for (seeds, block) in [("", ""), ("0..10000", "64"), ("5..1000", "100")] {
        let env: Vec<(&str, &str)> = if seeds.is_empty() {
            Vec::new()
        } else {
            vec![("SWARM_SEEDS", seeds), ("SWARM_BLOCK", block)]
        };
        let range = if seeds.is_empty() {
            0..400
        } else {
            swarm::parse_seeds(seeds).expect("a seed range")
        };
        let mut every_test: Option<Vec<String>> = None;
        let mut run: Vec<String> = Vec::new();
        for k in 1..=4 {
            let (all, chosen) = listed(k, 4, &env);
            assert!(!chosen.is_empty(), "partition {k}/4 of {seeds:?} is empty");
            match &every_test {
                None => every_test = Some(all),
                Some(first) => assert_eq!(&all, first, "partition {k}/4 lists other tests"),
            }
            run.extend(chosen);
        }
        let mut every_test = every_test.expect("four partitions listed");
        every_test.sort();
        run.sort();
        assert_eq!(
            run, every_test,
            "{seeds:?}: each test in exactly one partition"
        );
        let mut covered: Vec<u64> = run
            .iter()
            .flat_map(|name| {
                swarm::block_of_name(name).unwrap_or_else(|| panic!("`{name}` names no block"))
            })
            .collect();
        covered.sort_unstable();
        let want: Vec<u64> = range.collect();
        assert_eq!(covered.len(), want.len(), "{seeds:?}: seeds run");
        assert_eq!(covered, want, "{seeds:?}: every seed exactly once");
    }
}

/// The workspace's target folder, as cargo reports it.
fn target_dir() -> PathBuf {
    let out = cargo()
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    PathBuf::from(
        meta["target_directory"]
            .as_str()
            .expect("a target directory"),
    )
}

#[test]
fn a_failing_block_names_its_seed_and_rerun_command_in_the_junit_record() {
    let junit = target_dir().join("nextest/swarm-selftest/junit.xml");
    // A record left by an earlier run must not pass for this one's.
    if junit.exists() {
        std::fs::remove_file(&junit).expect("the old record can be removed");
    }
    // Seeds 40 and 41, a test each; partition 2 of 2 holds seeds_0041_0041, whose report
    // gets a failure for seed 41 (SWARM_INJECT_FAILURE_SEED, the harness's self-test).
    let out = nextest(
        &[
            "run",
            "-p",
            "scenarios",
            "--test",
            "swarm",
            "--profile",
            "swarm-selftest",
            "--partition",
            "count:2/2",
        ],
        &[
            ("SWARM_SEEDS", "40..42"),
            ("SWARM_BLOCK", "1"),
            ("SWARM_INJECT_FAILURE_SEED", "41"),
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    // 100: nextest's exit code for a run with failing tests.
    assert_eq!(out.status.code(), Some(100), "{stderr}");
    let text = std::fs::read_to_string(&junit)
        .unwrap_or_else(|e| panic!("no JUnit record at {}: {e}\n{stderr}", junit.display()));
    let doc = roxmltree::Document::parse(&text).expect("the record is XML");
    let cases: Vec<roxmltree::Node<'_, '_>> = doc
        .descendants()
        .filter(|n| n.has_tag_name("testcase"))
        .collect();
    let names: Vec<&str> = cases.iter().filter_map(|c| c.attribute("name")).collect();
    assert_eq!(
        names,
        ["seeds_0041_0041"],
        "the partition's one test\n{text}"
    );
    let failure = cases[0]
        .children()
        .find(|n| n.has_tag_name("failure"))
        .unwrap_or_else(|| panic!("no <failure> in\n{text}"));
    // The message is the first line of the text (nextest drops its closing colon).
    let message = failure.attribute("message").unwrap_or_default();
    assert!(
        message.starts_with("Error: seed 41 FAILED (rerun: cargo xtask swarm --seeds 41..42)"),
        "{text}"
    );
    let body = failure.text().unwrap_or_default();
    assert!(
        body.contains("seed 41 FAILED (rerun: cargo xtask swarm --seeds 41..42):\n  injected by SWARM_INJECT_FAILURE_SEED=41"),
        "{text}"
    );
}

/// The Slurm script, run with bash (without Slurm) with `env` and `arg`.
fn sbatch(arg: Option<&str>, env: &[(&str, &str)]) -> Output {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../contrib/slurm/swarm.sbatch");
    let mut c = Command::new("bash");
    c.arg(&script).args(arg);
    for (key, _) in std::env::vars_os() {
        let key_text = key.to_string_lossy();
        if key_text.starts_with("SWARM_") || key_text.starts_with("SLURM_") {
            c.env_remove(&key);
        }
    }
    c.envs(env.iter().copied());
    c.output()
        .unwrap_or_else(|e| panic!("cannot run bash {}: {e}", script.display()))
}

/// The `--seeds A..B` of the command that the script printed or ran.
fn seeds_of(out: &Output) -> Range<u64> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let (_, rest) = stdout
        .split_once(" swarm --seeds ")
        .unwrap_or_else(|| panic!("no `swarm --seeds` in {stdout:?}"));
    let range = rest.split_whitespace().next().unwrap_or_default();
    swarm::parse_seeds(range).expect("a seed range")
}

#[test]
fn the_slurm_script_gives_array_task_k_the_swarm_tests_kth_block() {
    // The defaults (the long form) and the #SBATCH --array line agree.
    let out = sbatch(Some("--blocks"), &[]);
    assert!(out.status.success(), "{out:?}");
    let blocks = swarm::blocks(0..10_000, 64).len();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        blocks.to_string()
    );
    let script = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../contrib/slurm/swarm.sbatch"),
    )
    .expect("the script");
    assert!(
        script.contains(&format!("\n#SBATCH --array=0-{}\n", blocks - 1)),
        "the script's array is not 0-{}",
        blocks - 1
    );
    for (seeds, block) in [("0..10000", "64"), ("0..400", "64"), ("5..1000", "100")] {
        let want = swarm::blocks(
            swarm::parse_seeds(seeds).expect("seeds"),
            block.parse().expect("a block size"),
        );
        let env = [("SWARM_SEEDS", seeds), ("SWARM_BLOCK", block)];
        let out = sbatch(Some("--blocks"), &env);
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            want.len().to_string()
        );
        for (k, expected) in want.iter().enumerate() {
            let task = k.to_string();
            let out = sbatch(
                Some("--dry-run"),
                &[env[0], env[1], ("SLURM_ARRAY_TASK_ID", &task)],
            );
            assert!(out.status.success(), "task {k}: {out:?}");
            assert_eq!(&seeds_of(&out), expected, "{seeds:?} task {k}");
        }
        // A task past the last block is refused.
        let past = want.len().to_string();
        let out = sbatch(
            Some("--dry-run"),
            &[env[0], env[1], ("SLURM_ARRAY_TASK_ID", &past)],
        );
        assert_eq!(out.status.code(), Some(2), "{out:?}");
    }
    // Without a task id (not an array job) it refuses to run.
    assert_eq!(sbatch(None, &[]).status.code(), Some(2));
    // A real run of task 1 of seeds 0..4 in blocks of 2: `scenario swarm` on seeds 2..4.
    let out = sbatch(
        None,
        &[
            ("SWARM_SEEDS", "0..4"),
            ("SWARM_BLOCK", "2"),
            ("SLURM_ARRAY_TASK_ID", "1"),
            ("SLURM_CPUS_PER_TASK", "1"),
            ("SCENARIO_BIN", env!("CARGO_BIN_EXE_scenario")),
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        stdout.contains("swarm seeds 2..4: 2 scenarios (each run twice) on 1 threads"),
        "{stdout}"
    );
}
