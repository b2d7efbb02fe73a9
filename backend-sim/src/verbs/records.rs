//! The NIC-side record of each verbs object (device, context, CQ, channel, SRQ, QP, flow
//! rule) and the NIC's drop counters: plain data, kept in the [`super::world::World`]'s
//! tables and changed by its operations.

use super::personality::Personality;
use super::rc::RcState;
use super::send_queue::SendQueue;
use super::wqe::RecvWqe;
use crate::frame::eth::Mac;
use crate::ids::{HostId, PortId};
use std::collections::{BTreeMap, VecDeque};
use std::net::Ipv4Addr;
use verbs_api::{
    AsyncEvent, Completion, DeviceInfo, FlowAttr, FlowMatcher, NodeType, QpAttr, QpCap, QpState,
    QpType, RxHashConf, SrqAttr, StridingRqAttr, TransportType, WqState,
};

/// Counters of why a NIC dropped a frame it received.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NicStats {
    /// Frames for a QP with no receive posted (RAW, UD; the receive-buffer overrun).
    pub rx_no_wqe: u64,
    /// UD frames whose Q_Key did not match.
    pub rx_qkey_violation: u64,
    /// Frames no QP or rule wanted.
    pub rx_unclaimed: u64,
    /// UD messages dropped because the receive buffer was too small (rxe).
    pub rx_too_long: u64,
    /// Frames that did not parse.
    pub rx_malformed: u64,
    /// RC/UC packets dropped as out of sequence or duplicate.
    pub rx_out_of_sequence: u64,
}

impl NicStats {
    /// Adds another NIC's counters.
    pub(crate) fn add(&mut self, o: &NicStats) {
        self.rx_no_wqe += o.rx_no_wqe;
        self.rx_qkey_violation += o.rx_qkey_violation;
        self.rx_unclaimed += o.rx_unclaimed;
        self.rx_too_long += o.rx_too_long;
        self.rx_malformed += o.rx_malformed;
        self.rx_out_of_sequence += o.rx_out_of_sequence;
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Device {
    pub host: HostId,
    pub name: String,
    pub personality: Personality,
    pub port: PortId,
    pub mac: Mac,
    pub ip: Ipv4Addr,
    pub guid: u64,
    /// Multicast group -> attached UD QPs, sorted.
    pub mcast: BTreeMap<Ipv4Addr, Vec<u32>>,
    /// Flow rule ids on the port, sorted by (priority, id).
    pub flows: Vec<u32>,
    pub stats: NicStats,
}

impl Device {
    /// What `ibv_get_device_list` tells about it.
    pub(crate) fn info(&self) -> DeviceInfo {
        DeviceInfo {
            name: self.name.clone(),
            guid: self.guid,
            node_type: NodeType::Ca,
            transport_type: TransportType::Ib,
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Ctx {
    pub events: VecDeque<AsyncEvent>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arm {
    None,
    Next,
    Solicited,
}

#[derive(Debug, Clone)]
pub(crate) struct Cq {
    pub ctx: u32,
    pub personality: Personality,
    pub cqe: u32,
    pub entries: VecDeque<Cqe>,
    pub channel: Option<u32>,
    pub arm: Arm,
    pub unacked: u32,
    pub broken: bool,
}

/// A completion in a CQ, and the send-queue slots polling it gives back to its QP (mlx5;
/// see [`super::send_queue`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Cqe {
    pub wc: Completion,
    pub frees: u32,
}

#[derive(Debug, Default, Clone)]
pub(crate) struct Channel {
    pub events: VecDeque<u32>,
}

#[derive(Debug, Clone)]
pub(crate) struct Srq {
    pub ctx: u32,
    pub pd: u32,
    pub attr: SrqAttr,
    pub queue: VecDeque<RecvWqe>,
}

#[derive(Debug, Clone)]
pub(crate) struct Qp {
    pub ctx: u32,
    pub dev: usize,
    pub qp_type: QpType,
    pub pd: u32,
    pub send_cq: u32,
    pub recv_cq: u32,
    pub srq: Option<u32>,
    pub cap: QpCap,
    pub sq_sig_all: bool,
    pub state: QpState,
    pub attr: QpAttr,
    pub rq: VecDeque<RecvWqe>,
    pub groups: Vec<Ipv4Addr>,
    /// Next PSN of UD sends.
    pub ud_psn: u32,
    /// RC/UC protocol state.
    pub rc: Option<Box<RcState>>,
    /// Sends completing after the post (UD, RAW, flushes) and mlx5's unreclaimed slots.
    pub sq: SendQueue,
    /// An RSS QP's indirection table and hash (see [`super::wq`]).
    pub rss: Option<Box<Rss>>,
}

#[derive(Debug, Clone)]
pub(crate) struct FlowRule {
    pub qpn: u32,
    pub dev: usize,
    pub attr: FlowAttr,
    /// The specs compiled for the receive path.
    pub matcher: FlowMatcher,
    /// IPv4 groups the rule's port joins at the switch.
    pub groups: Vec<Ipv4Addr>,
    /// Ethernet groups joined for rules that name only a multicast MAC.
    pub mac_groups: Vec<Mac>,
}

/// The NIC's record of a WQ.
#[derive(Debug, Clone)]
pub(crate) struct Wq {
    pub dev: usize,
    pub pd: u32,
    pub cq: u32,
    pub max_wr: u32,
    pub max_sge: u32,
    pub state: WqState,
    pub striding: Option<StridingRqAttr>,
    pub queue: VecDeque<RecvWqe>,
    /// Strides of the front WQE already used (striding WQs).
    pub consumed: u32,
}

/// The NIC's record of an indirection table: its WQs' numbers.
#[derive(Debug, Clone)]
pub(crate) struct IndTable {
    pub wqs: Vec<u32>,
}

/// What makes a RAW_PACKET QP an RSS QP: its table and hash.
#[derive(Debug, Clone)]
pub(crate) struct Rss {
    pub table: u32,
    pub hash: RxHashConf,
}
