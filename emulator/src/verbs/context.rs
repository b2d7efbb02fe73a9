//! Contexts: opening (for [`super::ops`]) and closing, and the queries (device, port, GID,
//! P_Key, sysfs); the fork and sysfs helpers.

use std::ffi::{c_char, c_int, c_uint, CStr};
use std::ptr::null_mut;
use std::sync::Arc;

use verbs_api::{Context, Gid, Verbs};

use crate::base::boundary::{boundary, MinusOne, ReturnsErrno, Value};
use crate::base::errno::errno_of;
use crate::base::errno::set_errno;
use crate::base::ffi;
use crate::base::pointer::{try_ref, try_ref_from_ptr};
use crate::objects::convert::{device_attr, device_attr_ex, gid_to_c, port_attr};
use crate::objects::handles::{context, EmuContext};
use crate::runtime::delivery::ContextState;
use crate::runtime::host::{emu, ibdev_path};
use crate::runtime::leaks;
use crate::runtime::leaks::Kind;

/// Opens a context on `device` (`ibv_open_device`), its function tables filled by `fill_ops`
/// (the ops table, which lies above the verbs of each object).
///
/// # Safety
/// `device` is a device of a list from this library.
pub unsafe fn open_device(
    device: *mut ffi::ibv_device,
    fill_ops: fn(&mut ffi::verbs_context),
) -> *mut ffi::ibv_context {
    let Ok(e) = emu() else {
        set_errno(libc::ENODEV);
        return null_mut();
    };
    let Some(dev) = e
        .devices
        .iter()
        .find(|d| std::ptr::eq(&d.raw, device.cast_const()))
    else {
        set_errno(libc::ENODEV);
        return null_mut();
    };
    let ctx = match e.verbs().open(&dev.info.name) {
        Ok(c) => c,
        Err(err) => {
            set_errno(errno_of(&err));
            return null_mut();
        }
    };
    let num_comp_vectors = ctx
        .query_device()
        .map(|a| c_int::try_from(a.num_comp_vectors).unwrap_or(1))
        .unwrap_or(1);
    let state = match ContextState::new(ctx) {
        Ok(s) => Arc::new(s),
        Err(err) => {
            set_errno(err.raw_os_error().unwrap_or(libc::EMFILE));
            return null_mut();
        }
    };
    let cmd_fd = match crate::base::eventfd::semaphore_fd() {
        Ok(fd) => fd,
        Err(err) => {
            set_errno(err.raw_os_error().unwrap_or(libc::EMFILE));
            return null_mut();
        }
    };
    e.register_context(&state);
    let mut boxed = Box::new(EmuContext {
        vctx: ffi::verbs_context::default(),
        state,
        device: dev,
        cmd_fd,
    });
    boxed.vctx.context.device = std::ptr::from_ref(&dev.raw).cast_mut();
    boxed.vctx.context.cmd_fd = std::os::fd::AsRawFd::as_raw_fd(&boxed.cmd_fd);
    boxed.vctx.context.async_fd = boxed.state.raw_fd();
    boxed.vctx.context.num_comp_vectors = num_comp_vectors;
    fill_ops(&mut boxed.vctx);
    leaks::created(Kind::Context);
    let p = Box::into_raw(boxed);
    // SAFETY: `p` is the live box just leaked; the mutex storage is ours to initialise.
    unsafe {
        libc::pthread_mutex_init(
            std::ptr::addr_of_mut!((*p).vctx.context.mutex).cast(),
            std::ptr::null(),
        );
        std::ptr::addr_of_mut!((*p).vctx.context)
    }
}

/// `ibv_close_device`.
///
/// # Safety
/// `ctx` came from `ibv_open_device` and is closed once, after its objects.
pub unsafe extern "C" fn ibv_close_device(ctx: *mut ffi::ibv_context) -> c_int {
    boundary(ReturnsErrno, move || {
        if ctx.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: the caller passes a live context of ours.
        let c: *const EmuContext = unsafe { context(ctx) };
        // SAFETY: the EmuContext was leaked from a Box in ibv_open_device; this is its end.
        drop(unsafe { Box::from_raw(c.cast_mut()) });
        leaks::destroyed(Kind::Context);
        0
    })
}

