//! Extended CQs (`verbs_context.create_cq_ex`, behind the inline `ibv_create_cq_ex`) and
//! the poll session the inline `ibv_start_poll`, `ibv_next_poll`, `ibv_end_poll` and
//! `ibv_wc_read_*` run through the `ibv_cq_ex` function pointers.

use std::ffi::{c_int, c_uint};
use std::ptr::null_mut;

use verbs_api::{Completion, CompletionQueue};

use crate::base::boundary::{boundary, Nothing, Null, ReturnsErrno, Value};
use crate::base::errno::errno_of;
use crate::base::errno::set_errno;
use crate::base::ffi;
use crate::base::log::log_unsupported_once;
use crate::base::pointer::{try_ref, try_ref_from_ptr};
use crate::base::sync::lock;
use crate::objects::handles::{emu, EmuCq};
use crate::verbs::cq::create_cq;
use crate::verbs::pd::is_parent_domain;

/// The `wc_flags` the emulator's extended CQs can report: libibverbs' standard set
/// (byte length, immediate, QP number, source QP, SLID, SL, DLID path bits), and the
/// stripped customer VLAN the mlx5 personality advertises (`IBV_RAW_PACKET_CAP_CVLAN_STRIPPING`).
const SUPPORTED_WC_FLAGS: u64 =
    ffi::IBV_WC_STANDARD_FLAGS as u64 | ffi::IBV_WC_EX_WITH_CVLAN as u64;

/// `verbs_context.create_cq_ex`.
///
/// # Safety
/// `ctx` is a live context of ours; `attr` is valid, its channel NULL or ours.
pub unsafe extern "C" fn create_cq_ex(
    ctx: *mut ffi::ibv_context,
    attr: *mut ffi::ibv_cq_init_attr_ex,
) -> *mut ffi::ibv_cq_ex {
    boundary(Null, move || {
        // SAFETY: NULL or the caller's valid attributes.
        let a: &ffi::ibv_cq_init_attr_ex = unsafe {
            try_ref_from_ptr!(attr, {
                set_errno(libc::EINVAL);
                null_mut()
            })
        };
        if a.wc_flags & !(ffi::IBV_CREATE_CQ_SUP_WC_FLAGS as u64) != 0 {
            set_errno(libc::EINVAL);
            return null_mut();
        }
        if a.wc_flags & !SUPPORTED_WC_FLAGS != 0 {
            log_unsupported_once(
                "ibv_create_cq_ex",
                "completion timestamps, flow tags and TM info",
            );
            set_errno(libc::EOPNOTSUPP);
            return null_mut();
        }
        let known = ffi::IBV_CQ_INIT_ATTR_MASK_FLAGS | ffi::IBV_CQ_INIT_ATTR_MASK_PD;
        if a.comp_mask & !known != 0 {
            set_errno(libc::EINVAL);
            return null_mut();
        }
        // A CQ in a parent domain: the domain must be one (else EINVAL, as libmlx5 answers);
        // its allocators would only place the CQ's buffer, which is in the simulator.
        if a.comp_mask & ffi::IBV_CQ_INIT_ATTR_MASK_PD != 0
            && (a.parent_domain.is_null()
            // SAFETY: a non-NULL `parent_domain` is a live PD of ours (the caller's
            // contract).
            || !unsafe { is_parent_domain(a.parent_domain) })
        {
            set_errno(libc::EINVAL);
            return null_mut();
        }
        // Single-threaded and ignore-overrun are hints a device may take or not.
        let flags =
            ffi::IBV_CREATE_CQ_ATTR_SINGLE_THREADED | ffi::IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;
        if a.comp_mask & ffi::IBV_CQ_INIT_ATTR_MASK_FLAGS != 0 && a.flags & !flags != 0 {
            set_errno(libc::EINVAL);
            return null_mut();
        }
        let domain = if a.comp_mask & ffi::IBV_CQ_INIT_ATTR_MASK_PD != 0 {
            a.parent_domain
        } else {
            null_mut()
        };
        // SAFETY: the caller's live context and channel; `domain` is NULL or a live parent
        // domain of ours (checked above).
        unsafe {
            create_cq(
                ctx,
                a.cqe,
                a.cq_context,
                a.channel,
                a.comp_vector,
                domain,
                |cq| {
                    cq.start_poll = Some(start_poll);
                    cq.next_poll = Some(next_poll);
                    cq.end_poll = Some(end_poll);
                    cq.read_opcode = Some(read_opcode);
                    cq.read_vendor_err = Some(read_vendor_err);
                    cq.read_byte_len = Some(read_byte_len);
                    cq.read_imm_data = Some(read_imm_data);
                    cq.read_qp_num = Some(read_qp_num);
                    cq.read_src_qp = Some(read_src_qp);
                    cq.read_wc_flags = Some(read_wc_flags);
                    cq.read_slid = Some(read_slid);
                    cq.read_sl = Some(read_sl);
                    cq.read_dlid_path_bits = Some(read_dlid_path_bits);
                    cq.read_cvlan = Some(read_cvlan);
                },
            )
        }
    })
}

