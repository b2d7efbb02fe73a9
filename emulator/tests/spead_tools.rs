//! Our own SPEAD tools, built against Debian's libibverbs (`spead-tools --features hw`),
//! on the emulated NIC as two hosts: `spead-recv --backend hw ibv:GROUP:PORT` on h2 and
//! `spead-send --backend hw ibv:GROUP:PORT` on h1 (spead2's RAW_PACKET reader and writer
//! on the default topology's mlx5 hosts), joined to one fabric process. The heaps h2
//! prints are exactly those the same `spead-send` writes to a file and `spead-recv`
//! reads back from it.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::fabric::{scratch, start, Fabric, DEADLINE};
use common::hw_tools;

/// The heap lines of `spead-recv --json` output (its counters line left out).
fn heaps(json: &str) -> Vec<&str> {
    json.lines().filter(|l| l.starts_with("{\"cnt\"")).collect()
}

#[test]
fn spead_send_and_spead_recv_over_verbs_between_two_hosts() {
    let tools = hw_tools();
    let (send, recv) = (tools.join("spead-send"), tools.join("spead-recv"));
    let dir = scratch("spead-tools");
    let heap_args = ["--heaps", "20", "--heap-size", "30000", "--items", "3"];

    // What the heaps are: the same sender into a file, read back.
    let file = dir.join("heaps.spead");
    let wrote = Command::new(&send)
        .args(heap_args)
        .arg(format!("file:{}", file.display()))
        .output()
        .expect("spead-send to a file");
    assert!(wrote.status.success(), "{wrote:?}");
    let read = Command::new(&recv)
        .arg(format!("file:{}", file.display()))
        .arg("--json")
        .output()
        .expect("spead-recv from the file");
    assert!(read.status.success(), "{read:?}");
    let want = String::from_utf8(read.stdout).expect("JSON is text");
    assert_eq!(
        heaps(&want).len(),
        20,
        "the 20 heaps (the stop heap prints none)"
    );

    let fabric = Fabric::start(&dir, &[]);
    let mut r = fabric.program(&recv, "h2");
    r.args([
        "--backend",
        "hw",
        "--ibv-interface",
        "10.100.0.2",
        "ibv:239.10.0.1:7148",
        "--json",
    ]);
    let receiver = start(r, &dir, "recv");
    // The receiver says when its flow rule is in place; what is sent after that arrives.
    let ready = dir.join("recv.err");
    let begin = Instant::now();
    while !std::fs::read_to_string(&ready)
        .unwrap_or_default()
        .contains("spead-recv: receiving on ibv:239.10.0.1:7148 (raw, interface 10.100.0.2)")
    {
        assert!(begin.elapsed() < DEADLINE, "spead-recv never got ready");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut s = fabric.program(&send, "h1");
    s.args(heap_args).args([
        "--backend",
        "hw",
        "--ibv-interface",
        "10.100.0.1",
        "ibv:239.10.0.1:7148",
    ]);
    let sent = start(s, &dir, "send").finish();
    assert!(sent.status.success(), "spead-send: {}", sent.err);
    let packets: u64 = sent
        .err
        .trim()
        .strip_prefix("spead-send: ")
        .and_then(|t| t.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("spead-send's summary: {}", sent.err));
    let got = receiver.finish();
    assert!(got.status.success(), "spead-recv: {}", got.err);
    let (got_heaps, want_heaps) = (heaps(&got.out), heaps(&want));
    assert_eq!(
        got_heaps.len(),
        want_heaps.len(),
        "heaps over verbs: {}",
        got.err
    );
    for (i, (g, w)) in got_heaps.iter().zip(&want_heaps).enumerate() {
        assert!(g == w, "heap {i} over verbs differs from the file's");
    }
    assert!(
        got.err.contains(&format!(
            "spead-recv: ibv:239.10.0.1:7148: {packets} frames, {packets} delivered, 0 dropped"
        )),
        "{}",
        got.err
    );
    let summary = fabric.stop();
    assert!(
        summary.starts_with(&format!("{packets} frames from hosts")),
        "{summary}"
    );
}
