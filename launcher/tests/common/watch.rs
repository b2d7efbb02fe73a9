//! Launchers a test starts and watches: each must end within [`HANG`], else the test
//! sends it SIGTERM (which it passes to its command), then SIGKILL, and fails; a failing
//! test's launchers still running get the same ([`Reaper`]).

use super::*;
use std::io::Read;
use std::process::Child;
use std::time::{Duration, Instant};

/// How long a launched program may run before the test calls it hung. Not a measure of
/// speed: the runs below take seconds; this only keeps a hung program from hanging the
/// suite.
pub const HANG: Duration = Duration::from_secs(300);

/// Waits for a started launcher, reading its output as it comes; after [`HANG`] sends it
/// SIGTERM, and SIGKILL 10 s later, and fails the test with what it printed.
pub fn finish_or_kill(mut child: Child, who: &str) -> Ran {
    fn drain(mut r: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            String::from_utf8_lossy(&v).into_owned()
        })
    }
    // Whatever output the caller has not taken (it may read stdout itself).
    let out = child.stdout.take().map(drain);
    let err = child.stderr.take().map(drain);
    let start = Instant::now();
    let mut signalled = None;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for the launcher") {
            break s;
        }
        let pid = libc::pid_t::try_from(child.id()).expect("a pid");
        match signalled {
            None if start.elapsed() > HANG => {
                // SAFETY: kill takes a pid (our child's, not yet reaped) and a signal.
                unsafe { libc::kill(pid, libc::SIGTERM) };
                signalled = Some(Instant::now());
            }
            Some(at) if at.elapsed() > Duration::from_secs(10) => {
                // SAFETY: as above.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            _ => {}
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let r = Ran {
        status,
        out: out
            .map(|h| h.join().expect("stdout reader"))
            .unwrap_or_default(),
        err: err
            .map(|h| h.join().expect("stderr reader"))
            .unwrap_or_default(),
    };
    assert!(
        signalled.is_none(),
        "{who} did not end within {HANG:?}: {r:?}"
    );
    r
}

thread_local! {
    /// The launchers this test started (tests run on threads of their own).
    static STARTED: std::cell::RefCell<Vec<u32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Starts a launcher and notes it for [`Reaper`].
pub fn start(mut c: std::process::Command, what: &str) -> Child {
    let child = c.spawn().unwrap_or_else(|e| panic!("start {what}: {e}"));
    STARTED.with(|s| s.borrow_mut().push(child.id()));
    child
}

/// Held by each test: when the test fails, the launchers it started that are still
/// there get SIGTERM, and SIGKILL 10 s later, so that a failure leaves no process.
pub struct Reaper;

impl Drop for Reaper {
    fn drop(&mut self) {
        let pids = STARTED.with(|s| std::mem::take(&mut *s.borrow_mut()));
        if !std::thread::panicking() {
            return;
        }
        let signal = |sig| {
            for &p in &pids {
                if alive(p) {
                    // SAFETY: kill takes a pid of a launcher this test started and a signal.
                    unsafe { libc::kill(libc::pid_t::try_from(p).unwrap_or(0), sig) };
                }
            }
        };
        signal(libc::SIGTERM);
        let start = Instant::now();
        while pids.iter().any(|&p| alive(p)) && start.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
        signal(libc::SIGKILL);
    }
}

/// Runs `server` on h1 (waiting until it listens on `port`), then `client` on h2; both
/// must exit 0. Returns (server, client).
pub fn two_hosts(f: &str, port: u16, server: &[&str], client: &[&str]) -> (Ran, Ran) {
    let mut s = start(run(f, "h1", server), "start the server");
    wait_listening(&mut s, port);
    let c = start(run(f, "h2", client), "start the client");
    let c = finish_or_kill(c, "the client");
    let s = finish_or_kill(s, "the server");
    assert!(c.status.success(), "client: {c:?}\nserver: {s:?}");
    assert!(s.status.success(), "server: {s:?}\nclient: {c:?}");
    (s, c)
}
