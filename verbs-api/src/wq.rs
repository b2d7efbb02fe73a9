//! Receive work queues, their indirection tables and RX-hash (RSS) QPs, as
//! `infiniband/verbs.h` (rdma-core 44) declares them: `struct ibv_wq_init_attr`,
//! `enum ibv_wq_state`, `struct ibv_rwq_ind_table_init_attr`, `struct ibv_rx_hash_conf`;
//! and the striding ("multi-packet") receive queue of mlx5 direct verbs
//! (`struct mlx5dv_striding_rq_init_attr`, `providers/mlx5/mlx5dv.h`).

use bitflags::bitflags;

/// `enum ibv_wq_state` (values as verbs.h numbers them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum WqState {
    /// `IBV_WQS_RESET`: created, takes no packets; posted receives are discarded.
    #[default]
    Reset,
    /// `IBV_WQS_RDY`: takes packets.
    Rdy,
    /// `IBV_WQS_ERR`: failed; takes no packets.
    Err,
    /// `IBV_WQS_UNKNOWN`.
    Unknown,
}

impl WqState {
    /// The libibverbs value.
    #[must_use]
    pub const fn as_raw(self) -> u32 {
        match self {
            WqState::Reset => 0,
            WqState::Rdy => 1,
            WqState::Err => 2,
            WqState::Unknown => 3,
        }
    }

    /// From the libibverbs value.
    #[must_use]
    pub const fn from_raw(v: u32) -> Option<Self> {
        Some(match v {
            0 => WqState::Reset,
            1 => WqState::Rdy,
            2 => WqState::Err,
            3 => WqState::Unknown,
            _ => return None,
        })
    }

    /// Whether `ibv_modify_wq` may move a WQ from `self` to `to`. The kernel's mlx5
    /// driver (`mlx5_ib_modify_wq`, drivers/infiniband/hw/mlx5/qp.c) hands the pair to
    /// the device's MODIFY_RQ as RST, RDY or ERR; the RQ state machine of the device
    /// takes RST->RDY, RDY->RDY, RDY->ERR and any state back to RST. UNKNOWN is no target.
    #[must_use]
    pub const fn can_move_to(self, to: WqState) -> bool {
        matches!(
            (self, to),
            (WqState::Reset, WqState::Rdy)
                | (WqState::Rdy, WqState::Rdy)
                | (WqState::Rdy, WqState::Err)
                | (_, WqState::Reset)
        ) && !matches!(self, WqState::Unknown)
    }
}

/// `struct mlx5dv_striding_rq_init_attr`: a receive queue whose WQEs are each one buffer
/// of `2^single_wqe_log_num_of_strides` strides of `2^single_stride_log_num_of_bytes`
/// bytes, packets landing in consecutive strides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct StridingRqAttr {
    /// log2 of a stride's size in bytes.
    pub single_stride_log_num_of_bytes: u32,
    /// log2 of the number of strides of one WQE.
    pub single_wqe_log_num_of_strides: u32,
    /// Each packet is placed two bytes into its first stride (so that the IP header
    /// after a 14-byte Ethernet header is 4-byte aligned).
    pub two_byte_shift_en: bool,
}

impl StridingRqAttr {
    /// Bytes of one stride.
    #[must_use]
    pub const fn stride_bytes(&self) -> u32 {
        1 << self.single_stride_log_num_of_bytes
    }

    /// Strides of one WQE.
    #[must_use]
    pub const fn num_strides(&self) -> u32 {
        1 << self.single_wqe_log_num_of_strides
    }

    /// Bytes of one WQE's buffer: what each posted receive must cover.
    #[must_use]
    pub const fn wqe_bytes(&self) -> u64 {
        1 << (self.single_stride_log_num_of_bytes + self.single_wqe_log_num_of_strides)
    }
}

/// `struct ibv_wq_init_attr` of an `IBV_WQT_RQ` (the only type verbs.h defines), with the
/// striding attributes of `mlx5dv_create_wq` when asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct WqInitAttr {
    /// Receives the queue holds.
    pub max_wr: u32,
    /// SGEs per receive.
    pub max_sge: u32,
    /// A striding RQ (`MLX5DV_WQ_INIT_ATTR_MASK_STRIDING_RQ`), or an ordinary one.
    pub striding: Option<StridingRqAttr>,
}

