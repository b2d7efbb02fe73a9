//! UD: sends, receives, GRH, Q_Keys, errors.

use super::*;

/// UD: the receiver gets the 40-byte GRH first, then the payload; the source QP is set.
pub fn ud_send_recv_with_grh<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let c = rig.cq(16);
    let a = rig.ud_qp(&c.cq, QKEY);
    let b = rig.ud_qp(&c.cq, QKEY);
    let ah = rig
        .ctx
        .create_ah(&rig.pd, &rig.self_av())
        .expect("create_ah");
    let mr = rig.mr(4096, AccessFlags::empty());
    let payload: Vec<u8> = (0..100u8).collect();
    fill(&mr, 0, &payload);
    post_recv(&b, 1, &[sge(&mr, 1024, (GRH_LEN + 512) as u32)]);
    post_send(
        &a,
        SendWr::ud_send(2, &[sge(&mr, 0, 100)], &ah, b.qp_num(), QKEY).signaled(),
    );
    let wcs = poll_n(&c.cq, 2);
    let recv = wcs.iter().find(|w| w.is_recv()).unwrap();
    expect_wc(recv, 1, WcStatus::Success, Some(WcOpcode::Recv));
    assert_eq!(recv.byte_len as usize, GRH_LEN + 100);
    assert!(recv.wc_flags.contains(WcFlags::GRH));
    assert_eq!(recv.src_qp, a.qp_num());
    assert_eq!(read(&mr, 1024 + GRH_LEN, 100), payload);
    let grh = read(&mr, 1024, GRH_LEN);
    assert_eq!(
        grh[20] >> 4,
        4,
        "RoCEv2 over IPv4: the GRH's last 20 bytes are the IPv4 header"
    );
    let send = wcs.iter().find(|w| !w.is_recv()).unwrap();
    expect_wc(send, 2, WcStatus::Success, Some(WcOpcode::Send));
    // A wrong Q_Key is dropped silently at the receiver.
    post_recv(&b, 3, &[sge(&mr, 1024, (GRH_LEN + 512) as u32)]);
    post_send(
        &a,
        SendWr::ud_send(4, &[sge(&mr, 0, 100)], &ah, b.qp_num(), QKEY + 1).signaled(),
    );
    let wcs = poll_n(&c.cq, 1);
    expect_wc(&wcs[0], 4, WcStatus::Success, Some(WcOpcode::Send));
    assert!(
        poll_quiet(&c.cq).is_empty(),
        "a wrong Q_Key must not be delivered"
    );
}

/// rxe: a UD send larger than the path MTU completes successfully and sends nothing.
pub fn ud_send_above_mtu_completes_and_sends_nothing<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let c = rig.cq(16);
    let a = rig.ud_qp(&c.cq, QKEY);
    let b = rig.ud_qp(&c.cq, QKEY);
    let ah = rig.ctx.create_ah(&rig.pd, &rig.self_av()).unwrap();
    let mtu = rig.ctx.query_port(rig.port).unwrap().active_mtu.bytes() as usize;
    let mr = rig.mr(3 * mtu + 4096, AccessFlags::empty());
    post_recv(&b, 1, &[sge(&mr, 2 * mtu, (GRH_LEN + mtu + 512) as u32)]);
    post_send(
        &a,
        SendWr::ud_send(2, &[sge(&mr, 0, (mtu + 100) as u32)], &ah, b.qp_num(), QKEY).signaled(),
    );
    let wcs = poll_n(&c.cq, 1);
    expect_wc(&wcs[0], 2, WcStatus::Success, Some(WcOpcode::Send));
    assert!(poll_quiet(&c.cq).is_empty(), "nothing is delivered");
}

/// A UD message larger than the posted receive buffer. rxe (Linux 6.1) completes that
/// receive with LOC_QP_OP_ERR, moves the UD QP to ERR and flushes its other receives (not
/// the silent drop SOFT-ROCE.md describes); the man pages and mlx5 say LOC_LEN_ERR. The
/// sender completes successfully either way.
pub fn ud_message_above_receive_buffer_fails_the_receive<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let c = rig.cq(16);
    let a = rig.ud_qp(&c.cq, QKEY);
    let b = rig.ud_qp(&c.cq, QKEY);
    let ah = rig.ctx.create_ah(&rig.pd, &rig.self_av()).unwrap();
    let mr = rig.mr(4096, AccessFlags::empty());
    post_recv(&b, 1, &[sge(&mr, 1024, (GRH_LEN + 50) as u32)]);
    post_recv(&b, 5, &[sge(&mr, 2048, (GRH_LEN + 500) as u32)]);
    post_send(
        &a,
        SendWr::ud_send(2, &[sge(&mr, 0, 100)], &ah, b.qp_num(), QKEY).signaled(),
    );
    let wcs = poll_n(&c.cq, 3);
    let send = wcs
        .iter()
        .find(|w| w.qp_num == a.qp_num())
        .expect("the send completes");
    expect_wc(send, 2, WcStatus::Success, Some(WcOpcode::Send));
    let recvs: Vec<_> = wcs.iter().filter(|w| w.qp_num == b.qp_num()).collect();
    if env.is_rxe() {
        expect_wc(recvs[0], 1, WcStatus::LocQpOpErr, None);
    } else {
        expect_wc(recvs[0], 1, WcStatus::LocLenErr, None);
    }
    expect_wc(recvs[1], 5, WcStatus::WrFlushErr, None);
    assert_eq!(b.state().unwrap(), QpState::Err);
}

