//! Helpers for the launcher's tests: they start `verbs-emu` as a user would, each test on
//! a fabric of its own (`--fabric`), and watch its processes through /proc.

#![allow(dead_code)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

mod hang;
// Not every test binary watches for hangs (the hang watch: a launcher that has not ended
// in time gets SIGTERM, then SIGKILL, and fails its test).
#[allow(unused_imports)]
pub use hang::*;

/// How long a test waits for something that takes well under a second.
pub const DEADLINE: Duration = Duration::from_secs(120);

/// The launcher's binary, with the emulator's library and fabric process built beside it
/// (`cargo build -p emulator`, which is quick when they are up to date).
pub fn verbs_emu() -> PathBuf {
    static BUILT: OnceLock<()> = OnceLock::new();
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_verbs-emu"));
    BUILT.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        // The profile the launcher was built with: its folder's name.
        let profile = bin
            .parent()
            .and_then(Path::file_name)
            .and_then(|n| n.to_str())
            .map_or("dev", |n| if n == "debug" { "dev" } else { n });
        let out = Command::new(env!("CARGO"))
            .args(["build", "--quiet", "--profile", profile])
            .args(["-p", "emulator", "--lib", "--bin", "verbs-emu-fabric"])
            .current_dir(&root)
            .output()
            .expect("run cargo build -p emulator");
        assert!(
            out.status.success(),
            "cargo build -p emulator: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let dir = bin.parent().expect("the binary's folder");
        for f in ["verbs-emu-fabric", "libibverbs.so"] {
            assert!(dir.join(f).exists(), "{f} is not beside {}", bin.display());
        }
    });
    bin
}

/// A program the tests need, from Debian's packages.
pub fn require(program: &str, package: &str) -> PathBuf {
    for dir in ["/usr/bin", "/usr/sbin", "/bin", "/sbin"] {
        let p = Path::new(dir).join(program);
        if p.exists() {
            return p;
        }
    }
    panic!(
        "{program} is not installed: install the Debian package {package} \
         (as root: apt-get install {package})"
    );
}

/// Held by a test for its whole run (a lock on a file of the build's temporary folder,
/// so that also test processes run at once, as nextest runs them, take turns).
#[derive(Debug)]
pub struct OneAtATime(std::fs::File);

impl Drop for OneAtATime {
    fn drop(&mut self) {
        use std::os::fd::AsRawFd;
        // SAFETY: flock takes a live descriptor and an operation.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }
}

/// Makes the tests run one at a time: each emulated process runs its NIC on the wall
/// clock, and on a machine of two cores several programs at once starve each other's
/// progress threads into RC retry timeouts.
pub fn one_test_at_a_time() -> OneAtATime {
    use std::os::fd::AsRawFd;
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("verbs-emu-tests.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .expect("open the tests' lock file");
    loop {
        // SAFETY: flock takes a live descriptor and an operation.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
            return OneAtATime(file);
        }
        let e = std::io::Error::last_os_error();
        assert_eq!(e.kind(), std::io::ErrorKind::Interrupted, "flock: {e}");
    }
}

/// A fabric name of this test process's own.
pub fn fabric(test: &str) -> String {
    format!("t{}-{test}", std::process::id())
}

/// `verbs-emu run --fabric FABRIC --host HOST -- ARGS...`, output captured.
pub fn run(fabric: &str, host: &str, args: &[&str]) -> Command {
    let mut c = Command::new(verbs_emu());
    c.env_remove("XDG_RUNTIME_DIR")
        .args(["run", "--fabric", fabric, "--host", host, "--"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// What a finished command gave.
#[derive(Debug)]
pub struct Ran {
    pub status: ExitStatus,
    pub out: String,
    pub err: String,
}

impl From<Output> for Ran {
    fn from(o: Output) -> Self {
        Ran {
            status: o.status,
            out: String::from_utf8_lossy(&o.stdout).into_owned(),
            err: String::from_utf8_lossy(&o.stderr).into_owned(),
        }
    }
}

/// Runs `c` to the end, its output captured and no stdin (as `Command::output`), under
/// the hang watch ([`finish_or_kill`]: a command still running after [`HANG`] is ended and
/// fails the test).
pub fn ran(c: &mut Command) -> Ran {
    c.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    finish_or_kill(c.spawn().expect("start verbs-emu"), "the launcher")
}

/// Waits for a started command, under the hang watch ([`finish_or_kill`]).
pub fn finish(child: Child) -> Ran {
    finish_or_kill(child, "the launcher")
}

/// perftest's result rows: (#bytes, #iterations) of each row under the `#bytes` header.
pub fn perftest_rows(out: &str) -> Vec<(u64, u64)> {
    out.lines()
        .skip_while(|l| !l.trim_start().starts_with("#bytes"))
        .skip(1)
        .map_while(|l| {
            let mut cols = l.split_whitespace().map(str::parse::<u64>);
            match (cols.next(), cols.next()) {
                (Some(Ok(bytes)), Some(Ok(iters))) => Some((bytes, iters)),
                _ => None,
            }
        })
        .collect()
}

/// Runs a qperf client on h2 against the server on h1. qperf 0.4.11 (Debian's) sends its
/// client the connection manager's port before it listens on it (fixed upstream by
/// qperf commit 118a571, "Fix rdmacm race", not in 0.4.11): a client whose REQ comes
/// first is rejected, as the kernel's CM rejects a REQ nobody listens for, and fails
/// (`unexpected event from RDMA CM: Event rejected`, exit status 1; qperf's error sends
/// its server an urgent message, on which the server's side of that test ends); such a
/// client is started again, at most 100 times. On this 2-core machine at load average
/// 15 it happened in 2 of 5 runs of `cm_programs.rs`'s qperf test, and once in a run of
/// `run.rs`'s.
pub fn qperf_client(f: &str, args: &[&str], what: &str) -> Ran {
    let mut tries = 0;
    loop {
        tries += 1;
        let c = finish_or_kill(start(run(f, "h2", args), "start the client"), what);
        let rejected = !c.status.success()
            && c.out
                .contains("unexpected event from RDMA CM: Event rejected\n");
        if !rejected || tries == 100 {
            assert!(c.status.success(), "{what}: {c:?}");
            return c;
        }
    }
}

/// Reads the rest of a child's stderr (after it ended).
pub fn rest_of_stderr(child: &mut Child) -> String {
    let mut s = String::new();
    if let Some(e) = child.stderr.as_mut() {
        let _ = e.read_to_string(&mut s);
    }
    s
}

/// The processes `pid` started (its children, and theirs).
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut all = Vec::new();
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else {
            continue;
        };
        for t in tasks.filter_map(Result::ok) {
            let path = t.path().join("children");
            let text = std::fs::read_to_string(path).unwrap_or_default();
            for c in text.split_whitespace().filter_map(|s| s.parse().ok()) {
                all.push(c);
                todo.push(c);
            }
        }
    }
    all
}

/// Whether process `pid` exists (and is not a zombie).
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            let state = s.rsplit(')').next().unwrap_or("").split_whitespace().next();
            state != Some("Z")
        })
        .unwrap_or(false)
}

