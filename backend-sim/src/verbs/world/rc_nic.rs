//! The bridge to the RC/UC machines ([`crate::verbs::rc`]): posts, timers and packets
//! handed to a QP's machine, and [`QpNic`], the world as one QP's machine sees it.

use super::World;
use super::{completion, Qp, RecvWqe, WrCopy};
use crate::clock::Nanos;
use crate::frame::roce;
use crate::frame::roce::{opcode, RoceHeaders, RoceIps, RocePacket, RoceRoute};
use crate::verbs::memory::MrTable;
use crate::verbs::rc;
use crate::verbs::rc::{Count, QpView, RcState};
use crate::verbs::roce_addr;
use std::net::Ipv4Addr;
use verbs_api::{Completion, EventElement, EventType, QpState, QpType, WcOpcode, WcStatus};

impl World {
    /// Runs `f` on the RC/UC machine of `qpn` with this world as its [`rc::Nic`]. The
    /// machine is taken out of its QP meanwhile, so nothing it calls can reach it again.
    pub(super) fn run_rc<R>(
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
    pub(super) fn on_timer(&mut self, token: u64) {
        let qpn = (token & 0x00ff_ffff) as u32;
        let kind = (token >> 24) & 0xff;
        let gen = (token >> 32) as u32;
        self.run_rc(qpn, |rc, nic| rc.on_timer(nic, kind, gen));
    }

    pub(super) fn rc_rx(&mut self, dev: usize, pkt: &RocePacket<'_>) {
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
        // The AV was checked when it was set (modify to RTR).
        let ips = roce_addr::roce_ips(d.mac, d.ip, d.personality, grh)
            .unwrap_or(RoceIps::V4(d.ip, Ipv4Addr::UNSPECIFIED));
        let fabric = &self.w.fabric;
        RoceRoute {
            src_mac: d.mac,
            dst_mac: roce_addr::dst_mac(&ips, |ip| fabric.mac_of_ip(ip)).unwrap_or_default(),
            ips,
            src_port: 0xc000 | (self.qpn as u16 & 0x3fff),
            tos: grh.traffic_class,
            ttl: roce_addr::hop_limit(&ips, grh.hop_limit),
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

    fn transmit(&mut self, mut h: RoceHeaders, payload: &[u8]) -> usize {
        let route = self.peer_route(h.bth.psn);
        let qp = self.qp();
        let (dev, dest) = (qp.dev, qp.attr.dest_qp_num);
        h.bth.dest_qp = dest;
        h.bth.pkey = roce::DEFAULT_PKEY;
        let port = self.w.devices[dev].port;
        self.w.send_roce(dev, port, &route, &h, payload).0
    }

    fn wire_ns(&self, bytes: usize) -> Nanos {
        let port = self.w.devices[self.qp().dev].port;
        self.w
            .fabric
            .port_config(port)
            .map_or(0, |c| c.link.serialization_ns(bytes))
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
