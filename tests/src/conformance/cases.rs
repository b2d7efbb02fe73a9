//! The conformance cases. Each takes an [`Env`] and panics with a precise message on the
//! first difference from what rxe (and the man pages) do.

use std::net::Ipv4Addr;
use std::time::Duration;

use verbs_api::{
    AccessFlags, Completion, CompletionChannel, CompletionQueue, Context, ErrorKind, EventElement,
    EventType, Gid, MemoryRegion, QpModify, QpState, QpType, QueuePair, QueuePairExt, RecvWr,
    SendFlags, SendWr, Sge, SharedReceiveQueue, SrqAttr, SrqAttrMask, SrqInitAttr, Verbs, WcFlags,
    WcOpcode, WcStatus, GRH_LEN, MULTICAST_QPN,
};

use super::rig::{fill, open, poll_n, poll_quiet, read, wait_async, wait_event, Env};

const QKEY: u32 = 0x1111_1111;
const ALL_REMOTE: AccessFlags = AccessFlags::LOCAL_WRITE
    .union(AccessFlags::REMOTE_WRITE)
    .union(AccessFlags::REMOTE_READ)
    .union(AccessFlags::REMOTE_ATOMIC);

fn sge<M: MemoryRegion>(mr: &M, offset: usize, len: u32) -> Sge {
    Sge {
        addr: mr.addr() + offset as u64,
        length: len,
        lkey: mr.lkey(),
    }
}

/// The 8 bytes of `mr` at `offset` as a host-order u64 (atomics' operands and results).
fn read_u64<M: MemoryRegion>(mr: &M, offset: usize) -> u64 {
    let mut b = [0u8; 8];
    mr.read(offset, &mut b).expect("read MR");
    u64::from_ne_bytes(b)
}

fn post_recv<Q: QueuePair>(qp: &Q, wr_id: u64, sges: &[Sge]) {
    // SAFETY: every SGE lies in an MR that the case keeps alive until its completion
    // (or until the QP is destroyed first, which flushes it), and the case reads that
    // memory only through MemoryRegion::read after the completion.
    unsafe { qp.post_recv(&[RecvWr::new(wr_id, sges)]) }.expect("post_recv");
}

fn post_send<Q: QueuePair>(qp: &Q, wr: SendWr<'_, Q::Ah>) {
    // SAFETY: as in `post_recv`: the MRs and AHs named by the request outlive its
    // completion, and the case touches their memory only through MemoryRegion.
    unsafe { qp.post_send(&[wr]) }.expect("post_send");
}

fn expect_wc(wc: &Completion, wr_id: u64, status: WcStatus, opcode: Option<WcOpcode>) {
    assert_eq!(wc.wr_id, wr_id, "wr_id of {wc:?}");
    assert_eq!(wc.status, status, "status of {wc:?}");
    if let Some(op) = opcode {
        assert_eq!(wc.opcode, op, "opcode of {wc:?}");
    }
}

/// Device, port and GID queries.
pub fn device_and_port_queries<V: Verbs>(env: &Env<V>) {
    let devices = env.verbs.devices().expect("devices");
    assert!(
        devices.iter().any(|d| d.name == env.device),
        "{} not in {devices:?}",
        env.device
    );
    let rig = open(env);
    assert_eq!(rig.ctx.device().name, env.device);
    let a = &rig.attr;
    assert!(
        a.max_qp_wr > 0 && a.max_cqe > 0 && a.max_sge > 0 && a.max_mr_size > 0,
        "{a:?}"
    );
    assert!(a.phys_port_cnt >= 1);
    let p = rig.ctx.query_port(rig.port).expect("query_port");
    assert_eq!(p.state, verbs_api::PortState::Active);
    assert_eq!(p.link_layer, verbs_api::LinkLayer::Ethernet);
    assert!(p.gid_tbl_len > 0);
    let g = rig
        .ctx
        .query_gid(rig.port, u32::from(rig.gid_index))
        .expect("query_gid");
    assert_eq!(g, rig.gid);
    assert!(g.to_ipv4().is_some());
    let e = rig
        .ctx
        .query_port(a.phys_port_cnt + 1)
        .expect_err("a port past the last");
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
}

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

