//! The responder: the expected PSN and the MSN, SEND reassembly into a receive WQE, RDMA
//! WRITE into registered memory, READ responses (sent as the link takes them, the
//! requests after a READ waiting their turn: [`read_reply`]), atomics with their replay
//! cache, duplicates answered without executing again, and the ACKs and NAKs that report
//! it all.

mod read_reply;

use super::nic::{Count, Nic, QpView};
use super::psn::{psn_add, psn_cmp, PSN_MASK};
use super::requester::{enter_error, Requester};
use crate::clock::Nanos;
use crate::frame::roce::{opcode as op, syndrome, Aeth, Bth, Reth, RoceHeaders, RocePacket};
use crate::verbs::memory::{self, Span};
use crate::verbs::personality::Personality;
use crate::verbs::wqe::{completion, RecvWqe};
use std::collections::VecDeque;
use verbs_api::{AccessFlags, Completion, EventType, QpState, WcFlags, WcOpcode, WcStatus};

/// Most READ response packets one turn of the responder sends.
const READ_BATCH: usize = 16;

/// A READ being answered (rxe's `struct resp_res`, `read` part, while `qp->resp.res`
/// points at it).
#[derive(Debug, Clone, Copy)]
struct ReadReply {
    /// The PSN of the next response.
    psn: u32,
    /// The next address to read, in the rkey's address space.
    va: u64,
    rkey: u32,
    /// Bytes still to send.
    left: u64,
    /// No response of it has gone yet (the next is FIRST or ONLY).
    fresh: bool,
}

impl ReadReply {
    /// The reply to a READ request at `psn` for `len` bytes at `va` (checked already).
    pub fn new(psn: u32, va: u64, rkey: u32, len: u64) -> Self {
        ReadReply {
            psn,
            va,
            rkey,
            left: len,
            fresh: true,
        }
    }

    /// The number of response packets for `len` bytes at path MTU `mtu`.
    pub fn packets(len: u64, mtu: usize) -> u32 {
        len.div_ceil(mtu as u64).max(1) as u32
    }
}

/// What one turn of the responder may still send, and the wire time of what it sent.
#[derive(Debug, Clone, Copy)]
struct Turn {
    budget: usize,
    wire: Nanos,
}

impl Default for Turn {
    fn default() -> Self {
        Turn {
            budget: READ_BATCH,
            wire: 0,
        }
    }
}

/// A SEND message being reassembled.
#[derive(Debug, Clone)]
struct InRecv {
    wqe: RecvWqe,
    data: Vec<u8>,
}

/// An RDMA WRITE message being placed.
#[derive(Debug, Clone, Copy)]
struct InWrite {
    addr: u64,
    remaining: u64,
    /// The whole DMA length from the RETH (what a WRITE_WITH_IMM receive reports).
    total: u64,
}

/// The responder's state.
#[derive(Debug, Default, Clone)]
pub(super) struct Responder {
    epsn: u32,
    msn: u32,
    recv: Option<InRecv>,
    write: Option<InWrite>,
    nak_sent: bool,
    comm_est: bool,
    /// (PSN, original value, MSN) of the last atomics, to answer their duplicates.
    atomic_cache: VecDeque<(u32, u64, u32)>,
    /// A SEND_WITH_INV's invalidation failed: ERR once the message is acknowledged.
    inv_failed: bool,
    /// The READ being answered, if any.
    reading: Option<ReadReply>,
    /// Requests that came while a READ was being answered, in order (rxe's `req_pkts`).
    waiting: VecDeque<(RoceHeaders, Vec<u8>)>,
    /// Generation of the READ reply's turn timer (a newer turn or a reset makes old ones
    /// stale).
    read_gen: u32,
    /// A timer's turn is under way, with what is left of it.
    in_turn: bool,
    turn: Option<Turn>,
    /// The buffer a response's payload is read into.
    read_buf: Vec<u8>,
}

/// Whether a request opcode starts a message.
fn starts_message(o: u8) -> bool {
    matches!(
        o,
        op::SEND_FIRST
            | op::SEND_ONLY
            | op::SEND_ONLY_INV
            | op::SEND_ONLY_IMM
            | op::WRITE_FIRST
            | op::WRITE_ONLY
            | op::WRITE_ONLY_IMM
    )
}

