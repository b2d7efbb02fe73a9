//! The commands behind `cargo xtask`, each a sequence of cargo invocations.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::vm::{self, sh_quote, VmOptions};

/// An error that ends an xtask command, with a message for the user.
pub type Error = String;

/// The workspace root (the parent of this crate's directory).
pub fn root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(PathBuf::from).unwrap_or(manifest)
}

pub(crate) fn cargo() -> Command {
    let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    c.current_dir(root());
    c
}

/// Runs a command, echoing it first, and turns a non-zero exit into an error.
pub(crate) fn run(mut c: Command, what: &str) -> Result<(), Error> {
    eprintln!("xtask: {what}: {c:?}");
    let status = c
        .status()
        .map_err(|e| format!("{what}: cannot start {c:?}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{what} failed ({status})"))
    }
}

/// `cargo xtask test --backend sim`: every test that needs no device and no system package.
pub fn test_sim(rest: &[String]) -> Result<(), Error> {
    let mut c = cargo();
    c.args([
        "test",
        "--workspace",
        "--exclude",
        "xtask",
        // The emulator needs Debian packages (rdma-core's headers, its programs): `cargo
        // xtask ci` installs them and runs its tests on their own.
        "--exclude",
        "emulator",
        "--features",
        "verbs-api/mock",
    ]);
    if !rest.is_empty() {
        c.arg("--").args(rest);
    }
    run(c, "tests (backend sim)")
}

/// The options of `cargo xtask vm` besides the command.
#[derive(Debug, Clone)]
pub struct VmArgs {
    /// Seconds before the VM is killed.
    pub timeout: u64,
    /// `KEY=VALUE` pairs for the command's environment.
    pub env: Vec<String>,
    /// Guest memory in MiB.
    pub memory: u32,
    /// Print setup log and timings.
    pub verbose: bool,
    /// Keep the job folder.
    pub keep: bool,
}

/// `cargo xtask vm -- CMD ARGS...`: runs CMD in the Soft-RoCE VM; returns its exit code.
pub fn vm(cmd: &[String], args: &VmArgs) -> Result<i32, Error> {
    let mut env = Vec::new();
    for kv in &args.env {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| format!("--env {kv}: expected KEY=VALUE"))?;
        env.push((k.to_owned(), v.to_owned()));
    }
    let opts = VmOptions {
        timeout: Duration::from_secs(args.timeout),
        env,
        memory_mib: args.memory,
        verbose: args.verbose,
        keep_job: args.keep,
        ..VmOptions::default()
    };
    let out = vm::run_in_vm(cmd, &opts)?;
    if args.verbose || out.exit_code != 0 {
        let mut what = cmd.join(" ");
        if what.chars().count() > 80 {
            what = what.chars().take(77).collect::<String>() + "...";
        }
        eprintln!(
            "xtask vm: `{}` exited with {} (boot+setup {:.1} s, total {:.1} s)",
            what.replace('\n', " "),
            out.exit_code,
            out.boot_time.unwrap_or_default().as_secs_f64(),
            out.total_time.as_secs_f64()
        );
    }
    Ok(out.exit_code)
}

/// The RDMA device to test on this machine: `RDMA_DEVICE`, else the first device with an
/// active port.
fn local_rdma_device() -> Option<String> {
    if let Ok(d) = std::env::var("RDMA_DEVICE") {
        if !d.is_empty() {
            return Some(d);
        }
    }
    let mut devs: Vec<PathBuf> = std::fs::read_dir("/sys/class/infiniband")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    devs.sort();
    devs.into_iter().find_map(|d| {
        let ports = std::fs::read_dir(d.join("ports")).ok()?;
        let active = ports.filter_map(|p| p.ok()).any(|p| {
            std::fs::read_to_string(p.path().join("state")).is_ok_and(|s| s.contains("ACTIVE"))
        });
        active.then(|| d.file_name()?.to_str().map(str::to_owned))?
    })
}

/// A test binary of backend-hw built on the host.
#[derive(Debug)]
pub(crate) struct TestBinary {
    pub(crate) executable: PathBuf,
    /// The package folder (cargo runs tests there).
    pub(crate) cwd: PathBuf,
    /// Number of tests it lists, or None when listing failed.
    pub(crate) tests: Option<usize>,
}

