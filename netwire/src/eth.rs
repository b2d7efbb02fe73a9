//! Ethernet II headers (no FCS: pcap files and the fabric carry frames without it).

use crate::FrameError;

/// Length of an Ethernet II header.
pub const ETH_HEADER_LEN: usize = 14;
/// EtherType of IPv4.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// EtherType of IPv6.
pub const ETHERTYPE_IPV6: u16 = 0x86dd;
/// EtherType of RoCE v1 (a GRH, then the IB transport; IBA annex A16).
pub const ETHERTYPE_ROCE_V1: u16 = 0x8915;
/// EtherType of an 802.1Q VLAN tag.
pub const ETHERTYPE_VLAN: u16 = 0x8100;
/// The broadcast address.
pub const BROADCAST: Mac = Mac([0xff; 6]);

/// A 48-bit MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Mac(pub [u8; 6]);

impl Mac {
    /// True for group (multicast and broadcast) addresses: the I/G bit is set.
    #[must_use]
    pub fn is_multicast(self) -> bool {
        self.0[0] & 1 != 0
    }

    /// True for ff:ff:ff:ff:ff:ff.
    #[must_use]
    pub fn is_broadcast(self) -> bool {
        self == BROADCAST
    }

    /// The MAC that an IPv4 multicast group maps to (RFC 1112: 01:00:5e + low 23 bits).
    #[must_use]
    pub fn for_ipv4_multicast(group: std::net::Ipv4Addr) -> Mac {
        let o = group.octets();
        Mac([0x01, 0x00, 0x5e, o[1] & 0x7f, o[2], o[3]])
    }
}

impl std::fmt::Display for Mac {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let m = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        )
    }
}

/// A parsed Ethernet II header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EthHeader {
    /// Destination address.
    pub dst: Mac,
    /// Source address.
    pub src: Mac,
    /// EtherType of the payload (after any VLAN tag).
    pub ethertype: u16,
    /// The 802.1Q VLAN id, if the frame carried a tag.
    pub vlan: Option<u16>,
    /// Offset of the payload in the frame (14, or 18 with a VLAN tag).
    pub payload_offset: usize,
}

impl EthHeader {
    /// Parses the header at the start of `frame`.
    ///
    /// # Errors
    /// [`FrameError::Truncated`] if the frame is shorter than its header.
    pub fn parse(frame: &[u8]) -> Result<Self, FrameError> {
        if frame.len() < ETH_HEADER_LEN {
            return Err(FrameError::Truncated {
                layer: "ethernet",
                need: ETH_HEADER_LEN,
                have: frame.len(),
            });
        }
        let mut dst = [0u8; 6];
        let mut src = [0u8; 6];
        dst.copy_from_slice(&frame[0..6]);
        src.copy_from_slice(&frame[6..12]);
        let ethertype = u16::from_be_bytes([frame[12], frame[13]]);
        if ethertype == ETHERTYPE_VLAN {
            if frame.len() < ETH_HEADER_LEN + 4 {
                return Err(FrameError::Truncated {
                    layer: "802.1Q",
                    need: 18,
                    have: frame.len(),
                });
            }
            let tci = u16::from_be_bytes([frame[14], frame[15]]);
            return Ok(EthHeader {
                dst: Mac(dst),
                src: Mac(src),
                ethertype: u16::from_be_bytes([frame[16], frame[17]]),
                vlan: Some(tci & 0x0fff),
                payload_offset: 18,
            });
        }
        Ok(EthHeader {
            dst: Mac(dst),
            src: Mac(src),
            ethertype,
            vlan: None,
            payload_offset: 14,
        })
    }

    /// Appends an untagged header to `out`.
    pub fn write_untagged(dst: Mac, src: Mac, ethertype: u16, out: &mut Vec<u8>) {
        out.extend_from_slice(&dst.0);
        out.extend_from_slice(&src.0);
        out.extend_from_slice(&ethertype.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn untagged_header_round_trip_and_etherparse_agrees() {
        let (dst, src) = (Mac([1, 0, 0x5e, 10, 0, 1]), Mac([2, 0, 10, 0, 0, 1]));
        let mut f = Vec::new();
        EthHeader::write_untagged(dst, src, ETHERTYPE_IPV4, &mut f);
        assert_eq!(
            EthHeader::parse(&f),
            Ok(EthHeader {
                dst,
                src,
                ethertype: ETHERTYPE_IPV4,
                vlan: None,
                payload_offset: ETH_HEADER_LEN,
            })
        );
        let theirs = etherparse::Ethernet2HeaderSlice::from_slice(&f).unwrap();
        assert_eq!(theirs.destination(), dst.0);
        assert_eq!(theirs.source(), src.0);
        assert_eq!(theirs.ether_type(), etherparse::EtherType::IPV4);
    }

    #[test]
    fn a_vlan_tag_is_stepped_over() {
        let mut f = vec![0xff; 12];
        f.extend_from_slice(&[0x81, 0x00, 0x20, 0x64, 0x08, 0x00]);
        let h = EthHeader::parse(&f).unwrap();
        assert_eq!(
            (h.vlan, h.ethertype, h.payload_offset),
            (Some(100), 0x0800, 18)
        );
        assert!(h.dst.is_broadcast() && h.dst.is_multicast());
        assert_eq!(
            EthHeader::parse(&f[..16]),
            Err(FrameError::Truncated {
                layer: "802.1Q",
                need: 18,
                have: 16
            })
        );
        assert_eq!(
            EthHeader::parse(&f[..13]),
            Err(FrameError::Truncated {
                layer: "ethernet",
                need: 14,
                have: 13
            })
        );
    }

    #[test]
    fn multicast_macs_and_display() {
        let m = Mac::for_ipv4_multicast(Ipv4Addr::new(239, 138, 0, 1));
        assert_eq!(
            m,
            Mac([0x01, 0x00, 0x5e, 0x0a, 0x00, 0x01]),
            "top bit of the 2nd octet dropped"
        );
        assert!(m.is_multicast() && !m.is_broadcast());
        assert!(!Mac([2, 0, 0, 0, 0, 1]).is_multicast());
        assert_eq!(m.to_string(), "01:00:5e:0a:00:01");
    }
}
