//! UD: sends, receives, GRH, Q_Keys, errors.

use super::prelude::*;

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
    post_send(&a, ud_send(2, &[sge(&mr, 0, 100)], &ah, b.qp_num()));
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
    if env.is_rxe() {
        // rxe hands a packet to its own address to itself (`rxe_loopback`) without the IP
        // layer that fills the header checksum in: it is left 0 (Debian's kernel zeroes
        // the buffer). Over the wire it is right (the split case ud_send_with_grh).
        assert_eq!(grh[30..32], [0, 0], "rxe's loopback IPv4 checksum");
    }
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
        ud_send(2, &[sge(&mr, 0, (mtu + 100) as u32)], &ah, b.qp_num()),
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
    post_send(&a, ud_send(2, &[sge(&mr, 0, 100)], &ah, b.qp_num()));
    let wcs = poll_n(&c.cq, 3);
    let send = wcs
        .iter()
        .find(|w| w.qp_num == a.qp_num())
        .expect("the send completes");
    expect_wc(send, 2, WcStatus::Success, Some(WcOpcode::Send));
    let recvs: Vec<_> = wcs.iter().filter(|w| w.qp_num == b.qp_num()).collect();
    if env.is_rxe() {
        // Opcode 0 (SEND): rxe sets a receive's opcode on success only (row 10; the
        // split case ud_larger_than_receive found the emulated rxe saying RECV).
        expect_wc(recvs[0], 1, WcStatus::LocQpOpErr, Some(WcOpcode::Send));
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
    let u = ud_pair(&rig, &mut log);
    post_recv(&u.b, 5, &[sge(&u.mr, 1024, 1024)]);
    post_send(&u.a, ud_send(1, &[sge(&u.mr, 0, 77)], &u.ah, u.b.qp_num()));
    post_recv(&u.b, 6, &[sge(&u.mr, 2048, 1024)]);
    let three = [sge(&u.mr, 0, 3)];
    let mut with_imm = ud_send(2, &three, &u.ah, u.b.qp_num());
    with_imm.opcode = verbs_api::SendOpcode::SendWithImm;
    with_imm.imm_data = 0x0102_0304;
    post_send(&u.a, with_imm);
    u.collect(&mut log, 2, 2);
    log.events(&rig.ctx, &u.cq_a.cq);
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
    let ah = self_ah(&rig);
    let mr = rig.mr(4096, AccessFlags::empty());
    post_recv(&a, 5, &[sge(&mr, 1024, 1024)]);
    let bad = bad_lkey(&mr, 8);
    post_send(&a, ud_send(1, &[bad], &ah, 0xff_fff0));
    post_send(&a, ud_send(2, &[sge(&mr, 0, 8)], &ah, 0xff_fff0));
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
    let u = ud_pair(&rig, &mut log);
    post_recv(&u.b, 5, &[sge(&u.mr, 1024, 1024)]);
    post_send(&u.a, ud_send(1, &[], &u.ah, u.b.qp_num()));
    u.collect(&mut log, 1, 1);
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
    let cap = cap(8, 8, 1, 1, 64);
    let a = rig.qp_with(QpType::Ud, &ca.cq, &ca.cq, cap);
    bring_up_ud(&rig, &a, QpState::Rts);
    log.qp("a", &a);
    let b = ud(&rig, &cb.cq, "b", &mut log);
    let ah = self_ah(&rig);
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
    let u = ud_pair(&rig, &mut log);
    post_recv(&u.b, 5, &[sge(&u.mr, 1024, 1024)]);
    post_send(&u.a, ud_send(1, &[sge(&u.mr, 0, 8)], &u.ah, 0xff_fff0));
    u.collect(&mut log, 1, 0);
    log.state("b", &u.b);
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
    let u = ud_pair(&rig, &mut log);
    post_send(&u.a, ud_send(1, &[sge(&u.mr, 0, 8)], &u.ah, u.b.qp_num()));
    log.collect("cq_a", &u.cq_a.cq, 1);
    post_recv(&u.b, 5, &[sge(&u.mr, 1024, 1024)]);
    log.collect("cq_b", &u.cq_b.cq, 0);
    post_send(&u.a, ud_send(2, &[sge(&u.mr, 0, 9)], &u.ah, u.b.qp_num()));
    u.collect(&mut log, 1, 1);
    log.check(&[
        "cq_a: wr 1 Success Send len 8 imm - flags - qp a src 0",
        "cq_a: wr 2 Success Send len 9 imm - flags - qp a src 0",
        "cq_b: wr 5 Success Recv len 49 imm - flags GRH qp b src a",
    ]);
}

