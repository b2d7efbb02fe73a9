//! QPs on ids: `rdma_create_qp(_ex)` (CQs made for the id when the program gives none, the
//! QP moved to INIT, or to RTS for UD), `rdma_destroy_qp`, and `rdma_init_qp_attr`, the
//! attributes each state needs as the kernel computes them (cma.c `rdma_init_qp_attr`,
//! `cma_ib_init_qp_attr`; cm.c `cm_init_qp_init_attr`, `_rtr_attr`, `_rts_attr`).

use std::ffi::c_int;
use std::ptr::null_mut;

use crate::base::boundary::{boundary, MinusOne, Nothing};
use crate::base::ffi;
use crate::base::pointer::{try_mut_from_ptr, try_ref_from_ptr};
use crate::base::sync::lock;
use crate::rdmacm::core::id_state::{fail, CmId, Conn, IdInner};
use crate::rdmacm::core::route;
use crate::verbs::comp_channel::{ibv_create_comp_channel, ibv_destroy_comp_channel};
use crate::verbs::cq::{ibv_create_cq, ibv_destroy_cq};
use crate::verbs::qp::{ibv_destroy_qp, ibv_modify_qp};

/// The attributes (and mask) that take an id's QP to `state`.
///
/// # Errors
/// EINVAL for an id without a device, or a state its connection cannot give yet.
pub fn init_attr(g: &IdInner, state: u32) -> Result<(ffi::ibv_qp_attr, c_int), c_int> {
    if g.device.is_none() {
        return Err(libc::EINVAL);
    }
    let mut a = ffi::ibv_qp_attr {
        qp_state: state,
        ..ffi::ibv_qp_attr::default()
    };
    let no_cm = matches!(g.conn, Conn::None | Conn::SidrReqSent | Conn::SidrReqRcvd);
    if g.qp_type == ffi::IBV_QPT_UD || no_cm {
        // cma_ib_init_qp_attr: the INIT attributes, whatever state was asked for.
        a.pkey_index = 0;
        a.port_num = route::PORT;
        let mut mask = ffi::IBV_QP_STATE | ffi::IBV_QP_PKEY_INDEX | ffi::IBV_QP_PORT;
        if g.qp_type == ffi::IBV_QPT_UD {
            a.qkey = g.qkey;
            mask |= ffi::IBV_QP_QKEY;
        } else {
            a.qp_access_flags = 0;
            mask |= ffi::IBV_QP_ACCESS_FLAGS;
        }
        if state == ffi::IBV_QPS_RTR {
            a.rq_psn = g.seq;
        }
        return Ok((a, mask as c_int));
    }
    let live = matches!(
        g.conn,
        Conn::ReqRcvd | Conn::RepRcvd | Conn::RepSent | Conn::Established
    );
    let rc = g.qp_type == ffi::IBV_QPT_RC;
    let mask = match state {
        ffi::IBV_QPS_INIT if live || g.conn == Conn::ReqSent => {
            a.qp_access_flags = ffi::IBV_ACCESS_REMOTE_WRITE;
            if g.resp_res != 0 {
                a.qp_access_flags |= ffi::IBV_ACCESS_REMOTE_READ | ffi::IBV_ACCESS_REMOTE_ATOMIC;
            }
            a.pkey_index = 0;
            a.port_num = route::PORT;
            ffi::IBV_QP_STATE | ffi::IBV_QP_ACCESS_FLAGS | ffi::IBV_QP_PKEY_INDEX | ffi::IBV_QP_PORT
        }
        ffi::IBV_QPS_RTR if live => {
            let Some(peer) = g.peer else {
                return Err(libc::EINVAL);
            };
            a.ah_attr = route::ah_attr(g);
            a.path_mtu = g.device.map_or(ffi::IBV_MTU_1024, route::path_mtu);
            a.dest_qp_num = peer.qpn;
            // cma.c: the receive PSN is the id's own sequence number (the CM gives each
            // direction the PSN of the side that receives on it).
            a.rq_psn = g.seq;
            let mut m = ffi::IBV_QP_STATE
                | ffi::IBV_QP_AV
                | ffi::IBV_QP_PATH_MTU
                | ffi::IBV_QP_DEST_QPN
                | ffi::IBV_QP_RQ_PSN;
            if rc {
                a.max_dest_rd_atomic = g.resp_res;
                a.min_rnr_timer = 0;
                m |= ffi::IBV_QP_MAX_DEST_RD_ATOMIC | ffi::IBV_QP_MIN_RNR_TIMER;
            }
            m
        }
        ffi::IBV_QPS_RTS if live => {
            let Some(peer) = g.peer else {
                return Err(libc::EINVAL);
            };
            a.sq_psn = peer.psn;
            let mut m = ffi::IBV_QP_STATE | ffi::IBV_QP_SQ_PSN;
            if rc {
                a.timeout = route::ack_timeout(g);
                a.retry_cnt = g.retry_count;
                a.rnr_retry = g.rnr_retry_count;
                a.max_rd_atomic = g.init_depth;
                m |= ffi::IBV_QP_TIMEOUT
                    | ffi::IBV_QP_RETRY_CNT
                    | ffi::IBV_QP_RNR_RETRY
                    | ffi::IBV_QP_MAX_QP_RD_ATOMIC;
            }
            m
        }
        _ => return Err(libc::EINVAL),
    };
    Ok((a, mask as c_int))
}

