//! The fabric's ports to real networks (issue 24), on one machine: a Linux `vxlan`
//! interface in a network namespace exchanging SPEAD with emulated hosts through a
//! fabric's VXLAN port (kernel UDP sockets on one side, the emulated libibverbs'
//! RAW_PACKET QPs on the other), and two fabric processes joined by VXLAN as two
//! machines would be (`ibv_rc_pingpong` from one's host to the other's, over a lossless
//! and a lossy tunnel; SPEAD multicast from one to the other and to a kernel peer).
//!
//! Every test makes network namespaces of its own (`unshare -n` holders entered with
//! `nsenter`), so the tunnels' fixed UDP ports (4789, 4790) and the veth and vxlan
//! interfaces touch nothing of the machine's: this needs root, as CI runs; without it
//! the tests fail saying so.
//!
//! The connection manager across two fabrics (rping, udaddy; CM MADs lost and resent) is in
//! `wire_cm.rs`; the namespace holders and the two-fabric topologies both use are in
//! `common/wire.rs`, the SPEAD tools' heaps and checks in `common/spead.rs`.

mod common;

use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::fabric::{scratch, start, Fabric, DEADLINE};
use common::hw_tools;
use common::spead::{
    assert_all_delivered, assert_heaps, nic_ready, on_nic, packets_sent, reference_heaps, wait_for,
    HEAP_ARGS,
};
use common::wire::{need_root, two_fabrics, Netns, TwoFabrics};
use common::{require, run, stderr};

/// A Linux vxlan interface in a namespace of its own and the emulated hosts of a fabric
/// exchange SPEAD both ways: the kernel's UDP socket receives the multicast heaps that
/// h1's RAW_PACKET QP sends, and h2's RAW_PACKET QP (a flow rule on its own address)
/// receives the unicast heaps a kernel socket sends it, after the kernel's ARP request
/// for 10.100.0.2 got the fabric's reply. The heaps are exactly those of a file; the
/// port counts a garbage datagram as malformed.
/// The fabric's namespace `f` joined by a veth pair (MTU 9000) to the kernel peer's `k`:
/// 10.200.0.1 in `f`, 10.200.0.2 in `k`, where `vx0` is a Linux vxlan interface (VNI 42,
/// UDP 4789, to 10.200.0.1) holding 10.100.0.9/24 on the emulated hosts' subnet, with
/// the multicast route.
fn kernel_peer(f: &Netns, k: &Netns) {
    f.ip(&format!(
        "link add va mtu 9000 type veth peer name vb mtu 9000 netns {}",
        k.pid
    ));
    f.ip("addr add 10.200.0.1/24 dev va");
    f.ip("link set va up");
    k.ip("addr add 10.200.0.2/24 dev vb");
    k.ip("link set vb up");
    k.ip("link add vx0 type vxlan id 42 dstport 4789 local 10.200.0.2 remote 10.200.0.1 dev vb");
    k.ip("link set vx0 mtu 1500 up");
    k.ip("addr add 10.100.0.9/24 dev vx0");
    k.ip("route add 224.0.0.0/4 dev vx0");
}

/// The counters of a port's clause in a fabric's summary: (frames in, out, malformed,
/// unsent).
fn port_counts(summary: &str, port: &str) -> (u64, u64, u64, u64) {
    let at = summary
        .find(&format!("port {port}: "))
        .unwrap_or_else(|| panic!("no port {port} in {summary}"));
    let rest = &summary[at + port.len() + 7..];
    let n: Vec<u64> = rest
        .split([' ', ',', ';'])
        .map_while(|w| if w == "(" { None } else { Some(w) })
        .filter_map(|w| w.parse().ok())
        .take(4)
        .collect();
    assert_eq!(n.len(), 4, "port {port} in {summary}");
    (n[0], n[1], n[2], n[3])
}

