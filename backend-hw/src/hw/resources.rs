//! Protection domains, memory regions, completion channels and queues, shared receive
//! queues and address handles.

use std::alloc::Layout;
use std::fmt;
use std::os::raw::{c_int, c_uint, c_void};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use verbs_api::{
    AccessFlags, AddressHandle, AhAttr, Completion, CompletionChannel, CompletionQueue, Error,
    ErrorKind, MemoryRegion, MemoryWindow, MrKeys, MwBind, MwType, ProtectionDomain, RecvWr,
    Result, SharedReceiveQueue, SrqAttr, SrqAttrMask, SrqInitAttr,
};

use super::{convert, invalid, os_error, Ctx};
use crate::diagnose::errno;
use crate::ffi;

/// How many work requests or completions one shim call carries (built on the stack).
pub(crate) const CHUNK: usize = 32;

// ---------------------------------------------------------------- protection domain

pub(crate) struct Pd {
    pub(crate) ptr: NonNull<ffi::ibv_pd>,
    handle: u32,
    pub(crate) ctx: Arc<Ctx>,
}

// SAFETY: libibverbs objects may be used from any thread; Pd only frees its PD in Drop.
unsafe impl Send for Pd {}
// SAFETY: as for Send; Pd has no interior mutability.
unsafe impl Sync for Pd {}

impl Drop for Pd {
    fn drop(&mut self) {
        // SAFETY: every MR, SRQ, QP and AH of this PD holds an Arc<Pd>, so none is left.
        let _ = unsafe { ffi::shim_dealloc_pd(self.ptr.as_ptr()) };
    }
}

/// A protection domain (`struct ibv_pd`).
#[derive(Clone)]
pub struct HwPd(pub(crate) Arc<Pd>);

impl fmt::Debug for HwPd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HwPd")
            .field("device", &self.0.ctx.name())
            .field("handle", &self.0.handle)
            .finish()
    }
}

impl HwPd {
    pub(crate) fn alloc(ctx: &Arc<Ctx>) -> Result<Self> {
        let mut ptr = std::ptr::null_mut();
        let mut handle = 0;
        // SAFETY: the context is open; the outputs are valid.
        let ret = unsafe { ffi::shim_alloc_pd(ctx.ptr.as_ptr(), &mut ptr, &mut handle) };
        if ret != 0 {
            return Err(os_error("ibv_alloc_pd", ret, ctx.name()));
        }
        let ptr = NonNull::new(ptr).ok_or_else(|| null("ibv_alloc_pd"))?;
        Ok(HwPd(Arc::new(Pd {
            ptr,
            handle,
            ctx: ctx.clone(),
        })))
    }

    pub(crate) fn ctx(&self) -> &Arc<Ctx> {
        &self.0.ctx
    }
}

impl ProtectionDomain for HwPd {
    fn handle(&self) -> u32 {
        self.0.handle
    }
}

pub(crate) fn null(op: &'static str) -> Error {
    Error::new(
        ErrorKind::Io,
        op,
        "libibverbs returned no object and no error",
    )
}

// ---------------------------------------------------------------- memory region

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

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

// ---------------------------------------------------------------- memory window

/// A memory window (`struct ibv_mw`); dropping it is `ibv_dealloc_mw`.
pub struct HwMw {
    ptr: NonNull<ffi::ibv_mw>,
    handle: u32,
    mw_type: MwType,
    pd: Arc<Pd>,
}

// SAFETY: an ibv_mw may be used and deallocated from any thread; HwMw reads and writes its
// rkey only through `&self` methods that libibverbs' own callers use the same way.
unsafe impl Send for HwMw {}

impl fmt::Debug for HwMw {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HwMw")
            .field("handle", &self.handle)
            .field("type", &self.mw_type)
            .field("rkey", &self.rkey())
            .finish()
    }
}

impl HwMw {
    pub(crate) fn alloc(pd: &HwPd, mw_type: MwType) -> Result<Self> {
        let mut ptr = std::ptr::null_mut();
        let (mut handle, mut rkey) = (0, 0);
        // SAFETY: the PD is alive; the outputs are valid.
        let ret = unsafe {
            ffi::shim_alloc_mw(
                pd.0.ptr.as_ptr(),
                mw_type.as_raw(),
                &mut ptr,
                &mut handle,
                &mut rkey,
            )
        };
        if ret != 0 {
            return Err(os_error("ibv_alloc_mw", ret, format!("a {mw_type} window")));
        }
        let ptr = NonNull::new(ptr).ok_or_else(|| null("ibv_alloc_mw"))?;
        lock(&pd.0.ctx.mws).insert(handle, ptr.as_ptr() as usize);
        Ok(HwMw {
            ptr,
            handle,
            mw_type,
            pd: pd.0.clone(),
        })
    }

