//! `ibv_get_async_event` and `ibv_ack_async_event`: a context's asynchronous events (CQ
//! overrun, QP errors, SRQ limit, port changes), read from its `async_fd`.

use std::ffi::c_int;

use crate::base::boundary::{boundary, MinusOne, Nothing};
use crate::base::errno::set_errno;
use crate::base::ffi;
use crate::base::pointer::try_ref_from_ptr;
use crate::objects::handles::EmuContext;

/// `ibv_get_async_event`: waits for the context's next async event (or fails with EAGAIN
/// when the program made `async_fd` non-blocking).
///
/// # Safety
/// `ctx` is a live context of ours; `event` is valid for a write.
pub unsafe extern "C" fn ibv_get_async_event(
    ctx: *mut ffi::ibv_context,
    event: *mut ffi::ibv_async_event,
) -> c_int {
    boundary(MinusOne, move || {
        let einval = || {
            set_errno(libc::EINVAL);
            -1
        };
        if event.is_null() {
            return einval();
        }
        // SAFETY: NULL or a live context of ours.
        let c: &EmuContext = unsafe { try_ref_from_ptr!(ctx, einval()) };
        match c.state.get_event() {
            Ok((ev, addr)) => {
                let mut out = ffi::ibv_async_event {
                    event_type: ev.event_type.as_raw(),
                    ..ffi::ibv_async_event::default()
                };
                match ev.element {
                    verbs_api::EventElement::Cq(_) => out.element.cq = addr as *mut ffi::ibv_cq,
                    verbs_api::EventElement::Qp(_) => out.element.qp = addr as *mut ffi::ibv_qp,
                    verbs_api::EventElement::Srq(_) => out.element.srq = addr as *mut ffi::ibv_srq,
                    verbs_api::EventElement::Port(p) => out.element.port_num = c_int::from(p),
                    verbs_api::EventElement::Device => {}
                }
                // SAFETY: the caller's writable event.
                unsafe { event.write(out) };
                0
            }
            Err(e) => {
                set_errno(e.raw_os_error().unwrap_or(libc::EIO));
                -1
            }
        }
    })
}

/// `ibv_ack_async_event`: counts the event on the object it names (what
/// `ibv_destroy_*` waits for in libibverbs; the emulator's destroys need not wait).
///
/// # Safety
/// `event` came from `ibv_get_async_event` and names a live object.
pub unsafe extern "C" fn ibv_ack_async_event(event: *mut ffi::ibv_async_event) {
    boundary(Nothing, move || {
        // SAFETY: NULL or the caller's event, as ibv_get_async_event filled it.
        let ev: &ffi::ibv_async_event = unsafe { try_ref_from_ptr!(event) };
        // SAFETY: the union member is the one ibv_get_async_event set for this event type,
        // and the object is live (the caller acks before destroying it).
        unsafe {
            match ev.event_type {
                ffi::IBV_EVENT_CQ_ERR => {
                    let cq = ev.element.cq;
                    let n = std::ptr::addr_of_mut!((*cq).async_events_completed);
                    n.write(n.read().wrapping_add(1));
                }
                ffi::IBV_EVENT_SRQ_ERR | ffi::IBV_EVENT_SRQ_LIMIT_REACHED => {
                    let srq = ev.element.srq;
                    let n = std::ptr::addr_of_mut!((*srq).events_completed);
                    n.write(n.read().wrapping_add(1));
                }
                ffi::IBV_EVENT_QP_FATAL
                | ffi::IBV_EVENT_QP_REQ_ERR
                | ffi::IBV_EVENT_QP_ACCESS_ERR
                | ffi::IBV_EVENT_COMM_EST
                | ffi::IBV_EVENT_SQ_DRAINED
                | ffi::IBV_EVENT_PATH_MIG
                | ffi::IBV_EVENT_PATH_MIG_ERR
                | ffi::IBV_EVENT_QP_LAST_WQE_REACHED => {
                    let qp = ev.element.qp;
                    let n = std::ptr::addr_of_mut!((*qp).events_completed);
                    n.write(n.read().wrapping_add(1));
                }
                _ => {}
            }
        }
    })
}
