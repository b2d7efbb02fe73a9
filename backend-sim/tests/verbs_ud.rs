//! UD: GRH, Q_Key, address handles, multicast attach/detach, SRQ, and the rxe/mlx5
//! differences for oversized messages.

mod common;
use backend_sim::{Personality, Sim};
use common::*;
use std::net::Ipv4Addr;
use verbs_api::{
    Context, ErrorKind, EventElement, EventType, Gid, MemoryRegion, QpInitAttr, QpModify, QpState,
    QpType, QueuePair, QueuePairExt, RecvWr, SendFlags, SendWr, SharedReceiveQueue, SrqAttr,
    SrqAttrMask, SrqInitAttr, WcFlags, WcOpcode, WcStatus, GRH_LEN,
};

#[allow(clippy::too_many_arguments)]
fn ud_send(
    n: &Node,
    qp: &backend_sim::verbs::SimQp,
    slot: usize,
    data: &[u8],
    dst: Ipv4Addr,
    qpn: u32,
    qkey: u32,
    flags: SendFlags,
) {
    write_slot(n, slot, data);
    let ah = ah(n, dst);
    let sge = [slot_sge(n, slot, data.len())];
    // SAFETY: the SGE lies in n.mr; the AH outlives the post (the NIC copies it).
    unsafe {
        qp.post_send(&[SendWr::ud_send(slot as u64, &sge, &ah, qpn, qkey).flags(flags)])
            .unwrap()
    };
}

#[test]
fn ud_unicast_puts_the_grh_first_and_reports_the_source() {
    for p in [Personality::Rxe, Personality::Mlx5] {
        let sim = Sim::new(1);
        let a = node(&sim, 1, p);
        let b = node(&sim, 2, p);
        let (qa, qb) = (ud_qp(&a), ud_qp(&b));
        post_recvs(&b, &qb, 0..2);
        let mut sge_wr = SendFlags::SIGNALED;
        sge_wr |= SendFlags::SOLICITED;
        write_slot(&a, 0, b"hello UD");
        let ah = ah(&a, ip(2));
        let sge = [slot_sge(&a, 0, 8)];
        let wr = SendWr {
            opcode: verbs_api::SendOpcode::SendWithImm,
            imm_data: 0x1234,
            ..SendWr::ud_send(5, &sge, &ah, qb.qp_num(), QKEY)
        }
        .flags(sge_wr);
        // SAFETY: SGE in a.mr.
        unsafe { qa.post_send(&[wr]).unwrap() };
        assert_eq!(wait(&sim, &a.cq, 1)[0].status, WcStatus::Success);
        let r = wait(&sim, &b.cq, 1);
        assert_eq!(r.len(), 1, "{p:?}");
        let c = r[0];
        assert_eq!((c.status, c.opcode), (WcStatus::Success, WcOpcode::Recv));
        assert_eq!(c.byte_len as usize, GRH_LEN + 8);
        assert!(c.wc_flags.contains(WcFlags::GRH));
        assert_eq!(c.imm(), Some(0x1234));
        assert_eq!(c.src_qp, qa.qp_num());
        let buf = read_slot(&b, c.wr_id as usize, GRH_LEN + 8);
        assert_eq!(
            &buf[..20],
            &[0u8; 20],
            "RoCEv2/IPv4: the first 20 GRH bytes are zero"
        );
        assert_eq!(buf[20] >> 4, 4, "then the IPv4 header");
        assert_eq!(&buf[32..36], &ip(1).octets(), "source address");
        assert_eq!(&buf[36..40], &ip(2).octets());
        assert_eq!(&buf[40..], b"hello UD");
    }
}

#[test]
fn qkey_mismatch_is_dropped_and_the_high_bit_uses_the_qp_qkey() {
    let sim = Sim::new(1);
    let a = node(&sim, 1, Personality::Mlx5);
    let b = node(&sim, 2, Personality::Mlx5);
    let (qa, qb) = (ud_qp(&a), ud_qp(&b));
    post_recvs(&b, &qb, 0..4);
    ud_send(
        &a,
        &qa,
        0,
        b"wrong key",
        ip(2),
        qb.qp_num(),
        0x2222,
        SendFlags::empty(),
    );
    assert!(wait(&sim, &b.cq, 1).is_empty());
    assert_eq!(sim.nic_stats(b.host).rx_qkey_violation, 1);
    // qkey with the high bit set: the sending QP's own qkey (QKEY) is used.
    ud_send(
        &a,
        &qa,
        1,
        b"own key",
        ip(2),
        qb.qp_num(),
        0x8000_0000,
        SendFlags::empty(),
    );
    assert_eq!(wait(&sim, &b.cq, 1).len(), 1);
}

