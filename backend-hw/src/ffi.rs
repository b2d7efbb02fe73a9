//! The Rust half of the C shim (`shim/shim.h`): `#[repr(C)]` mirrors of its flat structs
//! and its functions. Every function returns 0 or a positive errno. Layouts are checked
//! against the C compiler's by [`layout_table`] in a unit test. The mirrors of verbs-api's
//! structs are declared from verbs-api's own field lists (`verbs_api::port_attr_c_struct!`
//! and friends), so the two cannot drift apart.

#![allow(missing_docs, non_camel_case_types)]

use std::os::raw::{c_char, c_int, c_long, c_uint, c_void};

use verbs_api::Sge;

/// Opaque libibverbs objects: only ever behind pointers.
macro_rules! opaque {
    ($($name:ident),* $(,)?) => {$(
        #[repr(C)]
        #[derive(Debug)]
        pub struct $name {
            _private: [u8; 0],
            _not_send_sync: std::marker::PhantomData<*mut u8>,
        }
    )*};
}

opaque!(
    ibv_context,
    ibv_pd,
    ibv_mr,
    ibv_mw,
    ibv_comp_channel,
    ibv_cq,
    ibv_srq,
    ibv_qp,
    ibv_ah,
    ibv_flow,
    ibv_wq,
    ibv_rwq_ind_table
);

/// A striding WQ's ring (`struct mlx5dv_rwq`'s `buf`, `dbrec`, `wqe_cnt`, `stride`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct shim_wq_ring {
    pub buf: *mut c_void,
    pub dbrec: *mut u32,
    pub wqe_cnt: u32,
    pub stride: u32,
}

impl Default for shim_wq_ring {
    fn default() -> Self {
        Self {
            buf: std::ptr::null_mut(),
            dbrec: std::ptr::null_mut(),
            wqe_cnt: 0,
            stride: 0,
        }
    }
}

/// `struct mlx5dv_striding_rq_init_attr`'s fields.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct shim_striding {
    pub log_stride_bytes: u32,
    pub log_num_strides: u32,
    pub two_byte_shift: u32,
}

