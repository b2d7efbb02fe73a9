//! The requester: the send queue, segmentation at the path MTU, the ACK timer and
//! go-back-N retransmission, RNR waits, and the responses (ACK, NAK, READ data, atomic
//! results) that complete WQEs in order.
//!
//! Every response that comes, taken or not (a duplicate READ response after a retry, one
//! past a response lost), starts the ACK timer again while something is outstanding, as
//! rxe's completer does each time it has handled the packets that came (rxe_comp.c,
//! `COMPST_EXIT`: `reset_retry_timer` / `mod_timer(&qp->retrans_timer, ...)`): a
//! responder still answering is alive, and the timer fires only when the responses
//! stop.
//!
//! Retransmission starts where the responder stopped, as rxe's does (rxe_req.c
//! `req_retry`, from the completer's PSN `comp.psn`): inside the oldest outstanding
//! message at the first packet not acknowledged (the PSN a sequence-error NAK names), a
//! READ for the part not yet received; the messages after it whole. With the rxe
//! personality, a sequence-error NAK that comes while a retry is under way (no positive
//! response has moved the acknowledged PSN since it started) starts no other (rxe_comp.c
//! `comp.started_retry`); the ACK timer still does. At most max_rd_atomic READs and atomics are in flight, and with
//! the rxe personality a WQE waits while it would start more than 128 PSNs beyond the
//! first unacknowledged one (rxe's send window, checked per WQE, not per packet).

mod retry;

use super::nic::{Nic, Timer};
use super::psn::{ack_timeout_ns, psn_add, psn_cmp, rnr_ns, PSN_MASK};
use crate::frame::roce::{opcode as op, syndrome, AtomicEth, Bth, Reth, RoceHeaders, RocePacket};
use crate::verbs::memory;
use crate::verbs::personality::Personality;
use crate::verbs::wqe::{completion, WrCopy};
use std::collections::VecDeque;
use verbs_api::{EventType, QpState, SendFlags, SendOpcode, WcOpcode, WcStatus};

/// rxe's send window in PSNs (rxe_param.h `RXE_MAX_UNACKED_PSNS`).
const RXE_MAX_UNACKED_PSNS: u32 = 128;

#[derive(Debug, Clone)]
struct SendWqe {
    wr: WrCopy,
    first_psn: u32,
    npsn: u32,
    sent: bool,
    done: bool,
    data: Vec<u8>,
    read_next: u32,
}

impl SendWqe {
    fn last_psn(&self) -> u32 {
        psn_add(self.first_psn, self.npsn.max(1) - 1)
    }
    fn completion_opcode(&self) -> WcOpcode {
        self.wr.opcode.completion_opcode()
    }
    fn outstanding(&self) -> bool {
        self.sent && !self.done
    }
}

/// The requester's state.
#[derive(Debug, Default, Clone)]
pub(super) struct Requester {
    sq: VecDeque<SendWqe>,
    next_psn: u32,
    retry_left: u8,
    rnr_left: u8,
    /// Generation of the RNR wait timer (a newer wait or a reset makes old ones stale).
    timer_gen: u32,
    /// When the ACK timer expires (0: disarmed). Re-arming only moves the deadline; at most
    /// one timer event per QP is in the queue, so ACK-heavy runs do not flood it.
    ack_deadline: u64,
    ack_timer_pending: bool,
    drain_notify: bool,
    /// UC: the completer's turn is asked for.
    completer_due: bool,
    /// The first PSN not yet acknowledged, as far as the responses said (rxe's
    /// `comp.psn`); used only while it lies inside the oldest outstanding WQE.
    comp_psn: u32,
    /// A retry is under way and no positive response has moved `comp_psn` since (rxe's
    /// `comp.started_retry`).
    retrying: bool,
}