/// The completion of a message received on `qp` into receive `wr_id`.
fn received(qp: &QpView, wr_id: u64, opcode: WcOpcode, len: usize, imm: Option<u32>) -> Completion {
    let mut c = completion(wr_id, WcStatus::Success, opcode, qp.qpn);
    c.byte_len = len as u32;
    if qp.personality.connected_recv_as_rxe() {
        c.wc_flags |= WcFlags::GRH;
    } else {
        c.src_qp = qp.attr.dest_qp_num;
    }
    if let Some(i) = imm {
        c.imm_data = i;
        c.wc_flags |= WcFlags::WITH_IMM;
    }
    c
}

/// rxe checks a request against its QP before touching memory (`check_op_valid`,
/// `check_resource` in rxe_resp.c): an RDMA WRITE, READ or atomic the QP's access flags do
/// not allow, or a READ or atomic with max_dest_rd_atomic 0, gets an invalid-request NAK
/// (the requester sees REM_INV_REQ_ERR). mlx5 answers a missing right with a remote
/// access error instead, found with the memory check.
fn refused_by_qp(qp: &QpView, o: u8) -> bool {
    if !qp.personality.qp_access_is_invalid_request() || qp.uc {
        return false;
    }
    let (need, reads) = match o {
        op::WRITE_FIRST | op::WRITE_ONLY | op::WRITE_ONLY_IMM => (AccessFlags::REMOTE_WRITE, false),
        op::READ_REQUEST => (AccessFlags::REMOTE_READ, true),
        op::COMPARE_SWAP | op::FETCH_ADD => (AccessFlags::REMOTE_ATOMIC, true),
        _ => return false,
    };
    !qp.attr.qp_access_flags.contains(need) || (reads && qp.attr.max_dest_rd_atomic == 0)
}

/// What became of a request.
enum Handled {
    /// Executed: the expected PSN moves past it and an ACK follows if asked for.
    Executed,
    /// Answered already (READ, atomic) or refused with a NAK.
    Answered,
}

impl Responder {
    /// The PSN expected next (what query_qp reports as rq_psn).
    pub fn epsn(&self) -> u32 {
        self.epsn
    }

    pub fn set_epsn(&mut self, psn: u32) {
        self.epsn = psn & PSN_MASK;
    }

    /// RESET: back to the initial state; a READ turn's timer still due is stale.
    pub fn reset(&mut self) {
        *self = Responder {
            read_gen: self.read_gen.wrapping_add(1),
            ..Responder::default()
        };
    }

    /// A request packet: handled now, or, while a READ is being answered, queued behind
    /// it (see [`read_reply`]). A READ request the same as one still queued (a requester's
    /// retry, sent again before the responder reached the first) is not queued twice:
    /// the first is answered whole, and the second would only send the same responses
    /// again. rxe answers each (its request queue keeps both); the emulated NIC's links
    /// are slow enough (tens of MB/s in a debug build) that a retry of 16 reads of 8 MiB
    /// queued twice over would hold the link for seconds.
    pub fn on_request(&mut self, nic: &mut impl Nic, pkt: &RocePacket<'_>, req: &mut Requester) {
        if self.reading.is_some() || !self.waiting.is_empty() {
            let h = pkt.headers;
            let same_read = |w: &(RoceHeaders, Vec<u8>)| {
                w.0.bth.opcode == h.bth.opcode && w.0.bth.psn == h.bth.psn && w.0.reth == h.reth
            };
            if h.bth.opcode & 0x1f == op::READ_REQUEST && self.waiting.iter().any(same_read) {
                nic.count(Count::OutOfSequence);
                return;
            }
            self.waiting.push_back((h, pkt.payload.to_vec()));
            return;
        }
        self.handle(nic, pkt, req);
    }

