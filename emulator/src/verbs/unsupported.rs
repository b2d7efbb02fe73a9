//! Exported verbs the emulator has no model for yet: each fails the way libibverbs fails
//! for a provider without the op (EOPNOTSUPP), and says so once on stderr.

use std::ffi::c_int;
use std::ptr::null_mut;

use crate::base::boundary::{boundary, Nothing, Null, ReturnsErrno};
use crate::base::errno::set_errno;
use crate::base::ffi;
use crate::base::log::log_unsupported_once;

/// Logs `verb` once as not emulated and sets errno to EOPNOTSUPP.
pub(crate) fn refuse(verb: &'static str) {
    log_unsupported_once(verb, "EOPNOTSUPP");
    set_errno(libc::EOPNOTSUPP);
}

/// `ibv_import_device`: contexts cannot be shared between processes yet.
pub extern "C" fn ibv_import_device(_cmd_fd: c_int) -> *mut ffi::ibv_context {
    boundary(Null, move || {
        refuse("ibv_import_device");
        null_mut()
    })
}

/// `ibv_import_pd`.
pub extern "C" fn ibv_import_pd(_ctx: *mut ffi::ibv_context, _handle: u32) -> *mut ffi::ibv_pd {
    boundary(Null, move || {
        refuse("ibv_import_pd");
        null_mut()
    })
}

/// `ibv_import_mr`.
pub extern "C" fn ibv_import_mr(_pd: *mut ffi::ibv_pd, _handle: u32) -> *mut ffi::ibv_mr {
    boundary(Null, move || {
        refuse("ibv_import_mr");
        null_mut()
    })
}

/// `ibv_import_dm`.
pub extern "C" fn ibv_import_dm(_ctx: *mut ffi::ibv_context, _handle: u32) -> *mut ffi::ibv_dm {
    boundary(Null, move || {
        refuse("ibv_import_dm");
        null_mut()
    })
}

/// `ibv_unimport_pd`: nothing was ever imported, so there is nothing to release.
pub extern "C" fn ibv_unimport_pd(_pd: *mut ffi::ibv_pd) {
    boundary(Nothing, move || {})
}

/// `ibv_unimport_mr`: nothing was ever imported.
pub extern "C" fn ibv_unimport_mr(_mr: *mut ffi::ibv_mr) {
    boundary(Nothing, move || {})
}

/// `ibv_unimport_dm`: nothing was ever imported.
pub extern "C" fn ibv_unimport_dm(_dm: *mut ffi::ibv_dm) {
    boundary(Nothing, move || {})
}

/// `ibv_query_ece`: no enhanced connection establishment.
pub extern "C" fn ibv_query_ece(_qp: *mut ffi::ibv_qp, _ece: *mut ffi::ibv_ece) -> c_int {
    boundary(ReturnsErrno, move || {
        refuse("ibv_query_ece");
        libc::EOPNOTSUPP
    })
}

/// `ibv_set_ece`.
pub extern "C" fn ibv_set_ece(_qp: *mut ffi::ibv_qp, _ece: *mut ffi::ibv_ece) -> c_int {
    boundary(ReturnsErrno, move || {
        refuse("ibv_set_ece");
        libc::EOPNOTSUPP
    })
}

/// `ibv_reg_dmabuf_mr`: no dma-buf memory.
pub extern "C" fn ibv_reg_dmabuf_mr(
    _pd: *mut ffi::ibv_pd,
    _offset: u64,
    _length: usize,
    _iova: u64,
    _fd: c_int,
    _access: c_int,
) -> *mut ffi::ibv_mr {
    boundary(Null, move || {
        refuse("ibv_reg_dmabuf_mr");
        null_mut()
    })
}

/// `ibv_query_qp_data_in_order`: 0, no ordering promise (what libibverbs answers for a
/// provider without the op).
pub extern "C" fn ibv_query_qp_data_in_order(
    _qp: *mut ffi::ibv_qp,
    _op: ffi::ibv_wr_opcode,
    _flags: u32,
) -> c_int {
    boundary(ReturnsErrno, move || 0)
}
