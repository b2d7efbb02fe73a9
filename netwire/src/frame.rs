//! Whole frames: a parsed view down to the transport layer, the integrity checks a
//! receiving NIC makes, a builder of plain UDP frames, and IP_CSUM offload.

use crate::checksum::internet_checksum;
use crate::eth::{EthHeader, Mac, ETHERTYPE_IPV4, ETHERTYPE_IPV6, ETHERTYPE_ROCE_V1};
use crate::ipv4::{Ipv4Header, PROTO_TCP, PROTO_UDP};
use crate::ipv6::{Ipv6Header, IPV6_HEADER_LEN};
use crate::raw::{HeaderTemplate, HEADERS};
use crate::roce;
use crate::udp::{UdpHeader, UDP_HEADER_LEN};
use crate::FrameError;
use std::net::{Ipv4Addr, SocketAddrV4};

/// The transport-layer view of a frame, as flow steering sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum L4 {
    /// UDP with its header; the payload starts at `payload_offset` in the frame.
    Udp {
        /// The header.
        header: UdpHeader,
        /// Offset of the UDP header in the frame.
        offset: usize,
    },
    /// TCP (ports only; the simulator carries but does not speak TCP).
    Tcp {
        /// Source port.
        src_port: u16,
        /// Destination port.
        dst_port: u16,
    },
    /// Another protocol, or a non-first fragment.
    Other,
}

/// A parsed frame: offsets and headers, borrowed from nothing so it is cheap to copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameView {
    /// The Ethernet header.
    pub eth: EthHeader,
    /// The IPv4 header and its offset in the frame, if the frame is IPv4.
    pub ipv4: Option<(Ipv4Header, usize)>,
    /// The IPv6 header and its offset in the frame, if the frame is IPv6 (RoCEv2 over
    /// IPv6; no extension headers: a next header other than UDP or TCP is `L4::Other`),
    /// or the GRH of a RoCE v1 frame (the same layout; `eth.ethertype` tells which).
    pub ipv6: Option<(Ipv6Header, usize)>,
    /// The transport layer.
    pub l4: L4,
}

impl FrameView {
    /// Parses `frame` down to the transport layer.
    ///
    /// # Errors
    /// [`FrameError`] if a header present is truncated or malformed.
    pub fn parse(frame: &[u8]) -> Result<Self, FrameError> {
        let eth = EthHeader::parse(frame)?;
        if eth.ethertype == ETHERTYPE_IPV6 || eth.ethertype == ETHERTYPE_ROCE_V1 {
            return Self::parse_ipv6(frame, eth);
        }
        if eth.ethertype != ETHERTYPE_IPV4 {
            return Ok(FrameView {
                eth,
                ipv4: None,
                ipv6: None,
                l4: L4::Other,
            });
        }
        let ip_off = eth.payload_offset;
        let ip = Ipv4Header::parse(&frame[ip_off..])?;
        let l4_off = ip_off + ip.header_len;
        let l4_end = ip_off + usize::from(ip.total_len);
        let first_fragment = ip.flags_frag & 0x1fff == 0;
        let l4 = match ip.protocol {
            PROTO_UDP if first_fragment => {
                let header = UdpHeader::parse(&frame[l4_off..l4_end])?;
                L4::Udp {
                    header,
                    offset: l4_off,
                }
            }
            PROTO_TCP if first_fragment => {
                if l4_end < l4_off + 4 {
                    return Err(FrameError::Truncated {
                        layer: "tcp",
                        need: 4,
                        have: l4_end - l4_off,
                    });
                }
                L4::Tcp {
                    src_port: u16::from_be_bytes([frame[l4_off], frame[l4_off + 1]]),
                    dst_port: u16::from_be_bytes([frame[l4_off + 2], frame[l4_off + 3]]),
                }
            }
            _ => L4::Other,
        };
        Ok(FrameView {
            eth,
            ipv4: Some((ip, ip_off)),
            ipv6: None,
            l4,
        })
    }