/// The opcode of packet `k` of a SEND or WRITE message.
fn segment_opcode(write: bool, first: bool, last: bool, imm: bool) -> u8 {
    match (write, first, last, imm) {
        (false, true, true, false) => op::SEND_ONLY,
        (false, true, true, true) => op::SEND_ONLY_IMM,
        (false, true, false, _) => op::SEND_FIRST,
        (false, false, false, _) => op::SEND_MIDDLE,
        (false, false, true, false) => op::SEND_LAST,
        (false, false, true, true) => op::SEND_LAST_IMM,
        (true, true, true, false) => op::WRITE_ONLY,
        (true, true, true, true) => op::WRITE_ONLY_IMM,
        (true, true, false, _) => op::WRITE_FIRST,
        (true, false, false, _) => op::WRITE_MIDDLE,
        (true, false, true, false) => op::WRITE_LAST,
        (true, false, true, true) => op::WRITE_LAST_IMM,
    }
}

impl Requester {
    pub fn take_outstanding(&mut self) -> Vec<(u64, WcOpcode)> {
        self.timer_gen = self.timer_gen.wrapping_add(1);
        self.ack_deadline = 0;
        self.completer_due = false;
        self.sq
            .drain(..)
            .map(|w| (w.wr.wr_id, w.completion_opcode()))
            .collect()
    }

    pub fn reset(&mut self) {
        *self = Requester {
            timer_gen: self.timer_gen.wrapping_add(1),
            ack_timer_pending: self.ack_timer_pending,
            ..Requester::default()
        };
    }

    /// WQEs on the send queue.
    pub fn queued(&self) -> usize {
        self.sq.len()
    }

    /// The PSN the next new packet will carry (what query_qp reports as sq_psn).
    pub fn next_psn(&self) -> u32 {
        self.next_psn
    }

    pub fn set_next_psn(&mut self, psn: u32) {
        self.next_psn = psn & PSN_MASK;
        self.comp_psn = self.next_psn;
    }

    pub fn set_retries(&mut self, retry: u8, rnr: u8) {
        self.retry_left = retry;
        self.rnr_left = rnr;
    }

    pub fn arm_drain_notify(&mut self) -> bool {
        let drained = !self.sq.iter().any(|w| w.sent);
        self.drain_notify = !drained;
        drained
    }

    pub fn post(&mut self, nic: &mut impl Nic, wr: WrCopy) -> verbs_api::Result<()> {
        if self.sq.len() >= nic.qp().max_send_wr as usize {
            return Err(verbs_api::Error::new(
                verbs_api::ErrorKind::QueueFull,
                "ibv_post_send",
                "the send queue is full",
            )
            .with_errno(12));
        }
        self.sq.push_back(SendWqe {
            wr,
            first_psn: 0,
            npsn: 0,
            sent: false,
            done: false,
            data: Vec::new(),
            read_next: 0,
        });
        self.pump(nic);
        Ok(())
    }

