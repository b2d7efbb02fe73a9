//! RC errors: local and remote faults, retries, flushing.

use super::prelude::*;

/// Bad local memory in a work request. Sender side: an SGE past its MR completes with
/// LOC_PROT_ERR; a bad lkey with LOC_PROT_ERR per the man pages, but LOC_QP_OP_ERR on rxe
/// (Linux 6.1). Either way the QP moves to ERR and the next request is flushed, while the
/// responder stays in RTS. Receive side: a bad lkey in the posted receive fails that
/// receive with LOC_QP_OP_ERR (rxe; LOC_PROT_ERR per the man pages) and the sender with
/// REM_OP_ERR; both QPs end in ERR.
pub fn loc_prot_err_on_bad_lkey<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let c = rig.cq(16);
    let mr = rig.mr(256, AccessFlags::empty());
    let bad_lkey = bad_lkey(&mr, 8);
    let past_end = Sge {
        addr: mr.addr() + 250,
        length: 16,
        lkey: mr.lkey(),
    };
    let bad_lkey_status = if env.is_rxe() {
        WcStatus::LocQpOpErr
    } else {
        WcStatus::LocProtErr
    };
    for (bad, status) in [
        (bad_lkey, bad_lkey_status),
        (past_end, WcStatus::LocProtErr),
    ] {
        let (a, b) = rig.rc_pair(&c.cq, AccessFlags::empty());
        post_recv(&b, 1, &[sge(&mr, 128, 64)]);
        post_send(&a, SendWr::send(9, &[bad]).signaled());
        post_send(&a, SendWr::send(10, &[sge(&mr, 0, 8)]).signaled());
        let wcs = poll_n(&c.cq, 2);
        expect_wc(&wcs[0], 9, status, None);
        expect_wc(&wcs[1], 10, WcStatus::WrFlushErr, None);
        assert_eq!(
            a.state().unwrap(),
            QpState::Err,
            "the requester QP is in ERR"
        );
        assert_eq!(
            b.state().unwrap(),
            QpState::Rts,
            "the responder is untouched"
        );
    }
    let (a, b) = rig.rc_pair(&c.cq, AccessFlags::empty());
    post_recv(&b, 1, &[bad_lkey]);
    post_send(&a, SendWr::send(9, &[sge(&mr, 0, 8)]).signaled());
    let wcs = poll_n(&c.cq, 2);
    let recv = wcs.iter().find(|w| w.qp_num == b.qp_num()).unwrap();
    expect_wc(recv, 1, bad_lkey_status, None);
    let send = wcs.iter().find(|w| w.qp_num == a.qp_num()).unwrap();
    expect_wc(send, 9, WcStatus::RemOpErr, None);
    assert_eq!(a.state().unwrap(), QpState::Err);
    assert_eq!(b.state().unwrap(), QpState::Err);
}

/// A bad rkey, a missing remote access right, or an out-of-bounds remote address
/// completes with REM_ACCESS_ERR at the requester.
pub fn rem_access_err_on_bad_rkey_or_missing_access<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let c = rig.cq(16);
    let (local, remote) = local_and_remote(&rig, 256);
    let read_only = rig.mr(256, AccessFlags::REMOTE_READ);
    let cases: [(u64, u32, &str); 3] = [
        (remote.addr(), remote.rkey() ^ 0x00ff_ff00, "bad rkey"),
        (read_only.addr(), read_only.rkey(), "no REMOTE_WRITE"),
        (remote.addr() + 250, remote.rkey(), "past the end"),
    ];
    for (i, (addr, rkey, why)) in cases.into_iter().enumerate() {
        let (a, _b) = rig.rc_pair(&c.cq, ALL_REMOTE);
        post_send(
            &a,
            SendWr::rdma_write(i as u64, &[sge(&local, 0, 16)], addr, rkey).signaled(),
        );
        let wcs = poll_n(&c.cq, 1);
        assert_eq!(wcs[0].status, WcStatus::RemAccessErr, "{why}: {:?}", wcs[0]);
        assert_eq!(wcs[0].wr_id, i as u64);
    }
}

