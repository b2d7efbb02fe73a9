//! The fabric's translation between the emulated connection manager's messages
//! ([`crate::rdmacm::core::messages`], which travel over the fabric's socket to the
//! process of their destination host) and the CM MADs a real stack sends to QP1
//! ([`super::cm_mad`], [`super::cm_frame`]), for hosts beyond a port (the Soft-RoCE VM, a VXLAN peer's
//! hosts): an emulated host's message to a remote host leaves its port as a MAD, and a
//! MAD that reaches an emulated host's port goes to its process as a message from the
//! remote host (an emulated NIC has no QP1).
//!
//! The emulated ids are the communication ids on the wire, and the remote side's
//! communication id is its id as the emulated CM sees it. The bridge remembers, per
//! remote communication id, the remote QP number (a DREQ names it: the kernel's
//! `cm_dreq_handler` drops a DREQ whose QPN is not its QP's) and the transaction id of its
//! REQ (the REP answers with it, as `cm_format_rep` does), until the connection is
//! forgotten ([`Bridge::forget`]). What the kernel's CM does besides translating (its
//! resends, its answers to repeats, MRAs) is [`super::cm_resend`]'s, which sees every MAD
//! before the bridge takes it; an MRA that reaches the bridge is dropped (the emulated CM
//! waits without a timeout).
//!
//! The values a REQ or REP carries beyond the emulated messages' are those the kernel's
//! rxe put in the REQ captured from the VM (`cm_format_req` for a RoCE v2 path of
//! 1500-byte Ethernet): CM response timeouts 20, 15 CM retries, path MTU 1024, hop limit
//! 64, local ACK timeout 19, LIDs 0xffff, P_Key 0xffff, the CA GUID the MAC's modified
//! EUI-64 (as rxe's node GUID), the flow label the kernel's hash of the two ports.
//!
//! A connection between link-local IPv6 addresses (`rping -a fe80::...%IF`) is translated
//! too: its REQ has those addresses as the primary path's GIDs and a `struct cma_hdr` of
//! IP version 6, and every MAD of it travels between the two hosts' link-local addresses
//! over IPv6 (as the kernel sends them: the VM's REQ of the interop case
//! `rping-ll-emulated-server`); a remote host's link-local address is the modified EUI-64
//! of its MAC, the emulator's of its IPv4 address. Other IPv6 addresses are not.
//!
//! SIDR (UD through the RDMA CM) is translated with [`super::cm_sidr`]'s MADs: a remote
//! SIDR REQ is remembered (its transaction id, service id, IP version) until the
//! emulated listener's SIDR REP answers it; a SIDR REP has no communication id of its
//! responder, so it reaches the requesting id from id 0.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use backend_sim::frame::eth::Mac;
use backend_sim::PortConfig;
use netwire::ipv6::is_link_local;

use super::cm_frame::{self, CmaHdr, CMA_HDR_LEN};
use super::cm_mad::{self, Mad, Msg, Rej, Rep, Req, PKEY};
use super::cm_sidr;
use crate::rdmacm::core::messages::{
    self as m, Address, ConnData, Endpoint, Message, Service, REJ_TIMEOUT,
};

/// `IBV_QPT_RC` and `IBV_QPT_UC` (the emulated messages' QP types).
const QPT_RC: u32 = 2;
const QPT_UC: u32 = 3;
/// `IB_CM_REJ_TIMEOUT` (include/rdma/ib_cm.h), which the kernel sends when its
/// requester gives up; the emulated CM's own [`REJ_TIMEOUT`] differs.
pub const WIRE_REJ_TIMEOUT: u16 = 4;
/// The CM response timeouts of the kernel's REQ (`CMA_CM_RESPONSE_TIMEOUT`, cma.c).
const CM_RESPONSE_TIMEOUT: u8 = 20;
/// `CMA_MAX_CM_RETRIES`.
const MAX_CM_RETRIES: u8 = 15;
/// `IB_MTU_1024`: what `iboe_get_mtu` makes of a 1500-byte Ethernet MTU.
const PATH_MTU: u8 = 3;
/// The local ACK timeout of the VM's REQ.
const LOCAL_ACK_TIMEOUT: u8 = 19;
/// rxe's `local_ca_ack_delay` (`RXE_LOCAL_CA_ACK_DELAY`, rxe_param.h), a REP's target
/// ACK delay.
const TARGET_ACK_DELAY: u8 = 15;

