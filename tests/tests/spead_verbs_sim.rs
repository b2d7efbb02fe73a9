//! SPEAD over verbs on the simulator: raw (mlx5 personality) and UD (rxe personality),
//! the same bodies that run on Soft-RoCE for UD, plus what only a simulated fabric can
//! do: link faults (loss, reordering, duplication, single-bit corruption; seeded, so
//! every run is the same), an exact drop list in the fabric, and receive-buffer
//! exhaustion counted at the NIC. The sender's own tests (gathering, parts, pacing,
//! `max_heaps`) are in the `sender` module.

use std::net::{Ipv4Addr, SocketAddrV4};

use backend_sim::frame::eth::Mac;
use backend_sim::verbs::SimContext;
use backend_sim::{FaultPlan, HostId, LinkFaults, Personality, Sim, SimVerbs};
use spead::recv::StreamConfig;
use spead::verbs::{FrameDrop, IbvConfig, Receiver};
use workspace_tests::spead_verbs::{
    assert_exact_loss, drop_at_sender, drop_list, groups_to_receivers, lenient,
    multicast_to_two_receivers, receiver_specs, run_plan, Mode, Node, Outcome, Plan, RecvSpec,
};

#[path = "spead_verbs_sim/sender.rs"]
mod sender;

fn sim_mac(ip: Ipv4Addr) -> [u8; 6] {
    let o = ip.octets();
    [0x02, 0x00, o[0], o[1], o[2], o[3]]
}

#[test]
fn a_simulated_raw_sender_sends_from_its_ports_mac() {
    let ip = Ipv4Addr::new(10, 0, 0, 1);
    let sim = Sim::new(1);
    let h = sim.add_host("h0", ip, Personality::Mlx5).unwrap();
    let verbs = sim.verbs(h);
    assert_eq!(spead::verbs::source_mac(&verbs, ip).unwrap(), sim_mac(ip));
    let other = Ipv4Addr::new(10, 0, 0, 9);
    assert!(matches!(
        spead::verbs::source_mac(&verbs, other),
        Err(spead::verbs::VerbsError::NoInterface { iface, .. }) if iface == other
    ));
}

#[test]
fn raw_multicast_to_two_receivers_on_mlx5() {
    let ip = Ipv4Addr::new(10, 0, 0, 1);
    let sim = Sim::new(1);
    let h = sim.add_host("h0", ip, Personality::Mlx5).unwrap();
    multicast_to_two_receivers(&sim.verbs(h), ip, Mode::Raw, sim_mac(ip));
}

#[test]
fn ud_multicast_to_two_receivers_on_rxe() {
    let ip = Ipv4Addr::new(10, 77, 0, 1);
    let sim = Sim::new(1);
    let h = sim.add_host("h0", ip, Personality::Rxe).unwrap();
    multicast_to_two_receivers(&sim.verbs(h), ip, Mode::Ud, sim_mac(ip));
}

/// A sender host and `receivers` receiver hosts: mlx5 for raw, rxe for UD.
struct Net {
    sim: Sim,
    hosts: Vec<(HostId, Ipv4Addr)>,
    verbs: Vec<SimVerbs>,
}

impl Net {
    /// Runs the simulation until nothing is left to happen and returns the capture the
    /// test started.
    fn capture_when_idle(&self) -> Vec<u8> {
        self.sim.run_until_idle();
        self.sim
            .with_fabric(|f| f.finish_capture())
            .unwrap()
            .unwrap()
    }

    fn new(seed: u64, mode: Mode, receivers: u8) -> Net {
        let sim = Sim::new(seed);
        let personality = match mode {
            Mode::Raw => Personality::Mlx5,
            Mode::Ud => Personality::Rxe,
        };
        let hosts: Vec<_> = (0..=receivers)
            .map(|i| {
                let ip = Ipv4Addr::new(10, 0, 0, 1 + i);
                let name = if i == 0 {
                    "tx".to_string()
                } else {
                    format!("rx{i}")
                };
                (sim.add_host(&name, ip, personality).unwrap(), ip)
            })
            .collect();
        let verbs = hosts.iter().map(|&(h, _)| sim.verbs(h)).collect();
        Net { sim, hosts, verbs }
    }