/// `ibv_query_device`.
///
/// # Safety
/// `ctx` is a live context of ours; `attr` is valid for a write.
pub unsafe extern "C" fn ibv_query_device(
    ctx: *mut ffi::ibv_context,
    attr: *mut ffi::ibv_device_attr,
) -> c_int {
    boundary(ReturnsErrno, move || {
        if attr.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: NULL or a live context of ours.
        let c: &EmuContext = unsafe { try_ref_from_ptr!(ctx, libc::EINVAL) };
        match c.sim().query_device() {
            Ok(a) => {
                // SAFETY: the caller provides a writable ibv_device_attr.
                unsafe { attr.write(device_attr(&a)) };
                0
            }
            Err(e) => errno_of(&e),
        }
    })
}

/// `verbs_context.query_device_ex` (what the inline `ibv_query_device_ex` calls): writes
/// the first `attr_size` bytes of `struct ibv_device_attr_ex`.
///
/// # Safety
/// `ctx` is a live context of ours; `input` is NULL or valid; `attr` is valid for
/// `attr_size` bytes.
pub unsafe extern "C" fn query_device_ex(
    ctx: *mut ffi::ibv_context,
    input: *const ffi::ibv_query_device_ex_input,
    attr: *mut ffi::ibv_device_attr_ex,
    attr_size: usize,
) -> c_int {
    boundary(ReturnsErrno, move || {
        // SAFETY: `input` is NULL or a valid input struct (the man page's contract).
        if unsafe { try_ref::<ffi::ibv_query_device_ex_input>(input) }
            .is_some_and(|i| i.comp_mask != 0)
        {
            return libc::EINVAL;
        }
        if attr.is_null() || attr_size < std::mem::size_of::<ffi::ibv_device_attr>() {
            return libc::EINVAL;
        }
        // SAFETY: the inline caller passes its own live context.
        let a = match unsafe { context(ctx) }.sim().query_device() {
            Ok(a) => device_attr_ex(&a),
            Err(e) => return errno_of(&e),
        };
        let n = attr_size.min(std::mem::size_of::<ffi::ibv_device_attr_ex>());
        // SAFETY: `attr` is writable for `attr_size` bytes (the caller's sizeof), and we copy
        // at most that many from a local value.
        unsafe {
            std::ptr::write_bytes(attr.cast::<u8>(), 0, attr_size);
            std::ptr::copy_nonoverlapping(std::ptr::from_ref(&a).cast::<u8>(), attr.cast(), n);
        }
        0
    })
}

fn query_port_into(ctx: &EmuContext, port: u8) -> Result<ffi::ibv_port_attr, c_int> {
    ctx.sim()
        .query_port(port)
        .map(|p| port_attr(&p))
        .map_err(|e| errno_of(&e))
}

/// `verbs_context.query_port` (what the inline `ibv_query_port` calls).
///
/// # Safety
/// `ctx` is a live context of ours; `attr` is valid for `attr_size` bytes.
pub unsafe extern "C" fn query_port(
    ctx: *mut ffi::ibv_context,
    port: u8,
    attr: *mut ffi::ibv_port_attr,
    attr_size: usize,
) -> c_int {
    boundary(ReturnsErrno, move || {
        if attr.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: the inline caller passes its own live context.
        let p = match query_port_into(unsafe { context(ctx) }, port) {
            Ok(p) => p,
            Err(e) => return e,
        };
        let n = attr_size.min(std::mem::size_of::<ffi::ibv_port_attr>());
        // SAFETY: `attr` is writable for `attr_size` bytes; we copy at most that many.
        unsafe {
            std::ptr::write_bytes(attr.cast::<u8>(), 0, attr_size);
            std::ptr::copy_nonoverlapping(std::ptr::from_ref(&p).cast::<u8>(), attr.cast(), n);
        }
        0
    })
}

