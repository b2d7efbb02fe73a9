//! The bare fabric: switching, multicast, timing, faults and determinism.

use backend_sim::frame::eth::Mac;
use backend_sim::frame::roce::{build_roce_frame, opcode, Bth, Deth, RoceHeaders, RoceRoute};
use backend_sim::frame::UdpFrameSpec;
use backend_sim::{
    Direction, Fabric, FaultPlan, LinkConfig, LinkFaultRule, LinkFaults, Output, Partition,
    PortConfig, PortId,
};
use std::net::Ipv4Addr;

fn ip(n: u8) -> Ipv4Addr {
    Ipv4Addr::new(10, 0, 0, n)
}

/// A fabric with `n` hosts of one port each at 10.0.0.1.. (ports 0..n).
fn fabric(seed: u64, n: u8) -> Fabric {
    let mut f = Fabric::new(seed);
    for i in 1..=n {
        f.add_host_with_port(format!("h{i}"), ip(i)).unwrap();
    }
    f
}

fn mac(f: &Fabric, p: u32) -> Mac {
    f.port_config(PortId(p)).unwrap().mac
}

fn udp(f: &Fabric, from: u32, to: u32, seq: u32, len: usize) -> Vec<u8> {
    let mut s = UdpFrameSpec::new(
        mac(f, from),
        mac(f, to),
        (ip(from as u8 + 1), 9000),
        (ip(to as u8 + 1), 9000),
    );
    s.udp_checksum = true;
    let mut payload = vec![0u8; len.max(4)];
    payload[..4].copy_from_slice(&seq.to_be_bytes());
    s.build(&payload)
}

fn mcast(f: &Fabric, from: u32, group: Ipv4Addr, seq: u32) -> Vec<u8> {
    let mut s = UdpFrameSpec::new(
        mac(f, from),
        Mac::for_ipv4_multicast(group),
        (ip(from as u8 + 1), 9000),
        (group, 7148),
    );
    s.udp_checksum = true;
    s.build(&seq.to_be_bytes())
}

fn seq_of(frame: &[u8]) -> u32 {
    u32::from_be_bytes([frame[42], frame[43], frame[44], frame[45]])
}

/// (time, port, seq) of every delivered frame.
fn deliveries(f: &mut Fabric) -> Vec<(u64, u32, u32)> {
    f.drain()
        .into_iter()
        .filter_map(|(t, o)| match o {
            Output::Frame { port, frame, .. } => Some((t, port.0, seq_of(&frame))),
            Output::Timer { .. } => None,
        })
        .collect()
}

#[test]
fn unicast_goes_to_the_owner_of_the_mac_with_latency_and_serialization() {
    let mut f = fabric(1, 3);
    let frame = udp(&f, 0, 2, 1, 1000);
    let len = frame.len();
    f.transmit(PortId(0), frame).unwrap();
    let d = deliveries(&mut f);
    assert_eq!(d.len(), 1);
    let link = LinkConfig::default();
    let expect = 2 * (link.serialization_ns(len) + link.latency_ns);
    assert_eq!(d[0], (expect, 2, 1));
    assert_eq!(f.port_stats(PortId(1)).unwrap().rx_frames, 0);
}

#[test]
fn bandwidth_queues_back_to_back_frames() {
    let mut f = fabric(1, 2);
    for i in 0..3 {
        let fr = udp(&f, 0, 1, i, 1000);
        f.transmit(PortId(0), fr).unwrap();
    }
    let d = deliveries(&mut f);
    let ser = LinkConfig::default().serialization_ns(1042);
    assert_eq!(d.len(), 3);
    assert_eq!(d[1].0 - d[0].0, ser);
    assert_eq!(d[2].0 - d[1].0, ser);
    assert_eq!(d.iter().map(|x| x.2).collect::<Vec<_>>(), vec![0, 1, 2]);
}

