//! Queue pair types, states and attributes (`ibv_qp_type`, `ibv_qp_state`,
//! `ibv_qp_attr`, `ibv_qp_attr_mask`, `ibv_qp_cap`, `ibv_ah_attr`).

use bitflags::bitflags;

use crate::access::AccessFlags;
use crate::c_fields::c_mirrored;
use crate::gid::Gid;
use crate::macros::verbs_enum;
use crate::port::Mtu;

verbs_enum! {
    /// `enum ibv_qp_type`.
    pub enum QpType: u32 {
        /// Reliable connected.
        Rc = 2 => "RC",
        /// Unreliable connected.
        Uc = 3 => "UC",
        /// Unreliable datagram (and UD multicast).
        Ud = 4 => "UD",
        /// Raw Ethernet frames, selected by flow steering (mlx5).
        RawPacket = 8 => "RAW_PACKET",
    }
}

verbs_enum! {
    /// `enum ibv_qp_state`.
    pub enum QpState: u32 {
        /// Reset: nothing can be posted.
        Reset = 0 => "RESET",
        /// Initialized: receives may be posted.
        Init = 1 => "INIT",
        /// Ready to receive.
        Rtr = 2 => "RTR",
        /// Ready to send.
        Rts = 3 => "RTS",
        /// Send queue drained.
        Sqd = 4 => "SQD",
        /// Send queue error (UD, UC).
        Sqe = 5 => "SQE",
        /// Error: every outstanding work request is flushed.
        Err = 6 => "ERR",
        /// Unknown.
        Unknown = 7 => "UNKNOWN",
    }
}

#[allow(clippy::derivable_impls)] // the enum is declared by verbs_enum!
impl Default for QpState {
    fn default() -> Self {
        QpState::Reset
    }
}

verbs_enum! {
    /// `enum ibv_mig_state`.
    pub enum PathMigState: u32 {
        /// Migrated.
        Migrated = 0 => "MIGRATED",
        /// Rearm.
        Rearm = 1 => "REARM",
        /// Armed.
        Armed = 2 => "ARMED",
    }
}

#[allow(clippy::derivable_impls)] // the enum is declared by verbs_enum!
impl Default for PathMigState {
    fn default() -> Self {
        PathMigState::Migrated
    }
}

bitflags! {
    /// `enum ibv_qp_attr_mask`: which fields of a [`QpAttr`] a modify sets or a query reads.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct QpAttrMask: u32 {
        /// `qp_state`.
        const STATE = 1 << 0;
        /// `cur_qp_state`.
        const CUR_STATE = 1 << 1;
        /// `en_sqd_async_notify`.
        const EN_SQD_ASYNC_NOTIFY = 1 << 2;
        /// `qp_access_flags`.
        const ACCESS_FLAGS = 1 << 3;
        /// `pkey_index`.
        const PKEY_INDEX = 1 << 4;
        /// `port_num`.
        const PORT = 1 << 5;
        /// `qkey`.
        const QKEY = 1 << 6;
        /// `ah_attr` (the primary path's address vector).
        const AV = 1 << 7;
        /// `path_mtu`.
        const PATH_MTU = 1 << 8;
        /// `timeout`.
        const TIMEOUT = 1 << 9;
        /// `retry_cnt`.
        const RETRY_CNT = 1 << 10;
        /// `rnr_retry`.
        const RNR_RETRY = 1 << 11;
        /// `rq_psn`.
        const RQ_PSN = 1 << 12;
        /// `max_rd_atomic`.
        const MAX_QP_RD_ATOMIC = 1 << 13;
        /// `alt_ah_attr` and friends.
        const ALT_PATH = 1 << 14;
        /// `min_rnr_timer`.
        const MIN_RNR_TIMER = 1 << 15;
        /// `sq_psn`.
        const SQ_PSN = 1 << 16;
        /// `max_dest_rd_atomic`.
        const MAX_DEST_RD_ATOMIC = 1 << 17;
        /// `path_mig_state`.
        const PATH_MIG_STATE = 1 << 18;
        /// `cap`.
        const CAP = 1 << 19;
        /// `dest_qp_num`.
        const DEST_QPN = 1 << 20;
        /// `rate_limit` (packet pacing).
        const RATE_LIMIT = 1 << 25;
    }
}