    fn parse_ipv6(frame: &[u8], eth: EthHeader) -> Result<Self, FrameError> {
        let ip_off = eth.payload_offset;
        let ip = Ipv6Header::parse(&frame[ip_off..])?;
        let l4_off = ip_off + IPV6_HEADER_LEN;
        let l4_end = l4_off + usize::from(ip.payload_len);
        let l4 = match ip.next_header {
            _ if eth.ethertype == ETHERTYPE_ROCE_V1 => L4::Other,
            PROTO_UDP => L4::Udp {
                header: UdpHeader::parse(&frame[l4_off..l4_end])?,
                offset: l4_off,
            },
            PROTO_TCP if l4_end >= l4_off + 4 => L4::Tcp {
                src_port: u16::from_be_bytes([frame[l4_off], frame[l4_off + 1]]),
                dst_port: u16::from_be_bytes([frame[l4_off + 2], frame[l4_off + 3]]),
            },
            PROTO_TCP => {
                return Err(FrameError::Truncated {
                    layer: "tcp",
                    need: 4,
                    have: l4_end - l4_off,
                })
            }
            _ => L4::Other,
        };
        Ok(FrameView {
            eth,
            ipv4: None,
            ipv6: Some((ip, ip_off)),
            l4,
        })
    }

    /// The IB transport packet's bytes in a RoCE frame (BTH through ICRC): a RoCEv2
    /// frame's UDP payload, or what follows a RoCE v1 frame's GRH.
    #[must_use]
    pub fn roce_packet(&self) -> Option<std::ops::Range<usize>> {
        if self.eth.ethertype == ETHERTYPE_ROCE_V1 {
            let (grh, off) = self.ipv6?;
            let start = off + IPV6_HEADER_LEN;
            return (grh.next_header == roce::IB_NEXT_HEADER)
                .then(|| start..start + usize::from(grh.payload_len));
        }
        if self.is_roce_v2() {
            self.udp_payload()
        } else {
            None
        }
    }

    /// The IP datagram's bytes in the frame (IPv4 or IPv6 header through the end of its
    /// payload; a RoCE v1 frame's GRH through ICRC), if the frame is IP or RoCE v1.
    #[must_use]
    pub fn ip_range(&self) -> Option<std::ops::Range<usize>> {
        match (self.ipv4, self.ipv6) {
            (Some((ip, off)), _) => Some(off..off + usize::from(ip.total_len)),
            (None, Some((ip, off))) => {
                Some(off..off + IPV6_HEADER_LEN + usize::from(ip.payload_len))
            }
            (None, None) => None,
        }
    }

    /// The UDP payload range in the frame, if the frame is UDP.
    #[must_use]
    pub fn udp_payload(&self) -> Option<std::ops::Range<usize>> {
        match self.l4 {
            L4::Udp { header, offset } => {
                Some(offset + UDP_HEADER_LEN..offset + usize::from(header.len))
            }
            _ => None,
        }
    }

    /// True if this is a RoCE frame: RoCEv2 (UDP destination port 4791) or RoCE v1
    /// (EtherType 0x8915, a GRH whose next header is the IB transport).
    #[must_use]
    pub fn is_roce(&self) -> bool {
        self.is_roce_v2() || self.roce_packet().is_some()
    }

    /// True if this is a RoCEv2 frame (UDP destination port 4791).
    #[must_use]
    pub fn is_roce_v2(&self) -> bool {
        matches!(self.l4, L4::Udp { header, .. } if header.dst_port == roce::ROCEV2_UDP_PORT)
    }
}

/// What a receiving NIC concludes from a frame's checksums.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Integrity {
    /// Every checksum present verifies.
    Ok,
    /// The frame does not parse.
    Malformed,
    /// The IPv4 header checksum fails.
    BadIpChecksum,
    /// The UDP checksum is present and fails.
    BadUdpChecksum,
    /// The RoCEv2 ICRC fails.
    BadIcrc,
}