    /// Transmits every WQE not yet sent, in order, while the QP is in RTS.
    pub fn pump(&mut self, nic: &mut impl Nic) {
        loop {
            let mtu = nic.path_mtu();
            let qp = nic.qp();
            if qp.state != QpState::Rts {
                return;
            }
            let Some(i) = self.sq.iter().position(|w| !w.sent) else {
                break;
            };
            // A fenced WQE waits until every READ and atomic before it has completed.
            let fenced = self.sq[i].wr.flags.contains(SendFlags::FENCE)
                && self.sq.iter().take(i).any(|p| {
                    !p.done && (p.wr.opcode == SendOpcode::RdmaRead || p.wr.opcode.is_atomic())
                });
            if fenced {
                return;
            }
            if self.sq[i].wr.opcode.is_local() {
                // BIND_MW and LOCAL_INV run on the device when the requester reaches them
                // (rxe's `rxe_do_local_ops`): no packet, no PSN; done at once, completed
                // in order. A failure completes the WQE in error and moves the QP to ERR.
                let wr = &self.sq[i].wr;
                let done = match (wr.opcode, wr.bind, wr.inv) {
                    (SendOpcode::BindMw, Some(b), _) => nic.mrs_mut().bind_mw(qp.qpn, qp.pd, &b),
                    (_, _, Some(rkey)) => nic
                        .mrs_mut()
                        .invalidate(rkey)
                        .map_err(|()| WcStatus::LocQpOpErr),
                    _ => Err(WcStatus::LocQpOpErr),
                };
                if let Err(s) = done {
                    self.fail(nic, i, s);
                    return;
                }
                let w = &mut self.sq[i];
                w.first_psn = self.next_psn;
                w.sent = true;
                w.done = true;
                continue;
            }
            let w = &self.sq[i];
            let sges = w.wr.sges.as_slice();
            let is_read = w.wr.opcode == SendOpcode::RdmaRead;
            let is_atomic = w.wr.opcode.is_atomic();
            if qp.uc && (is_read || is_atomic || w.wr.opcode == SendOpcode::SendWithInv) {
                // rxe takes the post and fails the WQE: UC has no such operation.
                self.fail(nic, i, WcStatus::LocQpOpErr);
                return;
            }
            // rxe issues no READ or atomic with max_rd_atomic 0 (the request waits for
            // ever), and looks at their local buffers only when the response arrives.
            let rxe = qp.personality == Personality::Rxe;
            if rxe && (is_read || is_atomic) && qp.attr.max_rd_atomic == 0 {
                return;
            }
            // At most max_rd_atomic READs and atomics outstanding; the next one, and every
            // WQE after it, waits for a response (rxe_req.c: `rd_atomic` counts them down;
            // the IB spec's initiator depth). A responder keeps only max_dest_rd_atomic
            // of them to answer duplicates from: one more in flight, and a lost response
            // could never be answered again.
            let in_flight = self
                .sq
                .iter()
                .filter(|p| {
                    p.outstanding()
                        && (p.wr.opcode == SendOpcode::RdmaRead || p.wr.opcode.is_atomic())
                })
                .count();
            // (`break`, not `return`: what went out in this call still arms the ACK timer.)
            if (is_read || is_atomic) && in_flight >= usize::from(qp.attr.max_rd_atomic.max(1)) {
                break;
            }
            // rxe's send window: no packet more than 128 PSNs beyond the first
            // unacknowledged one (rxe_req.c, RXE_MAX_UNACKED_PSNS). rxe stops packet by
            // packet, inside a message too, and asks for an ACK every 64 packets; here a
            // WQE waits whole, so up to one WQE's packets go beyond the window.
            if rxe
                && !qp.uc
                && self.sq.iter().any(SendWqe::outstanding)
                && psn_cmp(self.next_psn, psn_add(self.comp_psn, RXE_MAX_UNACKED_PSNS)) > 0
            {
                break;
            }
            let checked = if w.wr.inline.is_some() {
                Ok(0)
            } else if rxe && (is_read || is_atomic) {
                Ok(sges.iter().map(|s| u64::from(s.length)).sum())
            } else {
                nic.mrs().check_local(qp.pd, sges, is_read || is_atomic)
            };
            let total = match checked {
                Err(s) => {
                    let s = nic.local_status(s);
                    self.fail(nic, i, s);
                    return;
                }
                Ok(t) => t,
            };
            // rxe takes an atomic SGE of 8 bytes or more (shorter ones are refused at post).
            if is_atomic && (total < 8 || (total != 8 && !rxe)) {
                self.fail(nic, i, WcStatus::LocLenErr);
                return;
            }
            let mut data = Vec::new();
            if let Some(d) = &w.wr.inline {
                data.extend_from_slice(d);
            } else if !is_read && !is_atomic {
                // SAFETY: the SGEs passed the key-table check just above.
                unsafe { memory::gather(sges, &mut data) };
            }
            let len = if is_read { total as usize } else { data.len() };
            let npsn = if is_atomic {
                1
            } else {
                len.div_ceil(mtu).max(1) as u32
            };
            if !self.sq.iter().any(SendWqe::outstanding) {
                // Everything before it is acknowledged: `comp.psn` catches up.
                self.comp_psn = self.next_psn;
            }
            let w = &mut self.sq[i];
            w.first_psn = self.next_psn;
            w.npsn = npsn;
            w.sent = true;
            w.data = data;
            self.next_psn = psn_add(self.next_psn, npsn);
            self.transmit_wqe(nic, i, mtu, qp.uc, 0);
            if qp.uc && !self.completer_due {
                // UC needs no ACK: the WQE is done once sent, and the completer makes its
                // completion after the post (rxe_xmit_packet, as for UD).
                self.completer_due = true;
                nic.completer_due();
            }
        }
        if !nic.qp().uc {
            self.arm_timer(nic);
        }
        self.complete_done(nic);
    }

