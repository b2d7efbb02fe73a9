//! RoCEv2 transport headers (InfiniBand Architecture Specification vol. 1, ch. 9, and
//! annex A17): BTH, DETH, RETH, AETH, AtomicETH, AtomicAckETH, ImmDt, and the ICRC.
//!
//! RoCEv2 carries the IB transport in UDP to port 4791, over IPv4 or IPv6. The ICRC is a
//! CRC-32 over the IP, UDP and IB headers with the fields that routers may change (IPv4:
//! TOS, TTL, header checksum; IPv6: traffic class, flow label, hop limit; the UDP
//! checksum; BTH resv8a) replaced by ones, preceded by 8 bytes of ones that stand for
//! the IB LRH, then over the payload and pad; it is sent inverted, least significant byte
//! first (as the Linux rxe driver computes it in `rxe_icrc.c`, whose seed 0xdebb20e3 is
//! the CRC register after those 8 bytes of ones). The CRC itself is `crc32fast`'s.

use crate::eth::{EthHeader, Mac, ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETHERTYPE_ROCE_V1};
use crate::ipv4::{Ipv4Header, IPV4_HEADER_LEN, PROTO_UDP};
use crate::ipv6::{Ipv6Header, IPV6_HEADER_LEN};
use crate::udp::{UdpHeader, UDP_HEADER_LEN};
use crate::FrameError;
use std::net::{Ipv4Addr, Ipv6Addr};

/// The UDP destination port of RoCEv2.
pub const ROCEV2_UDP_PORT: u16 = 4791;
/// The GRH's next header for the IB transport (BTH), in a RoCE v1 frame.
pub const IB_NEXT_HEADER: u8 = 0x1b;
/// Base Transport Header length.
pub const BTH_LEN: usize = 12;
/// Datagram Extended Transport Header length.
pub const DETH_LEN: usize = 8;
/// RDMA Extended Transport Header length.
pub const RETH_LEN: usize = 16;
/// ACK Extended Transport Header length.
pub const AETH_LEN: usize = 4;
/// Atomic Extended Transport Header length.
pub const ATOMIC_ETH_LEN: usize = 28;
/// Atomic ACK Extended Transport Header length.
pub const ATOMIC_ACK_ETH_LEN: usize = 8;
/// Immediate data length.
pub const IMM_LEN: usize = 4;
/// Invariant CRC length.
pub const ICRC_LEN: usize = 4;
/// The default partition key.
pub const DEFAULT_PKEY: u16 = 0xffff;
/// The destination QP number of multicast packets.
pub const MULTICAST_QPN: u32 = 0x00ff_ffff;
/// The 8 bytes of ones that stand in for the LRH at the start of the ICRC.
const LRH_ONES: [u8; 8] = [0xff; 8];

/// BTH opcodes (IBA table 38): the transport in the top three bits, the operation below.
#[allow(missing_docs)]
pub mod opcode {
    pub const RC: u8 = 0x00;
    pub const UC: u8 = 0x20;
    pub const RD: u8 = 0x40;
    pub const UD: u8 = 0x60;

    pub const SEND_FIRST: u8 = 0x00;
    pub const SEND_MIDDLE: u8 = 0x01;
    pub const SEND_LAST: u8 = 0x02;
    pub const SEND_LAST_IMM: u8 = 0x03;
    pub const SEND_ONLY: u8 = 0x04;
    pub const SEND_ONLY_IMM: u8 = 0x05;
    pub const WRITE_FIRST: u8 = 0x06;
    pub const WRITE_MIDDLE: u8 = 0x07;
    pub const WRITE_LAST: u8 = 0x08;
    pub const WRITE_LAST_IMM: u8 = 0x09;
    pub const WRITE_ONLY: u8 = 0x0a;
    pub const WRITE_ONLY_IMM: u8 = 0x0b;
    pub const READ_REQUEST: u8 = 0x0c;
    pub const READ_RESPONSE_FIRST: u8 = 0x0d;
    pub const READ_RESPONSE_MIDDLE: u8 = 0x0e;
    pub const READ_RESPONSE_LAST: u8 = 0x0f;
    pub const READ_RESPONSE_ONLY: u8 = 0x10;
    pub const ACKNOWLEDGE: u8 = 0x11;
    pub const ATOMIC_ACKNOWLEDGE: u8 = 0x12;
    pub const COMPARE_SWAP: u8 = 0x13;
    pub const FETCH_ADD: u8 = 0x14;
    pub const SEND_LAST_INV: u8 = 0x16;
    pub const SEND_ONLY_INV: u8 = 0x17;
}

