//! Connections between ids: `rdma_connect`, `rdma_accept`, `rdma_reject`,
//! `rdma_disconnect`, `rdma_establish` (librdmacm's checks and QP moves, then the kernel's
//! messages: cma.c `cma_connect_ib`, `cma_accept_ib`, `cma_resolve_ib_udp`,
//! `cma_send_sidr_rep`).

use std::ffi::{c_int, c_void};

use crate::base::boundary::{boundary, MinusOne};
use crate::base::ffi;
use crate::base::pointer::try_ref;
use crate::base::sync::lock;
use crate::objects::handles::EmuQp;
use crate::rdmacm::api::get_event::{
    complete, establish, CMA_HDR, REP_PRIVATE_DATA, REQ_PRIVATE_DATA, SIDR_REQ_PRIVATE_DATA,
};
use crate::rdmacm::api::id_qp::{modify_err, modify_rtr, modify_rts};
use crate::rdmacm::core::id_state::{fail, Conn, IdInner, State};
use crate::rdmacm::core::manager::cm_and_id;
use crate::rdmacm::core::messages::{
    Address, ConnData, Message, Service, REJ_CONSUMER_DEFINED, REJ_PRIVATE_DATA, SIDR_REJECT,
    SIDR_REP_PRIVATE_DATA,
};
use crate::rdmacm::core::sockaddr as addr;

/// The device's limits on RDMA reads in flight: (responder resources, initiator depth),
/// what librdmacm's `ucma_init_device` keeps (`max_qp_rd_atom`, `max_qp_init_rd_atom`).
fn device_limits(ctx: *mut ffi::ibv_context) -> (u8, u8) {
    let mut a = ffi::ibv_device_attr::default();
    // SAFETY: the id's live context and a local attribute.
    if ctx.is_null() || unsafe { crate::verbs::context::ibv_query_device(ctx, &mut a) } != 0 {
        return (0, 0);
    }
    let sat = |v: c_int| u8::try_from(v.clamp(0, 255)).unwrap_or(u8::MAX);
    (sat(a.max_qp_rd_atom), sat(a.max_qp_init_rd_atom))
}

/// The program's private data, checked against `max` bytes and padded to `full`.
///
/// # Safety
/// `p` is NULL or valid for `len` bytes.
unsafe fn private(p: *const c_void, len: u8, max: usize, full: usize) -> Result<Vec<u8>, c_int> {
    let len = usize::from(len);
    if len > max {
        return Err(libc::EINVAL);
    }
    let mut v = vec![0; full];
    if !p.is_null() && len > 0 {
        // SAFETY: the caller's `len` readable bytes.
        v[..len].copy_from_slice(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) });
    }
    Ok(v)
}

/// librdmacm's `ucma_valid_param` (TCP port space only).
fn valid_param(
    g: &IdInner,
    has_qp: bool,
    param: Option<&ffi::rdma_conn_param>,
    limits: (u8, u8),
) -> Result<(), c_int> {
    if g.ps != ffi::RDMA_PS_TCP {
        return Ok(());
    }
    let Some(p) = param else {
        return if has_qp { Ok(()) } else { Err(libc::EINVAL) };
    };
    let max_res = ffi::RDMA_MAX_RESP_RES as u8;
    if p.responder_resources != max_res && p.responder_resources > limits.0 {
        return Err(libc::EINVAL);
    }
    if p.initiator_depth != max_res && p.initiator_depth > limits.1 {
        return Err(libc::EINVAL);
    }
    Ok(())
}