    /// Builds and sends the packets of WQE `i` from its packet `from` on (a first
    /// transmission sends from 0; a retransmission may resume inside the message). A READ
    /// resumed at `from` asks for the part after the `from` responses received.
    fn transmit_wqe(&mut self, nic: &mut impl Nic, i: usize, mtu: usize, uc: bool, from: u32) {
        let transport = if uc { op::UC } else { op::RC };
        let w = &mut self.sq[i];
        let wr = &w.wr;
        let first = w.first_psn;
        let solicited = wr.flags.contains(SendFlags::SOLICITED);
        let bth = |opcode: u8, psn: u32, last: bool| Bth {
            opcode: transport | opcode,
            solicited: solicited && last,
            psn,
            ack_req: last && transport == op::RC,
            ..Bth::default()
        };
        match wr.opcode {
            SendOpcode::RdmaRead => {
                // rxe_req.c `req_retry`: the first WQE's READ goes on at the bytes
                // received (`npsn = (length - resid) / mtu`, `iova += npsn * mtu`).
                let done = from.min(w.npsn.saturating_sub(1));
                w.read_next = done;
                w.data.truncate(done as usize * mtu);
                let skip = done as usize * mtu;
                let (va, rkey) = wr.rdma.unwrap_or_default();
                let len: u32 = wr.sges.as_slice().iter().map(|s| s.length).sum();
                let h = RoceHeaders {
                    bth: bth(op::READ_REQUEST, psn_add(first, done), true),
                    reth: Some(Reth {
                        va: va + skip as u64,
                        rkey,
                        dma_len: len - skip as u32,
                    }),
                    ..RoceHeaders::default()
                };
                nic.transmit(h, &[]);
            }
            SendOpcode::AtomicCmpAndSwp | SendOpcode::AtomicFetchAndAdd => {
                let (va, rkey, compare_add, swap) = wr.atomic.unwrap_or_default();
                let (opc, swap_add, compare) = if wr.opcode == SendOpcode::AtomicCmpAndSwp {
                    (op::COMPARE_SWAP, swap, compare_add)
                } else {
                    (op::FETCH_ADD, compare_add, 0)
                };
                let h = RoceHeaders {
                    bth: bth(opc, first, true),
                    atomic_eth: Some(AtomicEth {
                        va,
                        rkey,
                        swap_add,
                        compare,
                    }),
                    ..RoceHeaders::default()
                };
                nic.transmit(h, &[]);
            }
            _ => {
                let write = wr.opcode.is_rdma();
                let inv = wr.inv.filter(|_| wr.opcode == SendOpcode::SendWithInv);
                let imm = wr.opcode.has_imm().then_some(wr.imm);
                w.read_next = 0;
                let data = &w.data;
                let n = data.len().div_ceil(mtu).max(1);
                for k in (from as usize).min(n - 1)..n {
                    let chunk = &data[(k * mtu).min(data.len())..((k + 1) * mtu).min(data.len())];
                    let (is_first, is_last) = (k == 0, k + 1 == n);
                    let mut opc = segment_opcode(write, is_first, is_last, imm.is_some());
                    if inv.is_some() && is_last {
                        opc = if is_first {
                            op::SEND_ONLY_INV
                        } else {
                            op::SEND_LAST_INV
                        };
                    }
                    let mut h = RoceHeaders {
                        bth: bth(opc, psn_add(first, k as u32), is_last),
                        ..RoceHeaders::default()
                    };
                    if write && is_first {
                        let (va, rkey) = wr.rdma.unwrap_or_default();
                        h.reth = Some(Reth {
                            va,
                            rkey,
                            dma_len: data.len() as u32,
                        });
                    }
                    if is_last {
                        // The IETH travels where ImmDt would (see RoceHeaders::imm).
                        h.imm = imm.or(inv);
                    }
                    nic.transmit(h, chunk);
                }
            }
        }
    }

