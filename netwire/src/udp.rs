//! UDP headers and the UDP checksum over the IPv4 pseudo-header (RFC 768).

use crate::checksum::{fold_checksum, pseudo_header_sum, pseudo_header_sum_v6, sum_words};
use crate::ipv4::PROTO_UDP;
use crate::FrameError;
use std::net::{Ipv4Addr, Ipv6Addr};

/// Length of a UDP header.
pub const UDP_HEADER_LEN: usize = 8;

/// A parsed UDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpHeader {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Length of header plus payload.
    pub len: u16,
    /// Checksum as carried (0: none).
    pub checksum: u16,
}

impl UdpHeader {
    /// Parses the header at the start of `data` (the IP payload).
    ///
    /// # Errors
    /// [`FrameError::Truncated`] or [`FrameError::Malformed`] if the header is short or its
    /// length field disagrees with the bytes present.
    pub fn parse(data: &[u8]) -> Result<Self, FrameError> {
        if data.len() < UDP_HEADER_LEN {
            return Err(FrameError::Truncated {
                layer: "udp",
                need: UDP_HEADER_LEN,
                have: data.len(),
            });
        }
        let len = u16::from_be_bytes([data[4], data[5]]);
        if usize::from(len) < UDP_HEADER_LEN || usize::from(len) > data.len() {
            return Err(FrameError::Malformed(
                "udp: length disagrees with the IP payload",
            ));
        }
        Ok(UdpHeader {
            src_port: u16::from_be_bytes([data[0], data[1]]),
            dst_port: u16::from_be_bytes([data[2], data[3]]),
            len,
            checksum: u16::from_be_bytes([data[6], data[7]]),
        })
    }

    /// The UDP checksum of `segment` (header plus payload, with its checksum field taken as
    /// zero) between `src` and `dst`. A computed 0 is sent as 0xffff.
    #[must_use]
    pub fn compute_checksum(src: Ipv4Addr, dst: Ipv4Addr, segment: &[u8]) -> u16 {
        let mut acc = pseudo_header_sum(src, dst, PROTO_UDP, segment.len());
        acc = sum_words(acc, &segment[..6.min(segment.len())]);
        if segment.len() > UDP_HEADER_LEN {
            acc = sum_words(acc, &segment[UDP_HEADER_LEN..]);
        }
        match fold_checksum(acc) {
            0 => 0xffff,
            c => c,
        }
    }

    /// True if `segment`'s checksum is absent (0) or verifies.
    #[must_use]
    pub fn checksum_ok(src: Ipv4Addr, dst: Ipv4Addr, segment: &[u8]) -> bool {
        verifies(
            pseudo_header_sum(src, dst, PROTO_UDP, segment.len()),
            segment,
        )
    }

    /// [`UdpHeader::checksum_ok`] of a segment carried over IPv6 (RoCEv2 over IPv6
    /// leaves the checksum 0, and rxe's tunnel socket takes that: `udp_sock_create6`
    /// sets no_check6_rx).
    #[must_use]
    pub fn checksum_ok_v6(src: Ipv6Addr, dst: Ipv6Addr, segment: &[u8]) -> bool {
        verifies(
            pseudo_header_sum_v6(src, dst, PROTO_UDP, segment.len()),
            segment,
        )
    }

    /// Fills the checksum of a UDP segment carried over IPv6 in place.
    pub fn fill_checksum_v6(src: Ipv6Addr, dst: Ipv6Addr, segment: &mut [u8]) {
        fill(
            pseudo_header_sum_v6(src, dst, PROTO_UDP, segment.len()),
            segment,
        );
    }

    /// Fills the checksum of the UDP segment in place (what IP_CSUM offload does).
    pub fn fill_checksum(src: Ipv4Addr, dst: Ipv4Addr, segment: &mut [u8]) {
        fill(
            pseudo_header_sum(src, dst, PROTO_UDP, segment.len()),
            segment,
        );
    }

