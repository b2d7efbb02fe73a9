//! UDP headers and the UDP checksum over the IPv4 pseudo-header (RFC 768).

use crate::checksum::{fold_checksum, pseudo_header_sum, sum_words};
use crate::ipv4::PROTO_UDP;
use crate::FrameError;
use std::net::Ipv4Addr;

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
        if segment.len() < UDP_HEADER_LEN {
            return false;
        }
        if segment[6] == 0 && segment[7] == 0 {
            return true;
        }
        let acc = sum_words(
            pseudo_header_sum(src, dst, PROTO_UDP, segment.len()),
            segment,
        );
        fold_checksum(acc) == 0
    }

    /// Fills the checksum of the UDP segment in place (what IP_CSUM offload does).
    pub fn fill_checksum(src: Ipv4Addr, dst: Ipv4Addr, segment: &mut [u8]) {
        if segment.len() < UDP_HEADER_LEN {
            return;
        }
        segment[6] = 0;
        segment[7] = 0;
        let c = Self::compute_checksum(src, dst, segment);
        segment[6..8].copy_from_slice(&c.to_be_bytes());
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