    pub(super) fn arm_timer(&mut self, nic: &mut impl Nic) {
        let now = nic.now();
        let t = ack_timeout_ns(nic.qp().attr.timeout);
        let outstanding = self.sq.iter().any(SendWqe::outstanding);
        match (outstanding, t) {
            (true, Some(t)) => {
                self.ack_deadline = now + t;
                if !self.ack_timer_pending {
                    self.ack_timer_pending = true;
                    nic.set_timer(now + t, Timer::Ack, 0);
                }
            }
            _ => self.ack_deadline = 0,
        }
    }

    /// Completes finished WQEs from the head of the send queue, in order, and reports a
    /// drain the SQD transition asked for. Returns how many left the queue.
    fn complete_done(&mut self, nic: &mut impl Nic) -> usize {
        let qp = nic.qp();
        let mut popped = 0;
        while self.sq.front().is_some_and(|w| w.done) {
            let w = self.sq.pop_front().expect("front exists");
            popped += 1;
            if qp.sig_all || w.wr.flags.contains(SendFlags::SIGNALED) {
                let mut c =
                    completion(w.wr.wr_id, WcStatus::Success, w.completion_opcode(), qp.qpn);
                if matches!(
                    w.wr.opcode,
                    SendOpcode::SendWithImm | SendOpcode::RdmaWriteWithImm
                ) {
                    // rxe and mlx5 flag these (imm_data left 0).
                    c.wc_flags |= verbs_api::WcFlags::WITH_IMM;
                }
                c.byte_len = match w.wr.opcode {
                    // mlx5 reports 8 for an atomic; rxe the SGE's length.
                    SendOpcode::AtomicCmpAndSwp | SendOpcode::AtomicFetchAndAdd
                        if qp.personality != Personality::Rxe =>
                    {
                        8
                    }
                    SendOpcode::RdmaRead
                    | SendOpcode::AtomicCmpAndSwp
                    | SendOpcode::AtomicFetchAndAdd => {
                        w.wr.sges.as_slice().iter().map(|s| s.length).sum()
                    }
                    _ => w.data.len() as u32,
                };
                nic.complete_send(c);
            } else {
                nic.retire_unsignaled();
            }
        }
        let sqd = nic.qp().state == QpState::Sqd;
        if sqd && self.drain_notify && !self.sq.iter().any(|w| w.sent) {
            self.drain_notify = false;
            nic.event(EventType::SqDrained);
        }
        popped
    }

    /// Completes WQE `i` with an error (always reported), then the QP enters ERR and the
    /// rest is flushed. The WQEs done before it complete first, which shifts its index.
    fn fail(&mut self, nic: &mut impl Nic, i: usize, status: WcStatus) {
        if nic.qp().uc {
            // The UC WQEs sent before it are done: they complete first.
            self.sq.iter_mut().take(i).for_each(|w| w.done |= w.sent);
        }
        let i = i - self.complete_done(nic);
        if let Some(w) = self.sq.remove(i) {
            let c = completion(w.wr.wr_id, status, w.completion_opcode(), nic.qp().qpn);
            nic.complete_send(c);
        }
        enter_error(nic, self);
    }

