//! READ responses sent as the link takes them, as rxe's responder sends them
//! (drivers/infiniband/sw/rxe/rxe_resp.c, `read_reply`): one response packet per pass of
//! the responder task, read from registered memory when it is sent (the rkey checked
//! again each time, `rxe_recheck_mr`), the READ request left at the head of the request
//! queue until its last response has gone, so the requests after it wait their turn
//! (`get_req` returns READ_REPLY while `qp->resp.res` is set) and every response leaves
//! in request order. A duplicate READ (`duplicate_request`) is answered again from the
//! PSN it names, when its turn comes (one the same as a request still queued is not
//! queued again: see `Responder::on_request`).
//!
//! Here a turn sends at most `READ_BATCH` (16) responses, then the machine asks for the next
//! turn once the link has had the time to put them on the wire (their serialization time
//! at the port's bandwidth, [`Nic::wire_ns`]) in the simulation's virtual time. A READ of
//! 8 MiB (2048 packets of 4096 bytes) thus leaves 16 packets at a time instead of all at
//! once: nothing floods the link or the peer's ring, and the emulator's host, whose
//! virtual time stands still while its ring to the fabric is full, sends no more than the
//! ring takes.

use super::super::nic::{Nic, Timer};
use super::super::psn::psn_add;
use super::super::requester::Requester;
use super::{ReadReply, Responder, Turn};
use crate::frame::roce::{opcode as op, syndrome, Aeth, Bth, RoceHeaders, RocePacket};
use crate::verbs::memory;
use verbs_api::{AccessFlags, QpState};

impl Responder {
    /// Starts answering a READ (the access was checked for the whole length): within the
    /// turn under way, if any, else in a turn of its own at once; the rest as the link
    /// takes it.
    pub(super) fn start_read(&mut self, nic: &mut impl Nic, req: &mut Requester, r: ReadReply) {
        self.reading = Some(r);
        let mut turn = self.turn.take().unwrap_or_default();
        self.read_turn(nic, req, &mut turn);
        if self.in_turn {
            self.turn = Some(turn);
        }
    }

    /// The responder's turn a [`Timer::ReadReply`] asked for: the next responses of the
    /// READ being answered, then (once it is done) the requests that waited behind it,
    /// in order, until one of them is a READ that must wait for the next turn.
    pub fn on_read_timer(&mut self, nic: &mut impl Nic, req: &mut Requester, gen: u32) {
        if gen != self.read_gen {
            return;
        }
        self.read_gen = self.read_gen.wrapping_add(1);
        let mut turn = Turn::default();
        self.read_turn(nic, req, &mut turn);
        self.in_turn = true;
        self.turn = Some(turn);
        while self.reading.is_none() {
            let Some((headers, payload)) = self.waiting.pop_front() else {
                break;
            };
            let pkt = RocePacket {
                headers,
                payload: &payload,
            };
            self.handle(nic, &pkt, req);
        }
        self.in_turn = false;
        self.turn = None;
    }

    /// Sends what is left of the turn's budget of responses of the READ being answered;
    /// asks for another turn, once the link has sent this one's, if some are left. A QP
    /// out of RTR/RTS/SQD (in ERR) sends nothing and drops what waited (rxe's `get_req`
    /// drains the request queue in the error state).
    fn read_turn(&mut self, nic: &mut impl Nic, req: &mut Requester, turn: &mut Turn) {
        let qp = nic.qp();
        if !matches!(qp.state, QpState::Rtr | QpState::Rts | QpState::Sqd) {
            self.reading = None;
            self.waiting.clear();
            return;
        }
        let mtu = nic.path_mtu() as u64;
        let mut data = std::mem::take(&mut self.read_buf);
        while let Some(r) = self.reading.as_mut() {
            if turn.budget == 0 {
                self.read_gen = self.read_gen.wrapping_add(1);
                let at = nic.now() + turn.wire.max(1);
                nic.set_timer(at, Timer::ReadReply, self.read_gen);
                break;
            }
            turn.budget -= 1;
            let len = r.left.min(mtu);
            // rxe_recheck_mr: the memory may have been deregistered or its window
            // invalidated since the request was checked.
            let span = nic.mrs().check_remote_at(
                qp.remote_at(),
                r.rkey,
                r.va,
                len,
                AccessFlags::REMOTE_READ,
            );
            let Some(span) = span else {
                let psn = r.psn;
                self.reading = None;
                self.waiting.clear();
                self.nak(nic, req, psn, syndrome::NAK_REMOTE_ACCESS_ERROR);
                break;
            };
            data.clear();
            // SAFETY: `span` was checked against the key table with REMOTE_READ just
            // above, for exactly the bytes read.
            unsafe { memory::read_span(span, &mut data) };
            let last = r.left <= mtu;
            let opcode = match (r.fresh, last) {
                (true, true) => op::READ_RESPONSE_ONLY,
                (true, false) => op::READ_RESPONSE_FIRST,
                (false, false) => op::READ_RESPONSE_MIDDLE,
                (false, true) => op::READ_RESPONSE_LAST,
            };
            let aeth = (r.fresh || last).then_some(Aeth {
                syndrome: syndrome::ACK_NO_CREDITS,
                msn: self.msn,
            });
            let h = RoceHeaders {
                bth: Bth {
                    opcode,
                    psn: r.psn,
                    ..Bth::default()
                },
                aeth,
                ..RoceHeaders::default()
            };
            r.fresh = false;
            r.psn = psn_add(r.psn, 1);
            r.va += len;
            r.left -= len;
            if last {
                self.reading = None;
            }
            let bytes = nic.transmit(h, &data);
            turn.wire += nic.wire_ns(bytes);
        }
        self.read_buf = data;
    }
}
