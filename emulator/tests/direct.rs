//! Direct pairs (the emulator's `fabric::direct`): two joined processes whose hosts'
//! links have no faults send each other their frames through a ring pair of their own,
//! the fabric keeping control. On the socket's client API: the frames sent before and
//! after the switch arrive in order, a process that goes has what it wrote read, its
//! survivor drops the pair and reaches a new process of that host; the fabric's counts
//! hold. With Debian's pingpong: the same exact counts through a pair, across the fabric
//! (`--no-direct`), over a lossy link (no pair), and with a capture (no pair; the pcap has
//! every frame).

mod common;

use std::fs::File;
use std::io::BufReader;
use std::path::Path;
use std::time::{Duration, Instant};

use backend_sim::fabric::ExternalMsg;
use common::fabric::{
    frame, free_port, ip_of, listening, mac_of, scratch, start, summary_counts, Fabric, Ran,
    DEADLINE,
};
use common::require;
use ibverbs::fabric::client::{self, News, Receiver, Sender};
use ibverbs::fabric::sys;

/// One joined process as the tests drive it: what its progress thread would do by hand.
struct Host {
    tx: Sender,
    rx: Receiver,
    /// Pairs added and removed, as the receiver told.
    added: u32,
    removed: u32,
}

impl Host {
    fn join(fabric: &Fabric, last: u8) -> Host {
        let name = format!("h{last}");
        let (tx, rx) = client::join(&fabric.socket, &name, mac_of(last), ip_of(last))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        Host {
            tx,
            rx,
            added: 0,
            removed: 0,
        }
    }

    /// Reads the socket and hands the news to the sender, as `Member::pump` does.
    fn control(&mut self) {
        self.rx.read_control();
        for n in self.rx.take_news() {
            match n {
                News::Added(_) => self.added += 1,
                News::Removed(_) => self.removed += 1,
            }
            self.tx.apply(n);
        }
        self.rx.settle();
    }

    fn send(&mut self, to: u8, me: u8, fill: u8) {
        self.tx.send(&mut ExternalMsg::Frame {
            frame: frame(mac_of(to), mac_of(me), fill),
            index: 0,
            sealed: false,
        });
    }

    /// Runs the control loop until `done` holds (at most [`DEADLINE`]).
    fn until(&mut self, what: &str, done: impl Fn(&Host) -> bool) {
        let begin = Instant::now();
        while !done(self) {
            assert!(begin.elapsed() < DEADLINE, "{what} never came");
            self.wait();
            self.control();
        }
    }

    /// The next frame, from the fabric or a pair.
    fn next(&mut self) -> Vec<u8> {
        let begin = Instant::now();
        let mut buf = Vec::new();
        loop {
            self.control();
            if self.rx.pop(&mut buf).is_some() {
                return buf;
            }
            assert!(!self.rx.is_gone(), "the fabric went away");
            assert!(begin.elapsed() < DEADLINE, "no frame came");
            self.wait();
        }
    }

    fn wait(&self) {
        if !self.rx.about_to_sleep() {
            let mut fds = Vec::new();
            self.rx.poll_fds(&mut fds);
            sys::poll(&mut fds, Some(Duration::from_millis(100))).expect("poll");
        }
    }
}

#[test]
fn a_pair_keeps_order_and_outlives_a_peer_that_goes() {
    let dir = scratch("direct-pair");
    let fabric = Fabric::start(&dir, &[]);
    let mut h1 = Host::join(&fabric, 1);
    let mut h2 = Host::join(&fabric, 2);
    // Before h1 hears of the pair: through the fabric.
    for fill in 1..=3 {
        h1.send(2, 1, fill);
    }
    h1.until("h1's pair", |h| h.added == 1);
    // After: through the pair (h1 switches at its first frame for h2).
    for fill in 4..=6 {
        h1.send(2, 1, fill);
    }
    for fill in 1..=6 {
        assert_eq!(h2.next(), frame(mac_of(2), mac_of(1), fill), "frame {fill}");
    }
    assert_eq!(h2.added, 1);
    h2.send(1, 2, 7);
    assert_eq!(h1.next(), frame(mac_of(1), mac_of(2), 7));
    // h2 writes one h1 never reads; h1 writes two more and goes before h2 reads them:
    // h2 still reads them, then drops the pair.
    h2.send(1, 2, 12);
    h1.send(2, 1, 8);
    h1.send(2, 1, 9);
    drop(h1);
    assert_eq!(h2.next(), frame(mac_of(2), mac_of(1), 8));
    assert_eq!(h2.next(), frame(mac_of(2), mac_of(1), 9));
    h2.until("h1's going", |h| h.removed == 1);
    // To nobody: through the fabric, which counts it.
    h2.send(1, 2, 10);
    // A new process is h1: a new pair, and h2 reaches it.
    let mut h1 = Host::join(&fabric, 1);
    h2.until("the new pair", |h| h.added == 2);
    h1.until("the new pair", |h| h.added == 1);
    h2.send(1, 2, 11);
    assert_eq!(h1.next(), frame(mac_of(1), mac_of(2), 11));
    drop((h1, h2));
    let summary = fabric.stop();
    // 12 frames: 3 + 1 through the fabric (one of them to a host with no process, which
    // the switch delivers to its port), 8 through pairs (one of them written for a
    // process that went without reading it: for no process too).
    assert!(
        summary.starts_with("12 frames from hosts, 12 delivered, lost: no process 2;"),
        "{summary}"
    );
    assert!(
        summary.contains("; 8 of the frames went host to host directly;"),
        "{summary}"
    );
}

