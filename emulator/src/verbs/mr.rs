//! Memory regions and windows: `ibv_reg_mr` and its forms, `ibv_rereg_mr`,
//! `ibv_dereg_mr`; `ibv_alloc_mw`, `ibv_bind_mw`, `ibv_dealloc_mw` (context ops).

use std::ffi::c_int;
use std::ffi::c_void;
use std::ptr::null_mut;

use verbs_api::AccessFlags;
use verbs_api::Context;
use verbs_api::MemoryWindow;
use verbs_api::MwBind;
use verbs_api::MwType;
use verbs_api::SendFlags;

use crate::base::boundary::boundary;
use crate::base::boundary::MinusOne;
use crate::base::boundary::Null;
use crate::base::boundary::ReturnsErrno;
use crate::base::errno::errno_of;
use crate::base::errno::set_errno;
use crate::base::ffi;
use crate::base::log::log_unsupported_once;
use crate::base::pointer::Castable;
use crate::base::pointer::{try_mut_from_ptr, try_ref_from_ptr};
use crate::objects::handles::context;
use crate::objects::handles::emu;
use crate::objects::handles::hand_out;
use crate::objects::handles::take_back;
use crate::objects::handles::EmuMr;
use crate::objects::handles::EmuMw;
use crate::objects::handles::EmuPd;
use crate::objects::handles::EmuQp;
use crate::objects::work::bind_info;
use crate::verbs::pd::free_pd_child;

/// `ibv_reg_mr_iova2`: registers `addr..addr+length`. The simulator addresses a region by
/// its virtual address, so `iova` must equal `addr`.
///
/// # Safety
/// `pd` is a live PD of ours; the range is the caller's memory, valid while registered.
pub unsafe extern "C" fn ibv_reg_mr_iova2(
    pd: *mut ffi::ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: u32,
) -> *mut ffi::ibv_mr {
    boundary(Null, move || {
        if pd.is_null() || length == 0 {
            set_errno(libc::EINVAL);
            return null_mut();
        }
        if iova != addr as u64 {
            log_unsupported_once("ibv_reg_mr_iova", "an iova other than the address");
            set_errno(libc::EOPNOTSUPP);
            return null_mut();
        }
        // Optional access bits (IBV_ACCESS_OPTIONAL_RANGE) are hints a device may ignore.
        let access = access & !ffi::IB_UVERBS_ACCESS_OPTIONAL_RANGE;
        let Some(flags) = AccessFlags::from_bits(access) else {
            set_errno(libc::EINVAL);
            return null_mut();
        };
        // SAFETY: a live PD of ours.
        let p: &EmuPd = unsafe { emu(pd) };
        // SAFETY: a live context of ours (the PD's).
        let c = unsafe { context(p.raw.context) };
        // SAFETY: the caller registers memory it owns and keeps valid while registered; no
        // Rust reference covers it.
        match unsafe { c.sim().reg_mr(&p.pd, addr.cast(), length, flags) } {
            Ok(mr) => {
                use verbs_api::MemoryRegion;
                let raw = ffi::ibv_mr {
                    context: p.raw.context,
                    pd,
                    addr,
                    length,
                    handle: mr.lkey(),
                    lkey: mr.lkey(),
                    rkey: mr.rkey(),
                };
                p.users.take();
                hand_out(Box::new(EmuMr { raw, mr }))
            }
            Err(e) => {
                set_errno(errno_of(&e));
                null_mut()
            }
        }
    })
}