#[test]
fn multicast_fans_out_to_joined_ports_only_and_leave_stops_it() {
    let mut f = fabric(1, 5);
    let g = Ipv4Addr::new(239, 1, 2, 3);
    f.join_group(PortId(1), g).unwrap();
    f.join_group(PortId(3), g).unwrap();
    f.join_group(PortId(3), g).unwrap(); // two QPs on one port: one copy
    let fr = mcast(&f, 0, g, 7);
    f.transmit(PortId(0), fr).unwrap();
    let mut ports: Vec<u32> = deliveries(&mut f).iter().map(|d| d.1).collect();
    ports.sort_unstable();
    assert_eq!(ports, vec![1, 3]);
    assert!(f.leave_group(PortId(3), g).unwrap());
    assert!(f.is_member(PortId(3), g), "one reference left");
    assert!(f.leave_group(PortId(3), g).unwrap());
    assert!(!f.leave_group(PortId(3), g).unwrap());
    let fr = mcast(&f, 0, g, 8);
    f.transmit(PortId(0), fr).unwrap();
    assert_eq!(
        deliveries(&mut f).iter().map(|d| d.1).collect::<Vec<_>>(),
        vec![1]
    );
    // Nobody joined: dropped, counted as no route.
    let fr = mcast(&f, 0, Ipv4Addr::new(239, 9, 9, 9), 9);
    f.transmit(PortId(0), fr).unwrap();
    assert!(deliveries(&mut f).is_empty());
    assert_eq!(f.stats().dropped_no_route, 1);
}

#[test]
fn multicast_loops_back_to_a_sender_that_joined() {
    let mut f = fabric(1, 2);
    let g = Ipv4Addr::new(239, 0, 0, 1);
    f.join_group(PortId(0), g).unwrap();
    f.join_group(PortId(1), g).unwrap();
    let fr = mcast(&f, 0, g, 1);
    f.transmit(PortId(0), fr).unwrap();
    let mut ports: Vec<u32> = deliveries(&mut f).iter().map(|d| d.1).collect();
    ports.sort_unstable();
    assert_eq!(ports, vec![0, 1]);
}

#[test]
fn loss_probability_one_loses_everything_and_zero_nothing() {
    let mut f = fabric(3, 2);
    f.set_link_faults(PortId(0), Direction::ToSwitch, LinkFaults::loss(1.0))
        .unwrap();
    for i in 0..10 {
        let fr = udp(&f, 0, 1, i, 64);
        f.transmit(PortId(0), fr).unwrap();
    }
    assert!(deliveries(&mut f).is_empty());
    assert_eq!(f.stats().dropped_loss, 10);
    f.set_link_faults(PortId(0), Direction::ToSwitch, LinkFaults::loss(0.0))
        .unwrap();
    let fr = udp(&f, 0, 1, 99, 64);
    f.transmit(PortId(0), fr).unwrap();
    assert_eq!(deliveries(&mut f).len(), 1);
}

#[test]
fn partial_loss_is_seeded() {
    let run = |seed| {
        let mut f = fabric(seed, 2);
        f.set_link_faults(PortId(1), Direction::FromSwitch, LinkFaults::loss(0.3))
            .unwrap();
        for i in 0..1000 {
            let fr = udp(&f, 0, 1, i, 64);
            f.transmit(PortId(0), fr).unwrap();
        }
        deliveries(&mut f).iter().map(|d| d.2).collect::<Vec<_>>()
    };
    let a = run(11);
    assert_eq!(a, run(11));
    assert_ne!(a, run(12));
    assert!(
        (600..800).contains(&a.len()),
        "{} delivered of 1000 at 30% loss",
        a.len()
    );
}

#[test]
fn drop_list_drops_exactly_those_packets() {
    let mut f = fabric(1, 2);
    f.set_faults(FaultPlan {
        drop_packets: vec![1, 4, 5],
        ..FaultPlan::default()
    })
    .unwrap();
    for i in 0..8 {
        let fr = udp(&f, 0, 1, i, 64);
        assert_eq!(f.transmit(PortId(0), fr).unwrap(), u64::from(i));
    }
    let got: Vec<u32> = deliveries(&mut f).iter().map(|d| d.2).collect();
    assert_eq!(got, vec![0, 2, 3, 6, 7]);
    assert_eq!(f.stats().dropped_list, 3);
}

