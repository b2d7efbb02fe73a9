//! RoCEv2 over IPv6: address vectors on rxe's link-local GID 0 (RoCE v2 there, as
//! `ibv_devinfo -v` shows in the Soft-RoCE VM), what `ibv_rc_pingpong -g 0` uses. The
//! frames are what rxe sends (netwire/tests/data/rxe_rocev2_ipv6.pcap): IPv6 between the
//! ports' link-local addresses, flow label 0, hop limit 64 whatever the AV asks, UDP
//! checksum 0, and an ICRC over the masked IPv6 header. mlx5's GID 0 is RoCE v1: the GRH
//! and the IB transport straight in Ethernet.

mod common;
use std::io::Cursor;
use std::net::Ipv6Addr;

use backend_sim::frame::roce::{icrc_ok, parse_roce};
use backend_sim::frame::FrameView;
use backend_sim::verbs::SimQp;
use backend_sim::{CaptureFilter, Personality, Sim};
use common::*;
use verbs_api::helpers::{bring_up, ConnectParams, RemoteQp};
use verbs_api::{
    AccessFlags, AhAttr, Context, ErrorKind, Gid, QpInitAttr, QpState, QpType, QueuePair, SendWr,
    WcFlags, WcStatus, GRH_LEN,
};

fn gid0(n: &Node) -> Gid {
    n.ctx.query_gid(1, 0).unwrap()
}

/// An address vector to `peer`'s GID 0 from this port's GID 0, hop limit 1 (as the
/// pingpongs ask).
fn av_to_gid0(peer: &Node) -> AhAttr {
    let mut av = AhAttr::roce(gid0(peer), 0, 1);
    av.grh.hop_limit = 1;
    av
}

fn rc_qp(n: &Node) -> SimQp {
    n.ctx
        .create_qp(&n.pd, &QpInitAttr::new(QpType::Rc, &n.cq, cap()))
        .unwrap()
}

/// RC parameters to reach `peer_qpn` on `peer` through its GID 0.
fn to_gid0(peer: &Node, peer_qpn: u32) -> ConnectParams {
    ConnectParams {
        access: AccessFlags::LOCAL_WRITE,
        remote: Some(RemoteQp {
            qpn: peer_qpn,
            psn: 7,
            av: av_to_gid0(peer),
        }),
        sq_psn: 7,
        ..ConnectParams::default()
    }
}

/// Every frame of a pcap.
fn frames(pcap: &[u8]) -> Vec<Vec<u8>> {
    let mut r = netwire::pcap::PcapReader::new(Cursor::new(pcap)).unwrap();
    let mut out = Vec::new();
    while let Some(rec) = r.next_record().unwrap() {
        out.push(rec.data.to_vec());
    }
    out
}

/// Checks that every frame is RoCEv2 over IPv6 between the two link-local GIDs as rxe
/// sends it; returns the BTH opcodes.
fn check_ipv6_frames(pcap: &[u8], a: Gid, b: Gid) -> Vec<u8> {
    let (a, b) = (Ipv6Addr::from(a.0), Ipv6Addr::from(b.0));
    frames(pcap)
        .iter()
        .map(|f| {
            let view = FrameView::parse(f).unwrap();
            let (ip, _) = view.ipv6.expect("an IPv6 frame");
            assert!((ip.src, ip.dst) == (a, b) || (ip.src, ip.dst) == (b, a));
            assert_eq!((ip.flow_label, ip.hop_limit, ip.next_header), (0, 64, 17));
            assert!(view.is_roce());
            assert!(icrc_ok(&f[view.ip_range().unwrap()]));
            let udp = view.udp_payload().unwrap();
            assert_eq!(f[udp.start - 2..udp.start], [0, 0], "UDP checksum 0");
            parse_roce(&f[udp]).unwrap().headers.bth.opcode
        })
        .collect()
}