/// Takes the next completion into the session: 0, ENOENT when there is none, or the
/// CQ's error.
///
/// # Safety
/// `cq` is a live extended CQ of ours.
unsafe fn advance(cq: *mut ffi::ibv_cq_ex) -> c_int {
    // SAFETY: the inline caller passes a live CQ of ours.
    let c: &EmuCq = unsafe { emu::<EmuCq>(cq.cast()) };
    if let Ok(e) = crate::runtime::host::emu() {
        e.read_doorbells();
    }
    let mut one = [Completion::default()];
    match c.cq.poll(&mut one) {
        Ok(0) => libc::ENOENT,
        Ok(_) => {
            *lock(&c.current) = one[0];
            // SAFETY: the CQ's own C struct; the program reads these after we return.
            unsafe {
                std::ptr::addr_of_mut!((*cq).status).write(one[0].status.as_raw());
                std::ptr::addr_of_mut!((*cq).wr_id).write(one[0].wr_id);
            }
            0
        }
        Err(e) => errno_of(&e),
    }
}

/// `ibv_cq_ex.start_poll`; finding no completion, it takes the frames the fabric brought
/// and looks again, as `ibv_poll_cq` does.
unsafe extern "C" fn start_poll(
    cq: *mut ffi::ibv_cq_ex,
    attr: *mut ffi::ibv_poll_cq_attr,
) -> c_int {
    boundary(ReturnsErrno, move || {
        // SAFETY: `attr` is NULL or the caller's valid attribute (the man page's contract).
        if unsafe { try_ref::<ffi::ibv_poll_cq_attr>(attr) }.is_some_and(|a| a.comp_mask != 0) {
            return libc::EINVAL;
        }
        // SAFETY: the inline caller passes a live CQ of ours.
        let mut r = unsafe { advance(cq) };
        if r == libc::ENOENT {
            super::cq::poll_fabric(|| {
                // SAFETY: as above.
                r = unsafe { advance(cq) };
                r != libc::ENOENT
            });
        }
        r
    })
}

/// `ibv_cq_ex.next_poll`.
unsafe extern "C" fn next_poll(cq: *mut ffi::ibv_cq_ex) -> c_int {
    boundary(ReturnsErrno, move || {
        // SAFETY: the inline caller passes a live CQ of ours.
        unsafe { advance(cq) }
    })
}

/// `ibv_cq_ex.end_poll`: the session holds nothing to release.
extern "C" fn end_poll(_cq: *mut ffi::ibv_cq_ex) {
    boundary(Nothing, move || {})
}

/// The session's current completion.
///
/// # Safety
/// `cq` is a live extended CQ of ours.
unsafe fn current(cq: *mut ffi::ibv_cq_ex) -> Completion {
    // SAFETY: the inline caller passes a live CQ of ours.
    let c: &EmuCq = unsafe { emu::<EmuCq>(cq.cast()) };
    *lock(&c.current)
}

/// Defines `ibv_cq_ex.read_*` functions: each returns a field of the current completion.
macro_rules! readers {
    ($($name:ident -> $ty:ty = |$c:ident| $e:expr;)*) => {$(
        unsafe extern "C" fn $name(cq: *mut ffi::ibv_cq_ex) -> $ty {
            boundary(Value(<$ty>::default()), move || {
            // SAFETY: the inline caller passes a live CQ of ours.
            let $c = unsafe { current(cq) };
            $e
            })
        }
    )*};
}

readers! {
    read_opcode -> ffi::ibv_wc_opcode = |c| c.opcode.as_raw();
    read_vendor_err -> u32 = |c| c.vendor_err;
    read_byte_len -> u32 = |c| c.byte_len;
    read_imm_data -> u32 = |c| c.imm_data.to_be();
    read_qp_num -> u32 = |c| c.qp_num;
    read_src_qp -> u32 = |c| c.src_qp;
    read_wc_flags -> c_uint = |c| c.wc_flags.bits();
    read_slid -> u32 = |c| u32::from(c.slid);
    read_sl -> u8 = |c| c.sl;
    read_dlid_path_bits -> u8 = |c| c.dlid_path_bits;
}

/// `ibv_cq_ex.read_cvlan`: the VLAN tag the receive queue stripped from the frame, as
/// mlx5 reports it (its CQE's `vlan_info`). Only a work queue created with
/// `IBV_WQ_FLAGS_CVLAN_STRIPPING` strips tags, and the emulator refuses WQ create flags
/// ([`crate::verbs::wq`]), so a tagged frame reaches the buffer whole and no tag was stripped: 0.
unsafe extern "C" fn read_cvlan(_cq: *mut ffi::ibv_cq_ex) -> u16 {
    boundary(Value(0), move || 0)
}