#[test]
fn duplication_delivers_twice() {
    let mut f = fabric(1, 2);
    f.set_link_faults(
        PortId(1),
        Direction::FromSwitch,
        LinkFaults {
            duplicate: 1.0,
            ..LinkFaults::default()
        },
    )
    .unwrap();
    for i in 0..3 {
        let fr = udp(&f, 0, 1, i, 64);
        f.transmit(PortId(0), fr).unwrap();
    }
    let got: Vec<u32> = deliveries(&mut f).iter().map(|d| d.2).collect();
    assert_eq!(got, vec![0, 0, 1, 1, 2, 2]);
    assert_eq!(f.stats().duplicated, 3);
}

#[test]
fn reordering_window_reorders_and_jitter_does_not() {
    let send = |faults: LinkFaults| {
        let mut f = fabric(5, 2);
        f.set_link_faults(PortId(0), Direction::ToSwitch, faults)
            .unwrap();
        for i in 0..200 {
            let fr = udp(&f, 0, 1, i, 64);
            f.transmit(PortId(0), fr).unwrap();
        }
        deliveries(&mut f).iter().map(|d| d.2).collect::<Vec<_>>()
    };
    let reordered = send(LinkFaults {
        reorder: 0.5,
        reorder_window_ns: 5_000,
        ..LinkFaults::default()
    });
    assert_eq!(reordered.len(), 200);
    assert!(
        reordered.windows(2).any(|w| w[0] > w[1]),
        "some frame overtaken"
    );
    let mut sorted = reordered.clone();
    sorted.sort_unstable();
    assert_eq!(
        sorted,
        (0..200).collect::<Vec<_>>(),
        "nothing lost or duplicated"
    );
    let jittered = send(LinkFaults {
        jitter_ns: 5_000,
        ..LinkFaults::default()
    });
    assert_eq!(jittered, (0..200).collect::<Vec<_>>(), "jitter keeps order");
}

#[test]
fn delay_adds_fixed_latency() {
    let mut f = fabric(1, 2);
    let fr = udp(&f, 0, 1, 0, 64);
    f.transmit(PortId(0), fr).unwrap();
    let base = deliveries(&mut f)[0].0;
    let mut g = fabric(1, 2);
    g.set_link_faults(
        PortId(1),
        Direction::FromSwitch,
        LinkFaults {
            delay_ns: 10_000,
            ..LinkFaults::default()
        },
    )
    .unwrap();
    let fr = udp(&g, 0, 1, 0, 64);
    g.transmit(PortId(0), fr).unwrap();
    assert_eq!(deliveries(&mut g)[0].0, base + 10_000);
}

#[test]
fn corruption_is_dropped_by_the_ethernet_fcs() {
    let mut f = fabric(9, 2);
    f.set_link_faults(
        PortId(0),
        Direction::ToSwitch,
        LinkFaults {
            corrupt: 1.0,
            ..LinkFaults::default()
        },
    )
    .unwrap();
    for i in 0..50 {
        let fr = udp(&f, 0, 1, i, 256);
        f.transmit(PortId(0), fr).unwrap();
    }
    let route = RoceRoute {
        src_port: 0xc001,
        ..RoceRoute::new((mac(&f, 0), ip(1)), (mac(&f, 1), ip(2)))
    };
    for i in 0..50 {
        let h = RoceHeaders {
            bth: Bth {
                opcode: opcode::UD | opcode::SEND_ONLY,
                pkey: 0xffff,
                dest_qp: 3,
                psn: i,
                ..Bth::default()
            },
            deth: Some(Deth { qkey: 1, src_qp: 2 }),
            ..RoceHeaders::default()
        };
        f.transmit(PortId(0), build_roce_frame(&route, &h, &[7u8; 512]))
            .unwrap();
    }
    let delivered = deliveries(&mut f).len() as u64;
    let s = f.stats();
    assert_eq!(s.corrupted_wire, 100);
    // Every corrupted frame fails the Ethernet FCS at the next hop (here the switch's
    // ingress), whatever its own checksums: none is delivered, not even UDP frames whose
    // checksum is 0 or a flip in a field no other check covers.
    assert_eq!(delivered, 0, "{delivered} corrupted frames delivered");
    assert_eq!(s.dropped_fcs, 100);
    assert_eq!(s.dropped_checksum(), 100);
    assert_eq!(f.port_stats(PortId(0)).unwrap().switch_fcs_errors, 100);
    assert_eq!(
        f.port_stats(PortId(1)).unwrap().rx_fcs_errors,
        0,
        "dropped at the switch"
    );
}