/// The length of `struct _compat_ibv_port_attr`: `struct ibv_port_attr` up to and
/// including `flags`. The public header only declares it; rdma-core's
/// `libibverbs/verbs.c` (v44.0) defines it as those members.
pub const COMPAT_PORT_ATTR_LEN: usize = std::mem::offset_of!(ffi::ibv_port_attr, flags) + 1;

/// `ibv_query_port`, the exported symbol: the old, shorter port attributes (the inline in
/// verbs.h calls it only for contexts without `verbs_context.query_port`).
///
/// # Safety
/// `ctx` is a live context of ours; `attr` is valid for [`COMPAT_PORT_ATTR_LEN`] bytes.
pub unsafe extern "C" fn ibv_query_port_compat(
    ctx: *mut ffi::ibv_context,
    port: u8,
    attr: *mut ffi::ibv_port_attr,
) -> c_int {
    boundary(ReturnsErrno, move || {
        if ctx.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: forwards the caller's pointers with the compat struct's length.
        unsafe { query_port(ctx, port, attr, COMPAT_PORT_ATTR_LEN) }
    })
}

/// `ibv_query_gid`.
///
/// # Safety
/// `ctx` is a live context of ours; `gid` is valid for a write.
pub unsafe extern "C" fn ibv_query_gid(
    ctx: *mut ffi::ibv_context,
    port: u8,
    index: c_int,
    gid: *mut ffi::ibv_gid,
) -> c_int {
    boundary(MinusOne, move || {
        if gid.is_null() {
            return -1;
        }
        // SAFETY: NULL or a live context of ours.
        let c: &EmuContext = unsafe { try_ref_from_ptr!(ctx, -1) };
        let Ok(index) = u32::try_from(index) else {
            set_errno(libc::EINVAL);
            return -1;
        };
        match c.sim().query_gid(port, index) {
            Ok(g) => {
                // SAFETY: the caller provides a writable GID.
                unsafe { gid.write(gid_to_c(g)) };
                0
            }
            Err(e) => {
                set_errno(errno_of(&e));
                -1
            }
        }
    })
}

/// `enum ibv_gid_type_sysfs` of rdma-core's `libibverbs/driver.h`, a provider header
/// Debian does not install (so bindgen cannot read it): RoCE v1 is 0, RoCE v2 is 1.
pub type GidTypeSysfs = c_uint;
/// `IBV_GID_TYPE_SYSFS_IB_ROCE_V1`.
pub const IBV_GID_TYPE_SYSFS_IB_ROCE_V1: GidTypeSysfs = 0;
/// `IBV_GID_TYPE_SYSFS_ROCE_V2`.
pub const IBV_GID_TYPE_SYSFS_ROCE_V2: GidTypeSysfs = 1;

/// The GID type (`IBV_GID_TYPE_ROCE_V1` or `_V2`) of entry `index` of `ctx`'s port: on
/// mlx5 the link-local GID 0 is RoCE v1, on rxe every GID is RoCE v2 (see
/// `Personality::roce_v1_gid`).
pub fn gid_type_of(ctx: &EmuContext, index: u32) -> u32 {
    if ctx.sim().roce_v1_gid(index) {
        ffi::IBV_GID_TYPE_ROCE_V1
    } else {
        ffi::IBV_GID_TYPE_ROCE_V2
    }
}

/// `ibv_query_gid_type` (IBVERBS_PRIVATE_34, used by ibv_devinfo): the sysfs GID type.
///
/// # Safety
/// `ctx` is a live context of ours; `gid_type` is valid for a write.
pub unsafe extern "C" fn ibv_query_gid_type(
    ctx: *mut ffi::ibv_context,
    port: u8,
    index: c_uint,
    out: *mut GidTypeSysfs,
) -> c_int {
    boundary(MinusOne, move || {
        if out.is_null() {
            return -1;
        }
        // SAFETY: NULL or a live context of ours.
        let c: &EmuContext = unsafe { try_ref_from_ptr!(ctx, -1) };
        if let Err(e) = c.sim().query_gid(port, index) {
            set_errno(errno_of(&e));
            return -1;
        }
        let t = if gid_type_of(c, index) == ffi::IBV_GID_TYPE_ROCE_V1 {
            IBV_GID_TYPE_SYSFS_IB_ROCE_V1
        } else {
            IBV_GID_TYPE_SYSFS_ROCE_V2
        };
        // SAFETY: the caller provides a writable enum.
        unsafe { out.write(t) };
        0
    })
}