    fn handle(&mut self, nic: &mut impl Nic, pkt: &RocePacket<'_>, req: &mut Requester) {
        let bth = pkt.headers.bth;
        let o = bth.opcode & 0x1f;
        let qp = nic.qp();
        if qp.state == QpState::Rtr && !self.comm_est {
            // The first packet on a QP still in RTR: IBV_EVENT_COMM_EST.
            self.comm_est = true;
            nic.event(EventType::CommEst);
        }
        if !self.in_sequence(nic, pkt, qp.uc, req) {
            return;
        }
        self.nak_sent = false;
        if refused_by_qp(&qp, o) {
            self.nak(nic, req, bth.psn, syndrome::NAK_INVALID_REQUEST);
            return;
        }
        let handled = match o {
            op::SEND_FIRST
            | op::SEND_ONLY
            | op::SEND_ONLY_IMM
            | op::SEND_MIDDLE
            | op::SEND_LAST
            | op::SEND_LAST_IMM
            | op::SEND_LAST_INV
            | op::SEND_ONLY_INV => self.on_send(nic, pkt, req),
            op::WRITE_FIRST
            | op::WRITE_ONLY
            | op::WRITE_ONLY_IMM
            | op::WRITE_MIDDLE
            | op::WRITE_LAST
            | op::WRITE_LAST_IMM => self.on_write(nic, pkt, req),
            op::READ_REQUEST => {
                let reth = pkt.headers.reth.unwrap_or_default();
                if !self.read_respond(nic, req, bth.psn, reth) {
                    self.nak(nic, req, bth.psn, syndrome::NAK_REMOTE_ACCESS_ERROR);
                }
                Handled::Answered
            }
            op::COMPARE_SWAP | op::FETCH_ADD => self.on_atomic(nic, pkt, req),
            _ => {
                self.nak(nic, req, bth.psn, syndrome::NAK_INVALID_REQUEST);
                Handled::Answered
            }
        };
        if let Handled::Executed = handled {
            self.epsn = psn_add(bth.psn, 1);
            if bth.ack_req && !qp.uc {
                self.reply(nic, bth.psn, syndrome::ACK_NO_CREDITS);
            }
        }
        if std::mem::take(&mut self.inv_failed) {
            // rxe (class J): the message was acknowledged, then the QP goes to ERR.
            enter_error(nic, req);
        }
    }

    /// The PSN check: true if the packet is the expected one (or, on UC, starts a new
    /// message after a gap). Duplicates are answered again, a gap NAKed once.
    fn in_sequence(
        &mut self,
        nic: &mut impl Nic,
        pkt: &RocePacket<'_>,
        uc: bool,
        req: &mut Requester,
    ) -> bool {
        let bth = pkt.headers.bth;
        let d = psn_cmp(bth.psn, self.epsn);
        if uc && d != 0 {
            // UC: a gap loses the message in progress; a new message resynchronises.
            self.recv = None;
            self.write = None;
            if !(d > 0 && starts_message(bth.opcode & 0x1f)) {
                nic.count(Count::OutOfSequence);
                return false;
            }
            self.epsn = bth.psn;
        } else if d < 0 {
            nic.count(Count::OutOfSequence);
            self.duplicate(nic, pkt, req);
            return false;
        } else if d > 0 {
            let first_nak = !self.nak_sent;
            self.nak_sent = true;
            nic.count(Count::OutOfSequence);
            if first_nak {
                self.reply(nic, self.epsn, syndrome::NAK_PSN_SEQ_ERROR);
            }
            return false;
        }
        true
    }

    /// A NAK. Class C errors (invalid request, remote access, remote operational) also
    /// take the responder to ERR, with the matching async event, as rxe and mlx5 do. UC
    /// sends none.
    fn nak(&mut self, nic: &mut impl Nic, req: &mut Requester, psn: u32, syn: u8) {
        if nic.qp().uc {
            return;
        }
        self.reply(nic, psn, syn);
        let event = match syn {
            syndrome::NAK_INVALID_REQUEST => Some(EventType::QpReqErr),
            syndrome::NAK_REMOTE_ACCESS_ERROR => Some(EventType::QpAccessErr),
            syndrome::NAK_REMOTE_OPERATIONAL_ERROR => Some(EventType::QpFatal),
            _ => None,
        };
        if let Some(e) = event {
            nic.event(e);
            enter_error(nic, req);
        }
    }

