//! UD multicast: attach, fan-out, detach.

use super::prelude::*;
use crate::conformance::rig::CqPair;

/// A sender `s` and a receiver `r`: UD QPs in RTS, each on a CQ of its own (`cs`, `cr`).
fn sender_and_receiver<C: Context>(
    rig: &Rig<C>,
    log: &mut Log,
) -> (CqPair<C>, CqPair<C>, C::Qp, C::Qp) {
    let cs = rig.cq(16);
    let cr = rig.cq(16);
    let s = ud(rig, &cs.cq, "s", log);
    let r = ud(rig, &cr.cq, "r", log);
    (cs, cr, s, r)
}

/// UD multicast: one copy per attached QP, none after detach, none for the sender.
pub fn ud_multicast_fan_out_and_detach<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let send_cq = rig.cq(16);
    let recv_cq = rig.cq(64);
    let sender = rig.ud_qp(&send_cq.cq, QKEY);
    let receivers: Vec<_> = (0..3).map(|_| rig.ud_qp(&recv_cq.cq, QKEY)).collect();
    let group = Gid::from_ipv4(Ipv4Addr::new(239, 77, 0, 1));
    for r in &receivers {
        r.attach_mcast(&group, 0).expect("attach_mcast");
    }
    let ah = group_ah(&rig, group);
    let mr = rig.mr(8192, AccessFlags::empty());
    fill(&mr, 0, b"to the group");
    for (i, r) in receivers.iter().enumerate() {
        for k in 0..2u64 {
            post_recv(
                r,
                (i as u64) * 10 + k,
                &[sge(&mr, 1024 + (i * 2 + k as usize) * 256, 256)],
            );
        }
    }
    post_send(&sender, ud_send(1, &[sge(&mr, 0, 12)], &ah, MULTICAST_QPN));
    expect_wc(
        &poll_n(&send_cq.cq, 1)[0],
        1,
        WcStatus::Success,
        Some(WcOpcode::Send),
    );
    let mut wcs = poll_n(&recv_cq.cq, 3);
    wcs.sort_by_key(|w| w.wr_id);
    for (i, wc) in wcs.iter().enumerate() {
        expect_wc(wc, i as u64 * 10, WcStatus::Success, Some(WcOpcode::Recv));
        assert_eq!(wc.byte_len as usize, GRH_LEN + 12);
        assert_eq!(wc.qp_num, receivers[i].qp_num());
        assert_eq!(wc.src_qp, sender.qp_num());
        assert_eq!(read(&mr, 1024 + i * 2 * 256 + GRH_LEN, 12), b"to the group");
    }
    receivers[1].detach_mcast(&group, 0).expect("detach_mcast");
    let e = receivers[1]
        .detach_mcast(&group, 0)
        .expect_err("detach twice");
    assert!(
        matches!(e.kind(), ErrorKind::NotFound | ErrorKind::InvalidArgument),
        "{e}"
    );
    post_send(&sender, ud_send(2, &[sge(&mr, 0, 12)], &ah, MULTICAST_QPN));
    poll_n(&send_cq.cq, 1);
    let mut wcs = poll_n(&recv_cq.cq, 2);
    wcs.sort_by_key(|w| w.wr_id);
    assert_eq!(wcs[0].wr_id, 1);
    assert_eq!(wcs[1].wr_id, 21);
    assert!(
        poll_quiet(&recv_cq.cq).is_empty(),
        "a detached QP got a copy"
    );
    receivers[0].detach_mcast(&group, 0).unwrap();
    receivers[2].detach_mcast(&group, 0).unwrap();
}

/// What may be attached is the device's decision: a GID that is not multicast, or an RC
/// QP, is refused with EINVAL (`ib_attach_mcast`); detaching a group the QP never joined
/// too. Attaching twice is accepted, and one detach leaves the QP out of the group.
pub fn multicast_attach_refusals<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let c = rig.cq(16);
    let mut log = Log::new();
    let u = rig.ud_qp(&c.cq, QKEY);
    let rc = rig.qp(QpType::Rc, &c.cq, 0);
    let group = Gid::from_ipv4(Ipv4Addr::new(239, 77, 0, 2));
    let unicast = Gid::from_ipv4(Ipv4Addr::new(10, 77, 0, 9));
    log.result("attach unicast", &u.attach_mcast(&unicast, 0));
    log.result("attach RC", &rc.attach_mcast(&group, 0));
    log.result("detach never attached", &u.detach_mcast(&group, 0));
    log.result("attach", &u.attach_mcast(&group, 0));
    log.result("attach again", &u.attach_mcast(&group, 0));
    log.result("detach", &u.detach_mcast(&group, 0));
    log.result("detach again", &u.detach_mcast(&group, 0));
    log.check(&[
        "attach unicast: InvalidArgument",
        "attach RC: InvalidArgument",
        "detach never attached: InvalidArgument",
        "attach: ok",
        "attach again: ok",
        "detach: ok",
        "detach again: InvalidArgument",
    ]);
}