    /// Appends a header (checksum 0) to `out`.
    pub fn write(out: &mut Vec<u8>, src_port: u16, dst_port: u16, payload_len: usize) {
        let len = (UDP_HEADER_LEN + payload_len).min(usize::from(u16::MAX)) as u16;
        out.extend_from_slice(&src_port.to_be_bytes());
        out.extend_from_slice(&dst_port.to_be_bytes());
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(&[0, 0]);
    }
}

/// True if `segment` (after a pseudo-header summing to `pseudo`) has no checksum (0) or
/// one that verifies.
fn verifies(pseudo: u32, segment: &[u8]) -> bool {
    if segment.len() < UDP_HEADER_LEN {
        return false;
    }
    if segment[6] == 0 && segment[7] == 0 {
        return true;
    }
    fold_checksum(sum_words(pseudo, segment)) == 0
}

/// Fills `segment`'s checksum (after a pseudo-header summing to `pseudo`); a sum of 0 is
/// sent as 0xffff, 0 meaning "none".
fn fill(pseudo: u32, segment: &mut [u8]) {
    if segment.len() < UDP_HEADER_LEN {
        return;
    }
    segment[6] = 0;
    segment[7] = 0;
    let c = match fold_checksum(sum_words(pseudo, segment)) {
        0 => 0xffff,
        c => c,
    };
    segment[6..8].copy_from_slice(&c.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const DST: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

    fn segment(payload: &[u8]) -> Vec<u8> {
        let mut s = Vec::new();
        UdpHeader::write(&mut s, 7000, 8888, payload.len());
        s.extend_from_slice(payload);
        s
    }

    #[test]
    fn checksums_at_odd_and_even_lengths_agree_with_etherparse() {
        for len in [0usize, 1, 2, 3, 17, 1472, 1473] {
            let payload: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
            let mut s = segment(&payload);
            assert!(UdpHeader::checksum_ok(SRC, DST, &s), "no checksum is fine");
            UdpHeader::fill_checksum(SRC, DST, &mut s);
            assert!(UdpHeader::checksum_ok(SRC, DST, &s), "len {len}");
            let theirs = etherparse::UdpHeader {
                source_port: 7000,
                destination_port: 8888,
                length: (8 + len) as u16,
                checksum: 0,
            }
            .calc_checksum_ipv4_raw(SRC.octets(), DST.octets(), &payload)
            .unwrap();
            assert_eq!(u16::from_be_bytes([s[6], s[7]]), theirs, "len {len}");
            if len > 0 {
                s[UDP_HEADER_LEN] ^= 1;
                assert!(!UdpHeader::checksum_ok(SRC, DST, &s), "len {len}");
            }
        }
    }

    #[test]
    fn a_computed_zero_is_sent_as_all_ones() {
        // Find a payload whose checksum folds to 0: then 0xffff goes on the wire.
        let mut s = segment(&[0, 0]);
        UdpHeader::fill_checksum(SRC, DST, &mut s);
        let c = u16::from_be_bytes([s[6], s[7]]);
        // Adding c to the payload's word makes the sum fold to 0xffff, the checksum 0.
        let mut z = segment(&c.to_be_bytes());
        UdpHeader::fill_checksum(SRC, DST, &mut z);
        assert_eq!(&z[6..8], &[0xff, 0xff]);
        assert!(UdpHeader::checksum_ok(SRC, DST, &z));
    }

    #[test]
    fn header_round_trip_and_bad_lengths() {
        let s = segment(b"abc");
        assert_eq!(
            UdpHeader::parse(&s),
            Ok(UdpHeader {
                src_port: 7000,
                dst_port: 8888,
                len: 11,
                checksum: 0
            })
        );
        assert_eq!(
            UdpHeader::parse(&s[..7]),
            Err(FrameError::Truncated {
                layer: "udp",
                need: 8,
                have: 7
            })
        );
        assert_eq!(
            UdpHeader::parse(&s[..10]),
            Err(FrameError::Malformed(
                "udp: length disagrees with the IP payload"
            )),
            "length past the bytes"
        );
        let mut short = s.clone();
        short[4..6].copy_from_slice(&7u16.to_be_bytes());
        assert_eq!(
            UdpHeader::parse(&short),
            Err(FrameError::Malformed(
                "udp: length disagrees with the IP payload"
            ))
        );
    }
}