/// Moves `qp` with the attributes of `state` (and `tweak`); the errno on failure.
fn step(
    qp: *mut ffi::ibv_qp,
    g: &IdInner,
    state: u32,
    tweak: impl FnOnce(&mut ffi::ibv_qp_attr),
) -> Result<(), c_int> {
    let (mut a, mask) = init_attr(g, state)?;
    tweak(&mut a);
    // SAFETY: `qp` is the id's live QP; `a` a local attribute.
    match unsafe { ibv_modify_qp(qp, &mut a, mask) } {
        0 => Ok(()),
        e => Err(e),
    }
}

/// librdmacm's `ucma_modify_qp_rtr`: INIT again (the connection's access flags), then RTR;
/// `resp_res` other than `RDMA_MAX_RESP_RES` replaces the responder resources.
///
/// # Errors
/// The errno of the failing step.
///
/// # Safety
/// `qp` is NULL or a live QP of ours.
pub unsafe fn modify_rtr(qp: *mut ffi::ibv_qp, g: &IdInner, resp_res: u8) -> Result<(), c_int> {
    if qp.is_null() {
        return Ok(());
    }
    step(qp, g, ffi::IBV_QPS_INIT, |_| {})?;
    step(qp, g, ffi::IBV_QPS_RTR, |a| {
        if u32::from(resp_res) != ffi::RDMA_MAX_RESP_RES {
            a.max_dest_rd_atomic = resp_res;
        }
    })
}

/// librdmacm's `ucma_modify_qp_rts`.
///
/// # Errors
/// The errno of the modify.
///
/// # Safety
/// `qp` is NULL or a live QP of ours.
pub unsafe fn modify_rts(qp: *mut ffi::ibv_qp, g: &IdInner, init_depth: u8) -> Result<(), c_int> {
    if qp.is_null() {
        return Ok(());
    }
    step(qp, g, ffi::IBV_QPS_RTS, |a| {
        if u32::from(init_depth) != ffi::RDMA_MAX_INIT_DEPTH {
            a.max_rd_atomic = init_depth;
        }
    })
}

/// librdmacm's `ucma_modify_qp_err`: the QP (if any) to ERROR.
///
/// # Safety
/// `qp` is NULL or a live QP of ours.
pub unsafe fn modify_err(qp: *mut ffi::ibv_qp) -> c_int {
    if qp.is_null() {
        return 0;
    }
    let mut a = ffi::ibv_qp_attr {
        qp_state: ffi::IBV_QPS_ERR,
        ..ffi::ibv_qp_attr::default()
    };
    // SAFETY: the id's live QP and a local attribute.
    unsafe { ibv_modify_qp(qp, &mut a, ffi::IBV_QP_STATE as c_int) }
}

