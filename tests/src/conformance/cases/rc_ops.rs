//! RC operations that succeed: every opcode, completions field by field.

use super::prelude::*;

/// SEND into a scatter-gather list, SEND_WITH_IMM, completions in wr_id order.
pub fn rc_send_recv_sgl_and_imm<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let c = rig.cq(64);
    let (a, b) = rig.rc_pair(&c.cq, AccessFlags::empty());
    let src = rig.mr(4096, AccessFlags::empty());
    let dst = rig.mr(4096, AccessFlags::empty());
    fill(&src, 0, b"hel");
    fill(&src, 100, b"lo, verbs");
    post_recv(&b, 7, &[sge(&dst, 0, 3), sge(&dst, 1000, 100)]);
    post_recv(&b, 8, &[sge(&dst, 2000, 64)]);
    post_send(
        &a,
        SendWr::send(1, &[sge(&src, 0, 3), sge(&src, 100, 9)]).signaled(),
    );
    post_send(
        &a,
        SendWr::send_with_imm(2, &[sge(&src, 0, 3)], 0x1234_5678).signaled(),
    );
    let wcs = poll_n(&c.cq, 4);
    let (sends, recvs): (Vec<_>, Vec<_>) = wcs.iter().partition(|w| !w.is_recv());
    expect_wc(sends[0], 1, WcStatus::Success, Some(WcOpcode::Send));
    expect_wc(sends[1], 2, WcStatus::Success, Some(WcOpcode::Send));
    expect_wc(recvs[0], 7, WcStatus::Success, Some(WcOpcode::Recv));
    assert_eq!(recvs[0].byte_len, 12);
    assert_eq!(recvs[0].qp_num, b.qp_num());
    assert_eq!(recvs[0].imm(), None);
    assert_eq!(read(&dst, 0, 3), b"hel");
    assert_eq!(read(&dst, 1000, 9), b"lo, verbs");
    expect_wc(recvs[1], 8, WcStatus::Success, Some(WcOpcode::Recv));
    assert_eq!(recvs[1].byte_len, 3);
    assert_eq!(recvs[1].imm(), Some(0x1234_5678));
    assert!(recvs[1].wc_flags.contains(WcFlags::WITH_IMM));
}

/// RDMA WRITE (and with immediate), RDMA READ, compare-and-swap and fetch-and-add.
pub fn rc_rdma_write_read_and_atomics<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let c = rig.cq(64);
    let (a, b) = rig.rc_pair(&c.cq, ALL_REMOTE);
    let (local, remote) = local_and_remote(&rig, 4096);
    fill(&local, 0, b"0123456789abcdef");
    post_send(
        &a,
        SendWr::rdma_write(1, &[sge(&local, 0, 16)], remote.addr() + 64, remote.rkey()).signaled(),
    );
    let wcs = poll_n(&c.cq, 1);
    expect_wc(&wcs[0], 1, WcStatus::Success, Some(WcOpcode::RdmaWrite));
    assert_eq!(read(&remote, 64, 16), b"0123456789abcdef");

    post_recv(&b, 50, &[sge(&local, 3000, 16)]);
    post_send(
        &a,
        SendWr::rdma_write_with_imm(
            2,
            &[sge(&local, 0, 8)],
            remote.addr() + 512,
            remote.rkey(),
            77,
        )
        .signaled(),
    );
    let wcs = poll_n(&c.cq, 2);
    let recv = wcs
        .iter()
        .find(|w| w.is_recv())
        .expect("the immediate consumes a receive");
    expect_wc(recv, 50, WcStatus::Success, Some(WcOpcode::RecvRdmaWithImm));
    assert_eq!(recv.imm(), Some(77));
    assert_eq!(recv.byte_len, 8);
    assert_eq!(read(&remote, 512, 8), b"01234567");
    let send = wcs.iter().find(|w| !w.is_recv()).unwrap();
    expect_wc(send, 2, WcStatus::Success, Some(WcOpcode::RdmaWrite));

    fill(&remote, 1024, b"remote-bytes");
    post_send(
        &a,
        SendWr::rdma_read(
            3,
            &[sge(&local, 100, 12)],
            remote.addr() + 1024,
            remote.rkey(),
        )
        .signaled(),
    );
    let wcs = poll_n(&c.cq, 1);
    expect_wc(&wcs[0], 3, WcStatus::Success, Some(WcOpcode::RdmaRead));
    assert_eq!(wcs[0].byte_len, 12);
    assert_eq!(read(&local, 100, 12), b"remote-bytes");

    fill(&remote, 2048, &10u64.to_ne_bytes());
    post_send(
        &a,
        SendWr::compare_swap(
            4,
            &[sge(&local, 200, 8)],
            remote.addr() + 2048,
            remote.rkey(),
            10,
            99,
        )
        .signaled(),
    );
    let wcs = poll_n(&c.cq, 1);
    expect_wc(&wcs[0], 4, WcStatus::Success, Some(WcOpcode::CompSwap));
    assert_eq!(read_u64(&local, 200), 10);
    assert_eq!(read_u64(&remote, 2048), 99);
    post_send(
        &a,
        SendWr::compare_swap(
            5,
            &[sge(&local, 208, 8)],
            remote.addr() + 2048,
            remote.rkey(),
            10,
            1,
        )
        .signaled(),
    );
    poll_n(&c.cq, 1);
    assert_eq!(read_u64(&local, 208), 99, "CAS returns the old value");
    assert_eq!(
        read_u64(&remote, 2048),
        99,
        "a failed compare stores nothing"
    );
    post_send(
        &a,
        SendWr::fetch_add(
            6,
            &[sge(&local, 216, 8)],
            remote.addr() + 2048,
            remote.rkey(),
            5,
        )
        .signaled(),
    );
    let wcs = poll_n(&c.cq, 1);
    expect_wc(&wcs[0], 6, WcStatus::Success, Some(WcOpcode::FetchAdd));
    assert_eq!(read_u64(&local, 216), 99);
    assert_eq!(read_u64(&remote, 2048), 104);
}

