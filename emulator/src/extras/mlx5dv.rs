//! `libmlx5.so.1` (mlx5 direct verbs) for devices that are not direct-verbs devices: every
//! function Debian's libmlx5 exports (`objdump -T /usr/lib/x86_64-linux-gnu/libmlx5.so.1`,
//! all 128 at their MLX5_1.x versions, and `mlx5dv_init_obj`'s MLX5_1.0 compat version), so
//! a program or binding built against it (perftest, rdma-core's Python bindings pyverbs)
//! links, and spead2, which `dlopen`s it, finds what it looks up.
//!
//! An mlx5-personality device with direct verbs (the default; a topology's
//! `direct_verbs = false` turns them off, ConnectX-4 Lx style) is a direct-verbs device
//! for the striding receive queue ("multi-packet RQ") that spead2 uses: `mlx5dv_is_supported`
//! is true, `mlx5dv_query_device` reports a ConnectX-5's striding RQ capabilities,
//! `mlx5dv_create_wq` makes striding WQs and `mlx5dv_init_obj` hands out a WQ's ring
//! (`MLX5DV_OBJ_RWQ`); see [`crate::verbs::wq`]. On an rxe device or one without direct verbs
//! those four answer as libmlx5 does for a device that is not its own (false,
//! EOPNOTSUPP). The emulator has no model of DEVX, steering rules, mkeys and the rest, so
//! every other function, and `mlx5dv_init_obj` for any object but an RWQ, fails the
//! way rdma-core v44.0's libmlx5 fails for a device without mlx5 direct-verbs ops
//! (`providers/mlx5/*.c`, and the man pages where they document the return value): a
//! function returning an object gives NULL with errno EOPNOTSUPP, one returning 0 or an
//! error number gives EOPNOTSUPP (and sets errno too), `mlx5dv_qp_cancel_posted_send_wrs`
//! gives -EOPNOTSUPP (its man page's "-errno"), the two whose value is a count or a file
//! descriptor give -1 with errno EOPNOTSUPP, and the `void` ones do nothing. Each is
//! logged once as not emulated. `cargo xtask emu` links `libmlx5.so.1` to this library
//! (the MLX5_1.x nodes of `libibverbs.map`), so a call never reaches Debian's libmlx5,
//! whose functions that do not first check the device (`mlx5dv_init_obj`,
//! `mlx5dv_qp_ex_from_ibv_qp_ex` ...) would read the emulator's objects as its own.
//! (Debian's libmlx5 does load over the emulator, and its `mlx5dv_is_supported` answers
//! false too: see [`crate::runtime::host::EmuDevice`].)
//!
//! The refusing functions read no argument, so they declare none: in the C calling
//! convention the caller places and removes the arguments, and a function that reads none
//! is called correctly whatever the caller passes.

use std::ffi::{c_int, c_void};
use std::ptr::null_mut;

use crate::base::boundary::{boundary, MinusOne, Nothing, Null, ReturnsErrno, Value};
use crate::base::errno::set_errno;
use crate::base::ffi;
use crate::verbs::unsupported::refuse;

/// Whether this process's host has an mlx5 device with direct verbs (every device of a
/// host has the host's personality).
fn direct_verbs() -> bool {
    crate::runtime::host::emu()
        .is_ok_and(|e| e.spec.personality == backend_sim::Personality::Mlx5 && e.spec.direct_verbs)
}

/// `mlx5dv_is_supported`: true for a device of an mlx5 host with direct verbs.
pub extern "C" fn mlx5dv_is_supported(device: *mut ffi::ibv_device) -> bool {
    boundary(Value(false), move || !device.is_null() && direct_verbs())
}

/// The device flags a ConnectX-5 reports: CQE version 1 (libmlx5 asks the kernel for it
/// and `_mlx5dv_query_device` reports `MLX5DV_CONTEXT_FLAGS_CQE_V1`), and multi-packet
/// send WQEs allowed and enhanced (the kernel's `mlx5_ib_query_device` sets
/// `MLX5_IB_ALLOW_MPW` and `MLX5_IB_SUPPORT_EMPW` from the device's `multi_pkt_send_wqe`
/// and `enhanced_multi_pkt_send_wqe` capabilities, which a ConnectX-5 has; spead2 needs
/// `MLX5DV_CONTEXT_FLAGS_MPW_ALLOWED`).
const CONNECTX5_FLAGS: u64 = (ffi::MLX5DV_CONTEXT_FLAGS_CQE_V1
    | ffi::MLX5DV_CONTEXT_FLAGS_MPW_ALLOWED
    | ffi::MLX5DV_CONTEXT_FLAGS_ENHANCED_MPW) as u64;

