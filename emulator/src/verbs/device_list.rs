//! The device list: `ibv_get_device_list` and `ibv_free_device_list`, a device's name,
//! GUID and index.

use crate::base::boundary::{boundary, Nothing, Null, Value};
use crate::base::errno::set_errno;
use crate::base::ffi;
use crate::base::pointer::try_ref_from_ptr;
use crate::runtime::host::{emu, EmuDevice};
use std::ffi::{c_char, c_int};
use std::ptr::null_mut;

/// `ibv_get_device_list`: this host's devices, NULL-terminated.
///
/// # Safety
/// `num_devices` is NULL or valid for a write.
pub unsafe extern "C" fn ibv_get_device_list(num_devices: *mut c_int) -> *mut *mut ffi::ibv_device {
    boundary(Null, move || {
        let e = match emu() {
            Ok(e) => e,
            Err(_) => {
                set_errno(libc::ENODEV);
                return null_mut();
            }
        };
        let mut list: Vec<*mut ffi::ibv_device> = e
            .devices
            .iter()
            .map(|d| std::ptr::from_ref(&d.raw).cast_mut())
            .collect();
        if !num_devices.is_null() {
            // SAFETY: checked non-NULL; the caller provides a writable int.
            unsafe { *num_devices = c_int::try_from(list.len()).unwrap_or(c_int::MAX) };
        }
        list.push(null_mut());
        Box::into_raw(list.into_boxed_slice()).cast()
    })
}

/// `ibv_free_device_list`. The devices themselves stay valid (open contexts use them).
///
/// # Safety
/// `list` is NULL or came from `ibv_get_device_list` and is freed once.
pub unsafe extern "C" fn ibv_free_device_list(list: *mut *mut ffi::ibv_device) {
    boundary(Nothing, move || {
        if list.is_null() {
            return;
        }
        let mut n = 0;
        // SAFETY: the list is NULL-terminated (we built it).
        while !unsafe { *list.add(n) }.is_null() {
            n += 1;
        }
        // SAFETY: `list` is the boxed slice of n + 1 pointers that ibv_get_device_list leaked.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(list, n + 1)) });
    })
}

/// `ibv_get_device_name`.
///
/// # Safety
/// `device` is a device of a list from this library.
pub unsafe extern "C" fn ibv_get_device_name(device: *mut ffi::ibv_device) -> *const c_char {
    boundary(Null, move || {
        // SAFETY: the caller passes NULL or a live device; `name` is NUL-terminated.
        let d: &EmuDevice = unsafe {
            try_ref_from_ptr!(device, {
                set_errno(libc::EINVAL);
                std::ptr::null()
            })
        };
        d.raw.name.as_ptr()
    })
}

/// `ibv_get_device_guid`: the node GUID in network byte order.
///
/// # Safety
/// `device` is a device of a list from this library.
pub unsafe extern "C" fn ibv_get_device_guid(device: *mut ffi::ibv_device) -> u64 {
    boundary(Value(0), move || {
        // SAFETY: NULL or a device of ours (every ibv_device we hand out is the first field of
        // an EmuDevice).
        let d: &EmuDevice = unsafe {
            try_ref_from_ptr!(device, {
                set_errno(libc::EINVAL);
                0
            })
        };
        d.info.guid.to_be()
    })
}

/// `ibv_get_device_index`: the device's index on this host, -1 for an unknown device.
pub extern "C" fn ibv_get_device_index(device: *mut ffi::ibv_device) -> c_int {
    boundary(Value(-1), move || {
        emu().ok().map_or(-1, |e| {
            e.devices
                .iter()
                .position(|d| std::ptr::eq(&d.raw, device.cast_const()))
                .map_or(-1, |i| c_int::try_from(i).unwrap_or(-1))
        })
    })
}