/// INLINE sends copy the data at post time: no lkey needed, the buffer is reusable at once.
pub fn rc_inline_send<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let c = rig.cq(16);
    let (a, b) = rig.rc_pair(&c.cq, AccessFlags::empty());
    let dst = rig.mr(256, AccessFlags::empty());
    post_recv(&b, 1, &[sge(&dst, 0, 64)]);
    let mut buf = *b"inline payload!!";
    let wr_sge = [Sge {
        addr: buf.as_ptr() as u64,
        length: 16,
        lkey: 0,
    }];
    post_send(
        &a,
        SendWr::send(2, &wr_sge).flags(SendFlags::INLINE | SendFlags::SIGNALED),
    );
    buf.fill(0);
    let wcs = poll_n(&c.cq, 2);
    let recv = wcs.iter().find(|w| w.is_recv()).unwrap();
    expect_wc(recv, 1, WcStatus::Success, Some(WcOpcode::Recv));
    assert_eq!(recv.byte_len, 16);
    assert_eq!(read(&dst, 0, 16), b"inline payload!!");
    assert_eq!(buf, [0; 16]);
}

/// One SEND, every completion field: rxe reports the send's length in the send
/// completion, flags every user receive with GRH (RC too) and leaves src_qp 0 on RC;
/// no async event (no COMM_EST) is raised.
pub fn rc_send_completion_fields<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let p = pair(&rig, QpType::Rc, AccessFlags::empty(), &mut log);
    let mr = rig.mr(4096, AccessFlags::empty());
    fill(&mr, 0, &[0xab; 100]);
    post_recv(&p.b, 7, &[sge(&mr, 1024, 1024)]);
    post_send(&p.a, SendWr::send(1, &[sge(&mr, 0, 100)]).signaled());
    p.collect(&mut log, 1, 1);
    log.events(&rig.ctx, &p.cq_a.cq);
    log.line(format!(
        "bytes: {}",
        read(&mr, 1024, 101) == [[0xab; 100].as_slice(), &[0]].concat()
    ));
    log.check(&[
        "cq_a: wr 1 Success Send len 100 imm - flags - qp a src 0",
        "cq_b: wr 7 Success Recv len 100 imm - flags GRH qp b src 0",
        "bytes: true",
    ]);
}

