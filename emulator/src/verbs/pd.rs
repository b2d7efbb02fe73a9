//! Protection domains and parent domains: `ibv_alloc_pd`, `ibv_dealloc_pd`,
//! `ibv_alloc_parent_domain`; the objects made in a PD count as its users.

use std::ffi::c_int;
use std::ptr::null_mut;

use backend_sim::Personality;
use verbs_api::Context;

use crate::base::boundary::boundary;
use crate::base::boundary::Null;
use crate::base::boundary::ReturnsErrno;
use crate::base::errno::errno_of;
use crate::base::errno::set_errno;
use crate::base::ffi;
use crate::base::pointer::{try_ref, try_ref_from_ptr};
use crate::objects::handles::emu;
use crate::objects::handles::hand_out;
use crate::objects::handles::take_back;
use crate::objects::handles::EmuContext;
use crate::objects::handles::EmuPd;
use crate::objects::handles::Handed;
use crate::objects::handles::Users;

/// `ibv_alloc_pd`.
///
/// # Safety
/// `ctx` is a live context of ours.
pub unsafe extern "C" fn ibv_alloc_pd(ctx: *mut ffi::ibv_context) -> *mut ffi::ibv_pd {
    boundary(Null, move || {
        // SAFETY: NULL or a live context of ours.
        let c: &EmuContext = unsafe {
            try_ref_from_ptr!(ctx, {
                set_errno(libc::EINVAL);
                null_mut()
            })
        };
        match c.sim().alloc_pd() {
            Ok(pd) => {
                use verbs_api::ProtectionDomain;
                let raw = ffi::ibv_pd {
                    context: ctx,
                    handle: pd.handle(),
                };
                hand_out(Box::new(EmuPd {
                    raw,
                    pd,
                    users: Users::default(),
                    parent: null_mut(),
                }))
            }
            Err(e) => {
                set_errno(errno_of(&e));
                null_mut()
            }
        }
    })
}

/// `ibv_dealloc_pd`.
///
/// # Safety
/// `pd` came from `ibv_alloc_pd` and is freed once, after its MRs, QPs and AHs.
pub unsafe extern "C" fn ibv_dealloc_pd(pd: *mut ffi::ibv_pd) -> c_int {
    boundary(ReturnsErrno, move || {
        // SAFETY: NULL or a live PD of ours.
        let p: &EmuPd = unsafe { try_ref_from_ptr!(pd, libc::EINVAL) };
        if p.users.busy() {
            return libc::EBUSY;
        }
        // SAFETY: NULL, or for a parent domain its protection domain, which lives while the
        // domain does (it counts the domain among its users).
        if let Some(parent) = unsafe { try_ref::<EmuPd>(p.parent) } {
            parent.users.release();
        }
        // SAFETY: the caller's contract.
        drop(unsafe { take_back::<EmuPd, _>(pd) });
        0
    })
}

/// `verbs_context.alloc_parent_domain` (behind the inline `ibv_alloc_parent_domain`): a
/// PD interchangeable with the protection domain it wraps (its context and handle, the
/// same domain in the simulator: MRs, QPs, SRQs and AHs made on either work together),
/// which the protection domain counts as a user until it is deallocated, as libmlx5's
/// `mlx5_alloc_parent_domain` makes it. The allocators are kept by the program only: a
/// provider calls them for the memory of its queues, and the emulator's queues are in the
/// simulator, not in the program's memory, so it never calls them. A thread domain cannot
/// be given (`ibv_alloc_td` is refused). rxe's provider has no parent domains: on an rxe
/// device it fails with EOPNOTSUPP, as in the Soft-RoCE VM (rdma-core's parent-domain
/// tests skip there: "Parent Domain is not supported on this device").
///
/// # Safety
/// `ctx` is a live context of ours; `attr` is NULL or valid; its `pd` NULL or a live PD
/// of ours.
pub unsafe extern "C" fn alloc_parent_domain(
    ctx: *mut ffi::ibv_context,
    attr: *mut ffi::ibv_parent_domain_init_attr,
) -> *mut ffi::ibv_pd {
    boundary(Null, move || {
        // SAFETY: the caller's live context.
        if unsafe { try_ref::<EmuContext>(ctx) }
            .is_some_and(|c| c.sim().personality() == Personality::Rxe)
        {
            set_errno(libc::EOPNOTSUPP);
            return null_mut();
        }
        // SAFETY: the caller's valid attributes.
        let Some(a) = (unsafe { attr.as_ref() }) else {
            set_errno(libc::EINVAL);
            return null_mut();
        };
        let known = ffi::IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS
            | ffi::IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
        if a.comp_mask & !known != 0 {
            set_errno(libc::EINVAL);
            return null_mut();
        }
        // SAFETY: NULL or a live PD of ours.
        let parent: &EmuPd = unsafe {
            try_ref_from_ptr!(a.pd, {
                set_errno(libc::EINVAL);
                null_mut()
            })
        };
        if !parent.parent.is_null() {
            // A parent domain wraps a protection domain, not another parent domain.
            set_errno(libc::EINVAL);
            return null_mut();
        }
        parent.users.take();
        hand_out(Box::new(EmuPd {
            raw: parent.raw,
            pd: parent.pd.clone(),
            users: Users::default(),
            parent: a.pd,
        }))
    })
}

/// Whether `pd` is a parent domain of ours.
///
/// # Safety
/// `pd` is a live PD of ours.
pub unsafe fn is_parent_domain(pd: *mut ffi::ibv_pd) -> bool {
    // SAFETY: the caller's contract.
    !unsafe { emu::<EmuPd>(pd) }.parent.is_null()
}

/// Frees an object of a PD (an MR or AH) and releases the PD.
///
/// # Safety
/// `p` is NULL or a live `T` of ours, freed once; `pd_of` gives its PD.
pub(crate) unsafe fn free_pd_child<T: Handed, C>(
    p: *mut C,
    pd_of: impl FnOnce(&T) -> *mut ffi::ibv_pd,
) -> c_int {
    if p.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: the caller's contract.
    let b = unsafe { take_back::<T, _>(p) };
    // SAFETY: the PD outlives its objects (it cannot be freed while they exist).
    unsafe { emu::<EmuPd>(pd_of(&b)) }.users.release();
    0
}