/// A UD receive with the GRH in its own SGE and the payload scattered over two more; a
/// send gathered from two SGEs. The GRH's last 20 bytes are the IPv4 header (RoCEv2):
/// version 4, protocol UDP, both addresses the port's.
pub fn ud_scatter_gather_and_grh<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let ca = rig.cq(16);
    let cb = rig.cq(16);
    let a = ud(&rig, &ca.cq, "a", &mut log);
    let b = ud_with_sges(&rig, &cb.cq, "b", &mut log);
    let ah = self_ah(&rig);
    let mr = rig.mr(8192, AccessFlags::empty());
    fill(&mr, 0, b"gathered ");
    fill(&mr, 100, b"from two");
    post_recv(
        &b,
        5,
        &[
            sge(&mr, 4096, GRH_LEN as u32),
            sge(&mr, 5000, 4),
            sge(&mr, 6000, 100),
        ],
    );
    post_send(
        &a,
        SendWr::ud_send(
            1,
            &[sge(&mr, 0, 9), sge(&mr, 100, 8)],
            &ah,
            b.qp_num(),
            QKEY,
        )
        .signaled(),
    );
    log.collect("cq_a", &ca.cq, 1);
    log.collect("cq_b", &cb.cq, 1);
    let grh = read(&mr, 4096, GRH_LEN);
    let ip = rig.gid.to_ipv4().expect("IPv4 GID").octets();
    log.line(format!(
        "ipv4: version {} protocol {} src ok {} dst ok {}",
        grh[20] >> 4,
        grh[29],
        grh[32..36] == ip,
        grh[36..40] == ip
    ));
    let payload = [read(&mr, 5000, 4), read(&mr, 6000, 13)].concat();
    log.line(String::from_utf8_lossy(&payload).into_owned());
    log.check(&[
        "cq_a: wr 1 Success Send len 17 imm - flags - qp a src 0",
        "cq_b: wr 5 Success Recv len 57 imm - flags GRH qp b src a",
        "ipv4: version 4 protocol 17 src ok true dst ok true",
        "gathered from two",
    ]);
}

/// A UD message of exactly the path MTU, into a receive of exactly GRH + MTU bytes.
pub fn ud_message_of_exactly_the_mtu<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let ca = rig.cq(16);
    let cb = rig.cq(16);
    let a = ud(&rig, &ca.cq, "a", &mut log);
    let b = ud(&rig, &cb.cq, "b", &mut log);
    let ah = self_ah(&rig);
    let mtu = rig
        .ctx
        .query_port(rig.port)
        .expect("port")
        .active_mtu
        .bytes() as usize;
    let mr = rig.mr(4 * mtu, AccessFlags::empty());
    let data: Vec<u8> = (0..mtu).map(|i| (i % 241) as u8).collect();
    fill(&mr, 0, &data);
    post_recv(&b, 5, &[sge(&mr, 2 * mtu, (GRH_LEN + mtu) as u32)]);
    post_send(&a, ud_send(1, &[sge(&mr, 0, mtu as u32)], &ah, b.qp_num()));
    log.collect("cq_a", &ca.cq, 1);
    log.collect("cq_b", &cb.cq, 1);
    log.line(format!(
        "mtu {mtu} bytes: {}",
        read(&mr, 2 * mtu + GRH_LEN, mtu) == data
    ));
    log.check(&[
        "cq_a: wr 1 Success Send len 1024 imm - flags - qp a src 0",
        "cq_b: wr 5 Success Recv len 1064 imm - flags GRH qp b src a",
        "mtu 1024 bytes: true",
    ]);
}