/// What building backend-hw's tests produced.
#[derive(Debug, Default)]
pub(crate) struct HwBuild {
    pub(crate) tests: Vec<TestBinary>,
    /// The folder of the `rc_pingpong` and `ud_pingpong` examples, when both were built.
    examples: Option<PathBuf>,
}

/// The packages of the hardware suite and the feature that builds each one's hardware
/// tests: backend-hw's own device tests, the conformance suite and SPEAD-over-verbs
/// bodies (workspace-tests), and the differential scenario runner (scenarios).
const HW_PACKAGES: [(&str, &str); 3] = [
    ("backend-hw", "device-tests"),
    ("workspace-tests", "hw"),
    ("scenarios", "hw"),
];

/// The test targets of workspace-tests and scenarios that need real verbs (every test of
/// backend-hw runs too). Their other tests are the simulator's and run in `--backend sim`.
const HW_TEST_TARGETS: [&str; 3] = ["conformance_hw", "spead_verbs_hw", "differential_hw"];

/// `cargo test -p backend-hw --features device-tests --no-run --message-format=json`:
/// the test binaries (and the examples, which `cargo test` builds too).
pub(crate) fn build_hw_tests() -> Result<HwBuild, Error> {
    let mut c = cargo();
    c.args([
        "test",
        "--no-run",
        "--message-format=json-render-diagnostics",
    ]);
    for (package, feature) in HW_PACKAGES {
        c.args(["-p", package, "--features", &format!("{package}/{feature}")]);
    }
    c.stderr(Stdio::inherit());
    eprintln!("xtask: building the hardware tests: {c:?}");
    let out = c.output().map_err(|e| format!("cannot start {c:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "building the hardware tests failed ({})",
            out.status
        ));
    }
    let mut build = HwBuild::default();
    let mut examples: Vec<PathBuf> = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if msg["reason"] != "compiler-artifact" {
            continue;
        }
        let Some(exe) = msg["executable"].as_str() else {
            continue;
        };
        if msg["profile"]["test"] != true {
            let is_example = msg["target"]["kind"]
                .as_array()
                .is_some_and(|k| k.iter().any(|k| k == "example"));
            if is_example {
                examples.push(PathBuf::from(exe));
            }
            continue;
        }
        let package = msg["package_id"].as_str().unwrap_or_default();
        let target = msg["target"]["name"].as_str().unwrap_or_default();
        let wanted = package.contains("backend-hw") || HW_TEST_TARGETS.contains(&target);
        if !wanted {
            continue;
        }
        let cwd = msg["manifest_path"]
            .as_str()
            .and_then(|m| Path::new(m).parent().map(Path::to_path_buf))
            .unwrap_or_else(root);
        let tests = Command::new(exe)
            .args(["--list", "--format", "terse"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .filter(|l| l.ends_with(": test"))
                    .count()
            });
        build.tests.push(TestBinary {
            executable: PathBuf::from(exe),
            cwd,
            tests,
        });
    }
    let has = |name: &str| {
        examples
            .iter()
            .find(|e| e.file_name().is_some_and(|n| n == name))
            .and_then(|e| e.parent().map(Path::to_path_buf))
    };
    if let (Some(rc), Some(ud)) = (has("rc_pingpong"), has("ud_pingpong")) {
        if rc == ud {
            build.examples = Some(rc);
        }
    }
    Ok(build)
}

/// The interoperability script of backend-hw's pingpong examples (run in the VM).
const INTEROP_SCRIPT: &str = "backend-hw/scripts/pingpong-interop.sh";

