//! RC between a process that runs and one that does not: perftest between two launched
//! hosts (server on h1, client on h2 naming 10.100.0.1, a direct pair), one of the two
//! programs stopped (SIGSTOP) for 2 s right after the client prints its result header
//! (the transfers start), then continued (SIGCONT). 2 s is well past what the RC
//! requester's retries last at perftest's `timeout` 14 and `retry_cnt` 7 (8 x 67 ms):
//! a peer whose process does not run must not look dead, as a real NIC does not stop
//! when its host's CPU does. Both ends must exit 0 with the one result row asked for.

mod common;

use common::*;
use std::io::{BufRead, BufReader};
use std::sync::mpsc;
use std::time::Duration;

/// perftest's TCP port.
const PORT: u16 = 18515;

/// How long the chosen program stays stopped.
const STOPPED_FOR: Duration = Duration::from_secs(2);

/// The process named `comm` under launcher `pid`.
fn program_under(pid: u32, comm: &str) -> u32 {
    descendants(pid)
        .into_iter()
        .find(|p| {
            std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == comm)
        })
        .unwrap_or_else(|| panic!("no {comm} under launcher {pid}"))
}

fn signal(pid: u32, sig: libc::c_int) {
    let pid = libc::pid_t::try_from(pid).expect("a pid");
    // SAFETY: kill takes a pid (a program this test's launcher started) and a signal.
    let r = unsafe { libc::kill(pid, sig) };
    assert_eq!(
        r,
        0,
        "kill({pid}, {sig}): {}",
        std::io::Error::last_os_error()
    );
}

/// The state letter of `/proc/PID/stat` once it is no longer `R`/`S`/`D` (a SIGSTOP
/// just sent lands when the kernel next schedules the process): `T` if it stopped, `Z`
/// if it had already ended; after 10 s still running, its running state letter.
fn state_once_stopped(pid: u32) -> char {
    for _ in 0..10_000 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("its stat");
        // The state follows the command name in parentheses.
        let state = stat
            .rsplit_once(") ")
            .and_then(|(_, rest)| rest.chars().next())
            .expect("a state letter");
        if !matches!(state, 'R' | 'S' | 'D') {
            return state;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    'R'
}

/// Runs `program ARGS` as server on h1 and client on h2 (line-buffered through `stdbuf`,
/// so that its header is seen as it is printed), stops the server's program (`stop_server`)
/// or the client's for [`STOPPED_FOR`] once the client printed its `#bytes` header, and
/// returns (server, client) with the client's whole output.
fn run_stopping(test: &str, program: &str, args: &[&str], stop_server: bool) -> (Ran, Ran) {
    let f = fabric(test);
    let prog = require(program, "perftest");
    let prog = prog.to_str().expect("a UTF-8 path");
    let stdbuf = require("stdbuf", "coreutils");
    let server = [&[prog][..], args].concat();
    let client = [
        &[stdbuf.to_str().expect("a UTF-8 path"), "-oL", prog][..],
        args,
        &["10.100.0.1"],
    ]
    .concat();
    let mut s = start(run(&f, "h1", &server), "start the server");
    wait_listening(&mut s, PORT);
    let mut c = start(run(&f, "h2", &client), "start the client");
    let out = c.stdout.take().expect("the client's stdout");
    let (header_tx, header) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if line.trim_start().starts_with("#bytes") {
                let _ = header_tx.send(());
            }
            text.push_str(&line);
            text.push('\n');
        }
        text
    });
    // No header (the client ended first): nothing is stopped, and the test fails below
    // with what the client printed.
    let header_seen = header.recv().is_ok();
    let mut stopped_state = None;
    if header_seen {
        let who = if stop_server { s.id() } else { c.id() };
        let pid = program_under(who, program);
        signal(pid, libc::SIGSTOP);
        stopped_state = Some(state_once_stopped(pid));
        std::thread::sleep(STOPPED_FOR);
        signal(pid, libc::SIGCONT);
    }
    let mut c = finish_or_kill(c, "the client");
    c.out = reader.join().expect("the client's stdout reader");
    assert!(header_seen, "the client printed no #bytes header: {c:?}");
    // The program was alive and stopped (not already a zombie) when the stop landed.
    assert_eq!(stopped_state, Some('T'), "client: {c:?}");
    let s = finish_or_kill(s, "the server");
    assert!(c.status.success(), "client: {c:?}\nserver: {s:?}");
    assert!(s.status.success(), "server: {s:?}\nclient: {c:?}");
    wait_fabric_gone(&f);
    (s, c)
}

/// `ib_read_bw`: the server is the READ responder; stopped, it answers nothing while the
/// client's READ requests wait in the pair's ring.
#[test]
fn ib_read_bw_completes_with_its_responder_stopped_for_2_s() {
    let _one = one_test_at_a_time();
    let _reaper = Reaper;
    let args = ["-s", "65536", "-n", "20000", "-x", "1"];
    let (s, c) = run_stopping("stop-read", "ib_read_bw", &args, true);
    assert_eq!(perftest_rows(&c.out), [(65536, 20000)], "{}", c.out);
    assert_eq!(perftest_rows(&s.out), [(65536, 20000)], "{}", s.out);
}

/// `ib_write_bw`: the client is the sender (the RC requester); stopped, its NIC sends
/// nothing and the ACKs for what it sent wait in its ring.
#[test]
fn ib_write_bw_completes_with_its_sender_stopped_for_2_s() {
    let _one = one_test_at_a_time();
    let _reaper = Reaper;
    let args = ["-s", "65536", "-n", "20000", "-x", "1"];
    let (s, c) = run_stopping("stop-write", "ib_write_bw", &args, false);
    assert_eq!(perftest_rows(&c.out), [(65536, 20000)], "{}", c.out);
    assert_eq!(perftest_rows(&s.out), [(65536, 20000)], "{}", s.out);
}