/// SEND_WITH_IMM: the immediate arrives in the receive completion with IMM and GRH.
/// rxe also flags the send completion WITH_IMM, with imm_data 0 (`make_send_cqe`); the
/// man page defines the flag for receives only.
pub fn rc_send_with_imm_fields<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let p = pair(&rig, QpType::Rc, AccessFlags::empty(), &mut log);
    let mr = rig.mr(4096, AccessFlags::empty());
    post_recv(&p.b, 7, &[sge(&mr, 1024, 64)]);
    post_send(
        &p.a,
        SendWr::send_with_imm(1, &[sge(&mr, 0, 10)], 0xdead_beef).signaled(),
    );
    p.collect(&mut log, 1, 1);
    log.check(&[
        "cq_a: wr 1 Success Send len 10 imm 0x0 flags IMM qp a src 0",
        "cq_b: wr 7 Success Recv len 10 imm 0xdeadbeef flags GRH|IMM qp b src 0",
    ]);
}

/// A SEND of no bytes (no SGE) consumes a receive and completes with length 0.
pub fn rc_zero_length_send<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let p = pair(&rig, QpType::Rc, AccessFlags::empty(), &mut log);
    let mr = rig.mr(64, AccessFlags::empty());
    post_recv(&p.b, 7, &[sge(&mr, 0, 64)]);
    post_send(&p.a, SendWr::send(1, &[]).signaled());
    p.collect(&mut log, 1, 1);
    log.check(&[
        "cq_a: wr 1 Success Send len 0 imm - flags - qp a src 0",
        "cq_b: wr 7 Success Recv len 0 imm - flags GRH qp b src 0",
    ]);
}

/// A SEND of many MTUs (5000 bytes at MTU 1024) arrives whole into a scatter list.
pub fn rc_multi_packet_send<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let p = pair(&rig, QpType::Rc, AccessFlags::empty(), &mut log);
    let src = rig.mr(8192, AccessFlags::empty());
    let dst = rig.mr(16384, AccessFlags::empty());
    let data: Vec<u8> = (0..5000u32).map(|i| (i * 7 % 251) as u8).collect();
    fill(&src, 0, &data);
    post_recv(&p.b, 7, &[sge(&dst, 0, 3000), sge(&dst, 8192, 4000)]);
    post_send(&p.a, SendWr::send(1, &[sge(&src, 0, 5000)]).signaled());
    p.collect(&mut log, 1, 1);
    let got = [read(&dst, 0, 3000), read(&dst, 8192, 2000)].concat();
    log.line(format!("bytes: {}", got == data));
    log.check(&[
        "cq_a: wr 1 Success Send len 5000 imm - flags - qp a src 0",
        "cq_b: wr 7 Success Recv len 5000 imm - flags GRH qp b src 0",
        "bytes: true",
    ]);
}

/// RDMA WRITE: no receive is consumed; the send completion reports the length.
pub fn rc_rdma_write_fields<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let p = pair(&rig, QpType::Rc, ALL_REMOTE, &mut log);
    let (local, remote) = local_and_remote(&rig, 4096);
    fill(&local, 0, b"written");
    post_recv(&p.b, 7, &[sge(&local, 1024, 64)]);
    post_send(
        &p.a,
        SendWr::rdma_write(1, &[sge(&local, 0, 7)], remote.addr() + 3000, remote.rkey()).signaled(),
    );
    p.collect(&mut log, 1, 0);
    log.line(String::from_utf8_lossy(&read(&remote, 3000, 7)).into_owned());
    log.check(&[
        "cq_a: wr 1 Success RdmaWrite len 7 imm - flags - qp a src 0",
        "written",
    ]);
}

/// RDMA WRITE_WITH_IMM: the receive completion reports the write's length (rxe), the
/// immediate, and RECV_RDMA_WITH_IMM; the receive's buffer is untouched.
pub fn rc_rdma_write_with_imm_fields<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let p = pair(&rig, QpType::Rc, ALL_REMOTE, &mut log);
    let (local, remote) = local_and_remote(&rig, 4096);
    fill(&local, 0, b"with imm");
    post_recv(&p.b, 7, &[sge(&local, 1024, 64)]);
    post_send(
        &p.a,
        SendWr::rdma_write_with_imm(1, &[sge(&local, 0, 8)], remote.addr(), remote.rkey(), 42)
            .signaled(),
    );
    p.collect(&mut log, 1, 1);
    log.line(String::from_utf8_lossy(&read(&remote, 0, 8)).into_owned());
    log.line(format!(
        "recv buffer untouched: {}",
        read(&local, 1024, 8) == [0; 8]
    ));
    log.check(&[
        "cq_a: wr 1 Success RdmaWrite len 8 imm 0x0 flags IMM qp a src 0",
        "cq_b: wr 7 Success RecvRdmaWithImm len 8 imm 0x2a flags GRH|IMM qp b src 0",
        "with imm",
        "recv buffer untouched: true",
    ]);
}