/// Which headers follow the BTH for an opcode, and whether it carries payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OpcodeLayout {
    /// DETH (UD).
    pub deth: bool,
    /// RETH (first/only RDMA WRITE, READ request).
    pub reth: bool,
    /// AETH (acknowledgements and read responses first/last/only).
    pub aeth: bool,
    /// AtomicETH (CAS and FAA requests).
    pub atomic_eth: bool,
    /// AtomicAckETH (atomic acknowledgement).
    pub atomic_ack_eth: bool,
    /// ImmDt.
    pub imm: bool,
    /// Whether the packet may carry payload.
    pub payload: bool,
}

impl OpcodeLayout {
    /// Total length of the extension headers after the BTH.
    #[must_use]
    pub fn ext_len(&self) -> usize {
        usize::from(self.deth) * DETH_LEN
            + usize::from(self.reth) * RETH_LEN
            + usize::from(self.aeth) * AETH_LEN
            + usize::from(self.atomic_eth) * ATOMIC_ETH_LEN
            + usize::from(self.atomic_ack_eth) * ATOMIC_ACK_ETH_LEN
            + usize::from(self.imm) * IMM_LEN
    }
}

/// The layout of `op`, or `None` for opcodes this simulator does not speak (RD, XRC,
/// reserved).
#[must_use]
pub fn opcode_layout(op: u8) -> Option<OpcodeLayout> {
    use opcode::*;
    let transport = op & 0xe0;
    let operation = op & 0x1f;
    let mut l = OpcodeLayout::default();
    match transport {
        RC | UC => {}
        UD => {
            l.deth = true;
            return match operation {
                SEND_ONLY => Some(OpcodeLayout { payload: true, ..l }),
                SEND_ONLY_IMM => Some(OpcodeLayout {
                    payload: true,
                    imm: true,
                    ..l
                }),
                _ => None,
            };
        }
        _ => return None,
    }
    let uc = transport == UC;
    match operation {
        SEND_FIRST | SEND_MIDDLE | SEND_LAST | SEND_ONLY | WRITE_MIDDLE | WRITE_LAST => {
            l.payload = true;
        }
        SEND_LAST_IMM | SEND_ONLY_IMM | WRITE_LAST_IMM => {
            l.payload = true;
            l.imm = true;
        }
        // The IETH (the rkey to invalidate) has ImmDt's size and place: it is carried in
        // `RoceHeaders::imm`.
        SEND_LAST_INV | SEND_ONLY_INV if !uc => {
            l.payload = true;
            l.imm = true;
        }
        WRITE_FIRST | WRITE_ONLY => {
            l.payload = true;
            l.reth = true;
        }
        WRITE_ONLY_IMM => {
            l.payload = true;
            l.reth = true;
            l.imm = true;
        }
        READ_REQUEST if !uc => l.reth = true,
        READ_RESPONSE_FIRST | READ_RESPONSE_LAST | READ_RESPONSE_ONLY if !uc => {
            l.payload = true;
            l.aeth = true;
        }
        READ_RESPONSE_MIDDLE if !uc => l.payload = true,
        ACKNOWLEDGE if !uc => l.aeth = true,
        ATOMIC_ACKNOWLEDGE if !uc => {
            l.aeth = true;
            l.atomic_ack_eth = true;
        }
        COMPARE_SWAP | FETCH_ADD if !uc => l.atomic_eth = true,
        _ => return None,
    }
    Some(l)
}

