//! QP creation, queue sizes, state transitions and attribute checks.

use super::prelude::*;

/// RC through every state with exactly the required masks; invalid moves rejected with
/// the same kinds on every backend.
pub fn rc_bring_up_and_invalid_transitions<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let c = rig.cq(16);
    let qp = rig.qp(QpType::Rc, &c.cq, 0);
    assert_eq!(qp.state().unwrap(), QpState::Reset);
    let e = qp
        .modify_with(&QpModify::to(QpState::Rts))
        .expect_err("RESET->RTS");
    assert_eq!(e.kind(), ErrorKind::InvalidState);
    let e = qp
        .modify_with(&QpModify::to(QpState::Init).port(rig.port).pkey_index(0))
        .expect_err("no ACCESS_FLAGS");
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    let e = qp
        .modify_with(
            &QpModify::to(QpState::Init)
                .port(rig.port)
                .pkey_index(0)
                .access(AccessFlags::empty())
                .qkey(1),
        )
        .expect_err("QKEY on RC");
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    qp.modify_with(
        &QpModify::to(QpState::Init)
            .port(rig.port)
            .pkey_index(0)
            .access(AccessFlags::REMOTE_WRITE),
    )
    .expect("RESET->INIT");
    assert_eq!(qp.state().unwrap(), QpState::Init);
    let p = rig.connect_params(qp.qp_num(), AccessFlags::empty());
    let r = p.remote.unwrap();
    let e = qp
        .modify_with(
            &QpModify::to(QpState::Rtr)
                .av(r.av)
                .path_mtu(p.path_mtu)
                .dest_qpn(r.qpn)
                .rq_psn(0),
        )
        .expect_err("RTR without MAX_DEST_RD_ATOMIC and MIN_RNR_TIMER");
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    qp.modify_with(
        &QpModify::to(QpState::Rtr)
            .av(r.av)
            .path_mtu(p.path_mtu)
            .dest_qpn(r.qpn)
            .rq_psn(0)
            .max_dest_rd_atomic(1)
            .min_rnr_timer(12),
    )
    .expect("INIT->RTR");
    assert_eq!(qp.state().unwrap(), QpState::Rtr);
    let e = qp
        .modify_with(&QpModify::to(QpState::Rts).sq_psn(0))
        .expect_err("RTS without timeouts");
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    qp.modify_with(
        &QpModify::to(QpState::Rts)
            .sq_psn(0)
            .timeout(14)
            .retry_cnt(7)
            .rnr_retry(7)
            .max_rd_atomic(1),
    )
    .expect("RTR->RTS");
    assert_eq!(qp.state().unwrap(), QpState::Rts);
    let e = qp
        .modify_with(&QpModify::to(QpState::Init))
        .expect_err("RTS->INIT");
    assert_eq!(e.kind(), ErrorKind::InvalidState);
    qp.modify_with(&QpModify::to(QpState::Err))
        .expect("RTS->ERR");
    assert_eq!(qp.state().unwrap(), QpState::Err);
    let e = qp
        .modify_with(&QpModify::to(QpState::Rts))
        .expect_err("ERR->RTS");
    assert_eq!(e.kind(), ErrorKind::InvalidState);
    qp.modify_with(&QpModify::to(QpState::Reset))
        .expect("ERR->RESET");
    assert_eq!(qp.state().unwrap(), QpState::Reset);
    // Posting in RESET fails the post (not a completion).
    let mr = rig.mr(64, AccessFlags::empty());
    // SAFETY: the SGE lies in `mr`, alive until the end of the case; the post fails.
    let e =
        unsafe { qp.post_send(&[SendWr::send(1, &[sge(&mr, 0, 8)])]) }.expect_err("send in RESET");
    assert_eq!(e.kind(), ErrorKind::InvalidState, "{e}");
}

fn cap_line(c: &QpCap) -> String {
    format!(
        "send_wr {} recv_wr {} send_sge {} recv_sge {} inline {}",
        c.max_send_wr, c.max_recv_wr, c.max_send_sge, c.max_recv_sge, c.max_inline_data
    )
}

