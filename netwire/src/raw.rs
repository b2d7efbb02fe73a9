//! Fixed-offset IPv4/UDP for the hot paths: prebuilt Ethernet/IPv4/UDP headers that
//! each packet only patches (the RAW verbs senders), and one locator of the UDP datagram
//! in an IPv4 packet whose every rejection is a counted cause (the pcap reader and the
//! RAW verbs receivers). Checksums are computed only where asked: the template fills the
//! IPv4 header checksum unless the NIC offloads it, the locator verifies it only when
//! told to, and neither touches the UDP checksum.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::ops::Range;

use crate::checksum::internet_checksum;
use crate::eth::{ETHERTYPE_IPV4, ETH_HEADER_LEN};
use crate::ipv4::{IPV4_HEADER_LEN, PROTO_UDP};
use crate::udp::UDP_HEADER_LEN;

/// Bytes of Ethernet, IPv4 (no options) and UDP headers in front of a UDP payload.
pub const HEADERS: usize = ETH_HEADER_LEN + IPV4_HEADER_LEN + UDP_HEADER_LEN;
/// The largest UDP payload in IPv4 (65535 - 20 - 8).
pub const MAX_UDP_PAYLOAD: usize = 65_507;

/// Prebuilt Ethernet/IPv4/UDP headers for one destination; each packet only patches the
/// lengths, the IP identification and (unless offloaded) the IP checksum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderTemplate {
    bytes: [u8; HEADERS],
    ip_id: u16,
}

impl HeaderTemplate {
    /// Headers from `src_mac`/`src` to `dst_mac`/`dst` with `ttl`, TOS 0 and IP
    /// identification 0 (see [`Self::with_tos`], [`Self::with_ip_id`]). DF is set, as
    /// spead2 does; the UDP checksum is 0 (optional in IPv4).
    #[must_use]
    pub fn new(
        src_mac: [u8; 6],
        src: SocketAddrV4,
        dst_mac: [u8; 6],
        dst: SocketAddrV4,
        ttl: u8,
    ) -> Self {
        let mut b = [0u8; HEADERS];
        b[0..6].copy_from_slice(&dst_mac);
        b[6..12].copy_from_slice(&src_mac);
        b[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
        let ip = &mut b[14..34];
        ip[0] = 0x45;
        ip[6] = 0x40; // DF
        ip[8] = ttl;
        ip[9] = PROTO_UDP;
        ip[12..16].copy_from_slice(&src.ip().octets());
        ip[16..20].copy_from_slice(&dst.ip().octets());
        let udp = &mut b[34..42];
        udp[0..2].copy_from_slice(&src.port().to_be_bytes());
        udp[2..4].copy_from_slice(&dst.port().to_be_bytes());
        HeaderTemplate { bytes: b, ip_id: 0 }
    }

    /// The same headers with DSCP/ECN `tos`.
    #[must_use]
    pub fn with_tos(mut self, tos: u8) -> Self {
        self.bytes[15] = tos;
        self
    }

    /// The same headers with the next packet's IP identification `id`.
    #[must_use]
    pub fn with_ip_id(mut self, id: u16) -> Self {
        self.ip_id = id;
        self
    }

    /// Writes the headers for a `payload_len`-byte datagram into `out[..HEADERS]` and
    /// advances the IP identification. With `offload_csum` the IP checksum is left 0 for
    /// the NIC (send flag IP_CSUM).
    ///
    /// # Panics
    /// When `out` is shorter than [`HEADERS`] or the payload exceeds
    /// [`MAX_UDP_PAYLOAD`].
    pub fn write(&mut self, out: &mut [u8], payload_len: usize, offload_csum: bool) {
        assert!(
            payload_len <= MAX_UDP_PAYLOAD,
            "UDP payload of {payload_len} bytes"
        );
        out[..HEADERS].copy_from_slice(&self.bytes);
        let ip_total = (IPV4_HEADER_LEN + UDP_HEADER_LEN + payload_len) as u16;
        out[16..18].copy_from_slice(&ip_total.to_be_bytes());
        out[18..20].copy_from_slice(&self.ip_id.to_be_bytes());
        self.ip_id = self.ip_id.wrapping_add(1);
        if !offload_csum {
            let c = internet_checksum(&out[14..34]);
            out[24..26].copy_from_slice(&c.to_be_bytes());
        }
        out[38..40].copy_from_slice(&((UDP_HEADER_LEN + payload_len) as u16).to_be_bytes());
    }
}

/// A whole Ethernet/IPv4/UDP frame around `payload` (IP checksum filled, UDP checksum
/// 0), as a raw sender would send it: for captures and replays that rebuild frames.
///
/// # Panics
/// When `payload` exceeds [`MAX_UDP_PAYLOAD`].
#[must_use]
pub fn udp_frame(
    src_mac: [u8; 6],
    src: SocketAddrV4,
    dst_mac: [u8; 6],
    dst: SocketAddrV4,
    ttl: u8,
    payload: &[u8],
) -> Vec<u8> {
    let mut t = HeaderTemplate::new(src_mac, src, dst_mac, dst, ttl);
    let mut f = vec![0; HEADERS + payload.len()];
    t.write(&mut f, payload.len(), false);
    f[HEADERS..].copy_from_slice(payload);
    f
}

/// Why a frame gave no UDP datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropCause {
    /// A link type the reader does not decode.
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
    #[must_use]
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

/// Where the UDP datagram of an IPv4 packet is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpLocation {
    /// Source address and port.
    pub src: SocketAddrV4,
    /// Destination address and port.
    pub dst: SocketAddrV4,
    /// The IPv4 header length (20 without options).
    pub ip_header_len: usize,
    /// The UDP payload's range in the frame.
    pub payload: Range<usize>,
}