/// (port, sealed) of every delivered frame.
fn seals(f: &mut Fabric) -> Vec<(u32, bool)> {
    f.drain()
        .into_iter()
        .filter_map(|(_, o)| match o {
            Output::Frame { port, sealed, .. } => Some((port.0, sealed)),
            Output::Timer { .. } => None,
        })
        .collect()
}

/// A frame given with `transmit_sealed` arrives sealed, to every port a multicast reaches
/// and in both copies of a duplicate; one given with `transmit` does not; a flip in the
/// switch or by the sender breaks the seal (the receiving NIC sums the frame again).
#[test]
fn a_seal_lasts_while_no_fault_flips_a_bit() {
    let group = Ipv4Addr::new(239, 9, 9, 9);
    let mut f = fabric(21, 3);
    f.join_group(PortId(1), group).unwrap();
    f.join_group(PortId(2), group).unwrap();
    let fr = mcast(&f, 0, group, 1);
    f.transmit_sealed(PortId(0), fr.clone()).unwrap();
    assert_eq!(seals(&mut f), [(1, true), (2, true)]);
    f.transmit(PortId(0), fr.clone()).unwrap();
    assert_eq!(seals(&mut f), [(1, false), (2, false)]);
    let faults = |dup: f64, switch: f64, payload: f64| LinkFaults {
        duplicate: dup,
        corrupt_switch: switch,
        corrupt_payload: payload,
        ..LinkFaults::default()
    };
    f.set_link_faults(PortId(0), Direction::ToSwitch, faults(1.0, 0.0, 0.0))
        .unwrap();
    f.transmit_sealed(PortId(0), fr.clone()).unwrap();
    assert_eq!(seals(&mut f), [(1, true), (2, true), (1, true), (2, true)]);
    f.set_link_faults(PortId(0), Direction::ToSwitch, faults(0.0, 1.0, 0.0))
        .unwrap();
    // A flip in the switch may misroute the frame (a bit of its group address): of ten,
    // some arrive, none sealed.
    for _ in 0..10 {
        f.transmit_sealed(PortId(0), fr.clone()).unwrap();
    }
    let flipped = seals(&mut f);
    assert!(!flipped.is_empty(), "no flipped frame arrived");
    assert!(flipped.iter().all(|&(_, s)| !s), "{flipped:?}");
    f.set_link_faults(PortId(0), Direction::ToSwitch, faults(0.0, 0.0, 1.0))
        .unwrap();
    f.transmit_sealed(PortId(0), fr).unwrap();
    assert_eq!(seals(&mut f), [(1, false), (2, false)]);
    assert_eq!(
        (f.stats().corrupted_switch, f.stats().corrupted_payload),
        (10, 1)
    );
}

#[test]
fn partition_cuts_traffic_only_inside_its_window() {
    let mut f = fabric(1, 3);
    f.set_faults(FaultPlan {
        partitions: vec![Partition {
            side_a: vec![PortId(0)],
            side_b: vec![],
            start_ns: 10_000,
            end_ns: 20_000,
        }],
        ..FaultPlan::default()
    })
    .unwrap();
    let mut expect = Vec::new();
    for (i, t) in [0u64, 12_000, 15_000, 25_000].into_iter().enumerate() {
        f.schedule_timer(t, i as u64);
    }
    let mut got = Vec::new();
    while let Some(o) = f.step() {
        match o {
            Output::Timer { token } => {
                let fr = udp(&f, 0, 1, token as u32, 64);
                f.transmit(PortId(0), fr).unwrap();
                let fr = udp(&f, 2, 1, 100 + token as u32, 64);
                f.transmit(PortId(2), fr).unwrap();
                if !(1..=2).contains(&token) {
                    expect.push(token as u32);
                }
                expect.push(100 + token as u32);
            }
            Output::Frame { frame, .. } => got.push(seq_of(&frame)),
        }
    }
    got.sort_unstable();
    expect.sort_unstable();
    assert_eq!(got, expect);
    assert_eq!(f.stats().dropped_partition, 2);
}

