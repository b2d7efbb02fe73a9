//! From a captured frame's link layer to its IPv4 packet: the UDP datagram in it (what
//! a SPEAD pcap source reads), or an Ethernet frame around it (what a replay into the
//! simulated fabric injects).

use std::net::{Ipv4Addr, SocketAddrV4};
use std::ops::Range;

use crate::eth::{EthHeader, Mac, BROADCAST, ETHERTYPE_IPV4};
use crate::raw::{locate_udp, DropCause};

/// Link types (LINKTYPE_* values, as written in capture files).
pub mod link_type {
    /// BSD loopback: a 4-byte address family in the writer's byte order.
    pub const NULL: u32 = 0;
    /// Ethernet (DLT_EN10MB), with any number of 802.1Q / 802.1ad tags.
    pub const ETHERNET: u32 = 1;
    /// Raw IP as some BSDs number DLT_RAW in files.
    pub const RAW_BSD_12: u32 = 12;
    /// Raw IP as OpenBSD numbers DLT_RAW in files.
    pub const RAW_BSD_14: u32 = 14;
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

const VLAN_TPIDS: [u16; 3] = [0x8100, 0x88a8, 0x9100];
const AF_INET: u32 = 2;
/// Linux ARPHRD_ETHER: the cooked header's address is a MAC.
const ARPHRD_ETHER: u16 = 1;

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

/// [`parse_frame`] returning where the payload is rather than borrowing it.
///
/// # Errors
/// As [`parse_frame`].
pub fn locate(
    link_type: u32,
    frame: &[u8],
    verify_ip_checksum: bool,
) -> Result<(SocketAddrV4, SocketAddrV4, Range<usize>), DropCause> {
    let l = locate_udp(frame, ipv4_start(link_type, frame)?, verify_ip_checksum)?;
    Ok((l.src, l.dst, l.payload))
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

/// Where the IPv4 packet starts in a frame of `link_type`.
fn ipv4_start(link_type: u32, frame: &[u8]) -> Result<usize, DropCause> {
    Ok(match link_type {
        link_type::ETHERNET => after_ethertype(frame, 12, 14)?,
        link_type::LINUX_SLL => after_ethertype(frame, 14, 16)?,
        link_type::LINUX_SLL2 => after_ethertype(frame, 0, 20)?,
        link_type::RAW | link_type::RAW_BSD_12 | link_type::RAW_BSD_14 | link_type::IPV4 => 0,
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
    })
}

/// Follows the EtherType at `at` through any VLAN tags (which start at `header_end`)
/// to the start of an IPv4 packet.
fn after_ethertype(frame: &[u8], at: usize, header_end: usize) -> Result<usize, DropCause> {
    if frame.len() < header_end {
        return Err(DropCause::Truncated);
    }
    let mut ethertype = be16(frame, at).ok_or(DropCause::Truncated)?;
    let mut pos = header_end;
    while VLAN_TPIDS.contains(&ethertype) {
        // A tag: 2 bytes of TCI, then the next EtherType.
        ethertype = be16(frame, pos + 2).ok_or(DropCause::Truncated)?;
        pos += 4;
    }
    if ethertype != ETHERTYPE_IPV4 {
        return Err(DropCause::NotIpv4);
    }
    Ok(pos)
}

/// What a record turns into on the way into a simulated fabric.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Converted {
    /// An Ethernet frame ready to inject.
    Frame(Vec<u8>),
    /// A record that carries no IPv4 (for example IPv6 or ARP in a cooked or raw
    /// capture): skipped and counted.
    Skipped(&'static str),
}

/// The length of the link-layer header of `link_type`, for messages.
fn link_header_name(link_type: u32) -> &'static str {
    match link_type {
        link_type::LINUX_SLL => "16-byte SLL header",
        link_type::LINUX_SLL2 => "20-byte SLL2 header",
        link_type::NULL | link_type::LOOP => "4-byte loopback header",
        _ => "link-layer header",
    }
}

/// Turns one record (`data`, of `orig_len` bytes on the wire) of `link_type` into an
/// Ethernet frame. Ethernet records are taken as they are. Cooked and raw-IP records
/// have no (or only a source) link-layer address: the source MAC is taken from the
/// record when it has one (Linux SLL and SLL2 with an Ethernet address), else `src_mac`;
/// the destination MAC is the group MAC for IPv4 multicast, broadcast for the limited
/// broadcast address, and otherwise `resolve(dst ip)` (a fabric's address table,
/// standing in for ARP). VLAN tags of cooked records are dropped.
///
/// # Errors
/// A one-line reason when the record is too short for its link-layer header, truncated
/// (captured with a short snap length), not IP at all, or of a link type this function
/// does not decode.
pub fn to_ethernet(
    link_type: u32,
    data: &[u8],
    orig_len: u32,
    src_mac: Mac,
    resolve: &dyn Fn(Ipv4Addr) -> Option<Mac>,
) -> Result<Converted, String> {
    if (orig_len as usize) > data.len() {
        return Err(format!(
            "truncated by the snap length ({} of {orig_len} bytes captured)",
            data.len()
        ));
    }
    if link_type == link_type::ETHERNET {
        EthHeader::parse(data).map_err(|e| e.to_string())?;
        return Ok(Converted::Frame(data.to_vec()));
    }
    let start = match ipv4_start(link_type, data) {
        Ok(start) => start,
        Err(DropCause::NotIpv4) => return Ok(Converted::Skipped("not IPv4")),
        Err(DropCause::UnsupportedLinkType) => {
            return Err(format!("unsupported link type {link_type}"))
        }
        Err(_) => {
            return Err(format!(
                "{} bytes, shorter than the {}",
                data.len(),
                link_header_name(link_type)
            ))
        }
    };
    let src = match link_type {
        link_type::LINUX_SLL => (be16(data, 2) == Some(ARPHRD_ETHER) && be16(data, 4) == Some(6))
            .then(|| Mac([data[6], data[7], data[8], data[9], data[10], data[11]])),
        link_type::LINUX_SLL2 => (be16(data, 8) == Some(ARPHRD_ETHER) && data[11] == 6)
            .then(|| Mac([data[12], data[13], data[14], data[15], data[16], data[17]])),
        _ => None,
    };
    let payload = &data[start..];
    match payload.first().map(|b| b >> 4) {
        Some(4) => {}
        Some(6) => return Ok(Converted::Skipped("IPv6")),
        _ => return Err("IP record is empty or not IP".into()),
    }
    if payload.len() < 20 {
        return Err(format!(
            "IPv4 packet of {} bytes, shorter than its header",
            payload.len()
        ));
    }
    let dst_ip = Ipv4Addr::new(payload[16], payload[17], payload[18], payload[19]);
    let dst = if dst_ip.is_multicast() {
        Mac::for_ipv4_multicast(dst_ip)
    } else if dst_ip.is_broadcast() {
        BROADCAST
    } else {
        resolve(dst_ip).unwrap_or_default()
    };
    let mut out = Vec::with_capacity(14 + payload.len());
    EthHeader::write_untagged(dst, src.unwrap_or(src_mac), ETHERTYPE_IPV4, &mut out);
    out.extend_from_slice(payload);
    Ok(Converted::Frame(out))
}