/// Finds the UDP datagram of the IPv4 packet at `frame[start..]`. Bytes after the IP
/// packet (Ethernet padding, FCS) are ignored; IP options are skipped. The checks run
/// in this order, the first failing one giving the cause: version, header length, total
/// length, fragment, header checksum (only when `verify_ip_checksum`), protocol, UDP
/// length. The UDP checksum is not checked (captures of sent traffic often carry
/// offloaded, unfilled checksums).
///
/// # Errors
/// The [`DropCause`] when the packet holds no usable UDP datagram.
pub fn locate_udp(
    frame: &[u8],
    start: usize,
    verify_ip_checksum: bool,
) -> Result<UdpLocation, DropCause> {
    let ip = frame.get(start..).ok_or(DropCause::Truncated)?;
    let first = *ip.first().ok_or(DropCause::Truncated)?;
    if first >> 4 != 4 {
        return Err(DropCause::NotIpv4);
    }
    if ip.len() < IPV4_HEADER_LEN {
        return Err(DropCause::Truncated);
    }
    let ihl = usize::from(first & 0x0f) * 4;
    if ihl < IPV4_HEADER_LEN {
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
    if u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0 {
        return Err(DropCause::Fragment);
    }
    if verify_ip_checksum && internet_checksum(&ip[..ihl]) != 0 {
        return Err(DropCause::BadChecksum);
    }
    if ip[9] != PROTO_UDP {
        return Err(DropCause::NotUdp);
    }
    let udp = &ip[ihl..total];
    if udp.len() < UDP_HEADER_LEN {
        return Err(DropCause::Truncated);
    }
    let udp_len = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
    if udp_len < UDP_HEADER_LEN || udp_len > udp.len() {
        return Err(DropCause::BadUdpLength);
    }
    let src_ip = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
    let dst_ip = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
    let at = start + ihl;
    Ok(UdpLocation {
        src: SocketAddrV4::new(src_ip, u16::from_be_bytes([udp[0], udp[1]])),
        dst: SocketAddrV4::new(dst_ip, u16::from_be_bytes([udp[2], udp[3]])),
        ip_header_len: ihl,
        payload: at + UDP_HEADER_LEN..at + udp_len,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 9000);
    const DST: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(239, 10, 0, 1), 7148);
    const SRC_MAC: [u8; 6] = [2, 0, 10, 0, 0, 1];
    const DST_MAC: [u8; 6] = [1, 0, 0x5e, 10, 0, 1];

    #[test]
    fn template_frames_are_what_etherparse_builds() {
        let payload = b"spead!";
        let mut t = HeaderTemplate::new(SRC_MAC, SRC, DST_MAC, DST, 4).with_ip_id(0x1234);
        let mut ours = vec![0; HEADERS + payload.len()];
        t.write(&mut ours, payload.len(), false);
        ours[HEADERS..].copy_from_slice(payload);

        let mut ip = etherparse::Ipv4Header::new(
            (UDP_HEADER_LEN + payload.len()) as u16,
            4,
            etherparse::IpNumber::UDP,
            SRC.ip().octets(),
            DST.ip().octets(),
        )
        .unwrap();
        ip.identification = 0x1234;
        ip.dont_fragment = true;
        ip.header_checksum = ip.calc_header_checksum();
        let mut theirs = Vec::new();
        etherparse::Ethernet2Header {
            source: SRC_MAC,
            destination: DST_MAC,
            ether_type: etherparse::EtherType::IPV4,
        }
        .write(&mut theirs)
        .unwrap();
        ip.write(&mut theirs).unwrap();
        etherparse::UdpHeader {
            source_port: SRC.port(),
            destination_port: DST.port(),
            length: (UDP_HEADER_LEN + payload.len()) as u16,
            checksum: 0,
        }
        .write(&mut theirs)
        .unwrap();
        theirs.extend_from_slice(payload);
        assert_eq!(ours, theirs);

        // The next packet has the next identification and the TOS asked for.
        let mut t = t.with_tos(0xb8);
        t.write(&mut ours, payload.len(), false);
        assert_eq!(u16::from_be_bytes([ours[18], ours[19]]), 0x1235);
        let parsed = etherparse::Ipv4HeaderSlice::from_slice(&ours[14..]).unwrap();
        assert_eq!(parsed.dcp().value(), 0xb8 >> 2);
        assert_eq!(
            parsed.header_checksum(),
            parsed.to_header().calc_header_checksum()
        );
    }

    #[test]
    fn offloaded_checksums_are_left_zero() {
        let mut t = HeaderTemplate::new(SRC_MAC, SRC, DST_MAC, DST, 64);
        let mut f = [0xaa; HEADERS];
        t.write(&mut f, 0, true);
        assert_eq!(&f[24..26], &[0, 0]);
        assert_eq!(&f[40..42], &[0, 0], "UDP checksum none");
    }

    #[test]
    #[should_panic(expected = "UDP payload of 65508 bytes")]
    fn oversized_payloads_are_refused() {
        let mut t = HeaderTemplate::new(SRC_MAC, SRC, DST_MAC, DST, 64);
        t.write(&mut [0; HEADERS], MAX_UDP_PAYLOAD + 1, false);
    }

    #[test]
    fn udp_frame_locates_back() {
        let f = udp_frame(SRC_MAC, SRC, DST_MAC, DST, 4, b"spead!");
        let loc = locate_udp(&f, ETH_HEADER_LEN, true).unwrap();
        assert_eq!(
            loc,
            UdpLocation {
                src: SRC,
                dst: DST,
                ip_header_len: 20,
                payload: HEADERS..HEADERS + 6,
            }
        );
        assert_eq!(&f[loc.payload], b"spead!");
    }

    #[test]
    fn each_rejection_has_its_cause() {
        let good = udp_frame(SRC_MAC, SRC, DST_MAC, DST, 4, b"xyz");
        let at = |f: &[u8], verify| locate_udp(f, ETH_HEADER_LEN, verify).map(|l| l.payload);
        let refill = |f: &mut Vec<u8>| {
            f[24..26].copy_from_slice(&[0, 0]);
            let c = internet_checksum(&f[14..34]);
            f[24..26].copy_from_slice(&c.to_be_bytes());
        };
        let mut v6 = good.clone();
        v6[14] = 0x60;
        assert_eq!(at(&v6, true), Err(DropCause::NotIpv4));
        let mut ihl4 = good.clone();
        ihl4[14] = 0x44;
        assert_eq!(at(&ihl4, true), Err(DropCause::BadIpHeader));
        let mut small_total = good.clone();
        small_total[16..18].copy_from_slice(&19u16.to_be_bytes());
        assert_eq!(at(&small_total, false), Err(DropCause::BadIpHeader));
        let mut mf = good.clone();
        mf[20] = 0x20; // more fragments, checksum stale: the fragment is what counts
        assert_eq!(at(&mf, true), Err(DropCause::Fragment));
        let mut bad = good.clone();
        bad[22] ^= 1; // TTL
        assert_eq!(at(&bad, true), Err(DropCause::BadChecksum));
        assert_eq!(at(&bad, false), Ok(HEADERS..HEADERS + 3));
        let mut tcp = good.clone();
        tcp[23] = 6;
        refill(&mut tcp);
        assert_eq!(at(&tcp, true), Err(DropCause::NotUdp));
        let mut udp_short = good.clone();
        udp_short[38..40].copy_from_slice(&7u16.to_be_bytes());
        assert_eq!(at(&udp_short, true), Err(DropCause::BadUdpLength));
        let mut udp_long = good.clone();
        udp_long[38..40].copy_from_slice(&12u16.to_be_bytes());
        assert_eq!(at(&udp_long, true), Err(DropCause::BadUdpLength));
        for cut in [0, 14, 15, 33, 40, good.len() - 1] {
            assert_eq!(at(&good[..cut], true), Err(DropCause::Truncated), "{cut}");
        }
        // Trailing bytes (padding, FCS) are ignored.
        let mut padded = good.clone();
        padded.extend_from_slice(&[0xee; 20]);
        assert_eq!(at(&padded, true), Ok(HEADERS..HEADERS + 3));
    }
}