/// `rdma_init_qp_attr`.
///
/// # Safety
/// `id` is a live id of ours; `qp_attr` and `qp_attr_mask` are valid for reads and writes.
pub unsafe extern "C" fn rdma_init_qp_attr(
    id: *mut ffi::rdma_cm_id,
    qp_attr: *mut ffi::ibv_qp_attr,
    qp_attr_mask: *mut c_int,
) -> c_int {
    boundary(MinusOne, move || {
        // SAFETY: NULL or the caller's live id and attribute.
        let (cid, a): (&mut CmId, &ffi::ibv_qp_attr) = unsafe {
            (
                try_mut_from_ptr!(id, fail(libc::EINVAL)),
                try_ref_from_ptr!(qp_attr, fail(libc::EINVAL)),
            )
        };
        if qp_attr_mask.is_null() {
            return fail(libc::EINVAL);
        }
        let state = a.qp_state;
        let g = lock(&cid.shared.inner);
        match init_attr(&g, state) {
            Ok((a, m)) => {
                // SAFETY: the caller's writable attribute and mask.
                unsafe {
                    qp_attr.write(a);
                    qp_attr_mask.write(m);
                }
                0
            }
            Err(e) => fail(e),
        }
    })
}

/// librdmacm's `ucma_destroy_cqs`.
/// The CQs and channels are those `create_cqs` made for this id; nothing else destroys
/// them.
fn destroy_cqs(raw: &mut ffi::rdma_cm_id) {
    let (send, recv) = (raw.send_cq, raw.recv_cq);
    for cq in [recv, if send == recv { null_mut() } else { send }] {
        if !cq.is_null() {
            // SAFETY: a CQ made for this id by `create_cqs` (see above).
            unsafe { ibv_destroy_cq(cq) };
        }
    }
    raw.send_cq = null_mut();
    raw.recv_cq = null_mut();
    for ch in [&mut raw.recv_cq_channel, &mut raw.send_cq_channel] {
        if !ch.is_null() {
            // SAFETY: a channel made for this id by `create_cqs`.
            unsafe { ibv_destroy_comp_channel(*ch) };
            *ch = null_mut();
        }
    }
}

/// librdmacm's `ucma_create_cqs`: a channel and a CQ for each non-zero size.
fn create_cqs(raw: &mut ffi::rdma_cm_id, send: u32, recv: u32) -> Result<(), c_int> {
    let ctx = raw.verbs;
    let ctx_arg = std::ptr::from_mut(raw).cast::<std::ffi::c_void>();
    let make = |size: u32| -> Result<(*mut ffi::ibv_comp_channel, *mut ffi::ibv_cq), c_int> {
        // SAFETY: `ctx` is the id's live context.
        let ch = unsafe { ibv_create_comp_channel(ctx) };
        if ch.is_null() {
            return Err(crate::base::errno::last_errno());
        }
        let cqe = c_int::try_from(size).unwrap_or(c_int::MAX);
        // SAFETY: as above, with the channel just made.
        let cq = unsafe { ibv_create_cq(ctx, cqe, ctx_arg, ch, 0) };
        if cq.is_null() {
            let e = crate::base::errno::last_errno();
            // SAFETY: the channel just made, unused.
            unsafe { ibv_destroy_comp_channel(ch) };
            return Err(e);
        }
        Ok((ch, cq))
    };
    if recv != 0 {
        let (ch, cq) = make(recv)?;
        raw.recv_cq_channel = ch;
        raw.recv_cq = cq;
    }
    if send != 0 {
        match make(send) {
            Ok((ch, cq)) => {
                raw.send_cq_channel = ch;
                raw.send_cq = cq;
            }
            Err(e) => {
                destroy_cqs(raw);
                return Err(e);
            }
        }
    }
    Ok(())
}

