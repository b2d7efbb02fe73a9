//! Memory regions: registration, keys, access rules.

use super::prelude::*;

/// MR registration, keys, bounds and access-flag rules.
pub fn memory_registration_and_access<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let a = rig.mr(4096, AccessFlags::empty());
    let b = rig.mr(4096, ALL_REMOTE);
    assert_ne!(a.lkey(), b.lkey(), "two MRs share an lkey");
    assert_eq!(a.len(), 4096);
    assert!(b.access().contains(AccessFlags::REMOTE_ATOMIC));
    fill(&a, 10, b"verbs");
    assert_eq!(read(&a, 10, 5), b"verbs");
    assert_eq!(
        a.read(4090, &mut [0; 7]).expect_err("past the end").kind(),
        ErrorKind::InvalidArgument
    );
    let e = rig
        .ctx
        .alloc_mr(&rig.pd, 4096, AccessFlags::REMOTE_WRITE)
        .expect_err("REMOTE_WRITE alone");
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    let e = rig
        .ctx
        .alloc_mr(&rig.pd, 4096, AccessFlags::REMOTE_ATOMIC)
        .expect_err("REMOTE_ATOMIC alone");
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    let e = rig
        .ctx
        .alloc_mr(&rig.pd, 0, AccessFlags::LOCAL_WRITE)
        .expect_err("zero length");
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
}

/// rxe gives a region without remote access rkey 0, and a remote-access region an rkey
/// equal to its lkey (`rxe_mr_init`); mlx5 gives every region one key for both.
pub fn mr_keys<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let local = rig
        .ctx
        .alloc_mr(&rig.pd, 4096, AccessFlags::LOCAL_WRITE)
        .expect("local MR");
    let remote = rig.mr(4096, ALL_REMOTE);
    let read_only = rig
        .ctx
        .alloc_mr(&rig.pd, 4096, AccessFlags::REMOTE_READ)
        .expect("read-only MR");
    let mut log = Log::new();
    log.line(format!("local rkey zero: {}", local.rkey() == 0));
    log.line(format!(
        "remote rkey = lkey: {}",
        remote.rkey() == remote.lkey()
    ));
    log.line(format!(
        "read-only rkey = lkey: {}",
        read_only.rkey() == read_only.lkey()
    ));
    log.line(format!("lkeys distinct: {}", local.lkey() != remote.lkey()));
    log.line(format!("access: {:?}", read_only.access()));
    log.check(&[
        "local rkey zero: true",
        "remote rkey = lkey: true",
        "read-only rkey = lkey: true",
        "lkeys distinct: true",
        "access: AccessFlags(REMOTE_READ)",
    ]);
}

/// Registering caller memory: the region covers exactly that memory, and RDMA lands in it.
pub fn reg_mr_over_caller_memory<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let p = pair(&rig, QpType::Rc, ALL_REMOTE, &mut log);
    let mut buf = vec![0u8; 256];
    // SAFETY: `buf` outlives the region (dropped at the end of the case, after `mr`), and
    // is read only after the completion of the write into it.
    let mr = unsafe {
        rig.ctx
            .reg_mr(&rig.pd, buf.as_mut_ptr(), buf.len(), ALL_REMOTE)
    }
    .expect("reg_mr");
    log.line(format!(
        "addr matches: {}",
        mr.addr() == buf.as_ptr() as u64
    ));
    let src = rig.mr(64, AccessFlags::empty());
    fill(&src, 0, b"into caller memory");
    post_send(
        &p.a,
        SendWr::rdma_write(1, &[sge(&src, 0, 18)], mr.addr() + 100, mr.rkey()).signaled(),
    );
    p.collect(&mut log, 1, 0);
    drop(mr);
    log.line(String::from_utf8_lossy(&buf[100..118]).into_owned());
    log.check(&[
        "addr matches: true",
        "cq_a: wr 1 Success RdmaWrite len 18 imm - flags - qp a src 0",
        "into caller memory",
    ]);
}

/// A region past the device's largest, and access flags the kernel refuses
/// (`ib_check_mr_access`: remote write or atomic without local write).
pub fn reg_mr_refusals<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    for (name, access) in [
        ("REMOTE_WRITE alone", AccessFlags::REMOTE_WRITE),
        ("REMOTE_ATOMIC alone", AccessFlags::REMOTE_ATOMIC),
        (
            "REMOTE_WRITE|REMOTE_READ",
            AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ,
        ),
        ("REMOTE_READ alone", AccessFlags::REMOTE_READ),
        ("none", AccessFlags::empty()),
    ] {
        log.result(name, &rig.ctx.alloc_mr(&rig.pd, 64, access));
    }
    log.result(
        "zero bytes",
        &rig.ctx.alloc_mr(&rig.pd, 0, AccessFlags::empty()),
    );
    log.check(&[
        "REMOTE_WRITE alone: InvalidArgument",
        "REMOTE_ATOMIC alone: InvalidArgument",
        "REMOTE_WRITE|REMOTE_READ: InvalidArgument",
        "REMOTE_READ alone: ok",
        "none: ok",
        "zero bytes: InvalidArgument",
    ]);
}

/// A send naming the lkey of a region that has been deregistered fails like any unknown
/// lkey (rxe: LOC_QP_OP_ERR), and the QP enters ERR.
pub fn send_from_deregistered_mr<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let p = pair(&rig, QpType::Rc, AccessFlags::empty(), &mut log);
    let dst = rig.mr(64, AccessFlags::empty());
    post_recv(&p.b, 1, &[sge(&dst, 0, 64)]);
    let gone = rig.mr(64, AccessFlags::empty());
    let stale = sge(&gone, 0, 8);
    drop(gone);
    log.result(
        "post",
        &try_send(&p.a, &[SendWr::send(2, &[stale]).signaled()]),
    );
    p.collect(&mut log, 1, 0);
    p.states(&mut log);
    log.check(&[
        "post: ok",
        "cq_a: wr 2 LocQpOpErr Send len 0 imm - flags - qp a src 0",
        "state a: ERR",
        "state b: RTS",
    ]);
}