/// The script the VM runs for `test --backend hw --vm`: every test binary, then the
/// pingpong interop script, each reporting `xtask-result: CODE NAME`; then a check that
/// `rdma resource show` counts the same objects as before the suite (no leaks).
fn hw_suite_script(build: &HwBuild, rest: &[String]) -> String {
    let mut s = String::from(
        "fail=0\nrdma resource show > /tmp/xtask-res.before 2>&1\n\
         step() { rc=$1; shift; echo \"xtask-result: $rc $*\"; [ \"$rc\" = 0 ] || fail=1; }\n",
    );
    for b in build.tests.iter().filter(|b| b.tests != Some(0)) {
        let exe = sh_quote(&b.executable.to_string_lossy());
        // One test at a time: the tests share one device and its multicast groups, so
        // concurrent tests would receive each other's traffic.
        let args: String = std::iter::once("--test-threads=1".to_owned())
            .chain(rest.iter().map(|a| sh_quote(a)))
            .map(|a| format!(" {a}"))
            .collect();
        s.push_str(&format!(
            "echo \"== xtask: \"{exe}\ncd {} && {exe}{args}; step $? {exe}\n",
            sh_quote(&b.cwd.to_string_lossy())
        ));
    }
    if let Some(ex) = &build.examples {
        if root().join(INTEROP_SCRIPT).exists() {
            s.push_str(&format!(
                "echo '== xtask: {INTEROP_SCRIPT}'\ncd {} && sh {INTEROP_SCRIPT} {}; step $? {INTEROP_SCRIPT}\n",
                sh_quote(&root().to_string_lossy()),
                sh_quote(&ex.to_string_lossy())
            ));
        }
    }
    s.push_str(
        "rdma resource show > /tmp/xtask-res.after 2>&1\n\
         echo '== xtask: rdma resource show after the suite'\ncat /tmp/xtask-res.after\n\
         if cmp -s /tmp/xtask-res.before /tmp/xtask-res.after; then step 0 leak-check; else\n\
         echo 'rdma resources before the suite:'; cat /tmp/xtask-res.before; step 1 leak-check; fi\n\
         exit $fail\n",
    );
    s
}

/// The smoke check (`cargo xtask vm --smoke`, and `test --backend hw --vm` while backend-hw
/// has no tests): rdma-core's own tools on rxe0: device query, RC and UD pingpong over
/// loopback on the IPv4-mapped GID, and librdmacm UD multicast (mckey). The shell functions
/// it uses are those of `backend-hw/scripts/rxe-helpers.sh` (also pingpong-interop.sh's).
const SMOKE_SCRIPT: &str = concat!(
    include_str!("../../backend-hw/scripts/rxe-helpers.sh"),
    r#"set -e
D=rxe0
echo "== ibv_devinfo -d $D"
ibv_devinfo -d $D
ibv_devinfo -d $D | grep -q 'state:.*PORT_ACTIVE'
echo "== rdma link"
rdma link show
# The GID index of the IPv4-mapped GID (::ffff:10.77.0.1) of port 1.
G=$(ipv4_gid_index $D)
echo "== GID index $G: $(cat /sys/class/infiniband/$D/ports/1/gids/$G)"
echo "== ibv_rc_pingpong (RC send/recv, 4096 B x 1000)"
ibv_rc_pingpong -d $D -g $G -p 18515 -s 4096 -n 1000 & S=$!
wait_port 18515
ibv_rc_pingpong -d $D -g $G -p 18515 -s 4096 -n 1000 127.0.0.1
wait $S
echo "== ibv_ud_pingpong (UD send/recv, 1000 B x 1000)"
ibv_ud_pingpong -d $D -g $G -p 18516 -s 1000 -n 1000 & S=$!
wait_port 18516
ibv_ud_pingpong -d $D -g $G -p 18516 -s 1000 -n 1000 127.0.0.1
wait $S
echo "== mckey (librdmacm UD multicast to 239.1.2.3, receiver and sender on $D)"
stdbuf -oL mckey -m 239.1.2.3 -b 10.77.0.1 -C 10 > /tmp/mckey-recv.log 2>&1 & S=$!
wait_until "the mckey receiver" grep -q 'receiving data transfers' /tmp/mckey-recv.log ||
    { cat /tmp/mckey-recv.log; exit 1; }
mckey -m 239.1.2.3 -b 10.77.0.1 -C 10 -s
wait $S || { echo "mckey receiver failed:"; cat /tmp/mckey-recv.log; exit 1; }
cat /tmp/mckey-recv.log
echo "== smoke check passed"
"#
);

/// The command of the smoke check (`cargo xtask vm --smoke`).
pub fn smoke_command() -> Vec<String> {
    vec!["sh".into(), "-c".into(), SMOKE_SCRIPT.into()]
}

