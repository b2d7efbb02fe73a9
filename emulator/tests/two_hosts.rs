//! The connection manager between two processes, two hosts: rdmacm-utils' `rping`,
//! `ucmatose`, `udaddy` (UD by SIDR) and `rdma_server`/`rdma_client` (endpoints:
//! `rdma_create_ep`, `rdma_get_request`) as server on h1 and client on h2, each joined to
//! a fabric process that carries their CM messages (REQ, REP, RTU, DREQ, DREP, SIDR) and
//! their traffic; a REQ for a host no
//! process is, returned by the fabric and rejected as the remote CM would; `mckey`
//! sending on h1 to a group that a receiver on h2 joined. And the fabric holding frames for
//! a process that does not take them for a while.

mod common;

use std::net::Ipv4Addr;
use std::path::Path;
use std::time::{Duration, Instant};

use backend_sim::fabric::ExternalMsg;
use common::fabric::{
    assert_udaddy_ran, flush_in_background, next_frame, scratch, start, Fabric, Ran, DEADLINE,
};
use common::require;
use ibverbs::fabric::client;
use ibverbs::fabric::ring::DEFAULT_CAP;
use ibverbs::fabric::server::BACKLOG_BYTES;
use netwire::eth::Mac;

/// The rping message of ping `ping` with the default 64-byte buffer (rping.c
/// `rping_test_client`: the ping's number, then letters from 'A' + ping on, wrapping after
/// 'z').
fn rping_data(ping: u32) -> String {
    let mut s = format!("rdma-ping-{ping}: ");
    let mut c = 65 + ping % 58;
    while s.len() < 63 {
        s.push(char::from_u32(c).expect("a letter"));
        c = if c == 122 { 65 } else { c + 1 };
    }
    s
}

/// The ten lines of rping's data (`-v -C 10`), each after `prefix`.
fn ping_lines(prefix: &str) -> String {
    (0..10)
        .map(|i| format!("{prefix}{}\n", rping_data(i)))
        .collect()
}

/// Whether `r` is rping's client rejected because nobody listens (yet).
fn rejected(r: &Ran) -> bool {
    r.status.code() == Some(255)
        && r.err
            .starts_with("cma event RDMA_CM_EVENT_REJECTED, error 8\n")
}

/// Starts the server (`program` and its arguments) on h1, then runs the client on h2
/// until one is not turned away (`refused`): the server listens some time after it
/// starts, and until then its host's CM (or, before its process joined, the fabric)
/// refuses the request, and the client tries again. The client's run, the server's, and
/// how many clients were turned away.
fn until_accepted(
    fabric: &Fabric,
    dir: &Path,
    server: (&Path, &[&str]),
    client: (&Path, &[&str]),
    refused: impl Fn(&Ran) -> bool,
) -> (Ran, Ran, u64) {
    let mut s = fabric.program(server.0, "h1");
    s.args(server.1);
    let mut running = start(s, dir, "server");
    let begin = Instant::now();
    let mut tries = 0;
    let client = loop {
        let mut c = fabric.program(client.0, "h2");
        c.args(client.1);
        let r = start(c, dir, "client").finish();
        if !refused(&r) || begin.elapsed() > DEADLINE || running.exited() {
            break r;
        }
        tries += 1;
        std::thread::sleep(Duration::from_millis(20));
    };
    (client, running.finish(), tries)
}