#[test]
fn receive_buffer_overrun_drops_the_excess() {
    let mut f = fabric(1, 4);
    // Three senders incast into port 3, whose downlink holds at most 4 frames.
    f.set_faults(FaultPlan {
        links: vec![LinkFaultRule {
            port: PortId(3),
            direction: Direction::FromSwitch,
            faults: LinkFaults {
                buffer_frames: Some(4),
                ..LinkFaults::default()
            },
        }],
        ..FaultPlan::default()
    })
    .unwrap();
    for i in 0..10 {
        for s in 0..3 {
            let fr = udp(&f, s, 3, i * 3 + s, 4000);
            f.transmit(PortId(s), fr).unwrap();
        }
    }
    let got = deliveries(&mut f).len() as u64;
    let s = f.stats();
    assert!(s.dropped_overrun > 0);
    assert_eq!(got + s.dropped_overrun, 30);
    assert_eq!(
        f.port_stats(PortId(3)).unwrap().rx_overrun,
        s.dropped_overrun
    );
}

#[test]
fn bad_calls_are_errors() {
    let mut f = fabric(1, 2);
    assert!(f.transmit(PortId(9), vec![0; 60]).is_err());
    assert!(f.transmit(PortId(0), vec![0; 10]).is_err());
    assert!(f.transmit(PortId(0), vec![0; 20_000]).is_err());
    assert!(f
        .join_group(PortId(7), Ipv4Addr::new(239, 0, 0, 1))
        .is_err());
    assert!(f.add_host_with_port("dup", ip(1)).is_err());
    let rule = LinkFaultRule {
        port: PortId(50),
        direction: Direction::ToSwitch,
        faults: LinkFaults::default(),
    };
    assert!(f
        .set_faults(FaultPlan {
            links: vec![rule],
            ..FaultPlan::default()
        })
        .is_err());
    assert_eq!(f.stats().transmitted, 0);
}

#[test]
fn timers_and_step_until_advance_virtual_time() {
    let mut f = fabric(1, 1);
    f.schedule_timer(500, 1);
    assert_eq!(f.step_until(100), None);
    assert_eq!(f.now(), 100);
    assert_eq!(f.step(), Some(Output::Timer { token: 1 }));
    assert_eq!(f.now(), 500);
    assert_eq!(f.step(), None);
}

fn busy_run(seed: u64) -> (u64, u64) {
    let mut f = fabric(seed, 8);
    let g = Ipv4Addr::new(239, 5, 5, 5);
    for p in [1, 3, 5, 7] {
        f.join_group(PortId(p), g).unwrap();
    }
    f.set_faults(FaultPlan {
        default_link: LinkFaults {
            loss: 0.05,
            duplicate: 0.02,
            corrupt: 0.01,
            jitter_ns: 300,
            reorder: 0.1,
            reorder_window_ns: 2_000,
            ..LinkFaults::default()
        },
        drop_packets: vec![3, 30, 300],
        ..FaultPlan::default()
    })
    .unwrap();
    for round in 0..200u32 {
        for s in 0..8u32 {
            let fr = if round % 3 == 0 {
                mcast(&f, s, g, round)
            } else {
                udp(&f, s, (s + round) % 8, round, 200 + round as usize)
            };
            let _ = f.transmit(PortId(s), fr);
        }
        f.schedule_timer(f.now() + 1_000, u64::from(round));
        while let Some(o) = f.step() {
            if matches!(o, Output::Timer { .. }) {
                break;
            }
        }
    }
    let _ = f.drain();
    (f.trace_hash(), f.stats().delivered)
}

