//! Two processes, two hosts: the fabric process (`verbs-emu-fabric`) and Debian's
//! unmodified pingpongs as server on host h1 and client on host h2, each joined to it
//! (`VERBS_EMU_FABRIC`); they meet on localhost TCP as usual, then talk over the fabric.
//! Also: a lossy link that RC recovers from, a capture of the run, perftest; the
//! fabric's socket protocol itself is tested in `fabric_socket.rs`.

mod common;

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use backend_sim::fabric::ExternalMsg;
use common::fabric::{
    frame, free_port, ip_of, listening, mac_of, next_frame, scratch, start, summary_counts, wait,
    Fabric, Ran, Running, DEADLINE,
};
use common::{emulated, require};
use ibverbs::fabric::client;

/// A pingpong as host `host` joined to `fabric`, with its output in files of `scratch`.
fn pingpong(
    program: &Path,
    fabric: &Fabric,
    scratch: &Path,
    host: &str,
    args: &[String],
    topology: Option<&Path>,
) -> Running {
    let mut c = fabric.program(program, host);
    c.args(args);
    if let Some(t) = topology {
        c.env("VERBS_EMU_TOPOLOGY", t);
    }
    start(c, scratch, host)
}

/// Runs `program ARGS` as server on h1 and `program ARGS localhost` as client on h2
/// (reading `topology` when given: it must be the fabric's).
fn server_and_client(
    program: &Path,
    fabric: &Fabric,
    scratch: &Path,
    args: &[&str],
    topology: Option<&Path>,
) -> (Ran, Ran) {
    let port = free_port();
    let mut a: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
    a.extend(["-p".to_owned(), port.to_string()]);
    let mut server = pingpong(program, fabric, scratch, "h1", &a, topology);
    // The server is ready when it listens for the client's TCP connection.
    let start = Instant::now();
    while !listening(port) {
        if server.exited() {
            panic!(
                "the server exited before listening: {}",
                server.err_so_far()
            );
        }
        assert!(
            start.elapsed() < DEADLINE,
            "the server never listened on {port}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    a.push("localhost".to_owned());
    let client = pingpong(program, fabric, scratch, "h2", &a, topology);
    let client = client.finish();
    let server = server.finish();
    (server, client)
}

/// Checks a pingpong's stdout line by line: `{psn}` stands for a 6-digit hex PSN (drawn
/// by the program), `{t}` for a number the wall clock decides (seconds, rates).
fn assert_lines(what: &str, out: &str, want: &[String]) {
    let got: Vec<&str> = out.lines().collect();
    assert_eq!(got.len(), want.len(), "{what} printed:\n{out}");
    for (g, w) in got.iter().zip(want) {
        assert!(line_matches(g, w), "{what}: {g:?} is not {w:?}");
    }
}

fn line_matches(got: &str, pattern: &str) -> bool {
    let mut rest = got;
    let mut parts = pattern.split('{').peekable();
    let first = parts.next().unwrap_or("");
    let Some(r) = rest.strip_prefix(first) else {
        return false;
    };
    rest = r;
    for part in parts {
        let Some((hole, lit)) = part.split_once('}') else {
            return false;
        };
        let n = match hole {
            "psn" => {
                let n = rest.chars().take_while(char::is_ascii_hexdigit).count();
                if n != 6 {
                    return false;
                }
                n
            }
            "t" => {
                let n = rest
                    .chars()
                    .take_while(|c| c.is_ascii_digit() || *c == '.')
                    .count();
                if rest[..n].parse::<f64>().is_err() {
                    return false;
                }
                n
            }
            _ => return false,
        };
        let Some(r) = rest[n..].strip_prefix(lit) else {
            return false;
        };
        rest = r;
    }
    rest.is_empty()
}

/// The address lines of one side of a pingpong with `qps` QPs (numbered from 0x11 on
/// each host), then its byte and iteration lines.
fn expected(me: u8, peer: u8, qps: u32, local_sep: &str, bytes: u64, iters: u32) -> Vec<String> {
    let mut v = Vec::new();
    for q in 0..qps {
        v.push(format!(
            "  local address:  LID 0x0000, QPN 0x{:06x}, PSN 0x{{psn}}{local_sep} GID ::ffff:10.100.0.{me}",
            0x11 + q
        ));
    }
    for q in 0..qps {
        v.push(format!(
            "  remote address: LID 0x0000, QPN 0x{:06x}, PSN 0x{{psn}}, GID ::ffff:10.100.0.{peer}",
            0x11 + q
        ));
    }
    v.push(format!("{bytes} bytes in {{t}} seconds = {{t}} Mbit/sec"));
    v.push(format!("{iters} iters in {{t}} seconds = {{t}} usec/iter"));
    v
}

fn assert_pair(server: &Ran, client: &Ran, qps: u32, sep: &str, bytes: u64, iters: u32) {
    for (who, r, me, peer) in [("server", server, 1, 2), ("client", client, 2, 1)] {
        assert!(
            r.status.success(),
            "{who} failed ({}): {}{}",
            r.status,
            r.out,
            r.err
        );
        assert_eq!(r.err, "", "{who}'s stderr");
        assert_lines(who, &r.out, &expected(me, peer, qps, sep, bytes, iters));
    }
}

const ITERS: u32 = 100;

/// A pingpong between h1 and h2 on a lossless fabric: both print what they should, and
/// the fabric lost nothing but (`strays`) frames that reached a host after its process
/// exited.
fn run_pingpong(
    name: &str,
    program: &str,
    args: &[&str],
    qps: u32,
    sep: &str,
    size: u64,
    strays: bool,
) {
    let prog = require(program, "ibverbs-utils");
    let dir = scratch(name);
    let fabric = Fabric::start(&dir, &[]);
    let iters = ITERS.to_string();
    let mut a = vec!["-g", "1", "-n", &iters];
    a.extend_from_slice(args);
    let (server, client) = server_and_client(&prog, &fabric, &dir, &a, None);
    let summary = fabric.stop();
    assert_pair(
        &server,
        &client,
        qps,
        sep,
        size * u64::from(ITERS) * 2,
        ITERS,
    );
    let lost = summary
        .split("lost: ")
        .nth(1)
        .and_then(|s| s.split(';').next())
        .unwrap_or_else(|| panic!("no losses in {summary:?}"));
    let stray = lost.starts_with("no process ") && !lost.contains(',');
    assert!(lost == "none" || (strays && stray), "{summary}");
    assert!(
        summary.ends_with("2 processes joined, 0 refused, 0 hung up on for bad messages"),
        "{summary}"
    );
}

#[test]
fn rc_pingpong_between_two_hosts() {
    run_pingpong("rc", "ibv_rc_pingpong", &[], 1, ",", 4096, false);
}

#[test]
fn uc_pingpong_between_two_hosts() {
    run_pingpong("uc", "ibv_uc_pingpong", &[], 1, ",", 4096, false);
}

#[test]
fn ud_pingpong_between_two_hosts() {
    // UD messages fit one packet: the path MTU's 1024 bytes.
    run_pingpong(
        "ud",
        "ibv_ud_pingpong",
        &["-s", "1024"],
        1,
        ":",
        1024,
        false,
    );
}

#[test]
fn srq_pingpong_between_two_hosts() {
    // 16 QPs on each side share one SRQ. Each side keeps a send in flight on every QP, so
    // it may post up to 15 beyond its count: those reach a peer that has finished (as
    // on a real fabric), and how many depends on the timing.
    run_pingpong("srq", "ibv_srq_pingpong", &[], 16, ",", 4096, true);
}

#[test]
fn rc_recovers_from_loss_on_the_fabric() {
    let prog = require("ibv_rc_pingpong", "ibverbs-utils");
    let dir = scratch("loss");
    let topo = dir.join("lossy.toml");
    std::fs::write(
        &topo,
        "[[host]]\nname = \"h1\"\nip = \"10.100.0.1\"\nfaults = { loss = 0.02 }\n\n\
         [[host]]\nname = \"h2\"\nip = \"10.100.0.2\"\nfaults = { loss = 0.02 }\n",
    )
    .expect("write the topology");
    let topo_arg = topo.to_str().expect("a UTF-8 path");
    let fabric = Fabric::start(&dir, &["--topology", topo_arg, "--seed", "5"]);
    let iters = ITERS.to_string();
    // The programs read the same topology: their ports' addresses must agree.
    let (server, client) = server_and_client(
        &prog,
        &fabric,
        &dir,
        &["-g", "1", "-n", &iters],
        Some(&topo),
    );
    let summary = fabric.stop();
    assert_pair(&server, &client, 1, ",", 4096 * u64::from(ITERS) * 2, ITERS);
    let (sent, delivered, lost) = summary_counts(&summary);
    // Every message arrived, so the lost frames were sent again: more frames than the
    // lossless run's 10 per iteration (4 packets and an ACK each way).
    assert!(lost > 0, "the seed lost nothing: {summary}");
    assert_eq!(sent, delivered + lost, "{summary}");
    assert!(sent > 10 * u64::from(ITERS), "{summary}");
}

/// The RC and UD pingpongs between h1 and h2 on GID 0 (`-g 0`), the ports' link-local
/// GID, on the hosts of `topology` (the default mlx5 hosts when `None`): both finish and
/// print link-local GIDs. Returns every frame the fabric captured.
fn pingpongs_on_gid0(name: &str, topology: Option<&str>) -> Vec<Vec<u8>> {
    let dir = scratch(name);
    let pcap = dir.join("run.pcap");
    let topo = topology.map(|t| {
        let path = dir.join("topology.toml");
        std::fs::write(&path, t).expect("write the topology");
        path
    });
    let mut args = vec!["--pcap", pcap.to_str().expect("a UTF-8 path")];
    if let Some(t) = &topo {
        args.extend(["--topology", t.to_str().expect("a UTF-8 path")]);
    }
    let fabric = Fabric::start(&dir, &args);
    for (program, extra) in [
        ("ibv_rc_pingpong", &[][..]),
        ("ibv_ud_pingpong", &["-s", "1024"][..]),
    ] {
        let prog = require(program, "ibverbs-utils");
        let mut a = vec!["-g", "0", "-n", "20"];
        a.extend_from_slice(extra);
        let (server, client) = server_and_client(&prog, &fabric, &dir, &a, topo.as_deref());
        for (who, r) in [("server", &server), ("client", &client)] {
            assert!(
                r.status.success(),
                "{program} {who} ({}): {}{}",
                r.status,
                r.out,
                r.err
            );
            assert_eq!(r.err, "", "{program} {who}'s stderr");
            assert_eq!(
                r.out.matches(" GID fe80::").count(),
                2,
                "{program} {who}: {}",
                r.out
            );
        }
    }
    let summary = fabric.stop();
    let f = File::open(&pcap).expect("open the capture");
    let mut r = netwire::pcap::PcapReader::new(BufReader::new(f)).expect("a pcap");
    let mut frames = Vec::new();
    while let Some(rec) = r.next_record().expect("a good record") {
        frames.push(rec.data.to_vec());
    }
    // 20 iterations each way: RC at least a SEND and an ACK, UD a SEND.
    assert!(
        frames.len() >= 20 * 2 * 3,
        "{} frames: {summary}",
        frames.len()
    );
    frames
}

/// rxe hosts: GID 0 is rxe's link-local RoCE v2 GID, as in the Soft-RoCE VM: every frame
/// is RoCEv2 over IPv6 with a good ICRC.
#[test]
fn pingpongs_on_rxes_link_local_gid_go_over_ipv6() {
    let topology = "[[host]]\nname = \"h1\"\nip = \"10.100.0.1\"\npersonality = \"rxe\"\n\n\
                    [[host]]\nname = \"h2\"\nip = \"10.100.0.2\"\npersonality = \"rxe\"\n";
    for f in pingpongs_on_gid0("ipv6", Some(topology)) {
        let view = netwire::frame::FrameView::parse(&f).expect("a good frame");
        assert!(
            view.is_roce_v2() && view.ipv6.is_some(),
            "not RoCEv2 over IPv6"
        );
        assert!(netwire::roce::icrc_ok(&f[view.ip_range().expect("IP")]));
    }
}

/// mlx5 hosts (the default): GID 0 is mlx5's link-local RoCE v1 GID: every frame is
/// RoCE v1 (EtherType 0x8915, the GRH with the hop limit the pingpongs ask, 1) with a
/// good ICRC.
#[test]
fn pingpongs_on_mlx5s_link_local_gid_go_as_roce_v1() {
    for f in pingpongs_on_gid0("rocev1", None) {
        assert_eq!(f[12..14], [0x89, 0x15]);
        let view = netwire::frame::FrameView::parse(&f).expect("a good frame");
        let (grh, _) = view.ipv6.expect("a GRH");
        assert_eq!((grh.next_header, grh.hop_limit), (0x1b, 1));
        assert!(view.is_roce() && !view.is_roce_v2());
        assert!(netwire::roce::icrc_ok(&f[view.ip_range().expect("GRH")]));
    }
}

/// BTH opcodes of the RoCEv2 frames in a pcap, counted.
fn opcodes(pcap: &Path) -> BTreeMap<u8, u64> {
    let f = File::open(pcap).expect("open the capture");
    let mut r = netwire::pcap::PcapReader::new(BufReader::new(f)).expect("a pcap");
    let mut n = BTreeMap::new();
    while let Some(rec) = r.next_record().expect("a good record") {
        let view = netwire::frame::FrameView::parse(rec.data).expect("a good frame");
        assert!(view.is_roce(), "a frame that is not RoCEv2 in the capture");
        let udp = view.udp_payload().expect("a UDP payload");
        let bth = netwire::roce::Bth::parse(&rec.data[udp]).expect("a BTH");
        *n.entry(bth.opcode).or_insert(0) += 1;
    }
    n
}

#[test]
fn a_capture_holds_the_roce_frames_of_the_run() {
    // UC: what crosses the fabric does not depend on timing (RC would add a
    // retransmission whenever a process is descheduled past its ACK timeout).
    let prog = require("ibv_uc_pingpong", "ibverbs-utils");
    let dir = scratch("pcap");
    let pcap = dir.join("run.pcap");
    let fabric = Fabric::start(&dir, &["--pcap", pcap.to_str().expect("a UTF-8 path")]);
    let iters = ITERS.to_string();
    let (server, client) =
        server_and_client(&prog, &fabric, &dir, &["-g", "1", "-n", &iters], None);
    let summary = fabric.stop();
    assert_pair(&server, &client, 1, ",", 4096 * u64::from(ITERS) * 2, ITERS);
    // Each side sends ITERS messages of 4096 bytes in 1024-byte packets: UC SEND_FIRST,
    // two SEND_MIDDLEs, SEND_LAST.
    let n = u64::from(ITERS) * 2;
    let want = BTreeMap::from([(0x20, n), (0x21, 2 * n), (0x22, n)]);
    assert_eq!(opcodes(&pcap), want, "{summary}");
    assert!(
        summary.starts_with(&format!("{} frames from hosts, {} delivered", 4 * n, 4 * n)),
        "{summary}"
    );
}

/// The result row under perftest's `#bytes` header, split into fields, from `out`.
fn perftest_row(out: &str) -> Option<Vec<String>> {
    let mut lines = out.lines();
    lines.find(|l| l.trim_start().starts_with("#bytes"))?;
    Some(
        lines
            .next()?
            .split_whitespace()
            .map(str::to_owned)
            .collect(),
    )
}

/// Asserts that `program`'s client and server both exited 0 with nothing on stderr;
/// gives them back, named.
fn both_quietly_done<'a>(
    program: &str,
    client: &'a Ran,
    server: &'a Ran,
) -> [(&'static str, &'a Ran); 2] {
    let both = [("client", client), ("server", server)];
    for (who, r) in both {
        assert!(
            r.status.success(),
            "{program} {who} failed ({}): {}{}",
            r.status,
            r.out,
            r.err
        );
        assert_eq!(r.err, "", "{program} {who}'s stderr");
    }
    both
}

/// perftest (Debian's, unmodified: it links the emulated libmlx5 and Debian's libefa)
/// between h1 and h2: RC send, RDMA write and read bandwidth, send and read latency. Each
/// side exits 0 with nothing on stderr; the bandwidth rows give the message size and the
/// iterations, on both sides for send and write and read (perftest reports on both), the
/// latency rows on the client (and for send on the server too). The rates depend on the
/// wall clock and are not asserted.
#[test]
fn perftest_between_two_hosts() {
    for (program, size, reporters) in [
        ("ib_send_bw", "65536", 2),
        ("ib_write_bw", "65536", 2),
        ("ib_read_bw", "65536", 2),
        ("ib_send_lat", "2", 2),
        ("ib_read_lat", "2", 1),
    ] {
        let prog = require(program, "perftest");
        let dir = scratch(program);
        let fabric = Fabric::start(&dir, &[]);
        let (server, client) = server_and_client(
            &prog,
            &fabric,
            &dir,
            &["-d", "mlx5_0", "-x", "1", "-n", "100"],
            None,
        );
        let summary = fabric.stop();
        let mut rows = 0;
        for (who, r) in both_quietly_done(program, &client, &server) {
            if let Some(row) = perftest_row(&r.out) {
                assert_eq!(&row[..2], [size, "100"], "{program} {who}: {}", r.out);
                rows += 1;
            }
        }
        assert_eq!(rows, reporters, "{program}: {}\n{}", client.out, server.out);
        assert!(
            summary.ends_with("2 processes joined, 0 refused, 0 hung up on for bad messages"),
            "{program}: {summary}"
        );
    }
}

/// `ib_write_bw -a`: RDMA writes of every size from 2 bytes to 8 MiB, 20 of each, on one
/// QP. The receiving process handles frames more slowly than the sending NIC sends
/// them, so the fabric pauses the sender (as a lossless switch would) instead of losing
/// frames or letting them wait past perftest's transport timeout (67 ms, retry count 7):
/// every size completes on both sides and the fabric loses nothing.
#[test]
fn perftest_writes_of_every_size_complete_without_loss() {
    let prog = require("ib_write_bw", "perftest");
    let dir = scratch("ib_write_bw_all");
    let fabric = Fabric::start(&dir, &[]);
    let (server, client) = server_and_client(
        &prog,
        &fabric,
        &dir,
        &["-d", "mlx5_0", "-x", "1", "-n", "20", "-a"],
        None,
    );
    let summary = fabric.stop();
    both_quietly_done("ib_write_bw", &client, &server);
    // The client reports a row per size: 2, 4, ..., 8388608 bytes, 20 iterations each.
    let mut lines = client.out.lines();
    lines.find(|l| l.trim_start().starts_with("#bytes"));
    let sizes: Vec<(String, String)> = lines
        .map(|l| l.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
        .filter(|f| f.len() >= 2 && f[0].parse::<u64>().is_ok())
        .map(|f| (f[0].clone(), f[1].clone()))
        .collect();
    let want: Vec<(String, String)> = (1..=23)
        .map(|k| ((1u64 << k).to_string(), "20".to_owned()))
        .collect();
    assert_eq!(sizes, want, "{}", client.out);
    assert!(summary.contains("lost: none;"), "{summary}");
}

/// A program joined to the fabric as `host`, with stdin and stdout piped for a line
/// protocol (its stderr in a file of `scratch`).
struct Piped {
    child: Child,
    stdin: Option<std::process::ChildStdin>,
    lines: std::sync::mpsc::Receiver<String>,
    err: PathBuf,
}

impl Piped {
    fn start(program: &Path, fabric: &Fabric, scratch: &Path, host: &str, args: &[&str]) -> Piped {
        let err = scratch.join(format!("{host}.err"));
        let mut child = emulated(program)
            .env("VERBS_EMU_FABRIC", &fabric.socket)
            .env("VERBS_EMU_HOST", host)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(File::create(&err).expect("stderr file"))
            .spawn()
            .expect("start the program");
        let (tx, lines) = std::sync::mpsc::channel();
        let out = child.stdout.take().expect("its stdout");
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Piped {
            stdin: child.stdin.take(),
            child,
            lines,
            err,
        }
    }

    /// Its next line of output (failing, with its stderr, if none comes).
    fn line(&mut self, what: &str) -> String {
        self.lines.recv_timeout(DEADLINE).unwrap_or_else(|_| {
            let _ = self.child.kill();
            panic!(
                "no {what}: {}",
                std::fs::read_to_string(&self.err).unwrap_or_default()
            )
        })
    }

    fn say(&mut self, line: &str) {
        use std::io::Write;
        let stdin = self.stdin.as_mut().expect("its stdin");
        writeln!(stdin, "{line}").expect("write to the program");
        stdin.flush().expect("flush");
    }

    /// Waits for it to exit; it must succeed with nothing on stderr.
    fn finish(mut self, what: &str) {
        drop(self.stdin.take());
        let status = wait(&mut self.child, what);
        let err = std::fs::read_to_string(&self.err).unwrap_or_default();
        assert!(
            status.success() && err.is_empty(),
            "{what}: {status}: {err}"
        );
    }
}

/// Host h2 reaches host h1's memory only through a region h1 registered with the right
/// to do so and the region's own rkey (`tests/c/remote_access.c`, one RC QP per case):
/// a wrong rkey, another region's rkey, a region without REMOTE_WRITE or REMOTE_READ, or
/// a range past the region's end complete with IBV_WC_REM_ACCESS_ERR, and h1's memory is
/// unchanged except where the one allowed write went.
#[test]
fn remote_memory_is_reached_only_through_a_matching_rkey_and_access_rights() {
    let program = common::build_c("remote_access", &["-libverbs"]);
    let dir = scratch("remote-access");
    let fabric = Fabric::start(&dir, &[]);
    let mut server = Piped::start(&program, &fabric, &dir, "h1", &["server"]);
    let hello = server.line("server line");
    let mut client = Piped::start(&program, &fabric, &dir, "h2", &["client"]);
    client.say(&hello);
    let hello = client.line("client line");
    server.say(&hello);
    assert_eq!(server.line("ready line"), "ready");
    client.say("go");
    let results: Vec<String> = (0..10).map(|_| client.line("case result")).collect();
    client.finish("the client");
    assert_eq!(
        results,
        [
            "write with the region's rkey: success",
            "write with a wrong rkey: remote access error",
            "write with another region's rkey: remote access error",
            "write to a region without REMOTE_WRITE: remote access error",
            "write to a region with local access only: remote access error",
            "write past the region's end: remote access error",
            "read with the region's rkey: success, read 64 bytes of 0x22",
            "read with a wrong rkey: remote access error",
            "read from a region without REMOTE_READ: remote access error",
            "read from a region with local access only: remote access error",
        ]
    );
    server.say("done");
    let memory: Vec<String> = (0..4).map(|_| server.line("memory line")).collect();
    server.finish("the server");
    assert_eq!(
        memory,
        [
            "rw: 64 bytes changed, first byte 0xab",
            "ro: 0 bytes changed, first byte 0x22",
            "wo: 0 bytes changed, first byte 0x33",
            "local: 0 bytes changed, first byte 0x44",
        ]
    );
    let summary = fabric.stop();
    assert!(summary.contains("2 processes joined"), "{summary}");
}

/// Four programs, one per host, each making 4000 verbs calls drawn from its seed
/// (`tests/c/chaos.c`: objects made and freed in any order, QPs moved to any state with
/// any attributes, sends of every opcode to any QP of any host, local ranges past a
/// region's end, wrong keys, multicast joins) at once on one fabric: each gets errnos
/// and completions, none crashes, and the fabric goes on serving.
#[test]
fn arbitrary_verbs_call_sequences_never_crash_a_program_or_the_fabric() {
    let program = common::build_c("chaos", &["-libverbs"]);
    let dir = scratch("chaos");
    let fabric = Fabric::start(&dir, &[]);
    let runs: Vec<_> = (1..=4u8)
        .map(|h| {
            let host = format!("h{h}");
            let seed = (100 + u32::from(h)).to_string();
            pingpong(
                &program,
                &fabric,
                &dir,
                &host,
                &[seed, "4000".to_owned()],
                None,
            )
        })
        .collect();
    for (h, run) in runs.into_iter().enumerate() {
        let ran = run.finish();
        assert!(
            ran.status.success() && ran.err.is_empty(),
            "chaos on h{}: {}: {}",
            h + 1,
            ran.status,
            ran.err
        );
        assert!(
            line_matches(
                ran.out.trim_end(),
                "{t} calls, {t} refused, {t} completions ({t} with an error status)"
            ),
            "{}",
            ran.out
        );
    }
    let (mut h1, _h1_rx) = client::join(&fabric.socket, "h1", mac_of(1), ip_of(1)).expect("h1");
    let (_h2, mut h2) = client::join(&fabric.socket, "h2", mac_of(2), ip_of(2)).expect("h2");
    let to_h2 = frame(mac_of(2), mac_of(1), 0x77);
    h1.send(&mut ExternalMsg::Frame {
        frame: to_h2.clone(),
        index: 0,
        sealed: false,
    });
    assert_eq!(next_frame(&mut h2), to_h2);
    drop((h1, _h1_rx, _h2, h2));
    let summary = fabric.stop();
    assert!(
        summary.ends_with("6 processes joined, 0 refused, 0 hung up on for bad messages"),
        "{summary}"
    );
}