#[test]
fn rping_between_two_hosts_completes_its_pings() {
    let rping = require("rping", "rdmacm-utils");
    let dir = scratch("rping");
    let fabric = Fabric::start(&dir, &[]);
    let (client, server, tries) = until_accepted(
        &fabric,
        &dir,
        (&rping, &["-s", "-v", "-C", "10"]),
        (&rping, &["-c", "-v", "-a", "10.100.0.1", "-C", "10"]),
        rejected,
    );
    let summary = fabric.stop();
    let pings = ping_lines("ping data: ");
    assert!(client.status.success(), "client: {client:?}");
    assert_eq!(client.out, pings);
    // The client's CM thread may see its DISCONNECTED event (after the server's DREP)
    // before the program tears the id down, or not: as with the kernel's CM.
    assert!(
        client.err.is_empty() || client.err == "client DISCONNECT EVENT...\n",
        "{client:?}"
    );
    assert!(server.status.success(), "server: {server:?}");
    let server_pings = ping_lines("server ping data: ");
    assert_eq!(server.out, server_pings);
    // The client's DREQ: the server's CM thread reports it, and its loop, waiting for the
    // next ping's advertisement, ends.
    assert_eq!(
        server.err,
        "server DISCONNECT EVENT...\nwait for RDMA_READ_ADV state 10\n"
    );
    assert!(summary.contains("lost: none;"), "{summary}");
    assert!(
        summary.ends_with(" 0 hung up on for bad messages"),
        "{summary}"
    );
    // The connection's five messages: REQ, REP, RTU, the client's DREQ and the server's
    // DREP (returned by the fabric if the client has gone by then), besides the REQ of
    // each client turned away before the server listened (and its REJ, when the server's
    // process had joined already).
    let (forwarded, returned) = cm_counts(&summary);
    assert!(
        forwarded + returned >= 5 + tries && forwarded + returned <= 5 + 2 * tries,
        "{summary}"
    );
}

/// rping between the hosts' link-local addresses (h1's fe80::aff:fe64:1, the modified
/// EUI-64 of its MAC 02:00:0a:64:00:01, with a scope id, as the kernel's rdma_cm requires
/// of a link-local address) on two rxe hosts: the emulated CM binds and resolves it as
/// h1's address, and the connection's QPs use the link-local GID 0 (RoCE v2 over IPv6,
/// in the capture).
#[test]
fn rping_between_link_local_addresses_completes_its_pings() {
    let rping = require("rping", "rdmacm-utils");
    let dir = scratch("rping-ll");
    let pcap = dir.join("fabric.pcap");
    let topo = dir.join("rxe.toml");
    std::fs::write(
        &topo,
        "[[host]]\nname = \"h1\"\nip = \"10.100.0.1\"\npersonality = \"rxe\"\n\n\
         [[host]]\nname = \"h2\"\nip = \"10.100.0.2\"\npersonality = \"rxe\"\n",
    )
    .expect("write the topology");
    // Every frame through the fabric process, so that its capture has them all.
    let fabric = Fabric::start(
        &dir,
        &[
            "--topology",
            &topo.to_string_lossy(),
            "--no-direct",
            "--pcap",
            &pcap.to_string_lossy(),
        ],
    );
    let h1 = "fe80::aff:fe64:1%1";
    let (client, server, _) = until_accepted(
        &fabric,
        &dir,
        (&rping, &["-s", "-v", "-C", "10", "-a", h1]),
        (&rping, &["-c", "-v", "-a", h1, "-C", "10"]),
        rejected,
    );
    let summary = fabric.stop();
    let pings = ping_lines("ping data: ");
    assert!(client.status.success(), "client: {client:?}");
    assert_eq!(client.out, pings);
    assert!(server.status.success(), "server: {server:?}");
    let server_pings = ping_lines("server ping data: ");
    assert_eq!(server.out, server_pings);
    assert!(summary.contains("lost: none;"), "{summary}");
    // Every RoCE frame of the connection between the two link-local addresses.
    let (mut v4, mut v6) = (0, 0);
    let mut r = netwire::pcap::PcapReader::new(std::fs::File::open(&pcap).unwrap()).unwrap();
    while let Some(rec) = r.next_record().unwrap() {
        let Ok(v) = netwire::frame::FrameView::parse(rec.data) else {
            continue;
        };
        if !v.is_roce_v2() {
            continue;
        }
        match v.ipv6 {
            Some((h, _)) => {
                let ends: [std::net::Ipv6Addr; 2] = [
                    "fe80::aff:fe64:1".parse().unwrap(),
                    "fe80::aff:fe64:2".parse().unwrap(),
                ];
                assert!(ends.contains(&h.src) && ends.contains(&h.dst), "{h:?}");
                v6 += 1;
            }
            None => v4 += 1,
        }
    }
    assert_eq!(v4, 0);
    // Each ping: the client's two SENDs and the server's READ request, WRITE and two
    // SENDs, with the responses and acknowledgements.
    assert!(v6 >= 60, "{v6} RoCE frames over IPv6");
}

