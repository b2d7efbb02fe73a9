//! The part of `libmlx5.so.1` (mlx5 direct verbs) the programs we run bind to: spead2
//! `dlopen`s `libmlx5.so.1` and looks up `mlx5dv_is_supported`, `mlx5dv_query_device`,
//! `mlx5dv_init_obj` and `mlx5dv_create_wq` to use multi-packet receive queues; perftest
//! links libmlx5 and imports nine more (`objdump -T /usr/bin/ib_send_bw`), which it calls
//! only for a device `mlx5dv_is_supported` accepts. The emulated device answers that it
//! is not a direct-verbs device (the emulator has no model of MPRQ), so spead2 uses its
//! ordinary receive path and perftest its plain verbs; every other function fails with
//! EOPNOTSUPP (returned, or as errno with NULL), logged once. `cargo xtask emu` links
//! `libmlx5.so.1` to this library (the MLX5_1.x nodes of `libibverbs.map`), so a call
//! never reaches Debian's libmlx5, whose functions that do not first check the device
//! (`mlx5dv_init_obj`, `mlx5dv_qp_ex_from_ibv_qp_ex` ...) would read the emulator's
//! objects as its own. (Debian's libmlx5 does load over the emulator, and its
//! `mlx5dv_is_supported` answers false too: see [`crate::state::EmuDevice`].)

use std::ffi::{c_int, c_void};
use std::ptr::null_mut;

use crate::ffi;
use crate::refused::refuse;

/// `mlx5dv_is_supported`: false, for every device.
pub extern "C" fn mlx5dv_is_supported(_device: *mut ffi::ibv_device) -> bool {
    false
}

/// `mlx5dv_query_device`: EOPNOTSUPP (returned, as libmlx5 returns errors).
pub extern "C" fn mlx5dv_query_device(_ctx: *mut ffi::ibv_context, _attrs: *mut c_void) -> c_int {
    refuse("mlx5dv_query_device");
    libc::EOPNOTSUPP
}

/// `mlx5dv_init_obj`: EOPNOTSUPP.
pub extern "C" fn mlx5dv_init_obj(_obj: *mut c_void, _obj_type: u64) -> c_int {
    refuse("mlx5dv_init_obj");
    libc::EOPNOTSUPP
}

/// `mlx5dv_create_wq`: NULL with errno EOPNOTSUPP.
pub extern "C" fn mlx5dv_create_wq(
    _ctx: *mut ffi::ibv_context,
    _attr: *mut ffi::ibv_wq_init_attr,
    _mlx5_attr: *mut c_void,
) -> *mut ffi::ibv_wq {
    refuse("mlx5dv_create_wq");
    null_mut()
}

/// An mlx5dv function that returns a pointer: NULL with errno EOPNOTSUPP.
fn refused_null<T>(verb: &'static str) -> *mut T {
    refuse(verb);
    null_mut()
}

/// `mlx5dv_open_device`: NULL with errno EOPNOTSUPP, as libmlx5 answers for a device that
/// is not its own.
pub extern "C" fn mlx5dv_open_device(
    _device: *mut ffi::ibv_device,
    _attr: *mut c_void,
) -> *mut ffi::ibv_context {
    refused_null("mlx5dv_open_device")
}

/// `mlx5dv_create_qp`: NULL with errno EOPNOTSUPP.
pub extern "C" fn mlx5dv_create_qp(
    _ctx: *mut ffi::ibv_context,
    _attr: *mut ffi::ibv_qp_init_attr_ex,
    _mlx5_attr: *mut c_void,
) -> *mut ffi::ibv_qp {
    refused_null("mlx5dv_create_qp")
}

/// `mlx5dv_qp_ex_from_ibv_qp_ex`: NULL (no QP here is an mlx5 QP).
pub extern "C" fn mlx5dv_qp_ex_from_ibv_qp_ex(_qp: *mut ffi::ibv_qp_ex) -> *mut c_void {
    refused_null("mlx5dv_qp_ex_from_ibv_qp_ex")
}

/// `mlx5dv_devx_general_cmd`: EOPNOTSUPP.
pub extern "C" fn mlx5dv_devx_general_cmd(
    _ctx: *mut ffi::ibv_context,
    _in: *const c_void,
    _inlen: usize,
    _out: *mut c_void,
    _outlen: usize,
) -> c_int {
    refuse("mlx5dv_devx_general_cmd");
    libc::EOPNOTSUPP
}

/// `mlx5dv_create_mkey`: NULL with errno EOPNOTSUPP.
pub extern "C" fn mlx5dv_create_mkey(_attr: *mut c_void) -> *mut c_void {
    refused_null("mlx5dv_create_mkey")
}

/// `mlx5dv_destroy_mkey`: EOPNOTSUPP (no mkey was ever made).
pub extern "C" fn mlx5dv_destroy_mkey(_mkey: *mut c_void) -> c_int {
    refuse("mlx5dv_destroy_mkey");
    libc::EOPNOTSUPP
}

/// `mlx5dv_crypto_login`: EOPNOTSUPP.
pub extern "C" fn mlx5dv_crypto_login(_ctx: *mut ffi::ibv_context, _attr: *mut c_void) -> c_int {
    refuse("mlx5dv_crypto_login");
    libc::EOPNOTSUPP
}

/// `mlx5dv_dek_create`: NULL with errno EOPNOTSUPP.
pub extern "C" fn mlx5dv_dek_create(
    _ctx: *mut ffi::ibv_context,
    _attr: *mut c_void,
) -> *mut c_void {
    refused_null("mlx5dv_dek_create")
}

/// `mlx5dv_dek_destroy`: EOPNOTSUPP (no DEK was ever made).
pub extern "C" fn mlx5dv_dek_destroy(_dek: *mut c_void) -> c_int {
    refuse("mlx5dv_dek_destroy");
    libc::EOPNOTSUPP
}

crate::exports::symbol_versions! {
    mlx5dv_query_device = crate::mlx5dv::mlx5dv_query_device => "MLX5_1.0",
    mlx5dv_init_obj = crate::mlx5dv::mlx5dv_init_obj => "MLX5_1.2",
    mlx5dv_create_wq = crate::mlx5dv::mlx5dv_create_wq => "MLX5_1.3",
    mlx5dv_is_supported = crate::mlx5dv::mlx5dv_is_supported => "MLX5_1.8",
    mlx5dv_create_qp = crate::mlx5dv::mlx5dv_create_qp => "MLX5_1.3",
    mlx5dv_open_device = crate::mlx5dv::mlx5dv_open_device => "MLX5_1.7",
    mlx5dv_devx_general_cmd = crate::mlx5dv::mlx5dv_devx_general_cmd => "MLX5_1.7",
    mlx5dv_create_mkey = crate::mlx5dv::mlx5dv_create_mkey => "MLX5_1.10",
    mlx5dv_destroy_mkey = crate::mlx5dv::mlx5dv_destroy_mkey => "MLX5_1.10",
    mlx5dv_qp_ex_from_ibv_qp_ex = crate::mlx5dv::mlx5dv_qp_ex_from_ibv_qp_ex => "MLX5_1.10",
    mlx5dv_crypto_login = crate::mlx5dv::mlx5dv_crypto_login => "MLX5_1.21",
    mlx5dv_dek_create = crate::mlx5dv::mlx5dv_dek_create => "MLX5_1.21",
    mlx5dv_dek_destroy = crate::mlx5dv::mlx5dv_dek_destroy => "MLX5_1.21",
}