/// An armed CQ raises one event on its channel; it is acked; unarmed, nothing comes.
pub fn cq_events_notify_and_ack<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let send = rig.cq(16);
    let recv = rig.cq(16);
    let (a, b) = rig.rc_pair_on(&send.cq, &recv.cq, AccessFlags::empty());
    let mr = rig.mr(256, AccessFlags::empty());
    post_recv(&b, 1, &[sge(&mr, 128, 64)]);
    recv.cq.req_notify(false).expect("req_notify");
    fill(&mr, 0, b"ping");
    post_send(&a, SendWr::send(2, &[sge(&mr, 0, 4)]).signaled());
    let cq = wait_event(&recv.channel).expect("an event for the armed CQ");
    assert_eq!(cq, recv.cq.handle());
    recv.cq.ack_events(1);
    let wcs = poll_n(&recv.cq, 1);
    expect_wc(&wcs[0], 1, WcStatus::Success, Some(WcOpcode::Recv));
    assert_eq!(wcs[0].byte_len, 4);
    assert_eq!(read(&mr, 128, 4), b"ping");
    let wcs = poll_n(&send.cq, 1);
    expect_wc(&wcs[0], 2, WcStatus::Success, Some(WcOpcode::Send));
    // Not re-armed: a second message raises no event.
    post_recv(&b, 3, &[sge(&mr, 128, 64)]);
    post_send(&a, SendWr::send(4, &[sge(&mr, 0, 4)]).signaled());
    poll_n(&recv.cq, 1);
    assert_eq!(
        recv.channel
            .get_cq_event(Some(Duration::from_millis(200)))
            .unwrap(),
        None
    );
}

/// Armed solicited-only, a CQ ignores unsolicited completions and wakes on SOLICITED.
pub fn solicited_only_notification<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let send = rig.cq(16);
    let recv = rig.cq(16);
    let (a, b) = rig.rc_pair_on(&send.cq, &recv.cq, AccessFlags::empty());
    let mr = rig.mr(256, AccessFlags::empty());
    post_recv(&b, 1, &[sge(&mr, 128, 64)]);
    post_recv(&b, 2, &[sge(&mr, 192, 64)]);
    recv.cq.req_notify(true).expect("req_notify solicited");
    post_send(&a, SendWr::send(10, &[sge(&mr, 0, 8)]).signaled());
    poll_n(&send.cq, 1);
    assert_eq!(
        recv.channel
            .get_cq_event(Some(Duration::from_millis(200)))
            .unwrap(),
        None,
        "unsolicited woke a solicited-only CQ"
    );
    post_send(
        &a,
        SendWr::send(11, &[sge(&mr, 0, 8)]).flags(SendFlags::SOLICITED | SendFlags::SIGNALED),
    );
    assert_eq!(wait_event(&recv.channel), Some(recv.cq.handle()));
    recv.cq.ack_events(1);
    let wcs = poll_n(&recv.cq, 2);
    expect_wc(&wcs[0], 1, WcStatus::Success, Some(WcOpcode::Recv));
    expect_wc(&wcs[1], 2, WcStatus::Success, Some(WcOpcode::Recv));
}

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
    let local = rig.mr(4096, AccessFlags::empty());
    let remote = rig.mr(4096, ALL_REMOTE);
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
    let bad_lkey = Sge {
        addr: mr.addr(),
        length: 8,
        lkey: mr.lkey() ^ 0x00ff_ff00,
    };
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
    let local = rig.mr(256, AccessFlags::empty());
    let remote = rig.mr(256, ALL_REMOTE);
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
    let mut av = rig.self_av();
    av.grh.dgid = group;
    let ah = rig.ctx.create_ah(&rig.pd, &av).expect("multicast AH");
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
    post_send(
        &sender,
        SendWr::ud_send(1, &[sge(&mr, 0, 12)], &ah, MULTICAST_QPN, QKEY).signaled(),
    );
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
    post_send(
        &sender,
        SendWr::ud_send(2, &[sge(&mr, 0, 12)], &ah, MULTICAST_QPN, QKEY).signaled(),
    );
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

