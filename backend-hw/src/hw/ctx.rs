//! The open device context every resource shares (and the [`HwContext`] handle on it,
//! whose `Context` methods are in the parent module), what every libibverbs call uses (its
//! errors, the size of a shim call's batch), and the probe of the largest inline send,
//! which libibverbs does not report.

use std::collections::HashMap;
use std::fmt;
use std::os::raw::c_int;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

use verbs_api::{DeviceAttr, DeviceInfo, Error, ErrorKind, QpType, Result};

use super::convert;
use crate::ffi;

/// An error from a shim call that returned `ret` (a positive errno).
pub(crate) fn os_error(op: &'static str, ret: c_int, what: impl fmt::Display) -> Error {
    Error::from_errno(op, ret, format!("{what}: {}", errno_name(ret)))
}

/// A short description of an errno, for messages.
pub(crate) fn errno_name(e: c_int) -> String {
    std::io::Error::from_raw_os_error(e).to_string()
}

pub(crate) fn invalid(op: &'static str, msg: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidArgument, op, msg)
}

/// How many work requests or completions one shim call carries (built on the stack).
pub(crate) const CHUNK: usize = 32;

pub(crate) fn null(op: &'static str) -> Error {
    Error::new(
        ErrorKind::Io,
        op,
        "libibverbs returned no object and no error",
    )
}

pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The open device, shared by every resource made on it.
pub(crate) struct Ctx {
    pub(crate) ptr: NonNull<ffi::ibv_context>,
    pub(crate) device: DeviceInfo,
    pub(crate) num_comp_vectors: u32,
    /// A kernel device, on the host's network (see
    /// [`Verbs::joins_host_multicast`](verbs_api::Verbs::joins_host_multicast) of
    /// [`HwVerbs`](super::HwVerbs)).
    pub(crate) on_host_network: bool,
    /// The device attributes, queried once (they do not change).
    pub(super) attr: Mutex<Option<DeviceAttr>>,
    /// The `ibv_mr` of each live region by lkey, and the `ibv_mw` of each live window by
    /// handle: a BIND_MW request names them by key and handle (as the device does), and
    /// libibverbs wants the objects.
    pub(crate) mrs: Mutex<HashMap<u32, usize>>,
    pub(crate) mws: Mutex<HashMap<u32, usize>>,
}

// SAFETY: an ibv_context is usable from any thread: libibverbs' verbs are thread-safe
// (rdma-core documents every verb as callable concurrently), and Ctx only closes it in Drop,
// when no other reference exists.
unsafe impl Send for Ctx {}
// SAFETY: as for Send; the only Rust-side state is behind a Mutex.
unsafe impl Sync for Ctx {}

impl Drop for Ctx {
    fn drop(&mut self) {
        // SAFETY: every resource holds an Arc<Ctx>, so none is left; the context is closed
        // exactly once.
        let _ = unsafe { ffi::shim_close_device(self.ptr.as_ptr()) };
    }
}

impl fmt::Debug for Ctx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ctx")
            .field("device", &self.device.name)
            .finish_non_exhaustive()
    }
}

impl Ctx {
    pub(crate) fn name(&self) -> &str {
        &self.device.name
    }

    /// The device attributes, from the cache after the first query.
    pub(crate) fn attr(&self) -> Result<DeviceAttr> {
        let mut cache = self.attr.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(a) = cache.as_ref() {
            return Ok(a.clone());
        }
        let mut raw = std::mem::MaybeUninit::<ffi::shim_device_attr>::zeroed();
        // SAFETY: the context is open; `raw` is a valid output the shim fills.
        let ret = unsafe { ffi::shim_query_device(self.ptr.as_ptr(), raw.as_mut_ptr()) };
        if ret != 0 {
            return Err(os_error("ibv_query_device_ex", ret, self.name()));
        }
        // SAFETY: zero-initialised plain data, filled by the shim.
        let raw = unsafe { raw.assume_init() };
        let mut a = convert::device_attr(&raw, self.num_comp_vectors);
        a.max_inline_data = probe_max_inline(self, &a);
        *cache = Some(a.clone());
        Ok(a)
    }

    /// Checks that `other` was made on this context.
    pub(crate) fn same(self: &Arc<Self>, other: &Arc<Ctx>, op: &'static str) -> Result<()> {
        if Arc::ptr_eq(self, other) {
            Ok(())
        } else {
            Err(invalid(
                op,
                format!(
                    "a resource of device context {} was used with another context ({})",
                    other.name(),
                    self.name()
                ),
            ))
        }
    }
}

/// An open device (`struct ibv_context`): the factory of every resource on it.
#[derive(Debug, Clone)]
pub struct HwContext {
    pub(crate) inner: Arc<Ctx>,
}

/// libibverbs does not report the largest inline send; find it by creating small RC QPs
/// asking for more and more (providers refuse sizes above their limit). 0 when even the
/// probe's resources cannot be made.
pub(crate) fn probe_max_inline(ctx: &Ctx, dev: &DeviceAttr) -> u32 {
    let ctx_ptr = ctx.ptr.as_ptr();
    let mut pd = std::ptr::null_mut();
    let mut handle = 0;
    // SAFETY: the context is open; the outputs are valid.
    if unsafe { ffi::shim_alloc_pd(ctx_ptr, &mut pd, &mut handle) } != 0 || pd.is_null() {
        return 0;
    }
    let mut cq = std::ptr::null_mut();
    let (mut h, mut n) = (0, 0);
    // SAFETY: as above; no channel, no context pointer.
    let ok = unsafe {
        ffi::shim_create_cq(
            ctx_ptr,
            2,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
            &mut cq,
            &mut h,
            &mut n,
        )
    } == 0
        && !cq.is_null();
    let mut best = 0u32;
    if ok {
        let fits = |inline: u32| -> bool {
            let mut attr = ffi::shim_qp_init_attr {
                send_cq: cq,
                recv_cq: cq,
                srq: std::ptr::null_mut(),
                cap: ffi::shim_qp_cap {
                    max_send_wr: 1,
                    max_recv_wr: 1,
                    max_send_sge: 1,
                    max_recv_sge: 1,
                    max_inline_data: inline,
                },
                qp_type: QpType::Rc.as_raw(),
                sq_sig_all: 0,
            };
            let mut qp = std::ptr::null_mut();
            let mut num = 0;
            // SAFETY: the PD and CQ are alive; the outputs are valid.
            let ret = unsafe { ffi::shim_create_qp(pd, &mut attr, &mut qp, &mut num) };
            if ret != 0 || qp.is_null() {
                return false;
            }
            // SAFETY: the probe QP was just created and is used by nothing else.
            unsafe { ffi::shim_destroy_qp(qp) };
            true
        };
        let (mut lo, mut hi) = (
            0u32,
            4096u32.min(dev.max_mr_size.try_into().unwrap_or(4096)),
        );
        if fits(hi) {
            best = hi;
        } else {
            // Invariant: fits(lo) (0 always does), !fits(hi).
            while hi - lo > 1 {
                let mid = lo + (hi - lo) / 2;
                if fits(mid) {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            best = lo;
        }
        // SAFETY: the probe CQ has no QP left.
        unsafe { ffi::shim_destroy_cq(cq) };
    }
    // SAFETY: the probe PD has no resource left.
    unsafe { ffi::shim_dealloc_pd(pd) };
    best
}