/// librdmacm's `ucma_init_ud_qp`: INIT with the id's attributes, then RTR, then RTS.
fn init_ud_qp(qp: *mut ffi::ibv_qp, g: &IdInner) -> Result<(), c_int> {
    step(qp, g, ffi::IBV_QPS_INIT, |_| {})?;
    let mut a = ffi::ibv_qp_attr {
        qp_state: ffi::IBV_QPS_RTR,
        ..ffi::ibv_qp_attr::default()
    };
    // SAFETY: the new QP and a local attribute.
    let r = unsafe { ibv_modify_qp(qp, &mut a, ffi::IBV_QP_STATE as c_int) };
    if r != 0 {
        return Err(r);
    }
    a.qp_state = ffi::IBV_QPS_RTS;
    a.sq_psn = 0;
    // SAFETY: as above.
    match unsafe {
        ibv_modify_qp(
            qp,
            &mut a,
            (ffi::IBV_QP_STATE | ffi::IBV_QP_SQ_PSN) as c_int,
        )
    } {
        0 => Ok(()),
        e => Err(e),
    }
}

/// `rdma_create_qp_ex`.
///
/// # Safety
/// `id` is a live id of ours; `attr` is valid and names live objects of ours.
pub unsafe extern "C" fn rdma_create_qp_ex(
    id: *mut ffi::rdma_cm_id,
    attr: *mut ffi::ibv_qp_init_attr_ex,
) -> c_int {
    boundary(MinusOne, move || {
        // SAFETY: NULL or the caller's live id and attributes.
        let (cid, a): (&mut CmId, &mut ffi::ibv_qp_init_attr_ex) = unsafe {
            (
                try_mut_from_ptr!(id, fail(libc::EINVAL)),
                try_mut_from_ptr!(attr, fail(libc::EINVAL)),
            )
        };
        match create_qp_ex(cid, a) {
            Ok(()) => 0,
            Err(e) => fail(e),
        }
    })
}

fn create_qp_ex(cid: &mut CmId, a: &mut ffi::ibv_qp_init_attr_ex) -> Result<(), c_int> {
    let raw = &mut cid.raw;
    if !raw.qp.is_null() || raw.verbs.is_null() {
        return Err(libc::EINVAL);
    }
    if a.comp_mask & ffi::IBV_QP_INIT_ATTR_PD == 0 || a.pd.is_null() {
        a.comp_mask |= ffi::IBV_QP_INIT_ATTR_PD;
        a.pd = raw.pd;
    } else {
        // SAFETY: the program's live PD.
        if raw.verbs != unsafe { (*a.pd).context } {
            return Err(libc::EINVAL);
        }
    }
    if (!raw.recv_cq.is_null() && !a.recv_cq.is_null() && raw.recv_cq != a.recv_cq)
        || (!raw.send_cq.is_null() && !a.send_cq.is_null() && raw.send_cq != a.send_cq)
    {
        return Err(libc::EINVAL);
    }
    let send = if a.send_cq.is_null() && raw.send_cq.is_null() {
        a.cap.max_send_wr
    } else {
        0
    };
    let recv = if a.recv_cq.is_null() && raw.recv_cq.is_null() {
        a.cap.max_recv_wr
    } else {
        0
    };
    create_cqs(raw, send, recv)?;
    if a.send_cq.is_null() {
        a.send_cq = raw.send_cq;
    }
    if a.recv_cq.is_null() {
        a.recv_cq = raw.recv_cq;
    }
    if !raw.srq.is_null() && a.srq.is_null() {
        a.srq = raw.srq;
    }
    // SAFETY: the id's live context and the program's attributes.
    let qp = unsafe { crate::verbs::qp_ex::create_qp_ex(raw.verbs, a) };
    if qp.is_null() {
        let e = crate::base::errno::last_errno();
        destroy_cqs(raw);
        return Err(e);
    }
    let g = lock(&cid.shared.inner);
    let ready = if g.qp_type == ffi::IBV_QPT_UD {
        init_ud_qp(qp, &g)
    } else {
        step(qp, &g, ffi::IBV_QPS_INIT, |_| {})
    };
    drop(g);
    if let Err(e) = ready {
        // SAFETY: the QP just made, not handed out.
        unsafe { ibv_destroy_qp(qp) };
        destroy_cqs(&mut cid.raw);
        return Err(e);
    }
    // SAFETY: the live QP just made.
    cid.raw.pd = unsafe { (*qp).pd };
    cid.raw.qp = qp;
    Ok(())
}