/// Base Transport Header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Bth {
    /// Opcode (transport and operation).
    pub opcode: u8,
    /// Solicited event.
    pub solicited: bool,
    /// Migration request.
    pub mig_req: bool,
    /// Bytes of pad after the payload (0..=3).
    pub pad_count: u8,
    /// Transport header version (0).
    pub tver: u8,
    /// Partition key.
    pub pkey: u16,
    /// Forward explicit congestion notification.
    pub fecn: bool,
    /// Backward explicit congestion notification.
    pub becn: bool,
    /// Destination QP number (24 bits).
    pub dest_qp: u32,
    /// Acknowledge request.
    pub ack_req: bool,
    /// Packet sequence number (24 bits).
    pub psn: u32,
}

impl Bth {
    /// Parses a BTH.
    ///
    /// # Errors
    /// [`FrameError::Truncated`] if fewer than 12 bytes are given.
    pub fn parse(b: &[u8]) -> Result<Self, FrameError> {
        if b.len() < BTH_LEN {
            return Err(FrameError::Truncated {
                layer: "bth",
                need: BTH_LEN,
                have: b.len(),
            });
        }
        Ok(Bth {
            opcode: b[0],
            solicited: b[1] & 0x80 != 0,
            mig_req: b[1] & 0x40 != 0,
            pad_count: (b[1] >> 4) & 0x3,
            tver: b[1] & 0x0f,
            pkey: u16::from_be_bytes([b[2], b[3]]),
            fecn: b[4] & 0x80 != 0,
            becn: b[4] & 0x40 != 0,
            dest_qp: u32::from_be_bytes([0, b[5], b[6], b[7]]),
            ack_req: b[8] & 0x80 != 0,
            psn: u32::from_be_bytes([0, b[9], b[10], b[11]]),
        })
    }

    /// Appends the 12 header bytes.
    pub fn write(&self, out: &mut Vec<u8>) {
        out.push(self.opcode);
        out.push(
            (u8::from(self.solicited) << 7)
                | (u8::from(self.mig_req) << 6)
                | ((self.pad_count & 3) << 4)
                | (self.tver & 0x0f),
        );
        out.extend_from_slice(&self.pkey.to_be_bytes());
        out.push((u8::from(self.fecn) << 7) | (u8::from(self.becn) << 6));
        out.extend_from_slice(&(self.dest_qp & 0x00ff_ffff).to_be_bytes()[1..]);
        out.push(u8::from(self.ack_req) << 7);
        out.extend_from_slice(&(self.psn & 0x00ff_ffff).to_be_bytes()[1..]);
    }
}

/// Datagram Extended Transport Header (UD).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Deth {
    /// Queue key.
    pub qkey: u32,
    /// Source QP number (24 bits).
    pub src_qp: u32,
}

/// RDMA Extended Transport Header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reth {
    /// Remote virtual address.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// Length of the whole RDMA operation.
    pub dma_len: u32,
}

/// ACK Extended Transport Header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Aeth {
    /// Syndrome: ACK (0b000xxxxx, credits), RNR NAK (0b001 + timer), NAK (0b011 + code).
    pub syndrome: u8,
    /// Message sequence number (24 bits).
    pub msn: u32,
}

/// AETH syndromes and NAK codes.
#[allow(missing_docs)]
pub mod syndrome {
    pub const ACK: u8 = 0x00;
    /// Credit count "invalid" (no end-to-end flow control), used by rxe.
    pub const ACK_NO_CREDITS: u8 = 0x1f;
    pub const RNR_NAK: u8 = 0x20;
    pub const NAK: u8 = 0x60;
    pub const NAK_PSN_SEQ_ERROR: u8 = 0x60;
    pub const NAK_INVALID_REQUEST: u8 = 0x61;
    pub const NAK_REMOTE_ACCESS_ERROR: u8 = 0x62;
    pub const NAK_REMOTE_OPERATIONAL_ERROR: u8 = 0x63;
    pub const NAK_INVALID_RD_REQUEST: u8 = 0x64;
}