/// With no receive posted and a finite rnr_retry, a SEND ends in RNR_RETRY_EXC_ERR.
pub fn rnr_retry_exceeded_without_receive<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let c = rig.cq(16);
    let a = rig.qp(QpType::Rc, &c.cq, 0);
    let b = rig.qp(QpType::Rc, &c.cq, 0);
    let mut pa = rig.connect_params(b.qp_num(), AccessFlags::empty());
    pa.rnr_retry = 1;
    let mut pb = rig.connect_params(a.qp_num(), AccessFlags::empty());
    pb.min_rnr_timer = 1;
    verbs_api::helpers::bring_up(&a, QpState::Rts, &pa).unwrap();
    verbs_api::helpers::bring_up(&b, QpState::Rts, &pb).unwrap();
    let mr = rig.mr(64, AccessFlags::empty());
    post_send(&a, SendWr::send(5, &[sge(&mr, 0, 8)]).signaled());
    let wcs = poll_n(&c.cq, 1);
    expect_wc(&wcs[0], 5, WcStatus::RnrRetryExcErr, None);
}

/// Moving a QP to ERR flushes every outstanding receive, in order.
pub fn wr_flush_err_after_err<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let c = rig.cq(16);
    let (_a, b) = rig.rc_pair(&c.cq, AccessFlags::empty());
    let mr = rig.mr(1024, AccessFlags::empty());
    for i in 0..3u64 {
        post_recv(&b, 100 + i, &[sge(&mr, i as usize * 256, 256)]);
    }
    b.modify_with(&QpModify::to(QpState::Err)).expect("to ERR");
    let wcs = poll_n(&c.cq, 3);
    for (i, wc) in wcs.iter().enumerate() {
        expect_wc(wc, 100 + i as u64, WcStatus::WrFlushErr, None);
        assert_eq!(wc.qp_num, b.qp_num());
    }
}

/// A responder QP that does not allow remote writes (its access flags, not the MR's):
/// rxe answers with an invalid-request NAK (`check_op_valid`), so the requester gets
/// REM_INV_REQ_ERR, not REM_ACCESS_ERR as the IB spec and mlx5 have it. Both QPs enter
/// ERR, and no async event is raised.
pub fn responder_without_remote_write<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let p = pair(&rig, QpType::Rc, AccessFlags::empty(), &mut log);
    let (local, remote) = local_and_remote(&rig, 64);
    post_send(
        &p.a,
        SendWr::rdma_write(1, &[sge(&local, 0, 8)], remote.addr(), remote.rkey()).signaled(),
    );
    post_send(&p.a, SendWr::send(2, &[sge(&local, 0, 8)]).signaled());
    p.collect(&mut log, 2, 0);
    p.states(&mut log);
    log.events(&rig.ctx, &p.cq_a.cq);
    log.check(&[
        "cq_a: wr 1 RemInvReqErr Send len 0 imm - flags - qp a src 0",
        "cq_a: wr 2 WrFlushErr Send len 0 imm - flags - qp a src 0",
        "state a: ERR",
        "state b: ERR",
    ]);
}

/// As above for RDMA READ on a responder without REMOTE_READ.
pub fn responder_without_remote_read<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let p = pair(&rig, QpType::Rc, AccessFlags::REMOTE_WRITE, &mut log);
    let (local, remote) = local_and_remote(&rig, 64);
    post_send(
        &p.a,
        SendWr::rdma_read(1, &[sge(&local, 0, 8)], remote.addr(), remote.rkey()).signaled(),
    );
    log.collect("cq_a", &p.cq_a.cq, 1);
    p.states(&mut log);
    log.check(&[
        "cq_a: wr 1 RemInvReqErr Send len 0 imm - flags - qp a src 0",
        "state a: ERR",
        "state b: ERR",
    ]);
}