    fn node(&self, i: usize) -> Node<'_, SimVerbs> {
        Node {
            verbs: &self.verbs[i],
            iface: self.hosts[i].1,
            mac: sim_mac(self.hosts[i].1),
        }
    }

    fn receivers(&self) -> Vec<Node<'_, SimVerbs>> {
        (1..self.hosts.len()).map(|i| self.node(i)).collect()
    }

    /// A raw sender on host 0 to `cfg`'s endpoints, from that host's interface, with
    /// 1024-byte packets and `buffer_size` bytes of send buffer.
    fn raw_sender(
        &self,
        mut cfg: spead::verbs::IbvConfig,
        buffer_size: usize,
    ) -> spead::verbs::Sender<backend_sim::verbs::SimContext> {
        cfg.interface = Some(self.hosts[0].1);
        cfg.max_size = 1024;
        cfg.buffer_size = buffer_size;
        spead::verbs::Sender::raw(&self.verbs[0], &cfg, sim_mac(self.hosts[0].1)).unwrap()
    }

    /// A raw reader on host 1 of `endpoints`, with 1472-byte frames and room for 64.
    fn raw_reader(&self, endpoints: Vec<SocketAddrV4>) -> (IbvConfig, Receiver<SimContext>) {
        let mut cfg = IbvConfig::new(endpoints, self.hosts[1].1);
        cfg.max_size = 1472;
        cfg.buffer_size = 64 * 1472;
        let rx = Receiver::raw(&self.verbs[1], &cfg).unwrap();
        (cfg, rx)
    }

    /// An Ethernet frame from host 0 (UDP port 9000) to `dst_mac` and `dst` carrying the
    /// one packet of a 100-byte heap `cnt`.
    fn heap_frame(&self, cnt: u64, dst_mac: [u8; 6], dst: SocketAddrV4) -> Vec<u8> {
        let tx_ip = self.hosts[0].1;
        let plan = Plan::new(Mode::Raw, 1, 1, 100);
        spead::verbs::frame::udp_frame(
            sim_mac(tx_ip),
            SocketAddrV4::new(tx_ip, 9000),
            dst_mac,
            dst,
            4,
            &plan.packets_of(cnt)[0],
        )
    }

    /// Hands `frames` to the fabric as if host 0's port sent them, and runs the
    /// simulation until nothing is left to do.
    fn inject(&self, frames: impl IntoIterator<Item = Vec<u8>>) {
        let tx_port = self.sim.port_of(self.hosts[0].0).unwrap();
        for f in frames {
            self.sim
                .with_fabric(|fab| fab.transmit(tx_port, f))
                .unwrap();
        }
        self.sim.run_until_idle();
    }
}

/// Polls `rx` into a fresh lenient stream until a poll finds nothing.
fn drain(rx: &mut Receiver<SimContext>) -> spead::recv::Stream {
    let mut stream = spead::recv::Stream::new(lenient());
    while rx
        .poll_into(&mut stream, Some(std::time::Duration::from_millis(1)))
        .unwrap()
        > 0
    {}
    stream
}

/// Flushes `stream` and returns the heap counters of what it assembled, each heap
/// asserted complete.
fn complete_cnts(mut stream: spead::recv::Stream) -> Vec<u64> {
    stream.flush();
    let mut cnts = Vec::new();
    while let Some(h) = stream.pop_heap() {
        assert!(h.complete);
        cnts.push(h.cnt);
    }
    cnts
}

const MODES: [Mode; 2] = [Mode::Raw, Mode::Ud];

#[test]
fn several_groups_and_receiver_hosts_without_faults() {
    for mode in MODES {
        let net = Net::new(7, mode, 3);
        let r = net.receivers();
        groups_to_receivers(net.node(0), [r[0], r[1], r[2]], mode);
        let f = net.sim.with_fabric(|f| f.stats());
        assert_eq!(f.dropped(), 0, "{mode:?}");
    }
}

#[test]
fn drop_at_sender_on_the_simulator() {
    for mode in MODES {
        let net = Net::new(8, mode, 1);
        drop_at_sender(net.node(0), net.node(1), mode);
    }
}