c_mirrored! { $
    /// `struct ibv_qp_cap`: work queue sizes a QP is created with.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct QpCap mirrored by qp_cap_c_struct {
        /// Outstanding send work requests.
        pub max_send_wr: u32 => u32,
        /// Outstanding receive work requests.
        pub max_recv_wr: u32 => u32,
        /// SGEs per send work request.
        pub max_send_sge: u32 => u32,
        /// SGEs per receive work request.
        pub max_recv_sge: u32 => u32,
        /// Bytes of inline data per send work request.
        pub max_inline_data: u32 => u32,
    }
}

impl QpCap {
    /// Queue sizes without inline data.
    #[must_use]
    pub const fn new(
        max_send_wr: u32,
        max_recv_wr: u32,
        max_send_sge: u32,
        max_recv_sge: u32,
    ) -> Self {
        QpCap {
            max_send_wr,
            max_recv_wr,
            max_send_sge,
            max_recv_sge,
            max_inline_data: 0,
        }
    }

    /// The same sizes with `bytes` of inline data per send.
    #[must_use]
    pub const fn with_inline(self, bytes: u32) -> Self {
        QpCap {
            max_inline_data: bytes,
            ..self
        }
    }
}

/// `struct ibv_global_route`: the GRH part of an address vector (always used on RoCE).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct GlobalRoute {
    /// Destination GID (for RoCEv2 with IPv4: the IPv4-mapped address or group).
    pub dgid: Gid,
    /// Flow label.
    pub flow_label: u32,
    /// Index of the source GID in the local port's table.
    pub sgid_index: u8,
    /// Hop limit (IPv4 TTL on RoCEv2).
    pub hop_limit: u8,
    /// Traffic class (IPv4 DSCP/ECN on RoCEv2).
    pub traffic_class: u8,
}

/// `struct ibv_ah_attr`: an address vector, for AHs (UD) and for RC/UC's `AV`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AhAttr {
    /// Global routing (required on RoCE: `is_global` must be true).
    pub grh: GlobalRoute,
    /// Destination LID (InfiniBand only).
    pub dlid: u16,
    /// Service level.
    pub sl: u8,
    /// Source path bits.
    pub src_path_bits: u8,
    /// Static rate.
    pub static_rate: u8,
    /// Whether `grh` is valid.
    pub is_global: bool,
    /// Local port number (1-based).
    pub port_num: u8,
}

impl AhAttr {
    /// A RoCE address vector to `dgid` from source GID index `sgid_index` on `port_num`.
    pub fn roce(dgid: Gid, sgid_index: u8, port_num: u8) -> Self {
        AhAttr {
            grh: GlobalRoute {
                dgid,
                sgid_index,
                hop_limit: 64,
                ..GlobalRoute::default()
            },
            is_global: true,
            port_num,
            ..AhAttr::default()
        }
    }
}

c_mirrored! { $
    /// `struct ibv_qp_attr`. Only the fields named by the accompanying [`QpAttrMask`] matter.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub struct QpAttr mirrored by qp_attr_c_struct<cap, ah> {
        /// Target state of a modify.
        pub qp_state: QpState => u32,
        /// The state the caller believes the QP is in (with [`QpAttrMask::CUR_STATE`]).
        pub cur_qp_state: QpState => u32,
        /// Path MTU (RC, UC).
        pub path_mtu: Mtu => u32,
        /// Path migration state.
        pub path_mig_state: PathMigState => u32,
        /// Q_Key (UD).
        pub qkey: u32 => u32,
        /// Receive PSN (24 bits).
        pub rq_psn: u32 => u32,
        /// Send PSN (24 bits).
        pub sq_psn: u32 => u32,
        /// Destination QP number (RC, UC).
        pub dest_qp_num: u32 => u32,
        /// Remote access the QP allows (RC, UC).
        pub qp_access_flags: AccessFlags => u32,
        /// Queue sizes (query only on most devices).
        pub cap: QpCap => ($ cap),
        /// Primary path address vector.
        pub ah_attr: AhAttr => ($ ah),
        /// Alternate path address vector.
        pub alt_ah_attr: AhAttr => ($ ah),
        /// P_Key index.
        pub pkey_index: u16 => u16,
        /// Alternate P_Key index.
        pub alt_pkey_index: u16 => u16,
        /// Ask for the SQ-drained async event.
        pub en_sqd_async_notify: bool => u8,
        /// Whether the send queue is draining (query only).
        pub sq_draining: bool => u8,
        /// Outstanding RDMA READ/atomic as requester.
        pub max_rd_atomic: u8 => u8,
        /// Outstanding RDMA READ/atomic as responder.
        pub max_dest_rd_atomic: u8 => u8,
        /// Minimum RNR NAK timer code (0..=31).
        pub min_rnr_timer: u8 => u8,
        /// Port number (1-based).
        pub port_num: u8 => u8,
        /// Local ACK timeout code: 4.096 µs × 2^timeout (0 = infinite).
        pub timeout: u8 => u8,
        /// Transport retries (0..=7).
        pub retry_cnt: u8 => u8,
        /// RNR retries (0..=7; 7 means infinite).
        pub rnr_retry: u8 => u8,
        /// Alternate port.
        pub alt_port_num: u8 => u8,
        /// Alternate timeout.
        pub alt_timeout: u8 => u8,
        /// Packet pacing rate limit, kbps.
        pub rate_limit: u32 => u32,
    }
}