/// `mlx5dv_query_device`: on a direct-verbs device, the flags and, when asked
/// (`MLX5DV_CONTEXT_MASK_STRIDING_RQ` in `comp_mask`), the striding RQ capabilities the
/// kernel reports for a ConnectX-5 (`mlx5_ib_query_device`: the
/// `MLX5_{MIN,MAX}_SINGLE_*` limits, `supported_qpts` = `BIT(IB_QPT_RAW_PACKET)`). Other
/// capability groups asked for are left out of the answer's `comp_mask` (not reported).
/// Elsewhere EOPNOTSUPP, as before.
///
/// # Safety
/// `attrs` is NULL or valid for reads and writes.
pub unsafe extern "C" fn mlx5dv_query_device(
    ctx: *mut ffi::ibv_context,
    attrs: *mut ffi::mlx5dv_context,
) -> c_int {
    boundary(ReturnsErrno, move || {
        if !direct_verbs() {
            refuse("mlx5dv_query_device");
            return libc::EOPNOTSUPP;
        }
        if ctx.is_null() || attrs.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: the caller's valid output; `comp_mask` is what it asks for.
        let a = unsafe { &mut *attrs };
        let asked = a.comp_mask;
        a.version = 0;
        a.flags = CONNECTX5_FLAGS;
        let mut answered = 0u64;
        if asked & ffi::MLX5DV_CONTEXT_MASK_STRIDING_RQ as u64 != 0 {
            let l = backend_sim::verbs::STRIDING_RQ_LIMITS;
            a.striding_rq_caps = ffi::mlx5dv_striding_rq_caps {
                min_single_stride_log_num_of_bytes: l.min_single_stride_log_num_of_bytes,
                max_single_stride_log_num_of_bytes: l.max_single_stride_log_num_of_bytes,
                min_single_wqe_log_num_of_strides: l.min_single_wqe_log_num_of_strides,
                max_single_wqe_log_num_of_strides: l.max_single_wqe_log_num_of_strides,
                supported_qpts: 1 << ffi::IBV_QPT_RAW_PACKET,
            };
            answered |= ffi::MLX5DV_CONTEXT_MASK_STRIDING_RQ as u64;
        }
        a.comp_mask = answered;
        0
    })
}

/// `mlx5dv_create_wq`: on a direct-verbs device a WQ, striding with
/// `MLX5DV_WQ_INIT_ATTR_MASK_STRIDING_RQ` (a geometry outside the capabilities is
/// EINVAL, as libmlx5's `create_wq` and the kernel's `prepare_user_rq` check it; another
/// `comp_mask` bit is EINVAL, `check_comp_mask`); elsewhere NULL with EOPNOTSUPP.
///
/// # Safety
/// `ctx` is a live context of ours; `attr` and `mlx5_attr` are NULL or valid, `attr`
/// naming a live PD and CQ of ours.
pub unsafe extern "C" fn mlx5dv_create_wq(
    ctx: *mut ffi::ibv_context,
    attr: *mut ffi::ibv_wq_init_attr,
    mlx5_attr: *mut ffi::mlx5dv_wq_init_attr,
) -> *mut ffi::ibv_wq {
    boundary(Null, move || {
        if !direct_verbs() {
            refuse("mlx5dv_create_wq");
            return null_mut();
        }
        let striding = if mlx5_attr.is_null() {
            None
        } else {
            // SAFETY: the caller's valid attributes.
            let m = unsafe { &*mlx5_attr };
            let known = ffi::MLX5DV_WQ_INIT_ATTR_MASK_STRIDING_RQ as u64;
            if m.comp_mask & !known != 0 {
                set_errno(libc::EINVAL);
                return null_mut();
            }
            (m.comp_mask & known != 0).then(|| {
                let s = &m.striding_rq_attrs;
                verbs_api::StridingRqAttr {
                    single_stride_log_num_of_bytes: s.single_stride_log_num_of_bytes,
                    single_wqe_log_num_of_strides: s.single_wqe_log_num_of_strides,
                    two_byte_shift_en: s.two_byte_shift_en != 0,
                }
            })
        };
        // SAFETY: the caller's live context and valid attributes.
        unsafe { crate::verbs::wq::create(ctx, attr, striding) }
    })
}