    /// The next receive WQE, or (with none posted) an RNR NAK with the QP's
    /// `min_rnr_timer`.
    fn take_recv_or_rnr(
        &mut self,
        nic: &mut impl Nic,
        req: &mut Requester,
        psn: u32,
    ) -> Option<(RecvWqe, u32)> {
        let recv = nic.take_recv();
        if recv.is_none() {
            nic.count(Count::NoWqe);
            let syn = syndrome::RNR_NAK | (nic.qp().attr.min_rnr_timer & 0x1f);
            self.nak(nic, req, psn, syn);
        }
        recv
    }

    fn on_send(
        &mut self,
        nic: &mut impl Nic,
        pkt: &RocePacket<'_>,
        req: &mut Requester,
    ) -> Handled {
        let bth = pkt.headers.bth;
        let o = bth.opcode & 0x1f;
        let qp = nic.qp();
        if matches!(
            o,
            op::SEND_FIRST | op::SEND_ONLY | op::SEND_ONLY_IMM | op::SEND_ONLY_INV
        ) {
            let Some((wqe, wpd)) = self.take_recv_or_rnr(nic, req, bth.psn) else {
                return Handled::Answered;
            };
            if let Err(s) = nic.mrs().check_local(wpd, wqe.sges.as_slice(), true) {
                // rxe reports every fault of a receive's buffer (bad lkey, no LOCAL_WRITE,
                // out of bounds) as a malformed WQE: LOC_QP_OP_ERR (`copy_data`).
                let s = if qp.personality == Personality::Rxe {
                    WcStatus::LocQpOpErr
                } else {
                    nic.local_status(s)
                };
                nic.complete_recv(completion(wqe.wr_id, s, WcOpcode::Recv, qp.qpn), false);
                self.nak(nic, req, bth.psn, syndrome::NAK_REMOTE_OPERATIONAL_ERROR);
                enter_error(nic, req);
                return Handled::Answered;
            }
            self.recv = Some(InRecv {
                wqe,
                data: Vec::new(),
            });
        }
        let Some(r) = self.recv.as_mut() else {
            self.nak(nic, req, bth.psn, syndrome::NAK_INVALID_REQUEST);
            return Handled::Answered;
        };
        r.data.extend_from_slice(pkt.payload);
        let room: u64 = r
            .wqe
            .sges
            .as_slice()
            .iter()
            .map(|s| u64::from(s.length))
            .sum();
        if r.data.len() as u64 > room {
            let r = self.recv.take().expect("just used");
            // rxe: LOC_QP_OP_ERR here and a remote operational error NAK (REM_OP_ERR at
            // the requester); mlx5: LOC_LEN_ERR and an invalid-request NAK.
            let status = qp.personality.rc_too_long_status();
            let c = completion(r.wqe.wr_id, status, WcOpcode::Recv, qp.qpn);
            nic.complete_recv(c, false);
            let syn = if status == WcStatus::LocQpOpErr {
                syndrome::NAK_REMOTE_OPERATIONAL_ERROR
            } else {
                syndrome::NAK_INVALID_REQUEST
            };
            self.nak(nic, req, bth.psn, syn);
            enter_error(nic, req);
            return Handled::Answered;
        }
        let with_inv = matches!(o, op::SEND_ONLY_INV | op::SEND_LAST_INV);
        if with_inv
            || matches!(
                o,
                op::SEND_ONLY | op::SEND_ONLY_IMM | op::SEND_LAST | op::SEND_LAST_IMM
            )
        {
            let r = self.recv.take().expect("in progress");
            // SAFETY: the SGEs passed check_local with LOCAL_WRITE when the message began.
            let n = unsafe { memory::scatter(r.wqe.sges.as_slice(), &[&r.data]) }.unwrap_or(0);
            let inv = pkt.headers.imm.filter(|_| with_inv);
            if let Some(rkey) = inv {
                // After the data (rxe's `execute`): a window that cannot be invalidated
                // fails the receive with REM_INV_REQ_ERR; the message is still
                // acknowledged and the QP then goes to ERR (class J).
                if nic.mrs_mut().invalidate(rkey).is_err() {
                    let c = completion(r.wqe.wr_id, WcStatus::RemInvReqErr, WcOpcode::Recv, qp.qpn);
                    nic.complete_recv(c, bth.solicited);
                    self.inv_failed = true;
                    return Handled::Executed;
                }
            }
            self.msn = psn_add(self.msn, 1);
            let imm = pkt.headers.imm.filter(|_| !with_inv);
            let mut c = received(&qp, r.wqe.wr_id, WcOpcode::Recv, n, imm);
            if let Some(rkey) = inv {
                // libibverbs' union: the invalidated rkey in imm_data.
                c.imm_data = rkey;
                c.wc_flags |= qp.personality.with_inv_flag();
            }
            nic.complete_recv(c, bth.solicited);
        }
        Handled::Executed
    }