/// Which checksums a receiver verifies: each costs a pass over bytes, so a caller that
/// knows a check cannot fail (or is not its NIC's) turns it off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checks {
    /// The IPv4 header checksum.
    pub ip_header: bool,
    /// The UDP checksum, when the frame carries one (not 0).
    pub udp: bool,
    /// The ICRC of RoCEv2 frames.
    pub icrc: bool,
}

impl Checks {
    /// Every check a NIC makes.
    pub const ALL: Checks = Checks {
        ip_header: true,
        udp: true,
        icrc: true,
    };
}

/// Checks a frame the way a receiving NIC does before it hands the frame on: IPv4 header
/// checksum, UDP checksum when present, and the ICRC of RoCEv2 frames. A corrupted bit
/// that none of these cover (for example in a non-IP frame) goes unnoticed, as on a wire
/// without FCS errors.
#[must_use]
pub fn check_integrity(frame: &[u8]) -> Integrity {
    check_integrity_with(frame, Checks::ALL)
}

/// [`check_integrity`] with only the `checks` asked for; the headers are parsed (and a
/// malformed frame reported) whatever is asked.
#[must_use]
pub fn check_integrity_with(frame: &[u8], checks: Checks) -> Integrity {
    check_integrity_fast(frame, checks).unwrap_or_else(|| check_integrity_general(frame, checks))
}

fn check_integrity_general(frame: &[u8], checks: Checks) -> Integrity {
    let Ok(view) = FrameView::parse(frame) else {
        return Integrity::Malformed;
    };
    if view.eth.ethertype == ETHERTYPE_ROCE_V1 {
        // RoCE v1: no IP or UDP checksum; the ICRC.
        let Some(range) = view.ip_range() else {
            return Integrity::Ok;
        };
        if checks.icrc && view.is_roce() && !roce::icrc_ok(&frame[range]) {
            return Integrity::BadIcrc;
        }
        return Integrity::Ok;
    }
    if let Some((ip, ip_off)) = view.ipv6 {
        return check_ipv6(frame, &view, &ip, ip_off, checks);
    }
    let Some((ip, ip_off)) = view.ipv4 else {
        return Integrity::Ok;
    };
    if checks.ip_header && !Ipv4Header::checksum_ok(&frame[ip_off..ip_off + ip.header_len]) {
        return Integrity::BadIpChecksum;
    }
    if let L4::Udp { header, offset } = view.l4 {
        let seg = &frame[offset..offset + usize::from(header.len)];
        if checks.udp && !UdpHeader::checksum_ok(ip.src, ip.dst, seg) {
            return Integrity::BadUdpChecksum;
        }
        if checks.icrc
            && header.dst_port == roce::ROCEV2_UDP_PORT
            && !roce::icrc_ok(&frame[ip_off..ip_off + usize::from(ip.total_len)])
        {
            return Integrity::BadIcrc;
        }
    }
    Integrity::Ok
}

/// [`check_integrity_general`] of an IPv6 frame: no header checksum; the UDP checksum
/// when present (RoCEv2 senders leave it 0) and a RoCEv2 frame's ICRC.
fn check_ipv6(
    frame: &[u8],
    view: &FrameView,
    ip: &Ipv6Header,
    ip_off: usize,
    checks: Checks,
) -> Integrity {
    if let L4::Udp { header, offset } = view.l4 {
        let seg = &frame[offset..offset + usize::from(header.len)];
        if checks.udp && !UdpHeader::checksum_ok_v6(ip.src, ip.dst, seg) {
            return Integrity::BadUdpChecksum;
        }
        let end = ip_off + IPV6_HEADER_LEN + usize::from(ip.payload_len);
        if checks.icrc
            && header.dst_port == roce::ROCEV2_UDP_PORT
            && !roce::icrc_ok(&frame[ip_off..end])
        {
            return Integrity::BadIcrc;
        }
    }
    Integrity::Ok
}