/// What a remote communication id is known by.
#[derive(Debug, Clone, Default)]
struct Remote {
    /// Its QP number.
    qpn: u32,
    /// The transaction id of its REQ (when it requested).
    tid: Option<u64>,
    /// Whether it sent the REQ (then a REJ rejects its REQ, else its REP).
    requester: bool,
    /// Whether its MADs travel over IPv6 (between the link-local addresses: a connection
    /// of link-local addresses, whose path GIDs are those addresses).
    v6: bool,
}

/// An emulated host: its address and its port's MAC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Host {
    /// Its address.
    pub ip: Ipv4Addr,
    /// Its MAC.
    pub mac: Mac,
}

/// What became of a frame that reached an emulated host's port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FromWire {
    /// A message for the host's process from remote host `from`.
    Forward {
        /// The remote host.
        from: Ipv4Addr,
        /// The message ([`m::encode`]).
        body: Vec<u8>,
    },
    /// A CM MAD taken and dropped (an MRA, a MAD this bridge does not read).
    Dropped,
}

/// Counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BridgeStats {
    /// Messages sent out as MADs.
    pub out: u64,
    /// MADs taken in as messages.
    pub in_: u64,
    /// MADs dropped (MRAs, unreadable).
    pub dropped: u64,
}

/// The translation's state.
#[derive(Debug, Default)]
pub struct Bridge {
    /// The remote hosts (beyond a port).
    remote: Vec<Ipv4Addr>,
    /// By (remote host, its communication id).
    ids: HashMap<(Ipv4Addr, u32), Remote>,
    /// The remote SIDR REQs not answered yet, by (remote host, request id).
    sidr: HashMap<(Ipv4Addr, u32), cm_sidr::Asked>,
    /// The next PSN of the emulated hosts' QP1 datagrams.
    psn: u32,
    /// Counters.
    pub stats: BridgeStats,
}

fn guid(mac: Mac) -> u64 {
    u64::from_be_bytes(netwire::ipv6::eui64(mac.0))
}

fn gid(ip: Ipv4Addr) -> [u8; 16] {
    ip.to_ipv6_mapped().octets()
}

/// The MAC of a remote host: the emulator's convention, `02:00` and its address (the VM
/// of `cargo xtask vm --fabric`, another fabric's hosts).
fn mac_of(ip: Ipv4Addr) -> Mac {
    PortConfig::with_ip(ip).mac
}

/// The link-local address of the host of MAC `mac` (its GID 0: modified EUI-64).
fn link_local(mac: Mac) -> Ipv6Addr {
    netwire::ipv6::link_local_of_mac(mac.0)
}

/// The address a CM datagram of host `ip` (MAC `mac`) comes from: its IPv4 address, or
/// over IPv6 its link-local address.
fn wire_addr(mac: Mac, ip: Ipv4Addr, v6: bool) -> (Mac, IpAddr) {
    if v6 {
        (mac, link_local(mac).into())
    } else {
        (mac, ip.into())
    }
}

/// The RDMA CM header of an emulated REQ from `src` to `dst`, and whether the REQ
/// travels over IPv6: both addresses IPv4, or both link-local IPv6 (then between the
/// link-local addresses, its path's GIDs).
///
/// # Errors
/// Other addresses (IPv4-mapped or global IPv6, mixed families): not translated.
fn cma_hdr_of(src: SocketAddr, dst: SocketAddr) -> Result<(CmaHdr, bool), String> {
    let link_local = |a: &SocketAddr| matches!(a.ip(), IpAddr::V6(v) if is_link_local(&v));
    let v6 = match (src, dst) {
        (SocketAddr::V4(_), SocketAddr::V4(_)) => false,
        (s, d) if link_local(&s) && link_local(&d) => true,
        _ => {
            return Err(format!(
                "{src} to {dst}: only IPv4 and link-local IPv6 are translated"
            ))
        }
    };
    Ok((CmaHdr { src, dst: dst.ip() }, v6))
}

/// The flow label of a REQ's primary path from port `src` to port `dst`: the kernel's
/// `cma_get_roce_udp_flow_label` (cma.c) for an id without a flow label of its own,
/// the low 20 bits of `src * 31 + dst`.
fn flow_label(src: u16, dst: u16) -> u32 {
    (u32::from(src) * 31 + u32::from(dst)) & 0x000f_ffff
}

/// The GID of `ip` (`rdma_ip2gid`): an IPv4 address mapped, an IPv6 address itself.
fn gid_of_ip(ip: IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V4(v4) => gid(v4),
        IpAddr::V6(v6) => v6.octets(),
    }
}

