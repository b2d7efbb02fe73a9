//! Driver personalities: where rxe (Soft-RoCE) and mlx5 (ConnectX) behave differently, the
//! device's personality picks the behaviour (see SOFT-ROCE.md for the rxe divergences).

use verbs_api::{
    AtomicCap, DeviceAttr, DeviceCapFlags, Mtu, QpCap, QpType, RawPacketCaps, RssCaps,
    RxHashFields, RX_HASH_FUNC_TOEPLITZ,
};

/// The network header a RoCE packet arrived with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoceL3 {
    /// RoCE v1: the IB GRH straight in Ethernet.
    Grh,
    /// RoCE v2 over IPv6.
    Ipv6,
    /// RoCE v2 over IPv4.
    Ipv4,
}

/// Which driver a simulated device behaves like.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Personality {
    /// Soft-RoCE: no RAW_PACKET QPs and no flow steering; a CQ overrun raises
    /// IBV_EVENT_CQ_ERR but the CQ stays usable; a UD send above the path MTU completes
    /// successfully and sends nothing; a UD message larger than the posted buffer fails
    /// that receive with LOC_QP_OP_ERR and moves the QP to ERR (what Linux 6.1 does, not
    /// the silent drop older notes describe); a bad lkey is LOC_QP_OP_ERR; error
    /// completions are never flagged solicited.
    Rxe,
    /// ConnectX (mlx5): RAW_PACKET QPs, managed flow steering and IP checksum offload; a
    /// CQ overrun breaks the CQ; oversized UD messages complete in error.
    Mlx5,
}

impl Personality {
    /// The device name prefix (`rxe0`, `mlx5_0`).
    #[must_use]
    pub fn name(self, index: usize) -> String {
        match self {
            Personality::Rxe => format!("rxe{index}"),
            Personality::Mlx5 => format!("mlx5_{index}"),
        }
    }

    /// Whether RAW_PACKET QPs and flow steering exist.
    #[must_use]
    pub fn raw_packet(self) -> bool {
        matches!(self, Personality::Mlx5)
    }

    /// The port's active MTU (rxe on a 1500-byte netdev: 1024; mlx5 with jumbo frames: 4096).
    #[must_use]
    pub fn active_mtu(self) -> Mtu {
        match self {
            Personality::Rxe => Mtu::Mtu1024,
            Personality::Mlx5 => Mtu::Mtu4096,
        }
    }

    /// The status of a work request whose SGE names an unknown lkey (or one of another
    /// PD): LOC_QP_OP_ERR on rxe (Linux 6.1, as measured), LOC_PROT_ERR per the man pages
    /// and on mlx5.
    #[must_use]
    pub fn bad_lkey_status(self) -> verbs_api::WcStatus {
        match self {
            Personality::Rxe => verbs_api::WcStatus::LocQpOpErr,
            Personality::Mlx5 => verbs_api::WcStatus::LocProtErr,
        }
    }

    /// The status of a receive whose buffer is too small for a UD message: LOC_QP_OP_ERR
    /// on rxe (Linux 6.1, as measured; the QP then enters ERR), LOC_LEN_ERR on mlx5.
    #[must_use]
    pub fn ud_too_long_status(self) -> verbs_api::WcStatus {
        match self {
            Personality::Rxe => verbs_api::WcStatus::LocQpOpErr,
            Personality::Mlx5 => verbs_api::WcStatus::LocLenErr,
        }
    }

    /// The depth a CQ or SRQ of `n` entries gets: its ring holds a power of two entries
    /// with one kept free, so asking for `n` gives the smallest 2^k - 1 >= n (rxe's
    /// `rxe_queue_init`; mlx5's `align_queue_size(n + 1) - 1` in rdma-core).
    #[must_use]
    pub fn queue_depth(n: u32) -> u32 {
        n.saturating_add(1)
            .checked_next_power_of_two()
            .map_or(u32::MAX, |p| p - 1)
    }