/// The UDP frames to `port` in a capture, and its ARP replies from `mac`.
fn captured(pcap: &Path, port: u16, mac: [u8; 6]) -> (u64, u64) {
    let f = std::fs::File::open(pcap).expect("open the capture");
    let mut r = netwire::pcap::PcapReader::new(BufReader::new(f)).expect("a pcap");
    let (mut udp, mut arp) = (0, 0);
    while let Some(rec) = r.next_record().expect("a good record") {
        let d = rec.data;
        if d.len() >= 42 && d[12..14] == [0x08, 0x06] && d[20..22] == [0, 2] && d[22..28] == mac {
            arp += 1;
        }
        if d.len() >= 42 && d[12..14] == [0x08, 0x00] && d[23] == 17 {
            let ihl = usize::from(d[14] & 0x0f) * 4;
            let dport = u16::from_be_bytes([d[14 + ihl + 2], d[14 + ihl + 3]]);
            if dport == port {
                udp += 1;
            }
        }
    }
    (udp, arp)
}

#[test]
fn a_linux_vxlan_interface_and_emulated_hosts_exchange_spead_both_ways() {
    need_root();
    let tools = hw_tools();
    let (send, recv) = (tools.join("spead-send"), tools.join("spead-recv"));
    let dir = scratch("wire-kernel");
    let want = reference_heaps(&tools, &dir);
    let (f, k) = (Netns::new(), Netns::new());
    kernel_peer(&f, &k);
    let pcap = dir.join("wire.pcap");
    let fabric = Fabric::start_named(
        &dir,
        "",
        &f.prefix(),
        &[
            "--vxlan",
            "10.200.0.1:4789,10.200.0.2:4789,42",
            "--pcap",
            pcap.to_str().expect("a UTF-8 path"),
        ],
    );

    // Emulated h1 to the kernel: multicast.
    let mut r = Command::new(&recv);
    r.args(["udp:239.10.0.1:7148", "--bind", "10.100.0.9", "--json"]);
    let kernel_rx = start(k.wrap(&r), &dir, "kernel-recv");
    wait_for(
        &dir.join("kernel-recv.err"),
        "spead-recv: listening on udp:239.10.0.1:7148",
    );
    let mut s = fabric.program(&send, "h1");
    s.args(HEAP_ARGS)
        .args(on_nic("10.100.0.1", "ibv:239.10.0.1:7148"));
    let to_kernel = packets_sent(&start(f.wrap(&s), &dir, "h1-send").finish());
    assert_heaps("the kernel's socket", &kernel_rx.finish(), &want);

    // The kernel to emulated h2: unicast (the kernel ARPs for 10.100.0.2 first).
    let mut r = fabric.program(&recv, "h2");
    r.args(on_nic("10.100.0.2", "ibv:10.100.0.2:7150"))
        .arg("--json");
    let h2_rx = start(f.wrap(&r), &dir, "h2-recv");
    wait_for(
        &dir.join("h2-recv.err"),
        &nic_ready("10.100.0.2", "ibv:10.100.0.2:7150"),
    );
    // The kernel holds only a few datagrams while it resolves an address: resolve it
    // first, with a datagram to a port nobody receives on (h2's NIC drops it).
    k.sh("printf x > /dev/udp/10.100.0.2/9");
    let begin = Instant::now();
    while !k
        .sh("ip neigh show 10.100.0.2 dev vx0")
        .contains("lladdr 02:00:0a:64:00:02")
    {
        assert!(
            begin.elapsed() < DEADLINE,
            "the kernel never learned h2's MAC"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut s = Command::new(&send);
    s.args(HEAP_ARGS).arg("udp:10.100.0.2:7150");
    let from_kernel = packets_sent(&start(k.wrap(&s), &dir, "kernel-send").finish());
    let got = h2_rx.finish();
    assert_heaps("h2's RAW_PACKET QP", &got, &want);
    assert_all_delivered(&got, "ibv:10.100.0.2:7150", from_kernel);

    // A datagram that is not VXLAN is counted and dropped.
    k.sh("printf 'not vxlan' > /dev/udp/10.200.0.1/4789");
    std::thread::sleep(Duration::from_millis(200));
    let summary = fabric.stop();
    let (frames_in, out, malformed, unsent) =
        port_counts(&summary, "vxlan 10.200.0.1:4789 -> 10.200.0.2:4789 vni 42");
    assert!(out >= to_kernel, "{summary}");
    // The heaps, the ARP request, and whatever else the kernel sends (IGMP, IPv6).
    assert!(frames_in > from_kernel, "{summary}");
    assert_eq!((malformed, unsent), (1, 0), "{summary}");
    // The capture holds both ways' heaps and the fabric's ARP reply for h2.
    let (udp_in, arp) = captured(&pcap, 7150, [2, 0, 10, 100, 0, 2]);
    let (udp_out, _) = captured(&pcap, 7148, [0; 6]);
    assert_eq!((udp_in, udp_out), (from_kernel, to_kernel), "{summary}");
    assert!(arp >= 1, "no ARP reply for h2 in the capture");
}

/// `ibv_rc_pingpong -g 1` server on fabric A's h1, client on fabric B's h2 (in `ns`):
/// both succeed and print the bytes of 100 iterations of 4096 bytes both ways.
fn pingpong_across(dir: &Path, ns: &Netns, a: &(Fabric, PathBuf), b: &(Fabric, PathBuf)) {
    let prog = require("ibv_rc_pingpong", "ibverbs-utils");
    let port = "18515";
    let mut s = a.0.program(&prog, "h1");
    s.env("VERBS_EMU_TOPOLOGY", &a.1)
        .args(["-g", "1", "-n", "100", "-p", port]);
    let server = start(ns.wrap(&s), dir, "server");
    // The server is ready when it listens for the client's TCP connection.
    let begin = Instant::now();
    while !ns
        .sh("cat /proc/net/tcp")
        .lines()
        .any(|l| l.contains(":4853 00000000:0000 0A"))
    {
        assert!(begin.elapsed() < DEADLINE, "the server never listened");
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut c = b.0.program(&prog, "h2");
    c.env("VERBS_EMU_TOPOLOGY", &b.1)
        .args(["-g", "1", "-n", "100", "-p", port, "127.0.0.1"]);
    let client = start(ns.wrap(&c), dir, "client").finish();
    let server = server.finish();
    for (who, r, me, peer) in [("server", &server, 1, 2), ("client", &client, 2, 1)] {
        assert!(
            r.status.success(),
            "{who} ({}): {}{}",
            r.status,
            r.out,
            r.err
        );
        assert_eq!(r.err, "", "{who}'s stderr");
        let lines: Vec<&str> = r.out.lines().collect();
        assert_eq!(lines.len(), 4, "{who}: {}", r.out);
        assert!(
            lines[0].ends_with(&format!("GID ::ffff:10.100.0.{me}")),
            "{}",
            r.out
        );
        assert!(
            lines[1].ends_with(&format!("GID ::ffff:10.100.0.{peer}")),
            "{}",
            r.out
        );
        assert!(lines[2].starts_with("819200 bytes in "), "{}", r.out);
        assert!(lines[3].starts_with("100 iters in "), "{}", r.out);
    }
}

/// Two fabric processes joined by VXLAN (each with its own host) carry an RC pingpong
/// from one's host to the other's, losing nothing.
#[test]
fn two_fabrics_joined_by_vxlan_carry_rc_pingpong_between_their_hosts() {
    let TwoFabrics { dir, ns, a, b } = TwoFabrics::new("wire-two", "", "1", "");
    pingpong_across(&dir, &ns, &a, &b);
    let (sa, sb) = (a.0.stop(), b.0.stop());
    let pa = port_counts(&sa, "vxlan 127.0.0.1:4789 -> 127.0.0.1:4790 vni 42");
    let pb = port_counts(&sb, "vxlan 127.0.0.1:4790 -> 127.0.0.1:4789 vni 42");
    // 100 iterations of 4 packets and an ACK each way at least, each received (a
    // datagram sent just before the receiving fabric stopped may not have been read).
    assert!(pa.1 >= 500 && pb.1 >= 500, "{sa}\n{sb}");
    assert!(pa.0 >= 500 && pb.0 >= 500, "{sa}\n{sb}");
    assert!(pa.0 <= pb.1 && pb.0 <= pa.1, "{sa}\n{sb}");
    assert_eq!((pa.2, pa.3, pb.2, pb.3), (0, 0, 0, 0), "{sa}\n{sb}");
    for s in [&sa, &sb] {
        assert!(s.contains("lost: none"), "{s}");
    }
}

/// Over a VXLAN tunnel losing 2% of the frames each way (the ports' faults), RC
/// retransmits and the pingpong completes.
#[test]
fn rc_completes_over_a_lossy_vxlan_port() {
    let TwoFabrics { dir, ns, a, b } =
        TwoFabrics::new("wire-lossy", "faults = { loss = 0.02 }", "5", "");
    pingpong_across(&dir, &ns, &a, &b);
    let (sa, sb) = (a.0.stop(), b.0.stop());
    let lost = |s: &str| {
        s.split("lost: loss ")
            .nth(1)
            .and_then(|r| r.split([',', ';']).next())
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0)
    };
    assert!(
        lost(&sa) + lost(&sb) > 0,
        "the seed lost nothing:\n{sa}\n{sb}"
    );
}

/// SPEAD multicast from fabric A's h1 reaches fabric B's h2 (a RAW_PACKET QP) across
/// their tunnel, and a Linux vxlan interface beyond A's second port (a kernel UDP
/// socket): three peers of one L2 network, each with exactly the heaps of a file.
#[test]
fn spead_multicast_crosses_to_another_fabric_and_a_kernel_peer() {
    need_root();
    let tools = hw_tools();
    let (send, recv) = (tools.join("spead-send"), tools.join("spead-recv"));
    let dir = scratch("wire-three");
    let want = reference_heaps(&tools, &dir);
    let (f, k) = (Netns::new(), Netns::new());
    kernel_peer(&f, &k);
    let to_kernel = "[[port]]\nkind = \"vxlan\"\nlocal = \"10.200.0.1:4789\"\n\
                     remote = \"10.200.0.2:4789\"\nvni = 42\n";
    let (a, b) = two_fabrics(&dir, &f, "", "1", to_kernel);

    let mut r = b.0.program(&recv, "h2");
    r.env("VERBS_EMU_TOPOLOGY", &b.1)
        .args(on_nic("10.100.0.2", "ibv:239.10.0.1:7148"))
        .arg("--json");
    let h2_rx = start(f.wrap(&r), &dir, "h2-recv");
    let mut r = Command::new(&recv);
    r.args(["udp:239.10.0.1:7148", "--bind", "10.100.0.9", "--json"]);
    let kernel_rx = start(k.wrap(&r), &dir, "kernel-recv");
    wait_for(
        &dir.join("h2-recv.err"),
        &nic_ready("10.100.0.2", "ibv:239.10.0.1:7148"),
    );
    wait_for(
        &dir.join("kernel-recv.err"),
        "spead-recv: listening on udp:239.10.0.1:7148",
    );
    let mut s = a.0.program(&send, "h1");
    s.env("VERBS_EMU_TOPOLOGY", &a.1)
        .args(HEAP_ARGS)
        .args(on_nic("10.100.0.1", "ibv:239.10.0.1:7148"));
    let packets = packets_sent(&start(f.wrap(&s), &dir, "h1-send").finish());
    let got = h2_rx.finish();
    assert_heaps("fabric B's h2", &got, &want);
    assert_all_delivered(&got, "ibv:239.10.0.1:7148", packets);
    assert_heaps("the kernel's socket", &kernel_rx.finish(), &want);
    let (sa, sb) = (a.0.stop(), b.0.stop());
    let to_b = port_counts(&sa, "vxlan 127.0.0.1:4789 -> 127.0.0.1:4790 vni 42");
    let to_k = port_counts(&sa, "vxlan 10.200.0.1:4789 -> 10.200.0.2:4789 vni 42");
    assert!(to_b.1 >= packets && to_k.1 >= packets, "{sa}");
    let from_a = port_counts(&sb, "vxlan 127.0.0.1:4790 -> 127.0.0.1:4789 vni 42");
    assert!(from_a.0 >= packets && from_a.0 <= to_b.1, "{sa}\n{sb}");
}

/// A fabric refuses a bad `--vxlan` in one line, and a port whose address is taken.
#[test]
fn bad_port_flags_are_refused_in_one_line() {
    let fabric = env!("CARGO_BIN_EXE_verbs-emu-fabric");
    let o = run({
        let mut c = Command::new(fabric);
        c.args(["--vxlan", "127.0.0.1:4789,127.0.0.1:4790,16777216"]);
        c
    });
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.starts_with(
            "verbs-emu-fabric: --vxlan 127.0.0.1:4789,127.0.0.1:4790,16777216: vni = 16777216 \
             is not a 24-bit VNI (0..=16777215)\n"
        ),
        "{err}"
    );
    let taken = std::net::UdpSocket::bind("127.0.0.1:0").expect("a UDP socket");
    let addr = taken.local_addr().expect("its address");
    let dir = scratch("wire-taken");
    let o = run({
        let mut c = Command::new(fabric);
        c.arg("--dir")
            .arg(dir.join("run"))
            .args(["--vxlan", &format!("{addr},127.0.0.1:9,1")]);
        c
    });
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!(
            "verbs-emu-fabric: port vxlan {addr} -> 127.0.0.1:9 vni 1: cannot bind {addr}: "
        )),
        "{err}"
    );
}