/// Two QPs share one SRQ; when the posted count falls below the armed limit, the SRQ
/// raises SRQ_LIMIT_REACHED once.
pub fn srq_shared_with_limit_event<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let c = rig.cq(64);
    let srq = rig
        .ctx
        .create_srq(
            &rig.pd,
            &SrqInitAttr {
                attr: SrqAttr {
                    max_wr: 16,
                    max_sge: 1,
                    srq_limit: 0,
                },
            },
        )
        .expect("create_srq");
    let mr = rig.mr(16 * 256, AccessFlags::empty());
    for i in 0..8u64 {
        let s = [sge(&mr, i as usize * 256, 256)];
        // SAFETY: the SGE lies in `mr`, alive until the end of the case.
        unsafe { srq.post_recv(&[RecvWr::new(1000 + i, &s)]) }.expect("post_srq_recv");
    }
    srq.modify(
        &SrqAttr {
            max_wr: 0,
            max_sge: 0,
            srq_limit: 6,
        },
        SrqAttrMask::LIMIT,
    )
    .expect("arm limit");
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
            SendWr::ud_send(k as u64, &[sge(&src, 0, 32)], &ah, dst.qp_num(), QKEY).signaled(),
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

/// Overrunning a CQ raises IBV_EVENT_CQ_ERR for it.
pub fn cq_overrun_raises_async_event<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let small = rig.ctx.create_cq(2, None, 0).expect("small CQ");
    let cap = small.cqe() as usize;
    let send_cq = rig.cq(64);
    let r = {
        let cap = verbs_api::QpCap {
            max_send_wr: 4,
            max_recv_wr: 64,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        };
        let mut init = verbs_api::QpInitAttr::new(QpType::Ud, &send_cq.cq, cap);
        init.recv_cq = &small;
        rig.ctx
            .create_qp(&rig.pd, &init)
            .expect("qp with small recv CQ")
    };
    let p = verbs_api::helpers::ConnectParams {
        port: rig.port,
        qkey: QKEY,
        ..Default::default()
    };
    verbs_api::helpers::bring_up(&r, QpState::Rts, &p).unwrap();
    let s = rig.ud_qp(&send_cq.cq, QKEY);
    let ah = rig.ctx.create_ah(&rig.pd, &rig.self_av()).unwrap();
    let mr = rig.mr(64 * 256, AccessFlags::empty());
    let n = cap + 3;
    for i in 0..n {
        post_recv(&r, i as u64, &[sge(&mr, i * 256, 256)]);
    }
    for i in 0..n {
        post_send(
            &s,
            SendWr::ud_send(i as u64, &[sge(&mr, 0, 16)], &ah, r.qp_num(), QKEY).signaled(),
        );
    }
    poll_n(&send_cq.cq, n);
    let ev = wait_async(&rig.ctx, Some(&send_cq.cq), |e| {
        e.event_type == EventType::CqErr
    });
    assert_eq!(ev.element, EventElement::Cq(small.handle()));
    // rxe keeps an overrun CQ usable: what it holds can still be polled.
    let mut buf = [Completion::default(); 64];
    let got = small.poll(&mut buf).expect("poll after overrun");
    assert!(
        got >= 1 && got <= cap,
        "{got} completions after overrun, capacity {cap}"
    );
    assert!(buf[..got]
        .iter()
        .all(|w| w.status == WcStatus::Success && w.opcode == WcOpcode::Recv));
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
