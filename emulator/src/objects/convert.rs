//! Between rdma-core's C structs (bindgen's [`crate::base::ffi`]) and verbs-api's values, both
//! ways, and from verbs-api errors to the errno a libibverbs call reports.

use std::ffi::c_int;

use verbs_api::{
    AhAttr, Completion, DeviceAttr, Gid, GlobalRoute, Mtu, PathMigState, PortAttr, QpAttr,
    QpAttrMask, QpCap, QpState,
};

use crate::base::c_str::copy_c_string;
use crate::base::ffi;

/// `struct ibv_device_attr` of a device.
pub fn device_attr(a: &DeviceAttr) -> ffi::ibv_device_attr {
    let mut out = ffi::ibv_device_attr {
        node_guid: a.node_guid.to_be(),
        sys_image_guid: a.sys_image_guid.to_be(),
        max_mr_size: a.max_mr_size,
        page_size_cap: a.page_size_cap,
        vendor_id: a.vendor_id,
        vendor_part_id: a.vendor_part_id,
        hw_ver: a.hw_ver,
        max_qp: sat(a.max_qp),
        max_qp_wr: sat(a.max_qp_wr),
        // The C field is 32 bits wide; the high flags are in device_cap_flags_ex.
        device_cap_flags: a.device_cap_flags.bits() as u32,
        max_sge: sat(a.max_sge),
        max_sge_rd: sat(a.max_sge_rd),
        max_cq: sat(a.max_cq),
        max_cqe: sat(a.max_cqe),
        max_mr: sat(a.max_mr),
        max_pd: sat(a.max_pd),
        max_qp_rd_atom: sat(a.max_qp_rd_atom),
        max_res_rd_atom: sat(a.max_res_rd_atom),
        max_qp_init_rd_atom: sat(a.max_qp_init_rd_atom),
        atomic_cap: a.atomic_cap.as_raw(),
        max_mw: sat(a.max_mw),
        max_raw_ipv6_qp: sat(a.max_raw_ipv6_qp),
        max_raw_ethy_qp: sat(a.max_raw_ethy_qp),
        max_mcast_grp: sat(a.max_mcast_grp),
        max_mcast_qp_attach: sat(a.max_mcast_qp_attach),
        max_total_mcast_qp_attach: sat(a.max_total_mcast_qp_attach),
        max_ah: sat(a.max_ah),
        max_srq: sat(a.max_srq),
        max_srq_wr: sat(a.max_srq_wr),
        max_srq_sge: sat(a.max_srq_sge),
        max_pkeys: a.max_pkeys,
        local_ca_ack_delay: a.local_ca_ack_delay,
        phys_port_cnt: a.phys_port_cnt,
        ..ffi::ibv_device_attr::default()
    };
    copy_c_string(&mut out.fw_ver, &a.fw_ver);
    out
}

/// `struct ibv_device_attr_ex` of a device (the extended fields the simulator models).
pub fn device_attr_ex(a: &DeviceAttr) -> ffi::ibv_device_attr_ex {
    ffi::ibv_device_attr_ex {
        orig_attr: device_attr(a),
        device_cap_flags_ex: a.device_cap_flags.bits(),
        raw_packet_caps: a.raw_packet_caps.bits(),
        rss_caps: ffi::ibv_rss_caps {
            supported_qpts: a.rss_caps.supported_qpts,
            max_rwq_indirection_tables: a.rss_caps.max_rwq_indirection_tables,
            max_rwq_indirection_table_size: a.rss_caps.max_rwq_indirection_table_size,
            rx_hash_fields_mask: a.rss_caps.rx_hash_fields_mask.bits(),
            rx_hash_function: a.rss_caps.rx_hash_function,
        },
        max_wq_type_rq: a.max_wq_type_rq,
        // The kernel reports the port count here too (`rdma_end_port`), for devices with
        // more than 255 ports as for those with fewer.
        phys_port_cnt_ex: u32::from(a.phys_port_cnt),
        ..ffi::ibv_device_attr_ex::default()
    }
}

fn sat(v: u32) -> c_int {
    c_int::try_from(v).unwrap_or(c_int::MAX)
}

/// `struct ibv_port_attr` of a port.
pub fn port_attr(p: &PortAttr) -> ffi::ibv_port_attr {
    ffi::ibv_port_attr {
        state: p.state.as_raw(),
        max_mtu: p.max_mtu.as_raw(),
        active_mtu: p.active_mtu.as_raw(),
        gid_tbl_len: sat(p.gid_tbl_len),
        port_cap_flags: p.port_cap_flags,
        max_msg_sz: p.max_msg_sz,
        bad_pkey_cntr: p.bad_pkey_cntr,
        qkey_viol_cntr: p.qkey_viol_cntr,
        pkey_tbl_len: p.pkey_tbl_len,
        lid: p.lid,
        sm_lid: p.sm_lid,
        lmc: p.lmc,
        max_vl_num: p.max_vl_num,
        sm_sl: p.sm_sl,
        subnet_timeout: p.subnet_timeout,
        active_width: p.active_width,
        active_speed: p.active_speed,
        phys_state: p.phys_state,
        link_layer: p.link_layer.as_raw(),
        ..ffi::ibv_port_attr::default()
    }
}

