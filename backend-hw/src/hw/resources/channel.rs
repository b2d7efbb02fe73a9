//! Completion channels (`struct ibv_comp_channel`).

use std::fmt;
use std::os::raw::{c_int, c_void};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use verbs_api::{CompletionChannel, Result};

use crate::ffi;
use crate::hw::ctx::{null, os_error, Ctx};

/// What a CQ's events were: how many the channel handed out and how many were acked, so
/// that dropping the CQ acks the rest (ibv_destroy_cq would otherwise wait forever).
pub(crate) struct EventCounts {
    pub(super) handle: u32,
    pub(super) got: AtomicU32,
    pub(super) acked: AtomicU32,
}

pub(crate) struct Channel {
    pub(super) ptr: NonNull<ffi::ibv_comp_channel>,
    ctx: Arc<Ctx>,
}

// SAFETY: libibverbs objects may be used from any thread; Channel only destroys in Drop.
unsafe impl Send for Channel {}
// SAFETY: as for Send.
unsafe impl Sync for Channel {}

impl Drop for Channel {
    fn drop(&mut self) {
        // SAFETY: every CQ using this channel holds an Arc<Channel>, so none is left.
        let _ = unsafe { ffi::shim_destroy_comp_channel(self.ptr.as_ptr()) };
    }
}

/// A completion channel (`struct ibv_comp_channel`); its fd is non-blocking.
#[derive(Clone)]
pub struct HwCompChannel(pub(super) Arc<Channel>);

impl fmt::Debug for HwCompChannel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HwCompChannel")
            .field("device", &self.0.ctx.name())
            .finish_non_exhaustive()
    }
}

impl HwCompChannel {
    pub(crate) fn create(ctx: &Arc<Ctx>) -> Result<Self> {
        let mut ptr = std::ptr::null_mut();
        // SAFETY: the context is open; the output is valid.
        let ret = unsafe { ffi::shim_create_comp_channel(ctx.ptr.as_ptr(), &mut ptr) };
        if ret != 0 {
            return Err(os_error("ibv_create_comp_channel", ret, ctx.name()));
        }
        let ptr = NonNull::new(ptr).ok_or_else(|| null("ibv_create_comp_channel"))?;
        Ok(HwCompChannel(Arc::new(Channel {
            ptr,
            ctx: ctx.clone(),
        })))
    }

    pub(crate) fn ctx(&self) -> &Arc<Ctx> {
        &self.0.ctx
    }
}

/// Milliseconds to wait for, rounded up so a short timeout does not spin.
fn wait_ms(deadline: Option<Instant>) -> Option<c_int> {
    match deadline {
        None => Some(-1),
        Some(d) => {
            let left = d.checked_duration_since(Instant::now())?;
            if left.is_zero() {
                return None;
            }
            let ms = left.as_nanos().div_ceil(1_000_000);
            Some(c_int::try_from(ms).unwrap_or(c_int::MAX))
        }
    }
}

impl CompletionChannel for HwCompChannel {
    fn get_cq_event(&self, timeout: Option<Duration>) -> Result<Option<u32>> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut first = true;
        loop {
            // A zero timeout still checks once.
            let ms = match wait_ms(deadline) {
                Some(ms) => ms,
                None if first => 0,
                None => return Ok(None),
            };
            first = false;
            let mut cq_context: *mut c_void = std::ptr::null_mut();
            let mut got: c_int = 0;
            // SAFETY: the channel is alive; outputs are valid.
            let ret = unsafe {
                ffi::shim_get_cq_event(self.0.ptr.as_ptr(), ms, &mut cq_context, &mut got)
            };
            if ret != 0 {
                return Err(os_error(
                    "ibv_get_cq_event",
                    ret,
                    format!("{} completion channel", self.0.ctx.name()),
                ));
            }
            if got != 0 {
                // SAFETY: every CQ this backend creates has a pointer to its boxed
                // EventCounts as cq_context. The CQ cannot have been destroyed: the kernel
                // reported this event, and ibv_destroy_cq waits until it is acknowledged.
                let counts = unsafe { &*cq_context.cast::<EventCounts>() };
                counts.got.fetch_add(1, Ordering::AcqRel);
                return Ok(Some(counts.handle));
            }
        }
    }
}