/// The common case without a full parse: untagged IPv4 without options carrying a first
/// UDP fragment, at fixed offsets. `None` sends everything else down the general path.
fn check_integrity_fast(f: &[u8], checks: Checks) -> Option<Integrity> {
    if f.len() < 42 || f[12] != 0x08 || f[13] != 0x00 || f[14] != 0x45 || f[23] != 17 {
        return None;
    }
    if u16::from_be_bytes([f[20], f[21]]) & 0x1fff != 0 {
        return None;
    }
    let total = usize::from(u16::from_be_bytes([f[16], f[17]]));
    let udp_len = usize::from(u16::from_be_bytes([f[38], f[39]]));
    if total < 28 || 14 + total > f.len() || udp_len < 8 || 34 + udp_len > 14 + total {
        return Some(Integrity::Malformed);
    }
    if checks.ip_header && internet_checksum(&f[14..34]) != 0 {
        return Some(Integrity::BadIpChecksum);
    }
    let src = Ipv4Addr::new(f[26], f[27], f[28], f[29]);
    let dst = Ipv4Addr::new(f[30], f[31], f[32], f[33]);
    if checks.udp && !UdpHeader::checksum_ok(src, dst, &f[34..34 + udp_len]) {
        return Some(Integrity::BadUdpChecksum);
    }
    let dport = u16::from_be_bytes([f[36], f[37]]);
    if checks.icrc && dport == roce::ROCEV2_UDP_PORT && !roce::icrc_ok(&f[14..14 + total]) {
        return Some(Integrity::BadIcrc);
    }
    Some(Integrity::Ok)
}

/// Addresses and fields of a plain UDP frame to build.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpFrameSpec {
    /// Source MAC.
    pub src_mac: Mac,
    /// Destination MAC (for a multicast group, see [`Mac::for_ipv4_multicast`]).
    pub dst_mac: Mac,
    /// Source IPv4.
    pub src_ip: Ipv4Addr,
    /// Destination IPv4.
    pub dst_ip: Ipv4Addr,
    /// UDP source port.
    pub src_port: u16,
    /// UDP destination port.
    pub dst_port: u16,
    /// DSCP/ECN.
    pub tos: u8,
    /// Time to live.
    pub ttl: u8,
    /// IP identification.
    pub ip_id: u16,
    /// Whether to fill the UDP checksum (otherwise 0, "none").
    pub udp_checksum: bool,
}

impl UdpFrameSpec {
    /// A spec with TTL 64, TOS 0, id 0 and no UDP checksum.
    #[must_use]
    pub fn new(src_mac: Mac, dst_mac: Mac, src: (Ipv4Addr, u16), dst: (Ipv4Addr, u16)) -> Self {
        UdpFrameSpec {
            src_mac,
            dst_mac,
            src_ip: src.0,
            dst_ip: dst.0,
            src_port: src.1,
            dst_port: dst.1,
            tos: 0,
            ttl: 64,
            ip_id: 0,
            udp_checksum: false,
        }
    }

    /// Builds the frame around `payload`.
    ///
    /// # Panics
    /// As [`Self::build_into`].
    #[must_use]
    pub fn build(&self, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADERS + payload.len());
        self.build_into(payload, &mut out);
        out
    }

    /// Builds the frame into `out` (cleared first), reusing its allocation: the
    /// fixed-offset headers of [`HeaderTemplate`], the payload, and the UDP checksum if
    /// asked for.
    ///
    /// # Panics
    /// When `payload` exceeds 65507 bytes (the largest UDP payload in IPv4).
    pub fn build_into(&self, payload: &[u8], out: &mut Vec<u8>) {
        let mut t = HeaderTemplate::new(
            self.src_mac.0,
            SocketAddrV4::new(self.src_ip, self.src_port),
            self.dst_mac.0,
            SocketAddrV4::new(self.dst_ip, self.dst_port),
            self.ttl,
        )
        .with_tos(self.tos)
        .with_ip_id(self.ip_id);
        let mut headers = [0u8; HEADERS];
        t.write(&mut headers, payload.len(), false);
        out.clear();
        out.reserve(HEADERS + payload.len());
        out.extend_from_slice(&headers);
        out.extend_from_slice(payload);
        if self.udp_checksum {
            UdpHeader::fill_checksum(
                self.src_ip,
                self.dst_ip,
                &mut out[HEADERS - UDP_HEADER_LEN..],
            );
        }
    }
}

