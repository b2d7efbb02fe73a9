//! From a captured frame to its UDP datagram: link layer, IPv4 and UDP headers.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::ops::Range;

/// Link types (LINKTYPE_* values, as written in capture files).
pub mod link_type {
    /// BSD loopback: a 4-byte address family in the writer's byte order.
    pub const NULL: u32 = 0;
    /// Ethernet (DLT_EN10MB), with any number of 802.1Q / 802.1ad tags.
    pub const ETHERNET: u32 = 1;
    /// Raw IP (version from the first nibble).
    pub const RAW: u32 = 101;
    /// OpenBSD loopback: a 4-byte big-endian address family.
    pub const LOOP: u32 = 108;
    /// Linux cooked capture v1 (16-byte header).
    pub const LINUX_SLL: u32 = 113;
    /// Raw IPv4.
    pub const IPV4: u32 = 228;
    /// Linux cooked capture v2 (20-byte header).
    pub const LINUX_SLL2: u32 = 276;
}

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_VLAN: [u16; 3] = [0x8100, 0x88a8, 0x9100];
const IPPROTO_UDP: u8 = 17;
const AF_INET: u32 = 2;

/// Why a frame gave no UDP datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropCause {
    /// A link type this reader does not decode.
    UnsupportedLinkType,
    /// Not IPv4 (IPv6, ARP, LLC, ...).
    NotIpv4,
    /// Captured short of the frame's length, or headers cut short.
    Truncated,
    /// An IPv4 header with an impossible header or total length.
    BadIpHeader,
    /// An IPv4 header whose checksum does not verify.
    BadChecksum,
    /// An IPv4 fragment (more-fragments flag or a fragment offset).
    Fragment,
    /// IPv4 but not UDP.
    NotUdp,
    /// A UDP length shorter than its header or longer than the IP payload.
    BadUdpLength,
}

impl DropCause {
    /// Every cause, in a fixed order.
    pub const ALL: [Self; 8] = [
        Self::UnsupportedLinkType,
        Self::NotIpv4,
        Self::Truncated,
        Self::BadIpHeader,
        Self::BadChecksum,
        Self::Fragment,
        Self::NotUdp,
        Self::BadUdpLength,
    ];

    /// A short snake_case name (for counters).
    pub fn name(self) -> &'static str {
        match self {
            Self::UnsupportedLinkType => "unsupported_link_type",
            Self::NotIpv4 => "not_ipv4",
            Self::Truncated => "truncated",
            Self::BadIpHeader => "bad_ip_header",
            Self::BadChecksum => "bad_ip_checksum",
            Self::Fragment => "fragment",
            Self::NotUdp => "not_udp",
            Self::BadUdpLength => "bad_udp_length",
        }
    }
}

impl std::fmt::Display for DropCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A UDP datagram found in a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpFrame<'a> {
    /// Source address and port.
    pub src: SocketAddrV4,
    /// Destination address and port.
    pub dst: SocketAddrV4,
    /// The UDP payload.
    pub payload: &'a [u8],
}

/// The UDP datagram in `frame`, a frame of link type `link_type` (see [`link_type`]).
/// Ethernet padding and trailers (FCS) after the IP packet are ignored. The UDP
/// checksum is not checked (captures of sent traffic often carry offloaded, unfilled
/// checksums); the IPv4 header checksum is when `verify_ip_checksum` is set.
///
/// # Errors
/// The [`DropCause`] when the frame holds no usable IPv4 UDP datagram.
pub fn parse_frame(
    link_type: u32,
    frame: &[u8],
    verify_ip_checksum: bool,
) -> Result<UdpFrame<'_>, DropCause> {
    let (src, dst, range) = locate(link_type, frame, verify_ip_checksum)?;
    Ok(UdpFrame {
        src,
        dst,
        payload: &frame[range],
    })
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