    /// The queue sizes a QP gets for those asked. rxe (`rxe_qp_init_req`/`_resp`) rounds
    /// each ring with [`Personality::queue_depth`] and sizes a send WQE to hold
    /// max(16 bytes per SGE, inline data), so both limits become that size's. mlx5's own
    /// sizing is not modelled: it gets what was asked.
    #[must_use]
    pub fn qp_cap(self, asked: QpCap) -> QpCap {
        match self {
            Personality::Rxe => {
                let wqe = (asked.max_send_sge * 16).max(asked.max_inline_data);
                QpCap::new(
                    Self::queue_depth(asked.max_send_wr),
                    Self::queue_depth(asked.max_recv_wr),
                    wqe / 16,
                    asked.max_recv_sge,
                )
                .with_inline(wqe)
            }
            Personality::Mlx5 => asked,
        }
    }

    /// Whether a region without remote access gets rkey 0 (rxe's `rxe_mr_init`); mlx5
    /// gives every region one key for both.
    #[must_use]
    pub fn local_only_rkey_zero(self) -> bool {
        matches!(self, Personality::Rxe)
    }

    /// The port's GID table length: rxe reports 1024 (`RXE_PORT_GID_TBL_LEN`); the mlx5
    /// personality reports only the two entries the simulator fills.
    #[must_use]
    pub fn gid_tbl_len(self) -> u32 {
        match self {
            Personality::Rxe => 1024,
            Personality::Mlx5 => 2,
        }
    }

    /// Whether the device re-registers a region in place (`ibv_rereg_mr`): mlx5 does;
    /// rxe in Linux 6.1 has no `rereg_user_mr`, so the command fails with EOPNOTSUPP (in
    /// the Soft-RoCE VM, `ibv_rereg_mr` gives IBV_REREG_MR_ERR_CMD with errno 95, and
    /// rdma-core's `test_mr` rereg tests skip: "Rereg MR is not supported").
    #[must_use]
    pub fn rereg_mr(self) -> bool {
        matches!(self, Personality::Mlx5)
    }

    /// Whether GID `index` is a RoCE v1 GID (else RoCE v2). mlx5 lists the link-local
    /// GID first as RoCE v1. rxe lists RoCE v2 GIDs only (its port is
    /// `RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP`, rxe_verbs.c): in the Soft-RoCE VM,
    /// `ibv_devinfo -v -d rxe0` shows `GID[  0]: fe80::…, RoCE v2` and
    /// `GID[  1]: ::ffff:10.77.0.1, RoCE v2`.
    #[must_use]
    pub fn roce_v1_gid(self, index: u32) -> bool {
        matches!(self, Personality::Mlx5) && index == 0
    }

    /// The largest message: rxe 8 MiB (`RXE_PORT_MAX_MSG_SZ`); mlx5 2 GiB.
    #[must_use]
    pub fn max_msg_sz(self) -> u32 {
        match self {
            Personality::Rxe => 0x80_0000,
            Personality::Mlx5 => 0x8000_0000,
        }
    }

    /// Whether RC and UC receive completions carry the GRH flag and src_qp 0 (rxe flags
    /// every user receive with GRH and leaves src_qp 0 on connected QPs; mlx5 sets GRH on
    /// UD only).
    #[must_use]
    pub fn connected_recv_as_rxe(self) -> bool {
        matches!(self, Personality::Rxe)
    }

    /// The `sl` of a UD receive completion over RoCE, for a packet of `l3` type. mlx5's
    /// provider reports bits 27:24 of the CQE's `flags_rqpn` as `sl` (rdma-core
    /// `handle_responder` and `mlx5_cq_read_wc_sl` in providers/mlx5/cq.c); on Ethernet the
    /// device puts the RoCE packet type there: bits 1:0 the L3 header (0 GRH, 1 IPv6,
    /// 2 IPv4: `MLX5_CQE_ROCE_L3_HEADER_TYPE_*`, which the kernel's `handle_responder` in
    /// drivers/infiniband/hw/mlx5/cq.c reads from the same bits), bit 3 set when the frame
    /// has a UDP header (the PRM as UCX 1.13 quotes it in `uct_ud_iface_check_grh`, which
    /// takes the packet's type from this field). rxe sets no `sl` in a user completion
    /// (`do_complete` in rxe_resp.c fills it for kernel consumers only): 0.
    #[must_use]
    pub fn ud_recv_sl(self, l3: RoceL3) -> u8 {
        match (self, l3) {
            (Personality::Rxe, _) | (Personality::Mlx5, RoceL3::Grh) => 0,
            (Personality::Mlx5, RoceL3::Ipv6) => 0x8 | 0x1,
            (Personality::Mlx5, RoceL3::Ipv4) => 0x8 | 0x2,
        }
    }