#[test]
fn rc_over_rxes_link_local_gid_goes_over_ipv6() {
    let sim = Sim::new(3);
    let a = node(&sim, 1, Personality::Rxe);
    let b = node(&sim, 2, Personality::Rxe);
    assert_eq!(
        Ipv6Addr::from(gid0(&a).0).segments()[0],
        0xfe80,
        "GID 0 is link-local"
    );
    let (qa, qb) = (rc_qp(&a), rc_qp(&b));
    bring_up(&qa, QpState::Rts, &to_gid0(&b, qb.qp_num())).unwrap();
    bring_up(&qb, QpState::Rts, &to_gid0(&a, qa.qp_num())).unwrap();
    sim.with_fabric(|f| f.capture_to_memory(CaptureFilter::All))
        .unwrap();
    post_recvs(&b, &qb, 0..1);
    let data: Vec<u8> = (0..3000u32).map(|i| (i * 7) as u8).collect();
    write_slot(&a, 0, &data);
    let sge = [slot_sge(&a, 0, data.len())];
    // SAFETY: the SGE lies in a.mr, alive for the test.
    unsafe { qa.post_send(&[SendWr::send(1, &sge).signaled()]).unwrap() };
    assert_eq!(wait(&sim, &a.cq, 1)[0].status, WcStatus::Success);
    let r = wait(&sim, &b.cq, 1);
    assert_eq!((r[0].status, r[0].byte_len), (WcStatus::Success, 3000));
    assert_eq!(read_slot(&b, 0, data.len()), data);
    let pcap = sim.finish_capture().unwrap().unwrap();
    // Three packets of 1024 bytes at most (SEND_FIRST, MIDDLE, LAST), one ACK.
    assert_eq!(
        check_ipv6_frames(&pcap, gid0(&a), gid0(&b)),
        [0x00, 0x01, 0x02, 0x11]
    );
}

#[test]
fn ud_over_the_link_local_gid_puts_the_ipv6_header_in_the_grh() {
    let sim = Sim::new(4);
    let a = node(&sim, 1, Personality::Rxe);
    let b = node(&sim, 2, Personality::Rxe);
    let (qa, qb) = (ud_qp(&a), ud_qp(&b));
    post_recvs(&b, &qb, 0..1);
    let ah = a.ctx.create_ah(&a.pd, &av_to_gid0(&b)).unwrap();
    write_slot(&a, 0, b"over IPv6");
    let sge = [slot_sge(&a, 0, 9)];
    sim.with_fabric(|f| f.capture_to_memory(CaptureFilter::All))
        .unwrap();
    // SAFETY: the SGE lies in a.mr; the AH outlives the post.
    unsafe {
        qa.post_send(&[SendWr::ud_send(1, &sge, &ah, qb.qp_num(), QKEY).signaled()])
            .unwrap()
    };
    assert_eq!(wait(&sim, &a.cq, 1)[0].status, WcStatus::Success);
    let c = wait(&sim, &b.cq, 1)[0];
    assert_eq!(
        (c.status, c.byte_len as usize),
        (WcStatus::Success, GRH_LEN + 9)
    );
    assert!(c.wc_flags.contains(WcFlags::GRH));
    assert_eq!(c.src_qp, qa.qp_num());
    let buf = read_slot(&b, 0, GRH_LEN + 9);
    let pcap = sim.finish_capture().unwrap().unwrap();
    let sent = &frames(&pcap)[0];
    assert_eq!(check_ipv6_frames(&pcap, gid0(&a), gid0(&b)), [0x64]);
    // The GRH area is the IPv6 header as it arrived: version 6, source GID, destination
    // GID (what ibv_init_ah_from_wc reads back).
    assert_eq!(&buf[..GRH_LEN], &sent[14..14 + GRH_LEN]);
    assert_eq!(buf[0] >> 4, 6);
    assert_eq!(buf[8..24], gid0(&a).0);
    assert_eq!(buf[24..40], gid0(&b).0);
    assert_eq!(&buf[GRH_LEN..], b"over IPv6");
}