    pub(crate) fn bind(&self, qp: &super::HwQp, bind: &MwBind) -> Result<u32> {
        const OP: &str = "ibv_bind_mw";
        let mr = mr_ptr(&self.pd.ctx, bind.bind_info.mr_lkey, OP)?;
        let mut rkey = 0;
        let b = &bind.bind_info;
        // SAFETY: the QP, the window and the region are alive (the region's pointer comes
        // from the registry its Drop removes it from); `rkey` is a valid output.
        let ret = unsafe {
            ffi::shim_bind_mw(
                qp.raw(),
                self.ptr.as_ptr(),
                mr,
                bind.wr_id,
                bind.send_flags.bits(),
                b.addr,
                b.length,
                b.mw_access_flags.bits(),
                &mut rkey,
            )
        };
        if ret != 0 {
            return Err(os_error(OP, ret, format!("window {}", self.handle)).with_bad_wr(0));
        }
        Ok(rkey)
    }
}

/// The `ibv_mr` registered with `lkey` on `ctx`.
pub(crate) fn mr_ptr(ctx: &Ctx, lkey: u32, op: &'static str) -> Result<*mut ffi::ibv_mr> {
    lock(&ctx.mrs)
        .get(&lkey)
        .map(|&p| p as *mut ffi::ibv_mr)
        .ok_or_else(|| {
            invalid(
                op,
                format!("no memory region of this context has lkey {lkey:#x}"),
            )
        })
}

/// The `ibv_mw` with `handle` on `ctx`.
pub(crate) fn mw_ptr(ctx: &Ctx, handle: u32, op: &'static str) -> Result<*mut ffi::ibv_mw> {
    lock(&ctx.mws)
        .get(&handle)
        .map(|&p| p as *mut ffi::ibv_mw)
        .ok_or_else(|| {
            invalid(
                op,
                format!("no memory window of this context has handle {handle}"),
            )
        })
}

/// Sets the rkey of the window `mw` points to (after posting its bind).
///
/// # Safety
/// `mw` must come from [`mw_ptr`] on a live window.
pub(crate) unsafe fn set_mw_rkey(mw: *mut ffi::ibv_mw, rkey: u32) {
    // SAFETY: the caller's contract.
    unsafe { ffi::shim_mw_set_rkey(mw, rkey) }
}

impl Drop for HwMw {
    fn drop(&mut self) {
        lock(&self.pd.ctx.mws).remove(&self.handle);
        // SAFETY: the window is deallocated only here; its PD is alive (we hold an Arc).
        let _ = unsafe { ffi::shim_dealloc_mw(self.ptr.as_ptr()) };
    }
}

impl MemoryWindow for HwMw {
    fn handle(&self) -> u32 {
        self.handle
    }

    fn mw_type(&self) -> MwType {
        self.mw_type
    }

    fn rkey(&self) -> u32 {
        // SAFETY: the window is alive.
        unsafe { ffi::shim_mw_rkey(self.ptr.as_ptr()) }
    }
}

// ---------------------------------------------------------------- completion channel

pub(crate) struct Channel {
    ptr: NonNull<ffi::ibv_comp_channel>,
    ctx: Arc<Ctx>,
}

// SAFETY: libibverbs objects may be used from any thread; Channel only destroys in Drop.
unsafe impl Send for Channel {}
// SAFETY: as for Send.
unsafe impl Sync for Channel {}

impl Drop for Channel {
    fn drop(&mut self) {
        // SAFETY: every CQ using this channel holds an Arc<Channel>, so none is left.
        let _ = unsafe { ffi::shim_destroy_comp_channel(self.ptr.as_ptr()) };
    }
}

/// A completion channel (`struct ibv_comp_channel`); its fd is non-blocking.
#[derive(Clone)]
pub struct HwCompChannel(Arc<Channel>);

impl fmt::Debug for HwCompChannel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HwCompChannel")
            .field("device", &self.0.ctx.name())
            .finish_non_exhaustive()
    }
}