    fn on_write(
        &mut self,
        nic: &mut impl Nic,
        pkt: &RocePacket<'_>,
        req: &mut Requester,
    ) -> Handled {
        let bth = pkt.headers.bth;
        let o = bth.opcode & 0x1f;
        let qp = nic.qp();
        let with_imm = matches!(o, op::WRITE_ONLY_IMM | op::WRITE_LAST_IMM);
        let mut recv = None;
        if with_imm {
            recv = self.take_recv_or_rnr(nic, req, bth.psn);
            if recv.is_none() {
                return Handled::Answered;
            }
        }
        if let Some(reth) = pkt.headers.reth {
            let span = if qp.attr.qp_access_flags.contains(AccessFlags::REMOTE_WRITE) {
                nic.mrs().check_remote_at(
                    qp.remote_at(),
                    reth.rkey,
                    reth.va,
                    u64::from(reth.dma_len),
                    AccessFlags::REMOTE_WRITE,
                )
            } else {
                None
            };
            let Some(span) = span else {
                if let Some((w, _)) = recv {
                    if qp.personality.connected_recv_as_rxe() {
                        // rxe has taken the receive and completes it with the error.
                        let c = completion(
                            w.wr_id,
                            WcStatus::RemAccessErr,
                            WcOpcode::RecvRdmaWithImm,
                            qp.qpn,
                        );
                        nic.complete_recv(c, false);
                    } else {
                        nic.untake_recv(w);
                    }
                }
                self.nak(nic, req, bth.psn, syndrome::NAK_REMOTE_ACCESS_ERROR);
                return Handled::Answered;
            };
            self.write = Some(InWrite {
                addr: span.addr,
                remaining: span.len as u64,
                total: span.len as u64,
            });
        }
        let Some(wr) = self.write.as_mut() else {
            self.nak(nic, req, bth.psn, syndrome::NAK_INVALID_REQUEST);
            return Handled::Answered;
        };
        if pkt.payload.len() as u64 > wr.remaining {
            self.write = None;
            self.nak(nic, req, bth.psn, syndrome::NAK_INVALID_REQUEST);
            return Handled::Answered;
        }
        // SAFETY: the span was checked against the key table with REMOTE_WRITE for the
        // whole DMA length, and `remaining` bounds what is written.
        unsafe {
            memory::write_span(
                Span {
                    addr: wr.addr,
                    len: pkt.payload.len(),
                },
                pkt.payload,
            );
        }
        wr.addr += pkt.payload.len() as u64;
        wr.remaining -= pkt.payload.len() as u64;
        let total = wr.total;
        if matches!(
            o,
            op::WRITE_ONLY | op::WRITE_ONLY_IMM | op::WRITE_LAST | op::WRITE_LAST_IMM
        ) {
            self.write = None;
            self.msn = psn_add(self.msn, 1);
        }
        if let Some((w, _)) = recv {
            let imm = Some(pkt.headers.imm.unwrap_or(0));
            let c = received(&qp, w.wr_id, WcOpcode::RecvRdmaWithImm, total as usize, imm);
            nic.complete_recv(c, bth.solicited);
        }
        Handled::Executed
    }