/// Many UD sends in one post complete in order, and each lands in the next receive.
pub fn ud_batch_in_order<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let ca = rig.cq(64);
    let cb = rig.cq(64);
    let a = ud(&rig, &ca.cq, "a", &mut log);
    let b = ud(&rig, &cb.cq, "b", &mut log);
    let ah = self_ah(&rig);
    let mr = rig.mr(16 * 256, AccessFlags::empty());
    for i in 0..8u8 {
        fill(&mr, usize::from(i), &[i]);
        post_recv(
            &b,
            100 + u64::from(i),
            &[sge(&mr, 2048 + usize::from(i) * 128, 128)],
        );
    }
    let sges: Vec<[Sge; 1]> = (0..8).map(|i| [sge(&mr, i, 1)]).collect();
    let wrs: Vec<_> = sges
        .iter()
        .enumerate()
        .map(|(i, s)| ud_send(i as u64, s, &ah, b.qp_num()))
        .collect();
    log.result("post 8", &try_send(&a, &wrs));
    let sent = poll_n(&ca.cq, 8);
    log.line(format!(
        "sends in order: {}",
        sent.iter()
            .enumerate()
            .all(|(i, w)| w.wr_id == i as u64 && w.is_success())
    ));
    let got = poll_n(&cb.cq, 8);
    log.line(format!(
        "receives in order: {}",
        got.iter()
            .enumerate()
            .all(|(i, w)| w.wr_id == 100 + i as u64 && w.byte_len == 41)
    ));
    let bytes: Vec<u8> = (0..8)
        .map(|i| read(&mr, 2048 + i * 128 + GRH_LEN, 1)[0])
        .collect();
    log.line(format!("{bytes:?}"));
    log.check(&[
        "post 8: ok",
        "sends in order: true",
        "receives in order: true",
        "[0, 1, 2, 3, 4, 5, 6, 7]",
    ]);
}

/// A UD QP receives from RTR on (sending needs RTS); in INIT it drops what arrives.
pub fn ud_receives_in_rtr_not_in_init<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let ca = rig.cq(16);
    let cb = rig.cq(16);
    let a = ud(&rig, &ca.cq, "a", &mut log);
    let b = rig.qp(QpType::Ud, &cb.cq, 0);
    log.qp("b", &b);
    bring_up_ud(&rig, &b, QpState::Init);
    let ah = self_ah(&rig);
    let mr = rig.mr(4096, AccessFlags::empty());
    post_recv(&b, 5, &[sge(&mr, 1024, 256)]);
    post_send(&a, ud_send(1, &[sge(&mr, 0, 4)], &ah, b.qp_num()));
    log.collect("cq_a", &ca.cq, 1);
    log.collect("cq_b", &cb.cq, 0);
    b.modify_with(&QpModify::to(QpState::Rtr)).expect("RTR");
    post_send(&a, ud_send(2, &[sge(&mr, 0, 6)], &ah, b.qp_num()));
    log.collect("cq_a", &ca.cq, 1);
    log.collect("cq_b", &cb.cq, 1);
    log.result(
        "send from RTR",
        &try_send(
            &b,
            &[SendWr::ud_send(3, &[sge(&mr, 0, 4)], &ah, a.qp_num(), QKEY)],
        ),
    );
    log.check(&[
        "cq_a: wr 1 Success Send len 4 imm - flags - qp a src 0",
        "cq_a: wr 2 Success Send len 6 imm - flags - qp a src 0",
        "cq_b: wr 5 Success Recv len 46 imm - flags GRH qp b src a",
        "send from RTR: InvalidState bad_wr=0",
    ]);
}