/// GID `index` of `port` as the kernel's GID-table ioctl gives it: an empty entry of the
/// table (rxe's has 1024, two of them filled) is ENODATA, as in the Soft-RoCE VM
/// (`ibv_query_gid` through sysfs reads it as zeros instead).
fn gid_entry(ctx: &EmuContext, port: u32, index: u32) -> Result<ffi::ibv_gid_entry, c_int> {
    let port8 = u8::try_from(port).map_err(|_| libc::EINVAL)?;
    let gid = ctx
        .sim()
        .query_gid(port8, index)
        .map_err(|e| errno_of(&e))?;
    if gid == Gid::default() {
        return Err(libc::ENODATA);
    }
    Ok(ffi::ibv_gid_entry {
        gid: gid_to_c(gid),
        gid_index: index,
        port_num: port,
        gid_type: gid_type_of(ctx, index),
        ndev_ifindex: 0,
    })
}

/// `_ibv_query_gid_ex` (behind the inline `ibv_query_gid_ex`).
///
/// # Safety
/// `ctx` is a live context of ours; `entry` is valid for `entry_size` bytes.
pub unsafe extern "C" fn _ibv_query_gid_ex(
    ctx: *mut ffi::ibv_context,
    port: u32,
    index: u32,
    entry: *mut ffi::ibv_gid_entry,
    flags: u32,
    entry_size: usize,
) -> c_int {
    boundary(ReturnsErrno, move || {
        if entry.is_null() || flags != 0 {
            return libc::EINVAL;
        }
        // SAFETY: NULL or a live context of ours.
        let c: &EmuContext = unsafe { try_ref_from_ptr!(ctx, libc::EINVAL) };
        if entry_size < std::mem::size_of::<ffi::ibv_gid_entry>() {
            return libc::EINVAL;
        }
        match gid_entry(c, port, index) {
            Ok(g) => {
                // SAFETY: the caller provides `entry_size` writable bytes, at least one entry.
                unsafe { entry.write(g) };
                0
            }
            Err(e) => e,
        }
    })
}

/// `_ibv_query_gid_table` (behind the inline `ibv_query_gid_table`): every valid GID of
/// every port.
///
/// # Safety
/// `ctx` is a live context of ours; `entries` is valid for `max_entries * entry_size` bytes.
pub unsafe extern "C" fn _ibv_query_gid_table(
    ctx: *mut ffi::ibv_context,
    entries: *mut ffi::ibv_gid_entry,
    max_entries: usize,
    flags: u32,
    entry_size: usize,
) -> isize {
    boundary(Value(-(libc::EIO as isize)), move || {
        if flags != 0 || entry_size < std::mem::size_of::<ffi::ibv_gid_entry>() {
            return -(libc::EINVAL as isize);
        }
        // SAFETY: NULL or a live context of ours.
        let c: &EmuContext = unsafe { try_ref_from_ptr!(ctx, -(libc::EINVAL as isize)) };
        let Ok(attr) = c.sim().query_device() else {
            return -(libc::EIO as isize);
        };
        let mut n = 0usize;
        for port in 1..=u32::from(attr.phys_port_cnt) {
            let len = c.sim().query_port(port as u8).map_or(0, |p| p.gid_tbl_len);
            for index in 0..len {
                let Ok(g) = gid_entry(c, port, index) else {
                    continue;
                };
                if n == max_entries {
                    return -(libc::EINVAL as isize);
                }
                // SAFETY: n < max_entries, so entry n lies in the caller's array.
                unsafe {
                    entries
                        .cast::<u8>()
                        .add(n * entry_size)
                        .cast::<ffi::ibv_gid_entry>()
                        .write(g)
                };
                n += 1;
            }
        }
        n as isize
    })
}