    /// Whether retry_cnt 7 means retrying for ever, as rnr_retry 7 does (rxe, seen in the
    /// VM); the mlx5 personality gives up after 7, as the IB spec has it.
    #[must_use]
    pub fn retry_cnt_7_is_infinite(self) -> bool {
        matches!(self, Personality::Rxe)
    }

    /// Whether a UD receive's GRH holds the IPv4 header of a datagram a device sent to its
    /// own address with the header checksum 0: rxe hands such packets to itself
    /// (`rxe_loopback`, when source and destination addresses are equal) without the IP
    /// layer that fills the checksum in: `prepare_ipv4_hdr` never writes it, and Debian's
    /// kernel (CONFIG_INIT_ON_ALLOC_DEFAULT_ON=y) zeroes the buffer. Seen in the VM by the
    /// split cases (`ud_send_with_grh` with both sides on rxe0). Over the wire the
    /// checksum is right. mlx5's loopback is not modelled apart.
    #[must_use]
    pub fn loopback_ipv4_checksum_unset(self) -> bool {
        matches!(self, Personality::Rxe)
    }

    /// Whether the affiliated QP events COMM_EST, QP_REQ_ERR, QP_ACCESS_ERR, QP_FATAL and
    /// LAST_WQE_REACHED are raised: rxe (Linux 6.1) raises none of them (seen in the VM);
    /// mlx5 does. SQ_DRAINED is raised by both.
    #[must_use]
    pub fn raises_qp_error_events(self) -> bool {
        matches!(self, Personality::Mlx5)
    }

    /// Whether a responder QP lacking the remote access right a request needs (or with
    /// max_dest_rd_atomic 0 for a READ or atomic) answers with an invalid-request NAK, so
    /// the requester sees REM_INV_REQ_ERR (rxe's `check_op_valid`), rather than a remote
    /// access error.
    #[must_use]
    pub fn qp_access_is_invalid_request(self) -> bool {
        matches!(self, Personality::Rxe)
    }

    /// The status of an RC receive too small for the message (rxe: LOC_QP_OP_ERR, and the
    /// requester gets REM_OP_ERR; mlx5: LOC_LEN_ERR).
    #[must_use]
    pub fn rc_too_long_status(self) -> verbs_api::WcStatus {
        match self {
            Personality::Rxe => verbs_api::WcStatus::LocQpOpErr,
            Personality::Mlx5 => verbs_api::WcStatus::LocLenErr,
        }
    }

    /// Most READs and atomics a QP keeps outstanding, each way (`max_qp_rd_atom`,
    /// `max_qp_init_rd_atom`), and the most `ibv_modify_qp` takes for max_rd_atomic and
    /// max_dest_rd_atomic (more is EINVAL): 128 on rxe (rxe_param.h; `rxe_qp_chk_attr`),
    /// 16 on mlx5 (1 << `log_max_ra_req_qp` / `log_max_ra_res_qp`, 4 on ConnectX-4 .. 6;
    /// the kernel's `mlx5_ib_modify_qp` checks both against them).
    #[must_use]
    pub fn max_rd_atom(self) -> u8 {
        match self {
            Personality::Rxe => 128,
            Personality::Mlx5 => 16,
        }
    }