/// `cargo xtask test --backend hw [--vm]`.
pub fn test_hw(use_vm: bool, timeout: u64, rest: &[String]) -> Result<(), Error> {
    if !use_vm {
        let Some(device) = local_rdma_device() else {
            return Err(
                "no RDMA device here (RDMA_DEVICE is not set and /sys/class/infiniband has no \
                 device with an active port; this machine's kernel may have no RDMA support at \
                 all). Either run the suite on Soft-RoCE in a throwaway VM with \
                 `cargo xtask test --backend hw --vm`, or, on a machine with an RDMA NIC, set \
                 RDMA_DEVICE to its name (see `ibv_devices`) and run \
                 `RDMA_DEVICE=mlx5_0 cargo xtask test --backend hw`."
                    .into(),
            );
        };
        vm::packages::ensure_installed(&[vm::packages::BUILD_PACKAGES])?;
        for (package, feature) in HW_PACKAGES {
            let mut c = cargo();
            c.args([
                "test",
                "-p",
                package,
                "--features",
                &format!("{package}/{feature}"),
            ]);
            if package != "backend-hw" {
                for t in HW_TEST_TARGETS {
                    if (package == "scenarios") == (t == "differential_hw") {
                        c.args(["--test", t]);
                    }
                }
            }
            c.env("RDMA_DEVICE", &device);
            // One test at a time: they share the device and its multicast groups.
            c.args(["--", "--test-threads=1"]).args(rest);
            run(c, &format!("{package} hardware tests (device {device})"))?;
        }
        return Ok(());
    }

    vm::packages::ensure_installed(&[vm::packages::BUILD_PACKAGES, vm::packages::VM_PACKAGES])?;
    let build = build_hw_tests()?;
    let opts = VmOptions {
        timeout: Duration::from_secs(timeout),
        env: vec![("RDMA_DEVICE".into(), vm::RXE_DEVICE.into())],
        cwd: root(),
        ..VmOptions::default()
    };
    let n_bins = build.tests.iter().filter(|b| b.tests != Some(0)).count();
    if n_bins == 0 {
        eprintln!(
            "xtask: backend-hw has no tests yet ({} test binaries, none lists a test): running \
             the Soft-RoCE smoke check in the VM instead",
            build.tests.len()
        );
        let out = vm::run_in_vm(&smoke_command(), &opts)?;
        eprintln!(
            "xtask: smoke check: exit code {} (boot+setup {:.1} s, total {:.1} s)",
            out.exit_code,
            out.boot_time.unwrap_or_default().as_secs_f64(),
            out.total_time.as_secs_f64()
        );
        return if out.success() {
            Ok(())
        } else {
            Err(format!(
                "the Soft-RoCE smoke check failed in the VM (exit code {})",
                out.exit_code
            ))
        };
    }
    eprintln!(
        "xtask: running {n_bins} backend-hw test binaries{} in one Soft-RoCE VM \
         (RDMA_DEVICE={})",
        if build.examples.is_some() {
            " and the pingpong interop script"
        } else {
            ""
        },
        vm::RXE_DEVICE
    );
    let cmd = [
        "sh".to_owned(),
        "-c".to_owned(),
        hw_suite_script(&build, rest),
    ];
    let out = vm::run_in_vm(&cmd, &opts)?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let results: Vec<(&str, &str)> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("xtask-result: "))
        .filter_map(|l| l.split_once(' '))
        .collect();
    eprintln!(
        "xtask: hardware suite in the Soft-RoCE VM (boot+setup {:.1} s, total {:.1} s):",
        out.boot_time.unwrap_or_default().as_secs_f64(),
        out.total_time.as_secs_f64()
    );
    for (code, what) in &results {
        let verdict = if *code == "0" { "ok" } else { "FAILED" };
        eprintln!("  {verdict:<6} {what} (exit code {code})");
    }
    let failed: Vec<&str> = results
        .iter()
        .filter(|(code, _)| *code != "0")
        .map(|(_, what)| *what)
        .collect();
    if out.success() && failed.is_empty() {
        Ok(())
    } else if failed.is_empty() {
        Err(format!(
            "the hardware suite failed in the Soft-RoCE VM (exit code {})",
            out.exit_code
        ))
    } else {
        Err(format!(
            "hardware tests failed in the Soft-RoCE VM: {}",
            failed.join(", ")
        ))
    }
}