/// UD completion fields: the send reports its length; the receive reports GRH + payload,
/// the GRH flag and the sender's QP number.
pub fn ud_completion_fields<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let ca = rig.cq(16);
    let cb = rig.cq(16);
    let a = ud(&rig, &ca.cq, "a", &mut log);
    let b = ud(&rig, &cb.cq, "b", &mut log);
    let ah = rig.ctx.create_ah(&rig.pd, &rig.self_av()).expect("ah");
    let mr = rig.mr(4096, AccessFlags::empty());
    post_recv(&b, 5, &[sge(&mr, 1024, 1024)]);
    post_send(
        &a,
        SendWr::ud_send(1, &[sge(&mr, 0, 77)], &ah, b.qp_num(), QKEY).signaled(),
    );
    post_recv(&b, 6, &[sge(&mr, 2048, 1024)]);
    let three = [sge(&mr, 0, 3)];
    let mut with_imm = SendWr::ud_send(2, &three, &ah, b.qp_num(), QKEY).signaled();
    with_imm.opcode = verbs_api::SendOpcode::SendWithImm;
    with_imm.imm_data = 0x0102_0304;
    post_send(&a, with_imm);
    log.collect("cq_a", &ca.cq, 2);
    log.collect("cq_b", &cb.cq, 2);
    log.events(&rig.ctx, &ca.cq);
    log.check(&[
        "cq_a: wr 1 Success Send len 77 imm - flags - qp a src 0",
        "cq_a: wr 2 Success Send len 3 imm 0x0 flags IMM qp a src 0",
        "cq_b: wr 5 Success Recv len 117 imm - flags GRH qp b src a",
        "cq_b: wr 6 Success Recv len 43 imm 0x1020304 flags GRH|IMM qp b src a",
    ]);
}

/// A UD send with a bad lkey fails with LOC_QP_OP_ERR, moves the sending QP to ERR and
/// flushes its receive queue too (rxe).
pub fn ud_send_error_moves_qp_to_err<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let ca = rig.cq(16);
    let ra = rig.cq(16);
    let a = ud_on(&rig, &ca.cq, &ra.cq, "a", &mut log);
    let ah = rig.ctx.create_ah(&rig.pd, &rig.self_av()).expect("ah");
    let mr = rig.mr(4096, AccessFlags::empty());
    post_recv(&a, 5, &[sge(&mr, 1024, 1024)]);
    let bad = Sge {
        addr: mr.addr(),
        length: 8,
        lkey: mr.lkey() ^ 0x00ff_ff00,
    };
    post_send(
        &a,
        SendWr::ud_send(1, &[bad], &ah, 0xff_fff0, QKEY).signaled(),
    );
    post_send(
        &a,
        SendWr::ud_send(2, &[sge(&mr, 0, 8)], &ah, 0xff_fff0, QKEY).signaled(),
    );
    log.collect("cq_a", &ca.cq, 2);
    log.collect("rq_a", &ra.cq, 1);
    log.state("a", &a);
    log.check(&[
        "cq_a: wr 1 LocQpOpErr Send len 0 imm - flags - qp a src 0",
        "cq_a: wr 2 WrFlushErr Send len 0 imm - flags - qp a src 0",
        "rq_a: wr 5 WrFlushErr Send len 0 imm - flags - qp a src 0",
        "state a: ERR",
    ]);
}

/// A UD send of no bytes delivers just the GRH.
pub fn ud_zero_length_send<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let ca = rig.cq(16);
    let cb = rig.cq(16);
    let a = ud(&rig, &ca.cq, "a", &mut log);
    let b = ud(&rig, &cb.cq, "b", &mut log);
    let ah = rig.ctx.create_ah(&rig.pd, &rig.self_av()).expect("ah");
    let mr = rig.mr(4096, AccessFlags::empty());
    post_recv(&b, 5, &[sge(&mr, 1024, 1024)]);
    post_send(
        &a,
        SendWr::ud_send(1, &[], &ah, b.qp_num(), QKEY).signaled(),
    );
    log.collect("cq_a", &ca.cq, 1);
    log.collect("cq_b", &cb.cq, 1);
    log.check(&[
        "cq_a: wr 1 Success Send len 0 imm - flags - qp a src 0",
        "cq_b: wr 5 Success Recv len 40 imm - flags GRH qp b src a",
    ]);
}

