//! Shared receive queues: sharing, limits, sizes.

use super::prelude::*;

/// Two QPs share one SRQ; when the posted count falls below the armed limit, the SRQ
/// raises SRQ_LIMIT_REACHED once.
pub fn srq_shared_with_limit_event<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let c = rig.cq(64);
    let srq = rig
        .ctx
        .create_srq(&rig.pd, &SrqInitAttr::new(16, 1))
        .expect("create_srq");
    let mr = rig.mr(16 * 256, AccessFlags::empty());
    for i in 0..8u64 {
        let s = [sge(&mr, i as usize * 256, 256)];
        // SAFETY: the SGE lies in `mr`, alive until the end of the case.
        unsafe { srq.post_recv(&[RecvWr::new(1000 + i, &s)]) }.expect("post_srq_recv");
    }
    set_srq_limit(&srq, 6).expect("arm limit");
    assert_eq!(srq.query().unwrap().srq_limit, 6);
    let r1 = rig.qp_on_srq(QpType::Ud, &c.cq, &srq);
    let r2 = rig.qp_on_srq(QpType::Ud, &c.cq, &srq);
    let p = verbs_api::helpers::ConnectParams {
        port: rig.port,
        qkey: QKEY,
        ..Default::default()
    };
    verbs_api::helpers::bring_up(&r1, QpState::Rts, &p).unwrap();
    verbs_api::helpers::bring_up(&r2, QpState::Rts, &p).unwrap();
    let s = rig.ud_qp(&c.cq, QKEY);
    let ah = rig.ctx.create_ah(&rig.pd, &rig.self_av()).unwrap();
    let src = rig.mr(64, AccessFlags::empty());
    for (k, dst) in [&r1, &r2, &r1].iter().enumerate() {
        post_send(
            &s,
            ud_send(k as u64, &[sge(&src, 0, 32)], &ah, dst.qp_num()),
        );
    }
    let wcs = poll_n(&c.cq, 6);
    let mut recvs: Vec<_> = wcs.iter().filter(|w| w.is_recv()).collect();
    recvs.sort_by_key(|w| w.wr_id);
    assert_eq!(
        recvs.iter().map(|w| w.wr_id).collect::<Vec<_>>(),
        vec![1000, 1001, 1002],
        "SRQ receives are consumed in order"
    );
    let on_r1 = recvs.iter().filter(|w| w.qp_num == r1.qp_num()).count();
    let on_r2 = recvs.iter().filter(|w| w.qp_num == r2.qp_num()).count();
    assert_eq!((on_r1, on_r2), (2, 1));
    let h = srq.handle();
    let ev = wait_async(&rig.ctx, Some(&c.cq), |e| {
        e.event_type == EventType::SrqLimitReached
    });
    assert_eq!(ev.element, EventElement::Srq(h));
    assert_eq!(
        srq.query().unwrap().srq_limit,
        0,
        "the limit disarms after firing"
    );
}

/// An SRQ's depth rounds to 2^k - 1 like every rxe queue; query reports it.
pub fn srq_sizes_round_up<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    for n in [1u32, 16, 100] {
        let srq = new_srq(&rig, n, 2);
        let a = srq.query().expect("query_srq");
        log.line(format!(
            "{n} -> max_wr {} max_sge {} limit {}",
            a.max_wr, a.max_sge, a.srq_limit
        ));
    }
    log.check(&[
        "1 -> max_wr 1 max_sge 2 limit 0",
        "16 -> max_wr 31 max_sge 2 limit 0",
        "100 -> max_wr 127 max_sge 2 limit 0",
    ]);
}

/// Posting to a full SRQ fails with ENOMEM; resizing it (MAX_WR) makes room, and the
/// receives posted before survive the resize.
pub fn srq_full_and_resize<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let srq = new_srq(&rig, 3, 1);
    let mr = rig.mr(4096, AccessFlags::empty());
    for i in 0..3 {
        try_srq_recv(&srq, i, &[sge(&mr, i as usize * 256, 256)]).expect("post");
    }
    log.result("fourth", &try_srq_recv(&srq, 3, &[sge(&mr, 768, 256)]));
    log.result(
        "resize to 10",
        &srq.modify(
            &SrqAttr {
                max_wr: 10,
                max_sge: 0,
                srq_limit: 0,
            },
            SrqAttrMask::MAX_WR,
        ),
    );
    log.line(format!("max_wr {}", srq.query().expect("query").max_wr));
    log.result(
        "fourth again",
        &try_srq_recv(&srq, 3, &[sge(&mr, 768, 256)]),
    );
    let c = rig.cq(64);
    let r = ud_on_srq(&rig, &c.cq, &srq, "r", &mut log);
    let s = ud(&rig, &c.cq, "s", &mut log);
    let ah = self_ah(&rig);
    for i in 0..4u64 {
        post_send(
            &s,
            SendWr::ud_send(100 + i, &[sge(&mr, 2048, 8)], &ah, r.qp_num(), QKEY),
        );
    }
    log.collect("c", &c.cq, 4);
    log.check(&[
        "fourth: QueueFull bad_wr=0",
        "resize to 10: ok",
        "max_wr 15",
        "fourth again: ok",
        "c: wr 0 Success Recv len 48 imm - flags GRH qp r src s",
        "c: wr 1 Success Recv len 48 imm - flags GRH qp r src s",
        "c: wr 2 Success Recv len 48 imm - flags GRH qp r src s",
        "c: wr 3 Success Recv len 48 imm - flags GRH qp r src s",
    ]);
}

