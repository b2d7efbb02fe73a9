//! Completion queues: `ibv_create_cq`, `ibv_destroy_cq`, `ibv_resize_cq`, their events
//! (`ibv_get_cq_event`, `ibv_ack_cq_events`) and the context ops `ibv_poll_cq`,
//! `ibv_req_notify_cq`.

use std::ffi::c_int;
use std::ffi::c_void;
use std::ptr::null_mut;
use std::ptr::NonNull;
use std::sync::Mutex;

use verbs_api::Completion;
use verbs_api::CompletionQueue;
use verbs_api::Context;

use crate::base::boundary::boundary;
use crate::base::boundary::MinusOne;
use crate::base::boundary::Nothing;
use crate::base::boundary::Null;
use crate::base::boundary::ReturnsErrno;
use crate::base::boundary::Value;
use crate::base::errno::errno_of;
use crate::base::errno::set_errno;
use crate::base::ffi;
use crate::base::pointer::{try_ref, try_ref_from_ptr};
use crate::objects::convert::wc_to_c;
use crate::objects::handles::context;
use crate::objects::handles::emu;
use crate::objects::handles::hand_out;
use crate::objects::handles::init_sync;
use crate::objects::handles::take_back;
use crate::objects::handles::EmuChannel;
use crate::objects::handles::EmuContext;
use crate::objects::handles::EmuCq;
use crate::objects::handles::EmuPd;
use crate::objects::handles::Users;
use crate::runtime::delivery::Object;

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
    // SAFETY: NULL or a live context of ours.
    let c: &EmuContext = unsafe {
        try_ref_from_ptr!(ctx, {
            set_errno(libc::EINVAL);
            null_mut()
        })
    };
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
    // SAFETY: NULL or a live parent domain of ours (create_cq_ex checked it); libmlx5
    // counts the CQ as a user of the domain until it is destroyed.
    if let Some(domain) = unsafe { try_ref::<EmuPd>(parent_domain) } {
        domain.users.take();
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
        // SAFETY: NULL or a live CQ of ours.
        if unsafe { try_ref_from_ptr!(cq, libc::EINVAL) as &EmuCq }
            .users
            .busy()
        {
            return libc::EBUSY;
        }
        // SAFETY: the caller's contract.
        let b = unsafe { take_back::<EmuCq, _>(cq) };
        // SAFETY: NULL or the domain, which outlives the CQ (it counts it as a user).
        if let Some(domain) = unsafe { try_ref::<EmuPd>(b.parent_domain) } {
            domain.users.release();
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
        // SAFETY: NULL or a live CQ of ours.
        let c: &EmuCq = unsafe { try_ref_from_ptr!(cq, libc::EINVAL) };
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
        if cq.is_null() || cq_context.is_null() {
            set_errno(libc::EINVAL);
            return -1;
        }
        // SAFETY: NULL or a live channel of ours.
        let ch: &EmuChannel = unsafe {
            try_ref_from_ptr!(channel, {
                set_errno(libc::EINVAL);
                -1
            })
        };
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
        // SAFETY: NULL or a live CQ of ours.
        let c: &EmuCq = unsafe { try_ref_from_ptr!(cq) };
        c.cq.ack_events(nevents);
        // SAFETY: the counter belongs to the CQ; libibverbs updates it under the CQ's mutex,
        // and programs only read it after ack, from the same thread.
        unsafe {
            let field = std::ptr::addr_of_mut!((*cq).comp_events_completed);
            field.write(field.read().wrapping_add(nevents));
        }
    })
}

/// How many completions one poll moves through the simulator at a time (a stack buffer).
const POLL_BATCH: usize = 16;

/// For a poll that found no completion: takes the frames the fabric brought on this
/// thread (see [`crate::runtime::host::Emu::poll_fabric`]) and lets `again` look again;
/// if it still finds none, yields the processor, so that a program polling in a loop
/// lets the fabric process and the progress threads run (on a machine with fewer cores
/// than busy threads they would otherwise wait for the poller's time slice to end). Does
/// nothing without a fabric process. `again` returns true when it found one.
pub(crate) fn poll_fabric(again: impl FnOnce() -> bool) {
    if crate::runtime::host::emu().is_ok_and(|e| e.poll_fabric()) && !again() {
        std::thread::yield_now();
    }
}

/// `ibv_poll_cq`: up to `num` completions into `wc`; a negative value on error. Finding
/// none, it takes the frames the fabric brought on this thread and looks again
/// ([`poll_fabric`]).
pub(crate) unsafe extern "C" fn poll_cq(
    cq: *mut ffi::ibv_cq,
    num: c_int,
    wc: *mut ffi::ibv_wc,
) -> c_int {
    boundary(Value(-libc::EIO), move || {
        let Ok(num) = usize::try_from(num) else {
            return -libc::EINVAL;
        };
        if num > 0 && wc.is_null() {
            return -libc::EINVAL;
        }
        // SAFETY: the inline caller passes a live CQ of ours.
        let c: &EmuCq = unsafe { emu(cq) };
        if let Ok(e) = crate::runtime::host::emu() {
            e.read_doorbells();
        }
        // Moves up to `limit` (at most `num`) completions into the caller's array: how
        // many, or the CQ's error as the negative errno when it came before any.
        let fill = |limit: usize| -> Result<usize, c_int> {
            let mut buf = [Completion::default(); POLL_BATCH];
            let mut done = 0usize;
            while done < limit {
                let want = (limit - done).min(POLL_BATCH);
                let got = match c.cq.poll(&mut buf[..want]) {
                    Ok(n) => n,
                    Err(e) if done == 0 => return Err(-errno_of(&e)),
                    Err(_) => break,
                };
                for (i, w) in buf[..got].iter().enumerate() {
                    // SAFETY: done + i < limit <= num, inside the caller's array of `num`
                    // entries.
                    unsafe { wc.add(done + i).write(wc_to_c(w)) };
                }
                done += got;
                if got < want {
                    break;
                }
            }
            Ok(done)
        };
        let mut done = match fill(num) {
            Ok(n) => n,
            Err(errno) => return errno,
        };
        if done == 0 && num > 0 {
            poll_fabric(|| {
                done = fill(num.min(POLL_BATCH)).unwrap_or(0);
                done > 0
            });
        }
        if done > 0 {
            crate::fabric::spacing::program_polled();
        }
        c_int::try_from(done).unwrap_or(c_int::MAX)
    })
}

/// `ibv_req_notify_cq`.
pub(crate) unsafe extern "C" fn req_notify_cq(
    cq: *mut ffi::ibv_cq,
    solicited_only: c_int,
) -> c_int {
    boundary(ReturnsErrno, move || {
        // SAFETY: the inline caller passes a live CQ of ours.
        let c: &EmuCq = unsafe { emu(cq) };
        if let Ok(e) = crate::runtime::host::emu() {
            e.program_waits();
        }
        c.cq.req_notify(solicited_only != 0)
            .map_or_else(|e| errno_of(&e), |()| 0)
    })
}
