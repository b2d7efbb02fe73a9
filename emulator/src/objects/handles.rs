//! The verbs objects the library hands out: each is the C struct a program reads, first
//! in a `#[repr(C)]` box, followed by the simulator's object, so a pointer to the C
//! struct is a pointer to the whole (the container_of that rdma-core's providers use).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use backend_sim::verbs::{SimAh, SimContext, SimCq, SimMr, SimMw, SimPd, SimQp};
use verbs_api::Completion;

use crate::base::ffi;
use crate::base::pointer::Castable;
use crate::objects::pending::Pending;
use crate::runtime::delivery::{ChannelState, ContextState};
use crate::runtime::host::EmuDevice;
use crate::runtime::leaks;
use crate::runtime::leaks::Kind;

/// An open device: `struct verbs_context` (whose last member is the `ibv_context`
/// programs get) and the simulator's context.
#[repr(C)]
pub struct EmuContext {
    /// The extended context; `vctx.context` is what `ibv_open_device` returns.
    pub vctx: ffi::verbs_context,
    /// The simulator's context and the async events (shared with the progress thread).
    pub state: Arc<ContextState>,
    /// The device it was opened on.
    pub device: &'static EmuDevice,
    /// `context.cmd_fd`: where rdma-core's context holds its open uverbs device, a file
    /// descriptor of the context's own (an eventfd that is never signalled), so programs
    /// that `dup` or `poll` it work; the emulator takes no uverbs commands through it
    /// (importing it with `ibv_import_device` is refused). Closed with the context.
    pub cmd_fd: std::os::fd::OwnedFd,
}

impl EmuContext {
    /// The simulator's context.
    pub fn sim(&self) -> &SimContext {
        &self.state.ctx
    }
}

/// How many objects use a PD, CQ or SRQ: destroying it while any does is EBUSY, as the
/// kernel answers (and it keeps the users' pointers to it valid).
#[derive(Debug, Default)]
pub struct Users(AtomicUsize);

impl Users {
    /// One more user.
    pub fn take(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    /// One user fewer.
    pub fn release(&self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }

    /// Whether anything still uses it.
    pub fn busy(&self) -> bool {
        self.0.load(Ordering::Relaxed) > 0
    }
}

/// A protection domain.
#[repr(C)]
#[derive(Debug)]
pub struct EmuPd {
    /// `struct ibv_pd`.
    pub raw: ffi::ibv_pd,
    /// The simulator's PD.
    pub pd: SimPd,
    /// Its MRs, QPs, SRQs and AHs (and parent domains, for a protection domain).
    pub users: Users,
    /// For a parent domain (`ibv_alloc_parent_domain`), the protection domain it wraps
    /// (whose `users` count it); NULL for a protection domain.
    pub parent: *mut ffi::ibv_pd,
}

/// A memory region.
#[repr(C)]
#[derive(Debug)]
pub struct EmuMr {
    /// `struct ibv_mr`.
    pub raw: ffi::ibv_mr,
    /// The simulator's MR.
    pub mr: SimMr,
}

/// A memory window.
#[repr(C)]
#[derive(Debug)]
pub struct EmuMw {
    /// `struct ibv_mw`.
    pub raw: ffi::ibv_mw,
    /// The simulator's window.
    pub mw: SimMw,
}

/// A completion channel.
#[repr(C)]
#[derive(Debug)]
pub struct EmuChannel {
    /// `struct ibv_comp_channel`.
    pub raw: ffi::ibv_comp_channel,
    /// Its events and file descriptor (shared with the progress thread).
    pub state: Arc<ChannelState>,
}

/// A completion queue. Its C struct is always an `ibv_cq_ex`, which starts with the
/// members of `ibv_cq` (tests/layout.rs checks), so one object serves both APIs.
#[repr(C)]
pub struct EmuCq {
    /// `struct ibv_cq_ex` (its start is `struct ibv_cq`).
    pub raw: ffi::ibv_cq_ex,
    /// The simulator's CQ.
    pub cq: SimCq,
    /// The channel it reports to.
    pub channel: Option<Arc<ChannelState>>,
    /// Its QPs.
    pub users: Users,
    /// The completion an `ibv_start_poll`/`ibv_next_poll` session is on.
    pub current: Mutex<Completion>,
    /// The parent domain it was created in (which counts it as a user), or NULL.
    pub parent_domain: *mut ffi::ibv_pd,
}

/// A queue pair. Its C struct is always an `ibv_qp_ex`, whose first member is the
/// `ibv_qp`, so one object serves both APIs.
#[repr(C)]
pub struct EmuQp {
    /// `struct ibv_qp_ex` (`raw.qp_base` is the `struct ibv_qp`).
    pub raw: ffi::ibv_qp_ex,
    /// The simulator's QP.
    pub qp: SimQp,
    /// Made by `ibv_create_qp_ex` with send ops: `ibv_qp_to_qp_ex` gives it out.
    pub extended: bool,
    /// The work requests an `ibv_wr_start` .. `ibv_wr_complete` session has built.
    pub pending: Mutex<Pending>,
}

/// An address handle.
#[repr(C)]
#[derive(Debug)]
pub struct EmuAh {
    /// `struct ibv_ah`.
    pub raw: ffi::ibv_ah,
    /// The simulator's AH.
    pub ah: SimAh,
}

// The C structs hold pthread unions, which have no Debug: show the simulator's side.
impl std::fmt::Debug for EmuContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmuContext")
            .field("ctx", self.sim())
            .field("device", &self.device.info.name)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for EmuCq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmuCq")
            .field("cq", &self.cq)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for EmuQp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmuQp")
            .field("qp", &self.qp)
            .finish_non_exhaustive()
    }
}