/// The queue sizes a QP gets: rxe rounds each ring to 2^k - 1 entries and sizes a send
/// WQE to hold max(16 bytes per SGE, inline data), so the SGE and inline limits grow
/// together (`rxe_qp_init_req`: sge = wqe / 16, inline = wqe). mlx5 computes its own.
pub fn qp_caps_round_up<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let c = rig.cq(16);
    let mut log = Log::new();
    for (t, asked) in [
        (QpType::Rc, cap(32, 32, 2, 2, 64)),
        (QpType::Rc, cap(1, 1, 1, 1, 0)),
        (QpType::Ud, cap(100, 10, 3, 1, 0)),
        (QpType::Uc, cap(16, 16, 1, 4, 200)),
    ] {
        let qp = rig.qp_with(t, &c.cq, &c.cq, asked);
        let (_, got) = qp.query(QpAttrMask::CAP).expect("query_qp");
        log.line(format!("{t} {} -> {}", cap_line(&asked), cap_line(&got)));
    }
    log.check(&[
        "RC send_wr 32 recv_wr 32 send_sge 2 recv_sge 2 inline 64 -> send_wr 63 recv_wr 63 send_sge 4 recv_sge 2 inline 64",
        "RC send_wr 1 recv_wr 1 send_sge 1 recv_sge 1 inline 0 -> send_wr 1 recv_wr 1 send_sge 1 recv_sge 1 inline 16",
        "UD send_wr 100 recv_wr 10 send_sge 3 recv_sge 1 inline 0 -> send_wr 127 recv_wr 15 send_sge 3 recv_sge 1 inline 48",
        "UC send_wr 16 recv_wr 16 send_sge 1 recv_sge 4 inline 200 -> send_wr 31 recv_wr 31 send_sge 12 recv_sge 4 inline 200",
    ]);
}

/// Queue sizes past the device's limits are refused by the device.
pub fn qp_create_refusals<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let c = rig.cq(16);
    let a = &rig.attr;
    let mut log = Log::new();
    for (name, asked) in [
        ("send_wr", cap(a.max_qp_wr + 1, 1, 1, 1, 0)),
        ("recv_wr", cap(1, a.max_qp_wr + 1, 1, 1, 0)),
        ("send_sge", cap(1, 1, a.max_sge + 1, 1, 0)),
        ("recv_sge", cap(1, 1, 1, a.max_sge + 1, 0)),
        ("inline", cap(1, 1, 1, 1, 4096)),
    ] {
        let r = rig.ctx.create_qp(
            &rig.pd,
            &verbs_api::QpInitAttr::new(QpType::Rc, &c.cq, asked),
        );
        log.result(name, &r);
    }
    log.check(&[
        "send_wr: InvalidArgument",
        "recv_wr: InvalidArgument",
        "send_sge: InvalidArgument",
        "recv_sge: InvalidArgument",
        "inline: InvalidArgument",
    ]);
}

/// Values rxe refuses in modify_qp (`rxe_qp_chk_attr`): an ACK timeout above 31, more
/// outstanding reads than max_qp_rd_atom, a port that does not exist.
pub fn modify_refuses_bad_values<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let c = rig.cq(16);
    let qp = rig.qp(QpType::Rc, &c.cq, 0);
    let mut log = Log::new();
    log.result(
        "INIT port 2",
        &qp.modify_with(
            &QpModify::to(QpState::Init)
                .port(2)
                .pkey_index(0)
                .access(AccessFlags::empty()),
        ),
    );
    log.state("qp", &qp);
    let p = rig.connect_params(qp.qp_num(), AccessFlags::empty());
    verbs_api::helpers::bring_up(&qp, QpState::Rtr, &p).expect("to RTR");
    let rts = || {
        QpModify::to(QpState::Rts)
            .sq_psn(0)
            .retry_cnt(7)
            .rnr_retry(7)
    };
    log.result(
        "RTS timeout 32",
        &qp.modify_with(&rts().timeout(32).max_rd_atomic(1)),
    );
    log.result(
        "RTS max_rd_atomic 129",
        &qp.modify_with(&rts().timeout(14).max_rd_atomic(129)),
    );
    log.state("qp", &qp);
    log.result(
        "RTS timeout 31",
        &qp.modify_with(&rts().timeout(31).max_rd_atomic(128)),
    );
    log.state("qp", &qp);
    log.check(&[
        "INIT port 2: InvalidArgument",
        "state qp: RESET",
        "RTS timeout 32: InvalidArgument",
        "RTS max_rd_atomic 129: InvalidArgument",
        "state qp: RTR",
        "RTS timeout 31: ok",
        "state qp: RTS",
    ]);
}

