//! The function tables of an open context: `ibv_context.ops` (the data path that the
//! static-inline `ibv_post_send`, `ibv_post_recv`, `ibv_poll_cq` and `ibv_req_notify_cq`
//! jump through) and `struct verbs_context` (the extended verbs such as
//! `ibv_query_device_ex` and `ibv_create_flow`). Ops the emulator lacks return
//! EOPNOTSUPP (or NULL with errno EOPNOTSUPP) and say so once on stderr. The ops
//! themselves live with their objects (`poll_cq` in [`super::cq`], `post_send` in
//! [`super::qp`] ...); `ibv_open_device` is here, as it installs the tables.

use std::ffi::{c_int, c_void};
use std::ptr::null_mut;

use crate::base::boundary::{boundary, Null, ReturnsErrno};
use crate::base::errno::set_errno;
use crate::base::ffi;
use crate::base::log::log_unsupported_once;
use crate::verbs::context::{open_device, query_device_ex, query_port};
use crate::verbs::cq::{poll_cq, req_notify_cq};
use crate::verbs::mr::{alloc_mw, bind_mw, dealloc_mw};
use crate::verbs::qp::{post_recv, post_send};

/// `ibv_open_device`: a context whose tables are [`fill_ops`]'.
///
/// # Safety
/// `device` is a device of a list from this library.
pub unsafe extern "C" fn ibv_open_device(device: *mut ffi::ibv_device) -> *mut ffi::ibv_context {
    // SAFETY: the caller's device.
    boundary(Null, move || unsafe { open_device(device, fill_ops) })
}

/// Fills the tables of a new context: `abi_compat = UINTPTR_MAX` and `sz` make
/// `verbs_get_ctx` find the `verbs_context`; every op points at this library.
pub fn fill_ops(v: &mut ffi::verbs_context) {
    v.context.abi_compat = usize::MAX as *mut c_void;
    v.sz = std::mem::size_of::<ffi::verbs_context>();

    let ops = &mut v.context.ops;
    ops.poll_cq = Some(poll_cq);
    ops.req_notify_cq = Some(req_notify_cq);
    ops.post_send = Some(post_send);
    ops.post_recv = Some(post_recv);
    ops.post_srq_recv = Some(crate::verbs::srq::post_srq_recv);
    ops.alloc_mw = Some(alloc_mw);
    ops.bind_mw = Some(bind_mw);
    ops.dealloc_mw = Some(dealloc_mw);

    v.query_port = Some(query_port);
    v.query_device_ex = Some(query_device_ex);
    v.ibv_create_flow = Some(crate::verbs::flow::create_flow);
    v.ibv_destroy_flow = Some(crate::verbs::flow::destroy_flow);
    v.create_cq_ex = Some(crate::verbs::cq_ex::create_cq_ex);
    v.create_qp_ex = Some(crate::verbs::qp_ex::create_qp_ex);
    v.create_srq_ex = Some(create_srq_ex);
    v.open_xrcd = Some(open_xrcd);
    v.open_qp = Some(open_qp);
    v.create_wq = Some(create_wq);
    v.query_rt_values = Some(query_rt_values);
    v.alloc_td = Some(alloc_td);
    v.alloc_parent_domain = Some(crate::verbs::pd::alloc_parent_domain);
    v.modify_cq = Some(modify_cq);
    v.alloc_dm = Some(alloc_dm);
    v.create_counters = Some(create_counters);
    v.advise_mr = Some(advise_mr);
    v.alloc_null_mr = Some(alloc_null_mr);
}

/// Defines an op the emulator does not have yet: it logs once and fails with
/// EOPNOTSUPP, as an int (`-> int`) or as NULL with errno (`-> ptr T`).
macro_rules! refuse {
    ($name:ident, $verb:literal, ($($t:ty),*) -> int) => {
        extern "C" fn $name($(_: $t),*) -> c_int {
            boundary(ReturnsErrno, || {
            log_unsupported_once($verb, "EOPNOTSUPP");
            libc::EOPNOTSUPP
            })
        }
    };
    ($name:ident, $verb:literal, ($($t:ty),*) -> ptr $r:ty) => {
        extern "C" fn $name($(_: $t),*) -> *mut $r {
            boundary(Null, || {
            log_unsupported_once($verb, "EOPNOTSUPP");
            set_errno(libc::EOPNOTSUPP);
            null_mut()
            })
        }
    };
}

type Ctx = *mut ffi::ibv_context;
refuse!(create_srq_ex, "ibv_create_srq_ex", (Ctx, *mut ffi::ibv_srq_init_attr_ex) -> ptr ffi::ibv_srq);
refuse!(open_xrcd, "ibv_open_xrcd", (Ctx, *mut ffi::ibv_xrcd_init_attr) -> ptr ffi::ibv_xrcd);
refuse!(open_qp, "ibv_open_qp", (Ctx, *mut ffi::ibv_qp_open_attr) -> ptr ffi::ibv_qp);
refuse!(create_wq, "ibv_create_wq", (Ctx, *mut ffi::ibv_wq_init_attr) -> ptr ffi::ibv_wq);
refuse!(query_rt_values, "ibv_query_rt_values_ex", (Ctx, *mut ffi::ibv_values_ex) -> int);
refuse!(alloc_td, "ibv_alloc_td", (Ctx, *mut ffi::ibv_td_init_attr) -> ptr ffi::ibv_td);
refuse!(modify_cq, "ibv_modify_cq", (*mut ffi::ibv_cq, *mut ffi::ibv_modify_cq_attr) -> int);
refuse!(alloc_dm, "ibv_alloc_dm", (Ctx, *mut ffi::ibv_alloc_dm_attr) -> ptr ffi::ibv_dm);
refuse!(create_counters, "ibv_create_counters", (Ctx, *mut ffi::ibv_counters_init_attr) -> ptr ffi::ibv_counters);
refuse!(advise_mr, "ibv_advise_mr", (*mut ffi::ibv_pd, ffi::ib_uverbs_advise_mr_advice, u32, *mut ffi::ibv_sge, u32) -> int);
refuse!(alloc_null_mr, "ibv_alloc_null_mr", (*mut ffi::ibv_pd) -> ptr ffi::ibv_mr);