/// As above for an atomic on a responder without REMOTE_ATOMIC: the remote word is
/// untouched.
pub fn responder_without_remote_atomic<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let p = pair(
        &rig,
        QpType::Rc,
        AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ,
        &mut log,
    );
    let (local, remote) = local_and_remote(&rig, 64);
    post_send(
        &p.a,
        SendWr::fetch_add(1, &[sge(&local, 0, 8)], remote.addr(), remote.rkey(), 5).signaled(),
    );
    log.collect("cq_a", &p.cq_a.cq, 1);
    log.line(format!("remote {}", read_u64(&remote, 0)));
    log.check(&[
        "cq_a: wr 1 RemInvReqErr Send len 0 imm - flags - qp a src 0",
        "remote 0",
    ]);
}

/// A responder with max_dest_rd_atomic 0 refuses an RDMA READ: REM_INV_REQ_ERR.
pub fn read_to_responder_with_no_rd_atomic<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let p = pair_with(&rig, QpType::Rc, ALL_REMOTE, &mut log, |b, p| {
        if b {
            p.max_dest_rd_atomic = 0;
        }
    });
    let (local, remote) = local_and_remote(&rig, 64);
    post_send(
        &p.a,
        SendWr::rdma_read(1, &[sge(&local, 0, 8)], remote.addr(), remote.rkey()).signaled(),
    );
    log.collect("cq_a", &p.cq_a.cq, 1);
    p.states(&mut log);
    log.check(&[
        "cq_a: wr 1 RemInvReqErr Send len 0 imm - flags - qp a src 0",
        "state a: ERR",
        "state b: ERR",
    ]);
}

/// A receive too small for an RC SEND: rxe completes the receive with LOC_QP_OP_ERR and
/// the send with REM_OP_ERR, and both QPs enter ERR (the man pages say LOC_LEN_ERR and
/// REM_INV_REQ_ERR).
pub fn rc_receive_too_small<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let p = pair(&rig, QpType::Rc, AccessFlags::empty(), &mut log);
    let mr = rig.mr(1024, AccessFlags::empty());
    post_recv(&p.b, 7, &[sge(&mr, 512, 16)]);
    post_recv(&p.b, 8, &[sge(&mr, 768, 64)]);
    post_send(&p.a, SendWr::send(1, &[sge(&mr, 0, 32)]).signaled());
    p.collect(&mut log, 1, 2);
    p.states(&mut log);
    log.events(&rig.ctx, &p.cq_a.cq);
    log.check(&[
        "cq_a: wr 1 RemOpErr Send len 0 imm - flags - qp a src 0",
        "cq_b: wr 7 LocQpOpErr Send len 0 imm - flags - qp b src 0",
        "cq_b: wr 8 WrFlushErr Send len 0 imm - flags - qp b src 0",
        "state a: ERR",
        "state b: ERR",
    ]);
}

/// WRITE_WITH_IMM with a bad rkey: rxe consumes the receive with an error, and the
/// requester gets REM_ACCESS_ERR.
pub fn write_with_imm_bad_rkey<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let p = pair(&rig, QpType::Rc, ALL_REMOTE, &mut log);
    let (local, remote) = local_and_remote(&rig, 1024);
    post_recv(&p.b, 7, &[sge(&local, 512, 64)]);
    post_send(
        &p.a,
        SendWr::rdma_write_with_imm(
            1,
            &[sge(&local, 0, 8)],
            remote.addr(),
            remote.rkey() ^ 0x00ff_ff00,
            9,
        )
        .signaled(),
    );
    p.collect(&mut log, 1, 1);
    p.states(&mut log);
    log.check(&[
        "cq_a: wr 1 RemAccessErr Send len 0 imm - flags - qp a src 0",
        "cq_b: wr 7 RemAccessErr Send len 0 imm - flags - qp b src 0",
        "state a: ERR",
        "state b: ERR",
    ]);
}