/// rxe rounds max_rd_atomic and max_dest_rd_atomic up to a power of two
/// (`rxe_qp_from_attr`), and query_qp reports the rounded values.
pub fn rd_atomic_rounds_up_to_power_of_two<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let c = rig.cq(16);
    let mut log = Log::new();
    for n in [0u8, 1, 3, 5, 16] {
        let (a, _b) = rig.pair_with(QpType::Rc, &c.cq, &c.cq, AccessFlags::empty(), |_, p| {
            p.max_rd_atomic = n;
            p.max_dest_rd_atomic = n;
        });
        let (attr, _) = a
            .query(QpAttrMask::MAX_QP_RD_ATOMIC | QpAttrMask::MAX_DEST_RD_ATOMIC)
            .expect("query_qp");
        log.line(format!(
            "{n} -> rd_atomic {} dest_rd_atomic {}",
            attr.max_rd_atomic, attr.max_dest_rd_atomic
        ));
    }
    log.check(&[
        "0 -> rd_atomic 0 dest_rd_atomic 0",
        "1 -> rd_atomic 1 dest_rd_atomic 1",
        "3 -> rd_atomic 4 dest_rd_atomic 4",
        "5 -> rd_atomic 8 dest_rd_atomic 8",
        "16 -> rd_atomic 16 dest_rd_atomic 16",
    ]);
}

/// query_qp reports the attributes set, and the current PSNs after traffic.
pub fn query_qp_reports_attributes_and_psns<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let p = pair_with(
        &rig,
        QpType::Rc,
        AccessFlags::REMOTE_WRITE,
        &mut log,
        |b, p| {
            p.sq_psn = if b { 500 } else { 100 };
            if let Some(r) = p.remote.as_mut() {
                r.psn = if b { 100 } else { 500 };
            }
            p.timeout = 12;
            p.retry_cnt = 5;
            p.rnr_retry = 6;
            p.min_rnr_timer = 9;
        },
    );
    let mr = rig.mr(256, AccessFlags::empty());
    for i in 0..3 {
        post_recv(&p.b, i, &[sge(&mr, 0, 64)]);
        post_send(&p.a, SendWr::send(10 + i, &[sge(&mr, 128, 8)]).signaled());
    }
    poll_n(&p.cq_a.cq, 3);
    poll_n(&p.cq_b.cq, 3);
    for (name, qp) in [("a", &p.a), ("b", &p.b)] {
        let mask = QpAttrMask::STATE
            | QpAttrMask::SQ_PSN
            | QpAttrMask::RQ_PSN
            | QpAttrMask::TIMEOUT
            | QpAttrMask::RETRY_CNT
            | QpAttrMask::RNR_RETRY
            | QpAttrMask::MIN_RNR_TIMER
            | QpAttrMask::ACCESS_FLAGS
            | QpAttrMask::PATH_MTU
            | QpAttrMask::PORT;
        let (q, _) = qp.query(mask).expect("query_qp");
        log.line(format!(
            "{name}: {} sq_psn {} rq_psn {} timeout {} retry {} rnr_retry {} min_rnr {} access {:?} mtu {:?} port {}",
            q.qp_state,
            q.sq_psn,
            q.rq_psn,
            q.timeout,
            q.retry_cnt,
            q.rnr_retry,
            q.min_rnr_timer,
            q.qp_access_flags,
            q.path_mtu,
            q.port_num
        ));
    }
    log.check(&[
        "a: RTS sq_psn 103 rq_psn 500 timeout 12 retry 5 rnr_retry 6 min_rnr 9 access AccessFlags(REMOTE_WRITE) mtu Mtu1024 port 1",
        "b: RTS sq_psn 500 rq_psn 103 timeout 12 retry 5 rnr_retry 6 min_rnr 9 access AccessFlags(REMOTE_WRITE) mtu Mtu1024 port 1",
    ]);
}