/// `union ibv_gid` of a GID.
pub fn gid_to_c(g: Gid) -> ffi::ibv_gid {
    ffi::ibv_gid { raw: g.0 }
}

/// A GID from `union ibv_gid`.
pub fn gid_from_c(g: &ffi::ibv_gid) -> Gid {
    // SAFETY: every bit pattern of the union's 16 bytes is a valid `raw` array.
    Gid(unsafe { g.raw })
}

/// An address from `struct ibv_ah_attr`.
pub fn ah_from_c(a: &ffi::ibv_ah_attr) -> AhAttr {
    verbs_api::ah_attr_fields!(from a, grh: GlobalRoute {
        dgid: gid_from_c(&a.grh.dgid),
        flow_label: a.grh.flow_label,
        sgid_index: a.grh.sgid_index,
        hop_limit: a.grh.hop_limit,
        traffic_class: a.grh.traffic_class,
    })
}

/// `struct ibv_ah_attr` of an address.
pub fn ah_to_c(a: &AhAttr) -> ffi::ibv_ah_attr {
    ffi::ibv_ah_attr {
        grh: ffi::ibv_global_route {
            dgid: gid_to_c(a.grh.dgid),
            flow_label: a.grh.flow_label,
            sgid_index: a.grh.sgid_index,
            hop_limit: a.grh.hop_limit,
            traffic_class: a.grh.traffic_class,
        },
        dlid: a.dlid,
        sl: a.sl,
        src_path_bits: a.src_path_bits,
        static_rate: a.static_rate,
        is_global: u8::from(a.is_global),
        port_num: a.port_num,
    }
}

/// The queue sizes of `struct ibv_qp_cap`.
pub fn cap_from_c(c: &ffi::ibv_qp_cap) -> QpCap {
    verbs_api::qp_cap_fields!(from c)
}

/// `struct ibv_qp_cap` of queue sizes.
pub fn cap_to_c(c: &QpCap) -> ffi::ibv_qp_cap {
    verbs_api::qp_cap_fields!(to ffi::ibv_qp_cap, c)
}

/// Reads the attributes `mask` names from `struct ibv_qp_attr`.
///
/// # Errors
/// `EINVAL` for a state, MTU or migration state out of range, or mask bits the
/// emulator does not know.
pub fn qp_attr_from_c(
    a: &ffi::ibv_qp_attr,
    raw_mask: c_int,
) -> Result<(QpAttr, QpAttrMask), c_int> {
    let mask = u32::try_from(raw_mask)
        .ok()
        .and_then(QpAttrMask::from_bits)
        .ok_or(libc::EINVAL)?;
    let state = |raw: u32| QpState::from_raw(raw).ok_or(libc::EINVAL);
    let d = QpAttr::default();
    let out = verbs_api::qp_attr_fields!(
        from a, cap: cap_from_c, ah: ah_from_c,
        qp_state: if mask.contains(QpAttrMask::STATE) { state(a.qp_state)? } else { d.qp_state },
        cur_qp_state: if mask.contains(QpAttrMask::CUR_STATE) {
            state(a.cur_qp_state)?
        } else {
            d.cur_qp_state
        },
        path_mtu: if mask.contains(QpAttrMask::PATH_MTU) {
            Mtu::from_raw(a.path_mtu).ok_or(libc::EINVAL)?
        } else {
            d.path_mtu
        },
        path_mig_state: if mask.contains(QpAttrMask::PATH_MIG_STATE) {
            PathMigState::from_raw(a.path_mig_state).ok_or(libc::EINVAL)?
        } else {
            d.path_mig_state
        },
    );
    Ok((out, mask))
}

/// `struct ibv_qp_attr` of a QP's attributes.
pub fn qp_attr_to_c(a: &QpAttr) -> ffi::ibv_qp_attr {
    verbs_api::qp_attr_fields!(to ffi::ibv_qp_attr, a, cap: cap_to_c, ah: ah_to_c)
}

