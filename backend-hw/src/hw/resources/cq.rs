//! Completion queues (`struct ibv_cq`).

use std::fmt;
use std::os::raw::{c_int, c_uint, c_void};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use verbs_api::{Completion, CompletionQueue, Error, Result};

use super::channel::{Channel, EventCounts, HwCompChannel};
use crate::diagnose::errno;
use crate::ffi;
use crate::hw::convert;
use crate::hw::ctx::{invalid, null, os_error, Ctx, CHUNK};

pub(crate) struct Cq {
    pub(crate) ptr: NonNull<ffi::ibv_cq>,
    handle: u32,
    /// The size the device gave (changed by a resize).
    cqe: AtomicU32,
    events: Box<EventCounts>,
    channel: Option<Arc<Channel>>,
    pub(crate) ctx: Arc<Ctx>,
}

// SAFETY: libibverbs CQs may be polled, armed and acked from any thread; the event counts
// are atomics.
unsafe impl Send for Cq {}
// SAFETY: as for Send.
unsafe impl Sync for Cq {}

impl Cq {
    fn ack(&self, n: u32) {
        let mut acked = self.events.acked.load(Ordering::Acquire);
        loop {
            let got = self.events.got.load(Ordering::Acquire);
            let k = n.min(got.wrapping_sub(acked));
            if k == 0 {
                return;
            }
            match self.events.acked.compare_exchange(
                acked,
                acked.wrapping_add(k),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    // SAFETY: the CQ is alive; `k` events were got and not yet acked.
                    unsafe { ffi::shim_ack_cq_events(self.ptr.as_ptr(), c_uint::from(k)) };
                    return;
                }
                Err(now) => acked = now,
            }
        }
    }
}

impl Drop for Cq {
    fn drop(&mut self) {
        self.ack(u32::MAX);
        // SAFETY: every QP using this CQ holds an Arc<Cq>, so none is left; all events got
        // are acked, so ibv_destroy_cq does not wait.
        let _ = unsafe { ffi::shim_destroy_cq(self.ptr.as_ptr()) };
    }
}

/// A completion queue (`struct ibv_cq`).
#[derive(Clone)]
pub struct HwCq(pub(crate) Arc<Cq>);

impl fmt::Debug for HwCq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HwCq")
            .field("device", &self.0.ctx.name())
            .field("handle", &self.0.handle)
            .field("cqe", &self.0.cqe)
            .field("channel", &self.0.channel.is_some())
            .finish()
    }
}

impl HwCq {
    pub(crate) fn create(
        ctx: &Arc<Ctx>,
        cqe: u32,
        channel: Option<&HwCompChannel>,
        comp_vector: u32,
    ) -> Result<Self> {
        const OP: &str = "ibv_create_cq";
        let mut events = Box::new(EventCounts {
            handle: 0,
            got: AtomicU32::new(0),
            acked: AtomicU32::new(0),
        });
        let ch_ptr = channel.map_or(std::ptr::null_mut(), |c| c.0.ptr.as_ptr());
        let mut ptr = std::ptr::null_mut();
        let (mut handle, mut actual) = (0, 0);
        let cqe_c = c_int::try_from(cqe).map_err(|_| invalid(OP, "CQ size too large"))?;
        let vec_c = c_int::try_from(comp_vector).map_err(|_| invalid(OP, "bad vector"))?;
        let events_ptr: *mut EventCounts = &mut *events;
        // SAFETY: the context (and channel, if any) are alive; the boxed EventCounts has a
        // stable address for the CQ's whole life (the Box moves into Cq, its heap
        // allocation does not); outputs are valid.
        let ret = unsafe {
            ffi::shim_create_cq(
                ctx.ptr.as_ptr(),
                cqe_c,
                events_ptr.cast::<c_void>(),
                ch_ptr,
                vec_c,
                &mut ptr,
                &mut handle,
                &mut actual,
            )
        };
        if ret != 0 {
            return Err(os_error(
                OP,
                ret,
                format!("{cqe} entries on {}", ctx.name()),
            ));
        }
        let ptr = NonNull::new(ptr).ok_or_else(|| null(OP))?;
        events.handle = handle;
        Ok(HwCq(Arc::new(Cq {
            ptr,
            handle,
            cqe: AtomicU32::new(actual),
            events,
            channel: channel.map(|c| c.0.clone()),
            ctx: ctx.clone(),
        })))
    }

    pub(crate) fn ctx(&self) -> &Arc<Ctx> {
        &self.0.ctx
    }
}

impl CompletionQueue for HwCq {
    fn handle(&self) -> u32 {
        self.0.handle
    }

    fn cqe(&self) -> u32 {
        self.0.cqe.load(Ordering::Acquire)
    }

    fn resize(&self, cqe: u32) -> Result<()> {
        const OP: &str = "ibv_resize_cq";
        // A size past c_int is EINVAL for the provider too; it cannot be passed on.
        let cqe_c = c_int::try_from(cqe).map_err(|_| {
            Error::from_errno(OP, errno::EINVAL, format!("{cqe} entries: too many"))
        })?;
        let mut actual = 0;
        // SAFETY: the CQ is alive; the provider takes its own lock against concurrent
        // polls while it swaps the ring; `actual` is valid for writes.
        let ret = unsafe { ffi::shim_resize_cq(self.0.ptr.as_ptr(), cqe_c, &mut actual) };
        if ret != 0 {
            return Err(os_error(
                OP,
                ret,
                format!("CQ {} to {cqe} entries", self.0.handle),
            ));
        }
        self.0.cqe.store(actual, Ordering::Release);
        Ok(())
    }

    fn poll(&self, wc: &mut [Completion]) -> Result<usize> {
        let mut raw = [ffi::shim_wc::default(); CHUNK];
        let mut total = 0;
        while total < wc.len() {
            let want = (wc.len() - total).min(CHUNK);
            let mut polled: c_int = 0;
            // SAFETY: the CQ is alive; `raw` has room for `want <= CHUNK` entries.
            let ret = unsafe {
                ffi::shim_poll_cq(
                    self.0.ptr.as_ptr(),
                    c_int::try_from(want).unwrap_or(0),
                    raw.as_mut_ptr(),
                    &mut polled,
                )
            };
            let polled = usize::try_from(polled).unwrap_or(0).min(want);
            for (dst, src) in wc[total..total + polled].iter_mut().zip(&raw[..polled]) {
                *dst = convert::completion(src);
            }
            total += polled;
            if ret != 0 {
                return Err(os_error(
                    "ibv_poll_cq",
                    ret,
                    format!("CQ {} is unusable", self.0.handle),
                ));
            }
            if polled < want {
                break;
            }
        }
        Ok(total)
    }

    fn req_notify(&self, solicited_only: bool) -> Result<()> {
        // Arming a CQ without a channel is the device's call too (rxe accepts it).
        // SAFETY: the CQ is alive.
        let ret =
            unsafe { ffi::shim_req_notify_cq(self.0.ptr.as_ptr(), c_int::from(solicited_only)) };
        if ret != 0 {
            return Err(os_error(
                "ibv_req_notify_cq",
                ret,
                format!("CQ {}", self.0.handle),
            ));
        }
        Ok(())
    }

    fn ack_events(&self, n: u32) {
        self.0.ack(n);
    }
}