    fn on_atomic(
        &mut self,
        nic: &mut impl Nic,
        pkt: &RocePacket<'_>,
        req: &mut Requester,
    ) -> Handled {
        let bth = pkt.headers.bth;
        let qp = nic.qp();
        let a = pkt.headers.atomic_eth.unwrap_or_default();
        if a.va & 7 != 0 {
            self.nak(nic, req, bth.psn, syndrome::NAK_INVALID_REQUEST);
            return Handled::Answered;
        }
        let span = if qp.attr.qp_access_flags.contains(AccessFlags::REMOTE_ATOMIC) {
            nic.mrs()
                .check_remote_at(qp.remote_at(), a.rkey, a.va, 8, AccessFlags::REMOTE_ATOMIC)
        } else {
            None
        };
        let Some(span) = span else {
            self.nak(nic, req, bth.psn, syndrome::NAK_REMOTE_ACCESS_ERROR);
            return Handled::Answered;
        };
        let cas = bth.opcode & 0x1f == op::COMPARE_SWAP;
        // SAFETY: an 8-byte span checked with REMOTE_ATOMIC just above.
        let orig = unsafe {
            memory::atomic_u64(span.addr, |v| {
                if !cas {
                    v.wrapping_add(a.swap_add)
                } else if v == a.compare {
                    a.swap_add
                } else {
                    v
                }
            })
        };
        self.msn = psn_add(self.msn, 1);
        self.epsn = psn_add(bth.psn, 1);
        self.atomic_cache.push_back((bth.psn, orig, self.msn));
        if self.atomic_cache.len() > 16 {
            self.atomic_cache.pop_front();
        }
        self.atomic_ack(nic, bth.psn, orig, self.msn);
        Handled::Answered
    }

    fn reply(&self, nic: &mut impl Nic, psn: u32, syn: u8) {
        let h = RoceHeaders {
            bth: Bth {
                opcode: op::ACKNOWLEDGE,
                psn,
                ..Bth::default()
            },
            aeth: Some(Aeth {
                syndrome: syn,
                msn: self.msn,
            }),
            ..RoceHeaders::default()
        };
        nic.transmit(h, &[]);
    }

    fn atomic_ack(&self, nic: &mut impl Nic, psn: u32, orig: u64, msn: u32) {
        let h = RoceHeaders {
            bth: Bth {
                opcode: op::ATOMIC_ACKNOWLEDGE,
                psn,
                ..Bth::default()
            },
            aeth: Some(Aeth {
                syndrome: syndrome::ACK_NO_CREDITS,
                msn,
            }),
            atomic_ack: Some(orig),
            ..RoceHeaders::default()
        };
        nic.transmit(h, &[]);
    }

    /// Answers a READ request at `psn`: checks the access for the whole length, then
    /// starts the responses (see [`read_reply`]); false on an access error.
    fn read_respond(
        &mut self,
        nic: &mut impl Nic,
        req: &mut Requester,
        psn: u32,
        reth: Reth,
    ) -> bool {
        let qp = nic.qp();
        let len = u64::from(reth.dma_len);
        let ok = qp.attr.qp_access_flags.contains(AccessFlags::REMOTE_READ)
            && nic
                .mrs()
                .check_remote_at(
                    qp.remote_at(),
                    reth.rkey,
                    reth.va,
                    len,
                    AccessFlags::REMOTE_READ,
                )
                .is_some();
        if !ok {
            return false;
        }
        if psn_cmp(psn, self.epsn) >= 0 {
            // A new READ: C9-148, the MSN counts it now; the expected PSN moves past
            // its responses.
            self.msn = psn_add(self.msn, 1);
            let n = ReadReply::packets(len, nic.path_mtu());
            self.epsn = psn_add(psn, n);
        }
        self.start_read(nic, req, ReadReply::new(psn, reth.va, reth.rkey, len));
        true
    }

    /// A request PSN below the expected one: answer again without executing again
    /// (reads are re-read, atomics answered from the cache, the rest re-ACKed).
    fn duplicate(&mut self, nic: &mut impl Nic, pkt: &RocePacket<'_>, req: &mut Requester) {
        let bth = pkt.headers.bth;
        match bth.opcode & 0x1f {
            op::READ_REQUEST => {
                let reth = pkt.headers.reth.unwrap_or_default();
                self.read_respond(nic, req, bth.psn, reth);
            }
            op::COMPARE_SWAP | op::FETCH_ADD => {
                let hit = self.atomic_cache.iter().find(|c| c.0 == bth.psn).copied();
                if let Some((psn, orig, msn)) = hit {
                    self.atomic_ack(nic, psn, orig, msn);
                }
            }
            _ => {
                let e = psn_add(self.epsn, PSN_MASK);
                self.reply(nic, e, syndrome::ACK_NO_CREDITS);
            }
        }
    }
}
