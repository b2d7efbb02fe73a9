//! UD datagrams over RoCEv2, sans-IO: what a send puts on the wire (one packet within the
//! path MTU, the Q_Key rule, the next PSN) and what a receive accepts (the QP's state, the
//! Q_Key check) and writes first (the 40-byte GRH area). The verbs layer frames the
//! packet, moves the bytes and completes the work.

use super::personality::Personality;
use super::wqe::WrCopy;
use crate::frame::eth::Mac;
use crate::frame::roce::{self, opcode, Bth, Deth, RoceHeaders, RoceRoute};
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
    let Some(dst_ip) = ud.ah.grh.dgid.to_ipv4() else {
        return Err(WcStatus::LocQpOpErr);
    };
    let qkey = if ud.remote_qkey & 0x8000_0000 != 0 {
        src.qkey
    } else {
        ud.remote_qkey
    };
    let this_psn = *psn;
    *psn = (this_psn + 1) & 0x00ff_ffff;
    let multicast = dst_ip.is_multicast();
    let dst_mac = if multicast {
        Mac::for_ipv4_multicast(dst_ip)
    } else {
        mac_of(dst_ip).unwrap_or_default()
    };
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
        src_ip: src.ip,
        dst_ip,
        src_port: 0xc000 | (src.qpn as u16 & 0x3fff),
        tos: ud.ah.grh.traffic_class,
        ttl: if hop == 0 { 64 } else { hop },
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
/// IPv4 header.
pub(crate) fn grh(ip_hdr: &[u8]) -> [u8; 40] {
    let mut g = [0u8; 40];
    g[20..40].copy_from_slice(&ip_hdr[..20]);
    g
}