/// RDMA READ of 3000 bytes (three response packets) into two SGEs.
pub fn rc_rdma_read_fields<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let p = pair(&rig, QpType::Rc, ALL_REMOTE, &mut log);
    let (local, remote) = local_and_remote(&rig, 8192);
    let data: Vec<u8> = (0..3000u32).map(|i| (i % 253) as u8).collect();
    fill(&remote, 100, &data);
    post_send(
        &p.a,
        SendWr::rdma_read(
            1,
            &[sge(&local, 0, 1000), sge(&local, 4096, 2000)],
            remote.addr() + 100,
            remote.rkey(),
        )
        .signaled(),
    );
    p.collect(&mut log, 1, 0);
    let got = [read(&local, 0, 1000), read(&local, 4096, 2000)].concat();
    log.line(format!("bytes: {}", got == data));
    log.check(&[
        "cq_a: wr 1 Success RdmaRead len 3000 imm - flags - qp a src 0",
        "bytes: true",
    ]);
}

/// Atomics: completions report 8 bytes; CAS and FETCH_ADD return the old value.
pub fn rc_atomic_fields<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let p = pair(&rig, QpType::Rc, ALL_REMOTE, &mut log);
    let (local, remote) = local_and_remote(&rig, 64);
    fill(&remote, 8, &7u64.to_ne_bytes());
    post_send(
        &p.a,
        SendWr::fetch_add(1, &[sge(&local, 0, 8)], remote.addr() + 8, remote.rkey(), 3).signaled(),
    );
    post_send(
        &p.a,
        SendWr::compare_swap(
            2,
            &[sge(&local, 16, 8)],
            remote.addr() + 8,
            remote.rkey(),
            10,
            77,
        )
        .signaled(),
    );
    log.collect("cq_a", &p.cq_a.cq, 2);
    log.line(format!(
        "old {} {} now {}",
        read_u64(&local, 0),
        read_u64(&local, 16),
        read_u64(&remote, 8)
    ));
    log.check(&[
        "cq_a: wr 1 Success FetchAdd len 8 imm - flags - qp a src 0",
        "cq_a: wr 2 Success CompSwap len 8 imm - flags - qp a src 0",
        "old 7 10 now 77",
    ]);
}

/// Only signaled sends complete on a QP without sq_sig_all; the receives all complete.
pub fn rc_unsignaled_sends<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let p = pair(&rig, QpType::Rc, AccessFlags::empty(), &mut log);
    let mr = rig.mr(1024, AccessFlags::empty());
    for i in 0..3 {
        post_recv(&p.b, 10 + i, &[sge(&mr, 512, 64)]);
    }
    post_send(&p.a, SendWr::send(1, &[sge(&mr, 0, 1)]));
    post_send(&p.a, SendWr::send(2, &[sge(&mr, 0, 2)]));
    post_send(&p.a, SendWr::send(3, &[sge(&mr, 0, 3)]).signaled());
    p.collect(&mut log, 1, 3);
    log.check(&[
        "cq_a: wr 3 Success Send len 3 imm - flags - qp a src 0",
        "cq_b: wr 10 Success Recv len 1 imm - flags GRH qp b src 0",
        "cq_b: wr 11 Success Recv len 2 imm - flags GRH qp b src 0",
        "cq_b: wr 12 Success Recv len 3 imm - flags GRH qp b src 0",
    ]);
}

/// A QP created with sq_sig_all completes every send, signaled or not.
pub fn rc_sq_sig_all<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let c = rig.cq(64);
    let cap = cap(8, 8, 1, 1, 0);
    let mut init = verbs_api::QpInitAttr::new(QpType::Rc, &c.cq, cap);
    init.sq_sig_all = true;
    let a = rig.ctx.create_qp(&rig.pd, &init).expect("create_qp");
    let b = rig.qp(QpType::Rc, &c.cq, 0);
    log.qp("a", &a);
    log.qp("b", &b);
    rig.connect(&a, &b, AccessFlags::empty());
    let mr = rig.mr(1024, AccessFlags::empty());
    for i in 0..2 {
        post_recv(&b, 10 + i, &[sge(&mr, 512, 64)]);
    }
    post_send(&a, SendWr::send(1, &[sge(&mr, 0, 4)]));
    poll_n(&c.cq, 2);
    post_send(&a, SendWr::send(2, &[sge(&mr, 0, 5)]));
    let mut wcs = poll_n(&c.cq, 2);
    wcs.sort_by_key(|w| w.wr_id);
    for w in &wcs {
        log.wc("cq", w);
    }
    log.check(&[
        "cq: wr 2 Success Send len 5 imm - flags - qp a src 0",
        "cq: wr 11 Success Recv len 5 imm - flags GRH qp b src 0",
    ]);
}

