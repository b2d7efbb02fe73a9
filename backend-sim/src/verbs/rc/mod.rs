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

mod nic;
mod psn;
mod requester;
mod responder;
#[cfg(test)]
mod tests;

use super::wqe::WrCopy;
use crate::frame::roce::{opcode as op, RocePacket};
pub(crate) use nic::{Count, Nic, QpView, Timer};
use requester::Requester;
use responder::Responder;
use verbs_api::QpState;

/// Per-QP RC/UC protocol state.
#[derive(Debug, Default, Clone)]
pub(crate) struct RcState {
    req: Requester,
    resp: Responder,
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
        self.resp.reset();
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
        if kind == Timer::ReadReply as u64 {
            self.resp.on_read_timer(nic, &mut self.req, gen);
        } else {
            self.req.on_timer(nic, kind, gen);
        }
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