/// Waits until `f` holds; panics naming `what` after [`DEADLINE`].
pub fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < DEADLINE, "{what}: not after {DEADLINE:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether a TCP socket listens on `port` in the network namespace of process `pid`.
pub fn listens(pid: u32, port: u16) -> bool {
    let want = format!(":{port:04X}");
    ["tcp", "tcp6"].iter().any(|f| {
        std::fs::read_to_string(format!("/proc/{pid}/net/{f}"))
            .unwrap_or_default()
            .lines()
            .skip(1)
            .any(|l| {
                let cols: Vec<&str> = l.split_whitespace().collect();
                cols.len() > 3 && cols[1].ends_with(&want) && cols[3] == "0A"
            })
    })
}

/// Waits until a process under `launcher` (the launched server) listens on `port` in its
/// host's network namespace; panics with the launcher's stderr if it ends first.
pub fn wait_listening(launcher: &mut Child, port: u16) {
    let pid = launcher.id();
    let start = Instant::now();
    loop {
        if descendants(pid).into_iter().any(|c| listens(c, port)) {
            return;
        }
        if let Ok(Some(status)) = launcher.try_wait() {
            panic!(
                "the server ended ({status}) before it listened: {}",
                rest_of_stderr(launcher)
            );
        }
        assert!(start.elapsed() < DEADLINE, "nothing listens on {port}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The processes whose command line names `needle`.
pub fn processes_naming(needle: &str) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|c| String::from_utf8_lossy(&c).contains(needle))
                .unwrap_or(false)
        })
        .filter(|pid| alive(*pid))
        .collect()
}

/// The state directory of fabric `name` (as the launcher picks it, XDG_RUNTIME_DIR unset).
pub fn state_dir(name: &str) -> PathBuf {
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    std::env::temp_dir()
        .join(format!("verbs-emu-{uid}"))
        .join(name)
}

/// Waits until fabric `name` has stopped: no holder or fabric process names its folder.
pub fn wait_fabric_gone(name: &str) {
    let dir = state_dir(name);
    let needle = dir.to_string_lossy().into_owned();
    wait_until(&format!("fabric {name} stops"), || {
        processes_naming(&needle).is_empty()
    });
    assert!(
        !dir.join("control.sock").exists(),
        "the holder left its socket"
    );
    assert!(
        !dir.join("fabric").exists(),
        "the fabric left its directory"
    );
    std::fs::remove_dir_all(&dir).expect("remove the fabric's state directory");
}

/// `run` with launcher options before the command.
pub fn run_with(fabric: &str, host: &str, options: &[&str], args: &[&str]) -> Command {
    let mut c = Command::new(verbs_emu());
    c.env_remove("XDG_RUNTIME_DIR")
        .args(["run", "--fabric", fabric, "--host", host])
        .args(options)
        .arg("--")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}
