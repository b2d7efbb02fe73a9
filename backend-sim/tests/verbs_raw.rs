//! RAW_PACKET QPs and managed flow steering (mlx5 personality), and rxe's lack of both.

mod common;
use backend_sim::frame::eth::Mac;
use backend_sim::frame::{check_integrity, Integrity, UdpFrameSpec};
use backend_sim::verbs::{SimFlow, SimQp};
use backend_sim::{Personality, Sim};
use common::*;
use std::net::Ipv4Addr;
use verbs_api::{
    Context, ErrorKind, EthFilter, FlowAttr, FlowRuleType, FlowSpec, Ipv4Filter, MemoryRegion,
    PortFilter, QpInitAttr, QpType, QueuePair, SendFlags, SendWr, WcFlags, WcOpcode, WcStatus,
};

fn mac(n: u8) -> Mac {
    Mac([2, 0, 10, 0, 0, n])
}

fn frame(src: u8, dst_mac: Mac, dst_ip: Ipv4Addr, dport: u16, payload: &[u8]) -> Vec<u8> {
    UdpFrameSpec::new(mac(src), dst_mac, (ip(src), 4000), (dst_ip, dport)).build(payload)
}

/// Two mlx5 nodes, 1 and 2, on `sim`.
fn mlx5_nodes(sim: &Sim) -> (Node, Node) {
    (
        node(sim, 1, Personality::Mlx5),
        node(sim, 2, Personality::Mlx5),
    )
}

/// Steers what `attr` matches on `n`'s port to `qp`.
fn steer(n: &Node, qp: &SimQp, attr: &FlowAttr) -> SimFlow {
    n.ctx.create_flow(qp, attr).expect("create_flow")
}

/// A rule of `rule_type` (a default or sniffer rule: no specs) at priority 0, port 1.
fn rule(rule_type: FlowRuleType) -> FlowAttr {
    FlowAttr {
        rule_type,
        ..FlowAttr::normal(1, vec![])
    }
}

/// `attr` at `priority` (lower wins).
fn at_priority(priority: u16, attr: FlowAttr) -> FlowAttr {
    FlowAttr { priority, ..attr }
}

/// Puts `f` in slot `slot` of `n` and posts it as a RAW send.
fn send(n: &Node, qp: &SimQp, slot: usize, f: &[u8], flags: SendFlags) {
    write_slot(n, slot, f);
    let sge = [slot_sge(n, slot, f.len())];
    // SAFETY: the SGE lies in n.mr.
    unsafe {
        qp.post_send(&[SendWr::send(slot as u64, &sge).flags(flags)])
            .unwrap()
    };
}

#[test]
fn raw_send_is_steered_by_exact_rule_and_received_whole() {
    let sim = Sim::new(1);
    let (a, b) = mlx5_nodes(&sim);
    let (qa, qb) = (raw_qp(&a), raw_qp(&b));
    let _flow = steer(&b, &qb, &FlowAttr::udp_endpoint(1, mac(2).0, ip(2), 7148));
    post_recvs(&b, &qb, 0..4);
    let f = frame(1, mac(2), ip(2), 7148, b"spead heap bytes");
    send(&a, &qa, 0, &f, SendFlags::SIGNALED);
    let sent = wait(&sim, &a.cq, 1);
    assert_eq!(sent[0].status, WcStatus::Success);
    assert_eq!(sent[0].opcode, WcOpcode::Send);
    let got = wait(&sim, &b.cq, 1);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].status, WcStatus::Success);
    assert_eq!(got[0].opcode, WcOpcode::Recv);
    assert_eq!(got[0].byte_len as usize, f.len());
    assert!(got[0].wc_flags.contains(WcFlags::IP_CSUM_OK));
    assert_eq!(read_slot(&b, got[0].wr_id as usize, f.len()), f);
    // Another UDP port matches no rule: not received.
    send(
        &a,
        &qa,
        1,
        &frame(1, mac(2), ip(2), 9999, b"x"),
        SendFlags::empty(),
    );
    assert!(wait(&sim, &b.cq, 1).is_empty());
    assert_eq!(sim.nic_stats(b.host).rx_unclaimed, 1);
}

