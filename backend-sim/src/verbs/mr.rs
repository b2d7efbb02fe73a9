//! Registered memory regions: owned (page-aligned, zeroed) or the caller's, deregistered
//! before any owned memory is freed.

use crate::verbs::memory::MrEntry;
use crate::verbs::objects::{err, lock, Res, Shared};
use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::Arc;
use verbs_api::{AccessFlags, ErrorKind, MemoryRegion, Result};

#[derive(Debug)]
pub(crate) struct OwnedMem {
    pub(crate) ptr: NonNull<u8>,
    layout: Layout,
}

impl Drop for OwnedMem {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from `alloc_zeroed` with this very layout and is freed once.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) };
    }
}

/// A registered memory region. Dropping it deregisters the key before any owned memory
/// is freed, so the simulated NIC never touches freed memory.
#[derive(Debug)]
pub struct SimMr {
    pub(crate) world: Shared,
    pub(crate) ptr: *mut u8,
    pub(crate) len: usize,
    pub(crate) key: u32,
    pub(crate) access: AccessFlags,
    pub(crate) _owned: Option<OwnedMem>,
    pub(crate) _pd: Arc<Res>,
}

// SAFETY: the region is plain memory (owned, or vouched for by `reg_mr`'s caller); the
// handle carries no thread-affine state and every world access goes through the mutex.
unsafe impl Send for SimMr {}
// SAFETY: as above; `&SimMr` only exposes the pointer, whose use the MemoryRegion
// contract governs.
unsafe impl Sync for SimMr {}

impl Drop for SimMr {
    fn drop(&mut self) {
        lock(&self.world).mrs.deregister(self.key);
    }
}

// SAFETY: `ptr..ptr+len` is the owned allocation (freed only after deregistration in
// Drop) or the caller's memory that `reg_mr`'s contract keeps valid while registered; the
// simulator writes it only for work requests and remote accesses naming its key.
unsafe impl MemoryRegion for SimMr {
    fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }
    fn len(&self) -> usize {
        self.len
    }
    fn lkey(&self) -> u32 {
        self.key
    }
    fn rkey(&self) -> u32 {
        self.key
    }
    fn access(&self) -> AccessFlags {
        self.access
    }
}

pub(crate) fn alloc_owned(len: usize) -> Result<OwnedMem> {
    let layout = Layout::from_size_align(len, 4096)
        .map_err(|e| err(ErrorKind::InvalidArgument, "ibv_reg_mr", e.to_string()))?;
    // SAFETY: the layout has a non-zero size (len > 0 is checked by the caller).
    let p = unsafe { std::alloc::alloc_zeroed(layout) };
    let ptr = NonNull::new(p)
        .ok_or_else(|| err(ErrorKind::OutOfResources, "ibv_reg_mr", "out of memory"))?;
    Ok(OwnedMem { ptr, layout })
}

/// Registers `len` bytes at `ptr` in the protection domain `pd` of `world`.
pub(crate) fn register(
    world: &Shared,
    pd: &Arc<Res>,
    ptr: *mut u8,
    len: usize,
    access: AccessFlags,
    owned: Option<OwnedMem>,
) -> Result<SimMr> {
    let key = lock(world).mrs.register(MrEntry {
        pd: pd.id,
        addr: ptr as u64,
        len: len as u64,
        access,
    });
    Ok(SimMr {
        world: world.clone(),
        ptr,
        len,
        key,
        access,
        _owned: owned,
        _pd: pd.clone(),
    })
}
