//! libibverbs' provider interface (the `IBVERBS_PRIVATE_34` symbols of rdma-core's
//! `libibverbs/driver.h`), which only provider libraries call.
//!
//! Programs such as perftest's `ib_send_bw` link Debian's provider libraries
//! (`libefa.so.1`, and `libmlx5.so.1` where it is not this library's emulated one, see
//! [`crate::extras::mlx5dv`]) directly, for their direct-verbs extensions. Loading one over this
//! library binds its references to the provider interface: the provider's
//! constructor calls `verbs_register_driver_34`, its op tables point at the `ibv_cmd_*`
//! functions, and its destroy paths read `verbs_allow_disassociate_destroy`. Without those
//! symbols the dynamic linker stops the program at start ("undefined symbol:
//! ibv_cmd_destroy_cq, version IBVERBS_PRIVATE_34").
//!
//! The emulator never loads a provider for its devices: a registered driver is ignored,
//! so a provider's own checks (`mlx5dv_is_supported` looks for its ops on the device)
//! answer that an emulated device is not theirs, and nothing reaches these functions. If
//! something does, each says so once on stderr and fails as the kernel command it stands
//! for would with no kernel behind it (EOPNOTSUPP), or returns nothing.

use std::ffi::{c_int, c_uint, c_void};
use std::ptr::null_mut;

use crate::base::boundary::{boundary, Nothing, Null, ReturnsErrno, Value};
use crate::base::errno::set_errno;
use crate::base::ffi;
use crate::base::log::log_unsupported_once;

/// Functions of the interface that return an errno value (`int`), as every `ibv_cmd_*`
/// does: each returns EOPNOTSUPP.
macro_rules! errno_stubs {
    ($($name:ident),* $(,)?) => {
        $(
            #[doc = concat!("`", stringify!($name), "`: no kernel command behind it (EOPNOTSUPP).")]
            pub extern "C" fn $name() -> c_int {
                boundary(ReturnsErrno, || {
                log_unsupported_once(stringify!($name), "EOPNOTSUPP");
                libc::EOPNOTSUPP
                })
            }
        )*
    };
}

errno_stubs!(
    execute_ioctl,
    ibv_cmd_advise_mr,
    ibv_cmd_alloc_dm,
    ibv_cmd_alloc_mw,
    ibv_cmd_alloc_pd,
    ibv_cmd_attach_mcast,
    ibv_cmd_close_xrcd,
    ibv_cmd_create_ah,
    ibv_cmd_create_counters,
    ibv_cmd_create_cq,
    ibv_cmd_create_cq_ex,
    ibv_cmd_create_flow,
    ibv_cmd_create_flow_action_esp,
    ibv_cmd_create_qp,
    ibv_cmd_create_qp_ex,
    ibv_cmd_create_qp_ex2,
    ibv_cmd_create_rwq_ind_table,
    ibv_cmd_create_srq,
    ibv_cmd_create_srq_ex,
    ibv_cmd_create_wq,
    ibv_cmd_dealloc_mw,
    ibv_cmd_dealloc_pd,
    ibv_cmd_dereg_mr,
    ibv_cmd_destroy_ah,
    ibv_cmd_destroy_counters,
    ibv_cmd_destroy_cq,
    ibv_cmd_destroy_flow,
    ibv_cmd_destroy_flow_action,
    ibv_cmd_destroy_qp,
    ibv_cmd_destroy_rwq_ind_table,
    ibv_cmd_destroy_srq,
    ibv_cmd_destroy_wq,
    ibv_cmd_detach_mcast,
    ibv_cmd_free_dm,
    ibv_cmd_get_context,
    ibv_cmd_modify_cq,
    ibv_cmd_modify_flow_action_esp,
    ibv_cmd_modify_qp,
    ibv_cmd_modify_qp_ex,
    ibv_cmd_modify_srq,
    ibv_cmd_modify_wq,
    ibv_cmd_open_qp,
    ibv_cmd_open_xrcd,
    ibv_cmd_poll_cq,
    ibv_cmd_post_recv,
    ibv_cmd_post_send,
    ibv_cmd_post_srq_recv,
    ibv_cmd_query_context,
    ibv_cmd_query_device_any,
    ibv_cmd_query_mr,
    ibv_cmd_query_port,
    ibv_cmd_query_qp,
    ibv_cmd_query_srq,
    ibv_cmd_read_counters,
    ibv_cmd_reg_dm_mr,
    ibv_cmd_reg_dmabuf_mr,
    ibv_cmd_reg_mr,
    ibv_cmd_req_notify_cq,
    ibv_cmd_rereg_mr,
    ibv_cmd_resize_cq,
    ibv_read_ibdev_sysfs_file,
);