/// An INLINE UD send: the data is copied at post time.
pub fn ud_inline_send<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let ca = rig.cq(16);
    let cb = rig.cq(16);
    let cap = QpCap {
        max_send_wr: 8,
        max_recv_wr: 8,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 64,
    };
    let a = rig.qp_with(QpType::Ud, &ca.cq, &ca.cq, cap);
    verbs_api::helpers::bring_up(
        &a,
        QpState::Rts,
        &verbs_api::helpers::ConnectParams {
            port: rig.port,
            qkey: QKEY,
            ..Default::default()
        },
    )
    .expect("bring up");
    log.qp("a", &a);
    let b = ud(&rig, &cb.cq, "b", &mut log);
    let ah = rig.ctx.create_ah(&rig.pd, &rig.self_av()).expect("ah");
    let mr = rig.mr(4096, AccessFlags::empty());
    post_recv(&b, 5, &[sge(&mr, 1024, 1024)]);
    let mut buf = *b"inline ud";
    let s = [Sge {
        addr: buf.as_ptr() as u64,
        length: 9,
        lkey: 0,
    }];
    post_send(
        &a,
        SendWr::ud_send(1, &s, &ah, b.qp_num(), QKEY)
            .flags(SendFlags::INLINE | SendFlags::SIGNALED),
    );
    buf.fill(0);
    log.collect("cq_a", &ca.cq, 1);
    log.collect("cq_b", &cb.cq, 1);
    log.line(String::from_utf8_lossy(&read(&mr, 1024 + GRH_LEN, 9)).into_owned());
    log.check(&[
        "cq_a: wr 1 Success Send len 9 imm - flags - qp a src 0",
        "cq_b: wr 5 Success Recv len 49 imm - flags GRH qp b src a",
        "inline ud",
    ]);
}

/// A UD send to a QP number nobody has completes successfully; nothing arrives.
pub fn ud_send_to_missing_qp<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let ca = rig.cq(16);
    let cb = rig.cq(16);
    let a = ud(&rig, &ca.cq, "a", &mut log);
    let b = ud(&rig, &cb.cq, "b", &mut log);
    let ah = rig.ctx.create_ah(&rig.pd, &rig.self_av()).expect("ah");
    let mr = rig.mr(4096, AccessFlags::empty());
    post_recv(&b, 5, &[sge(&mr, 1024, 1024)]);
    post_send(
        &a,
        SendWr::ud_send(1, &[sge(&mr, 0, 8)], &ah, 0xff_fff0, QKEY).signaled(),
    );
    log.collect("cq_a", &ca.cq, 1);
    log.collect("cq_b", &cb.cq, 0);
    log.state("b", &b);
    log.check(&[
        "cq_a: wr 1 Success Send len 8 imm - flags - qp a src 0",
        "state b: RTS",
    ]);
}

/// A UD message with no receive posted is dropped: the send completes, and a receive
/// posted afterwards waits for the next message.
pub fn ud_without_receive_is_dropped<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let ca = rig.cq(16);
    let cb = rig.cq(16);
    let a = ud(&rig, &ca.cq, "a", &mut log);
    let b = ud(&rig, &cb.cq, "b", &mut log);
    let ah = rig.ctx.create_ah(&rig.pd, &rig.self_av()).expect("ah");
    let mr = rig.mr(4096, AccessFlags::empty());
    post_send(
        &a,
        SendWr::ud_send(1, &[sge(&mr, 0, 8)], &ah, b.qp_num(), QKEY).signaled(),
    );
    log.collect("cq_a", &ca.cq, 1);
    post_recv(&b, 5, &[sge(&mr, 1024, 1024)]);
    log.collect("cq_b", &cb.cq, 0);
    post_send(
        &a,
        SendWr::ud_send(2, &[sge(&mr, 0, 9)], &ah, b.qp_num(), QKEY).signaled(),
    );
    log.collect("cq_a", &ca.cq, 1);
    log.collect("cq_b", &cb.cq, 1);
    log.check(&[
        "cq_a: wr 1 Success Send len 8 imm - flags - qp a src 0",
        "cq_a: wr 2 Success Send len 9 imm - flags - qp a src 0",
        "cq_b: wr 5 Success Recv len 49 imm - flags GRH qp b src a",
    ]);
}
