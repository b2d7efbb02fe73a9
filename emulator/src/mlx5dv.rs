//! The part of `libmlx5.so.1` (mlx5 direct verbs) programs look up at run time: spead2
//! `dlopen`s `libmlx5.so.1` and needs `mlx5dv_is_supported`, `mlx5dv_query_device`,
//! `mlx5dv_init_obj` and `mlx5dv_create_wq` to use multi-packet receive queues. The
//! emulated device answers that it is not a direct-verbs device (the emulator has no
//! model of MPRQ), so spead2 uses its ordinary receive path; the other three fail with
//! EOPNOTSUPP, logged once. `cargo xtask emu` links `libmlx5.so.1` to this library (the
//! MLX5_1.x nodes of `libibverbs.map`). Debian's own libmlx5 cannot load over the
//! emulator: it needs libibverbs' private provider interface
//! (`verbs_allow_disassociate_destroy@IBVERBS_PRIVATE_34` ...).

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

crate::exports::symbol_versions! {
    mlx5dv_query_device = crate::mlx5dv::mlx5dv_query_device => "MLX5_1.0",
    mlx5dv_init_obj = crate::mlx5dv::mlx5dv_init_obj => "MLX5_1.2",
    mlx5dv_create_wq = crate::mlx5dv::mlx5dv_create_wq => "MLX5_1.3",
    mlx5dv_is_supported = crate::mlx5dv::mlx5dv_is_supported => "MLX5_1.8",
}
