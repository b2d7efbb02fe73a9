//! Devices: what `ibv_get_device_list` names and what `ibv_query_device(_ex)` reports.

use bitflags::bitflags;

use crate::c_fields::c_mirrored;
use crate::macros::verbs_enum;
use crate::wq::RssCaps;

verbs_enum! {
    /// `enum ibv_node_type`.
    pub enum NodeType: i32 {
        /// Unknown node type.
        Unknown = -1 => "unknown",
        /// An InfiniBand channel adapter (also RoCE NICs such as mlx5 and rxe).
        Ca = 1 => "InfiniBand channel adapter",
        /// An InfiniBand switch.
        Switch = 2 => "InfiniBand switch",
        /// An InfiniBand router.
        Router = 3 => "InfiniBand router",
        /// An iWARP NIC.
        Rnic = 4 => "iWARP NIC",
        /// A Cisco usNIC.
        Usnic = 5 => "usNIC",
        /// A Cisco usNIC over UDP.
        UsnicUdp = 6 => "usNIC UDP",
        /// Unspecified.
        Unspecified = 7 => "unspecified",
    }
}

verbs_enum! {
    /// `enum ibv_transport_type`.
    pub enum TransportType: i32 {
        /// Unknown transport.
        Unknown = -1 => "unknown transport",
        /// InfiniBand transport (also RoCE).
        Ib = 0 => "InfiniBand",
        /// iWARP.
        Iwarp = 1 => "iWARP",
        /// usNIC.
        Usnic = 2 => "usNIC",
        /// usNIC over UDP.
        UsnicUdp = 3 => "usNIC UDP",
        /// Unspecified.
        Unspecified = 4 => "unspecified transport",
    }
}

verbs_enum! {
    /// `enum ibv_atomic_cap`: how atomics are guaranteed.
    pub enum AtomicCap: u32 {
        /// No atomic operations.
        None = 0 => "ATOMIC_NONE",
        /// Atomic with respect to this device's other atomics.
        Hca = 1 => "ATOMIC_HCA",
        /// Atomic with respect to the CPU too.
        Glob = 2 => "ATOMIC_GLOB",
    }
}

bitflags! {
    /// `enum ibv_device_cap_flags`: what a device can do.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct DeviceCapFlags: u64 {
        /// Work queues can be resized.
        const RESIZE_MAX_WR = 1;
        /// Bad P_Key counter.
        const BAD_PKEY_CNTR = 1 << 1;
        /// Bad Q_Key counter.
        const BAD_QKEY_CNTR = 1 << 2;
        /// Raw multicast.
        const RAW_MULTI = 1 << 3;
        /// Automatic path migration.
        const AUTO_PATH_MIG = 1 << 4;
        /// The physical port of a QP can change.
        const CHANGE_PHY_PORT = 1 << 5;
        /// UD address vector port enforcement.
        const UD_AV_PORT_ENFORCE = 1 << 6;
        /// Current-state modify.
        const CURR_QP_STATE_MOD = 1 << 7;
        /// Ports can be shut down.
        const SHUTDOWN_PORT = 1 << 8;
        /// Init type.
        const INIT_TYPE = 1 << 9;
        /// Port active events.
        const PORT_ACTIVE_EVENT = 1 << 10;
        /// System image GUID.
        const SYS_IMAGE_GUID = 1 << 11;
        /// RC RNR NAK generation.
        const RC_RNR_NAK_GEN = 1 << 12;
        /// SRQs can be resized.
        const SRQ_RESIZE = 1 << 13;
        /// CQ notification for N completions.
        const N_NOTIFY_CQ = 1 << 14;
        /// Memory windows.
        const MEM_WINDOW = 1 << 17;
        /// UD IP checksum offload (receive side reports IP_CSUM_OK).
        const UD_IP_CSUM = 1 << 18;
        /// XRC.
        const XRC = 1 << 20;
        /// Memory management extensions.
        const MEM_MGT_EXTENSIONS = 1 << 21;
        /// Type 2A memory windows.
        const MEM_WINDOW_TYPE_2A = 1 << 23;
        /// Type 2B memory windows.
        const MEM_WINDOW_TYPE_2B = 1 << 24;
        /// RC IP checksum offload.
        const RC_IP_CSUM = 1 << 25;
        /// Raw-packet IP checksum offload (the IP_CSUM send flag is honoured).
        const RAW_IP_CSUM = 1 << 26;
        /// Managed flow steering (`ibv_create_flow`).
        const MANAGED_FLOW_STEERING = 1 << 29;
    }
}

bitflags! {
    /// `enum ibv_raw_packet_caps` (from `ibv_query_device_ex`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct RawPacketCaps: u32 {
        /// C-VLAN stripping.
        const CVLAN_STRIPPING = 1 << 0;
        /// The FCS can be scattered into the buffer.
        const SCATTER_FCS = 1 << 1;
        /// IP checksum offload on raw packet QPs.
        const IP_CSUM = 1 << 2;
        /// Delay drop.
        const DELAY_DROP = 1 << 3;
    }
}