    /// UC: the WQEs sent are done and complete, in order.
    pub fn on_completer(&mut self, nic: &mut impl Nic) {
        if !std::mem::take(&mut self.completer_due) {
            return;
        }
        if !nic.qp().uc || !matches!(nic.qp().state, QpState::Rts | QpState::Sqd) {
            return;
        }
        self.sq.iter_mut().for_each(|w| w.done |= w.sent);
        self.complete_done(nic);
    }

    pub fn on_response(&mut self, nic: &mut impl Nic, pkt: &RocePacket<'_>) {
        let bth = pkt.headers.bth;
        match bth.opcode & 0x1f {
            op::ACKNOWLEDGE => {
                let syn = pkt.headers.aeth.map_or(0, |a| a.syndrome);
                match syn & 0xe0 {
                    0x00 => {
                        self.acked_before(nic, psn_add(bth.psn, 1), true);
                        self.ack_through(nic, bth.psn);
                        self.arm_timer(nic);
                    }
                    syndrome::RNR_NAK => {
                        self.acked_before(nic, bth.psn, false);
                        self.ack_through(nic, psn_add(bth.psn, PSN_MASK));
                        let infinite = nic.qp().attr.rnr_retry == 7;
                        let Some(i) = self.sq.iter().position(SendWqe::outstanding) else {
                            return;
                        };
                        if !infinite {
                            if self.rnr_left == 0 {
                                self.fail(nic, i, WcStatus::RnrRetryExcErr);
                                return;
                            }
                            self.rnr_left -= 1;
                        }
                        self.timer_gen = self.timer_gen.wrapping_add(1);
                        self.ack_deadline = 0; // waiting out the RNR timer, not an ACK
                        let at = nic.now() + rnr_ns(syn & 0x1f);
                        nic.set_timer(at, Timer::Rnr, self.timer_gen);
                    }
                    syndrome::NAK => {
                        let Some(i) = self
                            .sq
                            .iter()
                            .position(|w| w.outstanding() && psn_cmp(w.last_psn(), bth.psn) >= 0)
                        else {
                            return;
                        };
                        match syn {
                            syndrome::NAK_PSN_SEQ_ERROR => {
                                // It acknowledges what came before it, then counts as a
                                // retry, as a timeout does (rxe_comp.c: the NAK leads
                                // to COMPST_ERROR_RETRY, which takes one from retry_cnt
                                // unless it is 7; the IB spec's Retry Count covers
                                // both): with none left the WQE fails.
                                self.acked_before(nic, bth.psn, false);
                                self.ack_through(nic, psn_add(bth.psn, PSN_MASK));
                                let rxe = nic.qp().personality == Personality::Rxe;
                                if rxe && self.retrying {
                                    // Not another retry while one is under way.
                                    self.complete_done(nic);
                                    self.arm_timer(nic);
                                    return;
                                }
                                if !self.take_retry(nic) {
                                    self.fail(nic, i, WcStatus::RetryExcErr);
                                    return;
                                }
                                self.retrying = true;
                                self.retransmit(nic);
                            }
                            syndrome::NAK_INVALID_REQUEST => {
                                self.fail(nic, i, WcStatus::RemInvReqErr);
                            }
                            syndrome::NAK_REMOTE_ACCESS_ERROR => {
                                self.fail(nic, i, WcStatus::RemAccessErr);
                            }
                            _ => self.fail(nic, i, WcStatus::RemOpErr),
                        }
                    }
                    _ => {}
                }
            }
            op::ATOMIC_ACKNOWLEDGE => {
                let pd = nic.qp().pd;
                if self
                    .earlier_response_missing(|w| w.wr.opcode.is_atomic() && w.first_psn == bth.psn)
                {
                    self.response_past_a_missing_one(nic);
                    return;
                }
                let Some(w) = self
                    .sq
                    .iter_mut()
                    .find(|w| w.outstanding() && w.wr.opcode.is_atomic() && w.first_psn == bth.psn)
                else {
                    // A duplicate: the responder is alive, the timer starts again.
                    self.arm_timer(nic);
                    return;
                };
                let orig = pkt.headers.atomic_ack.unwrap_or(0);
                let sges = w.wr.sges.as_slice();
                if nic.mrs().check_local(pd, sges, true).is_err() {
                    // Found only now (rxe): the responder has executed the atomic.
                    let psn = bth.psn;
                    let i = self
                        .sq
                        .iter()
                        .position(|w| w.outstanding() && w.first_psn == psn)
                        .unwrap_or(0);
                    self.fail(nic, i, WcStatus::LocProtErr);
                    return;
                }
                w.done = true;
                // SAFETY: checked with LOCAL_WRITE just above; an SGE of 8 bytes or more.
                let _ = unsafe { memory::scatter(sges, &[&orig.to_ne_bytes()]) };
                self.acked_before(nic, psn_add(bth.psn, 1), true);
                self.ack_through(nic, psn_add(bth.psn, PSN_MASK));
                self.arm_timer(nic);
            }
            o => {
                // READ responses: in order, into the WQE's buffer, scattered at the end.
                let pd = nic.qp().pd;
                if self.earlier_response_missing(|w| {
                    w.wr.opcode == SendOpcode::RdmaRead
                        && psn_cmp(bth.psn, w.first_psn) >= 0
                        && psn_cmp(bth.psn, w.last_psn()) <= 0
                }) {
                    self.response_past_a_missing_one(nic);
                    return;
                }
                let Some(w) = self.sq.iter_mut().find(|w| {
                    w.outstanding()
                        && w.wr.opcode == SendOpcode::RdmaRead
                        && psn_cmp(bth.psn, w.first_psn) >= 0
                        && psn_cmp(bth.psn, w.last_psn()) <= 0
                }) else {
                    self.arm_timer(nic);
                    return;
                };
                if psn_add(w.first_psn, w.read_next) != bth.psn {
                    // A duplicate, or one past a response that went missing: not taken
                    // (rxe_comp.c `check_psn`: COMPST_DONE), the ACK timer asks again.
                    self.arm_timer(nic);
                    return;
                }
                w.read_next += 1;
                w.data.extend_from_slice(pkt.payload);
                let first = w.first_psn;
                if matches!(o, op::READ_RESPONSE_LAST | op::READ_RESPONSE_ONLY) {
                    let data = std::mem::take(&mut w.data);
                    let sges = w.wr.sges.as_slice();
                    if nic.mrs().check_local(pd, sges, true).is_err() {
                        // Found only now (rxe): LOC_PROT_ERR.
                        let i = self
                            .sq
                            .iter()
                            .position(|w| w.outstanding() && w.first_psn == first)
                            .unwrap_or(0);
                        self.fail(nic, i, WcStatus::LocProtErr);
                        return;
                    }
                    w.done = true;
                    // SAFETY: checked with LOCAL_WRITE just above.
                    let _ = unsafe { memory::scatter(sges, &[&data]) };
                }
                self.acked_before(nic, psn_add(bth.psn, 1), true);
                self.ack_through(nic, psn_add(first, PSN_MASK));
                self.arm_timer(nic);
            }
        }
        self.complete_done(nic);
        // A fenced WQE may go now.
        self.pump(nic);
    }
}

/// Moves the QP to ERR: the NIC flushes the receive side, the requester its send queue.
pub(super) fn enter_error(nic: &mut impl Nic, req: &mut Requester) {
    if nic.enter_error() {
        let qpn = nic.qp().qpn;
        for (wr_id, opcode) in req.take_outstanding() {
            nic.complete_send(completion(wr_id, WcStatus::WrFlushErr, opcode, qpn));
        }
    }
}