/// SRQ attribute refusals: a limit above the depth, more SGEs than the device takes.
pub fn srq_refusals<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let srq = new_srq(&rig, 16, 1);
    log.result("limit above depth", &set_srq_limit(&srq, 100));
    log.result(
        "too many SGEs",
        &rig.ctx
            .create_srq(&rig.pd, &srq_attr(16, rig.attr.max_srq_sge + 1, 0)),
    );
    log.result(
        "too deep",
        &rig.ctx
            .create_srq(&rig.pd, &srq_attr(rig.attr.max_srq_wr + 1, 1, 0)),
    );
    let mr = rig.mr(64, AccessFlags::empty());
    log.result(
        "two SGEs on a one-SGE SRQ",
        &try_srq_recv(&srq, 1, &[sge(&mr, 0, 8), sge(&mr, 8, 8)]),
    );
    log.check(&[
        "limit above depth: InvalidArgument",
        "too many SGEs: InvalidArgument",
        "too deep: InvalidArgument",
        "two SGEs on a one-SGE SRQ: InvalidArgument bad_wr=0",
    ]);
}

/// The limit event fires when a receive taken leaves fewer than the limit posted (6
/// posted, limit 5: not at the first receive, at the second), once per arming; re-armed,
/// it fires again (`get_srq_wqe` in rxe_resp.c counts after taking the receive).
pub fn srq_limit_rearm<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let c = rig.cq(64);
    let srq = new_srq(&rig, 16, 1);
    log.srq("srq", srq.handle());
    let mr = rig.mr(8192, AccessFlags::empty());
    for i in 0..6 {
        try_srq_recv(&srq, i, &[sge(&mr, i as usize * 256, 256)]).expect("post");
    }
    set_srq_limit(&srq, 5).expect("arm 5");
    let r = ud_on_srq(&rig, &c.cq, &srq, "r", &mut log);
    let s = ud(&rig, &c.cq, "s", &mut log);
    let ah = self_ah(&rig);
    let send = |id| {
        post_send(
            &s,
            SendWr::ud_send(id, &[sge(&mr, 4096, 8)], &ah, r.qp_num(), QKEY),
        )
    };
    send(100);
    log.collect("c", &c.cq, 1);
    log.events(&rig.ctx, &c.cq);
    log.line(format!("limit {}", srq.query().expect("query").srq_limit));
    send(101);
    log.collect("c", &c.cq, 1);
    log.events(&rig.ctx, &c.cq);
    set_srq_limit(&srq, 4).expect("arm 4");
    send(102);
    log.collect("c", &c.cq, 1);
    log.events(&rig.ctx, &c.cq);
    log.check(&[
        "c: wr 0 Success Recv len 48 imm - flags GRH qp r src s",
        "limit 5",
        "c: wr 1 Success Recv len 48 imm - flags GRH qp r src s",
        "event SRQ limit reached: srq",
        "c: wr 2 Success Recv len 48 imm - flags GRH qp r src s",
        "event SRQ limit reached: srq",
    ]);
}

/// An SRQ receive list failing at its second request keeps the first posted; query
/// reports the limit armed, and 0 after it is disarmed.
pub fn srq_list_and_limit_query<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let srq = new_srq(&rig, 8, 1);
    let mr = rig.mr(4096, AccessFlags::empty());
    let good = [sge(&mr, 0, 64)];
    let bad = [sge(&mr, 64, 64), sge(&mr, 128, 64)];
    // SAFETY: the SGEs lie in `mr`, alive until the end of the case.
    let r = unsafe { srq.post_recv(&[RecvWr::new(1, &good), RecvWr::new(2, &bad)]) };
    log.result("post 2", &r);
    log.result("limit 3", &set_srq_limit(&srq, 3));
    log.line(format!("limit {}", srq.query().expect("query").srq_limit));
    log.result("limit 0", &set_srq_limit(&srq, 0));
    log.line(format!("limit {}", srq.query().expect("query").srq_limit));
    log.check(&[
        "post 2: InvalidArgument bad_wr=1",
        "limit 3: ok",
        "limit 3",
        "limit 0: ok",
        "limit 0",
    ]);
}

/// A QP on an SRQ moved to ERR: rxe raises no LAST_WQE_REACHED (the IB spec and mlx5
/// do), and the SRQ's receives are not flushed (they belong to the SRQ).
pub fn srq_qp_to_err_raises_no_last_wqe<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let c = rig.cq(16);
    let srq = new_srq(&rig, 8, 1);
    log.srq("srq", srq.handle());
    let mr = rig.mr(4096, AccessFlags::empty());
    try_srq_recv(&srq, 1, &[sge(&mr, 0, 256)]).expect("post");
    let r = ud_on_srq(&rig, &c.cq, &srq, "r", &mut log);
    log.result("to ERR", &r.modify_with(&QpModify::to(QpState::Err)));
    log.collect("c", &c.cq, 0);
    log.events(&rig.ctx, &c.cq);
    log.check(&["to ERR: ok"]);
}