/// A device as listed by `ibv_get_device_list`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DeviceInfo {
    /// Kernel name, e.g. `mlx5_0` or `rxe0`.
    pub name: String,
    /// Node GUID (big-endian value as `ibv_get_device_guid` gives it).
    pub guid: u64,
    /// Node type.
    pub node_type: NodeType,
    /// Transport type.
    pub transport_type: TransportType,
}

c_mirrored! { $
    /// `struct ibv_device_attr` with the extended fields spead2-style code needs.
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    pub struct DeviceAttr mirrored by device_attr_c_struct {
        /// Firmware version string.
        pub fw_ver: String => [::std::os::raw::c_char; 64],
        /// Node GUID.
        pub node_guid: u64 => u64,
        /// System image GUID.
        pub sys_image_guid: u64 => u64,
        /// Largest memory region, in bytes.
        pub max_mr_size: u64 => u64,
        /// Supported page sizes.
        pub page_size_cap: u64 => u64,
        /// IEEE vendor id (0x02c9 Mellanox; rxe reports 0xffffff... as its kernel does).
        pub vendor_id: u32 => u32,
        /// Vendor part id.
        pub vendor_part_id: u32 => u32,
        /// Hardware version.
        pub hw_ver: u32 => u32,
        /// Maximum number of QPs.
        pub max_qp: u32 => u32,
        /// Maximum outstanding work requests per work queue.
        pub max_qp_wr: u32 => u32,
        /// Capability flags.
        pub device_cap_flags: DeviceCapFlags => u64,
        /// Maximum scatter-gather entries per work request.
        pub max_sge: u32 => u32,
        /// Maximum SGEs for RDMA READ.
        pub max_sge_rd: u32 => u32,
        /// Maximum number of CQs.
        pub max_cq: u32 => u32,
        /// Maximum entries per CQ.
        pub max_cqe: u32 => u32,
        /// Maximum number of memory regions.
        pub max_mr: u32 => u32,
        /// Maximum number of protection domains.
        pub max_pd: u32 => u32,
        /// Maximum outstanding RDMA READ/atomic per QP as responder.
        pub max_qp_rd_atom: u32 => u32,
        /// Maximum outstanding RDMA READ/atomic as responder, device-wide.
        pub max_res_rd_atom: u32 => u32,
        /// Maximum outstanding RDMA READ/atomic per QP as requester.
        pub max_qp_init_rd_atom: u32 => u32,
        /// Atomic guarantees.
        pub atomic_cap: AtomicCap => u32,
        /// Maximum memory windows.
        pub max_mw: u32 => u32,
        /// Maximum raw IPv6 QPs.
        pub max_raw_ipv6_qp: u32 => u32,
        /// Maximum raw Ethertype QPs (0 on rxe).
        pub max_raw_ethy_qp: u32 => u32,
        /// Maximum multicast groups.
        pub max_mcast_grp: u32 => u32,
        /// Maximum QPs attached to one multicast group.
        pub max_mcast_qp_attach: u32 => u32,
        /// Maximum multicast attachments, device-wide.
        pub max_total_mcast_qp_attach: u32 => u32,
        /// Maximum address handles.
        pub max_ah: u32 => u32,
        /// Maximum SRQs.
        pub max_srq: u32 => u32,
        /// Maximum work requests per SRQ.
        pub max_srq_wr: u32 => u32,
        /// Maximum SGEs per SRQ work request.
        pub max_srq_sge: u32 => u32,
        /// Maximum partition keys.
        pub max_pkeys: u16 => u16,
        /// Local CA ACK delay.
        pub local_ca_ack_delay: u8 => u8,
        /// Number of physical ports.
        pub phys_port_cnt: u8 => u8,
        /// Raw packet capabilities (`ibv_device_attr_ex.raw_packet_caps`).
        pub raw_packet_caps: RawPacketCaps => u32,
        rust_only:
        /// Receive-side scaling (`ibv_device_attr_ex.rss_caps`).
        pub rss_caps: RssCaps,
        /// Most receive work queues (`ibv_device_attr_ex.max_wq_type_rq`).
        pub max_wq_type_rq: u32,
        /// Maximum inline data a send work request may carry.
        pub max_inline_data: u32,
        /// Number of completion vectors (`ibv_context.num_comp_vectors`).
        pub num_comp_vectors: u32,
    }
}

#[allow(clippy::derivable_impls)] // the enum is declared by verbs_enum!
impl Default for AtomicCap {
    fn default() -> Self {
        AtomicCap::None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_match_libibverbs() {
        assert_eq!(DeviceCapFlags::MANAGED_FLOW_STEERING.bits(), 1 << 29);
        assert_eq!(DeviceCapFlags::UD_IP_CSUM.bits(), 1 << 18);
        assert_eq!(DeviceCapFlags::RAW_IP_CSUM.bits(), 1 << 26);
        assert_eq!(RawPacketCaps::IP_CSUM.bits(), 4);
        assert_eq!(NodeType::from_raw(1), Some(NodeType::Ca));
        assert_eq!(NodeType::Ca.as_str(), "InfiniBand channel adapter");
        assert_eq!(AtomicCap::Hca.to_string(), "ATOMIC_HCA");
        assert_eq!(TransportType::Ib.as_raw(), 0);
    }
}