/// The fabric's exact drop list gives the same outcome as skipping the same packets at
/// the sender.
#[test]
fn exact_drop_list_in_the_fabric_matches_drop_at_sender() {
    for mode in MODES {
        let plan = Plan::new(mode, 2, 5, 8 * 1024);
        let lost = drop_list(&plan);
        let net = Net::new(9, mode, 1);
        let specs = receiver_specs(&net.receivers(), &plan, lenient());
        let out = run_plan(
            net.node(0),
            &specs,
            mode,
            &plan,
            || {
                net.sim
                    .set_faults(FaultPlan {
                        drop_packets: lost.clone(),
                        ..FaultPlan::default()
                    })
                    .unwrap();
            },
            || {},
        );
        assert_exact_loss(&out[0], &plan, &lost);
        let f = net.sim.with_fabric(|f| f.stats());
        assert_eq!(f.dropped_list, lost.len() as u64, "{mode:?}");
    }
}

/// Runs `plan` with `faults` on every link, `receivers` receiver hosts with the
/// [`receiver_specs`] group sets and `stream` assembly; returns the outcomes.
fn run_with_faults(
    seed: u64,
    mode: Mode,
    plan: &Plan,
    faults: LinkFaults,
    streams: &[StreamConfig],
) -> (Vec<Outcome>, backend_sim::FabricStats) {
    run_with_faults_verifying(seed, mode, plan, faults, streams, false)
}

/// As [`run_with_faults`], the receivers' `verify_checksums` set to `verify`.
fn run_with_faults_verifying(
    seed: u64,
    mode: Mode,
    plan: &Plan,
    faults: LinkFaults,
    streams: &[StreamConfig],
    verify: bool,
) -> (Vec<Outcome>, backend_sim::FabricStats) {
    let net = Net::new(seed, mode, streams.len() as u8);
    let mut specs: Vec<RecvSpec<'_, SimVerbs>> =
        receiver_specs(&net.receivers(), plan, StreamConfig::default());
    for (s, c) in specs.iter_mut().zip(streams) {
        s.stream = c.clone();
        s.verify_checksums = verify;
    }
    let out = run_plan(
        net.node(0),
        &specs,
        mode,
        plan,
        || {
            net.sim
                .set_faults(FaultPlan {
                    default_link: faults.clone(),
                    ..FaultPlan::default()
                })
                .unwrap();
        },
        || {},
    );
    let stats = net.sim.with_fabric(|f| f.stats());
    (out, stats)
}

#[test]
fn loss_leaves_heaps_incomplete_or_lost_never_wrong() {
    for mode in MODES {
        let plan = Plan::new(mode, 3, 8, 16 * 1024);
        let (out, f) = run_with_faults(
            11,
            mode,
            &plan,
            LinkFaults::loss(0.03),
            &[lenient(), lenient(), StreamConfig::default()],
        );
        assert!(f.dropped_loss > 0, "{mode:?}: the seed loses frames");
        let damaged: usize = out.iter().map(|o| o.incomplete.len() + o.lost.len()).sum();
        let complete: usize = out.iter().map(|o| o.complete.len()).sum();
        assert!(damaged > 0 && complete > 0, "{mode:?}: {out:?}");
        // A strict (in-order, incomplete dropped) receiver sees only complete heaps.
        assert!(out[2].incomplete.is_empty(), "{mode:?}");
    }
}

#[test]
fn reordering_is_absorbed_by_out_of_order_assembly() {
    for mode in MODES {
        let plan = Plan::new(mode, 3, 8, 16 * 1024);
        let faults = LinkFaults {
            reorder: 0.2,
            reorder_window_ns: 3_000,
            ..LinkFaults::default()
        };
        // Receiver 1 (every group) assembles out of order; receiver 2 (groups 0 and 1)
        // in order, as spead2 does by default.
        let strict = StreamConfig {
            deliver_incomplete: true,
            ..StreamConfig::default()
        };
        // Enough live heaps that a held-back packet finds its heap still there.
        let ooo = StreamConfig {
            max_heaps: 16,
            ..lenient()
        };
        let (out, f) = run_with_faults(12, mode, &plan, faults, &[ooo, strict]);
        assert_eq!(f.dropped(), 0);
        let all: Vec<u64> = plan.send_order();
        let mut got = out[0].complete.clone();
        got.sort_unstable();
        let mut want = all.clone();
        want.sort_unstable();
        assert_eq!(got, want, "{mode:?}: every heap complete out of order");
        assert!(out[0].incomplete.is_empty() && out[0].lost.is_empty());
        assert!(
            out[1].stream.packets_dropped_in_order > 0,
            "{mode:?}: the seed reorders within heaps"
        );
        assert!(!out[1].incomplete.is_empty(), "{mode:?}");
    }
}