    /// The max_rd_atomic or max_dest_rd_atomic a QP keeps for `n` asked: rxe rounds up
    /// to a power of two (`rxe_qp_from_attr`); mlx5 keeps `n`.
    #[must_use]
    pub fn rd_atomic(self, n: u8) -> u8 {
        match self {
            Personality::Rxe if n > 0 => n.checked_next_power_of_two().unwrap_or(u8::MAX),
            _ => n,
        }
    }

    /// Largest inline send.
    #[must_use]
    pub(crate) fn mw_rules(self) -> crate::verbs::memory::MwRules {
        crate::verbs::memory::MwRules {
            range_is_the_region: self == Personality::Rxe,
        }
    }

    /// The flag a receive completion of a SEND_WITH_INV carries: rxe writes the kernel's
    /// `IB_WC_WITH_INVALIDATE` (1 << 2) into the user CQ unconverted, which libibverbs
    /// reads as `IBV_WC_IP_CSUM_OK`; mlx5 sets `IBV_WC_WITH_INV` (1 << 3).
    pub(crate) fn with_inv_flag(self) -> verbs_api::WcFlags {
        match self {
            Personality::Rxe => verbs_api::WcFlags::IP_CSUM_OK,
            Personality::Mlx5 => verbs_api::WcFlags::WITH_INV,
        }
    }

    pub fn max_inline(self) -> u32 {
        match self {
            Personality::Rxe => 400,
            Personality::Mlx5 => 512,
        }
    }