impl HwCompChannel {
    pub(crate) fn create(ctx: &Arc<Ctx>) -> Result<Self> {
        let mut ptr = std::ptr::null_mut();
        // SAFETY: the context is open; the output is valid.
        let ret = unsafe { ffi::shim_create_comp_channel(ctx.ptr.as_ptr(), &mut ptr) };
        if ret != 0 {
            return Err(os_error("ibv_create_comp_channel", ret, ctx.name()));
        }
        let ptr = NonNull::new(ptr).ok_or_else(|| null("ibv_create_comp_channel"))?;
        Ok(HwCompChannel(Arc::new(Channel {
            ptr,
            ctx: ctx.clone(),
        })))
    }

    pub(crate) fn ctx(&self) -> &Arc<Ctx> {
        &self.0.ctx
    }
}

/// Milliseconds to wait for, rounded up so a short timeout does not spin.
fn wait_ms(deadline: Option<Instant>) -> Option<c_int> {
    match deadline {
        None => Some(-1),
        Some(d) => {
            let left = d.checked_duration_since(Instant::now())?;
            if left.is_zero() {
                return None;
            }
            let ms = left.as_nanos().div_ceil(1_000_000);
            Some(c_int::try_from(ms).unwrap_or(c_int::MAX))
        }
    }
}

impl CompletionChannel for HwCompChannel {
    fn get_cq_event(&self, timeout: Option<Duration>) -> Result<Option<u32>> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut first = true;
        loop {
            // A zero timeout still checks once.
            let ms = match wait_ms(deadline) {
                Some(ms) => ms,
                None if first => 0,
                None => return Ok(None),
            };
            first = false;
            let mut cq_context: *mut c_void = std::ptr::null_mut();
            let mut got: c_int = 0;
            // SAFETY: the channel is alive; outputs are valid.
            let ret = unsafe {
                ffi::shim_get_cq_event(self.0.ptr.as_ptr(), ms, &mut cq_context, &mut got)
            };
            if ret != 0 {
                return Err(os_error(
                    "ibv_get_cq_event",
                    ret,
                    format!("{} completion channel", self.0.ctx.name()),
                ));
            }
            if got != 0 {
                // SAFETY: every CQ this backend creates has a pointer to its boxed
                // EventCounts as cq_context. The CQ cannot have been destroyed: the kernel
                // reported this event, and ibv_destroy_cq waits until it is acknowledged.
                let counts = unsafe { &*cq_context.cast::<EventCounts>() };
                counts.got.fetch_add(1, Ordering::AcqRel);
                return Ok(Some(counts.handle));
            }
        }
    }
}

// ---------------------------------------------------------------- completion queue

/// What a CQ's events were: how many the channel handed out and how many were acked, so
/// that dropping the CQ acks the rest (ibv_destroy_cq would otherwise wait forever).
pub(crate) struct EventCounts {
    handle: u32,
    got: AtomicU32,
    acked: AtomicU32,
}

pub(crate) struct Cq {
    pub(crate) ptr: NonNull<ffi::ibv_cq>,
    handle: u32,
    /// The size the device gave (changed by a resize).
    cqe: AtomicU32,
    events: Box<EventCounts>,
    channel: Option<Arc<Channel>>,
    pub(crate) ctx: Arc<Ctx>,
}

// SAFETY: libibverbs CQs may be polled, armed and acked from any thread; the event counts
// are atomics.
unsafe impl Send for Cq {}
// SAFETY: as for Send.
unsafe impl Sync for Cq {}

impl Cq {
    fn ack(&self, n: u32) {
        let mut acked = self.events.acked.load(Ordering::Acquire);
        loop {
            let got = self.events.got.load(Ordering::Acquire);
            let k = n.min(got.wrapping_sub(acked));
            if k == 0 {
                return;
            }
            match self.events.acked.compare_exchange(
                acked,
                acked.wrapping_add(k),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    // SAFETY: the CQ is alive; `k` events were got and not yet acked.
                    unsafe { ffi::shim_ack_cq_events(self.ptr.as_ptr(), c_uint::from(k)) };
                    return;
                }
                Err(now) => acked = now,
            }
        }
    }
}

impl Drop for Cq {
    fn drop(&mut self) {
        self.ack(u32::MAX);
        // SAFETY: every QP using this CQ holds an Arc<Cq>, so none is left; all events got
        // are acked, so ibv_destroy_cq does not wait.
        let _ = unsafe { ffi::shim_destroy_cq(self.ptr.as_ptr()) };
    }
}

/// A completion queue (`struct ibv_cq`).
#[derive(Clone)]
pub struct HwCq(pub(crate) Arc<Cq>);