/// `rdma_create_qp`: `rdma_create_qp_ex` with `pd` (or the id's PD); the chosen sizes and
/// CQs are written back to `qp_init_attr`.
///
/// # Safety
/// `id` is a live id of ours; `pd` is NULL or a live PD of ours; `qp_init_attr` is valid.
pub unsafe extern "C" fn rdma_create_qp(
    id: *mut ffi::rdma_cm_id,
    pd: *mut ffi::ibv_pd,
    qp_init_attr: *mut ffi::ibv_qp_init_attr,
) -> c_int {
    boundary(MinusOne, move || {
        // SAFETY: NULL or the caller's live id and valid attributes.
        let (cid, i): (&mut CmId, &mut ffi::ibv_qp_init_attr) = unsafe {
            (
                try_mut_from_ptr!(id, fail(libc::EINVAL)),
                try_mut_from_ptr!(qp_init_attr, fail(libc::EINVAL)),
            )
        };
        let mut ex = ffi::ibv_qp_init_attr_ex {
            qp_context: i.qp_context,
            send_cq: i.send_cq,
            recv_cq: i.recv_cq,
            srq: i.srq,
            cap: i.cap,
            qp_type: i.qp_type,
            sq_sig_all: i.sq_sig_all,
            comp_mask: ffi::IBV_QP_INIT_ATTR_PD,
            pd: if pd.is_null() { cid.raw.pd } else { pd },
            ..ffi::ibv_qp_init_attr_ex::default()
        };
        let r = create_qp_ex(cid, &mut ex);
        i.send_cq = ex.send_cq;
        i.recv_cq = ex.recv_cq;
        i.srq = ex.srq;
        i.cap = ex.cap;
        match r {
            Ok(()) => 0,
            Err(e) => fail(e),
        }
    })
}

