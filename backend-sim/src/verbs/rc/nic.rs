//! What the RC/UC machine sees of the NIC around it: the [`Nic`] it is driven through,
//! the QP's attributes as it sees them, its counters and its timers.

use crate::clock::Nanos;
use crate::frame::roce::RoceHeaders;
use crate::verbs::memory::MrTable;
use crate::verbs::personality::Personality;
use crate::verbs::wqe::RecvWqe;
use verbs_api::{Completion, EventType, QpAttr, QpState, WcStatus};

/// The QP as the machine sees it at one moment (the verbs layer owns the attributes).
#[derive(Debug, Clone, Copy)]
pub(crate) struct QpView {
    pub qpn: u32,
    pub state: QpState,
    /// UC rather than RC.
    pub uc: bool,
    pub pd: u32,
    pub sig_all: bool,
    pub max_send_wr: u32,
    pub attr: QpAttr,
    /// The device's personality, where rxe and mlx5 differ.
    pub personality: Personality,
}

impl QpView {
    /// What the key table needs to check a remote access arriving at this QP.
    pub fn remote_at(&self) -> crate::verbs::memory::RemoteAt {
        crate::verbs::memory::RemoteAt {
            pd: self.pd,
            qpn: self.qpn,
            rules: self.personality.mw_rules(),
        }
    }
}

/// Receive-side counters the machine bumps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Count {
    /// A message found no receive posted (RNR).
    NoWqe,
    /// A packet out of sequence or a duplicate.
    OutOfSequence,
}

/// Which timer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Timer {
    /// The local ACK timeout.
    Ack = 1,
    /// The wait after an RNR NAK.
    Rnr = 2,
    /// The responder's next turn of READ responses.
    ReadReply = 3,
}

/// What the machine needs from the NIC around it: its inputs (time, the QP's attributes,
/// the key table, the receive queue) and its outputs.
pub(crate) trait Nic {
    /// Virtual time now.
    fn now(&self) -> Nanos;
    /// The QP's current attributes and state.
    fn qp(&self) -> QpView;
    /// The path MTU in bytes (the smaller of the QP's and the port's).
    fn path_mtu(&self) -> usize;
    /// The key table of registered memory.
    fn mrs(&self) -> &MrTable;
    /// The key table, to bind, invalidate and unbind memory windows.
    fn mrs_mut(&mut self) -> &mut MrTable;
    /// Maps a key-table verdict to what the device reports (a bad lkey differs).
    fn local_status(&self, s: WcStatus) -> WcStatus;
    /// Takes the next receive WQE (the QP's RQ or its SRQ) and the PD it was posted in.
    fn take_recv(&mut self) -> Option<(RecvWqe, u32)>;
    /// Puts back a receive WQE that could not be used.
    fn untake_recv(&mut self, w: RecvWqe);
    /// Sends a packet to the connected peer (the NIC fills in the destination QP, P_Key
    /// and addresses); the length of the frame it made, in bytes.
    fn transmit(&mut self, h: RoceHeaders, payload: &[u8]) -> usize;
    /// How long the port's link takes to put a frame of `bytes` on the wire.
    fn wire_ns(&self, bytes: usize) -> Nanos;
    /// A send WQE leaves the queue with a completion on the send CQ.
    fn complete_send(&mut self, wc: Completion);
    /// A send WQE leaves the queue without a completion (an unsignaled success).
    fn retire_unsignaled(&mut self);
    /// A completion on the receive CQ (`solicited` for the solicited event).
    fn complete_recv(&mut self, wc: Completion, solicited: bool);
    /// Asks for [`RcState::on_completer`](super::RcState::on_completer) at the simulation's next step.
    fn completer_due(&mut self);
    /// Asks for [`RcState::on_timer`](super::RcState::on_timer) with `(kind, gen)` at `at`.
    fn set_timer(&mut self, at: Nanos, kind: Timer, gen: u32);
    /// An affiliated asynchronous event on the QP.
    fn event(&mut self, e: EventType);
    /// Moves the QP to ERR and flushes its receive queue; false if it already was there.
    /// (The machine flushes its own send queue.)
    fn enter_error(&mut self) -> bool;
    /// Bumps a receive counter.
    fn count(&mut self, c: Count);
}