/// A solicited UD send wakes a CQ armed solicited-only; an unsolicited one does not.
pub fn ud_solicited_event<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let u = ud_pair(&rig, &mut log);
    let cb = &u.cq_b;
    post_recv(&u.b, 5, &[sge(&u.mr, 1024, 256)]);
    post_recv(&u.b, 6, &[sge(&u.mr, 2048, 256)]);
    cb.cq.req_notify(true).expect("arm");
    post_send(
        &u.a,
        SendWr::ud_send(1, &[sge(&u.mr, 0, 4)], &u.ah, u.b.qp_num(), QKEY),
    );
    let ev = cb.channel.get_cq_event(Some(Duration::from_millis(300)));
    log.line(format!(
        "event after unsolicited: {}",
        matches!(ev, Ok(Some(_)))
    ));
    post_send(
        &u.a,
        SendWr::ud_send(2, &[sge(&u.mr, 0, 4)], &u.ah, u.b.qp_num(), QKEY)
            .flags(SendFlags::SOLICITED),
    );
    let ev = cb.channel.get_cq_event(Some(Duration::from_secs(5)));
    log.line(format!(
        "event after solicited: {}",
        matches!(ev, Ok(Some(h)) if h == cb.cq.handle())
    ));
    cb.cq.ack_events(1);
    log.collect("cq_b", &cb.cq, 2);
    log.check(&[
        "event after unsolicited: false",
        "event after solicited: true",
        "cq_b: wr 5 Success Recv len 44 imm - flags GRH qp b src a",
        "cq_b: wr 6 Success Recv len 44 imm - flags GRH qp b src a",
    ]);
}

/// A receive with more SGEs than the QP takes is refused by the provider.
pub fn ud_recv_too_many_sges<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let c = rig.cq(16);
    let b = ud(&rig, &c.cq, "b", &mut log);
    let (_, cap) = b.query(QpAttrMask::CAP).expect("query_qp");
    let mr = rig.mr(4096, AccessFlags::empty());
    let many: Vec<Sge> = (0..=cap.max_recv_sge)
        .map(|i| sge(&mr, i as usize * 64, 64))
        .collect();
    log.line(format!("max_recv_sge {}", cap.max_recv_sge));
    log.result("post", &try_recv(&b, 1, &many));
    log.check(&["max_recv_sge 2", "post: InvalidArgument bad_wr=0"]);
}

/// Two senders to one receiver: src_qp tells them apart; one receive CQ serving two QPs
/// names each completion's QP.
pub fn ud_two_senders_two_receivers_one_cq<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let cs = rig.cq(16);
    let cr = rig.cq(16);
    let s1 = ud(&rig, &cs.cq, "s1", &mut log);
    let s2 = ud(&rig, &cs.cq, "s2", &mut log);
    let r1 = ud(&rig, &cr.cq, "r1", &mut log);
    let r2 = ud(&rig, &cr.cq, "r2", &mut log);
    let ah = self_ah(&rig);
    let mr = rig.mr(4096, AccessFlags::empty());
    post_recv(&r1, 5, &[sge(&mr, 1024, 256)]);
    post_recv(&r2, 6, &[sge(&mr, 2048, 256)]);
    post_recv(&r1, 7, &[sge(&mr, 3072, 256)]);
    post_send(&s1, ud_send(1, &[sge(&mr, 0, 1)], &ah, r1.qp_num()));
    log.collect("cs", &cs.cq, 1);
    log.collect("cr", &cr.cq, 1);
    post_send(&s2, ud_send(2, &[sge(&mr, 0, 2)], &ah, r1.qp_num()));
    log.collect("cs", &cs.cq, 1);
    log.collect("cr", &cr.cq, 1);
    post_send(&s2, ud_send(3, &[sge(&mr, 0, 3)], &ah, r2.qp_num()));
    log.collect("cs", &cs.cq, 1);
    log.collect("cr", &cr.cq, 1);
    log.check(&[
        "cs: wr 1 Success Send len 1 imm - flags - qp s1 src 0",
        "cr: wr 5 Success Recv len 41 imm - flags GRH qp r1 src s1",
        "cs: wr 2 Success Send len 2 imm - flags - qp s2 src 0",
        "cr: wr 7 Success Recv len 42 imm - flags GRH qp r1 src s2",
        "cs: wr 3 Success Send len 3 imm - flags - qp s2 src 0",
        "cr: wr 6 Success Recv len 43 imm - flags GRH qp r2 src s2",
    ]);
}