/// mlx5's GID 0 is its link-local RoCE v1 GID: RC and UD over it go as RoCE v1 frames
/// (EtherType 0x8915: the GRH, the IB transport, the ICRC), the hop limit as asked (no
/// IP route resolves a RoCE v1 address), and a UD receive gets the GRH as it arrived.
#[test]
fn mlx5s_link_local_gid_carries_roce_v1() {
    let sim = Sim::new(6);
    let a = node(&sim, 1, Personality::Mlx5);
    let b = node(&sim, 2, Personality::Mlx5);
    let (qa, qb) = (rc_qp(&a), rc_qp(&b));
    bring_up(&qa, QpState::Rts, &to_gid0(&b, qb.qp_num())).unwrap();
    bring_up(&qb, QpState::Rts, &to_gid0(&a, qa.qp_num())).unwrap();
    let (ua, ub) = (ud_qp(&a), ud_qp(&b));
    let ah = a.ctx.create_ah(&a.pd, &av_to_gid0(&b)).unwrap();
    sim.with_fabric(|f| f.capture_to_memory(CaptureFilter::All))
        .unwrap();
    post_recvs(&b, &qb, 0..1);
    post_recvs(&b, &ub, 1..2);
    write_slot(&a, 0, b"RoCE v1");
    let sge = [slot_sge(&a, 0, 7)];
    // SAFETY: the SGE lies in a.mr; the AH outlives the posts.
    unsafe {
        qa.post_send(&[SendWr::send(1, &sge).signaled()]).unwrap();
        ua.post_send(&[SendWr::ud_send(2, &sge, &ah, ub.qp_num(), QKEY).signaled()])
            .unwrap();
    }
    let sent = wait(&sim, &a.cq, 2);
    assert!(
        sent.iter().all(|c| c.status == WcStatus::Success),
        "{sent:?}"
    );
    let got = wait(&sim, &b.cq, 2);
    assert!(got.iter().all(|c| c.status == WcStatus::Success), "{got:?}");
    assert_eq!(read_slot(&b, 0, 7), b"RoCE v1");
    let grh = read_slot(&b, 1, GRH_LEN + 7);
    assert_eq!((grh[0] >> 4, grh[6], grh[7]), (6, 0x1b, 1), "{grh:02x?}");
    assert_eq!(grh[8..24], gid0(&a).0);
    assert_eq!(grh[24..40], gid0(&b).0);
    assert_eq!(&grh[GRH_LEN..], b"RoCE v1");
    let pcap = sim.finish_capture().unwrap().unwrap();
    let mut opcodes = Vec::new();
    for f in frames(&pcap) {
        assert_eq!(f[12..14], [0x89, 0x15], "RoCE v1's EtherType");
        let view = FrameView::parse(&f).unwrap();
        assert!(view.is_roce() && !view.is_roce_v2());
        let (grh, off) = view.ipv6.expect("a GRH");
        assert_eq!((grh.next_header, grh.hop_limit, off), (0x1b, 1, 14));
        assert!(icrc_ok(&f[view.ip_range().unwrap()]));
        opcodes.push(
            parse_roce(&f[view.roce_packet().unwrap()])
                .unwrap()
                .headers
                .bth
                .opcode,
        );
    }
    opcodes.sort_unstable();
    assert_eq!(
        opcodes,
        [0x04, 0x11, 0x64],
        "RC SEND_ONLY, its ACK, UD SEND_ONLY"
    );
}

#[test]
fn what_is_not_carried_is_refused_with_the_reason() {
    let sim = Sim::new(5);
    let r = node(&sim, 2, Personality::Rxe);
    let m2 = node(&sim, 3, Personality::Mlx5);
    // A link-local destination from rxe's IPv4 GID 1, and a global IPv6 address.
    let mut from_v4 = av_to_gid0(&m2);
    from_v4.grh.sgid_index = 1;
    let e = r.ctx.create_ah(&r.pd, &from_v4).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(
        e.to_string()
            .contains("but source GID 1 is not the port's link-local GID 0"),
        "{e}"
    );
    let q = rc_qp(&r);
    let mut p = to_gid0(&m2, 0x11);
    if let Some(remote) = p.remote.as_mut() {
        remote.av = from_v4;
    }
    bring_up(&q, QpState::Init, &p).unwrap();
    let e = bring_up(&q, QpState::Rtr, &p).unwrap_err();
    assert!(
        e.to_string().contains("not the port's link-local GID 0"),
        "{e}"
    );
    assert_eq!(q.state().unwrap(), QpState::Init);
    let global = AhAttr::roce(
        Gid("2001:db8::7".parse::<Ipv6Addr>().unwrap().octets()),
        0,
        1,
    );
    let e = r.ctx.create_ah(&r.pd, &global).unwrap_err();
    assert!(
        e.to_string()
            .contains("2001:db8::7 is neither IPv4-mapped nor a link-local RoCE GID"),
        "{e}"
    );
}