impl Bridge {
    /// A bridge for the remote hosts `remote`.
    #[must_use]
    pub fn new(remote: Vec<Ipv4Addr>) -> Self {
        Bridge {
            remote,
            ..Bridge::default()
        }
    }

    /// Whether `ip` is a remote host's address.
    #[must_use]
    pub fn is_remote(&self, ip: Ipv4Addr) -> bool {
        self.remote.contains(&ip)
    }

    /// Emulated host `from`'s message `body` to remote host `to` as a frame to send
    /// from its port.
    ///
    /// # Errors
    /// The message cannot be read or has no MAD here (IPv6 addresses other than
    /// link-local ones, a SIDR REP to a request the bridge did not see).
    pub fn to_wire(&mut self, from: Host, to: Ipv4Addr, body: &[u8]) -> Result<Vec<u8>, String> {
        let (_, (dest, sender, msg)) =
            m::decode(body).map_err(|e| format!("a message that {e}"))?;
        let peer = match dest {
            Address::Endpoint(ep) => Some(ep.id),
            Address::Service(_) => None,
        };
        let key = (to, peer.unwrap_or(0));
        let remote = self.ids.get(&key).cloned().unwrap_or_default();
        let local = sender.id;
        let need_peer = || peer.ok_or_else(|| "a message to a service".to_owned());
        let mut over_v6 = remote.v6;
        let (tid, msg) = match msg {
            Message::Req {
                service,
                src,
                dst,
                qp_type,
                data,
            } => {
                let transport = match qp_type {
                    QPT_RC => 0,
                    QPT_UC => 1,
                    t => return Err(format!("a REQ of QP type {t}")),
                };
                let (hdr, v6) = cma_hdr_of(src, dst)?;
                over_v6 = v6;
                let mut pd = hdr.encode().to_vec();
                pd.extend_from_slice(&data.private_data);
                let req = Req {
                    local_comm_id: local,
                    service_id: (u64::from(service.ps) << 16) | u64::from(service.port),
                    local_ca_guid: guid(from.mac),
                    local_qkey: 0,
                    local_qpn: data.qpn,
                    responder_resources: data.responder_resources,
                    initiator_depth: data.initiator_depth,
                    remote_cm_response_timeout: CM_RESPONSE_TIMEOUT,
                    transport_service_type: transport,
                    flow_control: data.flow_control != 0,
                    starting_psn: data.psn & 0x00ff_ffff,
                    local_cm_response_timeout: CM_RESPONSE_TIMEOUT,
                    retry_count: data.retry_count,
                    pkey: PKEY,
                    path_mtu: PATH_MTU,
                    rnr_retry_count: data.rnr_retry_count,
                    max_cm_retries: MAX_CM_RETRIES,
                    srq: data.srq,
                    local_lid: 0xffff,
                    remote_lid: 0xffff,
                    local_gid: gid_of_ip(src.ip()),
                    remote_gid: gid_of_ip(dst.ip()),
                    flow_label: flow_label(src.port(), dst.port()),
                    packet_rate: 0,
                    traffic_class: 0,
                    hop_limit: 64,
                    sl: 0,
                    subnet_local: false,
                    local_ack_timeout: LOCAL_ACK_TIMEOUT,
                    private_data: pd,
                };
                (u64::from(local), Msg::Req(req))
            }
            Message::Rep(d) => {
                let rep = Rep {
                    local_comm_id: local,
                    remote_comm_id: need_peer()?,
                    local_qkey: 0,
                    local_qpn: d.qpn,
                    starting_psn: d.psn & 0x00ff_ffff,
                    responder_resources: d.responder_resources,
                    initiator_depth: d.initiator_depth,
                    target_ack_delay: TARGET_ACK_DELAY,
                    failover_accepted: 0,
                    flow_control: d.flow_control != 0,
                    rnr_retry_count: d.rnr_retry_count,
                    srq: d.srq,
                    local_ca_guid: guid(from.mac),
                    private_data: d.private_data,
                };
                (remote.tid.unwrap_or(u64::from(local)), Msg::Rep(rep))
            }
            Message::Rtu => (u64::from(local), Msg::Rtu(local, need_peer()?)),
            Message::Rej {
                reason,
                private_data,
            } => {
                let reason = if reason == REJ_TIMEOUT {
                    WIRE_REJ_TIMEOUT
                } else {
                    u16::try_from(reason).map_err(|_| format!("a REJ of reason {reason}"))?
                };
                let rej = Rej {
                    local_comm_id: local,
                    remote_comm_id: need_peer()?,
                    message_rejected: if remote.requester { 0 } else { 1 },
                    reason,
                    ari: Vec::new(),
                    private_data,
                };
                (remote.tid.unwrap_or(u64::from(local)), Msg::Rej(rej))
            }
            Message::Dreq => (u64::from(local), Msg::Dreq(local, need_peer()?, remote.qpn)),
            Message::Drep => (u64::from(local), Msg::Drep(local, need_peer()?)),
            Message::SidrReq {
                service,
                src,
                dst,
                private_data,
            } => {
                let (hdr, v6) = cma_hdr_of(src, dst)?;
                over_v6 = v6;
                let req = cm_sidr::req(local, service, &hdr, &private_data);
                (u64::from(local), Msg::SidrReq(req))
            }
            Message::SidrRep {
                status,
                qpn,
                qkey,
                private_data,
            } => {
                let request_id = need_peer()?;
                let asked = self.sidr.get(&(to, request_id)).copied().ok_or_else(|| {
                    format!("a SIDR REP to {to}'s request {request_id}, not asked")
                })?;
                over_v6 = asked.v6;
                let rep = cm_sidr::rep(
                    request_id,
                    asked.service_id,
                    status,
                    qpn,
                    qkey,
                    private_data,
                )?;
                self.sidr.remove(&(to, request_id));
                (asked.tid, Msg::SidrRep(rep))
            }
        };
        let frame = self.frame(from, to, &Mad { tid, msg }, over_v6);
        self.stats.out += 1;
        Ok(frame)
    }