/// FENCE: a SEND fenced behind an RDMA READ starts only after the READ's response, so
/// it carries the bytes the READ brought in... and both complete in order.
pub fn rc_fenced_send_after_read<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let p = pair(&rig, QpType::Rc, ALL_REMOTE, &mut log);
    let (local, remote) = local_and_remote(&rig, 4096);
    fill(&remote, 0, b"fresh");
    fill(&local, 0, b"stale");
    post_recv(&p.b, 9, &[sge(&remote, 2048, 64)]);
    post_send(
        &p.a,
        SendWr::rdma_read(1, &[sge(&local, 0, 5)], remote.addr(), remote.rkey()).signaled(),
    );
    post_send(
        &p.a,
        SendWr::send(2, &[sge(&local, 0, 5)]).flags(SendFlags::FENCE | SendFlags::SIGNALED),
    );
    p.collect(&mut log, 2, 1);
    log.line(String::from_utf8_lossy(&read(&remote, 2048, 5)).into_owned());
    log.check(&[
        "cq_a: wr 1 Success RdmaRead len 5 imm - flags - qp a src 0",
        "cq_a: wr 2 Success Send len 5 imm - flags - qp a src 0",
        "cq_b: wr 9 Success Recv len 5 imm - flags GRH qp b src 0",
        "fresh",
    ]);
}

/// RC on an SRQ: receives come from the shared queue, completions name the QP.
pub fn rc_send_to_srq<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let c = rig.cq(64);
    let srq = rig
        .ctx
        .create_srq(&rig.pd, &SrqInitAttr::new(8, 1))
        .expect("create_srq");
    let a = rig.qp(QpType::Rc, &c.cq, 0);
    let b = rig.qp_on_srq(QpType::Rc, &c.cq, &srq);
    log.qp("a", &a);
    log.qp("b", &b);
    rig.connect(&a, &b, AccessFlags::empty());
    let mr = rig.mr(1024, AccessFlags::empty());
    try_srq_recv(&srq, 50, &[sge(&mr, 512, 64)]).expect("srq recv");
    log.result(
        "post_recv on the QP",
        &try_recv(&b, 51, &[sge(&mr, 512, 64)]),
    );
    post_send(&a, SendWr::send(1, &[sge(&mr, 0, 6)]));
    log.collect("cq", &c.cq, 1);
    log.check(&[
        "post_recv on the QP: InvalidArgument bad_wr=0",
        "cq: wr 50 Success Recv len 6 imm - flags GRH qp b src 0",
    ]);
}

/// An RDMA WRITE of no bytes names no memory: any rkey and address will do (IBA), and it
/// completes successfully without touching the remote side.
pub fn rc_zero_length_write_any_rkey<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let p = pair(&rig, QpType::Rc, ALL_REMOTE, &mut log);
    post_send(
        &p.a,
        SendWr::rdma_write(1, &[], 0x1000, 0x00de_ad00).signaled(),
    );
    p.collect(&mut log, 1, 0);
    p.states(&mut log);
    log.check(&[
        "cq_a: wr 1 Success RdmaWrite len 0 imm - flags - qp a src 0",
        "state a: RTS",
        "state b: RTS",
    ]);
}

/// An INLINE RDMA WRITE: the data is taken at post time, no lkey needed.
pub fn rc_inline_rdma_write<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let p = pair(&rig, QpType::Rc, ALL_REMOTE, &mut log);
    let remote = rig.mr(256, ALL_REMOTE);
    let mut buf = *b"inline write";
    let s = [Sge {
        addr: buf.as_ptr() as u64,
        length: 12,
        lkey: 0,
    }];
    post_send(
        &p.a,
        SendWr::rdma_write(1, &s, remote.addr() + 8, remote.rkey())
            .flags(SendFlags::INLINE | SendFlags::SIGNALED),
    );
    buf.fill(0);
    log.collect("cq_a", &p.cq_a.cq, 1);
    log.line(String::from_utf8_lossy(&read(&remote, 8, 12)).into_owned());
    log.check(&[
        "cq_a: wr 1 Success RdmaWrite len 12 imm - flags - qp a src 0",
        "inline write",
    ]);
}

