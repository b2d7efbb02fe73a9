//! `cargo xtask test --backend hw [--vm]`: backend-hw's device tests, the conformance
//! suite, SPEAD over verbs and the differential runner on a local device, or all of them
//! in one Soft-RoCE VM with the pingpong interop script and a leak check.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use super::common::{cargo, root, run, Error};
use super::vm::smoke_command;
use crate::vm::{self, sh_quote, VmOptions};

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
pub(crate) const HW_PACKAGES: [(&str, &str); 3] = [
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
