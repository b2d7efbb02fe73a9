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

/// Parses an Ethernet frame as spead2's ibverbs reader does.
///
/// # Errors
/// The [`FrameDrop`] cause.
pub fn parse(frame: &[u8]) -> Result<Datagram<'_>, FrameDrop> {
    if frame.len() < ETH_HEADER_LEN {
        return Err(FrameDrop::Truncated);
    }
    match u16::from_be_bytes([frame[12], frame[13]]) {
        ETHERTYPE_IPV4 => {}
        0x8100 | 0x88a8 => return Err(FrameDrop::Vlan),
        _ => return Err(FrameDrop::NotIpv4),
    }
    // spead2 refuses options before it looks further.
    if let Some(&first) = frame.get(ETH_HEADER_LEN) {
        if first >> 4 == 4 && first & 0x0f != 5 && frame.len() >= ETH_HEADER_LEN + 20 {
            return Err(FrameDrop::IpOptions);
        }
    }
    let l = locate_udp(frame, ETH_HEADER_LEN, true).map_err(|cause| match cause {
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
        f[14] = 0x65;
        assert_eq!(parse(&f), Err(FrameDrop::NotIpv4));
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
        let mut f = good.clone();
        f[38..40].copy_from_slice(&4u16.to_be_bytes());
        assert_eq!(parse(&f), Err(FrameDrop::Truncated), "UDP length below 8");
        assert_eq!(parse(&good[..30]), Err(FrameDrop::Truncated));
        assert_eq!(parse(&good[..good.len() - 1]), Err(FrameDrop::Truncated));
        assert_eq!(parse(&[]), Err(FrameDrop::Truncated));
    }
}