#[test]
fn duplicates_are_dropped_and_heaps_complete() {
    for mode in MODES {
        let plan = Plan::new(mode, 3, 8, 16 * 1024);
        let (out, f) = run_with_faults(
            13,
            mode,
            &plan,
            LinkFaults {
                duplicate: 0.1,
                ..LinkFaults::default()
            },
            &[lenient(), StreamConfig::default()],
        );
        assert!(f.duplicated > 0);
        for (o, groups) in out.iter().zip([3u64, 2]) {
            let heaps = plan.heaps * groups;
            assert_eq!(o.complete.len() as u64, heaps, "{mode:?}: {o:?}");
            let sent = heaps * plan.packets_per_heap();
            assert!(o.transport.frames > sent, "{mode:?}: duplicates arrived");
            let dup = o.transport.frames - sent;
            // A duplicate arriving after its heap completed starts a fragment instead.
            let dropped = o.stream.packets_duplicate + o.stream.packets_dropped_in_order;
            assert!(dropped > 0 && dropped <= dup, "{mode:?}: {o:?}");
            assert!(o.fragments.len() as u64 <= dup - dropped, "{mode:?}");
        }
    }
}

#[test]
fn corrupted_frames_never_make_a_complete_heap_with_wrong_bytes() {
    for mode in MODES {
        let plan = Plan::new(mode, 3, 8, 16 * 1024);
        // Flips on the wire: every one fails the Ethernet FCS of the port it reaches.
        let (out, f) = run_with_faults(
            14,
            mode,
            &plan,
            LinkFaults::corrupt(0.05),
            &[lenient(), lenient(), lenient()],
        );
        assert!(f.corrupted_wire > 0, "{mode:?}");
        assert_eq!(f.dropped_fcs, f.corrupted_wire, "{mode:?}");
        assert_eq!(f.dropped_checksum(), f.dropped_fcs, "{mode:?}");
        let damaged: usize = out.iter().map(|o| o.incomplete.len() + o.lost.len()).sum();
        assert!(damaged > 0, "{mode:?}");
        // Flips inside the switch keep a good FCS: UD frames fail the NIC's checks (most
        // the ICRC), raw frames arrive without IP_CSUM_OK and a receiver that asked for
        // checksums (verify_checksums; spead2 checks none) drops them. run_plan
        // compares every delivered heap's bytes with what was sent.
        let (out, f) = run_with_faults_verifying(
            14,
            mode,
            &plan,
            LinkFaults {
                corrupt_switch: 0.05,
                ..LinkFaults::default()
            },
            &[lenient(), lenient(), lenient()],
            true,
        );
        assert!(f.corrupted_switch > 0, "{mode:?}");
        assert_eq!(f.dropped_fcs, 0, "{mode:?}");
        let flagged: u64 = out
            .iter()
            .map(|o| {
                o.transport
                    .dropped
                    .get(&FrameDrop::Checksum)
                    .copied()
                    .unwrap_or(0)
            })
            .sum();
        match mode {
            Mode::Ud => assert!(f.dropped_icrc > 0 && flagged == 0, "{mode:?}"),
            Mode::Raw => assert!(f.dropped_checksum() == 0 && flagged > 0, "{mode:?}"),
        }
        for o in &out {
            assert_eq!(o.stream.packets_malformed, 0, "{mode:?}");
        }
    }
}

