//! Ids come and go: `rdma_create_id`, `rdma_destroy_id`, `rdma_migrate_id`.

use std::ffi::{c_int, c_void};
use std::ptr::null_mut;
use std::sync::Arc;

use crate::base::boundary::{boundary, MinusOne};
use crate::base::ffi;
use crate::base::pointer::{try_mut_from_ptr, try_ref};
use crate::base::sync::lock;
use crate::rdmacm::api::event_channels::{rdma_destroy_event_channel, NonNullChannel};
use crate::rdmacm::api::get_event::rdma_ack_cm_event;
use crate::rdmacm::core::event_queue::EventChannel;
use crate::rdmacm::core::id_query::free_path;
use crate::rdmacm::core::id_state::{fail, CmId};
use crate::rdmacm::core::manager::cm_and_id;
use crate::rdmacm::core::manager::{cm, destroy_kernel};

fn qp_type_of(ps: u32) -> Option<u32> {
    match ps {
        ffi::RDMA_PS_TCP | ffi::RDMA_PS_IB => Some(ffi::IBV_QPT_RC),
        ffi::RDMA_PS_UDP | ffi::RDMA_PS_IPOIB => Some(ffi::IBV_QPT_UD),
        _ => None,
    }
}

/// `rdma_create_id`: an id on `channel`, or, with a NULL channel, a synchronous id whose
/// calls wait for their own events.
///
/// # Safety
/// `channel` is NULL or a live channel of ours; `id` is valid for a write.
pub unsafe extern "C" fn rdma_create_id(
    channel: *mut ffi::rdma_event_channel,
    id: *mut *mut ffi::rdma_cm_id,
    context: *mut c_void,
    ps: ffi::rdma_port_space,
) -> c_int {
    boundary(MinusOne, move || {
        let c = match cm() {
            Ok(c) => c,
            Err(e) => return fail(e),
        };
        if id.is_null() {
            return fail(libc::EINVAL);
        }
        let Some(qp_type) = qp_type_of(ps) else {
            return fail(libc::EINVAL);
        };
        // SAFETY: NULL or the caller's live channel.
        let (shared, chan, sync) = if let Some(ch) = unsafe { try_ref::<EventChannel>(channel) } {
            (Arc::clone(&ch.shared), channel, false)
        } else {
            let Some(own) = NonNullChannel::new() else {
                return -1;
            };
            (Arc::clone(&own.shared()), own.0, true)
        };
        let p = c.new_id(ps, qp_type, shared, chan, sync, context);
        // SAFETY: `p` was just made.
        let cid = unsafe { &*p };
        if matches!(ps, ffi::RDMA_PS_UDP | ffi::RDMA_PS_IB) {
            // cma.c `cma_set_qkey`.
            lock(&cid.shared.inner).qkey = ffi::RDMA_UDP_QKEY;
        }
        // SAFETY: the caller's writable pointer.
        unsafe { id.write(p.cast()) };
        0
    })
}

/// `rdma_destroy_id`: the connection's farewell message, its port and listen given up,
/// its unretrieved events dropped; waits until every event handed out for it is
/// acknowledged.
///
/// # Safety
/// `id` is a live id of ours, destroyed once, after its QP (`rdma_destroy_qp`).
pub unsafe extern "C" fn rdma_destroy_id(id: *mut ffi::rdma_cm_id) -> c_int {
    boundary(MinusOne, move || {
        // SAFETY: the caller's live id.
        let (c, cid) = match unsafe { cm_and_id(id) } {
            Ok(x) => x,
            Err(e) => return fail(e),
        };
        destroy_kernel(c, &cid.shared);
        if !cid.raw.event.is_null() {
            // SAFETY: the id's own unacknowledged event.
            unsafe { rdma_ack_cm_event(cid.raw.event) };
            cid.raw.event = null_mut();
        }
        let sync = cid.shared.wait_all_acked(lock(&cid.shared.inner)).sync;
        free_path(cid);
        if sync {
            // SAFETY: a synchronous id's channel is its own, made in rdma_create_id or
            // make_sync.
            unsafe { rdma_destroy_event_channel(cid.raw.channel) };
        }
        // SAFETY: every id we hand out is a leaked CmId box; this is its end.
        drop(unsafe { Box::from_raw(id.cast::<CmId>()) });
        0
    })
}

/// `rdma_migrate_id`: moves the id (and its queued events) to `channel`, or with NULL to a
/// channel of its own (synchronous).
///
/// # Safety
/// `id` is a live id of ours; `channel` is NULL or a live channel of ours.
pub unsafe extern "C" fn rdma_migrate_id(
    id: *mut ffi::rdma_cm_id,
    channel: *mut ffi::rdma_event_channel,
) -> c_int {
    boundary(MinusOne, move || {
        // SAFETY: NULL or the caller's live id.
        let cid: &mut CmId = unsafe { try_mut_from_ptr!(id, fail(libc::EINVAL)) };
        let was_sync = lock(&cid.shared.inner).sync;
        if was_sync && channel.is_null() {
            return fail(libc::EINVAL);
        }
        let (target, sync) = if channel.is_null() {
            match NonNullChannel::new() {
                Some(own) => (own.0, true),
                None => return -1,
            }
        } else {
            (channel, false)
        };
        // SAFETY: a live channel (the caller's, or the one just made).
        let new_shared = Arc::clone(&unsafe { EventChannel::of(target) }.shared);
        if was_sync && !cid.raw.event.is_null() {
            // SAFETY: the id's own unacknowledged event.
            unsafe { rdma_ack_cm_event(cid.raw.event) };
            cid.raw.event = null_mut();
        }
        let old = {
            let mut g = lock(&cid.shared.inner);
            let moved = g.channel.take_events_of(cid.shared.endpoint);
            for q in moved {
                new_shared.push(q);
            }
            g.channel = Arc::clone(&new_shared);
            g.sync = sync;
            drop(cid.shared.wait_all_acked(g));
            cid.raw.channel
        };
        cid.raw.channel = target;
        if was_sync {
            // SAFETY: the id's own former channel.
            unsafe { rdma_destroy_event_channel(old) };
        }
        0
    })
}
