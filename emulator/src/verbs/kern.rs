//! libibverbs' marshalling helpers between its structs and the kernel's uverbs ABI
//! (`ibv_copy_*_kern`): field by field, as rdma-core's `libibverbs/marshall.c` (v44.0)
//! does. librdmacm calls them.

use crate::base::boundary::{boundary, Nothing};
use crate::base::ffi;

/// `ibv_copy_ah_attr_from_kern`.
///
/// # Safety
/// Both pointers are valid (`dst` for a write).
pub unsafe extern "C" fn ibv_copy_ah_attr_from_kern(
    dst: *mut ffi::ibv_ah_attr,
    src: *const ffi::ib_uverbs_ah_attr,
) {
    boundary(Nothing, move || {
        // SAFETY: the caller's valid structs.
        let (d, s) = unsafe { (&mut *dst, &*src) };
        d.grh.dgid = ffi::ibv_gid { raw: s.grh.dgid };
        d.grh.flow_label = s.grh.flow_label;
        d.grh.sgid_index = s.grh.sgid_index;
        d.grh.hop_limit = s.grh.hop_limit;
        d.grh.traffic_class = s.grh.traffic_class;
        d.dlid = s.dlid;
        d.sl = s.sl;
        d.src_path_bits = s.src_path_bits;
        d.static_rate = s.static_rate;
        d.is_global = s.is_global;
        d.port_num = s.port_num;
    })
}

/// `ibv_copy_qp_attr_from_kern`.
///
/// # Safety
/// Both pointers are valid (`dst` for a write).
pub unsafe extern "C" fn ibv_copy_qp_attr_from_kern(
    dst: *mut ffi::ibv_qp_attr,
    src: *const ffi::ib_uverbs_qp_attr,
) {
    boundary(Nothing, move || {
        // SAFETY: the caller's valid structs.
        let (d, s) = unsafe { (&mut *dst, &*src) };
        d.cur_qp_state = s.cur_qp_state;
        d.path_mtu = s.path_mtu;
        d.path_mig_state = s.path_mig_state;
        d.qkey = s.qkey;
        d.rq_psn = s.rq_psn;
        d.sq_psn = s.sq_psn;
        d.dest_qp_num = s.dest_qp_num;
        d.qp_access_flags = s.qp_access_flags;
        d.cap = ffi::ibv_qp_cap {
            max_send_wr: s.max_send_wr,
            max_recv_wr: s.max_recv_wr,
            max_send_sge: s.max_send_sge,
            max_recv_sge: s.max_recv_sge,
            max_inline_data: s.max_inline_data,
        };
        // SAFETY: fields of the caller's valid structs.
        unsafe {
            ibv_copy_ah_attr_from_kern(&mut d.ah_attr, &s.ah_attr);
            ibv_copy_ah_attr_from_kern(&mut d.alt_ah_attr, &s.alt_ah_attr);
        }
        d.pkey_index = s.pkey_index;
        d.alt_pkey_index = s.alt_pkey_index;
        d.en_sqd_async_notify = s.en_sqd_async_notify;
        d.sq_draining = s.sq_draining;
        d.max_rd_atomic = s.max_rd_atomic;
        d.max_dest_rd_atomic = s.max_dest_rd_atomic;
        d.min_rnr_timer = s.min_rnr_timer;
        d.port_num = s.port_num;
        d.timeout = s.timeout;
        d.retry_cnt = s.retry_cnt;
        d.rnr_retry = s.rnr_retry;
        d.alt_port_num = s.alt_port_num;
        d.alt_timeout = s.alt_timeout;
    })
}

/// Copies the path record fields that have one name in both structs, converting as C's
/// assignment does (the two structs type some fields differently).
macro_rules! copy_path_rec {
    ($d:expr, $s:expr) => {
        $d.dlid = $s.dlid as _;
        $d.slid = $s.slid as _;
        $d.raw_traffic = $s.raw_traffic as _;
        $d.flow_label = $s.flow_label as _;
        $d.hop_limit = $s.hop_limit as _;
        $d.traffic_class = $s.traffic_class as _;
        $d.reversible = $s.reversible as _;
        $d.numb_path = $s.numb_path as _;
        $d.pkey = $s.pkey as _;
        $d.sl = $s.sl as _;
        $d.mtu_selector = $s.mtu_selector as _;
        $d.mtu = $s.mtu as _;
        $d.rate_selector = $s.rate_selector as _;
        $d.rate = $s.rate as _;
        $d.packet_life_time = $s.packet_life_time as _;
        $d.preference = $s.preference as _;
        $d.packet_life_time_selector = $s.packet_life_time_selector as _;
    };
}

/// `ibv_copy_path_rec_from_kern`.
///
/// # Safety
/// Both pointers are valid (`dst` for a write).
pub unsafe extern "C" fn ibv_copy_path_rec_from_kern(
    dst: *mut ffi::ibv_sa_path_rec,
    src: *const ffi::ib_user_path_rec,
) {
    boundary(Nothing, move || {
        // SAFETY: the caller's valid structs.
        let (d, s) = unsafe { (&mut *dst, &*src) };
        d.dgid = ffi::ibv_gid { raw: s.dgid };
        d.sgid = ffi::ibv_gid { raw: s.sgid };
        copy_path_rec!(d, s);
    })
}

/// `ibv_copy_path_rec_to_kern`.
///
/// # Safety
/// Both pointers are valid (`dst` for a write).
pub unsafe extern "C" fn ibv_copy_path_rec_to_kern(
    dst: *mut ffi::ib_user_path_rec,
    src: *const ffi::ibv_sa_path_rec,
) {
    boundary(Nothing, move || {
        // SAFETY: the caller's valid structs; every bit pattern of a GID's bytes is valid.
        let (d, s) = unsafe { (&mut *dst, &*src) };
        // SAFETY: as above.
        unsafe {
            d.dgid = s.dgid.raw;
            d.sgid = s.sgid.raw;
        }
        copy_path_rec!(d, s);
    })
}
