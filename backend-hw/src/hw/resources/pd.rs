//! The protection domain (`struct ibv_pd`).

use std::fmt;
use std::ptr::NonNull;
use std::sync::Arc;

use verbs_api::{ProtectionDomain, Result};

use crate::ffi;
use crate::hw::ctx::{null, os_error, Ctx};

pub(crate) struct Pd {
    pub(crate) ptr: NonNull<ffi::ibv_pd>,
    pub(super) handle: u32,
    pub(crate) ctx: Arc<Ctx>,
}

// SAFETY: libibverbs objects may be used from any thread; Pd only frees its PD in Drop.
unsafe impl Send for Pd {}
// SAFETY: as for Send; Pd has no interior mutability.
unsafe impl Sync for Pd {}

impl Drop for Pd {
    fn drop(&mut self) {
        // SAFETY: every MR, SRQ, QP and AH of this PD holds an Arc<Pd>, so none is left.
        let _ = unsafe { ffi::shim_dealloc_pd(self.ptr.as_ptr()) };
    }
}

/// A protection domain (`struct ibv_pd`).
#[derive(Clone)]
pub struct HwPd(pub(crate) Arc<Pd>);

impl fmt::Debug for HwPd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HwPd")
            .field("device", &self.0.ctx.name())
            .field("handle", &self.0.handle)
            .finish()
    }
}

impl HwPd {
    pub(crate) fn alloc(ctx: &Arc<Ctx>) -> Result<Self> {
        let mut ptr = std::ptr::null_mut();
        let mut handle = 0;
        // SAFETY: the context is open; the outputs are valid.
        let ret = unsafe { ffi::shim_alloc_pd(ctx.ptr.as_ptr(), &mut ptr, &mut handle) };
        if ret != 0 {
            return Err(os_error("ibv_alloc_pd", ret, ctx.name()));
        }
        let ptr = NonNull::new(ptr).ok_or_else(|| null("ibv_alloc_pd"))?;
        Ok(HwPd(Arc::new(Pd {
            ptr,
            handle,
            ctx: ctx.clone(),
        })))
    }

    pub(crate) fn ctx(&self) -> &Arc<Ctx> {
        &self.0.ctx
    }
}

impl ProtectionDomain for HwPd {
    fn handle(&self) -> u32 {
        self.0.handle
    }
}
