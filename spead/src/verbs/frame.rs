//! Ethernet/IPv4/UDP framing for the raw verbs transports: prebuilt headers for sending,
//! and the receive-side checks spead2 applies (IPv4 only; no VLAN tag, IP options or
//! fragments), each rejection a counted cause.

use std::net::{Ipv4Addr, SocketAddrV4};

/// Bytes of Ethernet, IPv4 (no options) and UDP headers in front of a SPEAD packet.
pub const HEADERS: usize = 14 + 20 + 8;

/// Why a received frame was not a SPEAD datagram for us.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FrameDrop {
    /// Shorter than its headers say, or than the headers themselves.
    Truncated,
    /// An 802.1Q VLAN tag (spead2 does not accept tagged frames).
    Vlan,
    /// Not IPv4.
    NotIpv4,
    /// IPv4 with options (IHL > 5).
    IpOptions,
    /// An IPv4 fragment.
    Fragment,
    /// IPv4 header checksum wrong.
    IpChecksum,
    /// Not UDP.
    NotUdp,
    /// UDP to an address or port this receiver does not listen on.
    WrongEndpoint,
    /// The NIC found the IPv4 header or the UDP checksum wrong (IBV_WC_IP_CSUM_OK unset,
    /// on a device that verifies them).
    Checksum,
}

impl FrameDrop {
    /// Every cause, for reports.
    pub const ALL: [FrameDrop; 9] = [
        FrameDrop::Truncated,
        FrameDrop::Vlan,
        FrameDrop::NotIpv4,
        FrameDrop::IpOptions,
        FrameDrop::Fragment,
        FrameDrop::IpChecksum,
        FrameDrop::NotUdp,
        FrameDrop::WrongEndpoint,
        FrameDrop::Checksum,
    ];

    /// A short name (`snake_case`) for counters and JSON.
    pub fn name(self) -> &'static str {
        match self {
            FrameDrop::Truncated => "truncated",
            FrameDrop::Vlan => "vlan",
            FrameDrop::NotIpv4 => "not_ipv4",
            FrameDrop::IpOptions => "ip_options",
            FrameDrop::Fragment => "fragment",
            FrameDrop::IpChecksum => "ip_checksum",
            FrameDrop::NotUdp => "not_udp",
            FrameDrop::WrongEndpoint => "wrong_endpoint",
            FrameDrop::Checksum => "checksum",
        }
    }
}

/// A parsed UDP datagram inside an Ethernet frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Datagram<'a> {
    /// Source address and port.
    pub src: SocketAddrV4,
    /// Destination address and port.
    pub dst: SocketAddrV4,
    /// The UDP payload.
    pub payload: &'a [u8],
}

/// The internet checksum (RFC 1071) of `data`.
pub fn checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [b] = chunks.remainder() {
        sum += u32::from(*b) << 8;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Parses an Ethernet frame as spead2's ibverbs reader does.
///
/// # Errors
/// The [`FrameDrop`] cause.
pub fn parse(frame: &[u8]) -> Result<Datagram<'_>, FrameDrop> {
    if frame.len() < 14 {
        return Err(FrameDrop::Truncated);
    }
    match u16::from_be_bytes([frame[12], frame[13]]) {
        0x0800 => {}
        0x8100 | 0x88a8 => return Err(FrameDrop::Vlan),
        _ => return Err(FrameDrop::NotIpv4),
    }
    let ip = &frame[14..];
    if ip.len() < 20 {
        return Err(FrameDrop::Truncated);
    }
    if ip[0] >> 4 != 4 {
        return Err(FrameDrop::NotIpv4);
    }
    if ip[0] & 0x0f != 5 {
        return Err(FrameDrop::IpOptions);
    }
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    if total < 28 || total > ip.len() {
        return Err(FrameDrop::Truncated);
    }
    let frag = u16::from_be_bytes([ip[6], ip[7]]);
    if frag & 0x3fff != 0 {
        return Err(FrameDrop::Fragment);
    }
    if checksum(&ip[..20]) != 0 {
        return Err(FrameDrop::IpChecksum);
    }
    if ip[9] != 17 {
        return Err(FrameDrop::NotUdp);
    }
    let udp = &ip[20..total];
    let udp_len = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
    if udp_len < 8 || udp_len > udp.len() {
        return Err(FrameDrop::Truncated);
    }
    let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
    let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
    Ok(Datagram {
        src: SocketAddrV4::new(src, u16::from_be_bytes([udp[0], udp[1]])),
        dst: SocketAddrV4::new(dst, u16::from_be_bytes([udp[2], udp[3]])),
        payload: &udp[8..udp_len],
    })
}

/// Prebuilt Ethernet/IPv4/UDP headers for one destination; each packet only patches the
/// lengths, the IP identification and (unless offloaded) the IP checksum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderTemplate {
    bytes: [u8; HEADERS],
    ip_id: u16,
}