/// [`parse_frame`] returning where the payload is rather than borrowing it.
pub(crate) fn locate(
    link_type: u32,
    frame: &[u8],
    verify_ip_checksum: bool,
) -> Result<(SocketAddrV4, SocketAddrV4, Range<usize>), DropCause> {
    let ip_start = match link_type {
        link_type::ETHERNET => after_ethertype(frame, 12, 14)?,
        link_type::LINUX_SLL => after_ethertype(frame, 14, 16)?,
        link_type::LINUX_SLL2 => after_ethertype(frame, 0, 20)?,
        link_type::RAW | link_type::IPV4 => 0,
        link_type::NULL | link_type::LOOP => {
            let family = frame.get(..4).ok_or(DropCause::Truncated)?;
            let family = [family[0], family[1], family[2], family[3]];
            let ok = if link_type == link_type::LOOP {
                u32::from_be_bytes(family) == AF_INET
            } else {
                u32::from_le_bytes(family) == AF_INET || u32::from_be_bytes(family) == AF_INET
            };
            if !ok {
                return Err(DropCause::NotIpv4);
            }
            4
        }
        _ => return Err(DropCause::UnsupportedLinkType),
    };
    ipv4_udp(frame, ip_start, verify_ip_checksum)
}

/// Follows the EtherType at `at` through any VLAN tags (which start at `header_end`)
/// to the start of an IPv4 packet.
fn after_ethertype(frame: &[u8], at: usize, header_end: usize) -> Result<usize, DropCause> {
    if frame.len() < header_end {
        return Err(DropCause::Truncated);
    }
    let mut ethertype = be16(frame, at).ok_or(DropCause::Truncated)?;
    let mut pos = header_end;
    while ETHERTYPE_VLAN.contains(&ethertype) {
        // A tag: 2 bytes of TCI, then the next EtherType.
        ethertype = be16(frame, pos + 2).ok_or(DropCause::Truncated)?;
        pos += 4;
    }
    if ethertype != ETHERTYPE_IPV4 {
        return Err(DropCause::NotIpv4);
    }
    Ok(pos)
}

/// The Internet checksum of `header` folds to 0xffff when it verifies.
fn checksum_ok(header: &[u8]) -> bool {
    let mut sum: u32 = header
        .chunks_exact(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum == 0xffff
}

fn ipv4_udp(
    frame: &[u8],
    start: usize,
    verify_ip_checksum: bool,
) -> Result<(SocketAddrV4, SocketAddrV4, Range<usize>), DropCause> {
    let ip = frame.get(start..).ok_or(DropCause::Truncated)?;
    let first = *ip.first().ok_or(DropCause::Truncated)?;
    if first >> 4 != 4 {
        return Err(DropCause::NotIpv4);
    }
    if ip.len() < 20 {
        return Err(DropCause::Truncated);
    }
    let ihl = usize::from(first & 0x0f) * 4;
    if ihl < 20 {
        return Err(DropCause::BadIpHeader);
    }
    if ip.len() < ihl {
        return Err(DropCause::Truncated);
    }
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    if total < ihl {
        return Err(DropCause::BadIpHeader);
    }
    if ip.len() < total {
        return Err(DropCause::Truncated);
    }
    if verify_ip_checksum && !checksum_ok(&ip[..ihl]) {
        return Err(DropCause::BadChecksum);
    }
    let frag = u16::from_be_bytes([ip[6], ip[7]]);
    if frag & 0x3fff != 0 {
        return Err(DropCause::Fragment);
    }
    if ip[9] != IPPROTO_UDP {
        return Err(DropCause::NotUdp);
    }
    let src_ip = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
    let dst_ip = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
    let udp = &ip[ihl..total];
    if udp.len() < 8 {
        return Err(DropCause::Truncated);
    }
    let udp_len = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
    if udp_len < 8 || udp_len > udp.len() {
        return Err(DropCause::BadUdpLength);
    }
    let src = SocketAddrV4::new(src_ip, u16::from_be_bytes([udp[0], udp[1]]));
    let dst = SocketAddrV4::new(dst_ip, u16::from_be_bytes([udp[2], udp[3]]));
    let payload = start + ihl + 8;
    Ok((src, dst, payload..start + ihl + udp_len))
}
