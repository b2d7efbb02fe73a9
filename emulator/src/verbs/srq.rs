//! Shared receive queues: `ibv_create_srq`, `ibv_modify_srq`, `ibv_query_srq`,
//! `ibv_destroy_srq` and the `post_srq_recv` op behind the inline `ibv_post_srq_recv`.

use std::ffi::c_int;
use std::ptr::null_mut;

use backend_sim::verbs::SimSrq;
use verbs_api::{Context, SharedReceiveQueue, SrqAttr, SrqAttrMask, SrqInitAttr};

use crate::base::boundary::{boundary, Null, ReturnsErrno};
use crate::base::errno::errno_of;
use crate::base::errno::set_errno;
use crate::base::ffi;
use crate::base::pointer::Castable;
use crate::base::pointer::{try_mut_from_ptr, try_ref_from_ptr};
use crate::objects::handles::{context, emu, hand_out, init_sync, take_back, EmuPd, Handed, Users};
use crate::objects::work::{post_chain, post_one_recv};
use crate::runtime::delivery::Object;
use crate::runtime::leaks::Kind;

// SAFETY: `EmuSrq` is `#[repr(C)]` and starts with its `ibv_srq`.
unsafe impl Castable for EmuSrq {
    type C = ffi::ibv_srq;
}

/// A shared receive queue.
#[repr(C)]
pub struct EmuSrq {
    /// `struct ibv_srq`.
    pub raw: ffi::ibv_srq,
    /// The simulator's SRQ.
    pub srq: SimSrq,
    /// Its QPs.
    pub users: Users,
}

impl std::fmt::Debug for EmuSrq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmuSrq")
            .field("srq", &self.srq)
            .finish_non_exhaustive()
    }
}

impl Handed for EmuSrq {
    const KIND: Kind = Kind::Srq;
}

fn attr_to_c(a: &SrqAttr) -> ffi::ibv_srq_attr {
    ffi::ibv_srq_attr {
        max_wr: a.max_wr,
        max_sge: a.max_sge,
        srq_limit: a.srq_limit,
    }
}

/// `ibv_create_srq`; the sizes granted are written back to `init->attr`.
///
/// # Safety
/// `pd` is a live PD of ours; `init` is valid.
pub unsafe extern "C" fn ibv_create_srq(
    pd: *mut ffi::ibv_pd,
    init: *mut ffi::ibv_srq_init_attr,
) -> *mut ffi::ibv_srq {
    boundary(Null, move || {
        let einval = || {
            set_errno(libc::EINVAL);
            null_mut()
        };
        // SAFETY: NULL or a live PD of ours; NULL or the caller's valid attributes.
        let (p, i): (&EmuPd, &mut ffi::ibv_srq_init_attr) = unsafe {
            (
                try_ref_from_ptr!(pd, einval()),
                try_mut_from_ptr!(init, einval()),
            )
        };
        // SAFETY: the PD's context is live.
        let c = unsafe { context(p.raw.context) };
        let attr = SrqInitAttr {
            attr: SrqAttr {
                max_wr: i.attr.max_wr,
                max_sge: i.attr.max_sge,
                srq_limit: i.attr.srq_limit,
            },
        };
        let srq = match c.sim().create_srq(&p.pd, &attr) {
            Ok(s) => s,
            Err(e) => {
                set_errno(errno_of(&e));
                return null_mut();
            }
        };
        if let Ok(granted) = srq.query() {
            i.attr = attr_to_c(&granted);
        }
        let raw = ffi::ibv_srq {
            context: p.raw.context,
            srq_context: i.srq_context,
            pd,
            handle: srq.handle(),
            ..ffi::ibv_srq::default()
        };
        let handle = srq.handle();
        let s: *mut ffi::ibv_srq = hand_out(Box::new(EmuSrq {
            raw,
            srq,
            users: Users::default(),
        }));
        p.users.take();
        c.state.add_object(Object::Srq, handle, s as usize);
        // SAFETY: `s` is the live box just leaked; its sync objects are uninitialised.
        unsafe {
            init_sync(
                std::ptr::addr_of_mut!((*s).mutex).cast(),
                std::ptr::addr_of_mut!((*s).cond).cast(),
            );
        }
        s
    })
}