/// `struct ibv_qp_init_attr`: what a QP is created with. The CQs and SRQ are borrowed
/// only for the call; the created QP keeps them alive.
#[derive(Debug)]
pub struct QpInitAttr<'a, Cq, Srq> {
    /// Completion queue for send completions.
    pub send_cq: &'a Cq,
    /// Completion queue for receive completions.
    pub recv_cq: &'a Cq,
    /// Shared receive queue, if receives come from one.
    pub srq: Option<&'a Srq>,
    /// Queue sizes.
    pub cap: QpCap,
    /// Transport type.
    pub qp_type: QpType,
    /// Every send work request generates a completion, whatever its flags.
    pub sq_sig_all: bool,
}

impl<'a, Cq, Srq> QpInitAttr<'a, Cq, Srq> {
    /// A QP of `qp_type` using `cq` for both directions, with queue sizes `cap`.
    pub fn new(qp_type: QpType, cq: &'a Cq, cap: QpCap) -> Self {
        QpInitAttr {
            send_cq: cq,
            recv_cq: cq,
            srq: None,
            cap,
            qp_type,
            sq_sig_all: false,
        }
    }
}

/// A modify request that keeps the attribute mask in step with the fields it sets, so the
/// mask can't be forgotten (the most common `ibv_modify_qp` mistake).
///
/// ```
/// use verbs_api::{QpModify, QpState, QpAttrMask};
/// let m = QpModify::to(QpState::Init).pkey_index(0).port(1).qkey(0x1111_1111);
/// assert_eq!(m.mask, QpAttrMask::STATE | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT | QpAttrMask::QKEY);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QpModify {
    /// The attribute values.
    pub attr: QpAttr,
    /// Which of them are set.
    pub mask: QpAttrMask,
}

