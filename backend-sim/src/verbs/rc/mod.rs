//! The connected transports, RC and UC, as the IB spec (ch. 9.7) and the rxe driver run
//! them: PSNs, segmentation at the path MTU, ACK/NAK with MSN, go-back-N retransmission on
//! the ACK timeout (`timeout`, `retry_cnt`), RNR NAK and retry (`min_rnr_timer`,
//! `rnr_retry`, 7 = infinite), duplicate detection, RDMA WRITE/READ and 8-byte atomics
//! against registered memory. UC is the same engine without ACKs or retries.
//!
//! [`RcState`] is a sans-IO state machine in the manner of quinn-proto's `Connection`:
//! packets (parsed BTH and extension headers with their payload), posted work and timer
//! expiries go in; packets to send, completions, timers and async events come out through
//! the [`Nic`] the caller passes, which is also how the machine reaches registered memory
//! and the receive queue. It never sees frames, the fabric or other QPs, so two of them can
//! be driven against each other in virtual time (see the `tests` module). The requester
//! (send queue, ACKs, retries) and the responder (receive side, duplicates, READ and
//! atomic responses) live in files of their own; [`psn`] holds the sequence arithmetic.

mod psn;
mod requester;
mod responder;
#[cfg(test)]
mod tests;

use super::memory::MrTable;
use super::personality::Personality;
use super::wqe::{completion, RecvWqe, WrCopy};
use crate::clock::Nanos;
use crate::frame::roce::{opcode as op, RoceHeaders, RocePacket};
use requester::Requester;
use responder::Responder;
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
    /// and addresses).
    fn transmit(&mut self, h: RoceHeaders, payload: &[u8]);
    /// A send WQE leaves the queue with a completion on the send CQ.
    fn complete_send(&mut self, wc: Completion);
    /// A send WQE leaves the queue without a completion (an unsignaled success).
    fn retire_unsignaled(&mut self);
    /// A completion on the receive CQ (`solicited` for the solicited event).
    fn complete_recv(&mut self, wc: Completion, solicited: bool);
    /// Asks for [`RcState::on_completer`] at the simulation's next step.
    fn completer_due(&mut self);
    /// Asks for [`RcState::on_timer`] with `(kind, gen)` at `at`.
    fn set_timer(&mut self, at: Nanos, kind: Timer, gen: u32);
    /// An affiliated asynchronous event on the QP.
    fn event(&mut self, e: EventType);
    /// Moves the QP to ERR and flushes its receive queue; false if it already was there.
    /// (The machine flushes its own send queue.)
    fn enter_error(&mut self) -> bool;
    /// Bumps a receive counter.
    fn count(&mut self, c: Count);
}

/// Per-QP RC/UC protocol state.
#[derive(Debug, Default, Clone)]
pub(crate) struct RcState {
    req: Requester,
    resp: Responder,
}

/// Moves the QP to ERR: the NIC flushes the receive side, the requester its send queue.
fn enter_error(nic: &mut impl Nic, req: &mut Requester) {
    if nic.enter_error() {
        let qpn = nic.qp().qpn;
        for (wr_id, opcode) in req.take_outstanding() {
            nic.complete_send(completion(wr_id, WcStatus::WrFlushErr, opcode, qpn));
        }
    }
}

impl RcState {
    /// Every WQE still on the send queue, for the WR_FLUSH_ERR completions of a QP that
    /// enters ERR from outside the machine; timers are disarmed.
    pub fn take_outstanding(&mut self) -> Vec<(u64, verbs_api::WcOpcode)> {
        self.req.take_outstanding()
    }

    /// RESET: back to the initial state (stale timers are recognised by their generation).
    pub fn reset(&mut self) {
        self.req.reset();
        self.resp = Responder::default();
    }

    /// INIT -> RTR: the expected request PSN.
    pub fn set_rq_psn(&mut self, psn: u32) {
        self.resp.set_epsn(psn);
    }

    /// RTR -> RTS: the first PSN to send.
    pub fn set_sq_psn(&mut self, psn: u32) {
        self.req.set_next_psn(psn);
    }

    /// The current send and receive PSNs, as query_qp reports them.
    pub fn psns(&self) -> (u32, u32) {
        (self.req.next_psn(), self.resp.epsn())
    }

    /// RTR -> RTS: the retry budgets.
    pub fn set_retries(&mut self, retry: u8, rnr: u8) {
        self.req.set_retries(retry, rnr);
    }

    /// True if nothing sent is outstanding; otherwise remembers to report the drain.
    pub fn arm_drain_notify(&mut self) -> bool {
        self.req.arm_drain_notify()
    }

    /// Send WQEs on the queue (posted, not yet completed).
    pub fn queued(&self) -> usize {
        self.req.queued()
    }

    /// Queues a send WR and transmits what the state allows.
    ///
    /// # Errors
    /// QueueFull when the send queue holds `max_send_wr` WQEs.
    pub fn post(&mut self, nic: &mut impl Nic, wr: WrCopy) -> verbs_api::Result<()> {
        self.req.post(nic, wr)
    }

    /// SQD -> RTS: transmits what was queued meanwhile.
    pub fn resume(&mut self, nic: &mut impl Nic) {
        self.req.pump(nic);
    }

    /// The completer's turn asked for through [`Nic::completer_due`]: UC WQEs sent since
    /// complete (rxe completes a UC WQE after the post, as a UD one: see `send_queue`).
    pub fn on_completer(&mut self, nic: &mut impl Nic) {
        self.req.on_completer(nic);
    }

    /// A timer set through [`Nic::set_timer`] came due.
    pub fn on_timer(&mut self, nic: &mut impl Nic, kind: u64, gen: u32) {
        self.req.on_timer(nic, kind, gen);
    }

    /// A packet for this QP: responses go to the requester, requests to the responder.
    pub fn on_packet(&mut self, nic: &mut impl Nic, pkt: &RocePacket<'_>) {
        let o = pkt.headers.bth.opcode & 0x1f;
        if matches!(
            o,
            op::ACKNOWLEDGE
                | op::ATOMIC_ACKNOWLEDGE
                | op::READ_RESPONSE_FIRST
                | op::READ_RESPONSE_MIDDLE
                | op::READ_RESPONSE_LAST
                | op::READ_RESPONSE_ONLY
        ) {
            if matches!(nic.qp().state, QpState::Rts | QpState::Sqd) {
                self.req.on_response(nic, pkt);
            }
        } else {
            self.resp.on_request(nic, pkt, &mut self.req);
        }
    }
}
