//! Corrupted frames: where a flipped bit lands, a buggy sender's payload corruption (the
//! checksums and ICRC made again over the bad payload), and the checks a receiving NIC
//! makes of a RoCEv2 frame before its transport sees it. The FCS check needs no code: a
//! frame flipped on the wire is always caught by it (CRC-32 catches every single-bit
//! error), so the fabric drops it where it arrives.

use crate::fault::DropReason;
use crate::frame::ipv4::{Ipv4Header, PROTO_TCP, PROTO_UDP};
use crate::frame::roce::{self, ICRC_LEN};
use crate::frame::udp::UdpHeader;
use crate::frame::{check_integrity, FrameView, Integrity};
use netwire::checksum::{fold_checksum, pseudo_header_sum, sum_words};

/// A frame its sender corrupted (see [`crate::LinkFaults::corrupt_payload`]), as it left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PayloadCorruption {
    /// The frame's global packet index.
    pub index: u64,
    /// The bit flipped (counted from the frame's first bit, most significant first).
    pub bit: usize,
    /// The frame as sent, with the flip (flip `bit` back for the frame as meant).
    pub frame: Vec<u8>,
}

/// A frame flipped inside the switch that reached a port and passed every check its NIC
/// makes, so it goes up as good: the 16-bit Internet checksum misses some pairs of flips
/// (a frame flipped at the switch's ingress and again at its egress, in the same bit of
/// two words, one each way), and a UDP checksum of 0 checks nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UndetectedCorruption {
    /// The frame's global packet index.
    pub index: u64,
    /// The port it reached.
    pub port: crate::ids::PortId,
    /// The frame as it arrived.
    pub frame: Vec<u8>,
}

/// True if a NIC's checks pass `frame`: a RoCEv2 frame's (see [`roce_drop`]), or for any
/// other the IPv4 header and UDP/TCP checksums (see [`ip_checksums_verify`]).
pub(crate) fn passes_checks(frame: &[u8]) -> bool {
    if is_roce(frame) {
        roce_drop(frame).is_none()
    } else {
        ip_checksums_verify(frame)
    }
}

/// True if `frame` is IPv4 whose header checksum verifies, carrying UDP or TCP whose
/// checksum verifies too (a UDP checksum of 0, "none", has nothing to fail): what an mlx5
/// NIC reports as L3_OK and L4_OK, and a RAW_PACKET receive as IBV_WC_IP_CSUM_OK.
pub(crate) fn ip_checksums_verify(frame: &[u8]) -> bool {
    let Ok(view) = FrameView::parse(frame) else {
        return false;
    };
    let Some((ip, off)) = view.ipv4 else {
        return false;
    };
    if !Ipv4Header::checksum_ok(&frame[off..off + ip.header_len]) {
        return false;
    }
    let segment = &frame[off + ip.header_len..off + usize::from(ip.total_len)];
    match ip.protocol {
        PROTO_UDP if segment.len() >= 8 && segment[6..8] == [0, 0] => true,
        PROTO_UDP | PROTO_TCP if ip.flags_frag & 0x1fff == 0 => {
            let acc = pseudo_header_sum(ip.src, ip.dst, ip.protocol, segment.len());
            fold_checksum(sum_words(acc, segment)) == 0
        }
        _ => false,
    }
}

/// Bytes of the Ethernet header, which flips on the wire and in the switch leave alone (a
/// flip there would only misroute the frame, which loss already models).
const ETH_LEN: usize = 14;

/// The bit a wire or switch flip with uniform `draw` hits in a frame of `len` bytes: any
/// bit after the Ethernet header. `None` when there is none.
pub(crate) fn bit_after_header(len: usize, draw: u64) -> Option<usize> {
    let bits = (len.checked_sub(ETH_LEN)? * 8) as u64;
    (bits > 0).then(|| ETH_LEN * 8 + (draw % bits) as usize)
}