/// `ibv_query_pkey`: RoCE ports have the default P_Key 0xffff at index 0.
///
/// # Safety
/// `ctx` is a live context of ours; `pkey` is valid for a write.
pub unsafe extern "C" fn ibv_query_pkey(
    ctx: *mut ffi::ibv_context,
    port: u8,
    index: c_int,
    pkey: *mut u16,
) -> c_int {
    boundary(MinusOne, move || {
        if pkey.is_null() {
            return -1;
        }
        // SAFETY: NULL or a live context of ours.
        let c: &EmuContext = unsafe { try_ref_from_ptr!(ctx, -1) };
        let len = match c.sim().query_port(port) {
            Ok(p) => c_int::from(p.pkey_tbl_len),
            Err(e) => {
                set_errno(errno_of(&e));
                return -1;
            }
        };
        if index < 0 || index >= len {
            set_errno(libc::EINVAL);
            return -1;
        }
        // SAFETY: the caller provides a writable u16.
        unsafe { pkey.write(0xffff_u16.to_be()) };
        0
    })
}

/// `ibv_read_sysfs_file`: for an emulated device's `ibdev_path`, the files the emulator
/// models (`board_id`, `node_guid`); any other path is read from the file
/// system, as libibverbs does. Returns the length read, or -1 with errno.
///
/// # Safety
/// `dir` and `file` are NUL-terminated strings; `buf` is valid for `size` bytes.
pub unsafe extern "C" fn ibv_read_sysfs_file(
    dir: *const c_char,
    file: *const c_char,
    buf: *mut c_char,
    size: usize,
) -> c_int {
    boundary(MinusOne, move || {
        if dir.is_null() || file.is_null() || buf.is_null() || size == 0 {
            set_errno(libc::EINVAL);
            return -1;
        }
        // SAFETY: the caller passes NUL-terminated strings.
        let (dir, file) = unsafe { (CStr::from_ptr(dir), CStr::from_ptr(file)) };
        let (dir, file) = (dir.to_string_lossy(), file.to_string_lossy());
        let text = match emulated_sysfs(&dir, &file) {
            Some(t) => Ok(t.into_bytes()),
            None => std::fs::read(format!("{dir}/{file}")),
        };
        let mut bytes = match text {
            Ok(b) => b,
            Err(e) => {
                set_errno(e.raw_os_error().unwrap_or(libc::EIO));
                return -1;
            }
        };
        bytes.truncate(size - 1);
        // libibverbs strips one trailing newline.
        if bytes.last() == Some(&b'\n') {
            bytes.pop();
        }
        // SAFETY: bytes.len() < size, so the copy and the NUL fit in the caller's buffer.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr().cast::<c_char>(), buf, bytes.len());
            *buf.add(bytes.len()) = 0;
        }
        c_int::try_from(bytes.len()).unwrap_or(c_int::MAX)
    })
}

fn emulated_sysfs(dir: &str, file: &str) -> Option<String> {
    let e = emu().ok()?;
    let dev = e.devices.iter().find(|d| ibdev_path(&d.info.name) == dir)?;
    let g = dev.info.guid;
    match file {
        "board_id" => Some(format!("VERBS_EMU_{}", e.spec.name.to_uppercase())),
        "node_guid" => Some(format!(
            "{:04x}:{:04x}:{:04x}:{:04x}",
            g >> 48,
            (g >> 32) & 0xffff,
            (g >> 16) & 0xffff,
            g & 0xffff
        )),
        _ => None,
    }
}

/// `ibv_fork_init`: nothing to do (the emulator pins no pages).
pub extern "C" fn ibv_fork_init() -> c_int {
    boundary(ReturnsErrno, move || 0)
}

