//! UD datagrams over RoCEv2, sans-IO: what a send puts on the wire (one packet within the
//! path MTU, the Q_Key rule, the next PSN) and what a receive accepts (the QP's state, the
//! Q_Key check) and writes first (the 40-byte GRH area). The verbs layer frames the
//! packet, moves the bytes and completes the work.

use super::personality::Personality;
use super::wqe::WrCopy;
use crate::frame::eth::Mac;
use crate::frame::roce::{self, opcode, Bth, Deth, RoceHeaders, RoceIps, RoceRoute};
use crate::verbs::roce_addr;
use std::net::Ipv4Addr;
use verbs_api::{QpState, QpType, SendFlags, SendOpcode, WcStatus};

/// The sending QP as a UD send needs it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct UdSource {
    pub qpn: u32,
    /// The QP's own Q_Key (used when the WR's has the high bit set).
    pub qkey: u32,
    pub mac: Mac,
    pub ip: Ipv4Addr,
    pub personality: Personality,
}

/// The packet a UD send of `len` payload bytes puts on the wire, taking the next PSN from
/// `psn`; or, when nothing is sent, the status the WR completes with (rxe completes an
/// oversized send successfully and drops it).
pub(crate) fn send(
    src: &UdSource,
    psn: &mut u32,
    wr: &WrCopy,
    len: usize,
    mac_of: &dyn Fn(Ipv4Addr) -> Option<Mac>,
) -> Result<(RoceRoute, RoceHeaders), WcStatus> {
    let Some(ud) = wr.ud else {
        return Err(WcStatus::LocQpOpErr);
    };
    // A UD message is one packet: it must fit the port's active MTU.
    if len > src.personality.active_mtu().bytes() as usize {
        return Err(match src.personality {
            Personality::Rxe => WcStatus::Success,
            Personality::Mlx5 => WcStatus::LocLenErr,
        });
    }
    let Some(ips) = roce_addr::roce_ips(src.mac, src.ip, src.personality, &ud.ah.grh) else {
        return Err(WcStatus::LocQpOpErr);
    };
    // A controlled Q_Key (high bit set) means the QP's own (IBA); rxe (Linux 6.1,
    // `init_req_packet`) sends the WR's key as given, which the receiver then drops.
    let qkey = if ud.remote_qkey & 0x8000_0000 != 0 && src.personality == Personality::Mlx5 {
        src.qkey
    } else {
        ud.remote_qkey
    };
    let this_psn = *psn;
    *psn = (this_psn + 1) & 0x00ff_ffff;
    let multicast = matches!(ips, RoceIps::V4(_, dst) if dst.is_multicast());
    let dst_mac = roce_addr::dst_mac(&ips, mac_of).unwrap_or_default();
    let imm = wr.opcode == SendOpcode::SendWithImm;
    let h = RoceHeaders {
        bth: Bth {
            opcode: opcode::UD
                | if imm {
                    opcode::SEND_ONLY_IMM
                } else {
                    opcode::SEND_ONLY
                },
            solicited: wr.flags.contains(SendFlags::SOLICITED),
            pkey: roce::DEFAULT_PKEY,
            dest_qp: if multicast {
                roce::MULTICAST_QPN
            } else {
                ud.remote_qpn
            },
            psn: this_psn,
            ..Bth::default()
        },
        deth: Some(Deth {
            qkey,
            src_qp: src.qpn,
        }),
        imm: imm.then_some(wr.imm),
        ..RoceHeaders::default()
    };
    let hop = ud.ah.grh.hop_limit;
    let route = RoceRoute {
        src_mac: src.mac,
        dst_mac,
        ips,
        src_port: 0xc000 | (src.qpn as u16 & 0x3fff),
        tos: ud.ah.grh.traffic_class,
        ttl: roce_addr::hop_limit(&ips, hop),
        ip_id: this_psn as u16,
    };
    Ok((route, h))
}

/// Why a UD receive was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Not a UD QP, or not in a state that receives.
    NotReceiving,
    /// The DETH's Q_Key is not the QP's.
    QkeyViolation,
}

