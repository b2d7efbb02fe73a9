//! Frames in and out of the NICs: RAW and UD sends at post time, a port's received frames
//! dispatched to RoCE (UD, RC/UC) or to flow steering (RAW), and sniffers.

use super::World;
use super::{vtag, Posted, WrCopy};
use crate::fabric::is_roce;
use crate::fabric::unsummed::icrc_maybe_unwritten;
use crate::frame::ipv6::link_local_of_mac;
use crate::frame::roce::{
    build_roce_frame_into, build_roce_frame_unsummed_into, fill_icrc, opcode, RoceHeaders, RoceIps,
    RocePacket, RoceRoute,
};
use crate::frame::{roce, FrameView};
use crate::ids::PortId;
use crate::verbs::personality::RoceL3;
use crate::verbs::{memory, raw, steering, ud};
use verbs_api::{QpType, SendFlags, WcFlags, WcOpcode, WcStatus};

impl World {
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
                let sealed = raw::prepare_send(&mut frame, wr.flags);
                match self.send_out(dev, port, frame, sealed) {
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

    /// A frame at `port` (`sealed`: see [`crate::fabric::Output::Frame`]).
    pub(super) fn on_frame(&mut self, port: PortId, frame: Vec<u8>, sealed: bool) {
        self.on_frame_at(port, &frame, sealed);
        self.recycle(frame);
    }

    /// A frame from outside at `port` now, handled at once where it lies (see
    /// [`crate::fabric::Fabric::arrive_now`]); the completers' work left before it runs
    /// first, as [`World::advance`] runs it before the next event.
    ///
    /// # Errors
    /// As [`crate::fabric::Fabric::inject`].
    pub fn receive_now(
        &mut self,
        port: PortId,
        frame: &[u8],
        index: u64,
        sealed: bool,
    ) -> Result<(), crate::fabric::FabricError> {
        while !self.due.is_empty() {
            self.run_completers();
        }
        // A sender may have left a sealed frame's ICRC unwritten; a capture here or a
        // sniffer on the device would read the frame whole, so it gets it written.
        if icrc_maybe_unwritten(frame, sealed)
            && (self.fabric.reads_sealed_icrc() || self.sniffs(port))
        {
            let mut whole = self.frame_buffer();
            whole.extend_from_slice(frame);
            fill_icrc(&mut whole);
            let r = self.arrive_at(port, &whole, index, sealed);
            self.recycle(whole);
            return r;
        }
        self.arrive_at(port, frame, index, sealed)
    }

    fn arrive_at(
        &mut self,
        port: PortId,
        frame: &[u8],
        index: u64,
        sealed: bool,
    ) -> Result<(), crate::fabric::FabricError> {
        if self.fabric.arrive_now(port, frame, index, sealed)? {
            self.on_frame_at(port, frame, sealed);
        }
        Ok(())
    }

    /// True if the device of `port` has flow rules (sniffers among them may see a frame).
    fn sniffs(&self, port: PortId) -> bool {
        self.port_owner
            .get(port.0 as usize)
            .copied()
            .flatten()
            .is_some_and(|dev| !self.devices[dev].flows.is_empty())
    }

    fn on_frame_at(&mut self, port: PortId, frame: &[u8], sealed: bool) {
        let Some(dev) = self.port_owner.get(port.0 as usize).copied().flatten() else {
            return;
        };
        if is_roce(frame) {
            let Ok(view) = FrameView::parse(frame) else {
                self.devices[dev].stats.rx_malformed += 1;
                return;
            };
            self.sniff(dev, frame, sealed);
            self.roce_rx(dev, frame, &view);
        } else if self.devices[dev].personality.raw_packet() {
            self.steer(dev, frame, sealed);
        } else {
            // rxe: the kernel's network stack takes it; no verbs consumer sees it.
            self.devices[dev].stats.rx_unclaimed += 1;
        }
    }

    pub(super) fn roce_rx(&mut self, dev: usize, frame: &[u8], view: &FrameView) {
        let Some(range) = view.roce_packet() else {
            return;
        };
        let Ok(pkt) = roce::parse_roce(&frame[range]) else {
            self.devices[dev].stats.rx_malformed += 1;
            return;
        };
        // The destination: the port's IPv4 address or a group, or its link-local GID 0
        // (RoCEv2 over IPv6; IPv6 groups are not modelled).
        let d = &self.devices[dev];
        let (group, ip_hdr, l3) = match (view.ipv4, view.ipv6) {
            (Some((ip, off)), _) if ip.dst == d.ip || ip.dst.is_multicast() => (
                ip.dst.is_multicast().then_some(ip.dst),
                &frame[off..off + 20],
                RoceL3::Ipv4,
            ),
            // RoCE v1 only where the device speaks it (mlx5; rxe's netdev hands EtherType
            // 0x8915 to no one).
            (None, Some((ip, off)))
                if ip.dst == link_local_of_mac(d.mac.0)
                    && (view.is_roce_v2() || d.personality.roce_v1_gid(0)) =>
            {
                let l3 = if view.is_roce_v2() {
                    RoceL3::Ipv6
                } else {
                    RoceL3::Grh
                };
                (None, &frame[off..off + 40], l3)
            }
            _ => {
                self.devices[dev].stats.rx_unclaimed += 1;
                return;
            }
        };
        let bth = pkt.headers.bth;
        if bth.opcode & 0xe0 == opcode::UD {
            let targets: Vec<u32> = if bth.dest_qp == roce::MULTICAST_QPN {
                group
                    .and_then(|g| self.devices[dev].mcast.get(&g).cloned())
                    .unwrap_or_default()
            } else {
                vec![bth.dest_qp]
            };
            if targets.is_empty() {
                self.devices[dev].stats.rx_unclaimed += 1;
            }
            for q in targets {
                self.ud_deliver(dev, q, &pkt, ip_hdr, l3);
            }
        } else {
            self.rc_rx(dev, &pkt);
        }
    }

    pub(super) fn ud_send(&mut self, qpn: u32, wr: &WrCopy, payload: &[u8]) -> WcStatus {
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
        match self.send_roce(dev, port, &route, &h, payload).1 {
            Ok(_) => WcStatus::Success,
            Err(_) => WcStatus::LocLenErr,
        }
    }

    /// Builds the RoCE frame of `h` and `payload` on `route` and sends it out of device
    /// `dev`'s port `port` ([`World::send_out`]); its length, and what the port did. A
    /// sealed frame ([`sealed_by_nic`]) leaves with its ICRC unwritten when nothing in
    /// this simulation can read it ([`crate::fabric::Fabric::may_leave_icrc`] and no
    /// sniffer on the device): whoever reads it later writes it first (see
    /// [`crate::fabric::unsummed::icrc_maybe_unwritten`]).
    pub(super) fn send_roce(
        &mut self,
        dev: usize,
        port: PortId,
        route: &RoceRoute,
        h: &RoceHeaders,
        payload: &[u8],
    ) -> (usize, Result<u64, crate::fabric::FabricError>) {
        let sealed = sealed_by_nic(route);
        let mut frame = self.frame_buffer();
        if sealed {
            build_roce_frame_unsummed_into(&mut frame, route, h, payload);
            if !self.devices[dev].flows.is_empty() || !self.fabric.may_leave_icrc(port, &frame) {
                fill_icrc(&mut frame);
            }
        } else {
            build_roce_frame_into(&mut frame, route, h, payload);
        }
        let len = frame.len();
        (len, self.send_out(dev, port, frame, sealed))
    }

    pub(super) fn ud_deliver(
        &mut self,
        dev: usize,
        qpn: u32,
        pkt: &RocePacket<'_>,
        ip_hdr: &[u8],
        l3: RoceL3,
    ) {
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
        let personality = self.devices[dev].personality;
        let sl = personality.ud_recv_sl(l3);
        let grh = ud::grh(ip_hdr, personality.loopback_ipv4_checksum_unset());
        self.deliver(
            qpn,
            &[&grh, pkt.payload],
            WcOpcode::Recv,
            (deth.src_qp, sl),
            pkt.headers.imm,
            WcFlags::GRH,
            pkt.headers.bth.solicited,
        );
    }

    /// Sends `frame` out of device `dev`'s port `port`, its sniffer QPs seeing it first;
    /// `sealed`: its checksums and ICRC right by construction ([`Fabric::transmit_sealed`]).
    ///
    /// # Errors
    /// As [`Fabric::transmit`].
    ///
    /// [`Fabric::transmit_sealed`]: crate::fabric::Fabric::transmit_sealed
    /// [`Fabric::transmit`]: crate::fabric::Fabric::transmit
    pub(super) fn send_out(
        &mut self,
        dev: usize,
        port: PortId,
        frame: Vec<u8>,
        sealed: bool,
    ) -> Result<u64, crate::fabric::FabricError> {
        self.sniff(dev, &frame, sealed);
        if sealed {
            self.fabric.transmit_sealed(port, frame)
        } else {
            self.fabric.transmit(port, frame)
        }
    }

    /// Copies a frame a port sends to its sniffer QPs (mlx5 sniffer rules see both ways).
    pub(super) fn sniff(&mut self, dev: usize, frame: &[u8], sealed: bool) {
        if self.devices[dev].flows.is_empty() {
            return;
        }
        let mut sniffers = std::mem::take(&mut self.sniff_scratch);
        steering::sniffers(&self.flows, &self.devices[dev].flows, &mut sniffers);
        for &q in &sniffers {
            self.raw_deliver(q, frame, sealed);
        }
        self.sniff_scratch = sniffers;
    }

    /// A non-RoCE frame at an mlx5 port: to the QPs the flow rules pick.
    pub(super) fn steer(&mut self, dev: usize, frame: &[u8], sealed: bool) {
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
            self.raw_deliver(q, frame, sealed);
        }
        if targets.is_empty() {
            self.devices[dev].stats.rx_unclaimed += 1;
        }
        for &q in &targets {
            self.raw_deliver(q, frame, sealed);
        }
        self.steer_scratch = targets;
        self.sniff_scratch = sniffers;
    }

    pub(super) fn raw_deliver(&mut self, qpn: u32, frame: &[u8], sealed: bool) {
        if self.rss_deliver(qpn, frame, sealed) {
            return;
        }
        let Some(qp) = self.qps.get(&qpn) else { return };
        if !raw::receives(qp.state) {
            return;
        }
        let flags = raw::receive_flags(frame, sealed);
        self.deliver(qpn, &[frame], WcOpcode::Recv, (0, 0), None, flags, false);
    }
}

/// True if a RoCE frame the NIC builds on `route` is sealed
/// ([`crate::fabric::Output::Frame`]`::sealed`): RoCEv2 over IPv4, whose header checksum
/// `build_roce_frame` fills, whose UDP checksum is 0 (none, RoCEv2 senders leave it so)
/// and whose ICRC it computes. The IPv6 ones are not: a RAW_PACKET receive reports no
/// IP_CSUM_OK for them, which a sealed frame would get.
pub(super) fn sealed_by_nic(route: &RoceRoute) -> bool {
    matches!(route.ips, RoceIps::V4(..))
}