/// Flips bit `bit` (counted from the first bit of the frame, most significant first).
pub(crate) fn flip(frame: &mut [u8], bit: usize) {
    frame[bit / 8] ^= 0x80 >> (bit % 8);
}

/// What a sender's payload corruption may touch: the bytes of its message, without the
/// headers its NIC or stack made (for RoCEv2 the transport headers, pad and ICRC too).
fn payload_range(frame: &[u8]) -> Option<std::ops::Range<usize>> {
    let view = FrameView::parse(frame).ok()?;
    let Some(ib) = view.roce_packet() else {
        let udp = view.udp_payload()?;
        return (!udp.is_empty()).then_some(udp);
    };
    let pkt = roce::parse_roce(&frame[ib]).ok()?;
    let start = pkt.payload.as_ptr() as usize - frame.as_ptr() as usize;
    (!pkt.payload.is_empty()).then(|| start..start + pkt.payload.len())
}

/// A buggy sender: flips the payload bit `draw` picks, then makes the ICRC (RoCEv2) and
/// the UDP checksum (when the frame carries one) again, so every check on the way passes.
/// Returns the flipped bit, or `None` (frame unchanged) when the frame has no payload.
pub(crate) fn corrupt_payload(frame: &mut [u8], draw: u64) -> Option<usize> {
    let range = payload_range(frame)?;
    let bit = range.start * 8 + (draw % (range.len() as u64 * 8)) as usize;
    flip(frame, bit);
    let view = FrameView::parse(frame).ok()?;
    let ip_range = view.ip_range()?;
    if view.is_roce() {
        let icrc = roce::compute_icrc(&frame[ip_range.start..ip_range.end - ICRC_LEN]);
        frame[ip_range.end - ICRC_LEN..ip_range.end].copy_from_slice(&icrc.to_le_bytes());
    }
    if let crate::frame::L4::Udp { header, offset } = view.l4 {
        if header.checksum != 0 {
            let seg = &mut frame[offset..offset + usize::from(header.len)];
            match (view.ipv4, view.ipv6) {
                (Some((ip, _)), _) => UdpHeader::fill_checksum(ip.src, ip.dst, seg),
                (None, Some((ip, _))) => UdpHeader::fill_checksum_v6(ip.src, ip.dst, seg),
                (None, None) => {}
            }
        }
    }
    Some(bit)
}

/// True for an untagged IPv4/UDP or IPv6/UDP frame to port 4791, or a RoCE v1 frame,
/// read without a full parse.
pub(crate) fn is_roce(f: &[u8]) -> bool {
    if f.get(12..14) == Some(&[0x89, 0x15]) {
        return f.get(20) == Some(&roce::IB_NEXT_HEADER);
    }
    let l4 = match (f.get(12..14), f.get(14)) {
        (Some([0x08, 0x00]), Some(v)) if f.get(23) == Some(&17) => 14 + usize::from(v & 0x0f) * 4,
        (Some([0x86, 0xdd]), Some(_)) if f.get(20) == Some(&17) => 14 + 40,
        _ => return false,
    };
    f.len() >= l4 + 8 && u16::from_be_bytes([f[l4 + 2], f[l4 + 3]]) == roce::ROCEV2_UDP_PORT
}