impl fmt::Debug for HwCq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HwCq")
            .field("device", &self.0.ctx.name())
            .field("handle", &self.0.handle)
            .field("cqe", &self.0.cqe)
            .field("channel", &self.0.channel.is_some())
            .finish()
    }
}

impl HwCq {
    pub(crate) fn create(
        ctx: &Arc<Ctx>,
        cqe: u32,
        channel: Option<&HwCompChannel>,
        comp_vector: u32,
    ) -> Result<Self> {
        const OP: &str = "ibv_create_cq";
        let mut events = Box::new(EventCounts {
            handle: 0,
            got: AtomicU32::new(0),
            acked: AtomicU32::new(0),
        });
        let ch_ptr = channel.map_or(std::ptr::null_mut(), |c| c.0.ptr.as_ptr());
        let mut ptr = std::ptr::null_mut();
        let (mut handle, mut actual) = (0, 0);
        let cqe_c = c_int::try_from(cqe).map_err(|_| invalid(OP, "CQ size too large"))?;
        let vec_c = c_int::try_from(comp_vector).map_err(|_| invalid(OP, "bad vector"))?;
        let events_ptr: *mut EventCounts = &mut *events;
        // SAFETY: the context (and channel, if any) are alive; the boxed EventCounts has a
        // stable address for the CQ's whole life (the Box moves into Cq, its heap
        // allocation does not); outputs are valid.
        let ret = unsafe {
            ffi::shim_create_cq(
                ctx.ptr.as_ptr(),
                cqe_c,
                events_ptr.cast::<c_void>(),
                ch_ptr,
                vec_c,
                &mut ptr,
                &mut handle,
                &mut actual,
            )
        };
        if ret != 0 {
            return Err(os_error(
                OP,
                ret,
                format!("{cqe} entries on {}", ctx.name()),
            ));
        }
        let ptr = NonNull::new(ptr).ok_or_else(|| null(OP))?;
        events.handle = handle;
        Ok(HwCq(Arc::new(Cq {
            ptr,
            handle,
            cqe: AtomicU32::new(actual),
            events,
            channel: channel.map(|c| c.0.clone()),
            ctx: ctx.clone(),
        })))
    }

    pub(crate) fn ctx(&self) -> &Arc<Ctx> {
        &self.0.ctx
    }
}

impl CompletionQueue for HwCq {
    fn handle(&self) -> u32 {
        self.0.handle
    }

    fn cqe(&self) -> u32 {
        self.0.cqe.load(Ordering::Acquire)
    }

    fn resize(&self, cqe: u32) -> Result<()> {
        const OP: &str = "ibv_resize_cq";
        // A size past c_int is EINVAL for the provider too; it cannot be passed on.
        let cqe_c = c_int::try_from(cqe).map_err(|_| {
            Error::from_errno(OP, errno::EINVAL, format!("{cqe} entries: too many"))
        })?;
        let mut actual = 0;
        // SAFETY: the CQ is alive; the provider takes its own lock against concurrent
        // polls while it swaps the ring; `actual` is valid for writes.
        let ret = unsafe { ffi::shim_resize_cq(self.0.ptr.as_ptr(), cqe_c, &mut actual) };
        if ret != 0 {
            return Err(os_error(
                OP,
                ret,
                format!("CQ {} to {cqe} entries", self.0.handle),
            ));
        }
        self.0.cqe.store(actual, Ordering::Release);
        Ok(())
    }

    fn poll(&self, wc: &mut [Completion]) -> Result<usize> {
        let mut raw = [ffi::shim_wc::default(); CHUNK];
        let mut total = 0;
        while total < wc.len() {
            let want = (wc.len() - total).min(CHUNK);
            let mut polled: c_int = 0;
            // SAFETY: the CQ is alive; `raw` has room for `want <= CHUNK` entries.
            let ret = unsafe {
                ffi::shim_poll_cq(
                    self.0.ptr.as_ptr(),
                    c_int::try_from(want).unwrap_or(0),
                    raw.as_mut_ptr(),
                    &mut polled,
                )
            };
            let polled = usize::try_from(polled).unwrap_or(0).min(want);
            for (dst, src) in wc[total..total + polled].iter_mut().zip(&raw[..polled]) {
                *dst = convert::completion(src);
            }
            total += polled;
            if ret != 0 {
                return Err(os_error(
                    "ibv_poll_cq",
                    ret,
                    format!("CQ {} is unusable", self.0.handle),
                ));
            }
            if polled < want {
                break;
            }
        }
        Ok(total)
    }