/// `struct ibv_wc` of a completion (immediate data back in network byte order).
pub fn wc_to_c(c: &Completion) -> ffi::ibv_wc {
    ffi::ibv_wc {
        wr_id: c.wr_id,
        status: c.status.as_raw(),
        opcode: c.opcode.as_raw(),
        vendor_err: c.vendor_err,
        byte_len: c.byte_len,
        // One union: the immediate in network order, or the invalidated rkey (in host
        // order) of a SEND_WITH_INV's receive.
        __bindgen_anon_1: ffi::ibv_wc__bindgen_ty_1 {
            imm_data: if c.wc_flags.contains(verbs_api::WcFlags::WITH_IMM) {
                c.imm_data.to_be()
            } else {
                c.imm_data
            },
        },
        qp_num: c.qp_num,
        src_qp: c.src_qp,
        wc_flags: c.wc_flags.bits(),
        pkey_index: c.pkey_index,
        slid: c.slid,
        sl: c.sl,
        dlid_path_bits: c.dlid_path_bits,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use verbs_api::{WcFlags, WcOpcode, WcStatus};

    #[test]
    fn qp_attr_round_trips_through_c() {
        let a = QpAttr {
            qp_state: QpState::Rtr,
            path_mtu: Mtu::Mtu4096,
            dest_qp_num: 0x1234,
            rq_psn: 77,
            ah_attr: AhAttr::roce(Gid([7; 16]), 1, 1),
            min_rnr_timer: 12,
            max_dest_rd_atomic: 1,
            ..QpAttr::default()
        };
        let mask = QpAttrMask::STATE
            | QpAttrMask::PATH_MTU
            | QpAttrMask::DEST_QPN
            | QpAttrMask::RQ_PSN
            | QpAttrMask::AV
            | QpAttrMask::MIN_RNR_TIMER
            | QpAttrMask::MAX_DEST_RD_ATOMIC;
        let c = qp_attr_to_c(&a);
        let (back, m) = qp_attr_from_c(&c, mask.bits() as c_int).unwrap();
        assert_eq!(m, mask);
        assert_eq!(back, a);
    }

    #[test]
    fn the_extended_port_count_is_the_port_count() {
        let a = DeviceAttr {
            phys_port_cnt: 1,
            ..DeviceAttr::default()
        };
        let c = device_attr_ex(&a);
        assert_eq!((c.orig_attr.phys_port_cnt, c.phys_port_cnt_ex), (1, 1));
    }

    #[test]
    fn rss_caps_and_max_wq_type_rq_reach_the_extended_attributes() {
        let a = DeviceAttr {
            rss_caps: verbs_api::RssCaps {
                supported_qpts: 1 << 8,
                max_rwq_indirection_tables: 524_288,
                max_rwq_indirection_table_size: 2048,
                rx_hash_fields_mask: verbs_api::RxHashFields::from_bits_retain(0x8000_00ff),
                rx_hash_function: 1,
            },
            max_wq_type_rq: 1 << 23,
            ..DeviceAttr::default()
        };
        let c = device_attr_ex(&a);
        let r = c.rss_caps;
        assert_eq!(
            (
                r.supported_qpts,
                r.max_rwq_indirection_tables,
                r.max_rwq_indirection_table_size,
                r.rx_hash_fields_mask,
                r.rx_hash_function,
                c.max_wq_type_rq
            ),
            (1 << 8, 524_288, 2048, 0x8000_00ff, 1, 1 << 23)
        );
    }

    #[test]
    fn bad_qp_attr_values_are_einval() {
        let mut c = qp_attr_to_c(&QpAttr::default());
        c.qp_state = 9;
        assert_eq!(
            qp_attr_from_c(&c, QpAttrMask::STATE.bits() as c_int),
            Err(libc::EINVAL)
        );
        c.qp_state = 0;
        c.path_mtu = 0;
        assert_eq!(
            qp_attr_from_c(&c, QpAttrMask::PATH_MTU.bits() as c_int),
            Err(libc::EINVAL)
        );
        assert_eq!(qp_attr_from_c(&c, 1 << 30), Err(libc::EINVAL));
        assert_eq!(qp_attr_from_c(&c, -1), Err(libc::EINVAL));
    }

    #[test]
    fn completions_keep_network_order_immediates() {
        let wc = wc_to_c(&Completion {
            wr_id: 9,
            status: WcStatus::RemAccessErr,
            opcode: WcOpcode::RecvRdmaWithImm,
            byte_len: 5,
            imm_data: 0x0102_0304,
            wc_flags: WcFlags::WITH_IMM,
            ..Completion::default()
        });
        assert_eq!(wc.wr_id, 9);
        assert_eq!(wc.status, ffi::IBV_WC_REM_ACCESS_ERR);
        assert_eq!(wc.opcode, ffi::IBV_WC_RECV_RDMA_WITH_IMM);
        assert_eq!(wc.wc_flags, ffi::IBV_WC_WITH_IMM);
        // SAFETY: imm_data is the member just written.
        let imm = unsafe { wc.__bindgen_anon_1.imm_data };
        assert_eq!(imm.to_ne_bytes(), [1, 2, 3, 4]);
    }
}
