//! The connected transports, RC and UC, as the IB spec (ch. 9.7) and the rxe driver run
//! them: PSNs, segmentation at the path MTU, ACK/NAK with MSN, go-back-N retransmission on
//! the ACK timeout (`timeout`, `retry_cnt`), RNR NAK and retry (`min_rnr_timer`,
//! `rnr_retry`, 7 = infinite), duplicate detection, RDMA WRITE/READ and 8-byte atomics
//! against registered memory. UC is the same engine without ACKs or retries.

use super::memory::{self, Span};
use super::world::{completion, RecvWqe, World, WrCopy};
use crate::frame::roce::{
    self, build_roce_frame, opcode as op, syndrome, Aeth, AtomicEth, Bth, Reth, RoceHeaders,
    RocePacket, RoceRoute,
};
use std::collections::VecDeque;
use std::net::Ipv4Addr;
use verbs_api::{
    AccessFlags, EventElement, EventType, QpState, QpType, SendFlags, SendOpcode, WcFlags,
    WcOpcode, WcStatus,
};

const ACK_TIMER: u64 = 1;
const RNR_TIMER: u64 = 2;
const PSN_MASK: u32 = 0x00ff_ffff;

fn psn_add(a: u32, n: u32) -> u32 {
    a.wrapping_add(n) & PSN_MASK
}

/// Signed distance a - b in the 24-bit PSN space.
fn psn_cmp(a: u32, b: u32) -> i32 {
    ((a.wrapping_sub(b) << 8) as i32) >> 8
}

/// The IBA encoding of RNR timer values (table 45), in nanoseconds.
fn rnr_ns(code: u8) -> u64 {
    const US: [u64; 32] = [
        655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920, 2560, 3840,
        5120, 7680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880, 163_840,
        245_760, 327_680, 491_520,
    ];
    US[usize::from(code & 31)] * 1000
}

/// The local ACK timeout: 4.096 us * 2^timeout; 0 means none.
fn ack_timeout_ns(t: u8) -> Option<u64> {
    (t != 0).then(|| 4096u64 << u32::from(t.min(31)))
}

#[derive(Debug)]
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
}

#[derive(Debug)]
struct InRecv {
    wqe: RecvWqe,
    pd: u32,
    data: Vec<u8>,
}

#[derive(Debug, Clone, Copy)]
struct InWrite {
    addr: u64,
    remaining: u64,
    /// The whole DMA length from the RETH (what a WRITE_WITH_IMM receive reports).
    total: u64,
}

/// Per-QP RC/UC protocol state.
#[derive(Debug, Default)]
pub(crate) struct RcState {
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
    epsn: u32,
    msn: u32,
    recv: Option<InRecv>,
    write: Option<InWrite>,
    nak_sent: bool,
    comm_est: bool,
    drain_notify: bool,
    atomic_cache: VecDeque<(u32, u64, u32)>,
}

impl RcState {
    pub fn take_outstanding(&mut self) -> Vec<(u64, WcOpcode)> {
        self.timer_gen = self.timer_gen.wrapping_add(1);
        self.ack_deadline = 0;
        self.sq
            .drain(..)
            .map(|w| (w.wr.wr_id, w.completion_opcode()))
            .collect()
    }
    pub fn reset(&mut self) {
        let gen = self.timer_gen.wrapping_add(1);
        let pending = self.ack_timer_pending;
        *self = RcState {
            timer_gen: gen,
            ack_timer_pending: pending,
            ..RcState::default()
        };
    }
    pub fn set_rq_psn(&mut self, psn: u32) {
        self.epsn = psn & PSN_MASK;
    }
    pub fn set_sq_psn(&mut self, psn: u32) {
        self.next_psn = psn & PSN_MASK;
    }
    /// True if nothing sent is outstanding; otherwise remembers to report the drain.
    pub fn arm_drain_notify(&mut self) -> bool {
        let drained = !self.sq.iter().any(|w| w.sent);
        self.drain_notify = !drained;
        drained
    }
    pub fn set_retries(&mut self, retry: u8, rnr: u8) {
        self.retry_left = retry;
        self.rnr_left = rnr;
    }
}

fn token(qpn: u32, kind: u64, gen: u32) -> u64 {
    u64::from(qpn) | (kind << 24) | (u64::from(gen) << 32)
}

impl World {
    fn rc(&mut self, qpn: u32) -> Option<&mut RcState> {
        self.qps.get_mut(&qpn).and_then(|q| q.rc.as_deref_mut())
    }

    fn path_mtu(&self, qpn: u32) -> usize {
        let qp = &self.qps[&qpn];
        let active = self.devices[qp.dev].personality.active_mtu().bytes();
        qp.attr.path_mtu.bytes().min(active) as usize
    }