/// `verbs_register_driver_34`: a provider's constructor offering its driver. The emulator
/// binds its devices to no provider, so the offer is declined silently (it happens on
/// every start of a program that links a provider).
pub extern "C" fn verbs_register_driver_34(_ops: *const c_void) {
    boundary(Nothing, move || {})
}

/// `_verbs_init_and_alloc_context`: a provider's context allocation; none runs here.
pub extern "C" fn _verbs_init_and_alloc_context() -> *mut c_void {
    boundary(Null, move || {
        log_unsupported_once("_verbs_init_and_alloc_context", "EOPNOTSUPP");
        set_errno(libc::EOPNOTSUPP);
        null_mut()
    })
}

/// `verbs_open_device`: opening a device through a provider; the emulator's devices open
/// with `ibv_open_device`.
pub extern "C" fn verbs_open_device(
    _device: *mut ffi::ibv_device,
    _private_data: *mut c_void,
) -> *mut ffi::ibv_context {
    boundary(Null, move || {
        log_unsupported_once("verbs_open_device", "EOPNOTSUPP");
        set_errno(libc::EOPNOTSUPP);
        null_mut()
    })
}

/// `verbs_uninit_context`: undoes `_verbs_init_and_alloc_context`, which never succeeds.
pub extern "C" fn verbs_uninit_context(_context: *mut c_void) {
    boundary(Nothing, move || {})
}

/// `verbs_set_ops`: a provider filling its context's op table; no provider context exists.
pub extern "C" fn verbs_set_ops(_vctx: *mut c_void, _ops: *const c_void) {
    boundary(Nothing, move || {})
}

/// `verbs_init_cq`: a provider initialising its CQ's core fields; no provider CQ exists.
pub extern "C" fn verbs_init_cq(
    _cq: *mut c_void,
    _context: *mut c_void,
    _channel: *mut c_void,
    _cq_context: *mut c_void,
) {
    boundary(Nothing, move || {})
}

/// `__verbs_log` (variadic in C: its arguments are never read here, which the SysV calling
/// convention allows): a provider's debug log, silent as libibverbs is by default.
pub extern "C" fn __verbs_log() {
    boundary(Nothing, move || {})
}

/// `__ioctl_final_num_attrs`: the attribute count of a provider's ioctl command buffer;
/// no command is ever built here.
pub extern "C" fn __ioctl_final_num_attrs(num_attrs: c_uint, _link: *mut c_void) -> c_uint {
    boundary(Value(0), move || num_attrs)
}

/// The data symbols this library exports (beside the functions of
/// [`crate::symbols::libibverbs::EXPORTS`]) and their version nodes.
pub const DATA_EXPORTS: &[(&str, &str)] =
    &[("verbs_allow_disassociate_destroy", "IBVERBS_PRIVATE_34")];

// `bool verbs_allow_disassociate_destroy`, the one data symbol of the interface: false, as
// in libibverbs until a provider's user sets it.
std::arch::global_asm!(
    ".pushsection .bss.verbs_allow_disassociate_destroy,\"aw\",@nobits",
    ".globl \"verbs_allow_disassociate_destroy@@IBVERBS_PRIVATE_34\"",
    ".type \"verbs_allow_disassociate_destroy@@IBVERBS_PRIVATE_34\", @object",
    ".size \"verbs_allow_disassociate_destroy@@IBVERBS_PRIVATE_34\", 1",
    "\"verbs_allow_disassociate_destroy@@IBVERBS_PRIVATE_34\":",
    ".zero 1",
    ".popsection",
);
