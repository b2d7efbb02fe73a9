//! Endpoints: `rdma_create_ep`, librdmacm's one-call set-up of a synchronous id (what
//! rdma-core's `rdma_server` and `rdma_client` use), and the QP that `rdma_get_request`
//! gives each connect request of a passive endpoint (librdmacm's cma.c,
//! `rdma_create_ep` and `ucma_passive_ep`); `rdma_destroy_ep`, `rdma_destroy_srq` and
//! `rdma_get_request` on them.

use std::ffi::c_int;

use crate::base::boundary::{boundary, MinusOne, Nothing};
use crate::base::ffi;
use crate::base::log::log_unsupported_once;
use crate::base::pointer::{try_mut, try_mut_from_ptr, try_ref_from_ptr};
use crate::base::sync::lock;
use crate::rdmacm::api::bind_resolve::{rdma_bind_addr, rdma_resolve_addr, rdma_resolve_route};
use crate::rdmacm::api::get_event::rdma_get_cm_event;
use crate::rdmacm::api::id_qp::rdma_create_qp;
use crate::rdmacm::api::ids::rdma_create_id;
use crate::rdmacm::core::id_state::CmId;
use crate::rdmacm::core::id_state::{cm_id, fail};

/// How long `rdma_create_ep` lets address and route resolution take (librdmacm's 2000 ms).
const RESOLVE_TIMEOUT_MS: c_int = 2000;

/// `rdma_create_ep`: a synchronous id (no event channel) of `res`'s port space and QP
/// type. With `RAI_PASSIVE` it is bound to `res->ai_src_addr` and keeps `pd` and a copy of
/// `qp_init_attr` for the QPs of the ids `rdma_get_request` hands out; otherwise it
/// resolves `res->ai_dst_addr` (from `ai_src_addr`, if given) and the route, and creates a
/// QP with `qp_init_attr` (if given) on `pd` (or the id's PD), ready for `rdma_connect`.
/// On failure nothing is left and errno says why.
///
/// `ai_route` and `ai_connect` (filled by rdma-core's `rdma_getaddrinfo` only from an
/// ib_acm service on InfiniBand; this library's never fills them) are refused with
/// EOPNOTSUPP.
///
/// # Safety
/// `id` is valid for a write; `res` is a valid `rdma_addrinfo`; `pd` is NULL or a live PD
/// of ours; `qp_init_attr` is NULL or valid (its `qp_type` is set to `res->ai_qp_type`).
pub unsafe extern "C" fn rdma_create_ep(
    id: *mut *mut ffi::rdma_cm_id,
    res: *mut ffi::rdma_addrinfo,
    pd: *mut ffi::ibv_pd,
    qp_init_attr: *mut ffi::ibv_qp_init_attr,
) -> c_int {
    boundary(MinusOne, move || {
        if id.is_null() {
            return fail(libc::EINVAL);
        }
        // SAFETY: NULL or the caller's valid addrinfo.
        let r: &ffi::rdma_addrinfo = unsafe { try_ref_from_ptr!(res, fail(libc::EINVAL)) };
        if r.ai_route_len != 0 || r.ai_connect_len != 0 {
            log_unsupported_once(
                "rdma_create_ep",
                "an rdma_addrinfo with ai_route or ai_connect (ib_acm's path records)",
            );
            return fail(libc::EOPNOTSUPP);
        }
        let (Ok(qp_type), Ok(ps)) = (u32::try_from(r.ai_qp_type), u32::try_from(r.ai_port_space))
        else {
            return fail(libc::EINVAL);
        };
        if !matches!(qp_type, ffi::IBV_QPT_RC | ffi::IBV_QPT_UD) {
            return fail(libc::EINVAL);
        }
        let mut cm = std::ptr::null_mut();
        // SAFETY: a NULL channel asks for a synchronous id; `cm` is a local out-pointer.
        if unsafe { rdma_create_id(std::ptr::null_mut(), &mut cm, std::ptr::null_mut(), ps) } != 0 {
            return -1;
        }
        // SAFETY: the id just made.
        let cid = unsafe { cm_id(cm) };
        cid.raw.qp_type = qp_type;
        lock(&cid.shared.inner).qp_type = qp_type;
        // SAFETY: the id just made, the caller's addrinfo, PD and attributes.
        let made = unsafe {
            if r.ai_flags & ffi::RAI_PASSIVE as c_int != 0 {
                passive(cm, r, qp_type, pd, qp_init_attr)
            } else {
                active(cm, r, qp_type, pd, qp_init_attr)
            }
        };
        if made != 0 {
            let errno = crate::base::errno::last_errno();
            // SAFETY: the id made above, not handed out.
            unsafe { rdma_destroy_ep(cm) };
            return fail(errno);
        }
        // SAFETY: the caller's writable pointer.
        unsafe { id.write(cm) };
        0
    })
}

/// librdmacm's `ucma_passive_ep`.
///
/// # Safety
/// As [`rdma_create_ep`]'s, `cm` a synchronous id just made.
unsafe fn passive(
    cm: *mut ffi::rdma_cm_id,
    r: &ffi::rdma_addrinfo,
    qp_type: u32,
    pd: *mut ffi::ibv_pd,
    qp_init_attr: *mut ffi::ibv_qp_init_attr,
) -> c_int {
    // SAFETY: the id and the caller's address.
    if unsafe { rdma_bind_addr(cm, r.ai_src_addr.cast()) } != 0 {
        return -1;
    }
    // SAFETY: the live id.
    let cid = unsafe { cm_id(cm) };
    if !pd.is_null() {
        cid.raw.pd = pd;
    }
    if !qp_init_attr.is_null() {
        // SAFETY: the caller's valid attributes, copied.
        let mut a = unsafe { *qp_init_attr };
        a.qp_type = qp_type;
        cid.ep_qp_init_attr = Some(a);
    }
    0
}

