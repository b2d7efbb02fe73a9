//! spead2 (4.5.1, the PyPI wheel) on the emulated NIC: it `dlopen`s libibverbs.so.1,
//! librdmacm.so.1 and libmlx5.so.1 from the emulator's folder, finds its device with
//! `rdma_bind_addr` on host h1's address, and an ibverbs sender (`UdpIbvStream`) and an
//! ibverbs reader (`add_udp_ibv_reader`) in one process exchange heaps over a multicast
//! group (mlx5's multicast loopback, steered by flow rules to the reader's RAW_PACKET QP).
//!
//! spead2's own ibverbs tests (its 4.5.1 test suite, run by pytest) pass on it unmodified.
//!
//! Then as two programs on two hosts joined to a fabric process: the sender on h1, the
//! reader on h2 (`tests/py/spead2_hosts.py`), on a clean link and on one that loses
//! frames, where spead2's own counters show what the fabric dropped.
//!
//! spead2's reader also joins the group with a kernel UDP socket on the interface address
//! (and its sender binds one), so each program runs in a network namespace of its own
//! (`unshare -n`, as root) with a veth interface holding its host's address.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::fabric::{scratch, start, Fabric, DEADLINE};
use common::{emulated, require, run, stderr, stdout};
use serde_json::{json, Value};

/// `unshare`, which runs the programs in network namespaces of their own.
fn unshare() -> std::path::PathBuf {
    require("unshare", "util-linux")
}

/// `unshare` (as `cmd`, set up to run as an emulated host) made to run the program and
/// arguments the caller appends in a new network namespace, with loopback up and a veth
/// interface holding `ip`: spead2's ibverbs transports bind kernel sockets to their
/// interface address (the reader joins its group with one, the sender takes its UDP
/// source port from one).
fn in_namespace(mut cmd: Command, ip: &str) -> Command {
    require("ip", "iproute2");
    cmd.args(["-n", "sh", "-c"])
        .arg(format!(
            "ip link set lo up && ip link add v0 type veth peer name v1 && \
             ip addr add {ip}/24 dev v0 && ip link set v1 up && ip link set v0 up && \
             exec \"$@\""
        ))
        .arg("sh");
    cmd
}

/// Heaps the sender sends (cnt 1 ..= HEAPS), and the end-of-stream heap after them.
const HEAPS: u64 = 64;

/// What `tests/py/spead2_multicast.py` puts in heap `i`'s item 0x1001.
fn payload(i: u64) -> Vec<u8> {
    let n = 100 + 3000 * (i % 4);
    (0..n).map(|k| ((7 * i + k) % 251) as u8).collect()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn spead2_sends_and_receives_multicast_heaps_on_the_emulated_nic() {
    let python = workspace_tests::spead2::python();
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/py/spead2_multicast.py");
    let mut c = in_namespace(emulated(&unshare()), "10.100.0.1");
    c.arg(python)
        .arg(script)
        .args(["239.10.0.1", "7148", &HEAPS.to_string()]);
    let o = run(c);
    assert_eq!(stderr(&o), "", "spead2 (or the emulator) complained");
    assert!(o.status.success());
    let got: Vec<Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let mut want: Vec<Value> = (0..HEAPS)
        .map(|i| {
            json!({
                "cnt": i + 1,
                "items": [
                    {"id": 0x1000, "hex": hex(&i.to_be_bytes())},
                    {"id": 0x1001, "hex": hex(&payload(i))},
                ],
            })
        })
        .collect();
    want.push(json!({"stats": {"heaps": HEAPS, "incomplete_heaps_evicted": 0}}));
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w);
    }
}

/// spead2's own tests of its ibverbs transports, in 4.5.1's test suite: with
/// `SPEAD2_TEST_IBV_INTERFACE_ADDRESS` set they run instead of skipping (spead2's CI skips
/// them for want of a NIC). `test_passthrough.py` sends and receives heaps of every item
/// kind over an `UdpIbvStream` and an `add_udp_ibv_reader` reader (substreams and group
/// modes, zero-copy memory regions); `test_recv.py` and `test_send.py` check the
/// `UdpIbvConfig`s and the streams' refusals of bad ones (no endpoints, IPv6, an address
/// no device holds, empty or overlapping memory regions). Every reader they make takes
/// spead2's multi-packet receive queue (46 of them, each logged).
const SPEAD2_IBV_TESTS: [(&str, usize); 3] = [
    ("tests/test_passthrough.py", 24),
    ("tests/test_recv.py", 10),
    ("tests/test_send.py", 12),
];