/// `cargo xtask bench`: the benchmarks, each printing its numbers (spead's heap assembly
/// and UDP receive against spead2, and the simulator's RAW_PACKET path).
pub fn bench() -> Result<(), Error> {
    let mut spead = cargo();
    spead.args(["bench", "-p", "spead", "--bench", "assembly"]);
    run(spead, "spead benchmark (ours vs spead2)")?;
    let mut codec = cargo();
    codec.args(["bench", "-p", "spead", "--bench", "codec"]);
    run(
        codec,
        "spead codec and assembly micro-benchmarks (criterion)",
    )?;
    let mut sim = cargo();
    sim.args(["bench", "-p", "backend-sim", "--bench", "raw_path"]);
    run(
        sim,
        "simulator benchmark (RAW_PACKET path; per-frame cost from 10^4 to 10^7 frames)",
    )?;
    let mut payload = cargo();
    payload.args(["bench", "-p", "scenarios", "--bench", "payload"]);
    run(payload, "scenario harness micro-benchmarks (criterion)")?;
    match scenario_tool(&["meerkat".to_owned()])? {
        0 => Ok(()),
        code => Err(format!("scenario meerkat failed (exit status {code})")),
    }
}

/// Seconds each fuzz target runs in CI (the long form: `cargo xtask fuzz --time 3600`).
pub const CI_FUZZ_SECONDS: u64 = 15;

/// Seconds of the soak in CI and of `cargo xtask soak` without `--minutes`.
pub const CI_SOAK_SECONDS: u64 = 20;

/// `cargo xtask ci`: what `.ci/run` calls on every submission.
pub fn ci() -> Result<(), Error> {
    // The workspace's clippy builds the emulator, whose build reads rdma-core's headers.
    vm::packages::ensure_installed(&[vm::packages::EMU_PACKAGES])?;
    let mut fmt = cargo();
    fmt.args(["fmt", "--all", "--", "--check"]);
    run(fmt, "format check")?;

    let mut clippy = cargo();
    clippy.args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--features",
        "verbs-api/mock",
        "--",
        "-D",
        "warnings",
    ]);
    run(clippy, "clippy")?;

    let mut doc = cargo();
    doc.args([
        "doc",
        "--no-deps",
        "-p",
        "verbs-api",
        "--features",
        "verbs-api/mock",
    ]);
    doc.env("RUSTDOCFLAGS", "-D warnings");
    run(doc, "verbs-api docs")?;

    test_sim(&[])?;
    // xtask's own tests: its bad-input table (no build, no VM: every row is refused
    // while the arguments are checked).
    let mut xtask = cargo();
    xtask.args(["test", "-p", "xtask"]);
    run(xtask, "xtask tests")?;
    // The emulated libibverbs: unmodified Debian programs and C programs on it.
    let mut emu = cargo();
    emu.args(["test", "-p", "emulator"]);
    run(
        emu,
        "emulator tests (Debian programs on the emulated libibverbs)",
    )?;
    // The hardware suites (conformance, backend-hw, SPEAD over verbs, differential),
    // unmodified, on the emulated libibverbs.
    crate::emu_suite::run(&[])?;
    // The short form of the fault swarm is the `swarm` test binary of scenarios (seeds
    // 0..400), which the simulator suite above runs; the long form: `cargo xtask swarm
    // --seeds 0..10000`, or sharded with nextest or Slurm (scenarios/SWARM.md).
    // The short soak (the long form: `cargo xtask soak --minutes 10`), debug build too.
    soak_in(false, CI_SOAK_SECONDS)?;
    // The short form of every fuzz target.
    crate::fuzz::run(&root(), None, crate::fuzz::Budget::Seconds(CI_FUZZ_SECONDS))?;
    // The slot pool's and the simulator's unsafe code under Miri.
    crate::miri::run(&root())?;
    // The checks that decode our captures with tshark (a Debian package, so not part of
    // the simulator suite): the simulator's RoCEv2/RAW capture and spead-capture's pcaps.
    vm::packages::ensure_installed(&[vm::packages::TOOL_PACKAGES])?;
    let mut tshark = cargo();
    tshark.args([
        "test",
        "-p",
        "backend-sim",
        "--features",
        "backend-sim/tshark",
        "--test",
        "verbs_system",
    ]);
    tshark.args([
        "-p",
        "spead-tools",
        "--features",
        "spead-tools/tshark",
        "--test",
        "spead_capture",
    ]);
    run(tshark, "capture checks with tshark")?;
    // The hardware backend and its tests must also pass clippy: they need libibverbs-dev.
    vm::packages::ensure_installed(&[vm::packages::BUILD_PACKAGES])?;
    let mut clippy_hw = cargo();
    clippy_hw.args(["clippy", "--all-targets"]);
    for (package, feature) in HW_PACKAGES {
        clippy_hw.args(["-p", package, "--features", &format!("{package}/{feature}")]);
    }
    clippy_hw.args([
        "-p",
        "spead-tools",
        "--features",
        "spead-tools/hw",
        "--",
        "-D",
        "warnings",
    ]);
    run(clippy_hw, "clippy (hardware features)")?;
    // Real verbs on every run: backend-hw's device tests, the conformance suite, SPEAD
    // over UD verbs and the differential scenarios, on Soft-RoCE in a throwaway VM.
    test_hw(true, 1500, &[])?;
    Ok(())
}