/// The active half of `rdma_create_ep`.
///
/// # Safety
/// As [`rdma_create_ep`]'s, `cm` a synchronous id just made.
unsafe fn active(
    cm: *mut ffi::rdma_cm_id,
    r: &ffi::rdma_addrinfo,
    qp_type: u32,
    pd: *mut ffi::ibv_pd,
    qp_init_attr: *mut ffi::ibv_qp_init_attr,
) -> c_int {
    // SAFETY: the id and the caller's addresses; a synchronous id waits for the events.
    unsafe {
        if rdma_resolve_addr(
            cm,
            r.ai_src_addr.cast(),
            r.ai_dst_addr.cast(),
            RESOLVE_TIMEOUT_MS,
        ) != 0
            || rdma_resolve_route(cm, RESOLVE_TIMEOUT_MS) != 0
        {
            return -1;
        }
        if let Some(i) = try_mut::<ffi::ibv_qp_init_attr>(qp_init_attr) {
            i.qp_type = qp_type;
            return rdma_create_qp(cm, pd, qp_init_attr);
        }
    }
    0
}

/// What `rdma_get_request` does for a passive endpoint's request, once it has the new id:
/// a QP made from the endpoint's saved attributes on its PD (none without them).
///
/// # Errors
/// -1 with errno from `rdma_create_qp`.
///
/// # Safety
/// `listen` and `new` are live ids of ours.
pub unsafe fn request_qp(listen: *mut ffi::rdma_cm_id, new: *mut ffi::rdma_cm_id) -> c_int {
    // SAFETY: the caller's live listener.
    let l = unsafe { cm_id(listen) };
    let Some(mut attr) = l.ep_qp_init_attr else {
        return 0;
    };
    let pd = l.raw.pd;
    // SAFETY: the live new id, the listener's PD and a local copy of the attributes.
    unsafe { rdma_create_qp(new, pd, &mut attr) }
}

/// `rdma_destroy_ep`: the id's QP, then the id.
///
/// # Safety
/// `id` is a live id of ours, destroyed once.
pub unsafe extern "C" fn rdma_destroy_ep(id: *mut ffi::rdma_cm_id) {
    boundary(Nothing, move || {
        if id.is_null() {
            return;
        }
        // SAFETY: the caller's live id.
        unsafe {
            crate::rdmacm::api::id_qp::rdma_destroy_qp(id);
            rdma_destroy_srq(id);
            crate::rdmacm::api::ids::rdma_destroy_id(id);
        }
    })
}

/// `rdma_destroy_srq`: the id's SRQ, if it has one.
///
/// # Safety
/// `id` is a live id of ours.
pub unsafe extern "C" fn rdma_destroy_srq(id: *mut ffi::rdma_cm_id) {
    boundary(Nothing, move || {
        // SAFETY: NULL or the caller's live id.
        let cid: &mut CmId = unsafe { try_mut_from_ptr!(id) };
        if !cid.raw.srq.is_null() {
            // SAFETY: the id's SRQ.
            unsafe { crate::verbs::srq::ibv_destroy_srq(cid.raw.srq) };
            cid.raw.srq = std::ptr::null_mut();
        }
    })
}

/// `rdma_get_request`: on a synchronous listener, waits for the next connect request and
/// gives its id (holding the event in `id->event`).
///
/// # Safety
/// `listen` is a live id of ours; `id` is valid for a write.
pub unsafe extern "C" fn rdma_get_request(
    listen: *mut ffi::rdma_cm_id,
    id: *mut *mut ffi::rdma_cm_id,
) -> c_int {
    boundary(MinusOne, move || {
        if id.is_null() {
            return fail(libc::EINVAL);
        }
        // SAFETY: NULL or the caller's live id.
        let l: &mut CmId = unsafe { try_mut_from_ptr!(listen, fail(libc::EINVAL)) };
        if !lock(&l.shared.inner).sync {
            return fail(libc::EINVAL);
        }
        if !l.raw.event.is_null() {
            // SAFETY: the listener's own unacknowledged event.
            unsafe { crate::rdmacm::api::get_event::rdma_ack_cm_event(l.raw.event) };
            l.raw.event = std::ptr::null_mut();
        }
        let mut ev = std::ptr::null_mut();
        // SAFETY: the listener's channel and a local out-pointer.
        if unsafe { rdma_get_cm_event(l.raw.channel, &mut ev) } != 0 {
            return -1;
        }
        // SAFETY: the event just received.
        let (kind, status, new) = unsafe { ((*ev).event, (*ev).status, (*ev).id) };
        let err = if kind == ffi::RDMA_CM_EVENT_REJECTED {
            Some(libc::ECONNREFUSED)
        } else if status != 0 {
            Some(-status)
        } else if kind != ffi::RDMA_CM_EVENT_CONNECT_REQUEST {
            Some(libc::EINVAL)
        } else {
            None
        };
        if let Some(e) = err {
            l.raw.event = ev;
            return fail(e);
        }
        // SAFETY: the listener and the request's new id, both live.
        if unsafe { request_qp(listen, new) } != 0 {
            // As librdmacm: the event stays with the listener, acknowledged by its next call.
            l.raw.event = ev;
            return -1;
        }
        // SAFETY: the new id of the request, now the program's; and the caller's pointer.
        unsafe {
            (*new).event = ev;
            id.write(new);
        }
        0
    })
}