#[test]
fn ip_csum_offload_fills_checksums() {
    let sim = Sim::new(1);
    let (a, b) = mlx5_nodes(&sim);
    let (qa, qb) = (raw_qp(&a), raw_qp(&b));
    let _f = steer(&b, &qb, &FlowAttr::normal(1, vec![FlowSpec::udp_dst(5000)]));
    post_recvs(&b, &qb, 0..2);
    let mut f = frame(1, mac(2), ip(2), 5000, b"checksum me");
    f[24] = 0; // IP checksum cleared: the NIC fills it
    f[25] = 0;
    send(&a, &qa, 0, &f, SendFlags::IP_CSUM);
    let got = wait(&sim, &b.cq, 1);
    assert_eq!(got.len(), 1);
    assert!(got[0].wc_flags.contains(WcFlags::IP_CSUM_OK));
    let rx = read_slot(&b, 0, got[0].byte_len as usize);
    assert_eq!(check_integrity(&rx), Integrity::Ok);
    assert_ne!(&rx[40..42], &[0, 0], "UDP checksum filled");
    // Without the offload the frame goes out with its bad checksum, and is delivered
    // (a NIC does not drop a RAW frame for it) without the flag.
    send(&a, &qa, 1, &f, SendFlags::empty());
    let got = wait(&sim, &b.cq, 1);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].wc_flags & WcFlags::IP_CSUM_OK, WcFlags::empty());
    assert_eq!(read_slot(&b, 1, f.len()), f);
}

#[test]
fn multicast_rule_joins_the_group_and_priorities_pick_one_rule() {
    let sim = Sim::new(1);
    let (a, b) = mlx5_nodes(&sim);
    let qa = raw_qp(&a);
    let (q1, q2, q3) = (raw_qp(&b), raw_qp(&b), raw_qp(&b));
    let g = Ipv4Addr::new(239, 2, 0, 1);
    let gmac = Mac::for_ipv4_multicast(g);
    // q1 and q2 at priority 1 (both get a copy), q3 at priority 5 (loses).
    let r1 = steer(
        &b,
        &q1,
        &at_priority(1, FlowAttr::udp_endpoint(1, gmac.0, g, 7148)),
    );
    let _r2 = steer(
        &b,
        &q2,
        &at_priority(1, FlowAttr::normal(1, vec![FlowSpec::ipv4_dst(g)])),
    );
    let _r3 = steer(
        &b,
        &q3,
        &at_priority(5, FlowAttr::normal(1, vec![FlowSpec::udp_dst(7148)])),
    );
    for q in [&q1, &q2, &q3] {
        post_recvs(&b, q, 0..2);
    }
    send(
        &a,
        &qa,
        0,
        &frame(1, gmac, g, 7148, b"group data"),
        SendFlags::empty(),
    );
    let got = wait(&sim, &b.cq, 3);
    let mut qps: Vec<u32> = got.iter().map(|c| c.qp_num).collect();
    qps.sort_unstable();
    assert_eq!(qps, vec![q1.qp_num(), q2.qp_num()]);
    // Without r1 and r2 the priority-5 rule wins... but r2 still joins; drop r1 only: q2 alone.
    drop(r1);
    send(
        &a,
        &qa,
        1,
        &frame(1, gmac, g, 7148, b"again"),
        SendFlags::empty(),
    );
    let got = wait(&sim, &b.cq, 2);
    assert_eq!(
        got.iter().map(|c| c.qp_num).collect::<Vec<_>>(),
        vec![q2.qp_num()]
    );
}

#[test]
fn masked_rules_defaults_and_sniffer() {
    let sim = Sim::new(1);
    let (a, b) = mlx5_nodes(&sim);
    let qa = raw_qp(&a);
    let (qm, qall, qsniff) = (raw_qp(&b), raw_qp(&b), raw_qp(&b));
    // Masked source match: 10.0.0.0/24.
    let masked = FlowSpec::Ipv4 {
        val: Ipv4Filter {
            src_ip: Ipv4Addr::new(10, 0, 0, 0),
            dst_ip: Ipv4Addr::UNSPECIFIED,
        },
        mask: Ipv4Filter {
            src_ip: Ipv4Addr::new(255, 255, 255, 0),
            dst_ip: Ipv4Addr::UNSPECIFIED,
        },
    };
    let eth_masked = FlowSpec::Eth {
        val: EthFilter {
            dst_mac: mac(2).0,
            ..EthFilter::default()
        },
        mask: EthFilter {
            dst_mac: [0xff, 0xff, 0, 0, 0, 0],
            ..EthFilter::default()
        },
    };
    let udp_range = FlowSpec::Udp {
        val: PortFilter {
            dst_port: 0x1000,
            src_port: 0,
        },
        mask: PortFilter {
            dst_port: 0xf000,
            src_port: 0,
        },
    };
    let _m = steer(
        &b,
        &qm,
        &FlowAttr::normal(1, vec![eth_masked, masked, udp_range]),
    );
    let _all = steer(&b, &qall, &rule(FlowRuleType::AllDefault));
    let _s = steer(&b, &qsniff, &rule(FlowRuleType::Sniffer));
    for q in [&qm, &qall, &qsniff] {
        post_recvs(&b, q, 0..4);
    }
    send(
        &a,
        &qa,
        0,
        &frame(1, mac(2), ip(2), 0x1234, b"masked match"),
        SendFlags::empty(),
    );
    send(
        &a,
        &qa,
        1,
        &frame(1, mac(2), ip(2), 0x2234, b"falls to default"),
        SendFlags::empty(),
    );
    let got = wait(&sim, &b.cq, 4);
    let by_qp = |q: u32| got.iter().filter(|c| c.qp_num == q).count();
    assert_eq!(by_qp(qm.qp_num()), 1);
    assert_eq!(by_qp(qall.qp_num()), 1);
    assert_eq!(by_qp(qsniff.qp_num()), 2, "the sniffer sees everything");
}

