//! Registered memory regions: owned (page-aligned, zeroed) or the caller's, deregistered
//! before any owned memory is freed.

use crate::verbs::memory::MrEntry;
use crate::verbs::objects::{err, lock, Res, Shared};
use crate::verbs::pd::SimPd;
use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::Arc;
use verbs_api::{AccessFlags, ErrorKind, MemoryRegion, MrKeys, Result};

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
    /// The key (`lkey`), the key remote peers use (`rkey`: the key, or 0 for a region
    /// without remote access on a personality that gives those none, see
    /// [`rkey_for`]) and the access.
    pub(crate) keys: MrKeys,
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
        lock(&self.world).mrs.deregister(self.keys.lkey);
    }
}

impl SimMr {
    /// Re-registers the region in place (`ibv_rereg_mr`): the key stays (as mlx5 keeps it
    /// when it changes a region in place), and what is given changes: the protection
    /// domain, the range, the access. Windows bound to it are unbound. A region whose
    /// memory the simulator owns keeps its range.
    ///
    /// # Errors
    /// InvalidArgument for an empty or NULL range, a new range of owned memory, bad
    /// access flags, or a PD of another device; InvalidState once the region is gone;
    /// Unsupported (EOPNOTSUPP) on rxe, which cannot (see `Personality::rereg_mr`).
    ///
    /// # Safety
    /// A new range is memory the caller owns and keeps valid while registered.
    pub unsafe fn rereg(
        &mut self,
        pd: Option<&SimPd>,
        range: Option<(*mut u8, usize)>,
        access: Option<AccessFlags>,
    ) -> Result<()> {
        const OP: &str = "ibv_rereg_mr";
        if let Some((ptr, len)) = range {
            if ptr.is_null() || len == 0 {
                return Err(err(
                    ErrorKind::InvalidArgument,
                    OP,
                    "null or zero-length region",
                ));
            }
            if self._owned.is_some() {
                return Err(err(
                    ErrorKind::InvalidArgument,
                    OP,
                    "the region's memory is the simulator's",
                ));
            }
        }
        if let Some(a) = access {
            a.validate(OP)?;
        }
        let pd_res = pd.map_or_else(|| self._pd.clone(), |p| p.res.clone());
        let (ptr, len) = range.unwrap_or((self.ptr, self.len));
        let access = access.unwrap_or(self.keys.access);
        let mut w = lock(&self.world);
        let dev = |id: u32| w.pds.get(&id).copied();
        let (Some(old_dev), Some(new_dev)) = (dev(self._pd.id), dev(pd_res.id)) else {
            return Err(err(ErrorKind::InvalidState, OP, "PD destroyed"));
        };
        if old_dev != new_dev {
            return Err(err(
                ErrorKind::InvalidArgument,
                OP,
                "a PD of another device",
            ));
        }
        if !w.devices[new_dev].personality.rereg_mr() {
            return Err(err(
                ErrorKind::Unsupported,
                OP,
                "rxe (Linux 6.1) cannot re-register a region",
            ));
        }
        let local_only_rkey_zero = w.devices[new_dev].personality.local_only_rkey_zero();
        let entry = MrEntry {
            pd: pd_res.id,
            addr: ptr as u64,
            len: len as u64,
            access,
        };
        if !w.mrs.reregister(self.keys.lkey, entry) {
            return Err(err(ErrorKind::InvalidState, OP, "MR deregistered"));
        }
        drop(w);
        self.keys = rkey_for(self.keys.lkey, access, local_only_rkey_zero);
        self.ptr = ptr;
        self.len = len;
        self._pd = pd_res;
        Ok(())
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
    fn keys(&self) -> MrKeys {
        self.keys
    }
}

/// The keys of a region with key `key` and `access`: its rkey is the key, or 0 when
/// the region has no remote access and the personality gives such regions none
/// ([`Personality::local_only_rkey_zero`]).
///
/// [`Personality::local_only_rkey_zero`]: super::personality::Personality::local_only_rkey_zero
fn rkey_for(key: u32, access: AccessFlags, local_only_rkey_zero: bool) -> MrKeys {
    let remote = AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ | AccessFlags::REMOTE_ATOMIC;
    let rkey = if local_only_rkey_zero && !access.intersects(remote) {
        0
    } else {
        key
    };
    MrKeys {
        lkey: key,
        rkey,
        access,
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
    let mut w = lock(world);
    let key = w.mrs.register(MrEntry {
        pd: pd.id,
        addr: ptr as u64,
        len: len as u64,
        access,
    });
    let local_only_rkey_zero = w
        .pds
        .get(&pd.id)
        .is_some_and(|&dev| w.devices[dev].personality.local_only_rkey_zero());
    drop(w);
    Ok(SimMr {
        world: world.clone(),
        ptr,
        len,
        keys: rkey_for(key, access, local_only_rkey_zero),
        _owned: owned,
        _pd: pd.clone(),
    })
}