/// The receiving NIC's checks of a RoCEv2 frame, in the order rxe meets them: the IPv4
/// header (the kernel's `ip_rcv_core`), the UDP checksum when present (`udp_queue_rcv_one_skb`
/// verifies it before the encapsulation hook hands the datagram to rxe), then the ICRC
/// (`rxe_rcv` calls `rxe_icrc_check`). `None`: the frame passes, or is not RoCEv2 (those go
/// up whatever their checksums say; a RAW_PACKET receive reports them in its completion).
pub(crate) fn roce_drop(frame: &[u8]) -> Option<DropReason> {
    if !is_roce(frame) {
        return None;
    }
    match check_integrity(frame) {
        Integrity::Ok => None,
        Integrity::Malformed | Integrity::BadIpChecksum => Some(DropReason::IpHeader),
        Integrity::BadUdpChecksum => Some(DropReason::UdpChecksum),
        Integrity::BadIcrc => Some(DropReason::Icrc),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::eth::Mac;
    use crate::frame::roce::{build_roce_frame, Bth, Deth, RoceHeaders, RoceRoute};
    use crate::frame::UdpFrameSpec;
    use std::net::Ipv4Addr;

    fn udp(checksum: bool) -> Vec<u8> {
        let mut spec = UdpFrameSpec::new(
            Mac([2, 0, 10, 0, 0, 1]),
            Mac([2, 0, 10, 0, 0, 2]),
            (Ipv4Addr::new(10, 0, 0, 1), 5000),
            (Ipv4Addr::new(10, 0, 0, 2), 7148),
        );
        spec.udp_checksum = checksum;
        spec.build(b"payload!\x00\x00\x00\x00\x00\x00\x00\x00\xff\xff")
    }

    fn roce_ud() -> Vec<u8> {
        let route = RoceRoute::new(
            (Mac([2, 0, 10, 0, 0, 1]), Ipv4Addr::new(10, 0, 0, 1)),
            (Mac([2, 0, 10, 0, 0, 2]), Ipv4Addr::new(10, 0, 0, 2)),
        );
        let headers = RoceHeaders {
            bth: Bth {
                opcode: roce::opcode::UD | roce::opcode::SEND_ONLY,
                dest_qp: 0x11,
                ..Bth::default()
            },
            deth: Some(Deth {
                qkey: 7,
                src_qp: 0x12,
            }),
            ..RoceHeaders::default()
        };
        build_roce_frame(&route, &headers, b"message")
    }

    /// The seal of `offload_checksums` is a promise about `ip_checksums_verify`: every
    /// frame it seals passes, and the frames whose check the offload does not cover
    /// (not UDP, a UDP length short of the datagram, not IPv4) are not sealed.
    #[test]
    fn offload_seals_exactly_the_frames_it_makes_pass_the_receivers_check() {
        let sealed = |mut f: Vec<u8>| {
            let s = crate::frame::offload_checksums(&mut f);
            assert!(
                !s || ip_checksums_verify(&f),
                "a sealed frame fails: {f:02x?}"
            );
            s
        };
        for len in [0, 1, 2, 7, 8, 63, 1000, 8192] {
            for checksum in [true, false] {
                let mut spec = UdpFrameSpec::new(
                    Mac([2, 0, 10, 0, 0, 1]),
                    Mac([2, 0, 10, 0, 0, 2]),
                    (Ipv4Addr::new(10, 0, 0, 1), 5000),
                    (Ipv4Addr::new(239, 1, 2, 3), 7148),
                );
                spec.udp_checksum = checksum;
                let payload: Vec<u8> = (0..len).map(|i| (i * 31 + 7) as u8).collect();
                let mut f = spec.build(&payload);
                // Checksums left for the NIC, or wrong: the offload makes them right.
                f[24] ^= 0x5a;
                assert!(sealed(f.clone()), "UDP of {len} bytes");
                // The UDP length two bytes short of the datagram: the receiver sums what
                // the offload does not, so no seal.
                let udp_len = u16::from_be_bytes([f[38], f[39]]);
                if udp_len >= 10 {
                    f[38..40].copy_from_slice(&(udp_len - 2).to_be_bytes());
                    assert!(!sealed(f), "short UDP length, {len} bytes");
                }
            }
        }
        assert!(!sealed(roce_ud()[..20].to_vec()), "truncated");
        let mut tcp = udp(true);
        tcp[23] = PROTO_TCP;
        assert!(!sealed(tcp), "TCP");
        let mut arp = udp(true);
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert!(!sealed(arp), "not IPv4");
        assert!(sealed(roce_ud()), "RoCEv2 is UDP too");
    }

    #[test]
    fn a_flip_lands_after_the_ethernet_header_and_nowhere_without_one() {
        assert_eq!(bit_after_header(14, 5), None);
        assert_eq!(bit_after_header(15, 0), Some(112));
        assert_eq!(bit_after_header(15, 7), Some(119));
        assert_eq!(bit_after_header(15, 8), Some(112));
        let mut f = vec![0u8; 16];
        flip(&mut f, 121);
        assert_eq!(f[15], 0x40);
    }

    #[test]
    fn payload_corruption_changes_only_payload_and_keeps_every_check_good() {
        for frame in [udp(true), udp(false), roce_ud()] {
            for draw in [0, 3, 41, 63, u64::MAX] {
                let mut bad = frame.clone();
                let bit = corrupt_payload(&mut bad, draw).unwrap();
                assert_ne!(bad, frame);
                assert_eq!(check_integrity(&bad), Integrity::Ok, "draw {draw}");
                assert_eq!(roce_drop(&bad), None);
                let range = payload_range(&frame).unwrap();
                assert!(range.contains(&(bit / 8)), "bit {bit} outside {range:?}");
                // Only the payload byte and the checksums/ICRC that cover it changed.
                let changed: Vec<usize> =
                    (0..frame.len()).filter(|&i| bad[i] != frame[i]).collect();
                assert!(
                    changed
                        .iter()
                        .all(|&i| i == bit / 8 || i == 40 || i == 41 || i >= frame.len() - 4),
                    "{changed:?}"
                );
            }
        }
        assert_eq!(
            payload_range(&roce_ud()),
            Some(62..69),
            "after BTH and DETH"
        );
        let mut empty = UdpFrameSpec::new(
            Mac([2, 0, 10, 0, 0, 1]),
            Mac([2, 0, 10, 0, 0, 2]),
            (Ipv4Addr::new(10, 0, 0, 1), 5000),
            (Ipv4Addr::new(10, 0, 0, 2), 7148),
        )
        .build(b"");
        assert_eq!(corrupt_payload(&mut empty, 1), None);
    }

    #[test]
    fn two_flips_can_cancel_in_the_internet_checksum() {
        // Set the top bit of a zero payload word (byte 50) and clear the top bit of a
        // word that has it (the 0xff bytes at 58): one word gains 0x8000, the other loses
        // it, and the ones'-complement sum, so the UDP checksum, is unchanged.
        let good = udp(true);
        let word = (42..good.len() - 1)
            .step_by(2)
            .find(|&i| good[i] & 0x80 != 0)
            .expect("a payload word with its top bit set");
        let mut f = good.clone();
        flip(&mut f, 50 * 8); // byte 50 (payload, zero): top bit set
        flip(&mut f, word * 8); // top bit of that word cleared
        assert_ne!(f, good);
        assert!(passes_checks(&f), "the UDP checksum cannot see it");
        flip(&mut f, word * 8);
        assert!(!passes_checks(&f), "one flip alone it sees");
    }

    #[test]
    fn a_nic_drops_a_roce_frame_by_the_first_check_that_fails() {
        let good = roce_ud();
        assert_eq!(roce_drop(&good), None);
        let at = |byte: usize| {
            let mut f = good.clone();
            flip(&mut f, byte * 8 + 7);
            roce_drop(&f)
        };
        assert_eq!(at(22), Some(DropReason::IpHeader), "TTL");
        assert_eq!(at(50), Some(DropReason::Icrc), "DETH Q_Key");
        assert_eq!(at(good.len() - 6), Some(DropReason::Icrc), "payload");
        let mut with_sum = good.clone();
        UdpHeader::fill_checksum(
            Ipv4Addr::new(10, 0, 0, 1),
            Ipv4Addr::new(10, 0, 0, 2),
            &mut with_sum[34..],
        );
        flip(&mut with_sum, (good.len() - 6) * 8);
        assert_eq!(roce_drop(&with_sum), Some(DropReason::UdpChecksum));
        // Plain UDP goes up whatever its checksums say.
        let mut plain = udp(true);
        flip(&mut plain, 22 * 8);
        assert_eq!(roce_drop(&plain), None);
    }
}
