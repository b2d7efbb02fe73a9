//! IPv6 headers (RFC 8200), as RoCEv2 over IPv6 carries them: the fixed 40-byte header,
//! no extension headers.

use crate::FrameError;
use std::net::Ipv6Addr;

/// Length of the fixed IPv6 header.
pub const IPV6_HEADER_LEN: usize = 40;

/// A parsed IPv6 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Header {
    /// Traffic class (DSCP and ECN).
    pub traffic_class: u8,
    /// Flow label (20 bits).
    pub flow_label: u32,
    /// Length of what follows the header.
    pub payload_len: u16,
    /// The next header's protocol number (17: UDP).
    pub next_header: u8,
    /// Hop limit.
    pub hop_limit: u8,
    /// Source address.
    pub src: Ipv6Addr,
    /// Destination address.
    pub dst: Ipv6Addr,
}

impl Ipv6Header {
    /// Parses the header at the start of `data` (the bytes after the Ethernet header).
    ///
    /// # Errors
    /// [`FrameError::Truncated`] or [`FrameError::Malformed`] if the header is short, not
    /// version 6, or claims a payload beyond the bytes present.
    pub fn parse(data: &[u8]) -> Result<Self, FrameError> {
        if data.len() < IPV6_HEADER_LEN {
            return Err(FrameError::Truncated {
                layer: "ipv6",
                need: IPV6_HEADER_LEN,
                have: data.len(),
            });
        }
        if data[0] >> 4 != 6 {
            return Err(FrameError::Malformed("ipv6: version is not 6"));
        }
        let payload_len = u16::from_be_bytes([data[4], data[5]]);
        if IPV6_HEADER_LEN + usize::from(payload_len) > data.len() {
            return Err(FrameError::Malformed(
                "ipv6: payload length disagrees with the frame",
            ));
        }
        let word = u32::from_be_bytes([data[0], data[1], data[2], data[3]]);
        let mut src = [0u8; 16];
        let mut dst = [0u8; 16];
        src.copy_from_slice(&data[8..24]);
        dst.copy_from_slice(&data[24..40]);
        Ok(Ipv6Header {
            traffic_class: (word >> 20) as u8,
            flow_label: word & 0x000f_ffff,
            payload_len,
            next_header: data[6],
            hop_limit: data[7],
            src: Ipv6Addr::from(src),
            dst: Ipv6Addr::from(dst),
        })
    }

    /// Appends the 40-byte header to `out`. A flow label wider than 20 bits is cut to 20.
    pub fn write(&self, out: &mut Vec<u8>) {
        let word =
            (6u32 << 28) | (u32::from(self.traffic_class) << 20) | (self.flow_label & 0xf_ffff);
        out.extend_from_slice(&word.to_be_bytes());
        out.extend_from_slice(&self.payload_len.to_be_bytes());
        out.push(self.next_header);
        out.push(self.hop_limit);
        out.extend_from_slice(&self.src.octets());
        out.extend_from_slice(&self.dst.octets());
    }
}

/// The MAC address a link-local IPv6 address was formed from by modified EUI-64 (RFC 4291,
/// appendix A): `fe80::` with the MAC's halves around `ff:fe` and its universal/local bit
/// flipped, as a RoCE port's link-local GID is. `None` for any other address.
#[must_use]
pub fn link_local_mac(addr: &Ipv6Addr) -> Option<[u8; 6]> {
    let o = addr.octets();
    if o[..8] != [0xfe, 0x80, 0, 0, 0, 0, 0, 0] || o[11] != 0xff || o[12] != 0xfe {
        return None;
    }
    Some([o[8] ^ 2, o[9], o[10], o[13], o[14], o[15]])
}

/// Whether `addr` is a link-local unicast address (fe80::/10, RFC 4291 section 2.5.6).
#[must_use]
pub fn is_link_local(addr: &Ipv6Addr) -> bool {
    addr.segments()[0] & 0xffc0 == 0xfe80
}

/// The modified EUI-64 interface identifier of `mac` (RFC 4291, appendix A): its halves
/// around `ff:fe`, the universal/local bit flipped. A RoCE port's link-local GID ends
/// with it, and so does its node GUID.
#[must_use]
pub fn eui64(mac: [u8; 6]) -> [u8; 8] {
    [
        mac[0] ^ 2,
        mac[1],
        mac[2],
        0xff,
        0xfe,
        mac[3],
        mac[4],
        mac[5],
    ]
}

/// The link-local IPv6 address formed from `mac` by modified EUI-64 (see
/// [`link_local_mac`]).
#[must_use]
pub fn link_local_of_mac(mac: [u8; 6]) -> Ipv6Addr {
    let mut o = [0u8; 16];
    o[..2].copy_from_slice(&[0xfe, 0x80]);
    o[8..].copy_from_slice(&eui64(mac));
    Ipv6Addr::from(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_written_parses_back() {
        let h = Ipv6Header {
            traffic_class: 0xa5,
            flow_label: 0x1_2345,
            payload_len: 3,
            next_header: 17,
            hop_limit: 64,
            src: "fe80::1".parse().unwrap(),
            dst: "fe80::2".parse().unwrap(),
        };
        let mut b = Vec::new();
        h.write(&mut b);
        assert_eq!(b.len(), IPV6_HEADER_LEN);
        assert_eq!(b[..4], [0x6a, 0x51, 0x23, 0x45]);
        b.extend_from_slice(&[1, 2, 3]);
        assert_eq!(Ipv6Header::parse(&b), Ok(h));
    }

    #[test]
    fn bad_headers_are_refused_with_the_reason() {
        let mut b = Vec::new();
        Ipv6Header {
            traffic_class: 0,
            flow_label: 0,
            payload_len: 8,
            next_header: 17,
            hop_limit: 1,
            src: Ipv6Addr::LOCALHOST,
            dst: Ipv6Addr::LOCALHOST,
        }
        .write(&mut b);
        assert_eq!(
            Ipv6Header::parse(&b[..39]).unwrap_err().to_string(),
            "ipv6 header truncated: need 40 bytes, have 39"
        );
        assert_eq!(
            Ipv6Header::parse(&b).unwrap_err().to_string(),
            "malformed frame: ipv6: payload length disagrees with the frame"
        );
        b.extend_from_slice(&[0; 8]);
        b[0] = 0x45;
        assert_eq!(
            Ipv6Header::parse(&b).unwrap_err().to_string(),
            "malformed frame: ipv6: version is not 6"
        );
    }

    #[test]
    fn a_link_local_address_gives_back_its_mac() {
        let mac = [0x5e, 0x13, 0x2d, 0xfe, 0xf2, 0x60];
        let a = link_local_of_mac(mac);
        // GID 0 of rxe0 in one boot of the Soft-RoCE VM (`ibv_devinfo -v`).
        assert_eq!(a, "fe80::5c13:2dff:fefe:f260".parse::<Ipv6Addr>().unwrap());
        assert_eq!(link_local_mac(&a), Some(mac));
        assert_eq!(link_local_mac(&"fe80::1".parse().unwrap()), None);
        assert!(is_link_local(&a) && is_link_local(&"febf::1".parse().unwrap()));
        assert!(!is_link_local(&"fec0::1".parse().unwrap()));
        assert!(!is_link_local(&"::ffff:10.100.0.1".parse().unwrap()));
        assert_eq!(
            link_local_mac(&"2001:db8::5c13:2dff:fefe:f260".parse().unwrap()),
            None
        );
    }
}
