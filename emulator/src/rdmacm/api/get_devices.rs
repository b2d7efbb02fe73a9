//! `rdma_get_devices` and `rdma_free_devices`: the connection manager's device contexts
//! ([`crate::rdmacm::core::cm_devices`]) as a NULL-terminated list from `malloc`.

use std::ffi::c_int;
use std::ptr::null_mut;

use crate::base::boundary::{boundary, Nothing, Null};
use crate::base::errno::set_errno;
use crate::base::ffi;
use crate::rdmacm::core::cm_devices::open_contexts;

/// `rdma_get_devices`: the contexts of this host's devices, NULL-terminated, in memory
/// from `malloc` (`rdma_free_devices` frees it).
///
/// # Safety
/// `num_devices` is NULL or valid for a write.
pub unsafe extern "C" fn rdma_get_devices(num_devices: *mut c_int) -> *mut *mut ffi::ibv_context {
    boundary(Null, move || {
        let mut list = open_contexts();
        let count = list.len();
        list.push(null_mut());
        let bytes = std::mem::size_of::<*mut ffi::ibv_context>() * list.len();
        // SAFETY: malloc of a non-zero size; checked for NULL below.
        let out = unsafe { libc::malloc(bytes) }.cast::<*mut ffi::ibv_context>();
        if !num_devices.is_null() {
            let shown = if out.is_null() { 0 } else { count };
            // SAFETY: the caller's writable int.
            unsafe { *num_devices = c_int::try_from(shown).unwrap_or(0) };
        }
        if out.is_null() {
            set_errno(libc::ENOMEM);
            return null_mut();
        }
        // SAFETY: `out` has room for `list.len()` pointers.
        unsafe { std::ptr::copy_nonoverlapping(list.as_ptr(), out, list.len()) };
        out
    })
}

/// `rdma_free_devices`: frees a list from `rdma_get_devices` (the contexts stay open).
///
/// # Safety
/// `list` is NULL or came from `rdma_get_devices` and is freed once.
pub unsafe extern "C" fn rdma_free_devices(list: *mut *mut ffi::ibv_context) {
    boundary(Nothing, move || {
        if list.is_null() {
            return;
        }
        // SAFETY: the list came from malloc in rdma_get_devices.
        unsafe { libc::free(list.cast()) };
    })
}