#[test]
fn receive_buffer_exhaustion_is_counted_at_the_nic() {
    for mode in MODES {
        let plan = Plan::new(mode, 1, 8, 16 * 1024);
        let net = Net::new(15, mode, 1);
        let rx = net.receivers();
        // 8 slots for 8 heaps of 12 to 17 packets, all arriving before the receiver polls.
        let specs = vec![RecvSpec {
            node: rx[0],
            groups: vec![0],
            buffer_size: 8 * (plan.packet + 64),
            stream: lenient(),
            verify_checksums: false,
        }];
        let out = run_plan(
            net.node(0),
            &specs,
            mode,
            &plan,
            || {},
            || {
                net.sim.run_until_idle();
            },
        );
        let nic = net.sim.nic_stats(net.hosts[1].0);
        let sent = plan.packets_sent();
        assert!(nic.rx_no_wqe > 0, "{mode:?}: {nic:?} {out:?}");
        assert_eq!(
            out[0].transport.frames + nic.rx_no_wqe,
            sent,
            "{mode:?}: every frame received or dropped for want of a receive"
        );
        assert_eq!(out[0].transport.frames, 8, "{mode:?}: one frame per slot");
        assert!(out[0].complete.is_empty());
        assert_eq!(out[0].incomplete.len(), 1, "{mode:?}");
    }
}

#[test]
fn fault_runs_are_deterministic() {
    let run = || {
        let plan = Plan::new(Mode::Ud, 2, 6, 8 * 1024);
        let faults = LinkFaults {
            loss: 0.02,
            duplicate: 0.02,
            corrupt: 0.02,
            reorder: 0.1,
            reorder_window_ns: 2_000,
            ..LinkFaults::default()
        };
        run_with_faults(21, Mode::Ud, &plan, faults, &[lenient(), lenient()])
    };
    assert_eq!(run(), run());
}

/// Frames steered to a raw receiver: what spead2's `udp_from_ethernet` refuses is
/// counted by cause and dropped; IP options are skipped and UDP checksums (wrong or
/// zero) ignored, as in spead2, unless `verify_checksums` asks for them; frames =
/// delivered + dropped.
#[test]
fn raw_receiver_counts_each_drop_cause() {
    use spead::verbs::frame::checksum;

    for verify in [false, true] {
        let net = Net::new(31, Mode::Raw, 1);
        let group = SocketAddrV4::new(Ipv4Addr::new(239, 77, 3, 1), 7160);
        let mut cfg = IbvConfig::new(vec![group], net.hosts[1].1);
        cfg.max_size = 1472;
        cfg.buffer_size = 64 * 1472;
        cfg.verify_checksums = verify;
        let mut rx = Receiver::raw(&net.verbs[1], &cfg).unwrap();
        let group_mac = Mac::for_ipv4_multicast(*group.ip()).0;
        let good = |cnt: u64| net.heap_frame(cnt, group_mac, group);
        let fix_ip_checksum = |f: &mut Vec<u8>| {
            f[24..26].copy_from_slice(&[0, 0]);
            let c = checksum(&f[14..14 + usize::from(f[14] & 0x0f) * 4]);
            f[24..26].copy_from_slice(&c.to_be_bytes());
        };
        // IP options: a 4-byte NOP option (IHL 6): spead2 skips them.
        let mut options = good(2);
        options.splice(34..34, [1u8, 1, 1, 1]);
        options[14] = 0x46;
        let total = u16::from_be_bytes([options[16], options[17]]) + 4;
        options[16..18].copy_from_slice(&total.to_be_bytes());
        fix_ip_checksum(&mut options);
        // A first fragment (MF set).
        let mut fragment = good(3);
        fragment[20] = 0x20;
        fix_ip_checksum(&mut fragment);
        // No UDP checksum (zero), and a wrong one.
        let mut zero = good(5);
        zero[40..42].copy_from_slice(&[0, 0]);
        let mut wrong = good(6);
        wrong[40] ^= 0x5a;
        net.inject([good(1), options, fragment, good(4), zero, wrong]);
        let stream = drain(&mut rx);
        let s = rx.stats();
        assert_eq!(s.frames, 6, "{s:?}");
        assert_eq!(s.frames, s.delivered + s.dropped_total());
        assert_eq!(s.dropped.get(&FrameDrop::Fragment), Some(&1), "{s:?}");
        let checksum_drops = s.dropped.get(&FrameDrop::Checksum).copied();
        if verify {
            assert_eq!(s.delivered, 4, "{s:?}");
            assert_eq!(checksum_drops, Some(1), "the wrong UDP checksum: {s:?}");
        } else {
            assert_eq!(s.delivered, 5, "{s:?}");
            assert_eq!(checksum_drops, None, "{s:?}");
        }
        let cnts = complete_cnts(stream);
        let want: &[u64] = if verify {
            &[1, 2, 4, 5]
        } else {
            &[1, 2, 4, 5, 6]
        };
        assert_eq!(cnts, want, "verify {verify}");
    }
}