/// Atomic Extended Transport Header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AtomicEth {
    /// Remote virtual address (8-byte aligned).
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// Swap value (CAS) or addend (FAA).
    pub swap_add: u64,
    /// Compare value (CAS).
    pub compare: u64,
}

/// All headers of a RoCEv2 packet after the BTH, as built or parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RoceHeaders {
    /// Base transport header (its pad count is filled in by the builder).
    pub bth: Bth,
    /// DETH, for UD.
    pub deth: Option<Deth>,
    /// RETH.
    pub reth: Option<Reth>,
    /// AETH.
    pub aeth: Option<Aeth>,
    /// AtomicETH.
    pub atomic_eth: Option<AtomicEth>,
    /// AtomicAckETH: the original remote value.
    pub atomic_ack: Option<u64>,
    /// Immediate data (network byte order value as carried); for the
    /// SEND_*_WITH_INVALIDATE opcodes, the IETH's rkey (same size, same place).
    pub imm: Option<u32>,
}

/// A parsed RoCEv2 packet (from the BTH on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RocePacket<'a> {
    /// The headers.
    pub headers: RoceHeaders,
    /// The payload, without pad and ICRC.
    pub payload: &'a [u8],
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}
fn be64(b: &[u8]) -> u64 {
    u64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
}

impl RoceHeaders {
    /// Appends the BTH and the extension headers the opcode calls for, in wire order.
    fn write(&self, out: &mut Vec<u8>) {
        self.bth.write(out);
        // Wire order (IBA 9.2): RETH/DETH, AtomicETH, AETH, AtomicAckETH, ImmDt.
        if let Some(d) = self.deth {
            out.extend_from_slice(&d.qkey.to_be_bytes());
            out.push(0);
            out.extend_from_slice(&(d.src_qp & 0x00ff_ffff).to_be_bytes()[1..]);
        }
        if let Some(r) = self.reth {
            out.extend_from_slice(&r.va.to_be_bytes());
            out.extend_from_slice(&r.rkey.to_be_bytes());
            out.extend_from_slice(&r.dma_len.to_be_bytes());
        }
        if let Some(a) = self.atomic_eth {
            out.extend_from_slice(&a.va.to_be_bytes());
            out.extend_from_slice(&a.rkey.to_be_bytes());
            out.extend_from_slice(&a.swap_add.to_be_bytes());
            out.extend_from_slice(&a.compare.to_be_bytes());
        }
        if let Some(a) = self.aeth {
            out.push(a.syndrome);
            out.extend_from_slice(&(a.msn & 0x00ff_ffff).to_be_bytes()[1..]);
        }
        if let Some(v) = self.atomic_ack {
            out.extend_from_slice(&v.to_be_bytes());
        }
        if let Some(i) = self.imm {
            out.extend_from_slice(&i.to_be_bytes());
        }
    }
}

