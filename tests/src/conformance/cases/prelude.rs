//! What every case uses: the verbs types, the rig's helpers, and small builders of
//! work requests, queue pairs and address handles.

pub(crate) use std::net::Ipv4Addr;
pub(crate) use std::time::Duration;

pub(crate) use verbs_api::{
    AccessFlags, Completion, CompletionChannel, CompletionQueue, Context, ErrorKind, EventElement,
    EventType, Gid, MemoryRegion, QpAttrMask, QpCap, QpModify, QpState, QpType, QueuePair,
    QueuePairExt, RecvWr, Result, SendFlags, SendWr, Sge, SharedReceiveQueue, SrqAttr, SrqAttrMask,
    SrqInitAttr, Verbs, WcFlags, WcOpcode, WcStatus, GRH_LEN, MULTICAST_QPN,
};

pub(crate) use crate::conformance::outcome::Log;
pub(crate) use crate::conformance::rig::{
    fill, open, poll_n, poll_quiet, read, wait_async, wait_event, Env, Rig,
};

pub(crate) const QKEY: u32 = 0x1111_1111;
pub(crate) const ALL_REMOTE: AccessFlags = AccessFlags::LOCAL_WRITE
    .union(AccessFlags::REMOTE_WRITE)
    .union(AccessFlags::REMOTE_READ)
    .union(AccessFlags::REMOTE_ATOMIC);

pub(crate) fn sge<M: MemoryRegion>(mr: &M, offset: usize, len: u32) -> Sge {
    Sge {
        addr: mr.addr() + offset as u64,
        length: len,
        lkey: mr.lkey(),
    }
}

/// The 8 bytes of `mr` at `offset` as a host-order u64 (atomics' operands and results).
pub(crate) fn read_u64<M: MemoryRegion>(mr: &M, offset: usize) -> u64 {
    let mut b = [0u8; 8];
    mr.read(offset, &mut b).expect("read MR");
    u64::from_ne_bytes(b)
}

/// Posts one receive; the case expects it to be accepted.
pub(crate) fn post_recv<Q: QueuePair>(qp: &Q, wr_id: u64, sges: &[Sge]) {
    try_recv(qp, wr_id, sges).expect("post_recv");
}

/// Posts one receive and returns what the post returned.
pub(crate) fn try_recv<Q: QueuePair>(qp: &Q, wr_id: u64, sges: &[Sge]) -> Result<()> {
    // SAFETY: every SGE lies in an MR that the case keeps alive until its completion
    // (or until the QP is destroyed first, which flushes it), and the case reads that
    // memory only through MemoryRegion::read after the completion.
    unsafe { qp.post_recv(&[RecvWr::new(wr_id, sges)]) }
}

/// Posts one send request; the case expects it to be accepted.
pub(crate) fn post_send<Q: QueuePair>(qp: &Q, wr: SendWr<'_, Q::Ah>) {
    try_send(qp, &[wr]).expect("post_send");
}