    /// The route to the connected peer.
    fn peer_route(&self, qpn: u32) -> (RoceRoute, u32, crate::ids::PortId) {
        let qp = &self.qps[&qpn];
        let d = &self.devices[qp.dev];
        let dst_ip = qp
            .attr
            .ah_attr
            .grh
            .dgid
            .to_ipv4()
            .unwrap_or(Ipv4Addr::UNSPECIFIED);
        let dst_mac = self.fabric.mac_of_ip(dst_ip).unwrap_or_default();
        let hop = qp.attr.ah_attr.grh.hop_limit;
        let route = RoceRoute {
            src_mac: d.mac,
            dst_mac,
            src_ip: d.ip,
            dst_ip,
            src_port: 0xc000 | (qpn as u16 & 0x3fff),
            tos: qp.attr.ah_attr.grh.traffic_class,
            ttl: if hop == 0 { 64 } else { hop },
            ip_id: 0,
        };
        (route, qp.attr.dest_qp_num, d.port)
    }

    fn rc_send(&mut self, qpn: u32, mut headers: RoceHeaders, payload: &[u8]) {
        let (mut route, dest, port) = self.peer_route(qpn);
        route.ip_id = headers.bth.psn as u16;
        headers.bth.dest_qp = dest;
        headers.bth.pkey = roce::DEFAULT_PKEY;
        let frame = build_roce_frame(&route, &headers, payload);
        let dev = self.qps[&qpn].dev;
        self.sniff(dev, &frame);
        let _ = self.fabric.transmit(port, frame);
    }

    /// Queues an RC/UC send WR and starts transmitting.
    pub(crate) fn rc_post(&mut self, qpn: u32, wr: WrCopy) -> verbs_api::Result<()> {
        let qp = self.qps.get_mut(&qpn).expect("caller checked");
        let max = qp.cap.max_send_wr as usize;
        let Some(rc) = qp.rc.as_deref_mut() else {
            return Err(verbs_api::Error::new(
                verbs_api::ErrorKind::InvalidArgument,
                "ibv_post_send",
                "not a connected QP",
            ));
        };
        if rc.sq.len() >= max {
            return Err(verbs_api::Error::new(
                verbs_api::ErrorKind::QueueFull,
                "ibv_post_send",
                "the send queue is full",
            )
            .with_errno(12));
        }
        rc.sq.push_back(SendWqe {
            wr,
            first_psn: 0,
            npsn: 0,
            sent: false,
            done: false,
            data: Vec::new(),
            read_next: 0,
        });
        self.rc_pump(qpn);
        Ok(())
    }