#[test]
fn multicast_attach_gives_one_copy_per_attached_qp_and_detach_stops_it() {
    let sim = Sim::new(1);
    let a = node(&sim, 1, Personality::Rxe);
    let b = node(&sim, 2, Personality::Rxe);
    let c = node(&sim, 3, Personality::Rxe);
    let qa = ud_qp(&a);
    let (qb1, qb2, qc) = (ud_qp(&b), ud_qp(&b), ud_qp(&c));
    let g = Ipv4Addr::new(239, 255, 0, 7);
    let gid = Gid::from_ipv4(g);
    for (n, q) in [(&b, &qb1), (&b, &qb2), (&c, &qc)] {
        q.attach_mcast(&gid, 0).unwrap();
        q.attach_mcast(&gid, 0).unwrap(); // twice is not an error
        post_recvs(n, q, 0..4);
    }
    ud_send(
        &a,
        &qa,
        0,
        b"to the group",
        g,
        verbs_api::MULTICAST_QPN,
        QKEY,
        SendFlags::empty(),
    );
    let rb = wait(&sim, &b.cq, 2);
    let rc = wait(&sim, &c.cq, 1);
    let mut got: Vec<u32> = rb.iter().chain(rc.iter()).map(|c| c.qp_num).collect();
    got.sort_unstable();
    let mut want = vec![qb1.qp_num(), qb2.qp_num(), qc.qp_num()];
    want.sort_unstable();
    assert_eq!(got, want);
    assert!(wait(&sim, &b.cq, 1).is_empty(), "exactly one copy each");
    qb1.detach_mcast(&gid, 0).unwrap();
    // Detaching a group the QP is not in: EINVAL, as the kernel's rxe_detach_mcast.
    assert_eq!(
        qb1.detach_mcast(&gid, 0).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    ud_send(
        &a,
        &qa,
        1,
        b"again",
        g,
        verbs_api::MULTICAST_QPN,
        QKEY,
        SendFlags::empty(),
    );
    let rb = wait(&sim, &b.cq, 2);
    assert_eq!(
        rb.iter().map(|c| c.qp_num).collect::<Vec<_>>(),
        vec![qb2.qp_num()]
    );
    assert_eq!(
        qa.attach_mcast(&Gid::from_ipv4(ip(9)), 0)
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidArgument
    );
}

#[test]
fn oversized_ud_send_rxe_completes_silently_mlx5_errors() {
    let sim = Sim::new(1);
    let r = node(&sim, 1, Personality::Rxe);
    let m = node(&sim, 2, Personality::Mlx5);
    let (qr, qm) = (ud_qp(&r), ud_qp(&m));
    post_recvs(&m, &qm, 0..2);
    // rxe's active MTU is 1024: a 2000-byte UD send completes but sends nothing.
    ud_send(
        &r,
        &qr,
        0,
        &[1u8; 2000],
        ip(2),
        qm.qp_num(),
        QKEY,
        SendFlags::SIGNALED,
    );
    assert_eq!(wait(&sim, &r.cq, 1)[0].status, WcStatus::Success);
    assert!(wait(&sim, &m.cq, 1).is_empty());
    assert_eq!(sim.with_fabric(|f| f.stats().transmitted), 0);
    // mlx5 (MTU 4096): a 5000-byte UD send is an error.
    let other = ud_qp(&m);
    ud_send(
        &m,
        &other,
        1,
        &[1u8; 5000],
        ip(1),
        qr.qp_num(),
        QKEY,
        SendFlags::SIGNALED,
    );
    assert_eq!(wait(&sim, &m.cq, 1)[0].status, WcStatus::LocLenErr);
}

#[test]
fn ud_larger_than_the_receive_buffer_fails_the_receive_and_the_qp() {
    for (p, expect) in [
        (Personality::Rxe, Some(WcStatus::LocQpOpErr)),
        (Personality::Mlx5, Some(WcStatus::LocLenErr)),
    ] {
        let sim = Sim::new(1);
        let a = node(&sim, 1, p);
        let b = node(&sim, 2, p);
        let (qa, qb) = (ud_qp(&a), ud_qp(&b));
        let sge = [slot_sge(&b, 0, 100)];
        // SAFETY: SGE in b.mr.
        unsafe { qb.post_recv(&[RecvWr::new(0, &sge)]).unwrap() };
        ud_send(
            &a,
            &qa,
            0,
            &[7u8; 500],
            ip(2),
            qb.qp_num(),
            QKEY,
            SendFlags::empty(),
        );
        let r = wait(&sim, &b.cq, 1);
        assert_eq!(r.first().map(|c| c.status), expect, "{p:?}");
    }
}

#[test]
fn srq_feeds_several_qps_and_raises_the_limit_event() {
    let sim = Sim::new(1);
    let a = node(&sim, 1, Personality::Mlx5);
    let b = node(&sim, 2, Personality::Mlx5);
    let qa = ud_qp(&a);
    let srq = b.ctx.create_srq(&b.pd, &SrqInitAttr::new(16, 1)).unwrap();
    let mk = || {
        let mut init = QpInitAttr::new(QpType::Ud, &b.cq, cap());
        init.srq = Some(&srq);
        let q = b.ctx.create_qp(&b.pd, &init).unwrap();
        q.modify_with(&QpModify::to(QpState::Init).port(1).pkey_index(0).qkey(QKEY))
            .unwrap();
        q.modify_with(&QpModify::to(QpState::Rtr)).unwrap();
        q.modify_with(&QpModify::to(QpState::Rts).sq_psn(0))
            .unwrap();
        q
    };
    let (q1, q2) = (mk(), mk());
    for s in 0..6 {
        let sge = [slot_sge(&b, s, SLOT)];
        // SAFETY: SGE in b.mr.
        unsafe { srq.post_recv(&[RecvWr::new(s as u64, &sge)]).unwrap() };
    }
    let sge = [slot_sge(&b, 9, 64)];
    // SAFETY: rejected before use (EINVAL: the QP has no receive queue of its own).
    let e = unsafe { q1.post_recv(&[RecvWr::new(9, &sge)]) }.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert_eq!(
        srq.modify(
            &SrqAttr {
                srq_limit: 100,
                ..SrqAttr::default()
            },
            SrqAttrMask::LIMIT
        )
        .unwrap_err()
        .kind(),
        ErrorKind::InvalidArgument
    );
    srq.modify(
        &SrqAttr {
            srq_limit: 4,
            ..SrqAttr::default()
        },
        SrqAttrMask::LIMIT,
    )
    .unwrap();
    ud_send(
        &a,
        &qa,
        0,
        b"one",
        ip(2),
        q1.qp_num(),
        QKEY,
        SendFlags::empty(),
    );
    ud_send(
        &a,
        &qa,
        1,
        b"two",
        ip(2),
        q2.qp_num(),
        QKEY,
        SendFlags::empty(),
    );
    assert!(
        b.ctx.poll_async_event().unwrap().is_none(),
        "5 left: above the limit"
    );
    ud_send(
        &a,
        &qa,
        2,
        b"three",
        ip(2),
        q1.qp_num(),
        QKEY,
        SendFlags::empty(),
    );
    let r = wait(&sim, &b.cq, 3);
    assert_eq!(
        r.iter().map(|c| c.wr_id).collect::<Vec<_>>(),
        vec![0, 1, 2],
        "SRQ order across QPs"
    );
    assert_eq!(
        r.iter().map(|c| c.qp_num).collect::<Vec<_>>(),
        vec![q1.qp_num(), q2.qp_num(), q1.qp_num()]
    );
    let ev = b.ctx.poll_async_event().unwrap().unwrap();
    assert_eq!(ev.event_type, EventType::SrqLimitReached);
    assert_eq!(ev.element, EventElement::Srq(srq.handle()));
    assert_eq!(
        srq.query().unwrap().srq_limit,
        0,
        "the limit disarms after firing"
    );
    let _ = b.mr.len();
}