    /// `mad` as the frame emulated host `from` sends to remote host `to` (the next PSN
    /// of the emulated hosts' QP1).
    pub fn frame(&mut self, from: Host, to: Ipv4Addr, mad: &Mad, v6: bool) -> Vec<u8> {
        let frame = cm_frame::frame(
            wire_addr(from.mac, from.ip, v6),
            wire_addr(mac_of(to), to, v6),
            self.psn,
            &mad.encode(),
        );
        self.psn = self.psn.wrapping_add(1) & 0x00ff_ffff;
        frame
    }

    /// Forgets what it knew of remote host `remote`'s communication id `id` (its
    /// connection ended, see [`super::cm_resend::Resend::take_forgotten`]).
    pub fn forget(&mut self, remote: Ipv4Addr, id: u32) {
        self.ids.remove(&(remote, id));
    }

    /// What to do with `frame`, which reached emulated host `host`'s port: `None` if it
    /// is no CM MAD for the host (the host's NIC takes it).
    pub fn from_wire(&mut self, host: Host, frame: &[u8]) -> Option<FromWire> {
        let (_, src, dst, payload) = cm_frame::parse_frame(frame)?;
        let (src, v6) = self.sender_of(host, src, dst)?;
        if payload.get(1) != Some(&cm_mad::CLASS_CM) {
            return None;
        }
        let r = match Mad::decode(payload) {
            Ok(mad) => self.take(host, src, v6, mad),
            Err(_) => FromWire::Dropped,
        };
        match &r {
            FromWire::Forward { .. } => self.stats.in_ += 1,
            FromWire::Dropped => self.stats.dropped += 1,
        }
        Some(r)
    }