/// Four RDMA READs posted at once with max_rd_atomic 1 run one at a time and complete
/// in order, each with its own bytes.
pub fn rc_reads_in_order_one_outstanding<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let p = pair_with(&rig, QpType::Rc, ALL_REMOTE, &mut log, |_, p| {
        p.max_rd_atomic = 1;
        p.max_dest_rd_atomic = 1;
    });
    let (local, remote) = local_and_remote(&rig, 4096);
    fill(&remote, 0, b"abcdefghijklmnop");
    let sges: Vec<[Sge; 1]> = (0..4).map(|i| [sge(&local, 1024 * i, 4)]).collect();
    let wrs: Vec<_> = sges
        .iter()
        .enumerate()
        .map(|(i, s)| {
            SendWr::rdma_read(i as u64, s, remote.addr() + 4 * i as u64, remote.rkey()).signaled()
        })
        .collect();
    log.result("post 4", &try_send(&p.a, &wrs));
    log.collect("cq_a", &p.cq_a.cq, 4);
    let got: Vec<u8> = (0..4).flat_map(|i| read(&local, 1024 * i, 4)).collect();
    log.line(String::from_utf8_lossy(&got).into_owned());
    log.check(&[
        "post 4: ok",
        "cq_a: wr 0 Success RdmaRead len 4 imm - flags - qp a src 0",
        "cq_a: wr 1 Success RdmaRead len 4 imm - flags - qp a src 0",
        "cq_a: wr 2 Success RdmaRead len 4 imm - flags - qp a src 0",
        "cq_a: wr 3 Success RdmaRead len 4 imm - flags - qp a src 0",
        "abcdefghijklmnop",
    ]);
}

/// max_rd_atomic 0: the requester never issues an RDMA READ (rxe holds it forever; the
/// QP stays in RTS and nothing completes).
pub fn rc_read_with_no_rd_atomic_never_issues<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let p = pair_with(&rig, QpType::Rc, ALL_REMOTE, &mut log, |b, p| {
        if !b {
            p.max_rd_atomic = 0;
        }
    });
    let (local, remote) = local_and_remote(&rig, 64);
    post_send(
        &p.a,
        SendWr::rdma_read(1, &[sge(&local, 0, 8)], remote.addr(), remote.rkey()).signaled(),
    );
    log.collect("cq_a", &p.cq_a.cq, 0);
    log.state("a", &p.a);
    log.check(&["state a: RTS"]);
}

/// A responder still in RTR receives (an RC QP receives from RTR on); rxe raises no
/// COMM_EST for that first packet, as the IB spec and mlx5 do.
pub fn rc_responder_in_rtr_receives_without_comm_est<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let ca = rig.cq(16);
    let cb = rig.cq(16);
    let a = rig.qp(QpType::Rc, &ca.cq, 0);
    let b = rig.qp(QpType::Rc, &cb.cq, 0);
    log.qp("a", &a);
    log.qp("b", &b);
    let pa = rig.connect_params(b.qp_num(), AccessFlags::empty());
    let pb = rig.connect_params(a.qp_num(), AccessFlags::empty());
    verbs_api::helpers::bring_up(&a, QpState::Rts, &pa).expect("a");
    verbs_api::helpers::bring_up(&b, QpState::Rtr, &pb).expect("b");
    let mr = rig.mr(256, AccessFlags::empty());
    post_recv(&b, 7, &[sge(&mr, 128, 64)]);
    post_send(&a, SendWr::send(1, &[sge(&mr, 0, 5)]).signaled());
    log.collect("cq_a", &ca.cq, 1);
    log.collect("cq_b", &cb.cq, 1);
    log.events(&rig.ctx, &ca.cq);
    log.state("b", &b);
    log.check(&[
        "cq_a: wr 1 Success Send len 5 imm - flags - qp a src 0",
        "cq_b: wr 7 Success Recv len 5 imm - flags GRH qp b src 0",
        "state b: RTR",
    ]);
}