/// Parses a RoCEv2 packet from the UDP payload (BTH through ICRC). The ICRC is not checked
/// here: see [`icrc_ok`].
///
/// # Errors
/// [`FrameError`] if the opcode is unknown or the packet is shorter than its headers.
pub fn parse_roce(udp_payload: &[u8]) -> Result<RocePacket<'_>, FrameError> {
    let bth = Bth::parse(udp_payload)?;
    let layout =
        opcode_layout(bth.opcode).ok_or(FrameError::Malformed("roce: unsupported opcode"))?;
    let hdr_end = BTH_LEN + layout.ext_len();
    let need = hdr_end + usize::from(bth.pad_count) + ICRC_LEN;
    if udp_payload.len() < need {
        return Err(FrameError::Truncated {
            layer: "roce",
            need,
            have: udp_payload.len(),
        });
    }
    let mut h = RoceHeaders {
        bth,
        ..RoceHeaders::default()
    };
    let mut o = BTH_LEN;
    let b = udp_payload;
    if layout.deth {
        h.deth = Some(Deth {
            qkey: be32(&b[o..]),
            src_qp: be32(&b[o + 4..]) & 0x00ff_ffff,
        });
        o += DETH_LEN;
    }
    if layout.reth {
        h.reth = Some(Reth {
            va: be64(&b[o..]),
            rkey: be32(&b[o + 8..]),
            dma_len: be32(&b[o + 12..]),
        });
        o += RETH_LEN;
    }
    if layout.atomic_eth {
        h.atomic_eth = Some(AtomicEth {
            va: be64(&b[o..]),
            rkey: be32(&b[o + 8..]),
            swap_add: be64(&b[o + 12..]),
            compare: be64(&b[o + 20..]),
        });
        o += ATOMIC_ETH_LEN;
    }
    if layout.aeth {
        h.aeth = Some(Aeth {
            syndrome: b[o],
            msn: be32(&b[o..]) & 0x00ff_ffff,
        });
        o += AETH_LEN;
    }
    if layout.atomic_ack_eth {
        h.atomic_ack = Some(be64(&b[o..]));
        o += ATOMIC_ACK_ETH_LEN;
    }
    if layout.imm {
        h.imm = Some(be32(&b[o..]));
        o += IMM_LEN;
    }
    let end = udp_payload.len() - ICRC_LEN - usize::from(bth.pad_count);
    if !layout.payload && end != o {
        return Err(FrameError::Malformed(
            "roce: payload on an opcode that carries none",
        ));
    }
    Ok(RocePacket {
        headers: h,
        payload: &udp_payload[o..end],
    })
}

/// The IP addresses of a RoCEv2 frame: both IPv4 (the GIDs' IPv4-mapped form) or both
/// IPv6.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoceIps {
    /// RoCEv2 over IPv4: source and destination.
    V4(Ipv4Addr, Ipv4Addr),
    /// RoCEv2 over IPv6: source and destination.
    V6(Ipv6Addr, Ipv6Addr),
    /// RoCE v1 (IBA annex A16): a GRH with these source and destination GIDs, then the IB
    /// transport, straight after the Ethernet header (EtherType 0x8915).
    V1(Ipv6Addr, Ipv6Addr),
}

/// Addresses and IP fields of a RoCEv2 frame to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoceRoute {
    /// Source MAC.
    pub src_mac: Mac,
    /// Destination MAC.
    pub dst_mac: Mac,
    /// Source and destination addresses.
    pub ips: RoceIps,
    /// UDP source port (flow entropy).
    pub src_port: u16,
    /// DSCP/ECN (IPv4 TOS, IPv6 traffic class).
    pub tos: u8,
    /// TTL (the GRH hop limit; IPv6's hop limit).
    pub ttl: u8,
    /// IP identification (IPv4 only).
    pub ip_id: u16,
}

impl RoceRoute {
    /// A route from `src` to `dst` (MAC and IPv4 address each) with the usual IP fields:
    /// UDP source port 0xc000 (the low end of the range RoCE takes its flow entropy
    /// from), DSCP/ECN 0, TTL 64 and IP identification 0; change them with struct update
    /// syntax.
    #[must_use]
    pub const fn new(src: (Mac, Ipv4Addr), dst: (Mac, Ipv4Addr)) -> Self {
        RoceRoute {
            src_mac: src.0,
            dst_mac: dst.0,
            ips: RoceIps::V4(src.1, dst.1),
            src_port: 0xc000,
            tos: 0,
            ttl: 64,
            ip_id: 0,
        }
    }

    /// As [`RoceRoute::new`], over IPv6 (flow label 0, as rxe's `prepare_ipv6_hdr`).
    #[must_use]
    pub const fn new_v6(src: (Mac, Ipv6Addr), dst: (Mac, Ipv6Addr)) -> Self {
        RoceRoute {
            ips: RoceIps::V6(src.1, dst.1),
            ..RoceRoute::new(
                (src.0, Ipv4Addr::UNSPECIFIED),
                (dst.0, Ipv4Addr::UNSPECIFIED),
            )
        }
    }
}

