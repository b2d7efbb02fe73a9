//! Conversions between verbs-api's plain data and the shim's flat structs. The numeric
//! values are libibverbs' on both sides, so enums and flags pass as raw values.

use verbs_api::{
    AhAttr, AtomicCap, Completion, DeviceAttr, DeviceCapFlags, FlowSpec, Gid, GlobalRoute,
    LinkLayer, Mtu, PathMigState, PortAttr, PortState, QpAttr, QpCap, QpState, RawPacketCaps,
    WcFlags, WcOpcode, WcStatus,
};

use crate::ffi;

fn c_string(raw: &[std::os::raw::c_char]) -> String {
    let bytes: Vec<u8> = raw
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c.to_ne_bytes()[0])
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

pub(crate) fn device_attr(r: &ffi::shim_device_attr, num_comp_vectors: u32) -> DeviceAttr {
    DeviceAttr {
        fw_ver: c_string(&r.fw_ver),
        node_guid: r.node_guid,
        sys_image_guid: r.sys_image_guid,
        max_mr_size: r.max_mr_size,
        page_size_cap: r.page_size_cap,
        vendor_id: r.vendor_id,
        vendor_part_id: r.vendor_part_id,
        hw_ver: r.hw_ver,
        max_qp: r.max_qp,
        max_qp_wr: r.max_qp_wr,
        device_cap_flags: DeviceCapFlags::from_bits_retain(r.device_cap_flags),
        max_sge: r.max_sge,
        max_sge_rd: r.max_sge_rd,
        max_cq: r.max_cq,
        max_cqe: r.max_cqe,
        max_mr: r.max_mr,
        max_pd: r.max_pd,
        max_qp_rd_atom: r.max_qp_rd_atom,
        max_res_rd_atom: r.max_res_rd_atom,
        max_qp_init_rd_atom: r.max_qp_init_rd_atom,
        atomic_cap: AtomicCap::from_raw(r.atomic_cap).unwrap_or(AtomicCap::None),
        max_mw: r.max_mw,
        max_raw_ipv6_qp: r.max_raw_ipv6_qp,
        max_raw_ethy_qp: r.max_raw_ethy_qp,
        max_mcast_grp: r.max_mcast_grp,
        max_mcast_qp_attach: r.max_mcast_qp_attach,
        max_total_mcast_qp_attach: r.max_total_mcast_qp_attach,
        max_ah: r.max_ah,
        max_srq: r.max_srq,
        max_srq_wr: r.max_srq_wr,
        max_srq_sge: r.max_srq_sge,
        max_pkeys: r.max_pkeys,
        local_ca_ack_delay: r.local_ca_ack_delay,
        phys_port_cnt: r.phys_port_cnt,
        raw_packet_caps: RawPacketCaps::from_bits_retain(r.raw_packet_caps),
        // The shim reads `struct ibv_device_attr` and the raw packet caps only.
        rss_caps: verbs_api::RssCaps::default(),
        max_wq_type_rq: 0,
        max_inline_data: 0,
        num_comp_vectors,
    }
}

pub(crate) fn port_attr(r: &ffi::shim_port_attr) -> PortAttr {
    PortAttr {
        state: PortState::from_raw(r.state).unwrap_or(PortState::Nop),
        max_mtu: Mtu::from_raw(r.max_mtu).unwrap_or_default(),
        active_mtu: Mtu::from_raw(r.active_mtu).unwrap_or_default(),
        gid_tbl_len: r.gid_tbl_len,
        port_cap_flags: r.port_cap_flags,
        max_msg_sz: r.max_msg_sz,
        bad_pkey_cntr: r.bad_pkey_cntr,
        qkey_viol_cntr: r.qkey_viol_cntr,
        pkey_tbl_len: r.pkey_tbl_len,
        lid: r.lid,
        sm_lid: r.sm_lid,
        lmc: r.lmc,
        max_vl_num: r.max_vl_num,
        sm_sl: r.sm_sl,
        subnet_timeout: r.subnet_timeout,
        active_width: r.active_width,
        active_speed: r.active_speed,
        phys_state: r.phys_state,
        link_layer: LinkLayer::from_raw(r.link_layer).unwrap_or(LinkLayer::Unspecified),
    }
}

pub(crate) fn ah_to_shim(a: &AhAttr) -> ffi::shim_ah_attr {
    ffi::shim_ah_attr {
        dgid: a.grh.dgid.0,
        flow_label: a.grh.flow_label,
        sgid_index: a.grh.sgid_index,
        hop_limit: a.grh.hop_limit,
        traffic_class: a.grh.traffic_class,
        is_global: u8::from(a.is_global),
        dlid: a.dlid,
        sl: a.sl,
        src_path_bits: a.src_path_bits,
        static_rate: a.static_rate,
        port_num: a.port_num,
        pad: [0; 2],
    }
}