#[test]
fn spead2s_own_ibverbs_tests_pass_on_the_emulated_nic() {
    let (python, suite) = workspace_tests::spead2::upstream_suite();
    let mut c = in_namespace(emulated(&unshare()), "10.100.0.1");
    c.current_dir(&suite)
        .env("SPEAD2_TEST_IBV_INTERFACE_ADDRESS", "10.100.0.1")
        .arg(python)
        .args([
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            "-rA",
            "-k",
            "ibv or Ibv",
            // spead2's log in each test's report: which reader it made.
            "--log-level=DEBUG",
        ])
        .args(SPEAD2_IBV_TESTS.map(|(file, _)| file));
    let o = run(c);
    let out = stdout(&o);
    assert!(
        o.status.success(),
        "spead2's tests failed:\n{out}{}",
        stderr(&o)
    );
    for (file, n) in SPEAD2_IBV_TESTS {
        let passed = out
            .lines()
            .filter(|l| l.starts_with(&format!("PASSED {file}::")))
            .count();
        assert_eq!(passed, n, "{file}:\n{out}");
    }
    // Every ibverbs reader took the multi-packet receive queue (the emulated mlx5 has
    // direct verbs); none fell back to the ordinary reader (spead2 logs that at DEBUG).
    assert!(
        !out.contains("Multi-packet receive queues not supported"),
        "{out}"
    );
    let mprq = out
        .lines()
        .filter(|l| l.ends_with("Using multi-packet receive queue for verbs acceleration"))
        .count();
    assert_eq!(mprq, 46, "{out}");
    let total: usize = SPEAD2_IBV_TESTS.iter().map(|(_, n)| n).sum();
    let summary = out.lines().last().unwrap_or_default();
    assert!(
        summary.starts_with(&format!("{total} passed, ")) && summary.contains(" deselected in "),
        "{summary}"
    );
}

/// Heaps the two-host tests send.
const HOST_HEAPS: u64 = 64;

/// The packets of the two-host tests' heaps (those of 9100 bytes take two 8972-byte
/// packets), and the end of the stream.
const HOST_PACKETS: u64 = HOST_HEAPS + HOST_HEAPS / 4 + 1;

/// `unshare -n` running `tests/py/spead2_hosts.py MODE` as `host` (address `ip`) of
/// `fabric`, in a namespace whose veth interface holds `ip`.
fn spead2_host(
    fabric: &Fabric,
    host: &str,
    ip: &str,
    mode: &str,
    topology: Option<&Path>,
) -> Command {
    let python = workspace_tests::spead2::python();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/py/spead2_hosts.py");
    let mut c = in_namespace(fabric.program(&unshare(), host), ip);
    c.arg(python)
        .arg(script)
        .args([mode, "239.10.0.2", "7150", ip, &HOST_HEAPS.to_string()]);
    if let Some(t) = topology {
        c.env("VERBS_EMU_TOPOLOGY", t);
    }
    c
}

/// What the two-host run printed (the reader checked to have used spead2's multi-packet
/// receive queue): the reader's JSON lines after its readiness line,
/// the lines of its stderr, and the fabric's summary.
struct HostsRun {
    heaps: Vec<Value>,
    stats: Value,
    reader_err: String,
    summary: String,
}