    /// What `ibv_query_device_ex` reports.
    #[must_use]
    pub fn device_attr(self, guid: u64) -> DeviceAttr {
        let common = DeviceAttr {
            fw_ver: "backend-sim".into(),
            node_guid: guid,
            sys_image_guid: guid,
            max_mr_size: u64::MAX,
            page_size_cap: 0xffff_f000,
            max_cq: 1 << 16,
            max_mr: 1 << 20,
            max_pd: 1 << 16,
            max_qp_rd_atom: u32::from(self.max_rd_atom()),
            max_res_rd_atom: 1 << 20,
            max_qp_init_rd_atom: u32::from(self.max_rd_atom()),
            atomic_cap: AtomicCap::Hca,
            max_mcast_grp: 8192,
            max_mcast_qp_attach: 56,
            max_total_mcast_qp_attach: 8192 * 56,
            max_ah: 1 << 20,
            max_srq: 1 << 16,
            max_pkeys: 64,
            local_ca_ack_delay: 15,
            phys_port_cnt: 1,
            num_comp_vectors: 4,
            max_inline_data: self.max_inline(),
            ..DeviceAttr::default()
        };
        match self {
            Personality::Rxe => DeviceAttr {
                vendor_id: 0x00ff_ffff,
                max_qp: 1 << 16,
                max_qp_wr: 1 << 20,
                max_sge: 32,
                max_sge_rd: 32,
                max_cqe: 32767,
                max_srq_wr: 1 << 20,
                max_srq_sge: 27,
                device_cap_flags: DeviceCapFlags::BAD_PKEY_CNTR
                    | DeviceCapFlags::BAD_QKEY_CNTR
                    | DeviceCapFlags::AUTO_PATH_MIG
                    | DeviceCapFlags::CHANGE_PHY_PORT
                    | DeviceCapFlags::UD_AV_PORT_ENFORCE
                    | DeviceCapFlags::PORT_ACTIVE_EVENT
                    | DeviceCapFlags::SYS_IMAGE_GUID
                    | DeviceCapFlags::RC_RNR_NAK_GEN
                    | DeviceCapFlags::SRQ_RESIZE
                    | DeviceCapFlags::MEM_WINDOW
                    | DeviceCapFlags::MEM_MGT_EXTENSIONS
                    | DeviceCapFlags::MEM_WINDOW_TYPE_2B,
                // RXE_MAX_MW (the window pool's size) on Debian's 6.1 kernel.
                max_mw: 524_287,
                max_raw_ethy_qp: 0,
                raw_packet_caps: RawPacketCaps::empty(),
                ..common
            },
            Personality::Mlx5 => DeviceAttr {
                vendor_id: 0x02c9,
                vendor_part_id: 4123,
                // max_rd_atom (16) and its product with max_qp (the kernel's
                // mlx5_ib_query_device): perftest keeps as many reads outstanding as
                // max_qp_rd_atom says.
                max_res_rd_atom: 16 << 18,
                max_qp: 1 << 18,
                max_qp_wr: 32768,
                max_sge: 30,
                max_sge_rd: 30,
                max_cqe: (1 << 22) - 1,
                max_srq_wr: 32767,
                max_srq_sge: 31,
                device_cap_flags: DeviceCapFlags::BAD_PKEY_CNTR
                    | DeviceCapFlags::BAD_QKEY_CNTR
                    | DeviceCapFlags::CHANGE_PHY_PORT
                    | DeviceCapFlags::PORT_ACTIVE_EVENT
                    | DeviceCapFlags::SYS_IMAGE_GUID
                    | DeviceCapFlags::RC_RNR_NAK_GEN
                    | DeviceCapFlags::UD_IP_CSUM
                    | DeviceCapFlags::XRC
                    | DeviceCapFlags::MEM_WINDOW
                    | DeviceCapFlags::MEM_MGT_EXTENSIONS
                    | DeviceCapFlags::MEM_WINDOW_TYPE_2B
                    | DeviceCapFlags::RAW_IP_CSUM
                    | DeviceCapFlags::MANAGED_FLOW_STEERING,
                max_mw: 1 << 24,
                max_raw_ethy_qp: 1 << 18,
                // The kernel's mlx5_ib_query_device (drivers/infiniband/hw/mlx5/main.c),
                // on an Ethernet port with raw packet support: 1 << log_max_rqt,
                // 1 << log_max_rqt_size, RAW_PACKET QPs, 1 << log_max_rq; the hash
                // fields and function from its mlx5 response (the eight IPv4/IPv6/TCP/
                // UDP fields and INNER, Toeplitz), which libmlx5 copies in. The firmware
                // capabilities are those `ibv_devinfo -v` printed for a ConnectX-6 Dx
                // (fw 22.36): 524288 tables of up to 2048 entries, 8388608 RQs,
                // rx_hash_fields_mask 0x800000FF, rx_hash_function 0x1.
                rss_caps: RssCaps {
                    supported_qpts: 1 << QpType::RawPacket.as_raw(),
                    max_rwq_indirection_tables: 1 << 19,
                    max_rwq_indirection_table_size: 2048,
                    rx_hash_fields_mask: RxHashFields::from_bits_retain(0x8000_00ff),
                    rx_hash_function: RX_HASH_FUNC_TOEPLITZ,
                },
                max_wq_type_rq: 1 << 23,
                raw_packet_caps: RawPacketCaps::CVLAN_STRIPPING
                    | RawPacketCaps::SCATTER_FCS
                    | RawPacketCaps::IP_CSUM
                    | RawPacketCaps::DELAY_DROP,
                ..common
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_depths_are_the_devices_own() {
        let m = Personality::Mlx5.device_attr(0);
        assert_eq!(
            (m.max_qp_rd_atom, m.max_qp_init_rd_atom, m.max_res_rd_atom),
            (16, 16, 16 * m.max_qp)
        );
        let r = Personality::Rxe.device_attr(0);
        assert_eq!((r.max_qp_rd_atom, r.max_qp_init_rd_atom), (128, 128));
    }

    #[test]
    fn rss_caps_are_the_kernels_on_mlx5_and_empty_on_rxe() {
        let m = Personality::Mlx5.device_attr(0);
        assert_eq!(
            m.rss_caps,
            RssCaps {
                supported_qpts: 1 << 8,
                max_rwq_indirection_tables: 524_288,
                max_rwq_indirection_table_size: 2048,
                rx_hash_fields_mask: RxHashFields::from_bits_retain(0x8000_00ff),
                rx_hash_function: 1,
            }
        );
        assert_eq!(m.max_wq_type_rq, 8_388_608);
        let r = Personality::Rxe.device_attr(0);
        assert_eq!((r.rss_caps, r.max_wq_type_rq), (RssCaps::default(), 0));
    }
}
