//! The simulated NICs of every host, over one [`Fabric`]: the object tables (contexts,
//! PDs, MRs, CQs, channels, SRQs, QPs, flow rules), the operations on them (completions,
//! async events, receive queues, ERR), and the driver that runs the transports: it frames
//! and routes what the sans-IO machines ([`super::rc`], [`super::ud`], [`super::raw`],
//! [`super::steering`]) decide, and feeds them what the fabric delivers. Everything runs
//! under one lock, driven by the application's calls: time moves only in
//! [`World::advance`].

use super::memory::{self, MrTable};
use super::personality::Personality;
use super::rc::{self, Count, QpView, RcState};
use super::send_queue::Executed;
use super::{raw, steering, ud};
use crate::clock::Nanos;
use crate::fabric::{is_roce, Fabric, Output};
use crate::frame::eth::Mac;
use crate::frame::roce::{self, build_roce_frame, opcode, RoceHeaders, RocePacket, RoceRoute};
use crate::frame::FrameView;
use crate::ids::{HostId, PortId};
use crate::trace::tag;
use rustc_hash::FxHashMap as HashMap;
use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use verbs_api::{
    AsyncEvent, Completion, EventElement, EventType, QpAttr, QpState, QpType, SendFlags, WcFlags,
    WcOpcode, WcStatus,
};

pub(crate) use super::records::{Arm, Channel, Cq, Cqe, Ctx, Device, FlowRule, NicStats, Qp, Srq};
pub(crate) use super::wqe::{completion, RecvWqe, SgeList, UdDest, WrCopy};

/// Trace tags of the verbs layer.
pub(crate) mod vtag {
    use super::tag::USER;
    pub const POST_SEND: u8 = USER;
    pub const POST_RECV: u8 = USER + 1;
    pub const COMPLETION: u8 = USER + 2;
    pub const ASYNC: u8 = USER + 3;
    pub const MODIFY: u8 = USER + 4;
    pub const RX_DROP: u8 = USER + 5;
}

/// Result of handling a send WR at once (RAW, UD).
pub(crate) struct Posted {
    pub status: WcStatus,
    pub byte_len: u32,
}

/// Everything simulated.
#[derive(Debug)]
pub(crate) struct World {
    pub(crate) fabric: Fabric,
    pub(crate) devices: Vec<Device>,
    pub(crate) port_owner: Vec<Option<usize>>,
    pub(crate) ctxs: HashMap<u32, Ctx>,
    pub(crate) pds: HashMap<u32, usize>,
    pub(crate) mrs: MrTable,
    pub(crate) cqs: HashMap<u32, Cq>,
    pub(crate) channels: HashMap<u32, Channel>,
    pub(crate) srqs: HashMap<u32, Srq>,
    pub(crate) qps: HashMap<u32, Qp>,
    pub(crate) flows: HashMap<u32, FlowRule>,
    next_handle: u32,
    next_qpn: u32,
    scratch: Vec<u8>,
    steer_scratch: Vec<u32>,
    sniff_scratch: Vec<u32>,
    free_frames: Vec<Vec<u8>>,
    /// QPs whose completer has work for the next step (sends completed after the post).
    due: Vec<u32>,
    due_scratch: Vec<u32>,
}

impl World {
    pub fn new(seed: u64) -> Self {
        World {
            fabric: Fabric::new(seed),
            devices: Vec::new(),
            port_owner: Vec::new(),
            ctxs: HashMap::default(),
            pds: HashMap::default(),
            mrs: MrTable::default(),
            cqs: HashMap::default(),
            channels: HashMap::default(),
            srqs: HashMap::default(),
            qps: HashMap::default(),
            flows: HashMap::default(),
            next_handle: 0,
            next_qpn: 0x10,
            scratch: Vec::new(),
            steer_scratch: Vec::new(),
            sniff_scratch: Vec::new(),
            free_frames: Vec::new(),
            due: Vec::new(),
            due_scratch: Vec::new(),
        }
    }

    pub fn handle(&mut self) -> u32 {
        self.next_handle += 1;
        self.next_handle
    }

    pub fn qpn(&mut self) -> u32 {
        self.next_qpn += 1;
        self.next_qpn & 0x00ff_ffff
    }