macro_rules! setter {
    ($(#[$m:meta])* $name:ident : $ty:ty => $field:ident, $flag:ident) => {
        $(#[$m])*
        #[must_use]
        pub fn $name(mut self, v: $ty) -> Self {
            self.attr.$field = v;
            self.mask |= QpAttrMask::$flag;
            self
        }
    };
}

impl QpModify {
    /// A modify to `state`.
    pub fn to(state: QpState) -> Self {
        QpModify {
            attr: QpAttr {
                qp_state: state,
                ..QpAttr::default()
            },
            mask: QpAttrMask::STATE,
        }
    }

    /// A modify that does not change the state (attributes only).
    pub fn attrs() -> Self {
        QpModify::default()
    }

    setter!(/// Sets `cur_qp_state`.
        cur_state: QpState => cur_qp_state, CUR_STATE);
    setter!(/// Sets `pkey_index`.
        pkey_index: u16 => pkey_index, PKEY_INDEX);
    setter!(/// Sets `port_num`.
        port: u8 => port_num, PORT);
    setter!(/// Sets `qkey`.
        qkey: u32 => qkey, QKEY);
    setter!(/// Sets `qp_access_flags`.
        access: AccessFlags => qp_access_flags, ACCESS_FLAGS);
    setter!(/// Sets `ah_attr`.
        av: AhAttr => ah_attr, AV);
    setter!(/// Sets `path_mtu`.
        path_mtu: Mtu => path_mtu, PATH_MTU);
    setter!(/// Sets `dest_qp_num`.
        dest_qpn: u32 => dest_qp_num, DEST_QPN);
    setter!(/// Sets `rq_psn`.
        rq_psn: u32 => rq_psn, RQ_PSN);
    setter!(/// Sets `sq_psn`.
        sq_psn: u32 => sq_psn, SQ_PSN);
    setter!(/// Sets `max_dest_rd_atomic`.
        max_dest_rd_atomic: u8 => max_dest_rd_atomic, MAX_DEST_RD_ATOMIC);
    setter!(/// Sets `max_rd_atomic`.
        max_rd_atomic: u8 => max_rd_atomic, MAX_QP_RD_ATOMIC);
    setter!(/// Sets `min_rnr_timer`.
        min_rnr_timer: u8 => min_rnr_timer, MIN_RNR_TIMER);
    setter!(/// Sets `timeout`.
        timeout: u8 => timeout, TIMEOUT);
    setter!(/// Sets `retry_cnt`.
        retry_cnt: u8 => retry_cnt, RETRY_CNT);
    setter!(/// Sets `rnr_retry`.
        rnr_retry: u8 => rnr_retry, RNR_RETRY);
    setter!(/// Sets `rate_limit`.
        rate_limit: u32 => rate_limit, RATE_LIMIT);
    setter!(/// Sets `en_sqd_async_notify`.
        en_sqd_async_notify: bool => en_sqd_async_notify, EN_SQD_ASYNC_NOTIFY);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_match_libibverbs() {
        assert_eq!(QpType::RawPacket.as_raw(), 8);
        assert_eq!(QpType::Ud.as_raw(), 4);
        assert_eq!(QpState::Err.as_raw(), 6);
        assert_eq!(QpState::Sqe.as_str(), "SQE");
        assert_eq!(QpAttrMask::DEST_QPN.bits(), 1 << 20);
        assert_eq!(QpAttrMask::RATE_LIMIT.bits(), 1 << 25);
        assert_eq!(QpAttrMask::MAX_DEST_RD_ATOMIC.bits(), 1 << 17);
    }

    #[test]
    fn modify_builder_tracks_mask() {
        let m = QpModify::to(QpState::Rts)
            .sq_psn(5)
            .timeout(14)
            .retry_cnt(7);
        assert_eq!(m.attr.qp_state, QpState::Rts);
        assert_eq!(m.attr.sq_psn, 5);
        assert_eq!(
            m.mask,
            QpAttrMask::STATE | QpAttrMask::SQ_PSN | QpAttrMask::TIMEOUT | QpAttrMask::RETRY_CNT
        );
        assert_eq!(QpModify::attrs().qkey(3).mask, QpAttrMask::QKEY);
    }

    qp_cap_c_struct! {
        /// A C-shaped twin with libibverbs' field names, as backend-hw declares.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        struct CCap {}
    }

    qp_attr_c_struct! {
        struct CAttr<cap = CCap, ah = AhAttr> {
            pad: u8,
        }
    }

    fn cap_to(c: &QpCap) -> CCap {
        crate::qp_cap_fields!(to CCap, c)
    }

    fn cap_from(c: &CCap) -> QpCap {
        crate::qp_cap_fields!(from c)
    }

    #[test]
    fn qp_attr_round_trips_through_a_c_shaped_struct() {
        let a = QpAttr {
            qp_state: QpState::Rts,
            path_mtu: Mtu::Mtu2048,
            path_mig_state: PathMigState::Rearm,
            dest_qp_num: 0x12,
            sq_psn: 0xabcdef,
            cap: QpCap {
                max_send_wr: 7,
                max_recv_wr: 9,
                max_send_sge: 2,
                max_recv_sge: 3,
                max_inline_data: 64,
            },
            ah_attr: AhAttr::roce(Gid([5; 16]), 1, 1),
            sq_draining: true,
            timeout: 14,
            rate_limit: 100,
            ..QpAttr::default()
        };
        let c = crate::qp_attr_fields!(to CAttr, &a, cap: cap_to, ah: |x: &AhAttr| *x, pad: 0);
        assert_eq!((c.qp_state, c.sq_draining, c.pad), (3, 1, 0));
        let back = crate::qp_attr_fields!(
            from &c, cap: cap_from, ah: |x: &AhAttr| *x,
            qp_state: QpState::from_raw(c.qp_state).unwrap(),
            cur_qp_state: QpState::from_raw(c.cur_qp_state).unwrap(),
            path_mtu: Mtu::from_raw(c.path_mtu).unwrap(),
            path_mig_state: PathMigState::from_raw(c.path_mig_state).unwrap(),
        );
        assert_eq!(back, a);
    }
}