/// Builds a whole Ethernet/IP/UDP/RoCEv2 frame with pad and ICRC. The BTH pad count is
/// set from the payload length. The UDP checksum is 0, as rxe sends it over either IP
/// (`prepare_udp_hdr`).
#[must_use]
pub fn build_roce_frame(route: &RoceRoute, headers: &RoceHeaders, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    build_roce_frame_into(&mut out, route, headers, payload);
    out
}

/// [`build_roce_frame`] into `out` (cleared first), so that a caller can reuse a buffer.
pub fn build_roce_frame_into(
    out: &mut Vec<u8>,
    route: &RoceRoute,
    headers: &RoceHeaders,
    payload: &[u8],
) {
    build_into(out, route, headers, payload, true);
}

/// [`build_roce_frame_into`] that leaves the ICRC four zero bytes, for a sender that
/// writes it later with [`fill_icrc`] (or never, where nothing reads it).
pub fn build_roce_frame_unsummed_into(
    out: &mut Vec<u8>,
    route: &RoceRoute,
    headers: &RoceHeaders,
    payload: &[u8],
) {
    build_into(out, route, headers, payload, false);
}

/// Writes the ICRC of a RoCE frame as [`build_roce_frame_into`] lays it out (an untagged
/// Ethernet header, the datagram through its pad, four bytes of ICRC) into its last four
/// bytes, over what the frame holds before them. A frame shorter than an Ethernet header
/// and an ICRC is left as it is.
pub fn fill_icrc(frame: &mut [u8]) {
    let n = frame.len();
    if n < 14 + ICRC_LEN {
        return;
    }
    let icrc = compute_icrc(&frame[14..n - ICRC_LEN]);
    frame[n - ICRC_LEN..].copy_from_slice(&icrc.to_le_bytes());
}

fn icrc_of(out: &[u8], sum: bool) -> u32 {
    if sum {
        compute_icrc(&out[14..])
    } else {
        0
    }
}

fn build_into(
    out: &mut Vec<u8>,
    route: &RoceRoute,
    headers: &RoceHeaders,
    payload: &[u8],
    sum: bool,
) {
    let pad = (4 - payload.len() % 4) % 4;
    let mut h = *headers;
    h.bth.pad_count = pad as u8;
    let ext = opcode_layout(h.bth.opcode).map_or_else(
        || {
            usize::from(h.deth.is_some()) * DETH_LEN
                + usize::from(h.reth.is_some()) * RETH_LEN
                + usize::from(h.aeth.is_some()) * AETH_LEN
                + usize::from(h.atomic_eth.is_some()) * ATOMIC_ETH_LEN
                + usize::from(h.atomic_ack.is_some()) * ATOMIC_ACK_ETH_LEN
                + usize::from(h.imm.is_some()) * IMM_LEN
        },
        |l| l.ext_len(),
    );
    let udp_payload_len = BTH_LEN + ext + payload.len() + pad + ICRC_LEN;
    out.clear();
    out.reserve(14 + IPV6_HEADER_LEN + UDP_HEADER_LEN + udp_payload_len);
    if let RoceIps::V1(src, dst) = route.ips {
        EthHeader::write_untagged(route.dst_mac, route.src_mac, ETHERTYPE_ROCE_V1, out);
        Ipv6Header {
            traffic_class: route.tos,
            flow_label: 0,
            payload_len: udp_payload_len as u16,
            next_header: IB_NEXT_HEADER,
            hop_limit: route.ttl,
            src,
            dst,
        }
        .write(out);
        h.write(out);
        out.extend_from_slice(payload);
        out.resize(out.len() + pad, 0);
        let icrc = icrc_of(out, sum);
        out.extend_from_slice(&icrc.to_le_bytes());
        return;
    }
    match route.ips {
        RoceIps::V4(src, dst) => {
            EthHeader::write_untagged(route.dst_mac, route.src_mac, ETHERTYPE_IPV4, out);
            Ipv4Header::write(
                out,
                route.tos,
                UDP_HEADER_LEN + udp_payload_len,
                route.ip_id,
                true,
                route.ttl,
                PROTO_UDP,
                src,
                dst,
            );
        }
        RoceIps::V6(src, dst) | RoceIps::V1(src, dst) => {
            EthHeader::write_untagged(route.dst_mac, route.src_mac, ETHERTYPE_IPV6, out);
            Ipv6Header {
                traffic_class: route.tos,
                flow_label: 0,
                payload_len: (UDP_HEADER_LEN + udp_payload_len) as u16,
                next_header: PROTO_UDP,
                hop_limit: route.ttl,
                src,
                dst,
            }
            .write(out);
        }
    }
    UdpHeader::write(out, route.src_port, ROCEV2_UDP_PORT, udp_payload_len);
    h.write(out);
    out.extend_from_slice(payload);
    out.resize(out.len() + pad, 0);
    let icrc = icrc_of(out, sum);
    out.extend_from_slice(&icrc.to_le_bytes());
}