pub const NAME_LEN: usize = 64;
/// `IBV_SYSFS_PATH_MAX`.
pub const PATH_LEN: usize = 256;

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct shim_device_info {
    pub name: [c_char; NAME_LEN],
    pub guid: u64,
    pub node_type: i32,
    pub transport_type: i32,
    pub dev_path: [c_char; PATH_LEN],
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct shim_context_info {
    pub num_comp_vectors: i32,
    pub async_fd: i32,
}

verbs_api::device_attr_c_struct! {
    #[derive(Debug, Clone, Copy)]
    pub struct shim_device_attr {
        /// 1 when ibv_query_device_ex gave the extended fields.
        pub ex_supported: u32,
    }
}

verbs_api::port_attr_c_struct! {
    #[derive(Debug, Clone, Copy, Default)]
    pub struct shim_port_attr {
        pub pad: [u8; 2],
    }
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct shim_ah_attr {
    pub dgid: [u8; 16],
    pub flow_label: u32,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub is_global: u8,
    pub dlid: u16,
    pub sl: u8,
    pub src_path_bits: u8,
    pub static_rate: u8,
    pub port_num: u8,
    pub pad: [u8; 2],
}

verbs_api::qp_cap_c_struct! {
    #[derive(Debug, Clone, Copy, Default)]
    pub struct shim_qp_cap {}
}

verbs_api::qp_attr_c_struct! {
    #[derive(Debug, Clone, Copy, Default)]
    pub struct shim_qp_attr<cap = shim_qp_cap, ah = shim_ah_attr> {}
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct shim_qp_init_attr {
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub cap: shim_qp_cap,
    pub qp_type: u32,
    pub sq_sig_all: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct shim_srq_attr {
    pub max_wr: u32,
    pub max_sge: u32,
    pub srq_limit: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct shim_send_wr {
    pub wr_id: u64,
    pub sg_list: *const Sge,
    pub num_sge: u32,
    pub opcode: u32,
    pub send_flags: u32,
    pub imm_data: u32,
    pub remote_addr: u64,
    pub compare_add: u64,
    pub swap: u64,
    pub rkey: u32,
    pub remote_qpn: u32,
    pub remote_qkey: u32,
    pub invalidate_rkey: u32,
    pub ah: *mut ibv_ah,
    pub mw: *mut ibv_mw,
    pub mr: *mut ibv_mr,
    pub bind_addr: u64,
    pub bind_length: u64,
    pub bind_access: u32,
    pub pad2: u32,
}

impl Default for shim_send_wr {
    fn default() -> Self {
        shim_send_wr {
            wr_id: 0,
            sg_list: std::ptr::null(),
            num_sge: 0,
            opcode: 0,
            send_flags: 0,
            imm_data: 0,
            remote_addr: 0,
            compare_add: 0,
            swap: 0,
            rkey: 0,
            remote_qpn: 0,
            remote_qkey: 0,
            invalidate_rkey: 0,
            ah: std::ptr::null_mut(),
            mw: std::ptr::null_mut(),
            mr: std::ptr::null_mut(),
            bind_addr: 0,
            bind_length: 0,
            bind_access: 0,
            pad2: 0,
        }
    }
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct shim_recv_wr {
    pub wr_id: u64,
    pub sg_list: *const Sge,
    pub num_sge: u32,
    pub pad: u32,
}

impl Default for shim_recv_wr {
    fn default() -> Self {
        shim_recv_wr {
            wr_id: 0,
            sg_list: std::ptr::null(),
            num_sge: 0,
            pad: 0,
        }
    }
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct shim_wc {
    pub wr_id: u64,
    pub status: u32,
    pub opcode: u32,
    pub vendor_err: u32,
    pub byte_len: u32,
    pub imm_data: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub wc_flags: u32,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
    pub pad: [u8; 2],
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct shim_flow_spec {
    pub type_: u32,
    pub dst_mac: [u8; 6],
    pub src_mac: [u8; 6],
    pub ether_type: u16,
    pub vlan_tag: u16,
    pub mask_dst_mac: [u8; 6],
    pub mask_src_mac: [u8; 6],
    pub mask_ether_type: u16,
    pub mask_vlan_tag: u16,
    pub src_ip: u32,
    pub dst_ip: u32,
    pub mask_src_ip: u32,
    pub mask_dst_ip: u32,
    pub dst_port: u16,
    pub src_port: u16,
    pub mask_dst_port: u16,
    pub mask_src_port: u16,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct shim_flow_attr {
    pub type_: u32,
    pub flags: u32,
    pub priority: u16,
    pub port: u8,
    pub pad: u8,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct shim_async_event {
    pub event_type: u32,
    pub element_kind: u32,
    pub element: u32,
}

pub const ELEMENT_CQ: u32 = 1;
pub const ELEMENT_QP: u32 = 2;
pub const ELEMENT_SRQ: u32 = 3;
pub const ELEMENT_PORT: u32 = 4;

extern "C" {
    #[cfg(test)]
    pub fn shim_layout(table: *mut *const u32) -> usize;
    pub fn shim_page_size() -> c_long;

    pub fn shim_get_device_list(out: *mut shim_device_info, cap: c_int, num: *mut c_int) -> c_int;
    pub fn shim_open_device(
        name: *const c_char,
        out: *mut *mut ibv_context,
        info: *mut shim_context_info,
    ) -> c_int;
    pub fn shim_close_device(ctx: *mut ibv_context) -> c_int;
    pub fn shim_query_device(ctx: *mut ibv_context, out: *mut shim_device_attr) -> c_int;
    pub fn shim_query_port(ctx: *mut ibv_context, port: u8, out: *mut shim_port_attr) -> c_int;
    pub fn shim_query_gid(ctx: *mut ibv_context, port: u8, index: c_int, gid: *mut u8) -> c_int;
    pub fn shim_query_gid_type(
        ctx: *mut ibv_context,
        port: u8,
        index: u32,
        gid_type: *mut u32,
    ) -> c_int;
    pub fn shim_get_async_event(
        ctx: *mut ibv_context,
        out: *mut shim_async_event,
        got: *mut c_int,
    ) -> c_int;

    pub fn shim_alloc_pd(ctx: *mut ibv_context, out: *mut *mut ibv_pd, handle: *mut u32) -> c_int;
    pub fn shim_dealloc_pd(pd: *mut ibv_pd) -> c_int;
    pub fn shim_reg_mr(
        pd: *mut ibv_pd,
        addr: *mut c_void,
        len: usize,
        access: u32,
        out: *mut *mut ibv_mr,
        lkey: *mut u32,
        rkey: *mut u32,
    ) -> c_int;
    pub fn shim_dereg_mr(mr: *mut ibv_mr) -> c_int;
    pub fn shim_alloc_mw(
        pd: *mut ibv_pd,
        mw_type: u32,
        out: *mut *mut ibv_mw,
        handle: *mut u32,
        rkey: *mut u32,
    ) -> c_int;
    pub fn shim_dealloc_mw(mw: *mut ibv_mw) -> c_int;
    pub fn shim_mw_rkey(mw: *const ibv_mw) -> u32;
    pub fn shim_mw_set_rkey(mw: *mut ibv_mw, rkey: u32);
    #[allow(clippy::too_many_arguments)] // one per ibv_mw_bind field
    pub fn shim_bind_mw(
        qp: *mut ibv_qp,
        mw: *mut ibv_mw,
        mr: *mut ibv_mr,
        wr_id: u64,
        send_flags: u32,
        addr: u64,
        length: u64,
        access: u32,
        rkey: *mut u32,
    ) -> c_int;

    pub fn shim_create_comp_channel(
        ctx: *mut ibv_context,
        out: *mut *mut ibv_comp_channel,
    ) -> c_int;
    pub fn shim_destroy_comp_channel(ch: *mut ibv_comp_channel) -> c_int;
    pub fn shim_get_cq_event(
        ch: *mut ibv_comp_channel,
        timeout_ms: c_int,
        cq_context: *mut *mut c_void,
        got: *mut c_int,
    ) -> c_int;

    #[allow(clippy::too_many_arguments)]
    pub fn shim_create_cq(
        ctx: *mut ibv_context,
        cqe: c_int,
        cq_context: *mut c_void,
        ch: *mut ibv_comp_channel,
        comp_vector: c_int,
        out: *mut *mut ibv_cq,
        handle: *mut u32,
        actual_cqe: *mut u32,
    ) -> c_int;
    pub fn shim_destroy_cq(cq: *mut ibv_cq) -> c_int;
    pub fn shim_resize_cq(cq: *mut ibv_cq, cqe: c_int, actual_cqe: *mut u32) -> c_int;
    pub fn shim_req_notify_cq(cq: *mut ibv_cq, solicited_only: c_int) -> c_int;
    pub fn shim_ack_cq_events(cq: *mut ibv_cq, n: c_uint);
    pub fn shim_poll_cq(cq: *mut ibv_cq, n: c_int, out: *mut shim_wc, polled: *mut c_int) -> c_int;

    pub fn shim_create_srq(
        pd: *mut ibv_pd,
        attr: *mut shim_srq_attr,
        out: *mut *mut ibv_srq,
        handle: *mut u32,
    ) -> c_int;
    pub fn shim_destroy_srq(srq: *mut ibv_srq) -> c_int;
    pub fn shim_modify_srq(srq: *mut ibv_srq, attr: *const shim_srq_attr, mask: c_int) -> c_int;
    pub fn shim_query_srq(srq: *mut ibv_srq, out: *mut shim_srq_attr) -> c_int;
    pub fn shim_post_srq_recv(
        srq: *mut ibv_srq,
        wrs: *const shim_recv_wr,
        n: usize,
        bad: *mut usize,
    ) -> c_int;

    pub fn shim_create_qp(
        pd: *mut ibv_pd,
        attr: *mut shim_qp_init_attr,
        out: *mut *mut ibv_qp,
        qp_num: *mut u32,
    ) -> c_int;
    pub fn shim_destroy_qp(qp: *mut ibv_qp) -> c_int;
    pub fn shim_modify_qp(qp: *mut ibv_qp, attr: *const shim_qp_attr, mask: c_int) -> c_int;
    pub fn shim_query_qp(
        qp: *mut ibv_qp,
        mask: c_int,
        out: *mut shim_qp_attr,
        cap: *mut shim_qp_cap,
    ) -> c_int;
    pub fn shim_post_send(
        qp: *mut ibv_qp,
        wrs: *const shim_send_wr,
        n: usize,
        bad: *mut usize,
    ) -> c_int;
    pub fn shim_post_recv(
        qp: *mut ibv_qp,
        wrs: *const shim_recv_wr,
        n: usize,
        bad: *mut usize,
    ) -> c_int;
    pub fn shim_attach_mcast(qp: *mut ibv_qp, gid: *const u8, lid: u16) -> c_int;
    pub fn shim_detach_mcast(qp: *mut ibv_qp, gid: *const u8, lid: u16) -> c_int;

    pub fn shim_create_ah(
        pd: *mut ibv_pd,
        attr: *const shim_ah_attr,
        out: *mut *mut ibv_ah,
    ) -> c_int;
    pub fn shim_destroy_ah(ah: *mut ibv_ah) -> c_int;

    pub fn shim_create_flow(
        qp: *mut ibv_qp,
        attr: *const shim_flow_attr,
        specs: *const shim_flow_spec,
        n: usize,
        out: *mut *mut ibv_flow,
    ) -> c_int;
    pub fn shim_destroy_flow(flow: *mut ibv_flow) -> c_int;

    #[allow(clippy::too_many_arguments)]
    pub fn shim_create_wq(
        ctx: *mut ibv_context,
        pd: *mut ibv_pd,
        cq: *mut ibv_cq,
        max_wr: u32,
        max_sge: u32,
        striding: *const shim_striding,
        out: *mut *mut ibv_wq,
        wq_num: *mut u32,
        ring: *mut shim_wq_ring,
    ) -> c_int;
    pub fn shim_destroy_wq(wq: *mut ibv_wq) -> c_int;
    pub fn shim_modify_wq(wq: *mut ibv_wq, state: u32, cur: i32) -> c_int;
    pub fn shim_wq_state(wq: *const ibv_wq) -> u32;
    pub fn shim_post_wq_recv(
        wq: *mut ibv_wq,
        wrs: *const shim_recv_wr,
        n: usize,
        bad: *mut usize,
    ) -> c_int;
    pub fn shim_mprq_post(ring: *const shim_wq_ring, head: u32, addr: u64, len: u32, lkey: u32);
    pub fn shim_create_rwq_ind_table(
        ctx: *mut ibv_context,
        wqs: *mut *mut ibv_wq,
        log_size: u32,
        out: *mut *mut ibv_rwq_ind_table,
        num: *mut u32,
    ) -> c_int;
    pub fn shim_destroy_rwq_ind_table(table: *mut ibv_rwq_ind_table) -> c_int;
    #[allow(clippy::too_many_arguments)]
    pub fn shim_create_rss_qp(
        ctx: *mut ibv_context,
        pd: *mut ibv_pd,
        table: *mut ibv_rwq_ind_table,
        function: u8,
        key: *const u8,
        key_len: u8,
        fields: u64,
        out: *mut *mut ibv_qp,
        qp_num: *mut u32,
    ) -> c_int;
    #[cfg(test)]
    pub fn shim_flow_bytes(
        attr: *const shim_flow_attr,
        specs: *const shim_flow_spec,
        n: usize,
        out: *mut u8,
        cap: usize,
        len: *mut usize,
    ) -> c_int;
}

/// The shim's table of sizes and offsets, as the C compiler laid the structs out.
#[cfg(test)]
pub fn layout_table() -> &'static [u32] {
    let mut table: *const u32 = std::ptr::null();
    // SAFETY: shim_layout stores a pointer to a static array and returns its length.
    let n = unsafe { shim_layout(&mut table) };
    // SAFETY: the array is static, `n` elements long, and never written.
    unsafe { std::slice::from_raw_parts(table, n) }
}

/// The same table computed from the Rust mirrors, with a label per entry, in the order
/// shim.c lists them.
#[cfg(test)]
pub fn rust_layout() -> Vec<(&'static str, usize)> {
    use std::mem::{offset_of, size_of};
    macro_rules! entries {
        ($($label:literal => $value:expr),* $(,)?) => { vec![$(($label, $value)),*] };
    }
    entries![
        "sizeof ibv_sge" => size_of::<Sge>(),
        "ibv_sge.addr" => offset_of!(Sge, addr),
        "ibv_sge.length" => offset_of!(Sge, length),
        "ibv_sge.lkey" => offset_of!(Sge, lkey),
        "sizeof shim_device_info" => size_of::<shim_device_info>(),
        "shim_device_info.guid" => offset_of!(shim_device_info, guid),
        "shim_device_info.node_type" => offset_of!(shim_device_info, node_type),
        "shim_device_info.transport_type" => offset_of!(shim_device_info, transport_type),
        "shim_device_info.dev_path" => offset_of!(shim_device_info, dev_path),
        "sizeof shim_context_info" => size_of::<shim_context_info>(),
        "shim_context_info.async_fd" => offset_of!(shim_context_info, async_fd),
        "sizeof shim_device_attr" => size_of::<shim_device_attr>(),
        "shim_device_attr.node_guid" => offset_of!(shim_device_attr, node_guid),
        "shim_device_attr.device_cap_flags" => offset_of!(shim_device_attr, device_cap_flags),
        "shim_device_attr.vendor_id" => offset_of!(shim_device_attr, vendor_id),
        "shim_device_attr.atomic_cap" => offset_of!(shim_device_attr, atomic_cap),
        "shim_device_attr.raw_packet_caps" => offset_of!(shim_device_attr, raw_packet_caps),
        "shim_device_attr.max_pkeys" => offset_of!(shim_device_attr, max_pkeys),
        "shim_device_attr.phys_port_cnt" => offset_of!(shim_device_attr, phys_port_cnt),
        "shim_device_attr.ex_supported" => offset_of!(shim_device_attr, ex_supported),
        "sizeof shim_port_attr" => size_of::<shim_port_attr>(),
        "shim_port_attr.pkey_tbl_len" => offset_of!(shim_port_attr, pkey_tbl_len),
        "shim_port_attr.lmc" => offset_of!(shim_port_attr, lmc),
        "shim_port_attr.link_layer" => offset_of!(shim_port_attr, link_layer),
        "sizeof shim_ah_attr" => size_of::<shim_ah_attr>(),
        "shim_ah_attr.flow_label" => offset_of!(shim_ah_attr, flow_label),
        "shim_ah_attr.is_global" => offset_of!(shim_ah_attr, is_global),
        "shim_ah_attr.dlid" => offset_of!(shim_ah_attr, dlid),
        "shim_ah_attr.port_num" => offset_of!(shim_ah_attr, port_num),
        "sizeof shim_qp_cap" => size_of::<shim_qp_cap>(),
        "shim_qp_cap.max_inline_data" => offset_of!(shim_qp_cap, max_inline_data),
        "sizeof shim_qp_attr" => size_of::<shim_qp_attr>(),
        "shim_qp_attr.qp_access_flags" => offset_of!(shim_qp_attr, qp_access_flags),
        "shim_qp_attr.cap" => offset_of!(shim_qp_attr, cap),
        "shim_qp_attr.ah_attr" => offset_of!(shim_qp_attr, ah_attr),
        "shim_qp_attr.alt_ah_attr" => offset_of!(shim_qp_attr, alt_ah_attr),
        "shim_qp_attr.pkey_index" => offset_of!(shim_qp_attr, pkey_index),
        "shim_qp_attr.en_sqd_async_notify" => offset_of!(shim_qp_attr, en_sqd_async_notify),
        "shim_qp_attr.alt_timeout" => offset_of!(shim_qp_attr, alt_timeout),
        "shim_qp_attr.rate_limit" => offset_of!(shim_qp_attr, rate_limit),
        "sizeof shim_qp_init_attr" => size_of::<shim_qp_init_attr>(),
        "shim_qp_init_attr.srq" => offset_of!(shim_qp_init_attr, srq),
        "shim_qp_init_attr.cap" => offset_of!(shim_qp_init_attr, cap),
        "shim_qp_init_attr.qp_type" => offset_of!(shim_qp_init_attr, qp_type),
        "shim_qp_init_attr.sq_sig_all" => offset_of!(shim_qp_init_attr, sq_sig_all),
        "sizeof shim_srq_attr" => size_of::<shim_srq_attr>(),
        "shim_srq_attr.srq_limit" => offset_of!(shim_srq_attr, srq_limit),
        "sizeof shim_send_wr" => size_of::<shim_send_wr>(),
        "shim_send_wr.sg_list" => offset_of!(shim_send_wr, sg_list),
        "shim_send_wr.num_sge" => offset_of!(shim_send_wr, num_sge),
        "shim_send_wr.imm_data" => offset_of!(shim_send_wr, imm_data),
        "shim_send_wr.remote_addr" => offset_of!(shim_send_wr, remote_addr),
        "shim_send_wr.swap" => offset_of!(shim_send_wr, swap),
        "shim_send_wr.rkey" => offset_of!(shim_send_wr, rkey),
        "shim_send_wr.remote_qkey" => offset_of!(shim_send_wr, remote_qkey),
        "shim_send_wr.invalidate_rkey" => offset_of!(shim_send_wr, invalidate_rkey),
        "shim_send_wr.ah" => offset_of!(shim_send_wr, ah),
        "shim_send_wr.mw" => offset_of!(shim_send_wr, mw),
        "shim_send_wr.mr" => offset_of!(shim_send_wr, mr),
        "shim_send_wr.bind_length" => offset_of!(shim_send_wr, bind_length),
        "shim_send_wr.bind_access" => offset_of!(shim_send_wr, bind_access),
        "sizeof shim_recv_wr" => size_of::<shim_recv_wr>(),
        "shim_recv_wr.sg_list" => offset_of!(shim_recv_wr, sg_list),
        "shim_recv_wr.num_sge" => offset_of!(shim_recv_wr, num_sge),
        "sizeof shim_wc" => size_of::<shim_wc>(),
        "shim_wc.status" => offset_of!(shim_wc, status),
        "shim_wc.imm_data" => offset_of!(shim_wc, imm_data),
        "shim_wc.wc_flags" => offset_of!(shim_wc, wc_flags),
        "shim_wc.pkey_index" => offset_of!(shim_wc, pkey_index),
        "shim_wc.sl" => offset_of!(shim_wc, sl),
        "shim_wc.dlid_path_bits" => offset_of!(shim_wc, dlid_path_bits),
        "sizeof shim_flow_spec" => size_of::<shim_flow_spec>(),
        "shim_flow_spec.dst_mac" => offset_of!(shim_flow_spec, dst_mac),
        "shim_flow_spec.ether_type" => offset_of!(shim_flow_spec, ether_type),
        "shim_flow_spec.mask_dst_mac" => offset_of!(shim_flow_spec, mask_dst_mac),
        "shim_flow_spec.mask_vlan_tag" => offset_of!(shim_flow_spec, mask_vlan_tag),
        "shim_flow_spec.src_ip" => offset_of!(shim_flow_spec, src_ip),
        "shim_flow_spec.mask_dst_ip" => offset_of!(shim_flow_spec, mask_dst_ip),
        "shim_flow_spec.dst_port" => offset_of!(shim_flow_spec, dst_port),
        "shim_flow_spec.mask_src_port" => offset_of!(shim_flow_spec, mask_src_port),
        "sizeof shim_flow_attr" => size_of::<shim_flow_attr>(),
        "shim_flow_attr.flags" => offset_of!(shim_flow_attr, flags),
        "shim_flow_attr.priority" => offset_of!(shim_flow_attr, priority),
        "shim_flow_attr.port" => offset_of!(shim_flow_attr, port),
        "sizeof shim_async_event" => size_of::<shim_async_event>(),
        "shim_async_event.element" => offset_of!(shim_async_event, element),
        "sizeof shim_wq_ring" => size_of::<shim_wq_ring>(),
        "shim_wq_ring.dbrec" => offset_of!(shim_wq_ring, dbrec),
        "shim_wq_ring.wqe_cnt" => offset_of!(shim_wq_ring, wqe_cnt),
        "shim_wq_ring.stride" => offset_of!(shim_wq_ring, stride),
        "sizeof shim_striding" => size_of::<shim_striding>(),
        "shim_striding.two_byte_shift" => offset_of!(shim_striding, two_byte_shift),
    ]
}