/// A receive whose MR lacks LOCAL_WRITE: the device cannot write into it, so the
/// receive fails with LOC_QP_OP_ERR (rxe; LOC_PROT_ERR per the man pages) and the
/// send with REM_OP_ERR.
pub fn receive_into_mr_without_local_write<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let p = pair(&rig, QpType::Rc, AccessFlags::empty(), &mut log);
    let src = rig.mr(64, AccessFlags::empty());
    let ro = rig
        .ctx
        .alloc_mr(&rig.pd, 64, AccessFlags::empty())
        .expect("read-only MR");
    post_recv(&p.b, 7, &[sge(&ro, 0, 64)]);
    post_send(&p.a, SendWr::send(1, &[sge(&src, 0, 8)]).signaled());
    p.collect(&mut log, 1, 1);
    p.states(&mut log);
    log.check(&[
        "cq_a: wr 1 RemOpErr Send len 0 imm - flags - qp a src 0",
        "cq_b: wr 7 LocQpOpErr Send len 0 imm - flags - qp b src 0",
        "state a: ERR",
        "state b: ERR",
    ]);
}

/// An RDMA READ into a bad local lkey: rxe finds it when the response arrives and
/// completes with LOC_PROT_ERR; the responder is untouched.
pub fn read_into_bad_local_lkey<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let p = pair(&rig, QpType::Rc, ALL_REMOTE, &mut log);
    let (local, remote) = local_and_remote(&rig, 64);
    let bad = bad_lkey(&local, 8);
    post_send(
        &p.a,
        SendWr::rdma_read(1, &[bad], remote.addr(), remote.rkey()).signaled(),
    );
    log.collect("cq_a", &p.cq_a.cq, 1);
    p.states(&mut log);
    log.check(&[
        "cq_a: wr 1 LocProtErr Send len 0 imm - flags - qp a src 0",
        "state a: ERR",
        "state b: RTS",
    ]);
}

/// An atomic whose result buffer has a bad lkey: the remote word is updated (the
/// responder executes it) and the requester completes with LOC_PROT_ERR.
pub fn atomic_into_bad_local_lkey<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let p = pair(&rig, QpType::Rc, ALL_REMOTE, &mut log);
    let (local, remote) = local_and_remote(&rig, 64);
    let bad = bad_lkey(&local, 8);
    post_send(
        &p.a,
        SendWr::fetch_add(1, &[bad], remote.addr(), remote.rkey(), 5).signaled(),
    );
    log.collect("cq_a", &p.cq_a.cq, 1);
    log.line(format!("remote {}", read_u64(&remote, 0)));
    log.state("a", &p.a);
    log.check(&[
        "cq_a: wr 1 LocProtErr Send len 0 imm - flags - qp a src 0",
        "remote 5",
        "state a: ERR",
    ]);
}

/// Atomic posts the provider refuses (rdma-core's rxe `validate_send_wr`): fewer than 8
/// bytes, or a remote address not 8-byte aligned. 16 bytes are accepted: 8 of them are
/// used, and the completion reports 16.
pub fn atomic_length_and_alignment<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let p = pair(&rig, QpType::Rc, ALL_REMOTE, &mut log);
    let (local, remote) = local_and_remote(&rig, 64);
    let four = [sge(&local, 0, 4)];
    let eight = [sge(&local, 0, 8)];
    let sixteen = [sge(&local, 16, 16)];
    log.result(
        "4 bytes",
        &try_send(
            &p.a,
            &[SendWr::fetch_add(1, &four, remote.addr(), remote.rkey(), 1).signaled()],
        ),
    );
    log.result(
        "misaligned",
        &try_send(
            &p.a,
            &[SendWr::fetch_add(2, &eight, remote.addr() + 4, remote.rkey(), 1).signaled()],
        ),
    );
    log.result(
        "16 bytes",
        &try_send(
            &p.a,
            &[SendWr::fetch_add(3, &sixteen, remote.addr() + 8, remote.rkey(), 1).signaled()],
        ),
    );
    log.collect("cq_a", &p.cq_a.cq, 1);
    log.line(format!(
        "remote {} local {}",
        read_u64(&remote, 8),
        read_u64(&local, 16)
    ));
    log.check(&[
        "4 bytes: InvalidArgument bad_wr=0",
        "misaligned: InvalidArgument bad_wr=0",
        "16 bytes: ok",
        "cq_a: wr 3 Success FetchAdd len 16 imm - flags - qp a src 0",
        "remote 1 local 0",
    ]);
}

