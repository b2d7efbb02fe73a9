//! IPv4 headers (RFC 791).

use crate::checksum::internet_checksum;
use crate::FrameError;
use std::net::Ipv4Addr;

/// Length of an IPv4 header without options.
pub const IPV4_HEADER_LEN: usize = 20;
/// IP protocol number of UDP.
pub const PROTO_UDP: u8 = 17;
/// IP protocol number of TCP.
pub const PROTO_TCP: u8 = 6;

/// A parsed IPv4 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Header {
    /// DSCP and ECN.
    pub tos: u8,
    /// Total length of the datagram (header plus payload).
    pub total_len: u16,
    /// Identification.
    pub id: u16,
    /// Flags and fragment offset.
    pub flags_frag: u16,
    /// Time to live.
    pub ttl: u8,
    /// Payload protocol.
    pub protocol: u8,
    /// Header checksum as carried.
    pub checksum: u16,
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// Header length in bytes (20 plus options).
    pub header_len: usize,
}

impl Ipv4Header {
    /// Parses the header at the start of `data` (the bytes after the Ethernet header).
    ///
    /// # Errors
    /// [`FrameError::Truncated`] or [`FrameError::Malformed`] if the header is short, not
    /// version 4, or claims a length beyond the bytes present.
    pub fn parse(data: &[u8]) -> Result<Self, FrameError> {
        if data.len() < IPV4_HEADER_LEN {
            return Err(FrameError::Truncated {
                layer: "ipv4",
                need: IPV4_HEADER_LEN,
                have: data.len(),
            });
        }
        if data[0] >> 4 != 4 {
            return Err(FrameError::Malformed("ipv4: version is not 4"));
        }
        let header_len = usize::from(data[0] & 0x0f) * 4;
        if header_len < IPV4_HEADER_LEN {
            return Err(FrameError::Malformed("ipv4: IHL below 5"));
        }
        if data.len() < header_len {
            return Err(FrameError::Truncated {
                layer: "ipv4 options",
                need: header_len,
                have: data.len(),
            });
        }
        let total_len = u16::from_be_bytes([data[2], data[3]]);
        if usize::from(total_len) < header_len || usize::from(total_len) > data.len() {
            return Err(FrameError::Malformed(
                "ipv4: total length disagrees with the frame",
            ));
        }
        Ok(Ipv4Header {
            tos: data[1],
            total_len,
            id: u16::from_be_bytes([data[4], data[5]]),
            flags_frag: u16::from_be_bytes([data[6], data[7]]),
            ttl: data[8],
            protocol: data[9],
            checksum: u16::from_be_bytes([data[10], data[11]]),
            src: Ipv4Addr::new(data[12], data[13], data[14], data[15]),
            dst: Ipv4Addr::new(data[16], data[17], data[18], data[19]),
            header_len,
        })
    }

    /// True when the header's checksum verifies.
    #[must_use]
    pub fn checksum_ok(header_bytes: &[u8]) -> bool {
        internet_checksum(header_bytes) == 0
    }

    /// Appends a 20-byte header with a correct checksum to `out`.
    #[allow(clippy::too_many_arguments)]
    pub fn write(
        out: &mut Vec<u8>,
        tos: u8,
        payload_len: usize,
        id: u16,
        dont_fragment: bool,
        ttl: u8,
        protocol: u8,
        src: Ipv4Addr,
        dst: Ipv4Addr,
    ) {
        let start = out.len();
        let total = (IPV4_HEADER_LEN + payload_len).min(usize::from(u16::MAX)) as u16;
        out.push(0x45);
        out.push(tos);
        out.extend_from_slice(&total.to_be_bytes());
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&(if dont_fragment { 0x4000u16 } else { 0 }).to_be_bytes());
        out.push(ttl);
        out.push(protocol);
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&src.octets());
        out.extend_from_slice(&dst.octets());
        let c = internet_checksum(&out[start..start + IPV4_HEADER_LEN]);
        out[start + 10..start + 12].copy_from_slice(&c.to_be_bytes());
    }

    /// Recomputes the checksum of the header at `hdr` in place (what IP_CSUM offload does).
    pub fn fill_checksum(hdr: &mut [u8]) {
        if hdr.len() < IPV4_HEADER_LEN {
            return;
        }
        let hl = (usize::from(hdr[0] & 0x0f) * 4).clamp(IPV4_HEADER_LEN, hdr.len());
        hdr[10] = 0;
        hdr[11] = 0;
        let c = internet_checksum(&hdr[..hl]);
        hdr[10..12].copy_from_slice(&c.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> Vec<u8> {
        let mut out = Vec::new();
        Ipv4Header::write(
            &mut out,
            0xb8,
            100,
            0x1234,
            true,
            4,
            PROTO_UDP,
            Ipv4Addr::new(10, 0, 0, 1),
            Ipv4Addr::new(239, 10, 0, 1),
        );
        out.resize(IPV4_HEADER_LEN + 100, 0);
        out
    }

    #[test]
    fn round_trip_and_etherparse_agrees() {
        let b = header();
        let h = Ipv4Header::parse(&b).unwrap();
        assert_eq!(
            h,
            Ipv4Header {
                tos: 0xb8,
                total_len: 120,
                id: 0x1234,
                flags_frag: 0x4000,
                ttl: 4,
                protocol: PROTO_UDP,
                checksum: h.checksum,
                src: Ipv4Addr::new(10, 0, 0, 1),
                dst: Ipv4Addr::new(239, 10, 0, 1),
                header_len: 20,
            }
        );
        assert!(Ipv4Header::checksum_ok(&b[..20]));
        let theirs = etherparse::Ipv4HeaderSlice::from_slice(&b)
            .unwrap()
            .to_header();
        assert_eq!(theirs.calc_header_checksum(), h.checksum);
        assert_eq!(theirs.identification, 0x1234);
        assert!(theirs.dont_fragment);
    }

    #[test]
    fn fill_checksum_repairs_a_header() {
        let mut b = header();
        let good = b[10..12].to_vec();
        b[8] = 3; // a router's TTL decrement
        assert!(!Ipv4Header::checksum_ok(&b[..20]));
        Ipv4Header::fill_checksum(&mut b[..20]);
        assert!(Ipv4Header::checksum_ok(&b[..20]));
        assert_ne!(b[10..12], good[..]);
    }

    #[test]
    fn impossible_headers_are_refused() {
        let b = header();
        let err = |b: &[u8]| Ipv4Header::parse(b).unwrap_err().to_string();
        assert_eq!(
            err(&b[..19]),
            "ipv4 header truncated: need 20 bytes, have 19"
        );
        let mut v6 = b.clone();
        v6[0] = 0x65;
        assert_eq!(err(&v6), "malformed frame: ipv4: version is not 4");
        let mut ihl = b.clone();
        ihl[0] = 0x44;
        assert_eq!(err(&ihl), "malformed frame: ipv4: IHL below 5");
        let mut opts = b.clone();
        opts[0] = 0x4f;
        assert_eq!(
            err(&opts[..40]),
            "ipv4 options header truncated: need 60 bytes, have 40"
        );
        assert_eq!(
            err(&b[..100]),
            "malformed frame: ipv4: total length disagrees with the frame"
        );
    }
}