pub(crate) fn ah_from_shim(a: &ffi::shim_ah_attr) -> AhAttr {
    verbs_api::ah_attr_fields!(from a, grh: GlobalRoute {
        dgid: Gid(a.dgid),
        flow_label: a.flow_label,
        sgid_index: a.sgid_index,
        hop_limit: a.hop_limit,
        traffic_class: a.traffic_class,
    })
}

pub(crate) fn cap_to_shim(c: &QpCap) -> ffi::shim_qp_cap {
    verbs_api::qp_cap_fields!(to ffi::shim_qp_cap, c)
}

pub(crate) fn cap_from_shim(c: &ffi::shim_qp_cap) -> QpCap {
    verbs_api::qp_cap_fields!(from c)
}

pub(crate) fn qp_attr_to_shim(a: &QpAttr) -> ffi::shim_qp_attr {
    verbs_api::qp_attr_fields!(to ffi::shim_qp_attr, a, cap: cap_to_shim, ah: ah_to_shim)
}

pub(crate) fn qp_attr_from_shim(a: &ffi::shim_qp_attr) -> QpAttr {
    verbs_api::qp_attr_fields!(
        from a, cap: cap_from_shim, ah: ah_from_shim,
        qp_state: QpState::from_raw(a.qp_state).unwrap_or(QpState::Unknown),
        cur_qp_state: QpState::from_raw(a.cur_qp_state).unwrap_or(QpState::Unknown),
        path_mtu: Mtu::from_raw(a.path_mtu).unwrap_or_default(),
        path_mig_state: PathMigState::from_raw(a.path_mig_state).unwrap_or_default(),
    )
}

pub(crate) fn completion(w: &ffi::shim_wc) -> Completion {
    Completion {
        wr_id: w.wr_id,
        status: WcStatus::from_raw(w.status).unwrap_or(WcStatus::GeneralErr),
        // Only wr_id, status, qp_num and vendor_err are defined for an error completion;
        // an opcode verbs-api does not know (tag matching, driver-specific) reads as SEND.
        opcode: WcOpcode::from_raw(w.opcode).unwrap_or(WcOpcode::Send),
        vendor_err: w.vendor_err,
        byte_len: w.byte_len,
        imm_data: w.imm_data,
        qp_num: w.qp_num,
        src_qp: w.src_qp,
        wc_flags: WcFlags::from_bits_retain(w.wc_flags),
        pkey_index: w.pkey_index,
        slid: w.slid,
        sl: w.sl,
        dlid_path_bits: w.dlid_path_bits,
    }
}