/// A UD QP in RESET or INIT may join a multicast group; in RTR it receives the group's
/// messages.
pub fn ud_multicast_attach_before_rts<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let cs = rig.cq(16);
    let cr = rig.cq(16);
    let s = ud(&rig, &cs.cq, "s", &mut log);
    let r = rig.qp(QpType::Ud, &cr.cq, 0);
    log.qp("r", &r);
    let group = Gid::from_ipv4(Ipv4Addr::new(239, 77, 2, 1));
    log.result("attach in RESET", &r.attach_mcast(&group, 0));
    bring_up_ud(&rig, &r, QpState::Rtr);
    let ah = group_ah(&rig, group);
    let mr = rig.mr(4096, AccessFlags::empty());
    post_recv(&r, 5, &[sge(&mr, 1024, 256)]);
    post_send(&s, ud_send(1, &[sge(&mr, 0, 8)], &ah, MULTICAST_QPN));
    log.collect("cs", &cs.cq, 1);
    log.collect("cr", &cr.cq, 1);
    log.result("detach", &r.detach_mcast(&group, 0));
    log.check(&[
        "attach in RESET: ok",
        "cs: wr 1 Success Send len 8 imm - flags - qp s src 0",
        "cr: wr 5 Success Recv len 48 imm - flags GRH qp r src s",
        "detach: ok",
    ]);
}

/// A send whose remote Q_Key has the high bit set: IBA says the sending QP's own Q_Key
/// goes out instead (controlled Q_Keys), but rxe (Linux 6.1) sends the key as given, so
/// the receiver drops the message.
pub fn ud_controlled_qkey_is_sent_as_given<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let u = ud_pair(&rig, &mut log);
    post_recv(&u.b, 5, &[sge(&u.mr, 1024, 256)]);
    post_send(
        &u.a,
        SendWr::ud_send(1, &[sge(&u.mr, 0, 4)], &u.ah, u.b.qp_num(), 0x8000_0001).signaled(),
    );
    u.collect(&mut log, 1, 0);
    log.check(&["cq_a: wr 1 Success Send len 4 imm - flags - qp a src 0"]);
}

/// The GRH may straddle SGEs: a receive of 16 + 100 bytes takes the GRH's first 16 bytes
/// in the first SGE, its last 24 and then the payload in the second.
pub fn ud_grh_across_sges<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let ca = rig.cq(16);
    let cb = rig.cq(16);
    let a = ud(&rig, &ca.cq, "a", &mut log);
    let b = ud_with_sges(&rig, &cb.cq, "b", &mut log);
    let ah = self_ah(&rig);
    let mr = rig.mr(4096, AccessFlags::empty());
    fill(&mr, 0, b"straddled");
    post_recv(&b, 5, &[sge(&mr, 1024, 16), sge(&mr, 2048, 100)]);
    post_send(&a, ud_send(1, &[sge(&mr, 0, 9)], &ah, b.qp_num()));
    log.collect("cq_a", &ca.cq, 1);
    log.collect("cq_b", &cb.cq, 1);
    log.line(String::from_utf8_lossy(&read(&mr, 2048 + 24, 9)).into_owned());
    log.check(&[
        "cq_a: wr 1 Success Send len 9 imm - flags - qp a src 0",
        "cq_b: wr 5 Success Recv len 49 imm - flags GRH qp b src a",
        "straddled",
    ]);
}

/// Unsignaled UD sends complete silently; only the signaled one is reported.
pub fn ud_unsignaled_sends<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let u = ud_pair(&rig, &mut log);
    for i in 0..3 {
        post_recv(&u.b, 10 + i, &[sge(&u.mr, 1024 + 256 * i as usize, 256)]);
    }
    post_send(
        &u.a,
        SendWr::ud_send(1, &[sge(&u.mr, 0, 1)], &u.ah, u.b.qp_num(), QKEY),
    );
    post_send(
        &u.a,
        SendWr::ud_send(2, &[sge(&u.mr, 0, 2)], &u.ah, u.b.qp_num(), QKEY),
    );
    post_send(&u.a, ud_send(3, &[sge(&u.mr, 0, 3)], &u.ah, u.b.qp_num()));
    u.collect(&mut log, 1, 3);
    log.check(&[
        "cq_a: wr 3 Success Send len 3 imm - flags - qp a src 0",
        "cq_b: wr 10 Success Recv len 41 imm - flags GRH qp b src a",
        "cq_b: wr 11 Success Recv len 42 imm - flags GRH qp b src a",
        "cq_b: wr 12 Success Recv len 43 imm - flags GRH qp b src a",
    ]);
}