#[test]
fn rxe_has_no_raw_packet_and_no_flow_steering() {
    let sim = Sim::new(1);
    let r = node(&sim, 1, Personality::Rxe);
    let e = r
        .ctx
        .create_qp(&r.pd, &QpInitAttr::new(QpType::RawPacket, &r.cq, cap()))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported);
    let ud = ud_qp(&r);
    let e = r
        .ctx
        .create_flow(&ud, &FlowAttr::normal(1, vec![FlowSpec::udp_dst(1)]))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported);
    let attr = r.ctx.query_device().unwrap();
    assert_eq!(attr.max_raw_ethy_qp, 0);
    let m = node(&sim, 2, Personality::Mlx5);
    assert!(m
        .ctx
        .query_device()
        .unwrap()
        .device_cap_flags
        .contains(verbs_api::DeviceCapFlags::MANAGED_FLOW_STEERING));
}

#[test]
fn no_receive_posted_drops_and_counts() {
    let sim = Sim::new(1);
    let (a, b) = mlx5_nodes(&sim);
    let (qa, qb) = (raw_qp(&a), raw_qp(&b));
    let _f = steer(&b, &qb, &FlowAttr::normal(1, vec![FlowSpec::udp_dst(5000)]));
    post_recvs(&b, &qb, 0..2);
    for i in 0..5 {
        send(
            &a,
            &qa,
            i,
            &frame(1, mac(2), ip(2), 5000, &[i as u8; 100]),
            SendFlags::empty(),
        );
    }
    assert_eq!(wait(&sim, &b.cq, 5).len(), 2);
    assert_eq!(sim.nic_stats(b.host).rx_no_wqe, 3);
}

#[test]
fn bad_lkey_and_short_buffer_give_error_completions() {
    let sim = Sim::new(1);
    let (a, b) = mlx5_nodes(&sim);
    let (qa, qb) = (raw_qp(&a), raw_qp(&b));
    // Send with a bad lkey: LOC_PROT_ERR.
    let sge = [verbs_api::Sge {
        addr: a.mr.addr(),
        length: 64,
        lkey: 0xdead,
    }];
    // SAFETY: the bad key is rejected by the simulated NIC; no memory is touched.
    unsafe { qa.post_send(&[SendWr::send(7, &sge)]).unwrap() };
    let c = wait(&sim, &a.cq, 1);
    assert_eq!(c[0].status, WcStatus::LocProtErr);
    // Out-of-bounds SGE: LOC_PROT_ERR too.
    let qa2 = raw_qp(&a);
    let sge = [verbs_api::Sge {
        addr: a.mr.addr() + a.mr.len() as u64 - 8,
        length: 64,
        lkey: a.mr.lkey(),
    }];
    // SAFETY: as above: bounds are checked before any copy.
    unsafe { qa2.post_send(&[SendWr::send(8, &sge)]).unwrap() };
    assert_eq!(wait(&sim, &a.cq, 1)[0].status, WcStatus::LocProtErr);
    // A receive buffer shorter than the frame: LOC_LEN_ERR.
    let _f = steer(&b, &qb, &FlowAttr::normal(1, vec![FlowSpec::udp_dst(5000)]));
    let sge = [slot_sge(&b, 0, 20)];
    // SAFETY: the SGE lies in b.mr.
    unsafe { qb.post_recv(&[verbs_api::RecvWr::new(1, &sge)]).unwrap() };
    let qa3 = raw_qp(&a);
    send(
        &a,
        &qa3,
        3,
        &frame(1, mac(2), ip(2), 5000, &[0; 64]),
        SendFlags::empty(),
    );
    let c = wait(&sim, &b.cq, 1);
    assert_eq!(c[0].status, WcStatus::LocLenErr);
}