/// The fabric's counts of CM messages forwarded and returned, from its summary.
fn cm_counts(summary: &str) -> (u64, u64) {
    let words: Vec<&str> = summary.split_whitespace().collect();
    let at = words
        .windows(3)
        .position(|w| w == ["CM", "messages", "forwarded,"])
        .unwrap_or_else(|| panic!("no CM counts in {summary:?}"));
    let num = |i: usize| -> u64 {
        words[i]
            .trim_end_matches(';')
            .parse()
            .unwrap_or_else(|_| panic!("no number at word {i} of {summary:?}"))
    };
    (num(at - 1), num(at + 3))
}

#[test]
fn a_client_hears_of_a_killed_server() {
    let rping = require("rping", "rdmacm-utils");
    let dir = scratch("rping-killed");
    let fabric = Fabric::start(&dir, &[]);
    let mut s = fabric.program(&rping, "h1");
    s.args(["-s", "-v"]);
    let mut server = start(s, &dir, "server");
    // The client pings until it is told to stop; it tries again while the server is not
    // listening yet. The server prints its pings (block-buffered): once some are out,
    // they are connected and pinging.
    let begin = Instant::now();
    let pinging = || std::fs::metadata(dir.join("server.out")).map_or(0, |m| m.len()) > 0;
    let client = 'connected: loop {
        let mut c = fabric.program(&rping, "h2");
        c.args(["-c", "-a", "10.100.0.1", "-C", "0"]);
        let mut r = start(c, &dir, "client");
        loop {
            if pinging() {
                break 'connected r;
            }
            if r.exited() {
                let r = r.finish();
                assert!(rejected(&r), "{r:?}");
                break;
            }
            assert!(begin.elapsed() < DEADLINE && !server.exited(), "no pings");
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    // Then the server dies without a word.
    server.kill();
    let _ = server.finish();
    // The fabric tells h2's CM that h1's process has gone, and it delivers the DREQ
    // h1's kernel would have sent: rping's CM thread reports the disconnection and its
    // ping loop, waiting for the server's next message, ends (rping returns 0 for a
    // disconnection).
    let client = client.finish();
    let summary = fabric.stop();
    assert!(client.status.success(), "{client:?}");
    assert_eq!(client.out, "");
    assert!(
        client.err == "client DISCONNECT EVENT...\nwait for RDMA_WRITE_ADV state 10\n"
            || client.err == "client DISCONNECT EVENT...\nwait for RDMA_WRITE_COMPLETE state 10\n",
        "{client:?}"
    );
    assert!(
        summary.ends_with(" 0 hung up on for bad messages"),
        "{summary}"
    );
}

#[test]
fn a_request_for_a_host_no_process_is_comes_back_rejected() {
    let rping = require("rping", "rdmacm-utils");
    let dir = scratch("rping-nobody");
    let fabric = Fabric::start(&dir, &[]);
    let mut c = fabric.program(&rping, "h2");
    c.args(["-c", "-a", "10.100.0.1", "-C", "1"]);
    let client = start(c, &dir, "client").finish();
    let summary = fabric.stop();
    // rping's CM thread exits the process as soon as it sees REJECTED (status 8: invalid
    // service id, what the CM of a host without the listener answers).
    assert!(rejected(&client), "{client:?}");
    assert_eq!(client.out, "");
    assert!(
        summary.ends_with(
            "0 CM messages forwarded, 1 returned; 1 processes joined, 0 refused, 0 hung up on \
             for bad messages"
        ),
        "{summary}"
    );
}

#[test]
fn ucmatose_connects_exchanges_and_disconnects_between_two_hosts() {
    let ucmatose = require("ucmatose", "rdmacm-utils");
    let dir = scratch("ucmatose");
    let fabric = Fabric::start(&dir, &[]);
    let (client, server, _) = until_accepted(
        &fabric,
        &dir,
        (&ucmatose, &["-b", "10.100.0.1", "-C", "10"]),
        (
            &ucmatose,
            &["-s", "10.100.0.1", "-b", "10.100.0.2", "-C", "10"],
        ),
        // cmatose.c: a REJECTED event ends the client with its status, 8 (invalid
        // service id: nobody listens yet).
        |r| r.status.code() == Some(8),
    );
    let summary = fabric.stop();
    assert!(client.status.success(), "{client:?}");
    assert_eq!(
        client.out,
        "cmatose: starting client\ncmatose: connecting\nreceiving data transfers\n\
         sending replies\ndata transfers complete\ntest complete\nreturn status 0\n"
    );
    assert_eq!(client.err, "");
    assert!(server.status.success(), "{server:?}");
    assert_eq!(
        server.out,
        "cmatose: starting server\ninitiating data transfers\ncompleting sends\n\
         receiving data transfers\ndata transfers complete\ncmatose: disconnecting\n\
         disconnected\ntest complete\nreturn status 0\n"
    );
    assert_eq!(server.err, "");
    // Ten messages each way, as RC SENDs, and their ACKs: no frame lost.
    assert!(summary.contains("lost: none;"), "{summary}");
}

#[test]
fn udaddy_exchanges_datagrams_after_sidr_between_two_hosts() {
    let udaddy = require("udaddy", "rdmacm-utils");
    let dir = scratch("udaddy");
    let fabric = Fabric::start(&dir, &[]);
    let (client, server, _) = until_accepted(
        &fabric,
        &dir,
        (&udaddy, &["-b", "10.100.0.1", "-C", "4"]),
        (
            &udaddy,
            &["-s", "10.100.0.1", "-b", "10.100.0.2", "-C", "4"],
        ),
        // Nobody listens yet: the SIDR REP says IB_SIDR_UNSUPPORTED (1), which udaddy
        // reports as an UNREACHABLE event and returns.
        |r| {
            r.status.code() == Some(1)
                && r.out
                    .contains("udaddy: event: RDMA_CM_EVENT_UNREACHABLE, error: 1\n")
        },
    );
    let summary = fabric.stop();
    assert_udaddy_ran(&client, &server);
    // Four datagrams each way, and nothing else on the wire.
    assert!(
        summary.starts_with("8 frames from hosts, 8 delivered, lost: none;"),
        "{summary}"
    );
}

#[test]
fn rdma_server_and_rdma_client_meet_through_endpoints() {
    let server = require("rdma_server", "rdmacm-utils");
    let client = require("rdma_client", "rdmacm-utils");
    let dir = scratch("rdma-endpoints");
    let fabric = Fabric::start(&dir, &[]);
    let (client, server, _) = until_accepted(
        &fabric,
        &dir,
        (&server, &["-s", "10.100.0.1"]),
        (&client, &["-s", "10.100.0.1"]),
        // rdma_client.c: rdma_connect fails with ECONNREFUSED while nobody listens.
        |r| r.err == "rdma_connect: Connection refused\n",
    );
    let summary = fabric.stop();
    assert!(client.status.success(), "{client:?}");
    assert_eq!(client.out, "rdma_client: start\nrdma_client: end 0\n");
    assert_eq!(client.err, "");
    assert!(server.status.success(), "{server:?}");
    assert_eq!(server.out, "rdma_server: start\nrdma_server: end 0\n");
    assert_eq!(server.err, "");
    // One 16-byte SEND each way (inline: the endpoints' QPs take 16 inline bytes) and
    // their ACKs.
    assert!(
        summary.starts_with("4 frames from hosts, 4 delivered, lost: none;"),
        "{summary}"
    );
}

#[test]
fn mckey_sends_from_one_host_to_a_group_another_joined() {
    let mckey = require("mckey", "rdmacm-utils");
    let dir = scratch("mckey");
    let fabric = Fabric::start(&dir, &[]);
    let mut r = fabric.program(&mckey, "h2");
    r.args(["-m", "239.1.2.3", "-b", "10.100.0.2", "-C", "4"]);
    let mut receiver = start(r, &dir, "receiver");
    // Until the receiver has joined, what the sender sends reaches nobody: the sender
    // sends its 4 messages again until the receiver has had 4.
    let begin = Instant::now();
    let mut senders = Vec::new();
    while !receiver.exited() && begin.elapsed() < DEADLINE {
        let mut s = fabric.program(&mckey, "h1");
        s.args(["-m", "239.1.2.3", "-b", "10.100.0.1", "-s", "-C", "4"]);
        senders.push(start(s, &dir, &format!("sender{}", senders.len())).finish());
        std::thread::sleep(Duration::from_millis(20));
    }
    let receiver = receiver.finish();
    let summary = fabric.stop();
    let joined = "mckey: joining\nmckey: joined dgid: ::ffff:239.1.2.3 mlid 0x0 sl 0\n";
    assert!(receiver.status.success(), "{receiver:?}");
    assert_eq!(
        receiver.out,
        format!(
            "mckey: starting server\n{joined}receiving data transfers\ndata transfers \
             complete\ntest complete\nreturn status 0\n"
        )
    );
    assert_eq!(receiver.err, "");
    assert!(!senders.is_empty());
    for s in &senders {
        assert!(s.status.success(), "{s:?}");
        assert_eq!(
            s.out,
            format!(
                "mckey: starting client\n{joined}initiating data transfers\ndata transfers \
                 complete\ntest complete\nreturn status 0\n"
            )
        );
        assert_eq!(s.err, "");
    }
    assert!(
        summary.ends_with(" 0 hung up on for bad messages"),
        "{summary}"
    );
}

fn mac_of(last: u8) -> Mac {
    Mac([0x02, 0x00, 10, 100, 0, last])
}

fn ip_of(last: u8) -> Ipv4Addr {
    Ipv4Addr::new(10, 100, 0, last)
}

#[test]
fn frames_wait_for_a_process_whose_ring_is_full() {
    let dir = scratch("backlog");
    let fabric = Fabric::start(&dir, &[]);
    let (mut h1, _h1_rx) = client::join(&fabric.socket, "h1", mac_of(1), ip_of(1)).expect("h1");
    let (_h2, mut h2) = client::join(&fabric.socket, "h2", mac_of(2), ip_of(2)).expect("h2");
    // Twice what h2's ring holds, and less than the ring and its backlog together: h2
    // takes none until h1 has sent them all.
    const LEN: usize = 8000;
    let n = 2 * DEFAULT_CAP / LEN;
    assert!(n * LEN < DEFAULT_CAP + BACKLOG_BYTES);
    let frame = |k: usize| {
        let mut f = vec![(k % 251) as u8; LEN];
        f[..6].copy_from_slice(&mac_of(2).0);
        f[6..12].copy_from_slice(&mac_of(1).0);
        f[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
        f[14..22].copy_from_slice(&(k as u64).to_be_bytes());
        f
    };
    for k in 0..n {
        h1.send(&mut ExternalMsg::Frame {
            frame: frame(k),
            index: 0,
            sealed: false,
        });
    }
    // What h1's ring had no room for (the fabric pauses h1 once h2's backlog passes
    // PAUSE_BYTES) waits in h1's sender; a NIC's progress thread would flush it.
    let flusher = flush_in_background(h1);
    for k in 0..n {
        assert!(
            next_frame(&mut h2) == frame(k),
            "frame {k} is not the one sent"
        );
    }
    let h1 = flusher.join().expect("the flusher");
    drop((h1, _h1_rx, _h2, h2));
    let summary = fabric.stop();
    assert!(
        summary.starts_with(&format!(
            "{n} frames from hosts, {n} delivered, lost: none;"
        )),
        "{summary}"
    );
}