const ITERS: u32 = 100;

/// `ibv_rc_pingpong -g 1 -n ITERS` as server on h1 and client on h2, joined to `fabric`
/// (reading `topology` when given): both finish and print their byte and iteration
/// counts.
fn rc_pingpong(fabric: &Fabric, dir: &Path, topology: Option<&Path>) {
    let prog = require("ibv_rc_pingpong", "ibverbs-utils");
    let port = free_port().to_string();
    let iters = ITERS.to_string();
    let args = ["-g", "1", "-n", &iters, "-p", &port];
    let host = |h: &str| {
        let mut c = fabric.program(&prog, h);
        c.args(args);
        if let Some(t) = topology {
            c.env("VERBS_EMU_TOPOLOGY", t);
        }
        c
    };
    let mut server = start(host("h1"), dir, "h1");
    let begin = Instant::now();
    while !listening(port.parse().expect("a port")) {
        assert!(!server.exited(), "{}", server.err_so_far());
        assert!(begin.elapsed() < DEADLINE, "the server never listened");
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut c = host("h2");
    c.arg("localhost");
    let client = start(c, dir, "h2").finish();
    let server = server.finish();
    for (who, r) in [("server", &server), ("client", &client)] {
        check(who, r);
    }
}

fn check(who: &str, r: &Ran) {
    assert!(r.status.success(), "{who}: {}{}", r.out, r.err);
    assert_eq!(r.err, "", "{who}'s stderr");
    let lines: Vec<&str> = r.out.lines().collect();
    let bytes = 4096 * u64::from(ITERS) * 2;
    assert!(
        lines.len() == 4
            && lines[2].starts_with(&format!("{bytes} bytes in "))
            && lines[3].starts_with(&format!("{ITERS} iters in ")),
        "{who}: {}",
        r.out
    );
}

#[test]
fn pingpong_counts_are_exact_through_a_pair_the_fabric_a_lossy_link_and_a_capture() {
    // At least 10 frames an iteration (4 packets and an ACK each way); more when a
    // descheduled process made RC time out and send again.
    let n = 10 * u64::from(ITERS);
    let lossless = |summary: &str| {
        let (sent, delivered, lost) = summary_counts(summary);
        assert!(
            sent >= n && sent == delivered && lost == 0 && summary.contains(" lost: none;"),
            "{summary}"
        );
        sent
    };

    let dir = scratch("direct-pingpong");
    let fabric = Fabric::start(&dir, &[]);
    rc_pingpong(&fabric, &dir, None);
    let summary = fabric.stop();
    let sent = lossless(&summary);
    // The first frames go through the fabric while the processes have not heard of their
    // pair yet (the pair is made when h2 joins, and each hears of it on its next round).
    let direct = summary
        .split("; ")
        .find_map(|part| part.strip_suffix(" of the frames went host to host directly"))
        .and_then(|d| d.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no direct frames in {summary}"));
    assert!((1..=sent).contains(&direct), "{summary}");

    let dir = scratch("direct-none");
    let fabric = Fabric::start(&dir, &["--no-direct"]);
    rc_pingpong(&fabric, &dir, None);
    let summary = fabric.stop();
    lossless(&summary);
    assert!(!summary.contains("directly"), "{summary}");

    // h2's link loses frames: no pair for h2, RC sends again what was lost.
    let dir = scratch("direct-lossy");
    let topo = dir.join("lossy.toml");
    std::fs::write(
        &topo,
        "[[host]]\nname = \"h1\"\nip = \"10.100.0.1\"\n\n\
         [[host]]\nname = \"h2\"\nip = \"10.100.0.2\"\nfaults = { loss = 0.02 }\n",
    )
    .expect("write the topology");
    let t = topo.to_str().expect("a UTF-8 path");
    let fabric = Fabric::start(&dir, &["--topology", t, "--seed", "5"]);
    rc_pingpong(&fabric, &dir, Some(&topo));
    let summary = fabric.stop();
    let (sent, delivered, lost) = summary_counts(&summary);
    assert!(lost > 0, "the seed lost nothing: {summary}");
    assert_eq!(sent, delivered + lost, "{summary}");
    assert!(!summary.contains("directly"), "{summary}");

    // A capture: no pair, and the pcap holds every frame the hosts sent.
    let dir = scratch("direct-pcap");
    let pcap = dir.join("run.pcap");
    let fabric = Fabric::start(&dir, &["--pcap", pcap.to_str().expect("a UTF-8 path")]);
    rc_pingpong(&fabric, &dir, None);
    let summary = fabric.stop();
    let sent = lossless(&summary);
    assert!(!summary.contains("directly"), "{summary}");
    let f = File::open(&pcap).expect("open the capture");
    let mut r = netwire::pcap::PcapReader::new(BufReader::new(f)).expect("a pcap");
    let mut captured = 0;
    while r.next_record().expect("a good record").is_some() {
        captured += 1;
    }
    assert_eq!(captured, sent, "{summary}");
}