/// UD through every state with its masks (Q_Key at INIT, only the state at RTR, the
/// send PSN at RTS); missing masks are refused with the same kinds on every backend.
pub fn ud_bring_up_and_masks<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let c = rig.cq(16);
    let qp = rig.qp(QpType::Ud, &c.cq, 0);
    let mut log = Log::new();
    let init = || QpModify::to(QpState::Init).port(rig.port).pkey_index(0);
    log.result("INIT without QKEY", &qp.modify_with(&init()));
    log.result(
        "INIT with ACCESS_FLAGS",
        &qp.modify_with(&init().qkey(QKEY).access(AccessFlags::empty())),
    );
    log.result("INIT", &qp.modify_with(&init().qkey(QKEY)));
    log.result("RTR", &qp.modify_with(&QpModify::to(QpState::Rtr)));
    log.result(
        "RTS without SQ_PSN",
        &qp.modify_with(&QpModify::to(QpState::Rts)),
    );
    log.result(
        "RTS",
        &qp.modify_with(&QpModify::to(QpState::Rts).sq_psn(7)),
    );
    let (a, _) = qp
        .query(QpAttrMask::STATE | QpAttrMask::QKEY | QpAttrMask::SQ_PSN)
        .expect("query_qp");
    log.line(format!(
        "{} qkey {:#x} sq_psn {}",
        a.qp_state, a.qkey, a.sq_psn
    ));
    log.check(&[
        "INIT without QKEY: InvalidArgument",
        "INIT with ACCESS_FLAGS: InvalidArgument",
        "INIT: ok",
        "RTR: ok",
        "RTS without SQ_PSN: InvalidArgument",
        "RTS: ok",
        "RTS qkey 0x11111111 sq_psn 7",
    ]);
}

/// Posting before the QP is ready: receives need INIT (rdma-core's rxe provider refuses
/// them in RESET), sends need RTS (the kernel's `rxe_post_send` refuses them before).
/// The refusals come from the QP state table, with the same kind on every backend.
pub fn posting_before_ready<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let c = rig.cq(16);
    let qp = rig.qp(QpType::Rc, &c.cq, 0);
    let mr = rig.mr(64, AccessFlags::empty());
    let mut log = Log::new();
    log.qp("qp", &qp);
    log.result("recv in RESET", &try_recv(&qp, 1, &[sge(&mr, 0, 8)]));
    qp.modify_with(
        &QpModify::to(QpState::Init)
            .port(rig.port)
            .pkey_index(0)
            .access(AccessFlags::empty()),
    )
    .expect("INIT");
    log.result("recv in INIT", &try_recv(&qp, 2, &[sge(&mr, 0, 8)]));
    log.result(
        "send in INIT",
        &try_send(&qp, &[SendWr::send(3, &[sge(&mr, 0, 8)])]),
    );
    qp.modify_with(&QpModify::to(QpState::Err)).expect("ERR");
    log.collect("cq", &c.cq, 1);
    log.check(&[
        "recv in RESET: InvalidState bad_wr=0",
        "recv in INIT: ok",
        "send in INIT: InvalidState bad_wr=0",
        "cq: wr 2 WrFlushErr Send len 0 imm - flags - qp qp src 0",
    ]);
}

/// A send with more SGEs than the QP takes, or more inline data, fails the post; the
/// requests before it in the list are posted.
pub fn post_send_refusals<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let p = pair(&rig, QpType::Rc, AccessFlags::empty(), &mut log);
    let (_, got) = p.a.query(QpAttrMask::CAP).expect("query_qp");
    let mr = rig.mr(8192, AccessFlags::empty());
    for i in 0..2 {
        post_recv(&p.b, i, &[sge(&mr, 4096, 4096)]);
    }
    let many: Vec<Sge> = (0..=got.max_send_sge)
        .map(|i| sge(&mr, i as usize * 8, 8))
        .collect();
    let one = [sge(&mr, 0, 8)];
    log.result(
        "too many SGEs",
        &try_send(
            &p.a,
            &[
                SendWr::send(1, &one).signaled(),
                SendWr::send(2, &many).signaled(),
            ],
        ),
    );
    let big = [sge(&mr, 0, got.max_inline_data + 1)];
    log.result(
        "inline too long",
        &try_send(
            &p.a,
            &[SendWr::send(3, &big).flags(SendFlags::INLINE | SendFlags::SIGNALED)],
        ),
    );
    p.collect(&mut log, 1, 1);
    log.check(&[
        "too many SGEs: InvalidArgument bad_wr=1",
        "inline too long: InvalidArgument bad_wr=0",
        "cq_a: wr 1 Success Send len 8 imm - flags - qp a src 0",
        "cq_b: wr 0 Success Recv len 8 imm - flags GRH qp b src 0",
    ]);
}