/// `ibv_modify_srq`: resize (`IBV_SRQ_MAX_WR`) or arm the limit (`IBV_SRQ_LIMIT`).
///
/// # Safety
/// `srq` is a live SRQ of ours; `attr` is valid.
pub unsafe extern "C" fn ibv_modify_srq(
    srq: *mut ffi::ibv_srq,
    attr: *mut ffi::ibv_srq_attr,
    mask: c_int,
) -> c_int {
    boundary(ReturnsErrno, move || {
        // SAFETY: NULL or a live SRQ of ours; NULL or the caller's attributes.
        let (s, a): (&EmuSrq, &ffi::ibv_srq_attr) = unsafe {
            (
                try_ref_from_ptr!(srq, libc::EINVAL),
                try_ref_from_ptr!(attr, libc::EINVAL),
            )
        };
        let Some(m) = u32::try_from(mask).ok().and_then(SrqAttrMask::from_bits) else {
            return libc::EINVAL;
        };
        let a = *a;
        let a = SrqAttr {
            max_wr: a.max_wr,
            max_sge: a.max_sge,
            srq_limit: a.srq_limit,
        };
        s.srq.modify(&a, m).map_or_else(|e| errno_of(&e), |()| 0)
    })
}

/// `ibv_query_srq`.
///
/// # Safety
/// `srq` is a live SRQ of ours; `attr` is valid for a write.
pub unsafe extern "C" fn ibv_query_srq(
    srq: *mut ffi::ibv_srq,
    attr: *mut ffi::ibv_srq_attr,
) -> c_int {
    boundary(ReturnsErrno, move || {
        if attr.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: NULL or a live SRQ of ours.
        let s: &EmuSrq = unsafe { try_ref_from_ptr!(srq, libc::EINVAL) };
        match s.srq.query() {
            Ok(a) => {
                // SAFETY: the caller's writable struct.
                unsafe { attr.write(attr_to_c(&a)) };
                0
            }
            Err(e) => errno_of(&e),
        }
    })
}

/// `ibv_destroy_srq`.
///
/// # Safety
/// `srq` came from `ibv_create_srq` and is destroyed once, after its QPs.
pub unsafe extern "C" fn ibv_destroy_srq(srq: *mut ffi::ibv_srq) -> c_int {
    boundary(ReturnsErrno, move || {
        // SAFETY: NULL or a live SRQ of ours.
        let s: &EmuSrq = unsafe { try_ref_from_ptr!(srq, libc::EINVAL) };
        if s.users.busy() {
            return libc::EBUSY;
        }
        // SAFETY: a box leaked by ibv_create_srq; this is its end.
        let b = unsafe { take_back::<EmuSrq, _>(srq) };
        // SAFETY: the PD outlives its SRQs (it cannot be freed while they exist).
        unsafe { emu::<EmuPd>(b.raw.pd) }.users.release();
        // SAFETY: the SRQ's context outlives it.
        unsafe { context(b.raw.context) }
            .state
            .remove_object(Object::Srq, b.raw.handle);
        drop(b);
        0
    })
}

/// `ibv_context.ops.post_srq_recv`, one request at a time; on failure `*bad_wr` is the
/// first request not posted.
///
/// # Safety
/// `srq` is a live SRQ of ours; `wr` is a valid chain whose buffers lie in registered
/// memory valid until their completions.
pub unsafe extern "C" fn post_srq_recv(
    srq: *mut ffi::ibv_srq,
    wr: *mut ffi::ibv_recv_wr,
    bad_wr: *mut *mut ffi::ibv_recv_wr,
) -> c_int {
    boundary(ReturnsErrno, move || {
        // SAFETY: the inline caller passes a live SRQ of ours.
        let s: &EmuSrq = unsafe { emu(srq) };
        // SAFETY: the program's chain and out-pointer; its buffers lie in registered memory
        // valid until the completions.
        unsafe { post_chain(wr, bad_wr, |w| post_one_recv(w, |r| s.srq.post_recv(r))) }
    })
}
