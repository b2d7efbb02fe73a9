//! The object verbs: protection domains, memory regions, completion channels and queues,
//! queue pairs, address handles and multicast attachment.

use std::ffi::{c_int, c_void};
use std::ptr::{null_mut, NonNull};
use std::sync::{Arc, Mutex};

use backend_sim::Personality;
use verbs_api::{
    AccessFlags, Completion, CompletionQueue, Context, Gid, QpInitAttr, QpType, QueuePair,
    QueuePairExt,
};

use crate::base::boundary::{boundary, MinusOne, Nothing, Null, ReturnsErrno};
use crate::base::errno::errno_of;
use crate::base::errno::set_errno;
use crate::base::ffi;
use crate::base::log::log_unsupported_once;
use crate::convert::{ah_from_c, cap_from_c, cap_to_c, gid_from_c, qp_attr_from_c, qp_attr_to_c};
use crate::events::{ChannelState, Object};
use crate::objects::{
    context, emu, hand_out, init_sync, take_back, EmuAh, EmuChannel, EmuCq, EmuMr, EmuPd, EmuQp,
    Handed, Users,
};
use crate::pending::Pending;
use crate::srq::EmuSrq;
use crate::state::emu as emulator;

/// `ibv_alloc_pd`.
///
/// # Safety
/// `ctx` is a live context of ours.
pub unsafe extern "C" fn ibv_alloc_pd(ctx: *mut ffi::ibv_context) -> *mut ffi::ibv_pd {
    boundary(Null, move || {
        if ctx.is_null() {
            set_errno(libc::EINVAL);
            return null_mut();
        }
        // SAFETY: a live context of ours.
        match unsafe { context(ctx) }.sim().alloc_pd() {
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
        if pd.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: a live PD of ours.
        let p: &EmuPd = unsafe { emu(pd) };
        if p.users.busy() {
            return libc::EBUSY;
        }
        if !p.parent.is_null() {
            // SAFETY: a parent domain's protection domain lives while the domain does (it
            // counts the domain among its users).
            unsafe { emu::<_, EmuPd>(p.parent) }.users.release();
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
        if !ctx.is_null() && unsafe { context(ctx) }.sim().personality() == Personality::Rxe {
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
        if a.pd.is_null() || a.comp_mask & !known != 0 {
            set_errno(libc::EINVAL);
            return null_mut();
        }
        // SAFETY: a live PD of ours.
        let parent: &EmuPd = unsafe { emu(a.pd) };
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
    !unsafe { emu::<_, EmuPd>(pd) }.parent.is_null()
}

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
        let m: &mut EmuMr = unsafe { &mut *mr.cast::<EmuMr>() };
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
                    unsafe { emu::<_, EmuPd>(m.raw.pd) }.users.release();
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

/// Frees an object of a PD (an MR or AH) and releases the PD.
///
/// # Safety
/// `p` is NULL or a live `T` of ours, freed once; `pd_of` gives its PD.
unsafe fn free_pd_child<T: Handed, C>(
    p: *mut C,
    pd_of: impl FnOnce(&T) -> *mut ffi::ibv_pd,
) -> c_int {
    if p.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: the caller's contract.
    let b = unsafe { take_back::<T, _>(p) };
    // SAFETY: the PD outlives its objects (it cannot be freed while they exist).
    unsafe { emu::<_, EmuPd>(pd_of(&b)) }.users.release();
    0
}

/// `ibv_create_comp_channel`: its `fd` is an eventfd that becomes readable when an
/// armed CQ gets a completion.
///
/// # Safety
/// `ctx` is a live context of ours.
pub unsafe extern "C" fn ibv_create_comp_channel(
    ctx: *mut ffi::ibv_context,
) -> *mut ffi::ibv_comp_channel {
    boundary(Null, move || {
        if ctx.is_null() {
            set_errno(libc::EINVAL);
            return null_mut();
        }
        let Ok(e) = emulator() else {
            set_errno(libc::ENODEV);
            return null_mut();
        };
        // SAFETY: a live context of ours.
        let sim = match unsafe { context(ctx) }.sim().create_comp_channel() {
            Ok(s) => s,
            Err(err) => {
                set_errno(errno_of(&err));
                return null_mut();
            }
        };
        let state = match ChannelState::new(sim) {
            Ok(s) => Arc::new(s),
            Err(err) => {
                set_errno(err.raw_os_error().unwrap_or(libc::EMFILE));
                return null_mut();
            }
        };
        e.register_channel(&state);
        let raw = ffi::ibv_comp_channel {
            context: ctx,
            fd: state.raw_fd(),
            refcnt: 0,
        };
        hand_out(Box::new(EmuChannel { raw, state }))
    })
}

/// `ibv_destroy_comp_channel`: EBUSY while CQs still use it.
///
/// # Safety
/// `channel` came from `ibv_create_comp_channel` and is destroyed once.
pub unsafe extern "C" fn ibv_destroy_comp_channel(channel: *mut ffi::ibv_comp_channel) -> c_int {
    boundary(ReturnsErrno, move || {
        if channel.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: a live channel of ours.
        let ch: &EmuChannel = unsafe { emu(channel) };
        if ch.state.cq_count() > 0 {
            return libc::EBUSY;
        }
        // SAFETY: the caller's contract.
        drop(unsafe { take_back::<EmuChannel, _>(channel) });
        0
    })
}

/// `ibv_create_cq`.
///
/// # Safety
/// `ctx` is a live context of ours; `channel` is NULL or a live channel of ours.
pub unsafe extern "C" fn ibv_create_cq(
    ctx: *mut ffi::ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut ffi::ibv_comp_channel,
    comp_vector: c_int,
) -> *mut ffi::ibv_cq {
    boundary(Null, move || {
        let (Ok(cqe), Ok(vector)) = (u32::try_from(cqe), u32::try_from(comp_vector)) else {
            set_errno(libc::EINVAL);
            return null_mut();
        };
        // SAFETY: the caller's contract.
        unsafe { create_cq(ctx, cqe, cq_context, channel, vector, null_mut(), |_| {}) }.cast()
    })
}

/// Creates a CQ (its C struct an `ibv_cq_ex`, whose start is the `ibv_cq`) and lets
/// `extend` fill the extended part before the program sees it.
///
/// # Safety
/// `ctx` is NULL or a live context of ours; `channel` is NULL or a live channel of ours.
pub(crate) unsafe fn create_cq(
    ctx: *mut ffi::ibv_context,
    cqe: u32,
    cq_context: *mut c_void,
    channel: *mut ffi::ibv_comp_channel,
    vector: u32,
    parent_domain: *mut ffi::ibv_pd,
    extend: impl FnOnce(&mut ffi::ibv_cq_ex),
) -> *mut ffi::ibv_cq_ex {
    if ctx.is_null() {
        set_errno(libc::EINVAL);
        return null_mut();
    }
    // SAFETY: a live context of ours.
    let c = unsafe { context(ctx) };
    let state = NonNull::new(channel).map(|ch| {
        // SAFETY: a live channel of ours.
        let ch: &EmuChannel = unsafe { emu(ch.as_ptr()) };
        ch.state.clone()
    });
    let cq = match c
        .sim()
        .create_cq(cqe, state.as_deref().map(|s| &s.sim), vector)
    {
        Ok(cq) => cq,
        Err(e) => {
            set_errno(errno_of(&e));
            return null_mut();
        }
    };
    let mut raw = ffi::ibv_cq_ex {
        context: ctx,
        channel,
        cq_context,
        handle: cq.handle(),
        cqe: c_int::try_from(cq.cqe()).unwrap_or(c_int::MAX),
        ..ffi::ibv_cq_ex::default()
    };
    extend(&mut raw);
    let handle = cq.handle();
    let p: *mut ffi::ibv_cq_ex = hand_out(Box::new(EmuCq {
        raw,
        cq,
        channel: state.clone(),
        users: Users::default(),
        current: Mutex::new(Completion::default()),
        parent_domain,
    }));
    if !parent_domain.is_null() {
        // SAFETY: a live parent domain of ours (create_cq_ex checked it); libmlx5 counts
        // the CQ as a user of the domain until it is destroyed.
        unsafe { emu::<_, EmuPd>(parent_domain) }.users.take();
    }
    // SAFETY: `p` is the live box just leaked; its sync objects are uninitialised.
    unsafe {
        init_sync(
            std::ptr::addr_of_mut!((*p).mutex).cast(),
            std::ptr::addr_of_mut!((*p).cond).cast(),
        );
    }
    if let Some(s) = state {
        s.add_cq(handle, p as usize);
    }
    c.state.add_object(Object::Cq, handle, p as usize);
    p
}

/// `ibv_destroy_cq`.
///
/// # Safety
/// `cq` came from `ibv_create_cq` and is destroyed once, after its QPs.
pub unsafe extern "C" fn ibv_destroy_cq(cq: *mut ffi::ibv_cq) -> c_int {
    boundary(ReturnsErrno, move || {
        if cq.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: a live CQ of ours.
        if unsafe { emu::<_, EmuCq>(cq) }.users.busy() {
            return libc::EBUSY;
        }
        // SAFETY: the caller's contract.
        let b = unsafe { take_back::<EmuCq, _>(cq) };
        if !b.parent_domain.is_null() {
            // SAFETY: the domain outlives the CQ, which it counts as a user.
            unsafe { emu::<_, EmuPd>(b.parent_domain) }.users.release();
        }
        if let Some(s) = &b.channel {
            s.remove_cq(b.raw.handle);
        }
        // SAFETY: the CQ's context outlives it.
        unsafe { context(b.raw.context) }
            .state
            .remove_object(Object::Cq, b.raw.handle);
        drop(b);
        0
    })
}

/// `ibv_resize_cq`: the simulated device resizes as rxe does (see `SimCq::resize`) and
/// `cq->cqe` then holds the new size.
///
/// # Safety
/// `cq` is NULL or a live CQ of ours.
pub unsafe extern "C" fn ibv_resize_cq(cq: *mut ffi::ibv_cq, cqe: c_int) -> c_int {
    boundary(ReturnsErrno, move || {
        let Ok(cqe) = u32::try_from(cqe) else {
            return libc::EINVAL;
        };
        if cq.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: a live CQ of ours.
        let c: &EmuCq = unsafe { emu(cq) };
        if let Err(e) = c.cq.resize(cqe) {
            return errno_of(&e);
        }
        let size = c_int::try_from(c.cq.cqe()).unwrap_or(c_int::MAX);
        // SAFETY: the CQ's own C struct, which the program reads after we return.
        unsafe { std::ptr::addr_of_mut!((*cq).cqe).write(size) };
        0
    })
}

/// `ibv_get_cq_event`: waits for the next completion event on `channel` (or fails with
/// EAGAIN when the program made its fd non-blocking).
///
/// # Safety
/// `channel` is a live channel of ours; `cq` and `cq_context` are valid for writes.
pub unsafe extern "C" fn ibv_get_cq_event(
    channel: *mut ffi::ibv_comp_channel,
    cq: *mut *mut ffi::ibv_cq,
    cq_context: *mut *mut c_void,
) -> c_int {
    boundary(MinusOne, move || {
        if channel.is_null() || cq.is_null() || cq_context.is_null() {
            set_errno(libc::EINVAL);
            return -1;
        }
        // SAFETY: a live channel of ours.
        let ch: &EmuChannel = unsafe { emu(channel) };
        match ch.state.get_event() {
            Ok(addr) => {
                let p = addr as *mut ffi::ibv_cq;
                // SAFETY: `p` is a live CQ on this channel (destroyed CQs are forgotten);
                // the out-pointers are the caller's.
                unsafe {
                    *cq = p;
                    *cq_context = (*p).cq_context;
                }
                0
            }
            Err(e) => {
                set_errno(e.raw_os_error().unwrap_or(libc::EIO));
                -1
            }
        }
    })
}

/// `ibv_ack_cq_events`.
///
/// # Safety
/// `cq` is a live CQ of ours.
pub unsafe extern "C" fn ibv_ack_cq_events(cq: *mut ffi::ibv_cq, nevents: u32) {
    boundary(Nothing, move || {
        if cq.is_null() {
            return;
        }
        // SAFETY: a live CQ of ours.
        let c: &EmuCq = unsafe { emu(cq) };
        c.cq.ack_events(nevents);
        // SAFETY: the counter belongs to the CQ; libibverbs updates it under the CQ's mutex,
        // and programs only read it after ack, from the same thread.
        unsafe {
            let field = std::ptr::addr_of_mut!((*cq).comp_events_completed);
            field.write(field.read().wrapping_add(nevents));
        }
    })
}

/// `ibv_create_qp`. The chosen queue sizes are written back to `init->cap`.
///
/// # Safety
/// `pd` is a live PD of ours; `init` is a valid `struct ibv_qp_init_attr` naming live
/// CQs of ours.
pub unsafe extern "C" fn ibv_create_qp(
    pd: *mut ffi::ibv_pd,
    init: *mut ffi::ibv_qp_init_attr,
) -> *mut ffi::ibv_qp {
    boundary(Null, move || {
        // SAFETY: the caller's contract.
        unsafe { create_qp(pd, init, None) }.cast()
    })
}

/// Creates a QP (its C struct an `ibv_qp_ex`, whose start is the `ibv_qp`); with
/// `send_ops`, the `ibv_qp_ex` send API is filled in too.
///
/// # Safety
/// `pd` is NULL or a live PD of ours; `init` is NULL or valid, naming live CQs (and SRQ).
pub(crate) unsafe fn create_qp(
    pd: *mut ffi::ibv_pd,
    init: *mut ffi::ibv_qp_init_attr,
    send_ops: Option<fn(&mut ffi::ibv_qp_ex)>,
) -> *mut ffi::ibv_qp_ex {
    if pd.is_null() || init.is_null() {
        set_errno(libc::EINVAL);
        return null_mut();
    }
    // SAFETY: the caller's valid attributes.
    let a = unsafe { &mut *init };
    if a.send_cq.is_null() || a.recv_cq.is_null() {
        set_errno(libc::EINVAL);
        return null_mut();
    }
    let Some(qp_type) = QpType::from_raw(a.qp_type) else {
        set_errno(libc::EOPNOTSUPP);
        return null_mut();
    };
    // SAFETY: live objects of ours.
    let (p, send, recv): (&EmuPd, &EmuCq, &EmuCq) =
        unsafe { (emu(pd), emu(a.send_cq), emu(a.recv_cq)) };
    // SAFETY: the PD's context is live.
    let c = unsafe { context(p.raw.context) };
    let srq: Option<&EmuSrq> = NonNull::new(a.srq).map(|s| {
        // SAFETY: a live SRQ of ours (the man page's contract).
        unsafe { emu(s.as_ptr()) }
    });
    let attr = QpInitAttr {
        send_cq: &send.cq,
        recv_cq: &recv.cq,
        srq: srq.map(|s| &s.srq),
        cap: cap_from_c(&a.cap),
        qp_type,
        sq_sig_all: a.sq_sig_all != 0,
    };
    let qp = match c.sim().create_qp(&p.pd, &attr) {
        Ok(q) => q,
        Err(e) => {
            set_errno(errno_of(&e));
            return null_mut();
        }
    };
    if let Ok((_, cap)) = qp.query(verbs_api::QpAttrMask::CAP) {
        a.cap = cap_to_c(&cap);
    }
    let mut raw = ffi::ibv_qp_ex {
        qp_base: ffi::ibv_qp {
            context: p.raw.context,
            qp_context: a.qp_context,
            pd,
            send_cq: a.send_cq,
            recv_cq: a.recv_cq,
            srq: a.srq,
            handle: qp.qp_num(),
            qp_num: qp.qp_num(),
            state: ffi::IBV_QPS_RESET,
            qp_type: a.qp_type,
            ..ffi::ibv_qp::default()
        },
        ..ffi::ibv_qp_ex::default()
    };
    if let Some(fill) = send_ops {
        fill(&mut raw);
    }
    for users in [&p.users, &send.users, &recv.users] {
        users.take();
    }
    if let Some(s) = srq {
        s.users.take();
    }
    let qp_num = qp.qp_num();
    let q: *mut ffi::ibv_qp_ex = hand_out(Box::new(EmuQp {
        raw,
        qp,
        extended: send_ops.is_some(),
        pending: Mutex::new(Pending::default()),
        rss_table: null_mut(),
    }));
    c.state.add_object(Object::Qp, qp_num, q as usize);
    // SAFETY: `q` is the live box just leaked; its sync objects are uninitialised.
    unsafe {
        init_sync(
            std::ptr::addr_of_mut!((*q).qp_base.mutex).cast(),
            std::ptr::addr_of_mut!((*q).qp_base.cond).cast(),
        );
    }
    q
}

/// `ibv_modify_qp`, checked against the kernel's state table (verbs-api) first.
///
/// # Safety
/// `qp` is a live QP of ours; `attr` is valid.
pub unsafe extern "C" fn ibv_modify_qp(
    qp: *mut ffi::ibv_qp,
    attr: *mut ffi::ibv_qp_attr,
    mask: c_int,
) -> c_int {
    boundary(ReturnsErrno, move || {
        if qp.is_null() || attr.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: the caller's valid attributes.
        let (a, m) = match qp_attr_from_c(unsafe { &*attr }, mask) {
            Ok(x) => x,
            Err(e) => return e,
        };
        // SAFETY: a live QP of ours.
        let q: &EmuQp = unsafe { emu(qp) };
        match q.qp.modify(&a, m) {
            Ok(()) => {
                if let Ok(s) = q.qp.state() {
                    // SAFETY: the QP's own C struct; programs read `state` without locking.
                    unsafe { std::ptr::addr_of_mut!((*qp).state).write(s.as_raw()) };
                }
                0
            }
            Err(e) => {
                if m.contains(verbs_api::QpAttrMask::AV) {
                    note_gid_not_carried("ibv_modify_qp", &a.ah_attr);
                }
                errno_of(&e)
            }
        }
    })
}

/// `ibv_query_qp`.
///
/// # Safety
/// `qp` is a live QP of ours; `attr` and `init` are valid for writes.
pub unsafe extern "C" fn ibv_query_qp(
    qp: *mut ffi::ibv_qp,
    attr: *mut ffi::ibv_qp_attr,
    mask: c_int,
    init: *mut ffi::ibv_qp_init_attr,
) -> c_int {
    boundary(ReturnsErrno, move || {
        if qp.is_null() || attr.is_null() || init.is_null() {
            return libc::EINVAL;
        }
        // The mask only says which attributes the caller wants: the kernel passes it to the
        // driver unchecked (`ib_uverbs_query_qp`), and mlx5 and rxe answer every attribute
        // whatever it holds, so bits no attribute has are no error.
        let m = verbs_api::QpAttrMask::from_bits_truncate(mask as u32);
        // SAFETY: a live QP of ours.
        let q: &EmuQp = unsafe { emu(qp) };
        match q.qp.query(m) {
            Ok((a, cap)) => {
                // SAFETY: the caller's writable structs; the QP's C fields are ours to read.
                unsafe {
                    attr.write(qp_attr_to_c(&a));
                    init.write(ffi::ibv_qp_init_attr {
                        qp_context: (*qp).qp_context,
                        send_cq: (*qp).send_cq,
                        recv_cq: (*qp).recv_cq,
                        srq: (*qp).srq,
                        cap: cap_to_c(&cap),
                        qp_type: (*qp).qp_type,
                        sq_sig_all: 0,
                    });
                }
                0
            }
            Err(e) => errno_of(&e),
        }
    })
}

/// `ibv_destroy_qp`.
///
/// # Safety
/// `qp` came from `ibv_create_qp` and is destroyed once.
pub unsafe extern "C" fn ibv_destroy_qp(qp: *mut ffi::ibv_qp) -> c_int {
    boundary(ReturnsErrno, move || {
        if qp.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: the caller's contract.
        let b = unsafe { take_back::<EmuQp, _>(qp) };
        // SAFETY: the PD, CQs, SRQ and table outlive their QPs (they cannot be freed while
        // used). An RSS QP has no CQs: its indirection table counts it instead.
        unsafe {
            let base = &b.raw.qp_base;
            emu::<_, EmuPd>(base.pd).users.release();
            if !base.send_cq.is_null() {
                emu::<_, EmuCq>(base.send_cq).users.release();
            }
            if !base.recv_cq.is_null() {
                emu::<_, EmuCq>(base.recv_cq).users.release();
            }
            if !base.srq.is_null() {
                emu::<_, EmuSrq>(base.srq).users.release();
            }
            if !b.rss_table.is_null() {
                emu::<_, crate::wq::EmuRwqIndTable>(b.rss_table)
                    .users
                    .release();
            }
        }
        // SAFETY: the QP's context outlives it.
        unsafe { context(b.raw.qp_base.context) }
            .state
            .remove_object(Object::Qp, b.raw.qp_base.qp_num);
        drop(b);
        0
    })
}

/// `ibv_qp_to_qp_ex`: the extended QP of a QP created by `ibv_create_qp_ex` with send
/// ops, else NULL (as libibverbs answers).
///
/// # Safety
/// `qp` is a live QP of ours.
pub unsafe extern "C" fn ibv_qp_to_qp_ex(qp: *mut ffi::ibv_qp) -> *mut ffi::ibv_qp_ex {
    boundary(Null, move || {
        if qp.is_null() {
            return null_mut();
        }
        // SAFETY: a live QP of ours.
        let q: &EmuQp = unsafe { emu(qp) };
        if q.extended {
            qp.cast()
        } else {
            null_mut()
        }
    })
}

/// `ibv_create_ah`.
///
/// # Safety
/// `pd` is a live PD of ours; `attr` is valid.
pub unsafe extern "C" fn ibv_create_ah(
    pd: *mut ffi::ibv_pd,
    attr: *mut ffi::ibv_ah_attr,
) -> *mut ffi::ibv_ah {
    boundary(Null, move || {
        if pd.is_null() || attr.is_null() {
            set_errno(libc::EINVAL);
            return null_mut();
        }
        // SAFETY: a live PD of ours and the caller's valid attributes.
        let (p, a): (&EmuPd, _) = unsafe { (emu(pd), ah_from_c(&*attr)) };
        // SAFETY: the PD's context is live.
        let c = unsafe { context(p.raw.context) };
        match c.sim().create_ah(&p.pd, &a) {
            Ok(ah) => {
                let raw = ffi::ibv_ah {
                    context: p.raw.context,
                    pd,
                    handle: 0,
                };
                p.users.take();
                hand_out(Box::new(EmuAh { raw, ah }))
            }
            Err(e) => {
                note_gid_not_carried("ibv_create_ah", &a);
                set_errno(errno_of(&e));
                null_mut()
            }
        }
    })
}

/// Says once why an address vector with a GRH whose destination GID is not IPv4-mapped
/// was refused (EINVAL): the fabric carries RoCE only between IPv4 addresses and between
/// link-local GIDs (RoCE v1 on mlx5, RoCEv2 over IPv6 on rxe), from the matching GID.
fn note_gid_not_carried(verb: &'static str, a: &verbs_api::AhAttr) {
    if a.is_global && a.grh.dgid.to_ipv4().is_none() {
        log_unsupported_once(
            verb,
            "IPv6 GIDs other than link-local ones, and link-local ones from a source GID \
             other than 0: the fabric carries RoCE between IPv4 GIDs and between link-local \
             GIDs (index 0)",
        );
    }
}

/// `ibv_destroy_ah`.
///
/// # Safety
/// `ah` came from `ibv_create_ah` and is destroyed once.
pub unsafe extern "C" fn ibv_destroy_ah(ah: *mut ffi::ibv_ah) -> c_int {
    boundary(ReturnsErrno, move || {
        // SAFETY: the caller's contract.
        unsafe { free_pd_child::<EmuAh, _>(ah, |a| a.raw.pd) }
    })
}

/// Runs a multicast attach or detach of `qp` to `gid`.
///
/// # Safety
/// `qp` is NULL or a live QP of ours; `gid` is NULL or valid.
unsafe fn mcast(
    qp: *mut ffi::ibv_qp,
    gid: *const ffi::ibv_gid,
    op: impl FnOnce(&EmuQp, Gid) -> verbs_api::Result<()>,
) -> c_int {
    if qp.is_null() || gid.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: a live QP of ours and the caller's GID.
    let (q, g) = unsafe { (emu(qp), gid_from_c(&*gid)) };
    op(q, g).map_or_else(|e| errno_of(&e), |()| 0)
}

/// `ibv_attach_mcast`.
///
/// # Safety
/// `qp` is a live QP of ours; `gid` is valid.
pub unsafe extern "C" fn ibv_attach_mcast(
    qp: *mut ffi::ibv_qp,
    gid: *const ffi::ibv_gid,
    lid: u16,
) -> c_int {
    boundary(ReturnsErrno, move || {
        // SAFETY: the caller's contract.
        unsafe { mcast(qp, gid, |q, g| q.qp.attach_mcast(&g, lid)) }
    })
}

/// `ibv_detach_mcast`.
///
/// # Safety
/// `qp` is a live QP of ours; `gid` is valid.
pub unsafe extern "C" fn ibv_detach_mcast(
    qp: *mut ffi::ibv_qp,
    gid: *const ffi::ibv_gid,
    lid: u16,
) -> c_int {
    boundary(ReturnsErrno, move || {
        // SAFETY: the caller's contract.
        unsafe { mcast(qp, gid, |q, g| q.qp.detach_mcast(&g, lid)) }
    })
}