/// Runs the `scenario` tool (scenarios crate, release build) with `args` and returns its
/// exit status (it prints its own errors).
///
/// # Errors
/// When it cannot be built or started.
pub fn scenario_tool(args: &[String]) -> Result<i32, Error> {
    scenario_tool_in(true, args)
}

/// Runs the `scenario` tool with `args`, built in release or (where the test suite has
/// just built it, as in CI) debug; returns its exit status.
fn scenario_tool_in(release: bool, args: &[String]) -> Result<i32, Error> {
    let mut c = cargo();
    c.args(["run", "--quiet"]);
    if release {
        c.arg("--release");
    }
    c.args(["-p", "scenarios", "--bin", "scenario", "--"]);
    c.args(args);
    exit_status(c, "scenario tool")
}

/// Runs a command, echoing it first, and returns its exit status (128 + the signal when
/// a signal ended it).
fn exit_status(mut c: Command, what: &str) -> Result<i32, Error> {
    eprintln!("xtask: {what}: {c:?}");
    let status = c
        .status()
        .map_err(|e| format!("{what}: cannot start {c:?}: {e}"))?;
    use std::os::unix::process::ExitStatusExt;
    Ok(status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1))
}

/// `cargo xtask soak`: the `soak` program of workspace-tests (release build) for
/// `seconds`.
///
/// # Errors
/// When it cannot be built, or finds a drop not counted, a wrong heap or memory growing.
pub fn soak(seconds: u64) -> Result<(), Error> {
    soak_in(true, seconds)
}

fn soak_in(release: bool, seconds: u64) -> Result<(), Error> {
    let mut c = cargo();
    c.args(["run", "--quiet"]);
    if release {
        c.arg("--release");
    }
    c.args(["-p", "workspace-tests", "--bin", "soak", "--"]);
    c.args(["--seconds", &seconds.to_string()]);
    run(c, "soak")
}

/// The options of `cargo xtask emu` besides the command.
#[derive(Debug, Clone, Default)]
pub struct EmuArgs {
    /// A topology file (TOML) instead of the default four hosts.
    pub topology: Option<PathBuf>,
    /// The seed of the simulator's random draws.
    pub seed: Option<u64>,
    /// The host the command is (`VERBS_EMU_HOST`; h1 by default).
    pub host: Option<String>,
    /// Report the verbs objects CMD did not destroy, at its exit (`VERBS_EMU_LEAKS`).
    pub leaks: bool,
    /// Capture every frame between hosts into this pcap (the fabric process writes it).
    pub pcap: Option<PathBuf>,
    /// Start only the fabric process, print its socket's path and serve until Ctrl-C.
    pub fabric_only: bool,
    /// Run CMD alone, simulating every host in its own process (no fabric process).
    pub no_fabric: bool,
}

/// The folder `cargo xtask emu` puts first on `LD_LIBRARY_PATH`: the built emulator as
/// `libibverbs.so.1`, and under the names of the libraries it also stands in for
/// (`librdmacm.so.1`, `libmlx5.so.1`; glibc loads the one file once under every name).
fn emu_lib_dir() -> Result<PathBuf, Error> {
    let so = root().join("target/debug/libibverbs.so");
    let dir = root().join("target/emu/lib");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    for name in ["libibverbs.so.1", "librdmacm.so.1", "libmlx5.so.1"] {
        let link = dir.join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&so, &link)
            .map_err(|e| format!("cannot link {} to {}: {e}", link.display(), so.display()))?;
    }
    Ok(dir)
}