/// Computes the ICRC of a RoCE datagram `ip` (IPv4 or IPv6 header through pad, without
/// the ICRC itself; the version nibble tells which; for RoCE v1 the GRH through pad, the
/// GRH's next header 0x1b telling it: no UDP header, the GRH masked as an IPv6 header
/// is). Returns the value to store little-endian after the pad.
#[must_use]
pub fn compute_icrc(ip: &[u8]) -> u32 {
    let v6 = ip.first().is_some_and(|b| b >> 4 == 6);
    let v1 = v6 && ip.get(6) == Some(&IB_NEXT_HEADER);
    let hl = match ip.first() {
        _ if v6 => IPV6_HEADER_LEN,
        None => IPV4_HEADER_LEN,
        Some(b) => (usize::from(b & 0x0f) * 4).max(IPV4_HEADER_LEN),
    };
    let udp = if v1 { 0 } else { UDP_HEADER_LEN };
    let masked_len = hl + udp + BTH_LEN;
    let mut crc = crc32fast::Hasher::new();
    crc.update(&LRH_ONES);
    if ip.len() < masked_len {
        crc.update(ip);
        return crc.finalize();
    }
    let mut ps = [0u8; 60 + UDP_HEADER_LEN + BTH_LEN];
    ps[..masked_len].copy_from_slice(&ip[..masked_len]);
    if v6 {
        // rxe_icrc.c: priority (the traffic class's high nibble), the flow label (and the
        // class's low nibble with it) and the hop limit.
        ps[0] |= 0x0f;
        ps[1..4].fill(0xff);
        ps[7] = 0xff;
    } else {
        ps[1] = 0xff; // TOS
        ps[8] = 0xff; // TTL
        ps[10] = 0xff; // header checksum
        ps[11] = 0xff;
    }
    if !v1 {
        ps[hl + 6] = 0xff; // UDP checksum
        ps[hl + 7] = 0xff;
    }
    ps[hl + udp + 4] = 0xff; // BTH resv8a
    crc.update(&ps[..masked_len]);
    crc.update(&ip[masked_len..]);
    crc.finalize()
}

/// True if the RoCE datagram `ip` (IPv4 or IPv6 header, or RoCE v1's GRH, through ICRC)
/// carries a correct ICRC.
#[must_use]
pub fn icrc_ok(ip: &[u8]) -> bool {
    let (hl, udp) = match (ip.first().map(|b| b >> 4), ip.get(6)) {
        (Some(6), Some(&IB_NEXT_HEADER)) => (IPV6_HEADER_LEN, 0),
        (Some(6), _) => (IPV6_HEADER_LEN, UDP_HEADER_LEN),
        _ => (IPV4_HEADER_LEN, UDP_HEADER_LEN),
    };
    if ip.len() < hl + udp + BTH_LEN + ICRC_LEN {
        return false;
    }
    let (body, icrc) = ip.split_at(ip.len() - ICRC_LEN);
    compute_icrc(body) == u32::from_le_bytes([icrc[0], icrc[1], icrc[2], icrc[3]])
}