#[test]
fn same_seed_same_trace_hash_other_seed_other_hash() {
    let a = busy_run(42);
    assert_eq!(a, busy_run(42));
    assert_ne!(a.0, busy_run(43).0);
    assert!(a.1 > 1000);
}

#[test]
fn link_config_serialization_time() {
    let l = LinkConfig {
        latency_ns: 0,
        bandwidth_bps: 10_000_000_000,
    };
    // 1000 bytes + 24 of preamble/IFG/FCS at 10 Gb/s.
    assert_eq!(l.serialization_ns(1000), 820);
    let _ = PortConfig::with_ip(ip(1));
}

/// A fabric of `n` hosts (ports 0..n) and an uplink (port n) on a host of its own.
fn fabric_with_uplink(n: u8) -> (Fabric, PortId) {
    let mut f = fabric(1, n);
    let h = f.add_host("uplink");
    let config = PortConfig {
        mac: Mac([0x02, 0xff, 0, 0, 0, 1]),
        multicast_loopback: false,
        verify_checksums: false,
        ..PortConfig::with_ip(Ipv4Addr::UNSPECIFIED)
    };
    let up = f.add_uplink(h, config).unwrap();
    (f, up)
}

/// A UDP frame between two MACs (the sequence number in the payload).
fn frame_between(src: Mac, dst: Mac, seq: u32) -> Vec<u8> {
    let mut s = UdpFrameSpec::new(src, dst, (ip(50), 9000), (ip(51), 9000));
    s.udp_checksum = true;
    s.build(&seq.to_be_bytes())
}

#[test]
fn an_uplink_gets_unknown_unicast_and_all_multicast_and_its_source_macs_are_learned() {
    let (mut f, up) = fabric_with_uplink(2);
    assert_eq!(up, PortId(2));
    // The uplink's own address is nobody's.
    assert_eq!(f.port_of_ip(Ipv4Addr::UNSPECIFIED), None);
    let beyond = Mac([0x02, 0, 10, 0, 0, 9]);
    // Unicast to a MAC nobody has: out of the uplink only.
    f.transmit(PortId(0), frame_between(mac(&f, 0), beyond, 1))
        .unwrap();
    assert_eq!(
        deliveries(&mut f)
            .iter()
            .map(|d| (d.1, d.2))
            .collect::<Vec<_>>(),
        [(2, 1)]
    );
    // Multicast nobody joined: out of the uplink; joined by host 1: to both.
    let g = Ipv4Addr::new(239, 1, 2, 3);
    f.transmit(PortId(0), mcast(&f, 0, g, 2)).unwrap();
    let d: Vec<(u32, u32)> = deliveries(&mut f).iter().map(|d| (d.1, d.2)).collect();
    assert_eq!(d, [(2, 2)]);
    f.join_group(PortId(1), g).unwrap();
    f.transmit(PortId(0), mcast(&f, 0, g, 3)).unwrap();
    let mut d: Vec<(u32, u32)> = deliveries(&mut f).iter().map(|d| (d.1, d.2)).collect();
    d.sort_unstable();
    assert_eq!(d, [(1, 3), (2, 3)]);
    // What arrives from the uplink teaches the switch its source MAC: unicast to it
    // then goes to the uplink (and a host's own MAC is never learned there).
    assert_eq!(f.learned_port(beyond), None);
    f.transmit(up, frame_between(beyond, mac(&f, 1), 4))
        .unwrap();
    f.transmit(up, frame_between(mac(&f, 0), mac(&f, 1), 5))
        .unwrap();
    let d: Vec<(u32, u32)> = deliveries(&mut f).iter().map(|d| (d.1, d.2)).collect();
    assert_eq!(d, [(1, 4), (1, 5)]);
    assert_eq!(f.learned_port(beyond), Some(up));
    assert_eq!(f.learned_port(mac(&f, 0)), None);
    // Multicast from the uplink does not go back out of it.
    f.transmit(up, mcast(&f, 0, g, 6)).unwrap();
    let d: Vec<(u32, u32)> = deliveries(&mut f).iter().map(|d| (d.1, d.2)).collect();
    assert_eq!(d, [(1, 6)]);
}