    fn req_notify(&self, solicited_only: bool) -> Result<()> {
        // Arming a CQ without a channel is the device's call too (rxe accepts it).
        // SAFETY: the CQ is alive.
        let ret =
            unsafe { ffi::shim_req_notify_cq(self.0.ptr.as_ptr(), c_int::from(solicited_only)) };
        if ret != 0 {
            return Err(os_error(
                "ibv_req_notify_cq",
                ret,
                format!("CQ {}", self.0.handle),
            ));
        }
        Ok(())
    }

    fn ack_events(&self, n: u32) {
        self.0.ack(n);
    }
}

// ---------------------------------------------------------------- shared receive queue

pub(crate) struct Srq {
    pub(crate) ptr: NonNull<ffi::ibv_srq>,
    handle: u32,
    max_sge: u32,
    pd: Arc<Pd>,
}

// SAFETY: libibverbs SRQs may be used from any thread; Srq only destroys in Drop.
unsafe impl Send for Srq {}
// SAFETY: as for Send.
unsafe impl Sync for Srq {}

impl Drop for Srq {
    fn drop(&mut self) {
        // SAFETY: every QP using this SRQ holds an Arc<Srq>, so none is left.
        let _ = unsafe { ffi::shim_destroy_srq(self.ptr.as_ptr()) };
    }
}

/// A shared receive queue (`struct ibv_srq`).
#[derive(Clone)]
pub struct HwSrq(pub(crate) Arc<Srq>);

impl fmt::Debug for HwSrq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HwSrq")
            .field("handle", &self.0.handle)
            .field("max_sge", &self.0.max_sge)
            .finish()
    }
}

impl HwSrq {
    pub(crate) fn create(pd: &HwPd, init: &SrqInitAttr) -> Result<Self> {
        const OP: &str = "ibv_create_srq";
        let mut attr = ffi::shim_srq_attr {
            max_wr: init.attr.max_wr,
            max_sge: init.attr.max_sge,
            srq_limit: init.attr.srq_limit,
        };
        let mut ptr = std::ptr::null_mut();
        let mut handle = 0;
        // SAFETY: the PD is alive; outputs are valid.
        let ret =
            unsafe { ffi::shim_create_srq(pd.0.ptr.as_ptr(), &mut attr, &mut ptr, &mut handle) };
        if ret != 0 {
            return Err(os_error(OP, ret, format!("{:?}", init.attr)));
        }
        let ptr = NonNull::new(ptr).ok_or_else(|| null(OP))?;
        Ok(HwSrq(Arc::new(Srq {
            ptr,
            handle,
            max_sge: attr.max_sge.max(init.attr.max_sge),
            pd: pd.0.clone(),
        })))
    }

    pub(crate) fn ctx(&self) -> &Arc<Ctx> {
        &self.0.pd.ctx
    }
}