#[test]
fn a_rule_naming_only_a_multicast_mac_receives_that_group() {
    let sim = Sim::new(1);
    let (a, b) = mlx5_nodes(&sim);
    let (qa, qb, qmc) = (raw_qp(&a), raw_qp(&b), raw_qp(&b));
    let g = Ipv4Addr::new(239, 3, 3, 3);
    let gmac = Mac::for_ipv4_multicast(g);
    let flow = steer(
        &b,
        &qb,
        &FlowAttr::normal(1, vec![FlowSpec::eth_dst(gmac.0)]),
    );
    let _mc = steer(&b, &qmc, &rule(FlowRuleType::McDefault));
    post_recvs(&b, &qb, 0..2);
    post_recvs(&b, &qmc, 2..4);
    send(
        &a,
        &qa,
        0,
        &frame(1, gmac, g, 1, b"by MAC"),
        SendFlags::empty(),
    );
    let got = wait(&sim, &b.cq, 1);
    assert_eq!(
        got.iter().map(|c| c.qp_num).collect::<Vec<_>>(),
        vec![qb.qp_num()]
    );
    // Without the rule the port leaves the MAC group: nothing reaches the mc-default rule.
    drop(flow);
    send(
        &a,
        &qa,
        1,
        &frame(1, gmac, g, 1, b"gone"),
        SendFlags::empty(),
    );
    assert!(wait(&sim, &b.cq, 1).is_empty());
}

#[test]
fn a_sniffer_sees_roce_traffic_both_ways() {
    let sim = Sim::new(1);
    let (a, b) = mlx5_nodes(&sim);
    let sniffer = raw_qp(&a);
    let _s = steer(&a, &sniffer, &rule(FlowRuleType::Sniffer));
    post_recvs(&a, &sniffer, 0..4);
    let (ua, ub) = (ud_qp(&a), ud_qp(&b));
    post_recvs(&b, &ub, 0..1);
    post_recvs(&a, &ua, 10..11);
    let to_b = ah(&a, ip(2));
    let to_a = ah(&b, ip(1));
    // SAFETY: SGEs in the nodes' MRs.
    unsafe {
        ua.post_send(&[SendWr::ud_send(
            1,
            &[slot_sge(&a, 20, 32)],
            &to_b,
            ub.qp_num(),
            QKEY,
        )])
        .unwrap();
        ub.post_send(&[SendWr::ud_send(
            2,
            &[slot_sge(&b, 20, 32)],
            &to_a,
            ua.qp_num(),
            QKEY,
        )])
        .unwrap();
    }
    sim.run_until_idle();
    let got = wait(&sim, &a.cq, 3);
    let sniffed: Vec<_> = got
        .iter()
        .filter(|c| c.qp_num == sniffer.qp_num())
        .collect();
    assert_eq!(sniffed.len(), 2, "egress and ingress RoCE frames: {got:?}");
    for c in sniffed {
        let f = read_slot(&a, c.wr_id as usize, c.byte_len as usize);
        assert_eq!(&f[36..38], &4791u16.to_be_bytes(), "RoCEv2 UDP port");
    }
}

/// A sealed frame whose sender left its ICRC unwritten (four zero bytes: nothing in the
/// sender's simulation could read it) reaches a sniffer with its ICRC written, and only
/// the ICRC differs from the frame as sent.
#[test]
fn a_sniffer_sees_an_unwritten_icrc_written() {
    use backend_sim::frame::roce::{
        build_roce_frame_into, build_roce_frame_unsummed_into, opcode, RoceHeaders, RoceRoute,
    };
    let sim = Sim::new(1);
    let (a, _b) = mlx5_nodes(&sim);
    let sniffer = raw_qp(&a);
    let _s = steer(&a, &sniffer, &rule(FlowRuleType::Sniffer));
    post_recvs(&a, &sniffer, 0..1);
    let port = sim.port_of(a.host).unwrap();
    let mac_a = sim.with_fabric(|f| f.mac_of_ip(ip(1))).unwrap();
    let mut h = RoceHeaders::default();
    h.bth.opcode = opcode::SEND_ONLY;
    h.bth.dest_qp = 0x99;
    let route = RoceRoute::new((mac(2), ip(2)), (mac_a, ip(1)));
    let (mut unwritten, mut whole) = (Vec::new(), Vec::new());
    build_roce_frame_unsummed_into(&mut unwritten, &route, &h, &[5; 200]);
    build_roce_frame_into(&mut whole, &route, &h, &[5; 200]);
    assert!(unwritten.ends_with(&[0; 4]) && !whole.ends_with(&[0; 4]));
    sim.receive(|deliver| deliver(port, &unwritten, 0, true));
    sim.run_until_idle();
    let got = wait(&sim, &a.cq, 1);
    assert_eq!(got[0].qp_num, sniffer.qp_num());
    assert_eq!(got[0].byte_len as usize, whole.len());
    assert_eq!(read_slot(&a, got[0].wr_id as usize, whole.len()), whole);
}
