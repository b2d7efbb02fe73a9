//! The commands behind `cargo xtask`, each a sequence of cargo invocations.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::vm::{self, VmOptions};

/// An error that ends an xtask command, with a message for the user.
pub type Error = String;

/// The workspace root (the parent of this crate's directory).
fn root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(PathBuf::from).unwrap_or(manifest)
}

fn cargo() -> Command {
    let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    c.current_dir(root());
    c
}

/// Runs a command, echoing it first, and turns a non-zero exit into an error.
fn run(mut c: Command, what: &str) -> Result<(), Error> {
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
        eprintln!(
            "xtask vm: {:?} exited with {} (boot+setup {:.1} s, total {:.1} s)",
            cmd,
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
struct TestBinary {
    executable: PathBuf,
    /// The package folder (cargo runs tests there).
    cwd: PathBuf,
    /// Number of tests it lists, or None when listing failed.
    tests: Option<usize>,
}

/// `cargo test -p backend-hw --no-run --message-format=json`: the test binaries.
fn build_hw_tests() -> Result<Vec<TestBinary>, Error> {
    let mut c = cargo();
    c.args([
        "test",
        "-p",
        "backend-hw",
        "--no-run",
        "--message-format=json-render-diagnostics",
    ]);
    c.stderr(Stdio::inherit());
    eprintln!("xtask: building the hardware tests: {c:?}");
    let out = c.output().map_err(|e| format!("cannot start {c:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "building the hardware tests failed ({})",
            out.status
        ));
    }
    let mut bins = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if msg["reason"] != "compiler-artifact" || msg["profile"]["test"] != true {
            continue;
        }
        let Some(exe) = msg["executable"].as_str() else {
            continue;
        };
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
        bins.push(TestBinary {
            executable: PathBuf::from(exe),
            cwd,
            tests,
        });
    }
    Ok(bins)
}

/// The smoke check run in the VM while backend-hw has no tests: rdma-core's own tools
/// on rxe0 (device query, RC and UD pingpong over loopback on the IPv4-mapped GID).
const SMOKE_SCRIPT: &str = r#"set -e
D=rxe0
echo "== ibv_devinfo -d $D"
ibv_devinfo -d $D
ibv_devinfo -d $D | grep -q 'state:.*PORT_ACTIVE'
echo "== rdma link"
rdma link show
# The GID index of the IPv4-mapped GID (::ffff:10.77.0.1) of port 1.
G=
for i in $(seq 0 15); do
    case "$(cat /sys/class/infiniband/$D/ports/1/gids/$i 2>/dev/null)" in
        0000:0000:0000:0000:0000:ffff:*) G=$i; break ;;
    esac
done
[ -n "$G" ] || { echo "no IPv4-mapped GID on $D"; exit 1; }
echo "== GID index $G: $(cat /sys/class/infiniband/$D/ports/1/gids/$G)"
wait_port() {
    n=0
    until ss -ltn | grep -q ":$1 "; do
        n=$((n + 1)); [ $n -lt 300 ] || { echo "server did not listen on $1"; return 1; }
        sleep 0.1
    done
}
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
echo "== smoke check passed"
"#;

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
        let mut c = cargo();
        c.args(["test", "-p", "backend-hw"])
            .env("RDMA_DEVICE", &device);
        if !rest.is_empty() {
            c.arg("--").args(rest);
        }
        return run(c, &format!("tests (backend hw, device {device})"));
    }

    vm::packages::ensure_installed(&[vm::packages::BUILD_PACKAGES, vm::packages::VM_PACKAGES])?;
    let bins = build_hw_tests()?;
    let with_tests: Vec<&TestBinary> = bins.iter().filter(|b| b.tests != Some(0)).collect();
    let base = VmOptions {
        timeout: Duration::from_secs(timeout),
        env: vec![("RDMA_DEVICE".into(), vm::RXE_DEVICE.into())],
        ..VmOptions::default()
    };
    if with_tests.is_empty() {
        eprintln!(
            "xtask: backend-hw has no tests yet ({} test binaries, none lists a test): running \
             the Soft-RoCE smoke check in the VM instead",
            bins.len()
        );
        let cmd = ["sh".to_owned(), "-c".to_owned(), SMOKE_SCRIPT.to_owned()];
        let opts = VmOptions {
            cwd: root(),
            ..base
        };
        let out = vm::run_in_vm(&cmd, &opts)?;
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
    let mut failed = Vec::new();
    for b in &with_tests {
        let mut cmd = vec![b.executable.to_string_lossy().into_owned()];
        cmd.extend(rest.iter().cloned());
        eprintln!(
            "xtask: running {} in the Soft-RoCE VM (RDMA_DEVICE={})",
            b.executable.display(),
            vm::RXE_DEVICE
        );
        let opts = VmOptions {
            cwd: b.cwd.clone(),
            ..base.clone()
        };
        match vm::run_in_vm(&cmd, &opts) {
            Ok(out) if out.success() => {}
            Ok(out) => failed.push(format!(
                "{} (exit code {})",
                b.executable.display(),
                out.exit_code
            )),
            Err(e) => failed.push(format!("{} (VM error: {e})", b.executable.display())),
        }
    }
    if failed.is_empty() {
        eprintln!(
            "xtask: hardware suite passed in the Soft-RoCE VM ({} test binaries)",
            with_tests.len()
        );
        Ok(())
    } else {
        Err(format!(
            "hardware tests failed in the Soft-RoCE VM:\n  {}",
            failed.join("\n  ")
        ))
    }
}

/// `cargo xtask ci`: what `.ci/run` calls on every submission.
pub fn ci() -> Result<(), Error> {
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
    eprintln!(
        "xtask: hardware suite skipped here; `cargo xtask test --backend hw --vm` runs it on \
         Soft-RoCE in a QEMU VM (not part of ci yet)"
    );
    Ok(())
}

/// `cargo xtask demo`.
pub fn demo() -> Result<(), Error> {
    Err(
        "the demo scenario is not built yet: it needs the simulator and the scenario runner \
         (their issues are open). `cargo xtask test --backend sim` runs what exists."
            .into(),
    )
}
