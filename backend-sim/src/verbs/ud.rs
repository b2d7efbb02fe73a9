//! UD datagrams over RoCEv2: sends (one packet, the path MTU, the Q_Key rule), receives
//! (the 40-byte GRH area first, the Q_Key check), and multicast attach/detach with one
//! copy per attached QP.

use super::personality::Personality;
use super::world::{vtag, World, WrCopy};
use crate::frame::eth::Mac;
use crate::frame::roce::{self, build_roce_frame, opcode, Bth, Deth, RoceHeaders, RoceRoute};
use std::net::Ipv4Addr;
use verbs_api::{QpState, QpType, SendFlags, SendOpcode, WcFlags, WcOpcode, WcStatus};

impl World {
    pub(crate) fn ud_send(&mut self, qpn: u32, wr: &WrCopy, payload: &[u8]) -> WcStatus {
        let Some(ud) = wr.ud else {
            return WcStatus::LocQpOpErr;
        };
        let qp = self.qps.get_mut(&qpn).expect("caller checked");
        let d = &self.devices[qp.dev];
        // A UD message is one packet: it must fit the port's active MTU.
        let mtu = d.personality.active_mtu().bytes() as usize;
        if payload.len() > mtu {
            return match d.personality {
                // rxe completes it and sends nothing.
                Personality::Rxe => WcStatus::Success,
                Personality::Mlx5 => WcStatus::LocLenErr,
            };
        }
        let Some(dst_ip) = ud.ah.grh.dgid.to_ipv4() else {
            return WcStatus::LocQpOpErr;
        };
        let qkey = if ud.remote_qkey & 0x8000_0000 != 0 {
            qp.attr.qkey
        } else {
            ud.remote_qkey
        };
        let psn = qp.ud_psn;
        qp.ud_psn = (psn + 1) & 0x00ff_ffff;
        let (src_mac, src_ip, port) = (d.mac, d.ip, d.port);
        let dst_mac = if dst_ip.is_multicast() {
            Mac::for_ipv4_multicast(dst_ip)
        } else {
            self.fabric.mac_of_ip(dst_ip).unwrap_or_default()
        };
        let opc = if wr.opcode == SendOpcode::SendWithImm {
            opcode::SEND_ONLY_IMM
        } else {
            opcode::SEND_ONLY
        };
        let h = RoceHeaders {
            bth: Bth {
                opcode: opcode::UD | opc,
                solicited: wr.flags.contains(SendFlags::SOLICITED),
                pkey: roce::DEFAULT_PKEY,
                dest_qp: if dst_ip.is_multicast() {
                    roce::MULTICAST_QPN
                } else {
                    ud.remote_qpn
                },
                psn,
                ..Bth::default()
            },
            deth: Some(Deth { qkey, src_qp: qpn }),
            imm: (wr.opcode == SendOpcode::SendWithImm).then_some(wr.imm),
            ..RoceHeaders::default()
        };
        let route = RoceRoute {
            src_mac,
            dst_mac,
            src_ip,
            dst_ip,
            src_port: 0xc000 | (qpn as u16 & 0x3fff),
            tos: ud.ah.grh.traffic_class,
            ttl: if ud.ah.grh.hop_limit == 0 {
                64
            } else {
                ud.ah.grh.hop_limit
            },
            ip_id: psn as u16,
        };
        let frame = build_roce_frame(&route, &h, payload);
        let dev = self.qps[&qpn].dev;
        self.sniff(dev, &frame);
        match self.fabric.transmit(port, frame) {
            Ok(_) => WcStatus::Success,
            Err(_) => WcStatus::LocLenErr,
        }
    }

    pub(crate) fn ud_deliver(
        &mut self,
        dev: usize,
        qpn: u32,
        pkt: &roce::RocePacket<'_>,
        ip_hdr: &[u8],
    ) {
        let Some(qp) = self.qps.get(&qpn) else {
            self.devices[dev].stats.rx_unclaimed += 1;
            return;
        };
        if qp.dev != dev
            || qp.qp_type != QpType::Ud
            || !matches!(
                qp.state,
                QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe
            )
        {
            self.devices[dev].stats.rx_unclaimed += 1;
            return;
        }
        let deth = pkt.headers.deth.unwrap_or_default();
        if deth.qkey != qp.attr.qkey {
            self.devices[dev].stats.rx_qkey_violation += 1;
            self.fabric
                .trace_event(vtag::RX_DROP, &[self.fabric.now(), u64::from(qpn), 2]);
            return;
        }
        // The 40-byte GRH area: for RoCEv2 over IPv4, 20 zero bytes then the IPv4 header.
        let mut grh = [0u8; 40];
        grh[20..40].copy_from_slice(&ip_hdr[..20]);
        self.deliver(
            qpn,
            &[&grh, pkt.payload],
            WcOpcode::Recv,
            deth.src_qp,
            pkt.headers.imm,
            WcFlags::GRH,
            pkt.headers.bth.solicited,
        );
    }

    pub(crate) fn attach(&mut self, qpn: u32, group: Ipv4Addr) {
        let Some(qp) = self.qps.get_mut(&qpn) else {
            return;
        };
        if qp.groups.contains(&group) {
            return;
        }
        qp.groups.push(group);
        let dev = qp.dev;
        let d = &mut self.devices[dev];
        let v = d.mcast.entry(group).or_default();
        if let Err(i) = v.binary_search(&qpn) {
            v.insert(i, qpn);
        }
        let _ = self.fabric.join_group(d.port, group);
    }

    pub(crate) fn detach(&mut self, qpn: u32, group: Ipv4Addr) -> bool {
        let Some(qp) = self.qps.get_mut(&qpn) else {
            return false;
        };
        let Some(i) = qp.groups.iter().position(|g| *g == group) else {
            return false;
        };
        qp.groups.remove(i);
        let dev = qp.dev;
        let d = &mut self.devices[dev];
        if let Some(v) = d.mcast.get_mut(&group) {
            v.retain(|&q| q != qpn);
            if v.is_empty() {
                d.mcast.remove(&group);
            }
        }
        let _ = self.fabric.leave_group(d.port, group);
        true
    }
}