/// A multicast sender that is itself attached to the group gets its own message back
/// (rxe loops every group packet to each attached QP on the device).
pub fn multicast_sender_attached_receives_its_own<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let cs = rig.cq(16);
    let rs = rig.cq(16);
    let cr = rig.cq(16);
    let s = ud_on(&rig, &cs.cq, &rs.cq, "s", &mut log);
    let r = ud(&rig, &cr.cq, "r", &mut log);
    let group = Gid::from_ipv4(Ipv4Addr::new(239, 77, 0, 3));
    s.attach_mcast(&group, 0).expect("attach s");
    r.attach_mcast(&group, 0).expect("attach r");
    let ah = group_ah(&rig, group);
    let mr = rig.mr(4096, AccessFlags::empty());
    post_recv(&s, 5, &[sge(&mr, 1024, 256)]);
    post_recv(&r, 6, &[sge(&mr, 2048, 256)]);
    post_send(&s, ud_send(1, &[sge(&mr, 0, 20)], &ah, MULTICAST_QPN));
    log.collect("cs", &cs.cq, 1);
    log.collect("rs", &rs.cq, 1);
    log.collect("cr", &cr.cq, 1);
    s.detach_mcast(&group, 0).expect("detach s");
    r.detach_mcast(&group, 0).expect("detach r");
    log.check(&[
        "cs: wr 1 Success Send len 20 imm - flags - qp s src 0",
        "rs: wr 5 Success Recv len 60 imm - flags GRH qp s src s",
        "cr: wr 6 Success Recv len 60 imm - flags GRH qp r src s",
    ]);
}

/// A multicast message with a Q_Key other than the receiver's is dropped for it.
pub fn multicast_wrong_qkey_dropped<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let (cs, cr, s, r) = sender_and_receiver(&rig, &mut log);
    let group = Gid::from_ipv4(Ipv4Addr::new(239, 77, 0, 4));
    r.attach_mcast(&group, 0).expect("attach r");
    let ah = group_ah(&rig, group);
    let mr = rig.mr(4096, AccessFlags::empty());
    post_recv(&r, 6, &[sge(&mr, 2048, 256)]);
    post_send(
        &s,
        SendWr::ud_send(1, &[sge(&mr, 0, 20)], &ah, MULTICAST_QPN, QKEY + 1).signaled(),
    );
    log.collect("cs", &cs.cq, 1);
    log.collect("cr", &cr.cq, 0);
    r.detach_mcast(&group, 0).expect("detach r");
    log.check(&["cs: wr 1 Success Send len 20 imm - flags - qp s src 0"]);
}

/// One QP in two groups receives from both; detached from one, it still gets the other.
pub fn multicast_two_groups<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let (cs, cr, s, r) = sender_and_receiver(&rig, &mut log);
    let g1 = Gid::from_ipv4(Ipv4Addr::new(239, 77, 1, 1));
    let g2 = Gid::from_ipv4(Ipv4Addr::new(239, 77, 1, 2));
    r.attach_mcast(&g1, 0).expect("attach g1");
    r.attach_mcast(&g2, 0).expect("attach g2");
    let (a1, a2) = (group_ah(&rig, g1), group_ah(&rig, g2));
    let mr = rig.mr(4096, AccessFlags::empty());
    for i in 0..3 {
        post_recv(&r, 10 + i, &[sge(&mr, 1024 + i as usize * 256, 256)]);
    }
    post_send(&s, ud_send(1, &[sge(&mr, 0, 1)], &a1, MULTICAST_QPN));
    log.collect("cs", &cs.cq, 1);
    log.collect("cr", &cr.cq, 1);
    post_send(&s, ud_send(2, &[sge(&mr, 0, 2)], &a2, MULTICAST_QPN));
    log.collect("cs", &cs.cq, 1);
    log.collect("cr", &cr.cq, 1);
    r.detach_mcast(&g1, 0).expect("detach g1");
    post_send(&s, ud_send(3, &[sge(&mr, 0, 3)], &a1, MULTICAST_QPN));
    post_send(&s, ud_send(4, &[sge(&mr, 0, 4)], &a2, MULTICAST_QPN));
    log.collect("cs", &cs.cq, 2);
    log.collect("cr", &cr.cq, 1);
    r.detach_mcast(&g2, 0).expect("detach g2");
    log.check(&[
        "cs: wr 1 Success Send len 1 imm - flags - qp s src 0",
        "cr: wr 10 Success Recv len 41 imm - flags GRH qp r src s",
        "cs: wr 2 Success Send len 2 imm - flags - qp s src 0",
        "cr: wr 11 Success Recv len 42 imm - flags GRH qp r src s",
        "cs: wr 3 Success Send len 3 imm - flags - qp s src 0",
        "cs: wr 4 Success Send len 4 imm - flags - qp s src 0",
        "cr: wr 12 Success Recv len 44 imm - flags GRH qp r src s",
    ]);
}

/// A multicast message to a group nobody joined completes at the sender and is dropped.
pub fn multicast_to_an_empty_group<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let (cs, cr, s, r) = sender_and_receiver(&rig, &mut log);
    let ah = group_ah(&rig, Gid::from_ipv4(Ipv4Addr::new(239, 77, 1, 9)));
    let mr = rig.mr(4096, AccessFlags::empty());
    post_recv(&r, 10, &[sge(&mr, 1024, 256)]);
    post_send(&s, ud_send(1, &[sge(&mr, 0, 5)], &ah, MULTICAST_QPN));
    log.collect("cs", &cs.cq, 1);
    log.collect("cr", &cr.cq, 0);
    log.check(&["cs: wr 1 Success Send len 5 imm - flags - qp s src 0"]);
}