/// A QP moved from RTS to SQD with en_sqd_async_notify raises SQ_DRAINED once its send
/// queue is empty; rxe raises no COMM_EST at bring-up.
pub fn sq_drained_event<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let p = pair(&rig, QpType::Rc, AccessFlags::empty(), &mut log);
    log.events(&rig.ctx, &p.cq_a.cq);
    log.result(
        "SQD",
        &p.a.modify_with(&QpModify::to(QpState::Sqd).en_sqd_async_notify(true)),
    );
    log.events(&rig.ctx, &p.cq_a.cq);
    log.state("a", &p.a);
    log.check(&["SQD: ok", "event send queue drained: a", "state a: SQD"]);
}

/// UC's masks: RTR needs the path and the peer but no RDMA-read or RNR attributes, RTS
/// only the send PSN; a mask UC does not take is refused.
pub fn uc_bring_up_and_masks<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let c = rig.cq(16);
    let qp = rig.qp(QpType::Uc, &c.cq, 0);
    let mut log = Log::new();
    qp.modify_with(
        &QpModify::to(QpState::Init)
            .port(rig.port)
            .pkey_index(0)
            .access(AccessFlags::REMOTE_WRITE),
    )
    .expect("INIT");
    let p = rig.connect_params(qp.qp_num(), AccessFlags::empty());
    let r = p.remote.expect("remote");
    let rtr = || {
        QpModify::to(QpState::Rtr)
            .av(r.av)
            .path_mtu(p.path_mtu)
            .dest_qpn(r.qpn)
            .rq_psn(0)
    };
    log.result(
        "RTR with MAX_DEST_RD_ATOMIC",
        &qp.modify_with(&rtr().max_dest_rd_atomic(1)),
    );
    log.result(
        "RTR without RQ_PSN",
        &qp.modify_with(
            &QpModify::to(QpState::Rtr)
                .av(r.av)
                .path_mtu(p.path_mtu)
                .dest_qpn(r.qpn),
        ),
    );
    log.result("RTR", &qp.modify_with(&rtr()));
    log.result(
        "RTS with TIMEOUT",
        &qp.modify_with(&QpModify::to(QpState::Rts).sq_psn(0).timeout(14)),
    );
    log.result(
        "RTS",
        &qp.modify_with(&QpModify::to(QpState::Rts).sq_psn(0)),
    );
    log.state("qp", &qp);
    log.check(&[
        "RTR with MAX_DEST_RD_ATOMIC: InvalidArgument",
        "RTR without RQ_PSN: InvalidArgument",
        "RTR: ok",
        "RTS with TIMEOUT: InvalidArgument",
        "RTS: ok",
        "state qp: RTS",
    ]);
}

/// A UD QP taken back to RESET loses its posted receives without completions, and works
/// again once brought up.
pub fn ud_reset_and_reuse<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let u = ud_pair(&rig, &mut log);
    post_recv(&u.b, 5, &[sge(&u.mr, 1024, 256)]);
    log.result("to RESET", &u.b.modify_with(&QpModify::to(QpState::Reset)));
    log.collect("cq_b", &u.cq_b.cq, 0);
    bring_up_ud(&rig, &u.b, QpState::Rts);
    post_recv(&u.b, 6, &[sge(&u.mr, 2048, 256)]);
    post_send(&u.a, ud_send(1, &[sge(&u.mr, 0, 3)], &u.ah, u.b.qp_num()));
    u.collect(&mut log, 1, 1);
    log.check(&[
        "to RESET: ok",
        "cq_a: wr 1 Success Send len 3 imm - flags - qp a src 0",
        "cq_b: wr 6 Success Recv len 43 imm - flags GRH qp b src a",
    ]);
}