    /// Transmits every WQE not yet sent, in order.
    fn rc_pump(&mut self, qpn: u32) {
        loop {
            let mtu = self.path_mtu(qpn);
            let qp = &self.qps[&qpn];
            if qp.state != QpState::Rts {
                return;
            }
            let (pd, uc) = (qp.pd, qp.qp_type == QpType::Uc);
            let Some(rc) = qp.rc.as_deref() else { return };
            let Some(i) = rc.sq.iter().position(|w| !w.sent) else {
                break;
            };
            let w = &rc.sq[i];
            let sges = w.wr.sges.as_slice();
            let is_read = w.wr.opcode == SendOpcode::RdmaRead;
            let is_atomic = w.wr.opcode.is_atomic();
            let checked = if w.wr.inline.is_some() {
                Ok(0)
            } else {
                self.mrs.check_local(pd, sges, is_read || is_atomic)
            };
            let total = match checked {
                Err(s) => {
                    let p = self.devices[self.qps[&qpn].dev].personality;
                    let s = self.local_status(p, s);
                    self.rc_fail(qpn, i, s);
                    return;
                }
                Ok(t) => t,
            };
            if is_atomic && total != 8 {
                self.rc_fail(qpn, i, WcStatus::LocLenErr);
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
            let rc = self.rc(qpn).expect("connected QP");
            let w = &mut rc.sq[i];
            w.first_psn = rc.next_psn;
            w.npsn = npsn;
            w.sent = true;
            w.data = data;
            rc.next_psn = psn_add(rc.next_psn, npsn);
            self.rc_transmit_wqe(qpn, i, mtu);
            if uc {
                if let Some(rc) = self.rc(qpn) {
                    rc.sq[i].done = true;
                }
            }
        }
        let uc = self.qps[&qpn].qp_type == QpType::Uc;
        if !uc {
            self.rc_arm_timer(qpn);
        }
        self.rc_complete_done(qpn);
    }

    /// Builds and sends every packet of WQE `i` (first transmission or retransmission).
    fn rc_transmit_wqe(&mut self, qpn: u32, i: usize, mtu: usize) {
        let transport = if self.qps[&qpn].qp_type == QpType::Uc {
            op::UC
        } else {
            op::RC
        };
        let Some(rc) = self.rc(qpn) else { return };
        let w = &mut rc.sq[i];
        w.read_next = 0;
        let wr = w.wr.clone();
        let first = w.first_psn;
        let data = if wr.opcode == SendOpcode::RdmaRead {
            Vec::new()
        } else {
            std::mem::take(&mut w.data)
        };
        if wr.opcode == SendOpcode::RdmaRead {
            w.data.clear();
        }
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
                let (va, rkey) = wr.rdma.unwrap_or_default();
                let len = wr.sges.as_slice().iter().map(|s| s.length).sum();
                let h = RoceHeaders {
                    bth: bth(op::READ_REQUEST, first, true),
                    reth: Some(Reth {
                        va,
                        rkey,
                        dma_len: len,
                    }),
                    ..RoceHeaders::default()
                };
                self.rc_send(qpn, h, &[]);
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
                self.rc_send(qpn, h, &[]);
            }
            _ => {
                let write = wr.opcode.is_rdma();
                let imm = wr.opcode.has_imm().then_some(wr.imm);
                let chunks: Vec<&[u8]> = if data.is_empty() {
                    vec![&[][..]]
                } else {
                    data.chunks(mtu).collect()
                };
                let n = chunks.len();
                for (k, chunk) in chunks.iter().enumerate() {
                    let (is_first, is_last) = (k == 0, k + 1 == n);
                    let opc = match (write, is_first, is_last, imm.is_some()) {
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
                    };
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
                        h.imm = imm;
                    }
                    self.rc_send(qpn, h, chunk);
                }
                if let Some(rc) = self.rc(qpn) {
                    rc.sq[i].data = data;
                }
            }
        }
    }

    fn rc_arm_timer(&mut self, qpn: u32) {
        let now = self.fabric.now();
        let qp = &self.qps[&qpn];
        let t = ack_timeout_ns(qp.attr.timeout);
        let Some(rc) = self.rc(qpn) else { return };
        let outstanding = rc.sq.iter().any(|w| w.sent && !w.done);
        match (outstanding, t) {
            (true, Some(t)) => {
                rc.ack_deadline = now + t;
                if !rc.ack_timer_pending {
                    rc.ack_timer_pending = true;
                    self.fabric
                        .schedule_timer(now + t, token(qpn, ACK_TIMER, 0));
                }
            }
            _ => rc.ack_deadline = 0,
        }
    }

    /// SQD -> RTS: transmit what was queued meanwhile.
    pub(crate) fn rc_resume(&mut self, qpn: u32) {
        self.rc_pump(qpn);
    }

    /// Completes finished WQEs from the head of the send queue, in order.
    fn rc_complete_done(&mut self, qpn: u32) {
        self.rc_complete_done_inner(qpn);
        let qp = &self.qps[&qpn];
        let (ctx, sqd) = (qp.ctx, qp.state == QpState::Sqd);
        if let Some(rc) = self.rc(qpn) {
            if sqd && rc.drain_notify && !rc.sq.iter().any(|w| w.sent) {
                rc.drain_notify = false;
                self.async_event(ctx, EventType::SqDrained, EventElement::Qp(qpn));
            }
        }
    }

    fn rc_complete_done_inner(&mut self, qpn: u32) {
        loop {
            let qp = self.qps.get_mut(&qpn).expect("exists");
            let (cq, sig_all) = (qp.send_cq, qp.sq_sig_all);
            let Some(rc) = qp.rc.as_deref_mut() else {
                return;
            };
            if !rc.sq.front().is_some_and(|w| w.done) {
                return;
            }
            let w = rc.sq.pop_front().expect("front exists");
            if sig_all || w.wr.flags.contains(SendFlags::SIGNALED) {
                let mut c = completion(w.wr.wr_id, WcStatus::Success, w.completion_opcode(), qpn);
                c.byte_len = match w.wr.opcode {
                    SendOpcode::AtomicCmpAndSwp | SendOpcode::AtomicFetchAndAdd => 8,
                    SendOpcode::RdmaRead => w.wr.sges.as_slice().iter().map(|s| s.length).sum(),
                    _ => w.data.len() as u32,
                };
                self.complete(cq, c, false);
            }
        }
    }

    /// Completes WQE `i` with an error (always reported), then the QP enters ERR and the
    /// rest is flushed.
    fn rc_fail(&mut self, qpn: u32, i: usize, status: WcStatus) {
        self.rc_complete_done(qpn);
        let qp = self.qps.get_mut(&qpn).expect("exists");
        let cq = qp.send_cq;
        let Some(rc) = qp.rc.as_deref_mut() else {
            return;
        };
        let i = i.min(rc.sq.len().saturating_sub(1));
        if let Some(w) = rc.sq.remove(i) {
            let c = completion(w.wr.wr_id, status, w.completion_opcode(), qpn);
            self.complete(cq, c, false);
        }
        self.enter_error(qpn);
    }

    pub(crate) fn on_timer(&mut self, tok: u64) {
        let qpn = (tok & 0x00ff_ffff) as u32;
        let kind = (tok >> 24) & 0xff;
        let gen = (tok >> 32) as u32;
        let Some(qp) = self.qps.get(&qpn) else { return };
        if !matches!(qp.state, QpState::Rts | QpState::Sqd) {
            return;
        }
        let now = self.fabric.now();
        let Some(rc) = self.rc(qpn) else { return };
        if kind == ACK_TIMER {
            rc.ack_timer_pending = false;
            if rc.ack_deadline == 0 {
                return;
            }
            if now < rc.ack_deadline {
                // Re-armed since this event was set: wait for the new deadline.
                rc.ack_timer_pending = true;
                let at = rc.ack_deadline;
                self.fabric.schedule_timer(at, token(qpn, ACK_TIMER, 0));
                return;
            }
            rc.ack_deadline = 0;
            let Some(i) = rc.sq.iter().position(|w| w.sent && !w.done) else {
                return;
            };
            if rc.retry_left == 0 {
                self.rc_fail(qpn, i, WcStatus::RetryExcErr);
                return;
            }
            rc.retry_left -= 1;
        } else if rc.timer_gen != gen {
            return;
        }
        self.rc_retransmit(qpn);
    }

    /// Go-back-N: sends again every WQE that was sent and is not done.
    fn rc_retransmit(&mut self, qpn: u32) {
        let mtu = self.path_mtu(qpn);
        let idx: Vec<usize> = match self.rc(qpn) {
            Some(rc) => (0..rc.sq.len())
                .filter(|&i| rc.sq[i].sent && !rc.sq[i].done)
                .collect(),
            None => return,
        };
        for i in idx {
            self.rc_transmit_wqe(qpn, i, mtu);
        }
        self.rc_arm_timer(qpn);
    }

    /// Marks everything up to `psn` acknowledged (sends and writes; reads and atomics
    /// complete only with their responses).
    fn rc_ack_through(&mut self, qpn: u32, psn: u32) {
        let retry = self.qps[&qpn].attr.retry_cnt;
        let rnr = self.qps[&qpn].attr.rnr_retry;
        let Some(rc) = self.rc(qpn) else { return };
        let mut progress = false;
        for w in rc.sq.iter_mut().filter(|w| w.sent && !w.done) {
            if psn_cmp(w.last_psn(), psn) > 0 {
                break;
            }
            if w.wr.opcode != SendOpcode::RdmaRead && !w.wr.opcode.is_atomic() {
                w.done = true;
                progress = true;
            }
        }
        if progress {
            rc.retry_left = retry;
            rc.rnr_left = rnr;
        }
    }

    pub(crate) fn rc_rx(&mut self, dev: usize, _src: Ipv4Addr, pkt: &RocePacket<'_>) {
        let bth = pkt.headers.bth;
        let qpn = bth.dest_qp;
        let Some(qp) = self.qps.get(&qpn) else {
            self.devices[dev].stats.rx_unclaimed += 1;
            return;
        };
        let want = if bth.opcode & 0xe0 == op::UC {
            QpType::Uc
        } else {
            QpType::Rc
        };
        if qp.dev != dev
            || qp.qp_type != want
            || !matches!(qp.state, QpState::Rtr | QpState::Rts | QpState::Sqd)
        {
            self.devices[dev].stats.rx_unclaimed += 1;
            return;
        }
        let o = bth.opcode & 0x1f;
        if matches!(
            o,
            op::ACKNOWLEDGE
                | op::ATOMIC_ACKNOWLEDGE
                | op::READ_RESPONSE_FIRST
                | op::READ_RESPONSE_MIDDLE
                | op::READ_RESPONSE_LAST
                | op::READ_RESPONSE_ONLY
        ) {
            if matches!(self.qps[&qpn].state, QpState::Rts | QpState::Sqd) {
                self.rc_response(qpn, pkt);
            }
        } else {
            self.rc_request(dev, qpn, pkt);
        }
    }

    fn rc_reply(&mut self, qpn: u32, psn: u32, syn: u8) {
        let msn = self.rc(qpn).map_or(0, |r| r.msn);
        let h = RoceHeaders {
            bth: Bth {
                opcode: op::ACKNOWLEDGE,
                psn,
                ..Bth::default()
            },
            aeth: Some(Aeth { syndrome: syn, msn }),
            ..RoceHeaders::default()
        };
        self.rc_send(qpn, h, &[]);
    }

    fn rc_request(&mut self, dev: usize, qpn: u32, pkt: &RocePacket<'_>) {
        let bth = pkt.headers.bth;
        let o = bth.opcode & 0x1f;
        let qp = &self.qps[&qpn];
        let uc = qp.qp_type == QpType::Uc;
        let (min_rnr, access, pd, peer) = (
            qp.attr.min_rnr_timer,
            qp.attr.qp_access_flags,
            qp.pd,
            qp.attr.dest_qp_num,
        );
        let (in_rtr, ctx) = (qp.state == QpState::Rtr, qp.ctx);
        let rc = self.rc(qpn).expect("connected QP");
        if in_rtr && !rc.comm_est {
            // The first packet on a QP still in RTR: IBV_EVENT_COMM_EST.
            rc.comm_est = true;
            self.async_event(ctx, EventType::CommEst, EventElement::Qp(qpn));
        }
        let rc = self.rc(qpn).expect("connected QP");
        let d = psn_cmp(bth.psn, rc.epsn);
        let starts = matches!(
            o,
            op::SEND_FIRST
                | op::SEND_ONLY
                | op::SEND_ONLY_IMM
                | op::WRITE_FIRST
                | op::WRITE_ONLY
                | op::WRITE_ONLY_IMM
        );
        if uc && d != 0 {
            // UC: a gap loses the message in progress; a new message resynchronises.
            rc.recv = None;
            rc.write = None;
            if !(d > 0 && starts) {
                self.devices[dev].stats.rx_out_of_sequence += 1;
                return;
            }
            rc.epsn = bth.psn;
        } else if d < 0 {
            self.devices[dev].stats.rx_out_of_sequence += 1;
            self.rc_duplicate(qpn, pkt);
            return;
        } else if d > 0 {
            let first_nak = !rc.nak_sent;
            rc.nak_sent = true;
            let e = rc.epsn;
            self.devices[dev].stats.rx_out_of_sequence += 1;
            if first_nak {
                self.rc_reply(qpn, e, syndrome::NAK_PSN_SEQ_ERROR);
            }
            return;
        }
        let rc = self.rc(qpn).expect("connected QP");
        rc.nak_sent = false;
        // NAKs of class C errors (invalid request, remote access, remote operational) also
        // take the responder to ERR, with the matching async event, as rxe and mlx5 do.
        let nak = |w: &mut World, syn: u8| {
            if uc {
                return;
            }
            w.rc_reply(qpn, bth.psn, syn);
            let event = match syn {
                syndrome::NAK_INVALID_REQUEST => Some(EventType::QpReqErr),
                syndrome::NAK_REMOTE_ACCESS_ERROR => Some(EventType::QpAccessErr),
                syndrome::NAK_REMOTE_OPERATIONAL_ERROR => Some(EventType::QpFatal),
                _ => None,
            };
            if let Some(e) = event {
                w.async_event(ctx, e, EventElement::Qp(qpn));
                w.enter_error(qpn);
            }
        };
        match o {
            op::SEND_FIRST
            | op::SEND_ONLY
            | op::SEND_ONLY_IMM
            | op::SEND_MIDDLE
            | op::SEND_LAST
            | op::SEND_LAST_IMM => {
                let first = matches!(o, op::SEND_FIRST | op::SEND_ONLY | op::SEND_ONLY_IMM);
                if first {
                    let Some((wqe, wpd)) = self.take_recv(qpn) else {
                        self.devices[dev].stats.rx_no_wqe += 1;
                        nak(self, syndrome::RNR_NAK | (min_rnr & 0x1f));
                        return;
                    };
                    if let Err(s) = self.mrs.check_local(wpd, wqe.sges.as_slice(), true) {
                        let s = self.local_status(self.devices[dev].personality, s);
                        let cq = self.qps[&qpn].recv_cq;
                        self.complete(cq, completion(wqe.wr_id, s, WcOpcode::Recv, qpn), false);
                        nak(self, syndrome::NAK_REMOTE_OPERATIONAL_ERROR);
                        self.enter_error(qpn);
                        return;
                    }
                    let rc = self.rc(qpn).expect("connected QP");
                    rc.recv = Some(InRecv {
                        wqe,
                        pd: wpd,
                        data: Vec::new(),
                    });
                }
                let rc = self.rc(qpn).expect("connected QP");
                let Some(r) = rc.recv.as_mut() else {
                    nak(self, syndrome::NAK_INVALID_REQUEST);
                    return;
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
                    let r = rc.recv.take().expect("just used");
                    let cq = self.qps[&qpn].recv_cq;
                    self.complete(
                        cq,
                        completion(r.wqe.wr_id, WcStatus::LocLenErr, WcOpcode::Recv, qpn),
                        false,
                    );
                    nak(self, syndrome::NAK_INVALID_REQUEST);
                    self.enter_error(qpn);
                    return;
                }
                if matches!(
                    o,
                    op::SEND_ONLY | op::SEND_ONLY_IMM | op::SEND_LAST | op::SEND_LAST_IMM
                ) {
                    let r = rc.recv.take().expect("in progress");
                    rc.msn = psn_add(rc.msn, 1);
                    let _ = r.pd;
                    // SAFETY: the SGEs passed check_local with LOCAL_WRITE when the message began.
                    let n =
                        unsafe { memory::scatter(r.wqe.sges.as_slice(), &[&r.data]) }.unwrap_or(0);
                    let mut c = completion(r.wqe.wr_id, WcStatus::Success, WcOpcode::Recv, qpn);
                    c.byte_len = n as u32;
                    c.src_qp = peer;
                    if let Some(i) = pkt.headers.imm {
                        c.imm_data = i;
                        c.wc_flags |= WcFlags::WITH_IMM;
                    }
                    let cq = self.qps[&qpn].recv_cq;
                    self.complete(cq, c, bth.solicited);
                }
            }
            op::WRITE_FIRST
            | op::WRITE_ONLY
            | op::WRITE_ONLY_IMM
            | op::WRITE_MIDDLE
            | op::WRITE_LAST
            | op::WRITE_LAST_IMM => {
                let with_imm = matches!(o, op::WRITE_ONLY_IMM | op::WRITE_LAST_IMM);
                let mut recv = None;
                if with_imm {
                    match self.take_recv(qpn) {
                        Some(x) => recv = Some(x),
                        None => {
                            self.devices[dev].stats.rx_no_wqe += 1;
                            nak(self, syndrome::RNR_NAK | (min_rnr & 0x1f));
                            return;
                        }
                    }
                }
                if let Some(reth) = pkt.headers.reth {
                    let span = if access.contains(AccessFlags::REMOTE_WRITE) {
                        self.mrs.check_remote(
                            pd,
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
                            self.untake_recv(qpn, w);
                        }
                        nak(self, syndrome::NAK_REMOTE_ACCESS_ERROR);
                        return;
                    };
                    let rc = self.rc(qpn).expect("connected QP");
                    rc.write = Some(InWrite {
                        addr: span.addr,
                        remaining: span.len as u64,
                        total: span.len as u64,
                    });
                }
                let rc = self.rc(qpn).expect("connected QP");
                let Some(wr) = rc.write.as_mut() else {
                    nak(self, syndrome::NAK_INVALID_REQUEST);
                    return;
                };
                if pkt.payload.len() as u64 > wr.remaining {
                    rc.write = None;
                    nak(self, syndrome::NAK_INVALID_REQUEST);
                    return;
                }
                // SAFETY: the span was checked against the key table with REMOTE_WRITE for
                // the whole DMA length, and `remaining` bounds what is written.
                unsafe {
                    memory::write_span(
                        Span {
                            addr: wr.addr,
                            len: pkt.payload.len(),
                        },
                        pkt.payload,
                    )
                };
                wr.addr += pkt.payload.len() as u64;
                wr.remaining -= pkt.payload.len() as u64;
                let total = wr.total;
                let last = matches!(
                    o,
                    op::WRITE_ONLY | op::WRITE_ONLY_IMM | op::WRITE_LAST | op::WRITE_LAST_IMM
                );
                if last {
                    rc.write = None;
                    rc.msn = psn_add(rc.msn, 1);
                }
                if let Some((w, _)) = recv {
                    let mut c =
                        completion(w.wr_id, WcStatus::Success, WcOpcode::RecvRdmaWithImm, qpn);
                    c.imm_data = pkt.headers.imm.unwrap_or(0);
                    c.wc_flags = WcFlags::WITH_IMM;
                    c.src_qp = peer;
                    c.byte_len = total as u32;
                    let cq = self.qps[&qpn].recv_cq;
                    self.complete(cq, c, bth.solicited);
                }
            }
            op::READ_REQUEST => {
                let reth = pkt.headers.reth.unwrap_or_default();
                if !self.rc_read_respond(qpn, bth.psn, reth, access, pd) {
                    nak(self, syndrome::NAK_REMOTE_ACCESS_ERROR);
                    return;
                }
                return;
            }
            op::COMPARE_SWAP | op::FETCH_ADD => {
                let a = pkt.headers.atomic_eth.unwrap_or_default();
                if a.va & 7 != 0 {
                    nak(self, syndrome::NAK_INVALID_REQUEST);
                    return;
                }
                let span = if access.contains(AccessFlags::REMOTE_ATOMIC) {
                    self.mrs
                        .check_remote(pd, a.rkey, a.va, 8, AccessFlags::REMOTE_ATOMIC)
                } else {
                    None
                };
                let Some(span) = span else {
                    nak(self, syndrome::NAK_REMOTE_ACCESS_ERROR);
                    return;
                };
                let cas = o == op::COMPARE_SWAP;
                // SAFETY: an 8-byte span checked with REMOTE_ATOMIC just above.
                let orig = unsafe {
                    memory::atomic_u64(span.addr, |v| {
                        if cas {
                            if v == a.compare {
                                a.swap_add
                            } else {
                                v
                            }
                        } else {
                            v.wrapping_add(a.swap_add)
                        }
                    })
                };
                let rc = self.rc(qpn).expect("connected QP");
                rc.msn = psn_add(rc.msn, 1);
                rc.epsn = psn_add(bth.psn, 1);
                let msn = rc.msn;
                rc.atomic_cache.push_back((bth.psn, orig, msn));
                if rc.atomic_cache.len() > 16 {
                    rc.atomic_cache.pop_front();
                }
                self.rc_atomic_ack(qpn, bth.psn, orig, msn);
                return;
            }
            _ => {
                nak(self, syndrome::NAK_INVALID_REQUEST);
                return;
            }
        }
        let rc = self.rc(qpn).expect("connected QP");
        rc.epsn = psn_add(bth.psn, 1);
        if bth.ack_req && !uc {
            self.rc_reply(qpn, bth.psn, syndrome::ACK_NO_CREDITS);
        }
    }

    fn rc_atomic_ack(&mut self, qpn: u32, psn: u32, orig: u64, msn: u32) {
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
        self.rc_send(qpn, h, &[]);
    }

    /// Answers a READ request at `psn`; false on an access error.
    fn rc_read_respond(
        &mut self,
        qpn: u32,
        psn: u32,
        reth: Reth,
        access: AccessFlags,
        pd: u32,
    ) -> bool {
        let span = if access.contains(AccessFlags::REMOTE_READ) {
            self.mrs.check_remote(
                pd,
                reth.rkey,
                reth.va,
                u64::from(reth.dma_len),
                AccessFlags::REMOTE_READ,
            )
        } else {
            None
        };
        let Some(span) = span else { return false };
        let mut data = Vec::with_capacity(span.len);
        // SAFETY: checked against the key table with REMOTE_READ for the whole length.
        unsafe { memory::read_span(span, &mut data) };
        let mtu = self.path_mtu(qpn);
        let chunks: Vec<&[u8]> = if data.is_empty() {
            vec![&[][..]]
        } else {
            data.chunks(mtu).collect()
        };
        let n = chunks.len();
        let rc = self.rc(qpn).expect("connected QP");
        let fresh = psn_cmp(psn, rc.epsn) >= 0;
        if fresh {
            rc.msn = psn_add(rc.msn, 1);
            rc.epsn = psn_add(psn, n as u32);
        }
        let msn = rc.msn;
        for (k, c) in chunks.iter().enumerate() {
            let opc = match (k == 0, k + 1 == n) {
                (true, true) => op::READ_RESPONSE_ONLY,
                (true, false) => op::READ_RESPONSE_FIRST,
                (false, false) => op::READ_RESPONSE_MIDDLE,
                (false, true) => op::READ_RESPONSE_LAST,
            };
            let aeth = (k == 0 || k + 1 == n).then_some(Aeth {
                syndrome: syndrome::ACK_NO_CREDITS,
                msn,
            });
            let h = RoceHeaders {
                bth: Bth {
                    opcode: opc,
                    psn: psn_add(psn, k as u32),
                    ..Bth::default()
                },
                aeth,
                ..RoceHeaders::default()
            };
            self.rc_send(qpn, h, c);
        }
        true
    }

    /// A request PSN below the expected one: answer again without executing again
    /// (reads are re-read, atomics answered from the cache, the rest re-ACKed).
    fn rc_duplicate(&mut self, qpn: u32, pkt: &RocePacket<'_>) {
        let bth = pkt.headers.bth;
        let qp = &self.qps[&qpn];
        let (access, pd) = (qp.attr.qp_access_flags, qp.pd);
        match bth.opcode & 0x1f {
            op::READ_REQUEST => {
                let reth = pkt.headers.reth.unwrap_or_default();
                self.rc_read_respond(qpn, bth.psn, reth, access, pd);
            }
            op::COMPARE_SWAP | op::FETCH_ADD => {
                let hit = self
                    .rc(qpn)
                    .and_then(|rc| rc.atomic_cache.iter().find(|c| c.0 == bth.psn).copied());
                if let Some((psn, orig, msn)) = hit {
                    self.rc_atomic_ack(qpn, psn, orig, msn);
                }
            }
            _ => {
                let e = self.rc(qpn).map_or(0, |rc| psn_add(rc.epsn, PSN_MASK));
                self.rc_reply(qpn, e, syndrome::ACK_NO_CREDITS);
            }
        }
    }

    fn rc_response(&mut self, qpn: u32, pkt: &RocePacket<'_>) {
        let bth = pkt.headers.bth;
        let o = bth.opcode & 0x1f;
        match o {
            op::ACKNOWLEDGE => {
                let syn = pkt.headers.aeth.map_or(0, |a| a.syndrome);
                match syn & 0xe0 {
                    0x00 => {
                        self.rc_ack_through(qpn, bth.psn);
                        self.rc_arm_timer(qpn);
                    }
                    syndrome::RNR_NAK => {
                        self.rc_ack_through(qpn, psn_add(bth.psn, PSN_MASK));
                        let infinite = self.qps[&qpn].attr.rnr_retry == 7;
                        let now = self.fabric.now();
                        let Some(rc) = self.rc(qpn) else { return };
                        let Some(i) = rc.sq.iter().position(|w| w.sent && !w.done) else {
                            return;
                        };
                        if !infinite {
                            if rc.rnr_left == 0 {
                                self.rc_fail(qpn, i, WcStatus::RnrRetryExcErr);
                                return;
                            }
                            rc.rnr_left -= 1;
                        }
                        rc.timer_gen = rc.timer_gen.wrapping_add(1);
                        rc.ack_deadline = 0; // waiting out the RNR timer, not an ACK
                        let gen = rc.timer_gen;
                        self.fabric
                            .schedule_timer(now + rnr_ns(syn & 0x1f), token(qpn, RNR_TIMER, gen));
                    }
                    syndrome::NAK => {
                        let Some(rc) = self.rc(qpn) else { return };
                        let Some(i) = rc
                            .sq
                            .iter()
                            .position(|w| w.sent && !w.done && psn_cmp(w.last_psn(), bth.psn) >= 0)
                        else {
                            return;
                        };
                        match syn {
                            syndrome::NAK_PSN_SEQ_ERROR => {
                                self.rc_ack_through(qpn, psn_add(bth.psn, PSN_MASK));
                                self.rc_retransmit(qpn);
                            }
                            syndrome::NAK_INVALID_REQUEST => {
                                self.rc_fail(qpn, i, WcStatus::RemInvReqErr)
                            }
                            syndrome::NAK_REMOTE_ACCESS_ERROR => {
                                self.rc_fail(qpn, i, WcStatus::RemAccessErr)
                            }
                            _ => self.rc_fail(qpn, i, WcStatus::RemOpErr),
                        }
                    }
                    _ => {}
                }
            }
            op::ATOMIC_ACKNOWLEDGE => {
                let pd = self.qps[&qpn].pd;
                let Some(rc) = self.rc(qpn) else { return };
                let Some(w) = rc.sq.iter_mut().find(|w| {
                    w.sent && !w.done && w.wr.opcode.is_atomic() && w.first_psn == bth.psn
                }) else {
                    return;
                };
                let orig = pkt.headers.atomic_ack.unwrap_or(0);
                let sges = w.wr.sges.clone();
                w.done = true;
                if self.mrs.check_local(pd, sges.as_slice(), true).is_ok() {
                    // SAFETY: checked with LOCAL_WRITE just above; an 8-byte local SGE.
                    let _ = unsafe { memory::scatter(sges.as_slice(), &[&orig.to_ne_bytes()]) };
                }
                self.rc_ack_through(qpn, psn_add(bth.psn, PSN_MASK));
                self.rc_arm_timer(qpn);
            }
            _ => {
                // READ responses: in order, into the WQE's buffer, scattered at the end.
                let pd = self.qps[&qpn].pd;
                let Some(rc) = self.rc(qpn) else { return };
                let Some(w) = rc.sq.iter_mut().find(|w| {
                    w.sent
                        && !w.done
                        && w.wr.opcode == SendOpcode::RdmaRead
                        && psn_cmp(bth.psn, w.first_psn) >= 0
                        && psn_cmp(bth.psn, w.last_psn()) <= 0
                }) else {
                    return;
                };
                if psn_add(w.first_psn, w.read_next) != bth.psn {
                    return; // a response went missing: the ACK timer will ask again
                }
                w.read_next += 1;
                w.data.extend_from_slice(pkt.payload);
                let first = w.first_psn;
                if matches!(o, op::READ_RESPONSE_LAST | op::READ_RESPONSE_ONLY) {
                    w.done = true;
                    let sges = w.wr.sges.clone();
                    let data = std::mem::take(&mut w.data);
                    if self.mrs.check_local(pd, sges.as_slice(), true).is_ok() {
                        // SAFETY: checked with LOCAL_WRITE just above.
                        let _ = unsafe { memory::scatter(sges.as_slice(), &[&data]) };
                    }
                }
                self.rc_ack_through(qpn, psn_add(first, PSN_MASK));
                self.rc_arm_timer(qpn);
            }
        }
        self.rc_complete_done(qpn);
    }
}