/// Fills the IPv4 header checksum and (if UDP) the UDP checksum of `frame` in place, as a
/// NIC does for a send with IP_CSUM. Frames that do not parse are left alone.
///
/// Returns true when the frame is now *sealed*: IPv4 carrying UDP whose length is the
/// rest of the datagram, so that both checksums just filled cover exactly the bytes a
/// receiver verifies, and the frame passes that check for as long as none of its bytes
/// change.
pub fn offload_checksums(frame: &mut [u8]) -> bool {
    let Ok(view) = FrameView::parse(frame) else {
        return false;
    };
    let Some((ip, ip_off)) = view.ipv4 else {
        return false;
    };
    Ipv4Header::fill_checksum(&mut frame[ip_off..ip_off + ip.header_len]);
    let L4::Udp { header, offset } = view.l4 else {
        return false;
    };
    UdpHeader::fill_checksum(
        ip.src,
        ip.dst,
        &mut frame[offset..offset + usize::from(header.len)],
    );
    usize::from(header.len) == usize::from(ip.total_len) - ip.header_len
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_and_general_integrity_checks_agree_on_every_single_bit_flip() {
        let mut spec = UdpFrameSpec::new(
            Mac([2, 0, 0, 0, 0, 1]),
            Mac([2, 0, 0, 0, 0, 2]),
            (Ipv4Addr::new(10, 0, 0, 1), 1),
            (Ipv4Addr::new(10, 0, 0, 2), 2),
        );
        let some = Checks {
            ip_header: false,
            ..Checks::ALL
        };
        for csum in [false, true] {
            spec.udp_checksum = csum;
            let f = spec.build(b"0123456789abcdef0123");
            for checks in [Checks::ALL, some] {
                for bit in 0..f.len() * 8 {
                    let mut g = f.clone();
                    g[bit / 8] ^= 1 << (bit % 8);
                    if let Some(fast) = check_integrity_fast(&g, checks) {
                        assert_eq!(
                            fast,
                            check_integrity_general(&g, checks),
                            "bit {bit}, checksum {csum}"
                        );
                    }
                }
                for cut in 0..f.len() {
                    if let Some(fast) = check_integrity_fast(&f[..cut], checks) {
                        assert_eq!(
                            fast,
                            check_integrity_general(&f[..cut], checks),
                            "cut {cut}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn only_the_checks_asked_for_are_made() {
        let mut spec = UdpFrameSpec::new(
            Mac([2, 0, 0, 0, 0, 1]),
            Mac([2, 0, 0, 0, 0, 2]),
            (Ipv4Addr::new(10, 0, 0, 1), 1),
            (Ipv4Addr::new(10, 0, 0, 2), 2),
        );
        spec.udp_checksum = true;
        let f = spec.build(b"payload");
        let none = Checks {
            ip_header: false,
            udp: false,
            icrc: false,
        };
        let mut bad_ttl = f.clone();
        bad_ttl[22] ^= 1;
        assert_eq!(check_integrity(&bad_ttl), Integrity::BadIpChecksum);
        assert_eq!(check_integrity_with(&bad_ttl, none), Integrity::Ok);
        let mut bad_payload = f.clone();
        bad_payload[HEADERS] ^= 1;
        assert_eq!(check_integrity(&bad_payload), Integrity::BadUdpChecksum);
        let no_udp = Checks {
            udp: false,
            ..Checks::ALL
        };
        assert_eq!(check_integrity_with(&bad_payload, no_udp), Integrity::Ok);
        assert_eq!(
            check_integrity_with(&f[..30], none),
            Integrity::Malformed,
            "parsing is not a check"
        );
    }
}