// SAFETY: every `ibv_context` this library hands out is the `vctx.context` member of an
// EmuContext, at this offset from its start (vctx is EmuContext's first field).
unsafe impl Castable for EmuContext {
    type C = ffi::ibv_context;

    fn from_c(p: *const ffi::ibv_context) -> *const Self {
        let offset = std::mem::offset_of!(ffi::verbs_context, context);
        p.cast::<u8>().wrapping_sub(offset).cast()
    }
}

/// The C struct each object starts with.
macro_rules! castable {
    ($($t:ty => $c:ident),* $(,)?) => {
        // SAFETY: each is `#[repr(C)]` and starts with its C struct (`raw`).
        $(unsafe impl Castable for $t {
            type C = ffi::$c;
        })*
    };
}

// An `EmuCq`'s `raw` is an `ibv_cq_ex`, whose start is an `ibv_cq` (tests/layout.rs); an
// `EmuQp`'s is an `ibv_qp_ex`, whose first member is the `ibv_qp`.
castable!(EmuPd => ibv_pd, EmuMr => ibv_mr, EmuMw => ibv_mw, EmuChannel => ibv_comp_channel, EmuCq => ibv_cq, EmuQp => ibv_qp, EmuAh => ibv_ah);

/// An object handed to programs as the C struct that starts it.
pub trait Handed {
    /// Its kind, for the leak report.
    const KIND: Kind;
}

macro_rules! handed {
    ($($t:ty => $k:ident),* $(,)?) => {
        $(impl Handed for $t {
            const KIND: Kind = Kind::$k;
        })*
    };
}

handed!(EmuPd => Pd, EmuMr => Mr, EmuMw => Mw, EmuChannel => Channel, EmuCq => Cq, EmuQp => Qp, EmuAh => Ah);

/// Leaks a box to the program and returns a pointer to its first field, the C struct.
pub fn hand_out<T: Handed, C>(b: Box<T>) -> *mut C {
    leaks::created(T::KIND);
    Box::into_raw(b).cast()
}

/// Takes back a box handed out by [`hand_out`].
///
/// # Safety
/// `p` came from `hand_out::<T, _>` and is not used afterwards.
pub unsafe fn take_back<T: Handed, C>(p: *mut C) -> Box<T> {
    leaks::destroyed(T::KIND);
    // SAFETY: the caller guarantees `p` is the start of a handed-out `T`.
    unsafe { Box::from_raw(p.cast::<T>()) }
}

/// The `EmuContext` around a program's `ibv_context`.
///
/// # Safety
/// `ctx` must be a live context this library returned from `ibv_open_device`.
pub unsafe fn context<'a>(ctx: *mut ffi::ibv_context) -> &'a EmuContext {
    // SAFETY: the caller's contract; `from_c` finds the EmuContext around it.
    unsafe { emu(ctx) }
}

/// The emulator object a C pointer that is not NULL is part of (where the contract says
/// it is never NULL; [`crate::base::pointer::try_ref`] where it may be).
///
/// # Safety
/// `p` is a live `T::C` that this library returned, part of a `T` (see [`Castable`]).
pub unsafe fn emu<'a, T: Castable>(p: *const T::C) -> &'a T {
    // SAFETY: the caller guarantees `p` is part of a live `T`.
    unsafe { &*T::from_c(p) }
}

/// Initialises the pthread mutex and condition variable that libibverbs objects carry.
///
/// # Safety
/// Both pointers must be valid for writes and not yet initialised.
pub unsafe fn init_sync(mutex: *mut libc::pthread_mutex_t, cond: *mut libc::pthread_cond_t) {
    // SAFETY: the caller provides valid, uninitialised storage; default attributes.
    unsafe {
        libc::pthread_mutex_init(mutex, std::ptr::null());
        libc::pthread_cond_init(cond, std::ptr::null());
    }
}