impl HeaderTemplate {
    /// Headers from `src_mac`/`src` to `dst_mac`/`dst` with `ttl`. DF is set, as spead2
    /// does; the UDP checksum is 0 (optional in IPv4).
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
        b[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        let ip = &mut b[14..34];
        ip[0] = 0x45;
        ip[6] = 0x40; // DF
        ip[8] = ttl;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&src.ip().octets());
        ip[16..20].copy_from_slice(&dst.ip().octets());
        let udp = &mut b[34..42];
        udp[0..2].copy_from_slice(&src.port().to_be_bytes());
        udp[2..4].copy_from_slice(&dst.port().to_be_bytes());
        HeaderTemplate { bytes: b, ip_id: 0 }
    }

    /// Writes the headers for a `payload_len`-byte datagram into `out[..HEADERS]`. With
    /// `offload_csum` the IP checksum is left 0 for the NIC (send flag IP_CSUM).
    ///
    /// # Panics
    /// When `out` is shorter than [`HEADERS`] or the datagram exceeds 65507 bytes.
    pub fn write(&mut self, out: &mut [u8], payload_len: usize, offload_csum: bool) {
        assert!(payload_len <= 65_507, "UDP payload of {payload_len} bytes");
        out[..HEADERS].copy_from_slice(&self.bytes);
        let ip_total = (20 + 8 + payload_len) as u16;
        out[16..18].copy_from_slice(&ip_total.to_be_bytes());
        out[18..20].copy_from_slice(&self.ip_id.to_be_bytes());
        self.ip_id = self.ip_id.wrapping_add(1);
        if !offload_csum {
            let c = checksum(&out[14..34]);
            out[24..26].copy_from_slice(&c.to_be_bytes());
        }
        out[38..40].copy_from_slice(&((8 + payload_len) as u16).to_be_bytes());
    }
}

/// A whole Ethernet/IPv4/UDP frame around `payload` (IP checksum filled, UDP checksum
/// 0), as a raw sender would send it: for captures and replays that rebuild frames.
///
/// # Panics
/// When `payload` exceeds 65507 bytes.
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

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(payload: &[u8]) -> Vec<u8> {
        let mut t = HeaderTemplate::new(
            [2, 0, 10, 0, 0, 1],
            SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 9000),
            [1, 0, 0x5e, 10, 0, 1],
            SocketAddrV4::new(Ipv4Addr::new(239, 10, 0, 1), 7148),
            4,
        );
        let mut f = vec![0; HEADERS + payload.len()];
        t.write(&mut f, payload.len(), false);
        f[HEADERS..].copy_from_slice(payload);
        f
    }

    #[test]
    fn udp_frame_is_what_the_template_writes() {
        let f = udp_frame(
            [2, 0, 10, 0, 0, 1],
            SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 9000),
            [1, 0, 0x5e, 10, 0, 1],
            SocketAddrV4::new(Ipv4Addr::new(239, 10, 0, 1), 7148),
            4,
            b"spead!",
        );
        assert_eq!(f, frame(b"spead!"));
    }

    #[test]
    fn built_frames_parse_back() {
        let f = frame(b"spead!");
        let d = parse(&f).unwrap();
        assert_eq!(d.payload, b"spead!");
        assert_eq!(d.dst, SocketAddrV4::new(Ipv4Addr::new(239, 10, 0, 1), 7148));
        assert_eq!(d.src.port(), 9000);
        assert_eq!(checksum(&f[14..34]), 0, "the IP checksum is valid");
        assert_eq!(f[22], 4, "TTL");
    }

    #[test]
    fn each_rejection_has_its_cause() {
        let good = frame(b"x");
        let mut f = good.clone();
        f[12..14].copy_from_slice(&0x8100u16.to_be_bytes());
        assert_eq!(parse(&f), Err(FrameDrop::Vlan));
        f[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
        assert_eq!(parse(&f), Err(FrameDrop::NotIpv4));
        let mut f = good.clone();
        f[14] = 0x46;
        assert_eq!(parse(&f), Err(FrameDrop::IpOptions));
        let mut f = good.clone();
        f[20] = 0x20; // MF
        assert_eq!(parse(&f), Err(FrameDrop::Fragment));
        let mut f = good.clone();
        f[23] = 6;
        assert_eq!(parse(&f), Err(FrameDrop::IpChecksum));
        let mut f = good.clone();
        f[23] = 6;
        f[24..26].copy_from_slice(&[0, 0]);
        let c = checksum(&f[14..34]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
        assert_eq!(parse(&f), Err(FrameDrop::NotUdp));
        assert_eq!(parse(&good[..30]), Err(FrameDrop::Truncated));
        assert_eq!(parse(&good[..good.len() - 1]), Err(FrameDrop::Truncated));
        assert_eq!(parse(&[]), Err(FrameDrop::Truncated));
    }
}