/// Refuses a file that cannot be read as text: missing, a directory, empty, unreadable or
/// not UTF-8; the error names the option and the file.
fn check_readable(option: &str, p: &Path) -> Result<(), Error> {
    let bytes = std::fs::read(p).map_err(|e| format!("{option} {}: {e}", p.display()))?;
    if bytes.is_empty() {
        return Err(format!("{option} {}: empty file", p.display()));
    }
    std::str::from_utf8(&bytes).map_err(|e| {
        format!(
            "{option} {}: not UTF-8 text (byte {})",
            p.display(),
            e.valid_up_to()
        )
    })?;
    Ok(())
}

/// Refuses an output file whose folder does not exist or is not a folder.
fn check_writable_dir(option: &str, p: &Path) -> Result<(), Error> {
    if p.is_dir() {
        return Err(format!("{option} {}: Is a directory", p.display()));
    }
    let dir = match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(format!(
            "{option} {}: {} is not a directory",
            p.display(),
            dir.display()
        )),
        Err(e) => Err(format!("{option} {}: {}: {e}", p.display(), dir.display())),
    }
}

/// A path made absolute (the fabric and CMD may run elsewhere), or an error naming the option.
fn absolute(option: &str, p: &Path) -> Result<PathBuf, Error> {
    if p.is_absolute() {
        return Ok(p.to_path_buf());
    }
    std::env::current_dir()
        .map(|d| d.join(p))
        .map_err(|e| format!("{option} {}: {e}", p.display()))
}

/// The running fabric process of `cargo xtask emu`: it stops when its stdin (a pipe held
/// here) closes, also when xtask dies.
struct EmuFabric {
    child: std::process::Child,
    socket: String,
}

impl EmuFabric {
    /// Starts `verbs-emu-fabric` and waits for its readiness line (its socket's path).
    fn start(args: &EmuArgs) -> Result<Self, Error> {
        let mut c = Command::new(root().join("target/debug/verbs-emu-fabric"));
        c.arg("--stop-on-eof")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        if let Some(t) = &args.topology {
            c.arg("--topology").arg(absolute("--topology", t)?);
        }
        if let Some(seed) = args.seed {
            c.args(["--seed", &seed.to_string()]);
        }
        if let Some(p) = &args.pcap {
            c.arg("--pcap").arg(absolute("--pcap", p)?);
        }
        let mut child = c
            .spawn()
            .map_err(|e| format!("cannot start the fabric process {c:?}: {e}"))?;
        let mut line = String::new();
        let read = child
            .stdout
            .take()
            .map(|out| std::io::BufRead::read_line(&mut std::io::BufReader::new(out), &mut line));
        if !matches!(read, Some(Ok(n)) if n > 0) {
            let status = child
                .wait()
                .map_or_else(|e| e.to_string(), |s| s.to_string());
            return Err(format!(
                "the fabric process did not start ({status}; its message is above)"
            ));
        }
        Ok(EmuFabric {
            child,
            socket: line.trim_end().to_owned(),
        })
    }

    /// Closes its stdin and waits for it to print its summary and exit.
    fn stop(mut self) -> Result<(), Error> {
        drop(self.child.stdin.take());
        let status = self
            .child
            .wait()
            .map_err(|e| format!("waiting for the fabric process: {e}"))?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("the fabric process failed ({status})"))
        }
    }
}

