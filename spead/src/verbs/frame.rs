//! Ethernet/IPv4/UDP framing for the raw verbs transports: `netwire`'s prebuilt headers
//! for sending, and on receive the checks spead2 applies (IPv4 only; no VLAN tag, IP
//! options or fragments) on top of `netwire`'s UDP locator, each rejection a counted
//! cause.

use std::net::SocketAddrV4;

use netwire::eth::{ETHERTYPE_IPV4, ETH_HEADER_LEN};
use netwire::raw::{locate_udp, DropCause};

pub use netwire::checksum::internet_checksum as checksum;
pub use netwire::raw::{udp_frame, HeaderTemplate, HEADERS};

/// Why a received frame was not a SPEAD datagram for us.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FrameDrop {
    /// Shorter than its headers say, or than the headers themselves.
    Truncated,
    /// An 802.1Q VLAN tag (spead2 does not accept tagged frames).
    Vlan,
    /// Not IPv4.
    NotIpv4,
    /// An IPv4 fragment.
    Fragment,
    /// IPv4 header checksum wrong (checked only with
    /// [`super::IbvConfig::verify_checksums`]).
    IpChecksum,
    /// Not UDP.
    NotUdp,
    /// UDP to an address or port this receiver does not listen on.
    WrongEndpoint,
    /// The NIC found the IPv4 header or the UDP checksum wrong (IBV_WC_IP_CSUM_OK unset,
    /// on a device that verifies them; only with [`super::IbvConfig::verify_checksums`]).
    Checksum,
}

impl FrameDrop {
    /// Every cause, for reports.
    pub const ALL: [FrameDrop; 8] = [
        FrameDrop::Truncated,
        FrameDrop::Vlan,
        FrameDrop::NotIpv4,
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

/// Parses an Ethernet frame as spead2's ibverbs reader does (`udp_from_ethernet`): the
/// UDP payload is found past any IPv4 options; the UDP checksum is never looked at, and
/// the IPv4 header checksum only when `verify_ip_checksum` is set.
///
/// # Errors
/// The [`FrameDrop`] cause.
pub fn parse(frame: &[u8], verify_ip_checksum: bool) -> Result<Datagram<'_>, FrameDrop> {
    if frame.len() < ETH_HEADER_LEN {
        return Err(FrameDrop::Truncated);
    }
    match u16::from_be_bytes([frame[12], frame[13]]) {
        ETHERTYPE_IPV4 => {}
        0x8100 | 0x88a8 => return Err(FrameDrop::Vlan),
        _ => return Err(FrameDrop::NotIpv4),
    }
    let l = locate_udp(frame, ETH_HEADER_LEN, verify_ip_checksum).map_err(|cause| match cause {
        DropCause::NotIpv4 | DropCause::UnsupportedLinkType => FrameDrop::NotIpv4,
        DropCause::Fragment => FrameDrop::Fragment,
        DropCause::BadChecksum => FrameDrop::IpChecksum,
        DropCause::NotUdp => FrameDrop::NotUdp,
        DropCause::Truncated | DropCause::BadIpHeader | DropCause::BadUdpLength => {
            FrameDrop::Truncated
        }
    })?;
    Ok(Datagram {
        src: l.src,
        dst: l.dst,
        payload: &frame[l.payload],
    })
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    fn frame(payload: &[u8]) -> Vec<u8> {
        udp_frame(
            [2, 0, 10, 0, 0, 1],
            SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 9000),
            [1, 0, 0x5e, 10, 0, 1],
            SocketAddrV4::new(Ipv4Addr::new(239, 10, 0, 1), 7148),
            4,
            payload,
        )
    }

    #[test]
    fn built_frames_parse_back() {
        let f = frame(b"spead!");
        let d = parse(&f, true).unwrap();
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
        assert_eq!(parse(&f, true), Err(FrameDrop::Vlan));
        f[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
        assert_eq!(parse(&f, true), Err(FrameDrop::NotIpv4));
        let mut f = good.clone();
        f[14] = 0x44;
        assert_eq!(parse(&f, true), Err(FrameDrop::Truncated), "IHL below 5");
        let mut f = good.clone();
        f[14] = 0x65;
        assert_eq!(parse(&f, true), Err(FrameDrop::NotIpv4));
        let mut f = good.clone();
        f[20] = 0x20; // MF
        assert_eq!(parse(&f, true), Err(FrameDrop::Fragment));
        let mut f = good.clone();
        f[23] = 6;
        assert_eq!(parse(&f, true), Err(FrameDrop::IpChecksum));
        assert_eq!(
            parse(&f, false),
            Err(FrameDrop::NotUdp),
            "spead2 checks no IP checksum"
        );
        let mut f = good.clone();
        f[23] = 6;
        f[24..26].copy_from_slice(&[0, 0]);
        let c = checksum(&f[14..34]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
        assert_eq!(parse(&f, true), Err(FrameDrop::NotUdp));
        let mut f = good.clone();
        f[38..40].copy_from_slice(&4u16.to_be_bytes());
        assert_eq!(
            parse(&f, true),
            Err(FrameDrop::Truncated),
            "UDP length below 8"
        );
        assert_eq!(parse(&good[..30], true), Err(FrameDrop::Truncated));
        assert_eq!(
            parse(&good[..good.len() - 1], true),
            Err(FrameDrop::Truncated)
        );
        assert_eq!(parse(&[], true), Err(FrameDrop::Truncated));
    }

    /// spead2's `ipv4_packet::payload_udp` skips `4 * IHL` bytes: a frame with options is
    /// a datagram like any other; and no UDP checksum (wrong or zero) drops one.
    #[test]
    fn options_are_skipped_and_udp_checksums_ignored() {
        let good = frame(b"spead!");
        let mut f = good.clone();
        f.splice(34..34, [0x94, 4, 0, 0, 1, 1, 1, 0]); // router alert, NOPs, EOL
        f[14] = 0x47;
        let total = u16::from_be_bytes([f[16], f[17]]) + 8;
        f[16..18].copy_from_slice(&total.to_be_bytes());
        f[24..26].copy_from_slice(&[0, 0]);
        let c = checksum(&f[14..42]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
        for verify in [false, true] {
            let d = parse(&f, verify).unwrap();
            assert_eq!(d.payload, b"spead!");
            assert_eq!(d.dst.port(), 7148);
        }
        for udp_checksum in [[0u8, 0], [0xde, 0xad]] {
            let mut g = good.clone();
            g[40..42].copy_from_slice(&udp_checksum);
            assert_eq!(parse(&g, true).unwrap().payload, b"spead!");
        }
    }
}
