//! Memory windows (`struct ibv_mw`).

use std::fmt;
use std::ptr::NonNull;
use std::sync::Arc;

use verbs_api::{MemoryWindow, MwType, Result};

use super::pd::{HwPd, Pd};
use crate::ffi;
use crate::hw::ctx::{invalid, lock, null, os_error, Ctx};

/// A memory window (`struct ibv_mw`); dropping it is `ibv_dealloc_mw`.
pub struct HwMw {
    pub(crate) ptr: NonNull<ffi::ibv_mw>,
    pub(crate) handle: u32,
    mw_type: MwType,
    pub(crate) pd: Arc<Pd>,
}

// SAFETY: an ibv_mw may be used and deallocated from any thread; HwMw reads and writes its
// rkey only through `&self` methods that libibverbs' own callers use the same way.
unsafe impl Send for HwMw {}

impl fmt::Debug for HwMw {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HwMw")
            .field("handle", &self.handle)
            .field("type", &self.mw_type)
            .field("rkey", &self.rkey())
            .finish()
    }
}

impl HwMw {
    pub(crate) fn alloc(pd: &HwPd, mw_type: MwType) -> Result<Self> {
        let mut ptr = std::ptr::null_mut();
        let (mut handle, mut rkey) = (0, 0);
        // SAFETY: the PD is alive; the outputs are valid.
        let ret = unsafe {
            ffi::shim_alloc_mw(
                pd.0.ptr.as_ptr(),
                mw_type.as_raw(),
                &mut ptr,
                &mut handle,
                &mut rkey,
            )
        };
        if ret != 0 {
            return Err(os_error("ibv_alloc_mw", ret, format!("a {mw_type} window")));
        }
        let ptr = NonNull::new(ptr).ok_or_else(|| null("ibv_alloc_mw"))?;
        lock(&pd.0.ctx.mws).insert(handle, ptr.as_ptr() as usize);
        Ok(HwMw {
            ptr,
            handle,
            mw_type,
            pd: pd.0.clone(),
        })
    }
}

/// The `ibv_mr` registered with `lkey` on `ctx`.
pub(crate) fn mr_ptr(ctx: &Ctx, lkey: u32, op: &'static str) -> Result<*mut ffi::ibv_mr> {
    lock(&ctx.mrs)
        .get(&lkey)
        .map(|&p| p as *mut ffi::ibv_mr)
        .ok_or_else(|| {
            invalid(
                op,
                format!("no memory region of this context has lkey {lkey:#x}"),
            )
        })
}

/// The `ibv_mw` with `handle` on `ctx`.
pub(crate) fn mw_ptr(ctx: &Ctx, handle: u32, op: &'static str) -> Result<*mut ffi::ibv_mw> {
    lock(&ctx.mws)
        .get(&handle)
        .map(|&p| p as *mut ffi::ibv_mw)
        .ok_or_else(|| {
            invalid(
                op,
                format!("no memory window of this context has handle {handle}"),
            )
        })
}

/// Sets the rkey of the window `mw` points to (after posting its bind).
///
/// # Safety
/// `mw` must come from [`mw_ptr`] on a live window.
pub(crate) unsafe fn set_mw_rkey(mw: *mut ffi::ibv_mw, rkey: u32) {
    // SAFETY: the caller's contract.
    unsafe { ffi::shim_mw_set_rkey(mw, rkey) }
}

impl Drop for HwMw {
    fn drop(&mut self) {
        lock(&self.pd.ctx.mws).remove(&self.handle);
        // SAFETY: the window is deallocated only here; its PD is alive (we hold an Arc).
        let _ = unsafe { ffi::shim_dealloc_mw(self.ptr.as_ptr()) };
    }
}

impl MemoryWindow for HwMw {
    fn handle(&self) -> u32 {
        self.handle
    }

    fn mw_type(&self) -> MwType {
        self.mw_type
    }

    fn rkey(&self) -> u32 {
        // SAFETY: the window is alive.
        unsafe { ffi::shim_mw_rkey(self.ptr.as_ptr()) }
    }
}