/// `mlx5dv_init_obj`: on a direct-verbs device, `MLX5DV_OBJ_RWQ` gives the WQ's ring
/// as `mlx5dv_get_rwq` does (`buf`, `dbrec`, `wqe_cnt`, `stride = 1 << wqe_shift`,
/// `comp_mask` 0); any other object type is EOPNOTSUPP (logged once: the emulator has no
/// mlx5 QP, CQ, SRQ, DM, AH or PD layout to hand out). Elsewhere EOPNOTSUPP, as before.
///
/// # Safety
/// `obj` is NULL or valid; for `MLX5DV_OBJ_RWQ` its `rwq.in` is a live WQ of ours and
/// `rwq.out` valid for writes.
pub unsafe extern "C" fn mlx5dv_init_obj(obj: *mut ffi::mlx5dv_obj, obj_type: u64) -> c_int {
    boundary(ReturnsErrno, move || {
        if !direct_verbs() {
            refuse("mlx5dv_init_obj");
            return libc::EOPNOTSUPP;
        }
        if obj_type & !(ffi::MLX5DV_OBJ_RWQ as u64) != 0 {
            refuse("mlx5dv_init_obj");
            return libc::EOPNOTSUPP;
        }
        if obj.is_null() {
            return libc::EINVAL;
        }
        if obj_type == 0 {
            return 0;
        }
        // SAFETY: the caller's valid object description.
        let o = unsafe { &mut *obj };
        if o.rwq.in_.is_null() || o.rwq.out.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: a live WQ of ours (the caller's contract) and a valid output.
        let (q, out): (&crate::verbs::wq::EmuWq, _) =
            unsafe { (crate::objects::handles::emu(o.rwq.in_), &mut *o.rwq.out) };
        let (buf, dbrec, wqe_cnt, stride) = q.ring.dv();
        *out = ffi::mlx5dv_rwq {
            buf: buf.cast(),
            dbrec,
            wqe_cnt,
            stride,
            comp_mask: 0,
        };
        0
    })
}

/// `mlx5dv_open_device`: on a direct-verbs device with no attribute flags, the context
/// `ibv_open_device` opens (libmlx5's is `verbs_open_device`, a context like
/// `ibv_open_device`'s); a DEVX context (`MLX5DV_CONTEXT_FLAGS_DEVX`) or other
/// attributes are refused (EOPNOTSUPP, logged: the emulator has no DEVX), and so is a
/// device without direct verbs (NULL with EOPNOTSUPP, as before).
///
/// # Safety
/// `device` is a device of this library's list; `attr` is NULL or valid.
pub unsafe extern "C" fn mlx5dv_open_device(
    device: *mut ffi::ibv_device,
    attr: *mut ffi::mlx5dv_context_attr,
) -> *mut ffi::ibv_context {
    boundary(Null, move || {
        // SAFETY: a non-NULL `attr` is the caller's valid attribute.
        let plain = attr.is_null() || unsafe { (*attr).flags == 0 && (*attr).comp_mask == 0 };
        if !direct_verbs() || !plain {
            refuse("mlx5dv_open_device");
            return null_mut();
        }
        // SAFETY: the caller's device, one of this library's list.
        unsafe { crate::verbs::ops::ibv_open_device(device) }
    })
}

/// Defines the refusing functions, by what they return.
macro_rules! refusing {
    (
        null: $($null:ident),+;
        errno: $($errno:ident),+;
        neg: $($neg:ident),+;
        minus_one: $($minus_one:ident),+;
        ssize: $($ssize:ident),+;
        void: $($void:ident),+;
    ) => {
        $(
            #[doc = concat!("`", stringify!($null), "`: NULL with errno EOPNOTSUPP.")]
            pub extern "C" fn $null() -> *mut c_void {
                boundary(Null, || {
refuse(stringify!($null));
                null_mut()
})
            }
        )+
        $(
            #[doc = concat!("`", stringify!($errno), "`: EOPNOTSUPP, returned as libmlx5 returns errors (errno is EOPNOTSUPP too).")]
            pub extern "C" fn $errno() -> c_int {
                boundary(ReturnsErrno, || {
refuse(stringify!($errno));
                libc::EOPNOTSUPP
})
            }
        )+
        $(
            #[doc = concat!("`", stringify!($neg), "`: -EOPNOTSUPP, as its man page returns errors.")]
            pub extern "C" fn $neg() -> c_int {
                boundary(Value(-libc::EOPNOTSUPP), || {
refuse(stringify!($neg));
                -libc::EOPNOTSUPP
})
            }
        )+
        $(
            #[doc = concat!("`", stringify!($minus_one), "`: -1 (no file descriptor) with errno EOPNOTSUPP.")]
            pub extern "C" fn $minus_one() -> c_int {
                boundary(MinusOne, || {
refuse(stringify!($minus_one));
                -1
})
            }
        )+
        $(
            #[doc = concat!("`", stringify!($ssize), "`: -1 with errno EOPNOTSUPP, as `read` fails.")]
            pub extern "C" fn $ssize() -> isize {
                boundary(MinusOne, || {
refuse(stringify!($ssize));
                -1
})
            }
        )+
        $(
            #[doc = concat!("`", stringify!($void), "`: releases an object no call could have made, so does nothing.")]
            pub extern "C" fn $void() {
                boundary(Nothing, || {
refuse(stringify!($void));
})
            }
        )+
    };
}

refusing! {
    null:
        mlx5dv_alloc_dm,
        mlx5dv_alloc_var,
        mlx5dv_create_cq,
        mlx5dv_create_flow,
        mlx5dv_create_flow_action_esp,
        mlx5dv_create_flow_action_modify_header,
        mlx5dv_create_flow_action_packet_reformat,
        mlx5dv_create_flow_matcher,
        mlx5dv_create_mkey,
        mlx5dv_create_qp,
        mlx5dv_create_steering_anchor,
        mlx5dv_crypto_login_create,
        mlx5dv_dek_create,
        mlx5dv_devx_alloc_msi_vector,
        mlx5dv_devx_alloc_uar,
        mlx5dv_devx_create_cmd_comp,
        mlx5dv_devx_create_eq,
        mlx5dv_devx_create_event_channel,
        mlx5dv_devx_obj_create,
        mlx5dv_devx_umem_reg,
        mlx5dv_devx_umem_reg_ex,
        mlx5dv_dm_map_op_addr,
        mlx5dv_dr_action_create_aso,
        mlx5dv_dr_action_create_default_miss,
        mlx5dv_dr_action_create_dest_array,
        mlx5dv_dr_action_create_dest_devx_tir,
        mlx5dv_dr_action_create_dest_ib_port,
        mlx5dv_dr_action_create_dest_ibv_qp,
        mlx5dv_dr_action_create_dest_root_table,
        mlx5dv_dr_action_create_dest_table,
        mlx5dv_dr_action_create_dest_vport,
        mlx5dv_dr_action_create_drop,
        mlx5dv_dr_action_create_flow_counter,
        mlx5dv_dr_action_create_flow_meter,
        mlx5dv_dr_action_create_flow_sampler,
        mlx5dv_dr_action_create_modify_header,
        mlx5dv_dr_action_create_packet_reformat,
        mlx5dv_dr_action_create_pop_vlan,
        mlx5dv_dr_action_create_push_vlan,
        mlx5dv_dr_action_create_tag,
        mlx5dv_dr_domain_create,
        mlx5dv_dr_matcher_create,
        mlx5dv_dr_rule_create,
        mlx5dv_dr_table_create,
        mlx5dv_get_vfio_device_list,
        mlx5dv_pp_alloc,
        mlx5dv_qp_ex_from_ibv_qp_ex,
        mlx5dv_sched_leaf_create,
        mlx5dv_sched_node_create;
    errno:
        _mlx5dv_mkey_check,
        _mlx5dv_query_port,
        mlx5dv_crypto_login,
        mlx5dv_crypto_login_destroy,
        mlx5dv_crypto_login_query,
        mlx5dv_crypto_login_query_state,
        mlx5dv_crypto_logout,
        mlx5dv_dci_stream_id_reset,
        mlx5dv_dek_destroy,
        mlx5dv_dek_query,
        mlx5dv_destroy_flow_matcher,
        mlx5dv_destroy_mkey,
        mlx5dv_destroy_steering_anchor,
        mlx5dv_devx_cq_modify,
        mlx5dv_devx_cq_query,
        mlx5dv_devx_destroy_eq,
        mlx5dv_devx_free_msi_vector,
        mlx5dv_devx_general_cmd,
        mlx5dv_devx_get_async_cmd_comp,
        mlx5dv_devx_ind_tbl_modify,
        mlx5dv_devx_ind_tbl_query,
        mlx5dv_devx_obj_destroy,
        mlx5dv_devx_obj_modify,
        mlx5dv_devx_obj_query,
        mlx5dv_devx_obj_query_async,
        mlx5dv_devx_qp_modify,
        mlx5dv_devx_qp_query,
        mlx5dv_devx_query_eqn,
        mlx5dv_devx_srq_modify,
        mlx5dv_devx_srq_query,
        mlx5dv_devx_subscribe_devx_event,
        mlx5dv_devx_subscribe_devx_event_fd,
        mlx5dv_devx_umem_dereg,
        mlx5dv_devx_wq_modify,
        mlx5dv_devx_wq_query,
        mlx5dv_dr_action_destroy,
        mlx5dv_dr_action_modify_aso,
        mlx5dv_dr_action_modify_flow_meter,
        mlx5dv_dr_aso_other_domain_link,
        mlx5dv_dr_aso_other_domain_unlink,
        mlx5dv_dr_domain_destroy,
        mlx5dv_dr_domain_sync,
        mlx5dv_dr_matcher_destroy,
        mlx5dv_dr_matcher_set_layout,
        mlx5dv_dr_rule_destroy,
        mlx5dv_dr_table_destroy,
        mlx5dv_dump_dr_domain,
        mlx5dv_dump_dr_matcher,
        mlx5dv_dump_dr_rule,
        mlx5dv_dump_dr_table,
        mlx5dv_get_clock_info,
        mlx5dv_map_ah_to_qp,
        mlx5dv_modify_qp_lag_port,
        mlx5dv_modify_qp_sched_elem,
        mlx5dv_modify_qp_udp_sport,
        mlx5dv_query_qp_lag_port,
        mlx5dv_reserved_qpn_alloc,
        mlx5dv_reserved_qpn_dealloc,
        mlx5dv_sched_leaf_destroy,
        mlx5dv_sched_leaf_modify,
        mlx5dv_sched_node_destroy,
        mlx5dv_sched_node_modify,
        mlx5dv_set_context_attr,
        mlx5dv_vfio_process_events;
    neg:
        mlx5dv_qp_cancel_posted_send_wrs;
    minus_one:
        mlx5dv_vfio_get_events_fd;
    ssize:
        mlx5dv_devx_get_event;
    void:
        mlx5dv_devx_destroy_cmd_comp,
        mlx5dv_devx_destroy_event_channel,
        mlx5dv_devx_free_uar,
        mlx5dv_dr_domain_allow_duplicate_rules,
        mlx5dv_dr_domain_set_reclaim_device_memory,
        mlx5dv_free_var,
        mlx5dv_pp_free;
}

crate::base::symver::symbol_versions! {
    mlx5dv_query_device = crate::extras::mlx5dv::mlx5dv_query_device => "MLX5_1.0",
    mlx5dv_create_cq = crate::extras::mlx5dv::mlx5dv_create_cq => "MLX5_1.1",
    mlx5dv_init_obj = crate::extras::mlx5dv::mlx5dv_init_obj => "MLX5_1.2",
    mlx5dv_set_context_attr = crate::extras::mlx5dv::mlx5dv_set_context_attr => "MLX5_1.2",
    mlx5dv_create_qp = crate::extras::mlx5dv::mlx5dv_create_qp => "MLX5_1.3",
    mlx5dv_create_wq = crate::extras::mlx5dv::mlx5dv_create_wq => "MLX5_1.3",
    mlx5dv_get_clock_info = crate::extras::mlx5dv::mlx5dv_get_clock_info => "MLX5_1.4",
    mlx5dv_create_flow_action_esp = crate::extras::mlx5dv::mlx5dv_create_flow_action_esp => "MLX5_1.5",
    mlx5dv_create_flow = crate::extras::mlx5dv::mlx5dv_create_flow => "MLX5_1.6",
    mlx5dv_create_flow_matcher = crate::extras::mlx5dv::mlx5dv_create_flow_matcher => "MLX5_1.6",
    mlx5dv_destroy_flow_matcher = crate::extras::mlx5dv::mlx5dv_destroy_flow_matcher => "MLX5_1.6",
    mlx5dv_create_flow_action_modify_header = crate::extras::mlx5dv::mlx5dv_create_flow_action_modify_header => "MLX5_1.7",
    mlx5dv_create_flow_action_packet_reformat = crate::extras::mlx5dv::mlx5dv_create_flow_action_packet_reformat => "MLX5_1.7",
    mlx5dv_devx_alloc_uar = crate::extras::mlx5dv::mlx5dv_devx_alloc_uar => "MLX5_1.7",
    mlx5dv_devx_free_uar = crate::extras::mlx5dv::mlx5dv_devx_free_uar => "MLX5_1.7",
    mlx5dv_devx_general_cmd = crate::extras::mlx5dv::mlx5dv_devx_general_cmd => "MLX5_1.7",
    mlx5dv_devx_obj_create = crate::extras::mlx5dv::mlx5dv_devx_obj_create => "MLX5_1.7",
    mlx5dv_devx_obj_destroy = crate::extras::mlx5dv::mlx5dv_devx_obj_destroy => "MLX5_1.7",
    mlx5dv_devx_obj_modify = crate::extras::mlx5dv::mlx5dv_devx_obj_modify => "MLX5_1.7",
    mlx5dv_devx_obj_query = crate::extras::mlx5dv::mlx5dv_devx_obj_query => "MLX5_1.7",
    mlx5dv_devx_query_eqn = crate::extras::mlx5dv::mlx5dv_devx_query_eqn => "MLX5_1.7",
    mlx5dv_devx_umem_dereg = crate::extras::mlx5dv::mlx5dv_devx_umem_dereg => "MLX5_1.7",
    mlx5dv_devx_umem_reg = crate::extras::mlx5dv::mlx5dv_devx_umem_reg => "MLX5_1.7",
    mlx5dv_open_device = crate::extras::mlx5dv::mlx5dv_open_device => "MLX5_1.7",
    mlx5dv_devx_cq_modify = crate::extras::mlx5dv::mlx5dv_devx_cq_modify => "MLX5_1.8",
    mlx5dv_devx_cq_query = crate::extras::mlx5dv::mlx5dv_devx_cq_query => "MLX5_1.8",
    mlx5dv_devx_ind_tbl_modify = crate::extras::mlx5dv::mlx5dv_devx_ind_tbl_modify => "MLX5_1.8",
    mlx5dv_devx_ind_tbl_query = crate::extras::mlx5dv::mlx5dv_devx_ind_tbl_query => "MLX5_1.8",
    mlx5dv_devx_qp_modify = crate::extras::mlx5dv::mlx5dv_devx_qp_modify => "MLX5_1.8",
    mlx5dv_devx_qp_query = crate::extras::mlx5dv::mlx5dv_devx_qp_query => "MLX5_1.8",
    mlx5dv_devx_srq_modify = crate::extras::mlx5dv::mlx5dv_devx_srq_modify => "MLX5_1.8",
    mlx5dv_devx_srq_query = crate::extras::mlx5dv::mlx5dv_devx_srq_query => "MLX5_1.8",
    mlx5dv_devx_wq_modify = crate::extras::mlx5dv::mlx5dv_devx_wq_modify => "MLX5_1.8",
    mlx5dv_devx_wq_query = crate::extras::mlx5dv::mlx5dv_devx_wq_query => "MLX5_1.8",
    mlx5dv_is_supported = crate::extras::mlx5dv::mlx5dv_is_supported => "MLX5_1.8",
    mlx5dv_devx_create_cmd_comp = crate::extras::mlx5dv::mlx5dv_devx_create_cmd_comp => "MLX5_1.9",
    mlx5dv_devx_destroy_cmd_comp = crate::extras::mlx5dv::mlx5dv_devx_destroy_cmd_comp => "MLX5_1.9",
    mlx5dv_devx_get_async_cmd_comp = crate::extras::mlx5dv::mlx5dv_devx_get_async_cmd_comp => "MLX5_1.9",
    mlx5dv_devx_obj_query_async = crate::extras::mlx5dv::mlx5dv_devx_obj_query_async => "MLX5_1.9",
    mlx5dv_alloc_dm = crate::extras::mlx5dv::mlx5dv_alloc_dm => "MLX5_1.10",
    mlx5dv_create_mkey = crate::extras::mlx5dv::mlx5dv_create_mkey => "MLX5_1.10",
    mlx5dv_destroy_mkey = crate::extras::mlx5dv::mlx5dv_destroy_mkey => "MLX5_1.10",
    mlx5dv_dr_action_create_dest_ibv_qp = crate::extras::mlx5dv::mlx5dv_dr_action_create_dest_ibv_qp => "MLX5_1.10",
    mlx5dv_dr_action_create_dest_table = crate::extras::mlx5dv::mlx5dv_dr_action_create_dest_table => "MLX5_1.10",
    mlx5dv_dr_action_create_dest_vport = crate::extras::mlx5dv::mlx5dv_dr_action_create_dest_vport => "MLX5_1.10",
    mlx5dv_dr_action_create_drop = crate::extras::mlx5dv::mlx5dv_dr_action_create_drop => "MLX5_1.10",
    mlx5dv_dr_action_create_flow_counter = crate::extras::mlx5dv::mlx5dv_dr_action_create_flow_counter => "MLX5_1.10",
    mlx5dv_dr_action_create_modify_header = crate::extras::mlx5dv::mlx5dv_dr_action_create_modify_header => "MLX5_1.10",
    mlx5dv_dr_action_create_packet_reformat = crate::extras::mlx5dv::mlx5dv_dr_action_create_packet_reformat => "MLX5_1.10",
    mlx5dv_dr_action_create_tag = crate::extras::mlx5dv::mlx5dv_dr_action_create_tag => "MLX5_1.10",
    mlx5dv_dr_action_destroy = crate::extras::mlx5dv::mlx5dv_dr_action_destroy => "MLX5_1.10",
    mlx5dv_dr_domain_create = crate::extras::mlx5dv::mlx5dv_dr_domain_create => "MLX5_1.10",
    mlx5dv_dr_domain_destroy = crate::extras::mlx5dv::mlx5dv_dr_domain_destroy => "MLX5_1.10",
    mlx5dv_dr_domain_sync = crate::extras::mlx5dv::mlx5dv_dr_domain_sync => "MLX5_1.10",
    mlx5dv_dr_matcher_create = crate::extras::mlx5dv::mlx5dv_dr_matcher_create => "MLX5_1.10",
    mlx5dv_dr_matcher_destroy = crate::extras::mlx5dv::mlx5dv_dr_matcher_destroy => "MLX5_1.10",
    mlx5dv_dr_rule_create = crate::extras::mlx5dv::mlx5dv_dr_rule_create => "MLX5_1.10",
    mlx5dv_dr_rule_destroy = crate::extras::mlx5dv::mlx5dv_dr_rule_destroy => "MLX5_1.10",
    mlx5dv_dr_table_create = crate::extras::mlx5dv::mlx5dv_dr_table_create => "MLX5_1.10",
    mlx5dv_dr_table_destroy = crate::extras::mlx5dv::mlx5dv_dr_table_destroy => "MLX5_1.10",
    mlx5dv_qp_ex_from_ibv_qp_ex = crate::extras::mlx5dv::mlx5dv_qp_ex_from_ibv_qp_ex => "MLX5_1.10",
    mlx5dv_devx_create_event_channel = crate::extras::mlx5dv::mlx5dv_devx_create_event_channel => "MLX5_1.11",
    mlx5dv_devx_destroy_event_channel = crate::extras::mlx5dv::mlx5dv_devx_destroy_event_channel => "MLX5_1.11",
    mlx5dv_devx_get_event = crate::extras::mlx5dv::mlx5dv_devx_get_event => "MLX5_1.11",
    mlx5dv_devx_subscribe_devx_event = crate::extras::mlx5dv::mlx5dv_devx_subscribe_devx_event => "MLX5_1.11",
    mlx5dv_devx_subscribe_devx_event_fd = crate::extras::mlx5dv::mlx5dv_devx_subscribe_devx_event_fd => "MLX5_1.11",
    mlx5dv_alloc_var = crate::extras::mlx5dv::mlx5dv_alloc_var => "MLX5_1.12",
    mlx5dv_dr_action_create_flow_meter = crate::extras::mlx5dv::mlx5dv_dr_action_create_flow_meter => "MLX5_1.12",
    mlx5dv_dr_action_modify_flow_meter = crate::extras::mlx5dv::mlx5dv_dr_action_modify_flow_meter => "MLX5_1.12",
    mlx5dv_dump_dr_domain = crate::extras::mlx5dv::mlx5dv_dump_dr_domain => "MLX5_1.12",
    mlx5dv_dump_dr_matcher = crate::extras::mlx5dv::mlx5dv_dump_dr_matcher => "MLX5_1.12",
    mlx5dv_dump_dr_rule = crate::extras::mlx5dv::mlx5dv_dump_dr_rule => "MLX5_1.12",
    mlx5dv_dump_dr_table = crate::extras::mlx5dv::mlx5dv_dump_dr_table => "MLX5_1.12",
    mlx5dv_free_var = crate::extras::mlx5dv::mlx5dv_free_var => "MLX5_1.12",
    mlx5dv_pp_alloc = crate::extras::mlx5dv::mlx5dv_pp_alloc => "MLX5_1.13",
    mlx5dv_pp_free = crate::extras::mlx5dv::mlx5dv_pp_free => "MLX5_1.13",
    mlx5dv_dr_action_create_default_miss = crate::extras::mlx5dv::mlx5dv_dr_action_create_default_miss => "MLX5_1.14",
    mlx5dv_dr_domain_set_reclaim_device_memory = crate::extras::mlx5dv::mlx5dv_dr_domain_set_reclaim_device_memory => "MLX5_1.14",
    mlx5dv_modify_qp_lag_port = crate::extras::mlx5dv::mlx5dv_modify_qp_lag_port => "MLX5_1.14",
    mlx5dv_query_qp_lag_port = crate::extras::mlx5dv::mlx5dv_query_qp_lag_port => "MLX5_1.14",
    mlx5dv_dr_action_create_dest_devx_tir = crate::extras::mlx5dv::mlx5dv_dr_action_create_dest_devx_tir => "MLX5_1.15",
    mlx5dv_dr_action_create_dest_array = crate::extras::mlx5dv::mlx5dv_dr_action_create_dest_array => "MLX5_1.16",
    mlx5dv_dr_action_create_flow_sampler = crate::extras::mlx5dv::mlx5dv_dr_action_create_flow_sampler => "MLX5_1.16",
    mlx5dv_dr_action_create_aso = crate::extras::mlx5dv::mlx5dv_dr_action_create_aso => "MLX5_1.17",
    mlx5dv_dr_action_create_pop_vlan = crate::extras::mlx5dv::mlx5dv_dr_action_create_pop_vlan => "MLX5_1.17",
    mlx5dv_dr_action_create_push_vlan = crate::extras::mlx5dv::mlx5dv_dr_action_create_push_vlan => "MLX5_1.17",
    mlx5dv_dr_action_modify_aso = crate::extras::mlx5dv::mlx5dv_dr_action_modify_aso => "MLX5_1.17",
    mlx5dv_modify_qp_sched_elem = crate::extras::mlx5dv::mlx5dv_modify_qp_sched_elem => "MLX5_1.17",
    mlx5dv_modify_qp_udp_sport = crate::extras::mlx5dv::mlx5dv_modify_qp_udp_sport => "MLX5_1.17",
    mlx5dv_sched_leaf_create = crate::extras::mlx5dv::mlx5dv_sched_leaf_create => "MLX5_1.17",
    mlx5dv_sched_leaf_destroy = crate::extras::mlx5dv::mlx5dv_sched_leaf_destroy => "MLX5_1.17",
    mlx5dv_sched_leaf_modify = crate::extras::mlx5dv::mlx5dv_sched_leaf_modify => "MLX5_1.17",
    mlx5dv_sched_node_create = crate::extras::mlx5dv::mlx5dv_sched_node_create => "MLX5_1.17",
    mlx5dv_sched_node_destroy = crate::extras::mlx5dv::mlx5dv_sched_node_destroy => "MLX5_1.17",
    mlx5dv_sched_node_modify = crate::extras::mlx5dv::mlx5dv_sched_node_modify => "MLX5_1.17",
    mlx5dv_reserved_qpn_alloc = crate::extras::mlx5dv::mlx5dv_reserved_qpn_alloc => "MLX5_1.18",
    mlx5dv_reserved_qpn_dealloc = crate::extras::mlx5dv::mlx5dv_reserved_qpn_dealloc => "MLX5_1.18",
    _mlx5dv_query_port = crate::extras::mlx5dv::_mlx5dv_query_port => "MLX5_1.19",
    mlx5dv_devx_umem_reg_ex = crate::extras::mlx5dv::mlx5dv_devx_umem_reg_ex => "MLX5_1.19",
    mlx5dv_dm_map_op_addr = crate::extras::mlx5dv::mlx5dv_dm_map_op_addr => "MLX5_1.19",
    _mlx5dv_mkey_check = crate::extras::mlx5dv::_mlx5dv_mkey_check => "MLX5_1.20",
    mlx5dv_dr_domain_allow_duplicate_rules = crate::extras::mlx5dv::mlx5dv_dr_domain_allow_duplicate_rules => "MLX5_1.20",
    mlx5dv_map_ah_to_qp = crate::extras::mlx5dv::mlx5dv_map_ah_to_qp => "MLX5_1.20",
    mlx5dv_qp_cancel_posted_send_wrs = crate::extras::mlx5dv::mlx5dv_qp_cancel_posted_send_wrs => "MLX5_1.20",
    mlx5dv_crypto_login = crate::extras::mlx5dv::mlx5dv_crypto_login => "MLX5_1.21",
    mlx5dv_crypto_login_query_state = crate::extras::mlx5dv::mlx5dv_crypto_login_query_state => "MLX5_1.21",
    mlx5dv_crypto_logout = crate::extras::mlx5dv::mlx5dv_crypto_logout => "MLX5_1.21",
    mlx5dv_dci_stream_id_reset = crate::extras::mlx5dv::mlx5dv_dci_stream_id_reset => "MLX5_1.21",
    mlx5dv_dek_create = crate::extras::mlx5dv::mlx5dv_dek_create => "MLX5_1.21",
    mlx5dv_dek_destroy = crate::extras::mlx5dv::mlx5dv_dek_destroy => "MLX5_1.21",
    mlx5dv_dek_query = crate::extras::mlx5dv::mlx5dv_dek_query => "MLX5_1.21",
    mlx5dv_dr_action_create_dest_ib_port = crate::extras::mlx5dv::mlx5dv_dr_action_create_dest_ib_port => "MLX5_1.21",
    mlx5dv_dr_matcher_set_layout = crate::extras::mlx5dv::mlx5dv_dr_matcher_set_layout => "MLX5_1.21",
    mlx5dv_get_vfio_device_list = crate::extras::mlx5dv::mlx5dv_get_vfio_device_list => "MLX5_1.21",
    mlx5dv_vfio_get_events_fd = crate::extras::mlx5dv::mlx5dv_vfio_get_events_fd => "MLX5_1.21",
    mlx5dv_vfio_process_events = crate::extras::mlx5dv::mlx5dv_vfio_process_events => "MLX5_1.21",
    mlx5dv_dr_aso_other_domain_link = crate::extras::mlx5dv::mlx5dv_dr_aso_other_domain_link => "MLX5_1.22",
    mlx5dv_dr_aso_other_domain_unlink = crate::extras::mlx5dv::mlx5dv_dr_aso_other_domain_unlink => "MLX5_1.22",
    mlx5dv_devx_alloc_msi_vector = crate::extras::mlx5dv::mlx5dv_devx_alloc_msi_vector => "MLX5_1.23",
    mlx5dv_devx_create_eq = crate::extras::mlx5dv::mlx5dv_devx_create_eq => "MLX5_1.23",
    mlx5dv_devx_destroy_eq = crate::extras::mlx5dv::mlx5dv_devx_destroy_eq => "MLX5_1.23",
    mlx5dv_devx_free_msi_vector = crate::extras::mlx5dv::mlx5dv_devx_free_msi_vector => "MLX5_1.23",
    mlx5dv_create_steering_anchor = crate::extras::mlx5dv::mlx5dv_create_steering_anchor => "MLX5_1.24",
    mlx5dv_crypto_login_create = crate::extras::mlx5dv::mlx5dv_crypto_login_create => "MLX5_1.24",
    mlx5dv_crypto_login_destroy = crate::extras::mlx5dv::mlx5dv_crypto_login_destroy => "MLX5_1.24",
    mlx5dv_crypto_login_query = crate::extras::mlx5dv::mlx5dv_crypto_login_query => "MLX5_1.24",
    mlx5dv_destroy_steering_anchor = crate::extras::mlx5dv::mlx5dv_destroy_steering_anchor => "MLX5_1.24",
    mlx5dv_dr_action_create_dest_root_table = crate::extras::mlx5dv::mlx5dv_dr_action_create_dest_root_table => "MLX5_1.24",
}

// `mlx5dv_init_obj@MLX5_1.0`, the compat version programs linked before MLX5_1.2 bind to
// (libmlx5's COMPAT_SYMVER_FUNC): the same refusal.
std::arch::global_asm!(
    ".pushsection .text,\"ax\",@progbits",
    ".globl \"mlx5dv_init_obj@MLX5_1.0\"",
    ".type \"mlx5dv_init_obj@MLX5_1.0\", @function",
    "\"mlx5dv_init_obj@MLX5_1.0\":",
    "jmp {init_obj}",
    ".popsection",
    init_obj = sym mlx5dv_init_obj,
);

/// The non-default versions this library also defines, as `(name, version)`.
pub const COMPAT_EXPORTS: &[(&str, &str)] = &[("mlx5dv_init_obj", "MLX5_1.0")];