/// Posts send requests and returns what the post returned.
pub(crate) fn try_send<Q: QueuePair>(qp: &Q, wrs: &[SendWr<'_, Q::Ah>]) -> Result<()> {
    // SAFETY: as in `try_recv`: the MRs and AHs named by the requests outlive their
    // completions, and the case touches their memory only through MemoryRegion.
    unsafe { qp.post_send(wrs) }
}

/// Posts one receive to an SRQ and returns what the post returned.
pub(crate) fn try_srq_recv<S: SharedReceiveQueue>(srq: &S, wr_id: u64, sges: &[Sge]) -> Result<()> {
    // SAFETY: as in `try_recv`.
    unsafe { srq.post_recv(&[RecvWr::new(wr_id, sges)]) }
}

pub(crate) fn expect_wc(wc: &Completion, wr_id: u64, status: WcStatus, opcode: Option<WcOpcode>) {
    assert_eq!(wc.wr_id, wr_id, "wr_id of {wc:?}");
    assert_eq!(wc.status, status, "status of {wc:?}");
    if let Some(op) = opcode {
        assert_eq!(wc.opcode, op, "opcode of {wc:?}");
    }
}

/// Two CQs (with channels), one per side, and two connected QPs of one type in RTS,
/// named `a` and `b` (and their CQs `cq_a` and `cq_b`) in the case's log.
pub(crate) struct Pair<C: Context> {
    pub cq_a: crate::conformance::rig::CqPair<C>,
    pub cq_b: crate::conformance::rig::CqPair<C>,
    pub a: C::Qp,
    pub b: C::Qp,
}

impl<C: Context> Pair<C> {
    /// Logs `n_a` completions of `cq_a`, then `n_b` of `cq_b` (see [`Log::collect`]).
    pub fn collect(&self, log: &mut Log, n_a: usize, n_b: usize) {
        log.collect("cq_a", &self.cq_a.cq, n_a);
        log.collect("cq_b", &self.cq_b.cq, n_b);
    }

    /// Logs the states of `a` and `b`, in that order.
    pub fn states(&self, log: &mut Log) {
        log.state("a", &self.a);
        log.state("b", &self.b);
    }
}

/// A [`Pair`] of `qp_type` allowing `access`, with the default connection parameters.
pub(crate) fn pair<C: Context>(
    rig: &Rig<C>,
    qp_type: QpType,
    access: AccessFlags,
    log: &mut Log,
) -> Pair<C> {
    pair_with(rig, qp_type, access, log, |_, _| {})
}

/// A [`Pair`] of `qp_type` allowing `access`, after `tweak` adjusted each side's
/// connection parameters (`tweak(false, ..)` for `a`, `tweak(true, ..)` for `b`).
pub(crate) fn pair_with<C: Context>(
    rig: &Rig<C>,
    qp_type: QpType,
    access: AccessFlags,
    log: &mut Log,
    tweak: impl FnMut(bool, &mut verbs_api::helpers::ConnectParams),
) -> Pair<C> {
    let cq_a = rig.cq(64);
    let cq_b = rig.cq(64);
    let (a, b) = rig.pair_with(qp_type, &cq_a.cq, &cq_b.cq, access, tweak);
    log.qp("a", &a);
    log.qp("b", &b);
    log.cq("cq_a", &cq_a.cq);
    log.cq("cq_b", &cq_b.cq);
    Pair { cq_a, cq_b, a, b }
}

/// A local buffer and a remote one allowing every remote access ([`ALL_REMOTE`]), of
/// `len` bytes each: what an RDMA or atomic request reads from or writes to.
pub(crate) fn local_and_remote<C: Context>(rig: &Rig<C>, len: usize) -> (C::Mr, C::Mr) {
    (rig.mr(len, AccessFlags::empty()), rig.mr(len, ALL_REMOTE))
}

/// A signaled UD SEND of `sges` to QP `qpn` (or [`MULTICAST_QPN`]) behind `ah`, with the
/// suite's Q_Key [`QKEY`].
pub(crate) fn ud_send<'a, A>(wr_id: u64, sges: &'a [Sge], ah: &'a A, qpn: u32) -> SendWr<'a, A> {
    SendWr::ud_send(wr_id, sges, ah, qpn, QKEY).signaled()
}

/// A UD QP in RTS on `cq`, named `name` in `log`.
pub(crate) fn ud<C: Context>(rig: &Rig<C>, cq: &C::Cq, name: &'static str, log: &mut Log) -> C::Qp {
    let qp = rig.ud_qp(cq, QKEY);
    log.qp(name, &qp);
    qp
}

/// A UD QP in RTS sending to `send_cq` and receiving to `recv_cq`, named `name` in `log`.
pub(crate) fn ud_on<C: Context>(
    rig: &Rig<C>,
    send_cq: &C::Cq,
    recv_cq: &C::Cq,
    name: &'static str,
    log: &mut Log,
) -> C::Qp {
    let cap = cap(8, 8, 1, 1, 0);
    let qp = rig.qp_with(QpType::Ud, send_cq, recv_cq, cap);
    bring_up_ud(rig, &qp, QpState::Rts);
    log.qp(name, &qp);
    qp
}

/// A UD QP in RTS on `cq` whose receives take up to 3 SGEs.
pub(crate) fn ud_with_sges<C: Context>(
    rig: &Rig<C>,
    cq: &C::Cq,
    name: &'static str,
    log: &mut Log,
) -> C::Qp {
    let cap = cap(8, 8, 1, 3, 0);
    let qp = rig.qp_with(QpType::Ud, cq, cq, cap);
    bring_up_ud(rig, &qp, QpState::Rts);
    log.qp(name, &qp);
    qp
}

/// Queue sizes.
pub(crate) fn cap(send_wr: u32, recv_wr: u32, send_sge: u32, recv_sge: u32, inline: u32) -> QpCap {
    QpCap::new(send_wr, recv_wr, send_sge, recv_sge).with_inline(inline)
}

/// SRQ attributes.
pub(crate) fn srq_attr(max_wr: u32, max_sge: u32, srq_limit: u32) -> SrqInitAttr {
    SrqInitAttr {
        attr: SrqAttr {
            max_wr,
            max_sge,
            srq_limit,
        },
    }
}

/// Brings a UD QP with Q_Key [`QKEY`] on the rig's port up to `to`.
pub(crate) fn bring_up_ud<C: Context>(rig: &Rig<C>, qp: &C::Qp, to: QpState) {
    let p = verbs_api::helpers::ConnectParams {
        port: rig.port,
        qkey: QKEY,
        ..Default::default()
    };
    verbs_api::helpers::bring_up(qp, to, &p).expect("bring up UD");
}

/// An SGE over `mr`'s first `len` bytes with a corrupted lkey.
pub(crate) fn bad_lkey<M: MemoryRegion>(mr: &M, len: u32) -> Sge {
    Sge {
        addr: mr.addr(),
        length: len,
        lkey: mr.lkey() ^ 0x00ff_ff00,
    }
}

/// An address handle to the rig's own port (loopback).
pub(crate) fn self_ah<C: Context>(rig: &Rig<C>) -> C::Ah {
    rig.ctx.create_ah(&rig.pd, &rig.self_av()).expect("ah")
}

/// An address handle to the multicast group `group` on the rig's port.
pub(crate) fn group_ah<C: Context>(rig: &Rig<C>, group: Gid) -> C::Ah {
    let mut av = rig.self_av();
    av.grh.dgid = group;
    rig.ctx.create_ah(&rig.pd, &av).expect("multicast AH")
}

/// Two UD QPs in RTS, `a` and `b`, each on its own CQ (a [`Pair`], which it derefs to),
/// an address handle to the port, and 4 KiB of registered memory.
pub(crate) struct UdPair<C: Context> {
    pub pair: Pair<C>,
    pub ah: C::Ah,
    pub mr: C::Mr,
}

impl<C: Context> std::ops::Deref for UdPair<C> {
    type Target = Pair<C>;

    fn deref(&self) -> &Pair<C> {
        &self.pair
    }
}

pub(crate) fn ud_pair<C: Context>(rig: &Rig<C>, log: &mut Log) -> UdPair<C> {
    let cq_a = rig.cq(16);
    let cq_b = rig.cq(16);
    let a = ud(rig, &cq_a.cq, "a", log);
    let b = ud(rig, &cq_b.cq, "b", log);
    UdPair {
        pair: Pair { cq_a, cq_b, a, b },
        ah: self_ah(rig),
        mr: rig.mr(4096, AccessFlags::empty()),
    }
}

/// An SRQ of `max_wr` receives of up to `max_sge` SGEs, with no limit armed.
pub(crate) fn new_srq<C: Context>(rig: &Rig<C>, max_wr: u32, max_sge: u32) -> C::Srq {
    rig.ctx
        .create_srq(&rig.pd, &srq_attr(max_wr, max_sge, 0))
        .expect("create_srq")
}

/// Arms (or, with 0, disarms) `srq`'s limit: a MODIFY of SRQ_LIMIT alone.
pub(crate) fn set_srq_limit<S: SharedReceiveQueue>(srq: &S, limit: u32) -> Result<()> {
    let attr = SrqAttr {
        max_wr: 0,
        max_sge: 0,
        srq_limit: limit,
    };
    srq.modify(&attr, SrqAttrMask::LIMIT)
}

/// A UD QP in RTS completing to `cq` whose receives come from `srq`, named `name` in
/// `log`.
pub(crate) fn ud_on_srq<C: Context>(
    rig: &Rig<C>,
    cq: &C::Cq,
    srq: &C::Srq,
    name: &'static str,
    log: &mut Log,
) -> C::Qp {
    let qp = rig.qp_on_srq(QpType::Ud, cq, srq);
    bring_up_ud(rig, &qp, QpState::Rts);
    log.qp(name, &qp);
    qp
}