    pub fn add_device(&mut self, host: HostId, personality: Personality, port: PortId) -> usize {
        let cfg = self
            .fabric
            .port_config(port)
            .map_or((Mac::default(), Ipv4Addr::UNSPECIFIED), |c| (c.mac, c.ipv4));
        let index = self
            .devices
            .iter()
            .filter(|d| d.host == host && d.personality == personality)
            .count();
        let m = cfg.0 .0;
        let guid = u64::from_be_bytes([m[0] ^ 2, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]]);
        self.devices.push(Device {
            host,
            name: personality.name(index),
            personality,
            port,
            mac: cfg.0,
            ip: cfg.1,
            guid,
            mcast: BTreeMap::new(),
            flows: Vec::new(),
            stats: NicStats::default(),
        });
        if self.port_owner.len() <= port.0 as usize {
            self.port_owner.resize(port.0 as usize + 1, None);
        }
        self.port_owner[port.0 as usize] = Some(self.devices.len() - 1);
        self.devices.len() - 1
    }

    pub fn frame_buffer(&mut self) -> Vec<u8> {
        let mut v = self.free_frames.pop().unwrap_or_default();
        v.clear();
        v
    }

    pub fn recycle(&mut self, v: Vec<u8>) {
        if self.free_frames.len() < 1024 && v.capacity() <= 16384 {
            self.free_frames.push(v);
        }
    }

    // ---- time ----

    /// Takes the next event (at most `deadline`) and lets the NICs handle it: first the
    /// completers' work left by posts (at the current time), then the fabric's next
    /// event. False when nothing was due by then (the clock then stands at `deadline`,
    /// unless it is MAX).
    pub fn advance(&mut self, deadline: Nanos) -> bool {
        if !self.due.is_empty() {
            self.run_completers();
            return true;
        }
        match self.fabric.step_until(deadline) {
            Some(Output::Frame { port, frame, .. }) => {
                self.on_frame(port, frame);
                true
            }
            Some(Output::Timer { token }) => {
                self.on_timer(token);
                true
            }
            None => false,
        }
    }

    // ---- completions and events ----

    pub fn async_event(&mut self, ctx: u32, event_type: EventType, element: EventElement) {
        let el = match element {
            EventElement::Cq(h) | EventElement::Qp(h) | EventElement::Srq(h) => u64::from(h),
            EventElement::Port(p) => u64::from(p),
            EventElement::Device => 0,
        };
        self.fabric.trace_event(
            vtag::ASYNC,
            &[self.fabric.now(), u64::from(event_type.as_raw()), el],
        );
        if let Some(c) = self.ctxs.get_mut(&ctx) {
            c.events.push_back(AsyncEvent {
                event_type,
                element,
            });
        }
    }

    /// Adds a completion to `cq`, with overrun and notification handling.
    pub fn complete(&mut self, cq: u32, wc: Completion, solicited: bool) {
        self.push_cqe(cq, wc, solicited, 0);
    }

    /// [`World::complete`] of a CQE whose poll gives `frees` send-queue slots back to its
    /// QP (mlx5).
    fn push_cqe(&mut self, cq: u32, wc: Completion, solicited: bool, frees: u32) {
        self.fabric.trace_event(
            vtag::COMPLETION,
            &[
                self.fabric.now(),
                u64::from(cq),
                wc.wr_id,
                u64::from(wc.status.as_raw()),
                u64::from(wc.byte_len),
                u64::from(wc.qp_num),
            ],
        );
        let Some(c) = self.cqs.get_mut(&cq) else {
            return;
        };
        if c.broken {
            return;
        }
        if c.entries.len() >= c.cqe as usize {
            // Overrun: the completion is lost and the consumer told. mlx5 breaks the CQ;
            // rxe keeps it usable.
            if c.personality == Personality::Mlx5 {
                c.broken = true;
            }
            let (ctx, personality) = (c.ctx, c.personality);
            self.async_event(ctx, EventType::CqErr, EventElement::Cq(cq));
            if personality == Personality::Rxe && wc.is_recv() {
                // rxe's responder moves the QP whose receive completion was lost to ERR;
                // flushing its other receives into the full CQ raises CQ_ERR again each.
                self.enter_error(wc.qp_num);
            }
            return;
        }
        let error_solicits = !wc.status.is_success() && c.personality == Personality::Mlx5;
        c.entries.push_back(Cqe { wc, frees });
        let fire = match c.arm {
            Arm::None => false,
            Arm::Next => true,
            Arm::Solicited => solicited || error_solicits,
        };
        if fire {
            c.arm = Arm::None;
            c.unacked += 1;
            if let Some(ch) = c.channel.and_then(|h| self.channels.get_mut(&h)) {
                ch.events.push_back(cq);
            }
        }
    }

    // ---- QP state ----

    /// Moves a QP to ERR and flushes every outstanding WR (signaled or not) with
    /// WR_FLUSH_ERR, as the verbs man pages specify. (While an RC machine runs, it is out
    /// of its QP and flushes its own send queue.) False if the QP was already in ERR.
    pub fn enter_error(&mut self, qpn: u32) -> bool {
        let Some(qp) = self.qps.get_mut(&qpn) else {
            return false;
        };
        if qp.state == QpState::Err {
            return false;
        }
        qp.state = QpState::Err;
        if qp.srq.is_some() && self.devices[qp.dev].personality.raises_qp_error_events() {
            let ctx = qp.ctx;
            self.async_event(ctx, EventType::QpLastWqeReached, EventElement::Qp(qpn));
        }
        let Some(qp) = self.qps.get_mut(&qpn) else {
            return true;
        };
        let rq: Vec<RecvWqe> = qp.rq.drain(..).collect();
        let recv_cq = qp.recv_cq;
        let pending = qp
            .rc
            .as_mut()
            .map(|rc| rc.take_outstanding())
            .unwrap_or_default();
        // Flushed receives count as solicited (rxe posts completions made without a
        // packet so; mlx5 wakes a solicited-only CQ for every error completion anyway).
        for w in rq {
            self.complete(
                recv_cq,
                completion(w.wr_id, WcStatus::WrFlushErr, WcOpcode::Recv, qpn),
                true,
            );
        }
        for (wr_id, op) in pending {
            self.retire_send(qpn, completion(wr_id, WcStatus::WrFlushErr, op, qpn), true);
        }
        true
    }

    // ---- send completions ----

    /// A send WQE of `qpn` leaves the NIC's queue: with a CQE on the QP's send CQ when
    /// `reported`, else silently (an unsignaled success). Keeps mlx5's slot count.
    pub fn retire_send(&mut self, qpn: u32, wc: Completion, reported: bool) {
        let Some(qp) = self.qps.get_mut(&qpn) else {
            return;
        };
        let personality = self.devices[qp.dev].personality;
        let frees = qp.sq.retire(personality, reported);
        if reported {
            let cq = qp.send_cq;
            self.push_cqe(cq, wc, false, frees);
        }
    }

    /// Queues the completion of a send the NIC executed (or flushes) at post time; the
    /// completer makes it at the next step (see [`super::send_queue`]).
    pub fn queue_send(&mut self, qpn: u32, e: Executed) {
        let Some(qp) = self.qps.get_mut(&qpn) else {
            return;
        };
        if qp.sq.push(e) {
            self.due.push(qpn);
        }
    }

    /// The completers of the QPs with work left by posts, in the order it was left: the
    /// queued sends of each, then its RC/UC machine's.
    fn run_completers(&mut self) {
        let mut due = std::mem::replace(&mut self.due, std::mem::take(&mut self.due_scratch));
        for &qpn in &due {
            if let Some(qp) = self.qps.get_mut(&qpn) {
                qp.sq.take_due();
            }
            self.complete_queued_sends(qpn);
            self.run_rc(qpn, |rc, nic| rc.on_completer(nic));
        }
        due.clear();
        self.due_scratch = due;
    }

    /// Completes `qpn`'s queued sends in order. A failed send moves the QP to ERR on rxe
    /// (its receives flushed), to SQE on mlx5, once its completion is made.
    fn complete_queued_sends(&mut self, qpn: u32) {
        while let Some(e) = self.qps.get_mut(&qpn).and_then(|q| q.sq.pop()) {
            self.retire_send(qpn, e.wc, e.reported);
            let failed = !e.wc.status.is_success() && e.wc.status != WcStatus::WrFlushErr;
            if failed {
                let Some(qp) = self.qps.get_mut(&qpn) else {
                    return;
                };
                if self.devices[qp.dev].personality == Personality::Rxe {
                    self.enter_error(qpn);
                } else if matches!(qp.state, QpState::Rts | QpState::Sqd) {
                    qp.state = QpState::Sqe;
                }
            }
        }
    }

    /// Applies a modify the state table accepted.
    pub fn modify(
        &mut self,
        qpn: u32,
        attr: &QpAttr,
        mask: verbs_api::QpAttrMask,
    ) -> Result<(), verbs_api::Error> {
        use verbs_api::QpAttrMask as M;
        const OP: &str = "ibv_modify_qp";
        let inval = |m: &str| {
            Err(
                verbs_api::Error::new(verbs_api::ErrorKind::InvalidArgument, OP, m.to_string())
                    .with_errno(22),
            )
        };
        if mask.contains(M::PORT) && attr.port_num != 1 {
            return inval("the simulated device has one port, number 1");
        }
        if mask.contains(M::AV) && attr.ah_attr.grh.dgid.to_ipv4().is_none() {
            return inval("RoCE address vector needs an IPv4-mapped destination GID");
        }
        if mask.contains(M::TIMEOUT) && attr.timeout > 31 {
            return inval("the ACK timeout is a 5-bit value (at most 31)");
        }
        if (mask.contains(M::MAX_QP_RD_ATOMIC) && attr.max_rd_atomic > 128)
            || (mask.contains(M::MAX_DEST_RD_ATOMIC) && attr.max_dest_rd_atomic > 128)
        {
            return inval("at most 128 outstanding RDMA READs and atomics");
        }
        let now = self.fabric.now();
        let Some(qp) = self.qps.get_mut(&qpn) else {
            return inval("no such QP");
        };
        let a = &mut qp.attr;
        macro_rules! take {
            ($flag:ident, $($f:ident),+) => { if mask.contains(M::$flag) { $(a.$f = attr.$f;)+ } };
        }
        take!(PKEY_INDEX, pkey_index);
        take!(PORT, port_num);
        take!(QKEY, qkey);
        take!(ACCESS_FLAGS, qp_access_flags);
        take!(AV, ah_attr);
        take!(PATH_MTU, path_mtu);
        take!(TIMEOUT, timeout);
        take!(RETRY_CNT, retry_cnt);
        take!(RNR_RETRY, rnr_retry);
        take!(RQ_PSN, rq_psn);
        take!(SQ_PSN, sq_psn);
        take!(MAX_QP_RD_ATOMIC, max_rd_atomic);
        take!(MAX_DEST_RD_ATOMIC, max_dest_rd_atomic);
        take!(MIN_RNR_TIMER, min_rnr_timer);
        take!(DEST_QPN, dest_qp_num);
        let p = self.devices[qp.dev].personality;
        a.max_rd_atomic = p.rd_atomic(a.max_rd_atomic);
        a.max_dest_rd_atomic = p.rd_atomic(a.max_dest_rd_atomic);
        take!(EN_SQD_ASYNC_NOTIFY, en_sqd_async_notify);
        let old = qp.state;
        let new = if mask.contains(M::STATE) {
            attr.qp_state
        } else {
            old
        };
        self.fabric.trace_event(
            vtag::MODIFY,
            &[
                now,
                u64::from(qpn),
                u64::from(old.as_raw()),
                u64::from(new.as_raw()),
                u64::from(mask.bits()),
            ],
        );
        if new == QpState::Err {
            self.enter_error(qpn);
            return Ok(());
        }
        let qp = self.qps.get_mut(&qpn).expect("checked above");
        qp.state = new;
        match new {
            QpState::Reset => {
                qp.rq.clear();
                qp.sq.reset();
                qp.ud_psn = 0;
                if let Some(rc) = qp.rc.as_mut() {
                    rc.reset();
                }
            }
            QpState::Rtr if old != QpState::Rtr => {
                let rq_psn = qp.attr.rq_psn;
                if let Some(rc) = qp.rc.as_mut() {
                    rc.set_rq_psn(rq_psn);
                }
            }
            QpState::Rts if old == QpState::Rtr => {
                let sq_psn = qp.attr.sq_psn;
                let (retry, rnr) = (qp.attr.retry_cnt, qp.attr.rnr_retry);
                qp.ud_psn = sq_psn;
                if let Some(rc) = qp.rc.as_mut() {
                    rc.set_sq_psn(sq_psn);
                    rc.set_retries(retry, rnr);
                }
            }
            // Work queued while drained goes out now.
            QpState::Rts if old == QpState::Sqd && qp.rc.is_some() => {
                self.run_rc(qpn, |rc, nic| rc.resume(nic));
            }
            QpState::Sqd if old == QpState::Rts => {
                let notify = qp.attr.en_sqd_async_notify && mask.contains(M::EN_SQD_ASYNC_NOTIFY);
                if notify {
                    self.sqd_notify(qpn);
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Raises IBV_EVENT_SQ_DRAINED once nothing sent is outstanding (now, or when the last
    /// outstanding WQE completes).
    pub(crate) fn sqd_notify(&mut self, qpn: u32) {
        let Some(qp) = self.qps.get_mut(&qpn) else {
            return;
        };
        let ctx = qp.ctx;
        let drained = match qp.rc.as_deref_mut() {
            Some(rc) => rc.arm_drain_notify(),
            None => true,
        };
        if drained {
            self.async_event(ctx, EventType::SqDrained, EventElement::Qp(qpn));
        }
    }

    // ---- receive queues ----

    /// Takes the next receive WQE for `qpn` (its RQ or its SRQ, raising the SRQ limit
    /// event when the SRQ drops below its armed limit).
    pub fn take_recv(&mut self, qpn: u32) -> Option<(RecvWqe, u32)> {
        let qp = self.qps.get_mut(&qpn)?;
        let pd = qp.pd;
        match qp.srq {
            None => qp.rq.pop_front().map(|w| (w, pd)),
            Some(h) => {
                let srq = self.srqs.get_mut(&h)?;
                let w = srq.queue.pop_front()?;
                let pd = srq.pd;
                if srq.attr.srq_limit > 0 && (srq.queue.len() as u32) < srq.attr.srq_limit {
                    srq.attr.srq_limit = 0; // one shot: the consumer re-arms
                    let ctx = srq.ctx;
                    self.async_event(ctx, EventType::SrqLimitReached, EventElement::Srq(h));
                }
                Some((w, pd))
            }
        }
    }

    /// Puts a WQE back at the head (a receive that could not be used).
    pub fn untake_recv(&mut self, qpn: u32, w: RecvWqe) {
        let Some(qp) = self.qps.get_mut(&qpn) else {
            return;
        };
        match qp.srq {
            None => qp.rq.push_front(w),
            Some(h) => {
                if let Some(s) = self.srqs.get_mut(&h) {
                    s.queue.push_front(w);
                }
            }
        }
    }

    /// Delivers `pieces` into the next receive of `qpn` and completes it. False when no
    /// receive was posted (the frame is dropped, as hardware drops it).
    #[allow(clippy::too_many_arguments)]
    pub fn deliver(
        &mut self,
        qpn: u32,
        pieces: &[&[u8]],
        opcode: WcOpcode,
        src_qp: u32,
        imm: Option<u32>,
        flags: WcFlags,
        solicited: bool,
    ) -> bool {
        let Some((w, pd)) = self.take_recv(qpn) else {
            let dev = self.qps.get(&qpn).map_or(0, |q| q.dev);
            if let Some(d) = self.devices.get_mut(dev) {
                d.stats.rx_no_wqe += 1;
            }
            self.fabric
                .trace_event(vtag::RX_DROP, &[self.fabric.now(), u64::from(qpn), 1]);
            return false;
        };
        let qp = &self.qps[&qpn];
        let (recv_cq, qp_type) = (qp.recv_cq, qp.qp_type);
        let need: usize = pieces.iter().map(|p| p.len()).sum();
        let personality = self.devices[qp.dev].personality;
        let room: u64 = w.sges.as_slice().iter().map(|s| u64::from(s.length)).sum();
        let res = self
            .mrs
            .check_local(pd, w.sges.as_slice(), true)
            .map_err(|s| self.local_status(personality, s))
            .and_then(|_| {
                if need as u64 > room {
                    // A message larger than the buffer: what the driver reports differs.
                    Err(match qp_type {
                        QpType::Ud => personality.ud_too_long_status(),
                        _ => WcStatus::LocLenErr,
                    })
                } else {
                    // SAFETY: the SGEs passed the key table check with LOCAL_WRITE just
                    // above, and the pieces fit.
                    unsafe { memory::scatter(w.sges.as_slice(), pieces) }
                }
            });
        let mut wc = completion(w.wr_id, WcStatus::Success, opcode, qpn);
        match res {
            Ok(n) => {
                wc.byte_len = n as u32;
                wc.src_qp = src_qp;
                wc.wc_flags = flags;
                if let Some(i) = imm {
                    wc.imm_data = i;
                    wc.wc_flags |= WcFlags::WITH_IMM;
                }
                self.complete(recv_cq, wc, solicited);
            }
            Err(status) => {
                wc.status = status;
                self.complete(recv_cq, wc, false);
                self.enter_error(qpn);
            }
        }
        true
    }

    /// Maps the key table's verdict to what `personality` reports (a bad lkey differs).
    pub(crate) fn local_status(&self, personality: Personality, s: WcStatus) -> WcStatus {
        if s == WcStatus::LocQpOpErr {
            personality.bad_lkey_status()
        } else {
            s
        }
    }

    // ---- transmit side ----

    /// Executes a RAW_PACKET or UD send at once; RC/UC go to the RC engine.
    pub fn send_now(&mut self, qpn: u32, wr: &WrCopy) -> Posted {
        let qp = &self.qps[&qpn];
        let dev = qp.dev;
        let pd = qp.pd;
        let qp_type = qp.qp_type;
        if !wr.flags.contains(SendFlags::INLINE) {
            if let Err(s) = self.mrs.check_local(pd, wr.sges.as_slice(), false) {
                return Posted {
                    status: self.local_status(self.devices[dev].personality, s),
                    byte_len: 0,
                };
            }
        }
        // RAW frames are gathered straight into the frame buffer, UD payloads into scratch.
        let mut payload = if qp_type == QpType::RawPacket {
            self.frame_buffer()
        } else {
            std::mem::take(&mut self.scratch)
        };
        payload.clear();
        // SAFETY: the SGEs were checked against the key table just above, or are inline data
        // whose memory the poster vouched for in the unsafe post_send contract.
        unsafe { memory::gather(wr.sges.as_slice(), &mut payload) };
        let len = payload.len() as u32;
        let port = self.devices[dev].port;
        let status = match qp_type {
            QpType::RawPacket => {
                let mut frame = payload;
                payload = Vec::new();
                raw::prepare_send(&mut frame, wr.flags);
                self.sniff(dev, &frame);
                match self.fabric.transmit(port, frame) {
                    Ok(_) => WcStatus::Success,
                    Err(_) => WcStatus::LocLenErr,
                }
            }
            QpType::Ud => self.ud_send(qpn, wr, &payload),
            _ => WcStatus::LocQpOpErr,
        };
        if payload.capacity() > 0 {
            self.scratch = payload;
        }
        Posted {
            status,
            byte_len: len,
        }
    }

    // ---- receive side ----

    fn on_frame(&mut self, port: PortId, frame: Vec<u8>) {
        let Some(dev) = self.port_owner.get(port.0 as usize).copied().flatten() else {
            return;
        };
        if is_roce(&frame) {
            let Ok(view) = FrameView::parse(&frame) else {
                self.devices[dev].stats.rx_malformed += 1;
                return;
            };
            self.sniff(dev, &frame);
            self.roce_rx(dev, &frame, &view);
        } else if self.devices[dev].personality.raw_packet() {
            self.steer(dev, &frame);
        } else {
            // rxe: the kernel's network stack takes it; no verbs consumer sees it.
            self.devices[dev].stats.rx_unclaimed += 1;
        }
        self.recycle(frame);
    }

    fn roce_rx(&mut self, dev: usize, frame: &[u8], view: &FrameView) {
        let Some(range) = view.udp_payload() else {
            return;
        };
        let Some((ip, ip_off)) = view.ipv4 else {
            return;
        };
        let Ok(pkt) = roce::parse_roce(&frame[range]) else {
            self.devices[dev].stats.rx_malformed += 1;
            return;
        };
        if ip.dst != self.devices[dev].ip && !ip.dst.is_multicast() {
            self.devices[dev].stats.rx_unclaimed += 1;
            return;
        }
        let bth = pkt.headers.bth;
        if bth.opcode & 0xe0 == opcode::UD {
            let ip_hdr = &frame[ip_off..ip_off + 20];
            let targets: Vec<u32> = if bth.dest_qp == roce::MULTICAST_QPN {
                self.devices[dev]
                    .mcast
                    .get(&ip.dst)
                    .cloned()
                    .unwrap_or_default()
            } else {
                vec![bth.dest_qp]
            };
            if targets.is_empty() {
                self.devices[dev].stats.rx_unclaimed += 1;
            }
            for q in targets {
                self.ud_deliver(dev, q, &pkt, ip_hdr);
            }
        } else {
            self.rc_rx(dev, &pkt);
        }
    }

    // ---- UD ----

    fn ud_send(&mut self, qpn: u32, wr: &WrCopy, payload: &[u8]) -> WcStatus {
        let qp = self.qps.get_mut(&qpn).expect("caller checked");
        let d = &self.devices[qp.dev];
        let src = ud::UdSource {
            qpn,
            qkey: qp.attr.qkey,
            mac: d.mac,
            ip: d.ip,
            personality: d.personality,
        };
        let (dev, port) = (qp.dev, d.port);
        let topo = &self.fabric;
        let sent = ud::send(&src, &mut qp.ud_psn, wr, payload.len(), &|ip| {
            topo.mac_of_ip(ip)
        });
        let (route, h) = match sent {
            Ok(x) => x,
            Err(status) => return status,
        };
        let frame = build_roce_frame(&route, &h, payload);
        self.sniff(dev, &frame);
        match self.fabric.transmit(port, frame) {
            Ok(_) => WcStatus::Success,
            Err(_) => WcStatus::LocLenErr,
        }
    }

    fn ud_deliver(&mut self, dev: usize, qpn: u32, pkt: &RocePacket<'_>, ip_hdr: &[u8]) {
        let Some(qp) = self.qps.get(&qpn).filter(|q| q.dev == dev) else {
            self.devices[dev].stats.rx_unclaimed += 1;
            return;
        };
        let deth = pkt.headers.deth.unwrap_or_default();
        match ud::accept(qp.qp_type, qp.state, qp.attr.qkey, deth.qkey) {
            Ok(()) => {}
            Err(ud::Refused::NotReceiving) => {
                self.devices[dev].stats.rx_unclaimed += 1;
                return;
            }
            Err(ud::Refused::QkeyViolation) => {
                self.devices[dev].stats.rx_qkey_violation += 1;
                self.fabric
                    .trace_event(vtag::RX_DROP, &[self.fabric.now(), u64::from(qpn), 2]);
                return;
            }
        }
        self.deliver(
            qpn,
            &[&ud::grh(ip_hdr), pkt.payload],
            WcOpcode::Recv,
            deth.src_qp,
            pkt.headers.imm,
            WcFlags::GRH,
            pkt.headers.bth.solicited,
        );
    }

    // ---- RAW and flow steering ----

    /// Copies a frame a port sends to its sniffer QPs (mlx5 sniffer rules see both ways).
    fn sniff(&mut self, dev: usize, frame: &[u8]) {
        if self.devices[dev].flows.is_empty() {
            return;
        }
        let mut sniffers = std::mem::take(&mut self.sniff_scratch);
        steering::sniffers(&self.flows, &self.devices[dev].flows, &mut sniffers);
        for &q in &sniffers {
            self.raw_deliver(q, frame);
        }
        self.sniff_scratch = sniffers;
    }

    /// A non-RoCE frame at an mlx5 port: to the QPs the flow rules pick.
    fn steer(&mut self, dev: usize, frame: &[u8]) {
        if self.devices[dev].flows.is_empty() {
            self.devices[dev].stats.rx_unclaimed += 1;
            return;
        }
        let mut targets = std::mem::take(&mut self.steer_scratch);
        let mut sniffers = std::mem::take(&mut self.sniff_scratch);
        steering::steer(
            &self.flows,
            &self.devices[dev].flows,
            frame,
            &mut sniffers,
            &mut targets,
        );
        for &q in &sniffers {
            self.raw_deliver(q, frame);
        }
        if targets.is_empty() {
            self.devices[dev].stats.rx_unclaimed += 1;
        }
        for &q in &targets {
            self.raw_deliver(q, frame);
        }
        self.steer_scratch = targets;
        self.sniff_scratch = sniffers;
    }

    fn raw_deliver(&mut self, qpn: u32, frame: &[u8]) {
        let Some(qp) = self.qps.get(&qpn) else { return };
        if !raw::receives(qp.state) {
            return;
        }
        let flags = raw::receive_flags(frame);
        self.deliver(qpn, &[frame], WcOpcode::Recv, 0, None, flags, false);
    }

    // ---- RC and UC ----

    /// Runs `f` on the RC/UC machine of `qpn` with this world as its [`rc::Nic`]. The
    /// machine is taken out of its QP meanwhile, so nothing it calls can reach it again.
    fn run_rc<R>(
        &mut self,
        qpn: u32,
        f: impl FnOnce(&mut RcState, &mut QpNic<'_>) -> R,
    ) -> Option<R> {
        let mut machine = self.qps.get_mut(&qpn)?.rc.take()?;
        let r = f(&mut machine, &mut QpNic { w: self, qpn });
        if let Some(qp) = self.qps.get_mut(&qpn) {
            qp.rc = Some(machine);
        }
        Some(r)
    }

    /// Queues an RC/UC send WR and starts transmitting.
    pub(crate) fn rc_post(&mut self, qpn: u32, wr: WrCopy) -> verbs_api::Result<()> {
        self.run_rc(qpn, |rc, nic| rc.post(nic, wr))
            .unwrap_or_else(|| {
                Err(verbs_api::Error::new(
                    verbs_api::ErrorKind::InvalidArgument,
                    "ibv_post_send",
                    "not a connected QP",
                ))
            })
    }

    /// A timer of an RC/UC machine came due.
    fn on_timer(&mut self, token: u64) {
        let qpn = (token & 0x00ff_ffff) as u32;
        let kind = (token >> 24) & 0xff;
        let gen = (token >> 32) as u32;
        self.run_rc(qpn, |rc, nic| rc.on_timer(nic, kind, gen));
    }

    fn rc_rx(&mut self, dev: usize, pkt: &RocePacket<'_>) {
        let bth = pkt.headers.bth;
        let qpn = bth.dest_qp;
        let want = if bth.opcode & 0xe0 == opcode::UC {
            QpType::Uc
        } else {
            QpType::Rc
        };
        let ok = self.qps.get(&qpn).is_some_and(|qp| {
            qp.dev == dev
                && qp.qp_type == want
                && matches!(qp.state, QpState::Rtr | QpState::Rts | QpState::Sqd)
        });
        if !ok {
            self.devices[dev].stats.rx_unclaimed += 1;
            return;
        }
        self.run_rc(qpn, |rc, nic| rc.on_packet(nic, pkt));
    }

    // ---- multicast and flows ----

    pub fn destroy_qp(&mut self, qpn: u32) {
        let groups = self
            .qps
            .get(&qpn)
            .map(|q| q.groups.clone())
            .unwrap_or_default();
        for g in groups {
            self.detach(qpn, g);
        }
        let flows: Vec<u32> = self
            .flows
            .iter()
            .filter(|(_, r)| r.qpn == qpn)
            .map(|(id, _)| *id)
            .collect();
        let mut flows = flows;
        flows.sort_unstable();
        for f in flows {
            self.remove_flow(f);
        }
        self.qps.remove(&qpn);
    }

    /// Attaches a UD QP to a multicast group (one switch membership per QP).
    pub(crate) fn attach(&mut self, qpn: u32, group: Ipv4Addr) {
        let Some(qp) = self.qps.get_mut(&qpn) else {
            return;
        };
        if qp.groups.contains(&group) {
            return;
        }
        qp.groups.push(group);
        let d = &mut self.devices[qp.dev];
        let v = d.mcast.entry(group).or_default();
        if let Err(i) = v.binary_search(&qpn) {
            v.insert(i, qpn);
        }
        let _ = self.fabric.join_group(d.port, group);
    }

    /// Detaches a QP from a group; false if it was not attached.
    pub(crate) fn detach(&mut self, qpn: u32, group: Ipv4Addr) -> bool {
        let Some(qp) = self.qps.get_mut(&qpn) else {
            return false;
        };
        let Some(i) = qp.groups.iter().position(|g| *g == group) else {
            return false;
        };
        qp.groups.remove(i);
        let d = &mut self.devices[qp.dev];
        if let Some(v) = d.mcast.get_mut(&group) {
            v.retain(|&q| q != qpn);
            if v.is_empty() {
                d.mcast.remove(&group);
            }
        }
        let _ = self.fabric.leave_group(d.port, group);
        true
    }

    /// Installs a flow rule on its device (in priority order) and joins the switch groups
    /// it asks for.
    pub(crate) fn add_flow(&mut self, id: u32, rule: FlowRule) {
        let dev = rule.dev;
        let port = self.devices[dev].port;
        for g in &rule.groups {
            let _ = self.fabric.join_group(port, *g);
        }
        for m in &rule.mac_groups {
            let _ = self.fabric.join_mac_group(port, *m);
        }
        let prio = rule.attr.priority;
        self.flows.insert(id, rule);
        let flows = &self.flows;
        let list = &mut self.devices[dev].flows;
        let pos = list.partition_point(|f| flows.get(f).map_or(0, |r| r.attr.priority) <= prio);
        list.insert(pos, id);
    }

    /// Removes a flow rule and the switch memberships it held.
    pub(crate) fn remove_flow(&mut self, id: u32) {
        let Some(rule) = self.flows.remove(&id) else {
            return;
        };
        let port = self.devices[rule.dev].port;
        for g in &rule.groups {
            let _ = self.fabric.leave_group(port, *g);
        }
        for m in &rule.mac_groups {
            let _ = self.fabric.leave_mac_group(port, *m);
        }
        self.devices[rule.dev].flows.retain(|&f| f != id);
    }
}

/// One QP's view of the world, as its RC/UC machine sees it.
pub(crate) struct QpNic<'a> {
    w: &'a mut World,
    qpn: u32,
}

impl QpNic<'_> {
    fn qp(&self) -> &Qp {
        &self.w.qps[&self.qpn]
    }

    /// The route to the connected peer.
    fn peer_route(&self, psn: u32) -> RoceRoute {
        let qp = self.qp();
        let d = &self.w.devices[qp.dev];
        let grh = &qp.attr.ah_attr.grh;
        let dst_ip = grh.dgid.to_ipv4().unwrap_or(Ipv4Addr::UNSPECIFIED);
        RoceRoute {
            src_mac: d.mac,
            dst_mac: self.w.fabric.mac_of_ip(dst_ip).unwrap_or_default(),
            src_ip: d.ip,
            dst_ip,
            src_port: 0xc000 | (self.qpn as u16 & 0x3fff),
            tos: grh.traffic_class,
            ttl: if grh.hop_limit == 0 {
                64
            } else {
                grh.hop_limit
            },
            ip_id: psn as u16,
        }
    }
}

impl rc::Nic for QpNic<'_> {
    fn now(&self) -> Nanos {
        self.w.fabric.now()
    }

    fn qp(&self) -> QpView {
        let qp = self.qp();
        QpView {
            qpn: self.qpn,
            state: qp.state,
            uc: qp.qp_type == QpType::Uc,
            pd: qp.pd,
            sig_all: qp.sq_sig_all,
            max_send_wr: qp.cap.max_send_wr,
            attr: qp.attr,
            personality: self.w.devices[qp.dev].personality,
        }
    }

    fn path_mtu(&self) -> usize {
        let qp = self.qp();
        let active = self.w.devices[qp.dev].personality.active_mtu().bytes();
        qp.attr.path_mtu.bytes().min(active) as usize
    }

    fn mrs(&self) -> &MrTable {
        &self.w.mrs
    }

    fn mrs_mut(&mut self) -> &mut MrTable {
        &mut self.w.mrs
    }

    fn local_status(&self, s: WcStatus) -> WcStatus {
        let p = self.w.devices[self.qp().dev].personality;
        self.w.local_status(p, s)
    }

    fn take_recv(&mut self) -> Option<(RecvWqe, u32)> {
        self.w.take_recv(self.qpn)
    }

    fn untake_recv(&mut self, w: RecvWqe) {
        self.w.untake_recv(self.qpn, w);
    }

    fn transmit(&mut self, mut h: RoceHeaders, payload: &[u8]) {
        let route = self.peer_route(h.bth.psn);
        let qp = self.qp();
        let (dev, dest) = (qp.dev, qp.attr.dest_qp_num);
        h.bth.dest_qp = dest;
        h.bth.pkey = roce::DEFAULT_PKEY;
        let frame = build_roce_frame(&route, &h, payload);
        self.w.sniff(dev, &frame);
        let port = self.w.devices[dev].port;
        let _ = self.w.fabric.transmit(port, frame);
    }

    fn complete_send(&mut self, wc: Completion) {
        self.w.retire_send(self.qpn, wc, true);
    }

    fn retire_unsignaled(&mut self) {
        let wc = completion(0, WcStatus::Success, WcOpcode::Send, self.qpn);
        self.w.retire_send(self.qpn, wc, false);
    }

    fn complete_recv(&mut self, wc: Completion, solicited: bool) {
        let cq = self.qp().recv_cq;
        self.w.complete(cq, wc, solicited);
    }

    fn completer_due(&mut self) {
        self.w.due.push(self.qpn);
    }

    fn set_timer(&mut self, at: Nanos, kind: rc::Timer, gen: u32) {
        let token = u64::from(self.qpn) | ((kind as u64) << 24) | (u64::from(gen) << 32);
        self.w.fabric.schedule_timer(at, token);
    }

    fn event(&mut self, e: EventType) {
        let p = self.w.devices[self.qp().dev].personality;
        if !p.raises_qp_error_events()
            && matches!(
                e,
                EventType::CommEst
                    | EventType::QpReqErr
                    | EventType::QpAccessErr
                    | EventType::QpFatal
            )
        {
            return;
        }
        let ctx = self.qp().ctx;
        self.w.async_event(ctx, e, EventElement::Qp(self.qpn));
    }

    fn enter_error(&mut self) -> bool {
        self.w.enter_error(self.qpn)
    }

    fn count(&mut self, c: Count) {
        let dev = self.qp().dev;
        let s = &mut self.w.devices[dev].stats;
        match c {
            Count::NoWqe => s.rx_no_wqe += 1,
            Count::OutOfSequence => s.rx_out_of_sequence += 1,
        }
    }
}