/// Reads one length-prefixed frame from a QEMU stream peer's socket.
fn read_frame(s: &mut std::os::unix::net::UnixStream) -> Vec<u8> {
    use std::io::Read;
    let mut len = [0u8; 4];
    s.read_exact(&mut len).expect("a frame's length");
    let mut f = vec![0; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut f).expect("a frame");
    f
}

/// Writes frames to a QEMU stream peer's socket, each after its length, in pieces of
/// 7 bytes (the port reassembles them).
fn write_frames(s: &mut std::os::unix::net::UnixStream, frames: &[Vec<u8>]) {
    use std::io::Write;
    let mut wire = Vec::new();
    for f in frames {
        wire.extend_from_slice(&u32::try_from(f.len()).expect("a frame").to_be_bytes());
        wire.extend_from_slice(f);
    }
    for piece in wire.chunks(7) {
        s.write_all(piece).expect("write to the fabric");
    }
}

/// A peer on a fabric's QEMU stream port (`--qemu-stream`), playing a VM's NIC with the
/// MAC 52:54:00:12:34:56: its ARP request for h1 gets h1's reply; it receives every
/// frame of h1's SPEAD multicast (the port gets all multicast); sent back from its MAC,
/// cut in 7-byte pieces, those frames reach h2's RAW_PACKET QP as exactly the heaps of a
/// file; and a frame with a broken length is counted and hangs the peer up.
#[test]
fn a_qemu_stream_peer_exchanges_frames_with_emulated_hosts() {
    let tools = hw_tools();
    let (send, recv) = (tools.join("spead-send"), tools.join("spead-recv"));
    let dir = scratch("wire-stream");
    let want = reference_heaps(&tools, &dir);
    let sock = dir.join("vm.sock");
    let fabric = Fabric::start(
        &dir,
        &["--qemu-stream", sock.to_str().expect("a UTF-8 path")],
    );
    let mut vm = std::os::unix::net::UnixStream::connect(&sock).expect("connect as QEMU");
    vm.set_read_timeout(Some(DEADLINE)).expect("a read timeout");
    let me = [0x52, 0x54, 0, 0x12, 0x34, 0x56];

    // ARP for h1 (10.100.0.1) from 10.100.0.20.
    let mut arp = vec![0xff; 6];
    arp.extend_from_slice(&me);
    arp.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 1]);
    arp.extend_from_slice(&me);
    arp.extend_from_slice(&[10, 100, 0, 20, 0, 0, 0, 0, 0, 0, 10, 100, 0, 1]);
    write_frames(&mut vm, &[arp]);
    let reply = read_frame(&mut vm);
    assert_eq!(reply.len(), 60);
    assert_eq!(reply[..6], me);
    assert_eq!(reply[6..12], [2, 0, 10, 100, 0, 1], "from h1's MAC");
    assert_eq!(reply[20..22], [0, 2], "an ARP reply");
    assert_eq!(reply[28..32], [10, 100, 0, 1]);

    // h1's multicast heaps reach the VM, every frame.
    let mut s = fabric.program(&send, "h1");
    s.args(HEAP_ARGS)
        .args(on_nic("10.100.0.1", "ibv:239.10.0.1:7148"));
    let packets = packets_sent(&start(s, &dir, "h1-send").finish());
    let frames: Vec<Vec<u8>> = (0..packets).map(|_| read_frame(&mut vm)).collect();
    for f in &frames {
        assert_eq!(f[..6], [0x01, 0x00, 0x5e, 10, 0, 1], "to the group's MAC");
        assert_eq!(f[30..34], [239, 10, 0, 1]);
    }

    // The VM sends them back from its own MAC: h2 receives the heaps.
    let mut r = fabric.program(&recv, "h2");
    r.args(on_nic("10.100.0.2", "ibv:239.10.0.1:7148"))
        .arg("--json");
    let h2_rx = start(r, &dir, "h2-recv");
    wait_for(
        &dir.join("h2-recv.err"),
        &nic_ready("10.100.0.2", "ibv:239.10.0.1:7148"),
    );
    let mine: Vec<Vec<u8>> = frames
        .into_iter()
        .map(|mut f| {
            f[6..12].copy_from_slice(&me);
            f
        })
        .collect();
    write_frames(&mut vm, &mine);
    let got = h2_rx.finish();
    assert_heaps("h2 from the VM", &got, &want);
    assert_all_delivered(&got, "ibv:239.10.0.1:7148", packets);

    // A length over QEMU's largest frame: the port hangs up on the peer.
    {
        use std::io::{Read, Write};
        vm.write_all(&u32::MAX.to_be_bytes()).expect("write");
        let mut rest = Vec::new();
        // Whatever was on its way, then the end of the stream.
        let _ = vm.read_to_end(&mut rest);
    }
    let summary = fabric.stop();
    let (frames_in, out, malformed, unsent) =
        port_counts(&summary, &format!("qemu-stream {}", sock.display()));
    assert_eq!(frames_in, 1 + packets, "{summary}");
    assert!(out >= packets, "{summary}");
    assert_eq!((malformed, unsent), (0, 0), "{summary}");
    assert!(
        summary.ends_with("(1 peers connected, 0 turned away, 1 hung up on)"),
        "{summary}"
    );
}

