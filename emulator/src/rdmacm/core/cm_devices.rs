//! The connection manager's own device contexts, as librdmacm keeps them (cma.c:
//! `ucma_init_device`, `ucma_get_device`): one context per device of the host, opened at
//! first use and kept for the life of the process (`id->verbs` of every id bound to the
//! device, and what `rdma_get_devices` lists, [`open_contexts`]), and one PD per device shared by the ids that
//! use it (`id->pd`), freed with the last of them.

use std::ffi::c_int;
use std::sync::Mutex;

use crate::base::errno::last_errno;
use crate::base::ffi;
use crate::base::sync::lock;
use crate::runtime::host::emu;
use crate::runtime::leaks;
use crate::runtime::leaks::Kind;

#[derive(Debug, Default, Clone, Copy)]
struct CmDevice {
    /// `*mut ibv_context`, 0 until opened.
    ctx: usize,
    /// `*mut ibv_pd`, 0 while no id uses the device.
    pd: usize,
    /// Ids holding the PD.
    users: usize,
}

static DEVICES: Mutex<Vec<CmDevice>> = Mutex::new(Vec::new());

/// The context of device `index` of this host, opened on first use.
fn context_locked(all: &mut Vec<CmDevice>, index: usize) -> Result<usize, c_int> {
    let e = emu().map_err(|_| libc::ENODEV)?;
    let dev = e.devices.get(index).ok_or(libc::ENODEV)?;
    if all.len() < e.devices.len() {
        all.resize(e.devices.len(), CmDevice::default());
    }
    if all[index].ctx == 0 {
        let raw = std::ptr::from_ref(&dev.raw).cast_mut();
        // SAFETY: `raw` is one of this host's devices, which live for the process.
        let ctx = unsafe { crate::verbs::ops::ibv_open_device(raw) };
        if ctx.is_null() {
            return Err(last_errno());
        }
        // The context belongs to the library, not to the program: the leak report does
        // not count it (librdmacm never closes it either).
        leaks::destroyed(Kind::Context);
        all[index].ctx = ctx as usize;
    }
    Ok(all[index].ctx)
}

/// The CM's context of device `index` (for `id->verbs`).
///
/// # Errors
/// ENODEV without such a device, or the errno of `ibv_open_device`.
pub fn context(index: usize) -> Result<*mut ffi::ibv_context, c_int> {
    let mut all = lock(&DEVICES);
    context_locked(&mut all, index).map(|c| c as *mut ffi::ibv_context)
}

/// Takes a share of device `index` for an id: its context and the shared PD (allocated for
/// the first user).
///
/// # Errors
/// As [`context`], or the errno of `ibv_alloc_pd`.
pub fn acquire(index: usize) -> Result<(*mut ffi::ibv_context, *mut ffi::ibv_pd), c_int> {
    let mut all = lock(&DEVICES);
    let ctx = context_locked(&mut all, index)?;
    let d = &mut all[index];
    if d.pd == 0 {
        // SAFETY: `ctx` is the live context opened above.
        let pd = unsafe { crate::verbs::pd::ibv_alloc_pd(ctx as *mut ffi::ibv_context) };
        if pd.is_null() {
            return Err(last_errno());
        }
        d.pd = pd as usize;
    }
    d.users += 1;
    Ok((ctx as *mut ffi::ibv_context, d.pd as *mut ffi::ibv_pd))
}

/// Gives an id's share of device `index` back; the last one frees the PD.
pub fn release(index: usize) {
    let mut all = lock(&DEVICES);
    let Some(d) = all.get_mut(index) else {
        return;
    };
    d.users = d.users.saturating_sub(1);
    if d.users == 0 && d.pd != 0 {
        // SAFETY: the PD was allocated by `acquire` and no id uses it any more. A program
        // that still has QPs or MRs on it gets EBUSY here, as from librdmacm's
        // ibv_dealloc_pd; the PD then stays.
        if unsafe { crate::verbs::pd::ibv_dealloc_pd(d.pd as *mut ffi::ibv_pd) } == 0 {
            d.pd = 0;
        }
    }
}

/// The contexts of this host's devices that can be opened (each opened on first use), in
/// device order: what `rdma_get_devices` lists (a device that cannot be opened is left
/// out, as librdmacm leaves dead ones out).
pub fn open_contexts() -> Vec<*mut ffi::ibv_context> {
    let n = emu().map_or(0, |e| e.devices.len());
    let mut all = lock(&DEVICES);
    (0..n)
        .filter_map(|i| context_locked(&mut all, i).ok())
        .map(|c| c as *mut ffi::ibv_context)
        .collect()
}