/// `rdma_connect`: after ROUTE_RESOLVED, sends a REQ (SIDR REQ for UD) to the destination's
/// listener; ESTABLISHED (or CONNECT_RESPONSE for an id without a QP), REJECTED or
/// UNREACHABLE follows.
///
/// # Safety
/// `id` is a live id of ours; `conn_param` is NULL or valid.
pub unsafe extern "C" fn rdma_connect(
    id: *mut ffi::rdma_cm_id,
    conn_param: *mut ffi::rdma_conn_param,
) -> c_int {
    boundary(MinusOne, move || {
        // SAFETY: the caller's live id.
        let (c, cid) = match unsafe { cm_and_id(id) } {
            Ok(x) => x,
            Err(e) => return fail(e),
        };
        // SAFETY: the caller's parameters.
        let param = unsafe { conn_param.as_ref() };
        let limits = device_limits(cid.raw.verbs);
        let qp = cid.raw.qp;
        {
            let mut g = lock(&cid.shared.inner);
            if let Err(e) = valid_param(&g, !qp.is_null(), param, limits) {
                return fail(e);
            }
            if g.state != State::RouteResolved {
                return fail(libc::EINVAL);
            }
            let (Some(src), Some(dst)) = (g.src, g.dst) else {
                return fail(libc::EINVAL);
            };
            let max = ffi::RDMA_MAX_INIT_DEPTH as u8;
            g.init_depth = param
                .map(|p| p.initiator_depth)
                .filter(|&d| d != max)
                .unwrap_or(limits.1);
            g.resp_res = param
                .map(|p| p.responder_resources)
                .filter(|&d| d != max)
                .unwrap_or(limits.0);
            // SAFETY: NULL or the id's live QP.
            let (qpn, srq) = match unsafe { try_ref::<EmuQp>(qp) } {
                None => param.map_or((0, false), |p| (p.qp_num, p.srq != 0)),
                Some(q) => (q.raw.qp_base.qp_num, !q.raw.qp_base.srq.is_null()),
            };
            g.qp_num = qpn;
            g.srq = srq;
            g.flow_control = param.map_or(0, |p| p.flow_control);
            g.retry_count = param.map_or(7, |p| p.retry_count.min(7));
            g.rnr_retry_count = param.map_or(7, |p| p.rnr_retry_count.min(7));
            let service = Service {
                ip: addr::ipv4_of(&dst).unwrap_or(std::net::Ipv4Addr::UNSPECIFIED),
                port: dst.port(),
                ps: g.ps,
            };
            let (pd, pd_len) = param.map_or((std::ptr::null(), 0), |p| {
                (p.private_data, p.private_data_len)
            });
            let msg = if g.qp_type == ffi::IBV_QPT_UD {
                // SAFETY: the program's private data of the length it gives.
                let data = match unsafe {
                    private(
                        pd,
                        pd_len,
                        SIDR_REQ_PRIVATE_DATA - CMA_HDR,
                        SIDR_REQ_PRIVATE_DATA - CMA_HDR,
                    )
                } {
                    Ok(d) => d,
                    Err(e) => return fail(e),
                };
                g.conn = Conn::SidrReqSent;
                Message::SidrReq {
                    service,
                    src,
                    dst,
                    private_data: data,
                }
            } else {
                // SAFETY: as above.
                let data = match unsafe {
                    private(
                        pd,
                        pd_len,
                        REQ_PRIVATE_DATA - CMA_HDR,
                        REQ_PRIVATE_DATA - CMA_HDR,
                    )
                } {
                    Ok(d) => d,
                    Err(e) => return fail(e),
                };
                g.conn = Conn::ReqSent;
                Message::Req {
                    service,
                    src,
                    dst,
                    qp_type: g.qp_type,
                    data: ConnData {
                        qpn,
                        psn: g.seq,
                        responder_resources: g.resp_res,
                        initiator_depth: g.init_depth,
                        flow_control: g.flow_control,
                        retry_count: g.retry_count,
                        rnr_retry_count: g.rnr_retry_count,
                        srq,
                        private_data: data,
                    },
                }
            };
            g.state = State::Connect;
            c.send(cid.shared.endpoint, Address::Service(service), msg);
        }
        // SAFETY: the caller's live id.
        unsafe { complete(id) }
    })
}