/// `rdma_destroy_qp`: the id's QP, and the CQs made for it.
///
/// # Safety
/// `id` is a live id of ours.
pub unsafe extern "C" fn rdma_destroy_qp(id: *mut ffi::rdma_cm_id) {
    boundary(Nothing, move || {
        // SAFETY: NULL or the caller's live id.
        let cid: &mut CmId = unsafe { try_mut_from_ptr!(id) };
        if !cid.raw.qp.is_null() {
            // SAFETY: the id's QP, made by rdma_create_qp.
            unsafe { ibv_destroy_qp(cid.raw.qp) };
            cid.raw.qp = null_mut();
        }
        destroy_cqs(&mut cid.raw);
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rdmacm::core::event_queue::ChannelShared;
    use crate::rdmacm::core::id_state::Peer;
    use crate::rdmacm::core::messages::Endpoint;
    use std::sync::Arc;

    fn id(qp_type: u32, conn: Conn) -> IdInner {
        let ch = Arc::new(ChannelShared::new().unwrap());
        let mut g = IdInner::new(ffi::RDMA_PS_TCP, qp_type, 0x1234, ch, false);
        g.device = Some(0);
        g.conn = conn;
        g.peer = Some(Peer {
            ep: Endpoint {
                host: std::net::Ipv4Addr::new(10, 100, 0, 1),
                id: 9,
            },
            qpn: 77,
            psn: 0x5678,
        });
        g.resp_res = 2;
        g.init_depth = 3;
        g.retry_count = 6;
        g.rnr_retry_count = 5;
        g
    }

    fn mask(bits: &[u32]) -> c_int {
        bits.iter().fold(0, |m, b| m | *b) as c_int
    }

    #[test]
    fn before_a_connection_every_state_gets_the_init_attributes() {
        let mut g = id(ffi::IBV_QPT_UD, Conn::None);
        g.qkey = ffi::RDMA_UDP_QKEY;
        let (a, m) = init_attr(&g, ffi::IBV_QPS_INIT).unwrap();
        let want = [
            ffi::IBV_QP_STATE,
            ffi::IBV_QP_PKEY_INDEX,
            ffi::IBV_QP_PORT,
            ffi::IBV_QP_QKEY,
        ];
        assert_eq!(m, mask(&want));
        assert_eq!(
            (a.qkey, a.port_num, a.qp_state),
            (ffi::RDMA_UDP_QKEY, 1, ffi::IBV_QPS_INIT)
        );
        let g = id(ffi::IBV_QPT_RC, Conn::None);
        let (a, m) = init_attr(&g, ffi::IBV_QPS_RTR).unwrap();
        let want = [
            ffi::IBV_QP_STATE,
            ffi::IBV_QP_PKEY_INDEX,
            ffi::IBV_QP_PORT,
            ffi::IBV_QP_ACCESS_FLAGS,
        ];
        assert_eq!(m, mask(&want));
        assert_eq!((a.qp_access_flags, a.rq_psn), (0, 0x1234));
        let mut g = id(ffi::IBV_QPT_RC, Conn::None);
        g.device = None;
        assert_eq!(init_attr(&g, ffi::IBV_QPS_INIT).err(), Some(libc::EINVAL));
    }

    #[test]
    fn a_connection_gives_the_cm_attributes_of_each_state() {
        let g = id(ffi::IBV_QPT_RC, Conn::ReqRcvd);
        let (a, _) = init_attr(&g, ffi::IBV_QPS_INIT).unwrap();
        assert_eq!(
            a.qp_access_flags,
            ffi::IBV_ACCESS_REMOTE_WRITE
                | ffi::IBV_ACCESS_REMOTE_READ
                | ffi::IBV_ACCESS_REMOTE_ATOMIC
        );
        let (a, m) = init_attr(&g, ffi::IBV_QPS_RTS).unwrap();
        let want = [
            ffi::IBV_QP_STATE,
            ffi::IBV_QP_SQ_PSN,
            ffi::IBV_QP_TIMEOUT,
            ffi::IBV_QP_RETRY_CNT,
            ffi::IBV_QP_RNR_RETRY,
            ffi::IBV_QP_MAX_QP_RD_ATOMIC,
        ];
        assert_eq!(m, mask(&want));
        // The send PSN is the peer's starting PSN; the ACK timeout the path's life + 1.
        assert_eq!(
            (
                a.sq_psn,
                a.timeout,
                a.retry_cnt,
                a.rnr_retry,
                a.max_rd_atomic
            ),
            (0x5678, 19, 6, 5, 3)
        );
        let mut uc = id(ffi::IBV_QPT_UC, Conn::Established);
        uc.ack_timeout = Some(14);
        let (_, m) = init_attr(&uc, ffi::IBV_QPS_RTS).unwrap();
        assert_eq!(m, mask(&[ffi::IBV_QP_STATE, ffi::IBV_QP_SQ_PSN]));
        assert_eq!(route::ack_timeout(&uc), 14);
        // Nothing to move to RTR with before the REP, nor to SQD ever.
        let sent = id(ffi::IBV_QPT_RC, Conn::ReqSent);
        assert_eq!(init_attr(&sent, ffi::IBV_QPS_RTR).err(), Some(libc::EINVAL));
        assert!(init_attr(&sent, ffi::IBV_QPS_INIT).is_ok());
        assert_eq!(init_attr(&g, ffi::IBV_QPS_SQD).err(), Some(libc::EINVAL));
    }
}