/// An RC QP connected to a QP number that does not exist: no response ever comes, and
/// after retry_cnt retransmissions the send fails with RETRY_EXC_ERR.
pub fn retry_exceeded_to_missing_qp<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let (c, a) = rc_to_missing_qp(&rig, 1, &mut log);
    let mr = rig.mr(64, AccessFlags::empty());
    post_send(&a, SendWr::send(1, &[sge(&mr, 0, 8)]).signaled());
    post_send(&a, SendWr::send(2, &[sge(&mr, 0, 8)]).signaled());
    log.collect("cq", &c.cq, 2);
    log.state("a", &a);
    log.check(&[
        "cq: wr 1 RetryExcErr Send len 0 imm - flags - qp a src 0",
        "cq: wr 2 WrFlushErr Send len 0 imm - flags - qp a src 0",
        "state a: ERR",
    ]);
}

/// A QP in ERR: a posted receive is not flushed (rxe completes it only when the QP is
/// next flushed), a posted send is flushed.
pub fn posting_to_a_qp_in_err<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let p = pair(&rig, QpType::Rc, AccessFlags::empty(), &mut log);
    p.a.modify_with(&QpModify::to(QpState::Err))
        .expect("to ERR");
    let mr = rig.mr(64, AccessFlags::empty());
    log.result("recv", &try_recv(&p.a, 1, &[sge(&mr, 0, 8)]));
    log.collect("cq_a", &p.cq_a.cq, 0);
    log.result(
        "send",
        &try_send(&p.a, &[SendWr::send(2, &[sge(&mr, 0, 8)]).signaled()]),
    );
    log.collect("cq_a", &p.cq_a.cq, 1);
    log.check(&[
        "recv: ok",
        "send: ok",
        "cq_a: wr 2 WrFlushErr Send len 0 imm - flags - qp a src 0",
    ]);
}

/// Unsignaled sends flushed by an error complete too (every flushed WR is reported),
/// and the error lands on the request that failed, not a neighbour. The responder that
/// refused the write enters ERR too and flushes its receive.
pub fn error_lands_on_the_failing_request<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let p = pair(&rig, QpType::Rc, ALL_REMOTE, &mut log);
    let (local, remote) = local_and_remote(&rig, 256);
    for i in 0..2 {
        post_recv(&p.b, 10 + i, &[sge(&local, 128, 64)]);
    }
    post_send(&p.a, SendWr::send(1, &[sge(&local, 0, 4)]).signaled());
    post_send(
        &p.a,
        SendWr::rdma_write(2, &[sge(&local, 0, 4)], remote.addr(), remote.rkey()).signaled(),
    );
    post_send(
        &p.a,
        SendWr::rdma_write(3, &[sge(&local, 0, 4)], remote.addr() + 300, remote.rkey()).signaled(),
    );
    post_send(&p.a, SendWr::send(4, &[sge(&local, 0, 4)]));
    post_send(&p.a, SendWr::send(5, &[sge(&local, 0, 4)]).signaled());
    p.collect(&mut log, 5, 1);
    log.check(&[
        "cq_a: wr 1 Success Send len 4 imm - flags - qp a src 0",
        "cq_a: wr 2 Success RdmaWrite len 4 imm - flags - qp a src 0",
        "cq_a: wr 3 RemAccessErr Send len 0 imm - flags - qp a src 0",
        "cq_a: wr 4 WrFlushErr Send len 0 imm - flags - qp a src 0",
        "cq_a: wr 5 WrFlushErr Send len 0 imm - flags - qp a src 0",
        "cq_b: wr 10 Success Recv len 4 imm - flags GRH qp b src 0",
        "cq_b: wr 11 WrFlushErr Send len 0 imm - flags - qp b src 0",
    ]);
}