/// Whether a QP of `qp_type` in `state` with Q_Key `qkey` takes a datagram whose DETH
/// carries `deth_qkey`.
pub(crate) fn accept(
    qp_type: QpType,
    state: QpState,
    qkey: u32,
    deth_qkey: u32,
) -> Result<(), Refused> {
    if qp_type != QpType::Ud
        || !matches!(
            state,
            QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe
        )
    {
        return Err(Refused::NotReceiving);
    }
    if deth_qkey != qkey {
        return Err(Refused::QkeyViolation);
    }
    Ok(())
}

/// The 40-byte GRH area of a receive: for RoCEv2 over IPv4, 20 zero bytes then the
/// IPv4 header; over IPv6, the IPv6 header itself (rxe_resp.c, `send_data_in`'s caller
/// copies `ipv6_hdr(skb)` whole, or the IPv4 header at offset 20). With
/// `loopback_unset` (rxe), an IPv4 header whose source is its destination carries the
/// checksum 0 (see [`Personality::loopback_ipv4_checksum_unset`]).
pub(crate) fn grh(ip_hdr: &[u8], loopback_unset: bool) -> [u8; 40] {
    let mut g = [0u8; 40];
    if ip_hdr.len() >= 40 && ip_hdr[0] >> 4 == 6 {
        g.copy_from_slice(&ip_hdr[..40]);
    } else {
        g[20..40].copy_from_slice(&ip_hdr[..20]);
        if loopback_unset && ip_hdr[12..16] == ip_hdr[16..20] {
            g[30..32].fill(0);
        }
    }
    g
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::roce::{build_roce_frame, parse_roce};
    use crate::frame::FrameView;
    use crate::verbs::wqe::{SgeList, UdDest};
    use verbs_api::{AhAttr, Gid};

    const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

    fn source(personality: Personality) -> UdSource {
        UdSource {
            qpn: 0x10,
            qkey: 0x1111,
            mac: Mac([2, 0, 10, 0, 0, 1]),
            ip: A,
            personality,
        }
    }

    fn wr(to: Ipv4Addr, remote_qkey: u32) -> WrCopy {
        WrCopy {
            wr_id: 1,
            opcode: SendOpcode::SendWithImm,
            flags: SendFlags::SOLICITED,
            imm: 0xfeed,
            sges: SgeList::new(&[]),
            rdma: None,
            atomic: None,
            ud: Some(UdDest {
                ah: AhAttr::roce(Gid::from_ipv4(to), 1, 1),
                remote_qpn: 0x20,
                remote_qkey,
            }),
            inline: None,
            inv: None,
            bind: None,
        }
    }

    fn mac_of(ip: Ipv4Addr) -> Option<Mac> {
        let o = ip.octets();
        Some(Mac([2, 0, o[0], o[1], o[2], o[3]]))
    }

    /// Sends from A and receives at B (Q_Key `b_qkey`): the frame on the wire, parsed as
    /// B's NIC parses it, and B's verdict.
    fn cross(
        wr: &WrCopy,
        psn: &mut u32,
        payload: &[u8],
        b_qkey: u32,
    ) -> (Vec<u8>, Result<(), Refused>) {
        let (route, h) = send(&source(Personality::Rxe), psn, wr, payload.len(), &mac_of).unwrap();
        let frame = build_roce_frame(&route, &h, payload);
        let view = FrameView::parse(&frame).unwrap();
        let pkt = parse_roce(&frame[view.udp_payload().unwrap()]).unwrap();
        let deth = pkt.headers.deth.unwrap();
        let verdict = accept(QpType::Ud, QpState::Rts, b_qkey, deth.qkey);
        assert_eq!(pkt.payload, payload);
        (frame, verdict)
    }

    #[test]
    fn a_datagram_crosses_with_its_headers_and_the_grh_holds_the_ip_header() {
        let mut psn = 5;
        let (route, h) = send(
            &source(Personality::Rxe),
            &mut psn,
            &wr(B, 0x1111),
            3,
            &mac_of,
        )
        .unwrap();
        assert_eq!(psn, 6);
        assert_eq!(h.bth.psn, 5);
        assert_eq!(h.bth.dest_qp, 0x20);
        assert_eq!(h.bth.opcode, opcode::UD | opcode::SEND_ONLY_IMM);
        assert!(h.bth.solicited);
        assert_eq!(
            h.deth,
            Some(Deth {
                qkey: 0x1111,
                src_qp: 0x10
            })
        );
        assert_eq!(h.imm, Some(0xfeed));
        assert_eq!(
            (route.ips, route.dst_mac),
            (RoceIps::V4(A, B), mac_of(B).unwrap())
        );
        assert_eq!(route.src_port, 0xc010);
        let (frame, verdict) = cross(&wr(B, 0x1111), &mut psn, b"abc", 0x1111);
        assert_eq!(verdict, Ok(()));
        let g = grh(&frame[14..34], false);
        assert_eq!(&g[..20], &[0u8; 20]);
        assert_eq!(&g[20..], &frame[14..34]);
        // rxe's loopback (source address = destination) leaves the checksum 0; a header
        // between two addresses keeps it.
        assert_ne!(&g[30..32], &[0, 0]);
        assert_eq!(grh(&frame[14..34], true), g);
        let mut own = frame[14..34].to_vec();
        own.copy_within(12..16, 16);
        let g = grh(&own, true);
        assert_eq!(&g[30..32], &[0, 0]);
        assert_eq!(&g[20..30], &own[..10]);
        assert_eq!(&g[32..], &own[12..]);
        assert_eq!(grh(&own, false)[30..32], own[10..12]);
    }

    #[test]
    fn the_q_key_rule_and_the_receive_states() {
        let mut psn = 0;
        // The high bit: on mlx5 the sender's own Q_Key goes out instead of the WR's; rxe
        // sends the WR's.
        let (_, h) = send(
            &source(Personality::Mlx5),
            &mut psn,
            &wr(B, 0x8000_0000),
            0,
            &mac_of,
        )
        .unwrap();
        assert_eq!(h.deth.unwrap().qkey, 0x1111);
        let (_, h) = send(
            &source(Personality::Rxe),
            &mut psn,
            &wr(B, 0x8000_0000),
            0,
            &mac_of,
        )
        .unwrap();
        assert_eq!(h.deth.unwrap().qkey, 0x8000_0000);
        let (_, verdict) = cross(&wr(B, 0x2222), &mut psn, b"x", 0x1111);
        assert_eq!(verdict, Err(Refused::QkeyViolation));
        assert_eq!(
            accept(QpType::Ud, QpState::Init, 1, 1),
            Err(Refused::NotReceiving)
        );
        assert_eq!(
            accept(QpType::Rc, QpState::Rts, 1, 1),
            Err(Refused::NotReceiving)
        );
        assert_eq!(accept(QpType::Ud, QpState::Sqe, 1, 1), Ok(()));
    }

    #[test]
    fn multicast_goes_to_the_group_mac_and_qpn() {
        let g = Ipv4Addr::new(239, 1, 2, 3);
        let mut psn = 0;
        let (route, h) =
            send(&source(Personality::Mlx5), &mut psn, &wr(g, 7), 10, &mac_of).unwrap();
        assert_eq!(h.bth.dest_qp, roce::MULTICAST_QPN);
        assert_eq!(route.dst_mac, Mac::for_ipv4_multicast(g));
    }

    #[test]
    fn a_message_above_the_mtu_is_not_sent_and_uses_no_psn() {
        let mut psn = 9;
        // rxe completes it successfully and sends nothing; mlx5 reports LOC_LEN_ERR.
        let rxe = send(
            &source(Personality::Rxe),
            &mut psn,
            &wr(B, 7),
            1025,
            &mac_of,
        );
        assert_eq!(rxe.unwrap_err(), WcStatus::Success);
        let mlx5 = send(
            &source(Personality::Mlx5),
            &mut psn,
            &wr(B, 7),
            4097,
            &mac_of,
        );
        assert_eq!(mlx5.unwrap_err(), WcStatus::LocLenErr);
        assert_eq!(psn, 9);
        let mut no_ah = wr(B, 7);
        no_ah.ud = None;
        let r = send(&source(Personality::Rxe), &mut psn, &no_ah, 1, &mac_of);
        assert_eq!(r.unwrap_err(), WcStatus::LocQpOpErr);
    }
}