/// `rdma_accept`: on a connect request's id, moves its QP to RTS and sends the REP (SIDR
/// REP for UD, which needs nothing more); ESTABLISHED follows when the RTU arrives.
///
/// # Safety
/// `id` is a live id of ours; `conn_param` is NULL or valid.
pub unsafe extern "C" fn rdma_accept(
    id: *mut ffi::rdma_cm_id,
    conn_param: *mut ffi::rdma_conn_param,
) -> c_int {
    boundary(MinusOne, move || {
        // SAFETY: the caller's live id.
        let (c, cid) = match unsafe { cm_and_id(id) } {
            Ok(x) => x,
            Err(e) => return fail(e),
        };
        // SAFETY: the caller's parameters.
        let param = unsafe { conn_param.as_ref() };
        let qp = cid.raw.qp;
        if qp.is_null() && param.is_none() {
            // librdmacm reads conn_param->qp_num here (and crashes); the emulator refuses.
            return fail(libc::EINVAL);
        }
        let limits = device_limits(cid.raw.verbs);
        let ud = {
            let mut g = lock(&cid.shared.inner);
            if let Err(e) = valid_param(&g, !qp.is_null(), param, limits) {
                return fail(e);
            }
            if g.state != State::Connect || !matches!(g.conn, Conn::ReqRcvd | Conn::SidrReqRcvd) {
                return fail(libc::EINVAL);
            }
            let max = ffi::RDMA_MAX_INIT_DEPTH as u8;
            g.init_depth = match param.map(|p| p.initiator_depth) {
                Some(d) if d != max => d,
                _ => g.init_depth.min(limits.1),
            };
            g.resp_res = match param.map(|p| p.responder_resources) {
                Some(d) if d != max => d,
                _ => g.resp_res.min(limits.0),
            };
            // SAFETY: NULL or the id's live QP.
            let (qpn, srq) = match unsafe { try_ref::<EmuQp>(qp) } {
                None => param.map_or((0, false), |p| (p.qp_num, p.srq != 0)),
                Some(q) => (q.raw.qp_base.qp_num, !q.raw.qp_base.srq.is_null()),
            };
            let Some(peer) = g.peer else {
                return fail(libc::EINVAL);
            };
            let (pd, pd_len) = param.map_or((std::ptr::null(), 0), |p| {
                (p.private_data, p.private_data_len)
            });
            let ud = g.qp_type == ffi::IBV_QPT_UD;
            let msg = if ud {
                // SAFETY: the program's private data.
                let data = match unsafe {
                    private(pd, pd_len, SIDR_REP_PRIVATE_DATA, SIDR_REP_PRIVATE_DATA)
                } {
                    Ok(d) => d,
                    Err(e) => return fail(e),
                };
                g.conn = Conn::Closed;
                Message::SidrRep {
                    status: 0,
                    qpn,
                    qkey: g.qkey,
                    private_data: data,
                }
            } else {
                // SAFETY: as above.
                let data = match unsafe { private(pd, pd_len, REP_PRIVATE_DATA, REP_PRIVATE_DATA) }
                {
                    Ok(d) => d,
                    Err(e) => return fail(e),
                };
                let (resp_res, init_depth) = (g.resp_res, g.init_depth);
                // SAFETY: the id's QP (or NULL).
                let moved = unsafe {
                    modify_rtr(qp, &g, resp_res).and_then(|()| modify_rts(qp, &g, init_depth))
                };
                if let Err(e) = moved {
                    return fail(e);
                }
                g.conn = Conn::RepSent;
                Message::Rep(ConnData {
                    qpn,
                    psn: g.seq,
                    responder_resources: g.resp_res,
                    initiator_depth: g.init_depth,
                    flow_control: param.map_or(0, |p| p.flow_control),
                    retry_count: 0,
                    rnr_retry_count: param.map_or(7, |p| p.rnr_retry_count.min(7)),
                    srq,
                    private_data: data,
                })
            };
            c.send(cid.shared.endpoint, Address::Endpoint(peer.ep), msg);
            ud
        };
        if ud {
            0
        } else {
            // SAFETY: the caller's live id.
            unsafe { complete(id) }
        }
    })
}

/// The kernel's reject (`ucma_reject`): REJ (consumer defined) to a connect request, or a
/// SIDR REP with status REJECT to a SIDR request.
fn reject(id: *mut ffi::rdma_cm_id, p: *const c_void, len: u8, reason: i32) -> c_int {
    // SAFETY: the caller's live id.
    let (c, cid) = match unsafe { cm_and_id(id) } {
        Ok(x) => x,
        Err(e) => return fail(e),
    };
    let mut g = lock(&cid.shared.inner);
    let Some(peer) = g.peer else {
        return fail(libc::EINVAL);
    };
    let msg = match (g.state, g.conn) {
        (State::Connect, Conn::ReqRcvd | Conn::RepRcvd) => {
            // SAFETY: the program's private data.
            match unsafe { private(p, len, REJ_PRIVATE_DATA, REJ_PRIVATE_DATA) } {
                Ok(d) => Message::Rej {
                    reason,
                    private_data: d,
                },
                Err(e) => return fail(e),
            }
        }
        (State::Connect, Conn::SidrReqRcvd) => {
            // SAFETY: as above.
            match unsafe { private(p, len, SIDR_REP_PRIVATE_DATA, SIDR_REP_PRIVATE_DATA) } {
                Ok(d) => Message::SidrRep {
                    status: SIDR_REJECT,
                    qpn: 0,
                    qkey: 0,
                    private_data: d,
                },
                Err(e) => return fail(e),
            }
        }
        _ => return fail(libc::EINVAL),
    };
    g.conn = Conn::Closed;
    c.send(cid.shared.endpoint, Address::Endpoint(peer.ep), msg);
    0
}