/// `cargo xtask emu [--topology FILE] [--seed N] [--host H] [--pcap OUT] [--leaks]
/// [--no-fabric] -- CMD ARGS...`: builds the emulated libibverbs and the fabric process,
/// starts the fabric (switch, link faults, capture), runs CMD with the library first on
/// `LD_LIBRARY_PATH` joined to the fabric as host H, stops the fabric when CMD exits and
/// returns CMD's exit code (128 + the signal number when a signal ended it).
/// `--fabric-only` starts the fabric, prints its socket's path (what programs give in
/// `VERBS_EMU_FABRIC`) and serves until Ctrl-C.
pub fn emu(cmd: &[String], args: &EmuArgs) -> Result<i32, Error> {
    let command = cmd.split_first();
    if command.is_none() && !args.fabric_only {
        return Err(
            "cargo xtask emu: no command given (usage: cargo xtask emu -- CMD ARGS...)".into(),
        );
    }
    if args.fabric_only && args.no_fabric {
        return Err("cargo xtask emu: --fabric-only and --no-fabric exclude each other".into());
    }
    if args.no_fabric && args.pcap.is_some() {
        return Err("cargo xtask emu: --pcap needs the fabric (drop --no-fabric)".into());
    }
    // Files first, before anything is installed or built.
    if let Some(t) = &args.topology {
        check_readable("--topology", t)?;
    }
    if let Some(p) = &args.pcap {
        check_writable_dir("--pcap", p)?;
    }
    vm::packages::ensure_installed(&[vm::packages::EMU_PACKAGES])?;
    let mut build = cargo();
    build.args(["build", "--quiet", "-p", "emulator"]);
    run(
        build,
        "building the emulated libibverbs and the fabric process",
    )?;
    let lib = emu_lib_dir()?;
    let fabric = if args.no_fabric {
        None
    } else {
        Some(EmuFabric::start(args)?)
    };
    let Some((program, program_args)) = command.filter(|_| !args.fabric_only) else {
        let fabric = fabric.ok_or("cargo xtask emu: no fabric")?;
        println!("{}", fabric.socket);
        eprintln!(
            "xtask emu: the fabric serves until Ctrl-C; run programs as hosts with\n  \
             LD_LIBRARY_PATH={} VERBS_EMU_FABRIC={} VERBS_EMU_HOST=h2 PROGRAM ...{}",
            lib.display(),
            fabric.socket,
            args.topology.as_ref().map_or(String::new(), |t| format!(
                " (and VERBS_EMU_TOPOLOGY={})",
                t.display()
            ))
        );
        let mut fabric = fabric;
        // Child::wait closes the child's stdin first, and a closed stdin stops the fabric
        // (--stop-on-eof): hold it open for as long as this process lives.
        let _stdin = fabric.child.stdin.take();
        let status = fabric
            .child
            .wait()
            .map_err(|e| format!("waiting for the fabric process: {e}"))?;
        return Ok(status.code().unwrap_or(0));
    };
    let mut path = lib.into_os_string();
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH").filter(|p| !p.is_empty()) {
        path.push(":");
        path.push(old);
    }
    let mut c = Command::new(program);
    c.args(program_args).env("LD_LIBRARY_PATH", path);
    match &fabric {
        Some(f) => c.env("VERBS_EMU_FABRIC", &f.socket),
        None => c.env_remove("VERBS_EMU_FABRIC"),
    };
    if let Some(t) = &args.topology {
        let abs =
            std::fs::canonicalize(t).map_err(|e| format!("--topology {}: {e}", t.display()))?;
        c.env("VERBS_EMU_TOPOLOGY", abs);
    }
    if let Some(seed) = args.seed {
        c.env("VERBS_EMU_SEED", seed.to_string());
    }
    if let Some(host) = &args.host {
        c.env("VERBS_EMU_HOST", host);
    }
    if args.leaks {
        c.env("VERBS_EMU_LEAKS", "1");
    }
    let status = c.status();
    if let Some(f) = fabric {
        f.stop()?;
    }
    let status = status.map_err(|e| format!("cannot start {program}: {e}"))?;
    use std::os::unix::process::ExitStatusExt;
    Ok(status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1))
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    /// The smoke check is rxe-helpers.sh followed by its own lines: valid shell, which
    /// calls the helpers it embeds.
    #[test]
    fn smoke_script_is_valid_shell_with_the_shared_helpers() {
        // sh -n reads without running; what it finds wrong goes to the test's stderr.
        let parsed = Command::new("sh")
            .args(["-n", "-c", super::SMOKE_SCRIPT])
            .status()
            .expect("run sh -n");
        assert!(parsed.success(), "sh -n rejects the smoke script");
        for f in ["ipv4_gid_index() {", "wait_port() {"] {
            assert!(super::SMOKE_SCRIPT.contains(f), "{f} missing");
        }
        assert!(super::SMOKE_SCRIPT.contains("G=$(ipv4_gid_index $D)"));
    }
}
