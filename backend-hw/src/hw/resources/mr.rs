//! Registered memory regions (`struct ibv_mr`).

use std::alloc::Layout;
use std::fmt;
use std::os::raw::c_void;
use std::ptr::NonNull;
use std::sync::Arc;

use verbs_api::{AccessFlags, Error, ErrorKind, MemoryRegion, MrKeys, Result};

use super::pd::{HwPd, Pd};
use crate::ffi;
use crate::hw::ctx::{invalid, lock, null, os_error};

/// A registered memory region (`struct ibv_mr`), over memory it owns
/// ([`verbs_api::Context::alloc_mr`]) or the caller's ([`verbs_api::Context::reg_mr`]).
pub struct HwMr {
    ptr: NonNull<ffi::ibv_mr>,
    addr: *mut u8,
    len: usize,
    keys: MrKeys,
    /// The layout of the memory this region owns and frees after deregistering.
    owned: Option<Layout>,
    pd: Arc<Pd>,
}

// SAFETY: the region owns (or was given) memory no other Rust value references, and the
// ibv_mr may be deregistered from any thread, so moving the region to another thread is
// sound. HwMr is deliberately not Sync: `MemoryRegion::write(&self)` copies into the
// region, and two threads doing so at once through a shared reference would race.
unsafe impl Send for HwMr {}

impl fmt::Debug for HwMr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HwMr")
            .field("addr", &self.addr)
            .field("len", &self.len)
            .field("keys", &self.keys)
            .field("owned", &self.owned.is_some())
            .finish()
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    usize::try_from(unsafe { ffi::shim_page_size() }).unwrap_or(4096)
}

impl HwMr {
    pub(crate) fn alloc(pd: &HwPd, len: usize, access: AccessFlags) -> Result<Self> {
        const OP: &str = "ibv_reg_mr";
        if len == 0 {
            // Not the device's decision: we allocate the memory, and cannot allocate none.
            return Err(invalid(OP, "a memory region needs at least one byte"));
        }
        let page = page_size();
        let size = len
            .checked_add(page - 1)
            .map(|s| s / page * page)
            .ok_or_else(|| invalid(OP, format!("{len} bytes cannot be allocated")))?;
        let layout = Layout::from_size_align(size, page)
            .map_err(|e| invalid(OP, format!("{len} bytes cannot be allocated: {e}")))?;
        // SAFETY: the layout has a non-zero size (len > 0 was checked).
        let mem = unsafe { std::alloc::alloc_zeroed(layout) };
        if mem.is_null() {
            return Err(Error::new(
                ErrorKind::OutOfResources,
                OP,
                format!("cannot allocate {size} bytes for a memory region"),
            ));
        }
        // SAFETY: `mem` is `size >= len` bytes of fresh memory that the region owns and
        // frees only after deregistering it; no Rust reference to it exists.
        let mr = unsafe { Self::register(pd, mem, len, access, Some(layout)) };
        if mr.is_err() {
            // SAFETY: registration failed, so nothing else refers to `mem`.
            unsafe { std::alloc::dealloc(mem, layout) };
        }
        mr
    }

    /// Registers `addr..addr+len`.
    ///
    /// # Safety
    /// As [`verbs_api::Context::reg_mr`]; with `owned`, the memory was allocated with that
    /// layout and the region becomes its owner.
    pub(crate) unsafe fn register(
        pd: &HwPd,
        addr: *mut u8,
        len: usize,
        access: AccessFlags,
        owned: Option<Layout>,
    ) -> Result<Self> {
        const OP: &str = "ibv_reg_mr";
        // Length, access flags and size limits go to the device unchecked: it decides.
        let mut ptr = std::ptr::null_mut();
        let (mut lkey, mut rkey) = (0, 0);
        // SAFETY: the PD is alive; the caller vouches for the memory; outputs are valid.
        let ret = unsafe {
            ffi::shim_reg_mr(
                pd.0.ptr.as_ptr(),
                addr.cast::<c_void>(),
                len,
                access.bits(),
                &mut ptr,
                &mut lkey,
                &mut rkey,
            )
        };
        if ret != 0 {
            return Err(os_error(
                OP,
                ret,
                format!("registering {len} bytes with {access:?}"),
            ));
        }
        let ptr = NonNull::new(ptr).ok_or_else(|| null(OP))?;
        lock(&pd.0.ctx.mrs).insert(lkey, ptr.as_ptr() as usize);
        Ok(HwMr {
            ptr,
            addr,
            len,
            keys: MrKeys { lkey, rkey, access },
            owned,
            pd: pd.0.clone(),
        })
    }
}

impl Drop for HwMr {
    fn drop(&mut self) {
        // SAFETY: the MR is registered and deregistered only here; the PD is alive (we hold
        // an Arc). The trait's contract says no work request uses the region any more.
        let ret = unsafe { ffi::shim_dereg_mr(self.ptr.as_ptr()) };
        if ret != 0 {
            // The device keeps the region (a memory window is still bound to it: EINVAL on
            // rxe, as ibv_alloc_mw(3) says): it may still write there, so the memory is
            // leaked rather than handed back to the allocator.
            return;
        }
        lock(&self.pd.ctx.mrs).remove(&self.keys.lkey);
        if let Some(layout) = self.owned {
            // SAFETY: the region owned this memory, allocated with `layout`; the device no
            // longer has it registered.
            unsafe { std::alloc::dealloc(self.addr, layout) };
        }
    }
}

// SAFETY: `addr..addr+len` is registered memory that stays valid until Drop (owned memory
// is freed only after deregistering; caller memory is vouched for by reg_mr's contract).
unsafe impl MemoryRegion for HwMr {
    fn as_ptr(&self) -> *mut u8 {
        self.addr
    }

    fn len(&self) -> usize {
        self.len
    }

    fn keys(&self) -> MrKeys {
        self.keys
    }
}

impl HwMr {
    /// The handle of the protection domain the region is registered in.
    pub fn pd_handle(&self) -> u32 {
        self.pd.handle
    }
}