/// `rdma_reject`: the requester gets REJECTED with status 28 (consumer defined) and the
/// private data.
///
/// # Safety
/// `id` is a live id of ours; `private_data` is NULL or valid for `private_data_len` bytes.
pub unsafe extern "C" fn rdma_reject(
    id: *mut ffi::rdma_cm_id,
    private_data: *const c_void,
    private_data_len: u8,
) -> c_int {
    boundary(MinusOne, move || {
        reject(id, private_data, private_data_len, REJ_CONSUMER_DEFINED)
    })
}

/// `IB_CM_REJ_VENDOR_OPTION_NOT_SUPPORTED`, the reason of `rdma_reject_ece`.
const REJ_VENDOR_OPTION_NOT_SUPPORTED: i32 = 35;

/// `rdma_reject_ece`: a reject with reason 35 (vendor option not supported).
///
/// # Safety
/// As `rdma_reject`.
pub unsafe extern "C" fn rdma_reject_ece(
    id: *mut ffi::rdma_cm_id,
    private_data: *const c_void,
    private_data_len: u8,
) -> c_int {
    boundary(MinusOne, move || {
        reject(
            id,
            private_data,
            private_data_len,
            REJ_VENDOR_OPTION_NOT_SUPPORTED,
        )
    })
}

/// `rdma_disconnect`: the QP to ERROR, then a DREQ (or the DREP to the peer's DREQ);
/// DISCONNECTED follows on both sides. EINVAL for an id never connected.
///
/// # Safety
/// `id` is a live id of ours.
pub unsafe extern "C" fn rdma_disconnect(id: *mut ffi::rdma_cm_id) -> c_int {
    boundary(MinusOne, move || {
        // SAFETY: the caller's live id.
        let (c, cid) = match unsafe { cm_and_id(id) } {
            Ok(x) => x,
            Err(e) => return fail(e),
        };
        if cid.raw.verbs.is_null() {
            return fail(libc::EINVAL);
        }
        // SAFETY: the id's QP (or NULL).
        let r = unsafe { modify_err(cid.raw.qp) };
        if r != 0 {
            return fail(r);
        }
        {
            let mut g = lock(&cid.shared.inner);
            if g.conn == Conn::None {
                return fail(libc::EINVAL);
            }
            let to = g.peer.map(|p| Address::Endpoint(p.ep));
            let msg = match g.conn {
                Conn::Established => {
                    g.conn = Conn::DreqSent;
                    Some(Message::Dreq)
                }
                Conn::DreqRcvd => {
                    g.conn = Conn::Closed;
                    Some(Message::Drep)
                }
                _ => None,
            };
            if let (Some(to), Some(m)) = (to, msg) {
                c.send(cid.shared.endpoint, to, m);
            }
        }
        // SAFETY: the caller's live id.
        unsafe { complete(id) }
    })
}

/// `rdma_establish`: for an active id without a QP, after CONNECT_RESPONSE: sends the RTU.
///
/// # Safety
/// `id` is a live id of ours.
pub unsafe extern "C" fn rdma_establish(id: *mut ffi::rdma_cm_id) -> c_int {
    boundary(MinusOne, move || {
        // SAFETY: the caller's live id.
        let (c, cid) = match unsafe { cm_and_id(id) } {
            Ok(x) => x,
            Err(e) => return fail(e),
        };
        if !cid.raw.qp.is_null() {
            return fail(libc::EINVAL);
        }
        let ep = cid.shared.endpoint;
        let mut g = lock(&cid.shared.inner);
        match establish(c, &ep, &mut g) {
            Ok(()) => 0,
            Err(e) => fail(e),
        }
    })
}