/// RTS -> SQD -> RTS: sends posted after the return work as before. A QP leaves SQD
/// only once its send queue has drained: rxe refuses any state but ERR while its
/// requester still drains (`rxe_qp_chk_attr`; seen in the VM as an occasional EINVAL when
/// RTS followed SQD at once), and reports the drain in `sq_draining`, so the test waits
/// for that as an application must.
pub fn sqd_and_back_to_rts<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let u = ud_pair(&rig, &mut log);
    log.result("SQD", &u.a.modify_with(&QpModify::to(QpState::Sqd)));
    log.state("a", &u.a);
    let drained = (0..5000).any(|i| {
        if i > 0 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        u.a.query(QpAttrMask::STATE)
            .is_ok_and(|(attr, _)| !attr.sq_draining)
    });
    log.line(if drained {
        "a drained"
    } else {
        "a still draining after 5 s"
    });
    log.result("RTS", &u.a.modify_with(&QpModify::to(QpState::Rts)));
    log.state("a", &u.a);
    post_recv(&u.b, 5, &[sge(&u.mr, 1024, 256)]);
    post_send(&u.a, ud_send(1, &[sge(&u.mr, 0, 2)], &u.ah, u.b.qp_num()));
    u.collect(&mut log, 1, 1);
    log.check(&[
        "SQD: ok",
        "state a: SQD",
        "a drained",
        "RTS: ok",
        "state a: RTS",
        "cq_a: wr 1 Success Send len 2 imm - flags - qp a src 0",
        "cq_b: wr 5 Success Recv len 42 imm - flags GRH qp b src a",
    ]);
}

/// The Q_Key may change in RTS: messages with the old key are then dropped, the new
/// key's delivered.
pub fn qkey_change_in_rts<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let u = ud_pair(&rig, &mut log);
    log.result("QKEY", &u.b.modify_with(&QpModify::attrs().qkey(0x2222)));
    post_recv(&u.b, 5, &[sge(&u.mr, 1024, 256)]);
    post_send(&u.a, ud_send(1, &[sge(&u.mr, 0, 1)], &u.ah, u.b.qp_num()));
    post_send(
        &u.a,
        SendWr::ud_send(2, &[sge(&u.mr, 0, 2)], &u.ah, u.b.qp_num(), 0x2222).signaled(),
    );
    u.collect(&mut log, 2, 1);
    let (attr, _) = u.b.query(QpAttrMask::QKEY).expect("query");
    log.line(format!("qkey {:#x}", attr.qkey));
    log.check(&[
        "QKEY: ok",
        "cq_a: wr 1 Success Send len 1 imm - flags - qp a src 0",
        "cq_a: wr 2 Success Send len 2 imm - flags - qp a src 0",
        "cq_b: wr 5 Success Recv len 42 imm - flags GRH qp b src a",
        "qkey 0x2222",
    ]);
}

/// A receive list whose second request has too many SGEs: the post fails at index 1,
/// and the first request stays posted (it takes the next message).
pub fn recv_list_fails_at_the_bad_request<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let u = ud_pair(&rig, &mut log);
    let good = [sge(&u.mr, 1024, 256)];
    let bad: Vec<Sge> = (0..3).map(|i| sge(&u.mr, 2048 + i * 64, 64)).collect();
    // SAFETY: the SGEs lie in `mr`, alive until the end of the case.
    let r = unsafe {
        u.b.post_recv(&[RecvWr::new(5, &good), RecvWr::new(6, &bad)])
    };
    log.result("post 2", &r);
    post_send(&u.a, ud_send(1, &[sge(&u.mr, 0, 7)], &u.ah, u.b.qp_num()));
    u.collect(&mut log, 1, 1);
    log.check(&[
        "post 2: InvalidArgument bad_wr=1",
        "cq_a: wr 1 Success Send len 7 imm - flags - qp a src 0",
        "cq_b: wr 5 Success Recv len 47 imm - flags GRH qp b src a",
    ]);
}