/// The reader on h2 and, once its flows are in place, the sender on h1.
fn spead2_two_hosts(name: &str, topology: Option<&str>, seed: &str) -> HostsRun {
    let dir = scratch(name);
    let topo = topology.map(|t| {
        let p = dir.join("topology.toml");
        std::fs::write(&p, t).expect("write the topology");
        p
    });
    let mut args = vec!["--seed", seed];
    if let Some(p) = &topo {
        args.extend(["--topology", p.to_str().expect("a UTF-8 path")]);
    }
    let fabric = Fabric::start(&dir, &args);
    let mut reader = start(
        spead2_host(&fabric, "h2", "10.100.0.2", "recv", topo.as_deref()),
        &dir,
        "reader",
    );
    let ready = dir.join("reader.out");
    let begin = Instant::now();
    while !std::fs::read_to_string(&ready)
        .expect("the reader's stdout")
        .starts_with("{\"ready\": true}\n")
    {
        assert!(
            !reader.exited() && begin.elapsed() < DEADLINE,
            "the reader never got ready: {}",
            std::fs::read_to_string(dir.join("reader.err")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let sender = start(
        spead2_host(&fabric, "h1", "10.100.0.1", "send", topo.as_deref()),
        &dir,
        "sender",
    )
    .finish();
    let reader = reader.finish();
    let summary = fabric.stop();
    assert!(sender.status.success(), "the sender: {sender:?}");
    assert_eq!(sender.err, "", "the sender complained");
    assert_eq!(sender.out, format!("{{\"sent\": {HOST_HEAPS}}}\n"));
    assert!(reader.status.success(), "the reader: {reader:?}");
    let mut lines: Vec<Value> = reader
        .out
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let log = lines.pop().expect("the reader's log");
    // h2's mlx5 has direct verbs: spead2's reader takes the multi-packet receive queue.
    assert_eq!(log, json!({"log": [MPRQ_LOG]}));
    let stats = lines.pop().expect("the reader's stats");
    HostsRun {
        heaps: lines,
        stats: stats["stats"].clone(),
        reader_err: reader.err,
        summary,
    }
}

/// Heap `cnt` as the reader prints it.
fn heap_json(cnt: u64) -> Value {
    let i = cnt - 1;
    json!({
        "cnt": cnt,
        "items": [
            {"id": 0x1000, "hex": hex(&i.to_be_bytes())},
            {"id": 0x1001, "hex": hex(&payload(i))},
        ],
    })
}

#[test]
fn spead2_sends_from_one_host_to_a_reader_on_another() {
    let r = spead2_two_hosts("spead2-hosts", None, "1");
    assert_eq!(r.reader_err, "", "spead2 (or the emulator) complained");
    let want: Vec<Value> = (1..=HOST_HEAPS).map(heap_json).collect();
    assert_eq!(r.heaps, want);
    assert_eq!(
        r.stats,
        json!({
            "heaps": HOST_HEAPS,
            "incomplete_heaps_evicted": 0,
            "incomplete_heaps_flushed": 0,
            "packets": HOST_PACKETS,
        })
    );
    assert!(
        r.summary.starts_with(&format!(
            "{HOST_PACKETS} frames from hosts, {HOST_PACKETS} delivered, lost: none;"
        )),
        "{}",
        r.summary
    );
}

/// The number after `word` in the fabric's summary.
fn count_after(summary: &str, word: &str) -> u64 {
    let words: Vec<&str> = summary.split_whitespace().collect();
    words
        .iter()
        .position(|w| *w == word)
        .and_then(|i| words.get(i + 1))
        .and_then(|w| w.trim_end_matches([',', ';']).parse().ok())
        .unwrap_or_else(|| panic!("no number after {word:?} in {summary:?}"))
}

#[test]
fn spead2_counts_what_a_lossy_link_drops() {
    // h2's link loses 5% of the frames the switch sends it. Only the sender's frames
    // cross it, in the order sent, so which ones are lost follows from the seed; seed 1
    // keeps the end of the stream.
    let r = spead2_two_hosts(
        "spead2-lossy",
        Some(
            "[[host]]\nname = \"h1\"\nip = \"10.100.0.1\"\n\n\
             [[host]]\nname = \"h2\"\nip = \"10.100.0.2\"\nfaults = { loss = 0.05 }\n",
        ),
        "1",
    );
    let s = &r.summary;
    let lost = count_after(s, "loss");
    assert!(
        s.starts_with(&format!(
            "{HOST_PACKETS} frames from hosts, {} delivered, lost: loss {lost};",
            HOST_PACKETS - lost
        )),
        "{s}"
    );
    assert!(lost > 0, "the seed lost nothing: {s}");
    let n = |k: &str| {
        r.stats[k]
            .as_u64()
            .unwrap_or_else(|| panic!("no {k} in {}", r.stats))
    };
    // spead2 counted every frame that reached it: all but the ones the link lost.
    assert_eq!(n("packets"), HOST_PACKETS - lost);
    // Its heap count holds the complete heaps and the incomplete ones it gave up on (it
    // says so on stderr, one line each); the heaps missing altogether are the drops.
    let incomplete = n("incomplete_heaps_evicted") + n("incomplete_heaps_flushed");
    assert_eq!(n("heaps"), r.heaps.len() as u64 + incomplete);
    assert!(n("heaps") < HOST_HEAPS, "{}", r.stats);
    assert_eq!(
        r.reader_err.lines().count() as u64,
        incomplete,
        "{}",
        r.reader_err
    );
    assert!(r
        .reader_err
        .lines()
        .all(|l| l.starts_with("dropped incomplete heap ")));
    // Every heap that arrived whole is the one sent, in order.
    let mut last = 0;
    for h in &r.heaps {
        let cnt = h["cnt"].as_u64().expect("a cnt");
        assert!(cnt > last && cnt <= HOST_HEAPS, "{h}");
        assert_eq!(*h, heap_json(cnt));
        last = cnt;
    }
}

/// spead2's own command-line tools, from its wheel, over ibverbs between two hosts:
/// `spead2_send.py --ibv` on h1 sends 100 heaps of 64 KiB to a multicast group and
/// `spead2_recv.py --ibv` on h2 receives every one, in order, and the end of the stream.
/// (The counters `spead2_recv.py` prints at the end are not compared: it reads them
/// without stopping the stream, so the last batch's may be missing; see
/// `tests/py/spead2_hosts.py`.)
#[test]
fn spead2s_own_tools_send_and_receive_over_ibverbs_between_two_hosts() {
    let python = workspace_tests::spead2::python();
    let bin = python.parent().expect("the venv's bin").to_path_buf();
    let dir = scratch("spead2-tools");
    let fabric = Fabric::start(&dir, &[]);
    let mut r = in_namespace(fabric.program(&unshare(), "h2"), "10.100.0.2");
    // Receive buffers for more than the whole stream and a ring for every heap: spead2
    // posts buffer / packet slots (16 MiB / 1472 B: some 11,000, against 4,601 frames:
    // 1472 bytes of payload is spead2_send.py's packet size), so however the receiving
    // process is scheduled the NIC always has a slot posted, and spead2's worker never
    // waits for the printing loop: nothing is dropped (the fabric is lossless).
    r.arg(&python).arg(bin.join("spead2_recv.py")).args([
        "--packet",
        "1472",
        "--buffer",
        "16777216",
        "--ring-heaps",
        "128",
        "--log",
        "DEBUG",
        "--ibv",
        "--bind",
        "10.100.0.2",
        "239.10.0.5:8888",
    ]);
    let mut receiver = start(r, &dir, "receiver");
    // spead2_recv.py adds its readers (the flows in place), then makes its event loop,
    // which asyncio logs at DEBUG: from then on the reader takes what comes.
    let begin = Instant::now();
    while !receiver
        .err_so_far()
        .contains("DEBUG:asyncio:Using selector")
    {
        assert!(
            !receiver.exited() && begin.elapsed() < DEADLINE,
            "the receiver never got ready: {}",
            receiver.err_so_far()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut s = in_namespace(fabric.program(&unshare(), "h1"), "10.100.0.1");
    s.arg(&python).arg(bin.join("spead2_send.py")).args([
        "--ibv",
        "--bind",
        "10.100.0.1",
        "--heaps",
        "100",
        "--heap-size",
        "65536",
        "--rate",
        "0.5",
        "239.10.0.5:8888",
    ]);
    let sender = start(s, &dir, "sender").finish();
    let receiver = receiver.finish();
    let summary = fabric.stop();
    assert!(sender.status.success(), "the sender: {sender:?}");
    assert!(
        sender.out.starts_with("Sent 6738660 bytes in "),
        "the sender: {sender:?}"
    );
    assert!(receiver.status.success(), "the receiver: {receiver:?}");
    let heaps: String = (1..=100)
        .map(|i| format!("Received heap {i} on stream 239.10.0.5:8888\nTest item 0\n"))
        .collect();
    assert!(
        receiver.out.starts_with(&format!(
            "{heaps}Shutting down stream 239.10.0.5:8888 after 100 heaps\n"
        )),
        "the receiver: {}",
        receiver.out
    );
    assert!(summary.contains(" delivered, lost: none;"), "{summary}");
}

/// Item 0x1001 of heap `i` in `tests/py/spead2_mprq.py`: `size + 7 * i` bytes, byte `k`
/// = `(3 * i + k) % 251`.
fn mprq_payload(i: u64, size: u64) -> Vec<u8> {
    (0..size + 7 * i)
        .map(|k| ((3 * i + k) % 251) as u8)
        .collect()
}

/// The spead2 log line of its multi-packet receive queue reader
/// (`reader_factory<udp_ibv_reader>` in spead2's include/spead2/recv_udp_ibv.h).
const MPRQ_LOG: &str = "INFO Using multi-packet receive queue for verbs acceleration";

/// Runs `tests/py/spead2_mprq.py` on host h1 (of `topology`, if given): `heaps` heaps of
/// `size`-byte payloads in packets of at most `packet` bytes. Checks every heap arrived
/// whole and nothing was said on stderr; returns spead2's log.
fn spead2_mprq(heaps: u64, packet: u64, size: u64, topology: Option<&str>) -> Vec<Value> {
    let python = workspace_tests::spead2::python();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/py/spead2_mprq.py");
    let mut c = in_namespace(emulated(&unshare()), "10.100.0.1");
    if let Some(t) = topology {
        let dir = scratch(&format!("spead2-mprq-{packet}-{size}"));
        let p = dir.join("topology.toml");
        std::fs::write(&p, t).expect("write the topology");
        c.env("VERBS_EMU_TOPOLOGY", p);
    }
    c.arg(python).arg(script).args([
        "239.10.0.3".to_string(),
        "7152".to_string(),
        heaps.to_string(),
        packet.to_string(),
        size.to_string(),
    ]);
    let o = run(c);
    assert_eq!(stderr(&o), "", "spead2 (or the emulator) complained");
    assert!(o.status.success());
    let mut got: Vec<Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let log = got.pop().expect("the log line");
    let want: Vec<Value> = (0..heaps)
        .map(|i| {
            json!({
                "cnt": i + 1,
                "items": [
                    {"id": 0x1000, "hex": hex(&i.to_be_bytes())},
                    {"id": 0x1001, "hex": hex(&mprq_payload(i, size))},
                ],
            })
        })
        .chain([json!({"stats": {"heaps": heaps, "incomplete_heaps_evicted": 0}})])
        .collect();
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w);
    }
    log["log"].as_array().expect("the log records").clone()
}

#[test]
fn spead2_receives_through_a_multi_packet_receive_queue_on_the_emulated_mlx5() {
    // 1472-byte packets (24 strides of 64 bytes each with their headers), 8 KiB packets
    // (129 strides), and 200-byte packets (4 strides): every heap spans several packets
    // and every packet several strides. The reader's 4 MiB buffer is four WQEs of 1 MiB:
    // the first run's 4.3 MB needs the first WQE filled, completed with a filler and
    // posted again.
    for (heaps, packet, size) in [(200, 1472, 20_000), (16, 8192, 60_000), (24, 200, 3000)] {
        let log = spead2_mprq(heaps, packet, size, None);
        assert_eq!(log, vec![json!(MPRQ_LOG)], "{packet}-byte packets");
    }
}

#[test]
fn spead2_uses_its_ordinary_reader_on_an_mlx5_without_direct_verbs() {
    let topology = "[[host]]\nname = \"h1\"\nip = \"10.100.0.1\"\ndirect_verbs = false\n";
    let log = spead2_mprq(16, 1472, 20_000, Some(topology));
    assert_eq!(log, Vec::<Value>::new());
}