/// Builds the shim's receive requests for `wrs`, `CHUNK` at a time, and posts each chunk
/// with `post`; the error names the absolute index of the first request not posted.
pub(crate) fn post_recv_chunks(
    op: &'static str,
    wrs: &[RecvWr<'_>],
    mut post: impl FnMut(&[ffi::shim_recv_wr], &mut usize) -> c_int,
) -> Result<()> {
    // The SGE count is the device's to check (rdma-core's rxe provider refuses a request
    // with too many, after posting the ones before it).
    let mut buf = [ffi::shim_recv_wr::default(); CHUNK];
    for (c, chunk) in wrs.chunks(CHUNK).enumerate() {
        for (dst, wr) in buf.iter_mut().zip(chunk) {
            *dst = ffi::shim_recv_wr {
                wr_id: wr.wr_id,
                sg_list: wr.sg_list.as_ptr(),
                num_sge: u32::try_from(wr.sg_list.len()).unwrap_or(u32::MAX),
                pad: 0,
            };
        }
        let mut bad = 0usize;
        let ret = post(&buf[..chunk.len()], &mut bad);
        if ret != 0 {
            let index = c * CHUNK + bad.min(chunk.len());
            return Err(post_error(op, ret).with_bad_wr(index));
        }
    }
    Ok(())
}

/// The error of a post that failed with `ret`: ENOMEM means the queue is full.
pub(crate) fn post_error(op: &'static str, ret: c_int) -> Error {
    match ret {
        errno::ENOMEM => {
            Error::new(ErrorKind::QueueFull, op, "the work queue is full").with_errno(ret)
        }
        errno::EINVAL => Error::from_errno(
            op,
            ret,
            "the device rejected the work request (SGE count, inline size, opcode or state)",
        ),
        _ => os_error(op, ret, "post failed"),
    }
}

impl SharedReceiveQueue for HwSrq {
    fn handle(&self) -> u32 {
        self.0.handle
    }

    unsafe fn post_recv(&self, wrs: &[RecvWr<'_>]) -> Result<()> {
        let srq = self.0.ptr.as_ptr();
        post_recv_chunks("ibv_post_srq_recv", wrs, |chunk, bad| {
            // SAFETY: the SRQ is alive; `chunk` is valid for its length; the SGE lists
            // it points to live in `wrs` for this call, and the caller vouches for the
            // memory they name (the trait's contract).
            unsafe { ffi::shim_post_srq_recv(srq, chunk.as_ptr(), chunk.len(), bad) }
        })
    }

    fn modify(&self, attr: &SrqAttr, mask: SrqAttrMask) -> Result<()> {
        let raw = ffi::shim_srq_attr {
            max_wr: attr.max_wr,
            max_sge: attr.max_sge,
            srq_limit: attr.srq_limit,
        };
        let mask_c = c_int::try_from(mask.bits()).unwrap_or(0);
        // SAFETY: the SRQ is alive; `raw` is valid for the call.
        let ret = unsafe { ffi::shim_modify_srq(self.0.ptr.as_ptr(), &raw, mask_c) };
        if ret != 0 {
            return Err(os_error(
                "ibv_modify_srq",
                ret,
                format!("SRQ {} with {attr:?} ({mask:?})", self.0.handle),
            ));
        }
        Ok(())
    }

    fn query(&self) -> Result<SrqAttr> {
        let mut raw = ffi::shim_srq_attr::default();
        // SAFETY: the SRQ is alive; `raw` is a valid output.
        let ret = unsafe { ffi::shim_query_srq(self.0.ptr.as_ptr(), &mut raw) };
        if ret != 0 {
            return Err(os_error(
                "ibv_query_srq",
                ret,
                format!("SRQ {}", self.0.handle),
            ));
        }
        Ok(SrqAttr {
            max_wr: raw.max_wr,
            max_sge: raw.max_sge,
            srq_limit: raw.srq_limit,
        })
    }
}

// ---------------------------------------------------------------- address handle

pub(crate) struct Ah {
    pub(crate) ptr: NonNull<ffi::ibv_ah>,
    attr: AhAttr,
    _pd: Arc<Pd>,
}

// SAFETY: libibverbs AHs may be used from any thread; Ah only destroys in Drop.
unsafe impl Send for Ah {}
// SAFETY: as for Send.
unsafe impl Sync for Ah {}

impl Drop for Ah {
    fn drop(&mut self) {
        // SAFETY: the AH is destroyed once; post_send's contract keeps it alive until the
        // sends that name it complete.
        let _ = unsafe { ffi::shim_destroy_ah(self.ptr.as_ptr()) };
    }
}

/// An address handle (`struct ibv_ah`): a UD destination.
#[derive(Clone)]
pub struct HwAh(pub(crate) Arc<Ah>);

impl fmt::Debug for HwAh {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("HwAh").field(&self.0.attr).finish()
    }
}

impl HwAh {
    pub(crate) fn create(pd: &HwPd, attr: &AhAttr) -> Result<Self> {
        const OP: &str = "ibv_create_ah";
        let raw = convert::ah_to_shim(attr);
        let mut ptr = std::ptr::null_mut();
        // SAFETY: the PD is alive; `raw` and the output are valid.
        let ret = unsafe { ffi::shim_create_ah(pd.0.ptr.as_ptr(), &raw, &mut ptr) };
        if ret != 0 {
            return Err(os_error(
                OP,
                ret,
                format!(
                    "to {} from port {} GID index {}",
                    attr.grh.dgid, attr.port_num, attr.grh.sgid_index
                ),
            ));
        }
        let ptr = NonNull::new(ptr).ok_or_else(|| null(OP))?;
        Ok(HwAh(Arc::new(Ah {
            ptr,
            attr: *attr,
            _pd: pd.0.clone(),
        })))
    }
}

impl AddressHandle for HwAh {
    fn attr(&self) -> AhAttr {
        self.0.attr
    }
}