    /// The remote host (its IPv4 address) a datagram from `src` to `dst` comes from, and
    /// whether it came over IPv6, if it is for `host`: over IPv4 from any address to the
    /// host's; over IPv6 from a remote host's link-local address (its MAC the emulator's
    /// of its IPv4 address) to the host's.
    fn sender_of(&self, host: Host, src: IpAddr, dst: IpAddr) -> Option<(Ipv4Addr, bool)> {
        match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => (d == host.ip).then_some((s, false)),
            (IpAddr::V6(s), IpAddr::V6(d)) if d == link_local(host.mac) => {
                let mac = netwire::ipv6::link_local_mac(&s)?;
                let ip = Ipv4Addr::new(mac[2], mac[3], mac[4], mac[5]);
                (self.is_remote(ip) && mac_of(ip).0 == mac).then_some((ip, true))
            }
            _ => None,
        }
    }

    /// The address a REQ's RDMA CM header connects to, as the emulated CM knows it: an
    /// IPv4 address itself; host `host`'s link-local address its IPv4 address.
    fn service_ip(host: Host, dst: IpAddr) -> Option<Ipv4Addr> {
        match dst {
            IpAddr::V4(v4) => Some(v4),
            IpAddr::V6(v6) => (v6 == link_local(host.mac)).then_some(host.ip),
        }
    }

    fn take(&mut self, host: Host, src: Ipv4Addr, v6: bool, mad: Mad) -> FromWire {
        let at = |id: u32| Endpoint { host: host.ip, id };
        let (to, from, msg) = match mad.msg {
            Msg::Req(r) => {
                let key = (src, r.local_comm_id);
                let Ok(hdr) = CmaHdr::decode(&r.private_data) else {
                    return FromWire::Dropped;
                };
                let Some(service_ip) = Self::service_ip(host, hdr.dst) else {
                    return FromWire::Dropped;
                };
                let qp_type = match r.transport_service_type {
                    0 => QPT_RC,
                    1 => QPT_UC,
                    _ => return FromWire::Dropped,
                };
                self.ids.insert(
                    key,
                    Remote {
                        qpn: r.local_qpn,
                        tid: Some(mad.tid),
                        requester: true,
                        v6,
                    },
                );
                let port = (r.service_id & 0xffff) as u16;
                let service = Service {
                    ip: service_ip,
                    port,
                    ps: ((r.service_id >> 16) & 0xffff) as u32,
                };
                let data = ConnData {
                    qpn: r.local_qpn,
                    psn: r.starting_psn,
                    responder_resources: r.responder_resources,
                    initiator_depth: r.initiator_depth,
                    flow_control: u8::from(r.flow_control),
                    retry_count: r.retry_count,
                    rnr_retry_count: r.rnr_retry_count,
                    srq: r.srq,
                    private_data: r.private_data[CMA_HDR_LEN..].to_vec(),
                };
                let msg = Message::Req {
                    service,
                    src: hdr.src,
                    dst: SocketAddr::new(hdr.dst, port),
                    qp_type,
                    data,
                };
                (Address::Service(service), r.local_comm_id, msg)
            }
            Msg::Rep(r) => {
                let e = self.ids.entry((src, r.local_comm_id)).or_default();
                e.qpn = r.local_qpn;
                e.v6 = v6;
                let data = ConnData {
                    qpn: r.local_qpn,
                    psn: r.starting_psn,
                    responder_resources: r.responder_resources,
                    initiator_depth: r.initiator_depth,
                    flow_control: u8::from(r.flow_control),
                    retry_count: 0,
                    rnr_retry_count: r.rnr_retry_count,
                    srq: r.srq,
                    private_data: r.private_data,
                };
                let to = Address::Endpoint(at(r.remote_comm_id));
                (to, r.local_comm_id, Message::Rep(data))
            }
            Msg::Rtu(l, r) => (Address::Endpoint(at(r)), l, Message::Rtu),
            Msg::Rej(r) => {
                let reason = if r.reason == WIRE_REJ_TIMEOUT {
                    REJ_TIMEOUT
                } else {
                    i32::from(r.reason)
                };
                let msg = Message::Rej {
                    reason,
                    private_data: r.private_data,
                };
                (
                    Address::Endpoint(at(r.remote_comm_id)),
                    r.local_comm_id,
                    msg,
                )
            }
            Msg::Dreq(l, r, _) => (Address::Endpoint(at(r)), l, Message::Dreq),
            Msg::Drep(l, r) => (Address::Endpoint(at(r)), l, Message::Drep),
            Msg::Mra(..) => return FromWire::Dropped,
            Msg::SidrReq(r) => {
                let Some((service, msg)) =
                    cm_sidr::req_message(&r, |hdr| Self::service_ip(host, hdr.dst))
                else {
                    return FromWire::Dropped;
                };
                self.sidr.insert(
                    (src, r.request_id),
                    cm_sidr::Asked {
                        tid: mad.tid,
                        service_id: r.service_id,
                        v6,
                    },
                );
                (Address::Service(service), r.request_id, msg)
            }
            Msg::SidrRep(r) => (
                Address::Endpoint(at(r.request_id)),
                0,
                cm_sidr::rep_message(r),
            ),
        };
        let mut body = Vec::new();
        m::encode(
            None,
            to,
            Endpoint {
                host: src,
                id: from,
            },
            &msg,
            &mut body,
        );
        FromWire::Forward { from: src, body }
    }
}

#[cfg(test)]
mod tests;
