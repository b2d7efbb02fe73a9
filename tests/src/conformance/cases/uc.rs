//! UC: sends and RDMA writes without acknowledgements.

use super::prelude::*;

/// UC SEND and SEND_WITH_IMM: completions as on RC (GRH flag, src_qp 0).
pub fn uc_send_recv<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let p = pair(&rig, QpType::Uc, AccessFlags::empty(), &mut log);
    let mr = rig.mr(4096, AccessFlags::empty());
    fill(&mr, 0, b"unreliable");
    post_recv(&p.b, 7, &[sge(&mr, 1024, 64)]);
    post_recv(&p.b, 8, &[sge(&mr, 2048, 64)]);
    post_send(&p.a, SendWr::send(1, &[sge(&mr, 0, 10)]).signaled());
    post_send(
        &p.a,
        SendWr::send_with_imm(2, &[sge(&mr, 0, 2)], 5).signaled(),
    );
    p.collect(&mut log, 2, 2);
    log.line(String::from_utf8_lossy(&read(&mr, 1024, 10)).into_owned());
    log.check(&[
        "cq_a: wr 1 Success Send len 10 imm - flags - qp a src 0",
        "cq_a: wr 2 Success Send len 2 imm 0x0 flags IMM qp a src 0",
        "cq_b: wr 7 Success Recv len 10 imm - flags GRH qp b src 0",
        "cq_b: wr 8 Success Recv len 2 imm 0x5 flags GRH|IMM qp b src 0",
        "unreliable",
    ]);
}

/// UC RDMA WRITE and WRITE_WITH_IMM.
pub fn uc_rdma_write<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let p = pair(&rig, QpType::Uc, AccessFlags::REMOTE_WRITE, &mut log);
    let local = rig.mr(4096, AccessFlags::empty());
    let remote = rig.mr(4096, AccessFlags::REMOTE_WRITE);
    fill(&local, 0, b"uc write");
    post_recv(&p.b, 7, &[sge(&local, 1024, 64)]);
    post_send(
        &p.a,
        SendWr::rdma_write(1, &[sge(&local, 0, 8)], remote.addr(), remote.rkey()).signaled(),
    );
    post_send(
        &p.a,
        SendWr::rdma_write_with_imm(
            2,
            &[sge(&local, 0, 2)],
            remote.addr() + 100,
            remote.rkey(),
            3,
        )
        .signaled(),
    );
    p.collect(&mut log, 2, 1);
    log.line(String::from_utf8_lossy(&read(&remote, 0, 8)).into_owned());
    log.line(String::from_utf8_lossy(&read(&remote, 100, 2)).into_owned());
    log.check(&[
        "cq_a: wr 1 Success RdmaWrite len 8 imm - flags - qp a src 0",
        "cq_a: wr 2 Success RdmaWrite len 2 imm 0x0 flags IMM qp a src 0",
        "cq_b: wr 7 Success RecvRdmaWithImm len 2 imm 0x3 flags GRH|IMM qp b src 0",
        "uc write",
        "uc",
    ]);
}

/// UC has no acknowledgements: a write with a bad rkey completes successfully at the
/// sender and is dropped at the receiver, whose QP stays in RTS.
pub fn uc_write_bad_rkey_is_silent<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let p = pair(&rig, QpType::Uc, AccessFlags::REMOTE_WRITE, &mut log);
    let local = rig.mr(4096, AccessFlags::empty());
    let remote = rig.mr(4096, AccessFlags::REMOTE_WRITE);
    fill(&local, 0, b"lost");
    post_send(
        &p.a,
        SendWr::rdma_write(
            1,
            &[sge(&local, 0, 4)],
            remote.addr(),
            remote.rkey() ^ 0x00ff_ff00,
        )
        .signaled(),
    );
    p.collect(&mut log, 1, 0);
    p.states(&mut log);
    log.line(format!(
        "remote untouched: {}",
        read(&remote, 0, 4) == [0; 4]
    ));
    log.check(&[
        "cq_a: wr 1 Success RdmaWrite len 4 imm - flags - qp a src 0",
        "state a: RTS",
        "state b: RTS",
        "remote untouched: true",
    ]);
}

/// UC with no receive posted: the message is dropped (no RNR on UC), the sender
/// completes, and the next message lands in the receive posted afterwards.
pub fn uc_without_receive_is_dropped<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let p = pair(&rig, QpType::Uc, AccessFlags::empty(), &mut log);
    let mr = rig.mr(4096, AccessFlags::empty());
    post_send(&p.a, SendWr::send(1, &[sge(&mr, 0, 3)]).signaled());
    log.collect("cq_a", &p.cq_a.cq, 1);
    post_recv(&p.b, 7, &[sge(&mr, 1024, 64)]);
    post_send(&p.a, SendWr::send(2, &[sge(&mr, 0, 4)]).signaled());
    p.collect(&mut log, 1, 1);
    log.state("b", &p.b);
    log.check(&[
        "cq_a: wr 1 Success Send len 3 imm - flags - qp a src 0",
        "cq_a: wr 2 Success Send len 4 imm - flags - qp a src 0",
        "cq_b: wr 7 Success Recv len 4 imm - flags GRH qp b src 0",
        "state b: RTS",
    ]);
}

/// RDMA READ and atomics are not UC operations: rxe fails the request with
/// LOC_QP_OP_ERR? (the requester finds no opcode for it).
pub fn uc_read_is_refused<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let p = pair(&rig, QpType::Uc, AccessFlags::REMOTE_WRITE, &mut log);
    let local = rig.mr(64, AccessFlags::empty());
    let remote = rig.mr(64, AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ);
    log.result(
        "read",
        &try_send(
            &p.a,
            &[SendWr::rdma_read(1, &[sge(&local, 0, 8)], remote.addr(), remote.rkey()).signaled()],
        ),
    );
    log.collect("cq_a", &p.cq_a.cq, 1);
    log.state("a", &p.a);
    log.check(&[
        "read: ok",
        "cq_a: wr 1 LocQpOpErr Send len 0 imm - flags - qp a src 0",
        "state a: ERR",
    ]);
}