bitflags! {
    /// `enum ibv_rx_hash_fields`: which header fields the RX hash covers.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct RxHashFields: u64 {
        /// IPv4 source address.
        const SRC_IPV4 = 1 << 0;
        /// IPv4 destination address.
        const DST_IPV4 = 1 << 1;
        /// IPv6 source address.
        const SRC_IPV6 = 1 << 2;
        /// IPv6 destination address.
        const DST_IPV6 = 1 << 3;
        /// TCP source port.
        const SRC_PORT_TCP = 1 << 4;
        /// TCP destination port.
        const DST_PORT_TCP = 1 << 5;
        /// UDP source port.
        const SRC_PORT_UDP = 1 << 6;
        /// UDP destination port.
        const DST_PORT_UDP = 1 << 7;
        /// IPsec SPI.
        const IPSEC_SPI = 1 << 8;
        /// Hash the inner headers of a tunnelled packet.
        const INNER = 1 << 31;
    }
}

/// `IBV_RX_HASH_FUNC_TOEPLITZ`, the only function verbs.h defines.
pub const RX_HASH_FUNC_TOEPLITZ: u8 = 1;

/// `struct ibv_rss_caps` (in `ibv_device_attr_ex`): what receive-side scaling a device
/// offers; all zero on a device without it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RssCaps {
    /// The QP types that can spread packets over an indirection table, a bit per
    /// `enum ibv_qp_type` value (`1 << IBV_QPT_RAW_PACKET`).
    pub supported_qpts: u32,
    /// Most receive WQ indirection tables.
    pub max_rwq_indirection_tables: u32,
    /// Most entries of one table (`1 << log_ind_tbl_size` may not exceed it).
    pub max_rwq_indirection_table_size: u32,
    /// The header fields the hash can cover.
    pub rx_hash_fields_mask: RxHashFields,
    /// The hash functions offered (bits of `enum ibv_rx_hash_function_flags`).
    pub rx_hash_function: u8,
}

/// `struct ibv_rx_hash_conf`: how an RSS QP spreads packets over the WQs of its table.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct RxHashConf {
    /// `rx_hash_function` (a bit of `enum ibv_rx_hash_function_flags`).
    pub function: u8,
    /// The hash key.
    pub key: Vec<u8>,
    /// The fields hashed.
    pub fields: RxHashFields,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_match_verbs_h() {
        for (s, v) in [
            (WqState::Reset, 0),
            (WqState::Rdy, 1),
            (WqState::Err, 2),
            (WqState::Unknown, 3),
        ] {
            assert_eq!(s.as_raw(), v);
            assert_eq!(WqState::from_raw(v), Some(s));
        }
        assert_eq!(WqState::from_raw(4), None);
        assert_eq!(RxHashFields::DST_PORT_UDP.bits(), 1 << 7);
        assert_eq!(RxHashFields::INNER.bits(), 1 << 31);
    }

    #[test]
    fn wq_transitions() {
        assert!(WqState::Reset.can_move_to(WqState::Rdy));
        assert!(!WqState::Reset.can_move_to(WqState::Err));
        assert!(WqState::Rdy.can_move_to(WqState::Err));
        assert!(WqState::Err.can_move_to(WqState::Reset));
        assert!(!WqState::Err.can_move_to(WqState::Rdy));
        assert!(!WqState::Rdy.can_move_to(WqState::Unknown));
    }

    #[test]
    fn striding_geometry() {
        let a = StridingRqAttr {
            single_stride_log_num_of_bytes: 6,
            single_wqe_log_num_of_strides: 14,
            two_byte_shift_en: false,
        };
        assert_eq!(a.stride_bytes(), 64);
        assert_eq!(a.num_strides(), 16384);
        assert_eq!(a.wqe_bytes(), 1 << 20);
    }
}