/// `ibv_get_sysfs_path`: the sysfs mount point, `/sys`.
///
/// # Safety
/// `path` is valid for `size` bytes.
pub unsafe extern "C" fn ibv_get_sysfs_path(path: *mut c_char, size: c_int) -> c_int {
    boundary(MinusOne, move || {
        let Ok(size) = usize::try_from(size) else {
            return -1;
        };
        if path.is_null() || size < 5 {
            return -1;
        }
        // SAFETY: "/sys" and its NUL fit in the caller's `size` bytes.
        unsafe { std::ptr::copy_nonoverlapping(c"/sys".as_ptr(), path, 5) };
        0
    })
}

/// `ibv_get_pkey_index`: the index of `pkey` (network order) in the port's P_Key table,
/// or -1 with errno.
///
/// # Safety
/// `ctx` is a live context of ours.
pub unsafe extern "C" fn ibv_get_pkey_index(
    ctx: *mut ffi::ibv_context,
    port: u8,
    pkey: u16,
) -> c_int {
    boundary(MinusOne, move || {
        let mut i = 0;
        loop {
            let mut p = 0u16;
            // SAFETY: the caller's live context and a local out-value.
            if unsafe { ibv_query_pkey(ctx, port, i, &mut p) } < 0 {
                return -1;
            }
            if p == pkey {
                return i;
            }
            i += 1;
        }
    })
}

/// `ibv_dontfork_range`: nothing to do (the emulator pins no pages).
pub extern "C" fn ibv_dontfork_range(_base: *mut std::ffi::c_void, _size: usize) -> c_int {
    boundary(ReturnsErrno, move || 0)
}

/// `ibv_dofork_range`: nothing to do (the emulator pins no pages).
pub extern "C" fn ibv_dofork_range(_base: *mut std::ffi::c_void, _size: usize) -> c_int {
    boundary(ReturnsErrno, move || 0)
}

/// `ibv_is_fork_initialized`: `IBV_FORK_UNNEEDED`, as for a kernel whose pinned pages
/// survive fork (the emulator pins none).
pub extern "C" fn ibv_is_fork_initialized() -> ffi::ibv_fork_status {
    boundary(Value(ffi::IBV_FORK_DISABLED), move || {
        ffi::IBV_FORK_UNNEEDED
    })
}

/// `ibv_resolve_eth_l2_from_gid`: the Ethernet address of `attr`'s destination on the
/// emulated fabric (IPv4 multicast groups map to 01:00:5e:...); no VLAN (`*vid` 0xffff).
///
/// # Safety
/// `ctx` is a live context of ours; `attr` is valid; `mac` is valid for 6 bytes; `vid`
/// is NULL or valid for a write.
pub unsafe extern "C" fn ibv_resolve_eth_l2_from_gid(
    ctx: *mut ffi::ibv_context,
    attr: *mut ffi::ibv_ah_attr,
    mac: *mut u8,
    vid: *mut u16,
) -> c_int {
    boundary(Value(-libc::EIO), move || {
        if mac.is_null() {
            return -libc::EINVAL;
        }
        // SAFETY: NULL or a live context of ours, NULL or the caller's valid attribute.
        let (c, a): (&EmuContext, &ffi::ibv_ah_attr) = unsafe {
            (
                try_ref_from_ptr!(ctx, -libc::EINVAL),
                try_ref_from_ptr!(attr, -libc::EINVAL),
            )
        };
        if let Err(e) = c.sim().query_gid(a.port_num, u32::from(a.grh.sgid_index)) {
            return -errno_of(&e);
        }
        let Some(ip) = crate::objects::convert::gid_from_c(&a.grh.dgid).to_ipv4() else {
            return -libc::EINVAL;
        };
        let resolved = if ip.is_multicast() {
            Some(verbs_api::ipv4_multicast_mac(ip))
        } else {
            emu()
                .ok()
                .and_then(|e| e.sim.with_fabric(|f| f.mac_of_ip(ip)))
                .map(|m| m.0)
        };
        let Some(m) = resolved else {
            return -libc::EHOSTUNREACH;
        };
        // SAFETY: the caller's 6-byte MAC buffer and optional VLAN id.
        unsafe {
            std::ptr::copy_nonoverlapping(m.as_ptr(), mac, 6);
            if !vid.is_null() {
                *vid = 0xffff;
            }
        }
        0
    })
}