pub(crate) fn flow_spec(s: &FlowSpec) -> ffi::shim_flow_spec {
    let mut o = ffi::shim_flow_spec {
        type_: s.spec_type(),
        ..ffi::shim_flow_spec::default()
    };
    match s {
        FlowSpec::Eth { val, mask } => {
            o.dst_mac = val.dst_mac;
            o.src_mac = val.src_mac;
            o.ether_type = val.ether_type;
            o.vlan_tag = val.vlan_tag;
            o.mask_dst_mac = mask.dst_mac;
            o.mask_src_mac = mask.src_mac;
            o.mask_ether_type = mask.ether_type;
            o.mask_vlan_tag = mask.vlan_tag;
        }
        FlowSpec::Ipv4 { val, mask } => {
            o.src_ip = u32::from(val.src_ip);
            o.dst_ip = u32::from(val.dst_ip);
            o.mask_src_ip = u32::from(mask.src_ip);
            o.mask_dst_ip = u32::from(mask.dst_ip);
        }
        FlowSpec::Tcp { val, mask } | FlowSpec::Udp { val, mask } => {
            o.dst_port = val.dst_port;
            o.src_port = val.src_port;
            o.mask_dst_port = mask.dst_port;
            o.mask_src_port = mask.src_port;
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;
    use verbs_api::{AccessFlags, FlowAttr, QpModify};

    #[test]
    fn shim_layouts_match_the_rust_mirrors() {
        let c = ffi::layout_table();
        let rust = ffi::rust_layout();
        assert_eq!(
            c.len(),
            rust.len(),
            "shim.c and ffi.rs list different entries"
        );
        for (i, ((label, r), c)) in rust.iter().zip(c).enumerate() {
            assert_eq!(
                *r as u64,
                u64::from(*c),
                "entry {i}: {label}: Rust {r}, C {c}"
            );
        }
    }

    #[test]
    fn qp_attr_round_trips() {
        let m = QpModify::to(QpState::Rtr)
            .av(AhAttr::roce(
                Gid::from_ipv4(Ipv4Addr::new(10, 77, 0, 1)),
                1,
                1,
            ))
            .path_mtu(Mtu::Mtu4096)
            .dest_qpn(0x12_3456)
            .rq_psn(77)
            .max_dest_rd_atomic(4)
            .min_rnr_timer(12)
            .access(AccessFlags::REMOTE_WRITE | AccessFlags::LOCAL_WRITE);
        let back = qp_attr_from_shim(&qp_attr_to_shim(&m.attr));
        assert_eq!(back, m.attr);
    }

    #[test]
    fn flow_specs_carry_host_order_values() {
        let rule =
            FlowAttr::udp_endpoint(1, [1, 0, 0x5e, 1, 2, 3], Ipv4Addr::new(239, 1, 2, 3), 7148);
        let s: Vec<_> = rule.specs.iter().map(flow_spec).collect();
        assert_eq!(s[0].type_, 0x20);
        assert_eq!(s[0].mask_dst_mac, [0xff; 6]);
        assert_eq!(s[1].dst_ip, 0xef01_0203);
        assert_eq!(s[1].mask_dst_ip, 0xffff_ffff);
        assert_eq!(
            (s[2].type_, s[2].dst_port, s[2].mask_dst_port),
            (0x41, 7148, 0xffff)
        );
    }

    /// The bytes ibv_create_flow receives for spead2's endpoint rule: an ibv_flow_attr
    /// and three specs, each with its type and size, values and masks in network order.
    #[test]
    fn flow_attr_bytes_are_what_ibv_create_flow_expects() {
        let group = Ipv4Addr::new(239, 1, 2, 3);
        let mac = verbs_api::ipv4_multicast_mac(group);
        let mut rule = FlowAttr::udp_endpoint(2, mac, group, 7148);
        rule.priority = 3;
        let specs: Vec<_> = rule.specs.iter().map(flow_spec).collect();
        let attr = ffi::shim_flow_attr {
            type_: 0,
            flags: 0,
            priority: 3,
            port: 2,
            pad: 0,
        };
        let mut buf = [0u8; 512];
        let mut len = 0usize;
        // SAFETY: all pointers are valid for the lengths given.
        let ret = unsafe {
            ffi::shim_flow_bytes(
                &attr,
                specs.as_ptr(),
                specs.len(),
                buf.as_mut_ptr(),
                buf.len(),
                &mut len,
            )
        };
        assert_eq!(ret, 0);
        let u16_at = |o: usize| u16::from_ne_bytes([buf[o], buf[o + 1]]);
        let u32_at = |o: usize| u32::from_ne_bytes([buf[o], buf[o + 1], buf[o + 2], buf[o + 3]]);
        // struct ibv_flow_attr: comp_mask, type, size, priority, num_of_specs, port, flags.
        assert_eq!(u32_at(0), 0, "comp_mask");
        assert_eq!(u32_at(4), 0, "IBV_FLOW_ATTR_NORMAL");
        assert_eq!(usize::from(u16_at(8)), len, "size covers attr and specs");
        assert_eq!(u16_at(10), 3, "priority");
        assert_eq!((buf[12], buf[13]), (3, 2), "num_of_specs, port");
        let mut off = 20; // sizeof(struct ibv_flow_attr)
        let mut seen = Vec::new();
        for _ in 0..3 {
            let (ty, size) = (u32_at(off), usize::from(u16_at(off + 4)));
            let spec = &buf[off..off + size];
            match ty {
                0x20 => {
                    assert_eq!(&spec[6..12], &mac, "val.dst_mac");
                    assert_eq!(&spec[22..28], &[0xff; 6], "mask.dst_mac");
                }
                0x30 => {
                    assert_eq!(&spec[12..16], &[239, 1, 2, 3], "val.dst_ip, network order");
                    assert_eq!(&spec[20..24], &[0xff; 4], "mask.dst_ip");
                }
                0x41 => {
                    assert_eq!(&spec[6..8], &7148u16.to_be_bytes(), "val.dst_port");
                    assert_eq!(&spec[10..12], &[0xff, 0xff], "mask.dst_port");
                }
                other => panic!("unexpected spec type {other:#x}"),
            }
            seen.push(ty);
            off += size;
        }
        assert_eq!(seen, [0x20, 0x30, 0x41]);
        assert_eq!(off, len);
    }

    #[test]
    fn unknown_completion_values_are_kept_safe() {
        let w = ffi::shim_wc {
            wr_id: 5,
            status: 99,
            opcode: 200,
            wc_flags: 2,
            imm_data: 0xabcd,
            ..ffi::shim_wc::default()
        };
        let c = completion(&w);
        assert_eq!(c.status, WcStatus::GeneralErr);
        assert_eq!(c.opcode, WcOpcode::Send);
        assert_eq!(c.imm(), Some(0xabcd));
    }
}