/// spead2's reader endpoints (`create_flow`): a multicast group, a unicast address of
/// the interface and `0.0.0.0` (the port on every address), all on one reader, each
/// steered by its own flow rule; a port no endpoint names reaches no receive queue.
#[test]
fn raw_reader_takes_multicast_unicast_and_wildcard_endpoints() {
    let net = Net::new(32, Mode::Raw, 1);
    let (tx_ip, rx_ip) = (net.hosts[0].1, net.hosts[1].1);
    let group = SocketAddrV4::new(Ipv4Addr::new(239, 77, 4, 1), 7000);
    let unicast = SocketAddrV4::new(rx_ip, 7001);
    let wildcard = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7002);
    let (cfg, mut rx) = net.raw_reader(vec![group, unicast, wildcard]);
    let frame = |cnt, dst_mac, dst| net.heap_frame(cnt, dst_mac, dst);
    let to_rx = sim_mac(rx_ip);
    net.inject([
        frame(1, Mac::for_ipv4_multicast(*group.ip()).0, group),
        frame(2, to_rx, unicast),
        frame(3, to_rx, SocketAddrV4::new(rx_ip, 7002)),
        // No endpoint has port 7003: no flow rule steers it to the reader.
        frame(4, to_rx, SocketAddrV4::new(rx_ip, 7003)),
        frame(5, to_rx, SocketAddrV4::new(rx_ip, 7002)),
    ]);
    let stream = drain(&mut rx);
    let s = rx.stats();
    assert_eq!((s.frames, s.delivered), (4, 4), "{s:?}");
    assert_eq!(complete_cnts(stream), [1, 2, 3, 5]);
    // A unicast endpoint must be an address of the interface (spead2 looks its MAC up).
    let other = IbvConfig::new(vec![SocketAddrV4::new(tx_ip, 7001)], rx_ip);
    let e = Receiver::raw(&net.verbs[1], &other).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("no network interface has address {tx_ip} (the device's interface is {rx_ip})")
    );
    // UD readers attach to groups only.
    let e = Receiver::ud(&net.verbs[1], &cfg).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("endpoint {unicast} is not an IPv4 multicast address")
    );
}

/// A `SPEAD2_IBV_INTERFACE` that is not an IPv4 address is ignored with spead2's
/// warning, and the reader stays on a kernel socket; IPv6 readers are never rerouted.
#[test]
fn a_bad_ibv_interface_leaves_udp_readers_on_the_kernel() {
    use spead::transport::UdpRecvConfig;
    use spead::verbs::{EnvOverride, UdpReader};

    let net = Net::new(33, Mode::Raw, 1);
    let env = EnvOverride::decide(Some("10.0.0.2/24"), None);
    assert_eq!(env.interface, None);
    assert_eq!(env.warnings.len(), 1);
    let udp = UdpRecvConfig::new("127.0.0.1:0".parse().unwrap());
    let r = UdpReader::open_with(&net.verbs[1], &udp, &env).unwrap();
    assert!(!r.is_ibv());
    let good = EnvOverride::decide(Some("10.0.0.2"), None);
    let v6 = UdpRecvConfig::new("[::1]:0".parse().unwrap());
    assert!(!UdpReader::open_with(&net.verbs[1], &v6, &good)
        .unwrap()
        .is_ibv());
    let v4 = UdpRecvConfig::new("0.0.0.0:7300".parse().unwrap());
    assert!(UdpReader::open_with(&net.verbs[1], &v4, &good)
        .unwrap()
        .is_ibv());
}