/// The IPv4 header checksum of `h` (RFC 1071).
fn ipv4_checksum(h: &[u8]) -> u16 {
    let mut sum: u32 = h
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// A DHCP message (op 2, a reply) from 10.100.0.1 (h1's address and MAC) to `mac`
/// offering 10.100.0.20 for transaction `xid`, of DHCP type `kind` (2 offer, 5 ack).
fn dhcp_reply(mac: &[u8], xid: &[u8], kind: u8) -> Vec<u8> {
    let mut bootp = vec![0u8; 236];
    bootp[..4].copy_from_slice(&[2, 1, 6, 0]);
    bootp[4..8].copy_from_slice(xid);
    bootp[16..20].copy_from_slice(&[10, 100, 0, 20]);
    bootp[20..24].copy_from_slice(&[10, 100, 0, 1]);
    bootp[28..34].copy_from_slice(mac);
    bootp.extend_from_slice(&[99, 130, 83, 99, 53, 1, kind, 54, 4, 10, 100, 0, 1]);
    bootp.extend_from_slice(&[51, 4, 0, 0, 0x0e, 0x10, 1, 4, 255, 255, 255, 0, 255]);
    let udp_len = u16::try_from(8 + bootp.len()).expect("small");
    let mut ip = vec![0x45, 0, 0, 0, 0, 0, 0, 0, 64, 17, 0, 0];
    ip[2..4].copy_from_slice(&(20 + udp_len).to_be_bytes());
    ip.extend_from_slice(&[10, 100, 0, 1, 255, 255, 255, 255]);
    let sum = ipv4_checksum(&ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    let mut f = mac.to_vec();
    f.extend_from_slice(&[2, 0, 10, 100, 0, 1, 0x08, 0x00]);
    f.extend_from_slice(&ip);
    f.extend_from_slice(&[0, 67, 0, 68]);
    f.extend_from_slice(&udp_len.to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(&bootp);
    f
}

/// The DHCP message type of a frame from `mac` to UDP port 67, and its transaction id.
fn dhcp_from(f: &[u8], mac: &[u8]) -> Option<(u8, Vec<u8>)> {
    if f.len() < 282 || &f[6..12] != mac || f[12..14] != [8, 0] || f[23] != 17 {
        return None;
    }
    let ihl = usize::from(f[14] & 0x0f) * 4;
    let udp = 14 + ihl;
    if f[udp + 2..udp + 4] != [0, 67] {
        return None;
    }
    let bootp = &f[udp + 8..];
    let mut opts = bootp.get(240..)?;
    while let [code, len, rest @ ..] = opts {
        if *code == 53 {
            return Some((*rest.first()?, bootp[4..8].to_vec()));
        }
        opts = rest.get(usize::from(*len)..)?;
    }
    None
}

/// A real QEMU (Debian's 7.2, `-netdev stream` over the fabric's Unix socket, a
/// virtio-net NIC whose iPXE boot ROM runs DHCP): its DHCP discover crosses the fabric
/// (seen here through a second port, a VXLAN tunnel to this test's UDP socket), an offer
/// sent back through the fabric reaches it and it answers with a DHCP request. Frames
/// both ways in QEMU's own framing, no guest kernel needed.
#[test]
fn qemus_netdev_stream_exchanges_frames_with_the_fabric() {
    let qemu = require("qemu-system-x86_64", "qemu-system-x86");
    assert!(
        Path::new("/usr/lib/ipxe/qemu/efi-virtio.rom").exists()
            || Path::new("/usr/share/qemu/efi-virtio.rom").exists(),
        "QEMU's virtio-net boot ROM is missing: install the Debian package ipxe-qemu"
    );
    let dir = scratch("wire-qemu");
    let tunnel = std::net::UdpSocket::bind("127.0.0.1:0").expect("a UDP socket");
    tunnel
        .set_read_timeout(Some(Duration::from_millis(500)))
        .expect("a timeout");
    let me = tunnel.local_addr().expect("its address");
    let sock = dir.join("vm.sock");
    let fabric = Fabric::start(
        &dir,
        &[
            "--qemu-stream",
            sock.to_str().expect("a UTF-8 path"),
            "--vxlan",
            &format!("127.0.0.1:0,{me},42"),
        ],
    );
    let mac = [0x52, 0x54, 0, 0x12, 0x34, 0x56];
    let mut vm = Command::new(qemu);
    vm.args(["-accel", "tcg", "-machine", "pc", "-m", "256"])
        .args(["-nodefaults", "-no-user-config", "-display", "none"])
        .args(["-monitor", "none", "-serial", "none", "-boot", "n"])
        .arg("-netdev")
        .arg(format!(
            "stream,id=n0,server=off,addr.type=unix,addr.path={}",
            sock.display()
        ))
        .args(["-device", "virtio-net-pci,netdev=n0,mac=52:54:00:12:34:56"]);
    let mut vm = start(vm, &dir, "qemu");
    // What comes out of the tunnel: the fabric's port sends from an address of its own.
    let mut buf = vec![0u8; 65536];
    let mut peer = None;
    let mut next = |want: u8, peer: &mut Option<std::net::SocketAddr>| -> Vec<u8> {
        let begin = Instant::now();
        loop {
            assert!(
                begin.elapsed() < DEADLINE,
                "no DHCP message {want} from QEMU; its stderr: {}",
                vm.err_so_far()
            );
            let Ok((n, from)) = tunnel.recv_from(&mut buf) else {
                continue;
            };
            *peer = Some(from);
            assert!(n > 8 && buf[0] == 0x08, "a VXLAN datagram");
            if let Some((kind, xid)) = dhcp_from(&buf[8..n], &mac) {
                if kind == want {
                    return xid;
                }
            }
        }
    };
    let xid = next(1, &mut peer);
    // The offer, as from h1: into the fabric through the tunnel, out to QEMU.
    let mut d = vec![0x08, 0, 0, 0, 0, 0, 42, 0];
    d.extend_from_slice(&dhcp_reply(&mac, &xid, 2));
    let fabric_port = peer.expect("the fabric's address");
    tunnel.send_to(&d, fabric_port).expect("send the offer");
    let request = next(3, &mut peer);
    assert_eq!(request, xid, "the request answers our offer");
    vm.kill();
    let _ = vm.finish();
    let summary = fabric.stop();
    let (frames_in, out, malformed, _) =
        port_counts(&summary, &format!("qemu-stream {}", sock.display()));
    assert!(frames_in >= 2 && out >= 1 && malformed == 0, "{summary}");
}