/// `ibv_reg_mr`.
///
/// # Safety
/// As [`ibv_reg_mr_iova2`].
pub unsafe extern "C" fn ibv_reg_mr(
    pd: *mut ffi::ibv_pd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> *mut ffi::ibv_mr {
    boundary(Null, move || {
        // SAFETY: forwards the caller's arguments.
        unsafe { ibv_reg_mr_iova2(pd, addr, length, addr as u64, access as u32) }
    })
}

/// `ibv_reg_mr_iova`.
///
/// # Safety
/// As [`ibv_reg_mr_iova2`].
pub unsafe extern "C" fn ibv_reg_mr_iova(
    pd: *mut ffi::ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_int,
) -> *mut ffi::ibv_mr {
    boundary(Null, move || {
        // SAFETY: forwards the caller's arguments.
        unsafe { ibv_reg_mr_iova2(pd, addr, length, iova, access as u32) }
    })
}

/// `ibv_rereg_mr`: checks its input as libibverbs does (`IBV_REREG_MR_ERR_INPUT` with
/// EINVAL), then changes the region in place in the simulator: its PD, range and access
/// as the flags say, its keys kept (as rxe and mlx5 keep them when they change a region
/// in place). A change the device refuses leaves the MR as it was
/// (`IBV_REREG_MR_ERR_CMD`, errno set).
///
/// # Safety
/// `mr` is NULL or a live MR of ours; `pd` NULL or a live PD of ours; a new range is
/// the caller's memory, valid while registered.
pub unsafe extern "C" fn ibv_rereg_mr(
    mr: *mut ffi::ibv_mr,
    flags: c_int,
    pd: *mut ffi::ibv_pd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> c_int {
    boundary(MinusOne, move || {
        let input_error = || {
            set_errno(libc::EINVAL);
            ffi::IBV_REREG_MR_ERR_INPUT
        };
        let supported = ffi::IBV_REREG_MR_FLAGS_SUPPORTED as c_int;
        let translation = flags & ffi::IBV_REREG_MR_CHANGE_TRANSLATION as c_int != 0;
        let change_pd = flags & ffi::IBV_REREG_MR_CHANGE_PD as c_int != 0;
        let change_access = flags & ffi::IBV_REREG_MR_CHANGE_ACCESS as c_int != 0;
        if mr.is_null()
            || flags & !supported != 0
            || (translation && (length == 0 || addr.is_null()))
            || (access != 0 && !change_access)
            || (change_pd && pd.is_null())
        {
            return input_error();
        }
        let new_access = if change_access {
            // Optional access bits (IBV_ACCESS_OPTIONAL_RANGE) are hints a device may ignore.
            let bits =
                u32::try_from(access).unwrap_or(u32::MAX) & !ffi::IB_UVERBS_ACCESS_OPTIONAL_RANGE;
            match AccessFlags::from_bits(bits) {
                Some(a) => Some(a),
                None => return input_error(),
            }
        } else {
            None
        };
        // SAFETY: a live MR of ours; the program does not use it during the call.
        let m: &mut EmuMr = unsafe { &mut *EmuMr::from_c(mr).cast_mut() };
        // SAFETY: a live PD of ours (the caller's).
        let new_pd: Option<&EmuPd> = change_pd.then(|| unsafe { emu(pd) });
        if new_pd.is_some_and(|p| p.raw.context != m.raw.context) {
            set_errno(libc::EINVAL);
            return ffi::IBV_REREG_MR_ERR_CMD;
        }
        let range = translation.then_some((addr.cast::<u8>(), length));
        // SAFETY: the caller registers memory it owns and keeps valid while registered.
        match unsafe { m.mr.rereg(new_pd.map(|p| &p.pd), range, new_access) } {
            Ok(()) => {
                use verbs_api::MemoryRegion;
                if let Some(p) = new_pd {
                    p.users.take();
                    // SAFETY: the old PD outlives the MR, which it counts as a user.
                    unsafe { emu::<EmuPd>(m.raw.pd) }.users.release();
                    m.raw.pd = pd;
                }
                if translation {
                    m.raw.addr = addr;
                    m.raw.length = length;
                }
                m.raw.rkey = m.mr.rkey();
                0
            }
            Err(e) => {
                set_errno(errno_of(&e));
                ffi::IBV_REREG_MR_ERR_CMD
            }
        }
    })
}

/// `ibv_dereg_mr`.
///
/// # Safety
/// `mr` came from `ibv_reg_mr*` and is freed once.
pub unsafe extern "C" fn ibv_dereg_mr(mr: *mut ffi::ibv_mr) -> c_int {
    boundary(ReturnsErrno, move || {
        // SAFETY: the caller's contract.
        unsafe { free_pd_child::<EmuMr, _>(mr, |m| m.raw.pd) }
    })
}

/// `ibv_alloc_mw` (the context op behind the inline).
pub(crate) unsafe extern "C" fn alloc_mw(
    pd: *mut ffi::ibv_pd,
    mw_type: ffi::ibv_mw_type,
) -> *mut ffi::ibv_mw {
    boundary(Null, move || {
        let Some(t) = MwType::from_raw(mw_type) else {
            set_errno(libc::EINVAL);
            return null_mut();
        };
        // SAFETY: NULL or the inline caller passes a live PD of ours.
        let p: &EmuPd = unsafe {
            try_ref_from_ptr!(pd, {
                set_errno(libc::EINVAL);
                null_mut()
            })
        };
        // SAFETY: a live context of ours (the PD's).
        let c = unsafe { context(p.raw.context) };
        match c.sim().alloc_mw(&p.pd, t) {
            Ok(mw) => {
                let raw = ffi::ibv_mw {
                    context: p.raw.context,
                    pd,
                    rkey: mw.rkey(),
                    handle: mw.handle(),
                    type_: mw_type,
                };
                p.users.take();
                hand_out(Box::new(EmuMw { raw, mw }))
            }
            Err(e) => {
                set_errno(errno_of(&e));
                null_mut()
            }
        }
    })
}

/// `ibv_bind_mw` (the context op behind the inline, which checked the type and PDs): posts
/// the bind and gives the window its new rkey, as rdma-core's providers do.
pub(crate) unsafe extern "C" fn bind_mw(
    qp: *mut ffi::ibv_qp,
    mw: *mut ffi::ibv_mw,
    mw_bind: *mut ffi::ibv_mw_bind,
) -> c_int {
    boundary(ReturnsErrno, move || {
        // SAFETY: the inline caller passes NULL or a live QP and window of ours and a valid
        // bind.
        let (q, m, b): (&EmuQp, &mut EmuMw, &ffi::ibv_mw_bind) = unsafe {
            (
                try_ref_from_ptr!(qp, libc::EINVAL),
                try_mut_from_ptr!(mw, libc::EINVAL),
                try_ref_from_ptr!(mw_bind, libc::EINVAL),
            )
        };
        let Some(send_flags) = SendFlags::from_bits(b.send_flags) else {
            return libc::EINVAL;
        };
        m.mw.set_rkey(m.raw.rkey);
        let bind = MwBind {
            wr_id: b.wr_id,
            send_flags,
            // SAFETY: the bind's region is NULL or a live MR of ours.
            bind_info: unsafe { bind_info(&b.bind_info) },
        };
        // SAFETY: a live context of ours (the QP's).
        let c = unsafe { context(q.raw.qp_base.context) };
        match c.sim().bind_mw(&q.qp, &m.mw, &bind) {
            Ok(rkey) => {
                m.raw.rkey = rkey;
                0
            }
            Err(e) => errno_of(&e),
        }
    })
}

/// `ibv_dealloc_mw`: unbinds and frees the window.
pub(crate) unsafe extern "C" fn dealloc_mw(mw: *mut ffi::ibv_mw) -> c_int {
    boundary(ReturnsErrno, move || {
        if mw.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: the program frees a live window of ours once.
        let b = unsafe { take_back::<EmuMw, _>(mw) };
        // SAFETY: the PD outlives its windows (it cannot be freed while they exist).
        unsafe { emu::<EmuPd>(b.raw.pd) }.users.release();
        0
    })
}