/// An RDMA READ past the end of the remote region: REM_ACCESS_ERR, both QPs to ERR.
pub fn read_past_the_remote_region<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let p = pair(&rig, QpType::Rc, ALL_REMOTE, &mut log);
    let (local, remote) = local_and_remote(&rig, 256);
    post_send(
        &p.a,
        SendWr::rdma_read(1, &[sge(&local, 0, 16)], remote.addr() + 250, remote.rkey()).signaled(),
    );
    log.collect("cq_a", &p.cq_a.cq, 1);
    p.states(&mut log);
    log.check(&[
        "cq_a: wr 1 RemAccessErr Send len 0 imm - flags - qp a src 0",
        "state a: ERR",
        "state b: ERR",
    ]);
}

/// rnr_retry 7 retries for ever: a SEND that finds no receive completes once one is
/// posted, a while later.
pub fn rnr_retry_infinite_waits_for_a_receive<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let p = pair_with(&rig, QpType::Rc, AccessFlags::empty(), &mut log, |_, p| {
        p.rnr_retry = 7;
        p.min_rnr_timer = 1;
    });
    let mr = rig.mr(256, AccessFlags::empty());
    post_send(&p.a, SendWr::send(1, &[sge(&mr, 0, 8)]).signaled());
    log.collect("cq_a", &p.cq_a.cq, 0);
    post_recv(&p.b, 7, &[sge(&mr, 128, 64)]);
    p.collect(&mut log, 1, 1);
    log.check(&[
        "cq_a: wr 1 Success Send len 8 imm - flags - qp a src 0",
        "cq_b: wr 7 Success Recv len 8 imm - flags GRH qp b src 0",
    ]);
}

/// retry_cnt 7 retries for ever on rxe (the man page gives 7 no special meaning; only
/// rnr_retry 7 is infinite there): to a QP number that does not exist, nothing completes
/// and the QP stays in RTS, where retry_cnt 1 fails within the same time (see
/// `retry_exceeded_to_missing_qp`).
pub fn retry_cnt_seven_is_infinite<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let (c, a) = rc_to_missing_qp(&rig, 7, &mut log);
    let mr = rig.mr(64, AccessFlags::empty());
    post_send(&a, SendWr::send(1, &[sge(&mr, 0, 8)]).signaled());
    log.collect("cq", &c.cq, 0);
    log.state("a", &a);
    log.check(&["state a: RTS"]);
}

/// An RC QP `a` (logged as such) in RTS on a CQ of its own, connected to a QP number
/// nobody has, retrying `retry_cnt` times after the shortest ACK timeout.
fn rc_to_missing_qp<C: Context>(
    rig: &Rig<C>,
    retry_cnt: u8,
    log: &mut Log,
) -> (crate::conformance::rig::CqPair<C>, C::Qp) {
    let c = rig.cq(16);
    let a = rig.qp(QpType::Rc, &c.cq, 0);
    log.qp("a", &a);
    let mut pa = rig.connect_params(0xff_fff0, AccessFlags::empty());
    pa.retry_cnt = retry_cnt;
    pa.timeout = 1;
    verbs_api::helpers::bring_up(&a, QpState::Rts, &pa).expect("bring up");
    (c, a)
}
