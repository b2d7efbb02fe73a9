//! RAW_PACKET, sans-IO: a send is the whole frame the application built (with the IP and
//! UDP checksums filled in when it asks for the offload); a receive takes the frame as it
//! arrived, in the states that receive, with the checksum flag the NIC reports.

use crate::fabric::{ip_checksums_verify, is_roce};
use crate::frame::offload_checksums;
use verbs_api::{QpState, SendFlags, WcFlags};

/// Prepares a frame the application gathered for the wire: with IP_CSUM the NIC fills
/// its checksums. True when that sealed the frame ([`offload_checksums`]): the receiving
/// NIC's check is then known to pass while no bit of it changes. A RoCEv2 frame is never
/// sealed: the offload makes no ICRC, which the receiving NIC checks.
pub(crate) fn prepare_send(frame: &mut [u8], flags: SendFlags) -> bool {
    flags.contains(SendFlags::IP_CSUM) && offload_checksums(frame) && !is_roce(frame)
}

/// Whether a RAW_PACKET QP in `state` takes frames.
pub(crate) fn receives(state: QpState) -> bool {
    matches!(
        state,
        QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe
    )
}

/// The completion flags of a received frame: IP_CSUM_OK when it is IPv4 whose header
/// checksum verifies, carrying UDP or TCP whose checksum verifies too (a UDP checksum of
/// 0, "none", has nothing to fail). That is what mlx5 reports: rdma-core's
/// providers/mlx5/cq.c (`handle_responder`) sets the flag from the CQE's L3_OK and L4_OK
/// bits for an IPv4 packet. A frame that fails is still delivered, without the flag.
/// A `sealed` frame (see [`prepare_send`]) passes without being summed again.
pub(crate) fn receive_flags(frame: &[u8], sealed: bool) -> WcFlags {
    if sealed || ip_checksums_verify(frame) {
        WcFlags::IP_CSUM_OK
    } else {
        WcFlags::empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::eth::Mac;
    use crate::frame::{check_integrity, Integrity, UdpFrameSpec};
    use std::net::Ipv4Addr;

    #[test]
    fn a_frame_sent_with_ip_csum_arrives_with_valid_checksums_and_the_flag() {
        let spec = UdpFrameSpec::new(
            Mac([2, 0, 10, 0, 0, 1]),
            Mac([2, 0, 10, 0, 0, 2]),
            (Ipv4Addr::new(10, 0, 0, 1), 5000),
            (Ipv4Addr::new(10, 0, 0, 2), 7148),
        );
        let mut frame = spec.build(b"payload");
        // An application that leaves the checksums to the NIC: zero them.
        frame[24..26].fill(0);
        assert_eq!(check_integrity(&frame), Integrity::BadIpChecksum);
        let mut plain = frame.clone();
        prepare_send(&mut plain, SendFlags::empty());
        assert_eq!(plain, frame, "without IP_CSUM the frame goes out as built");
        prepare_send(&mut frame, SendFlags::IP_CSUM);
        assert_eq!(check_integrity(&frame), Integrity::Ok);
        assert_eq!(receive_flags(&frame, false), WcFlags::IP_CSUM_OK);
    }

    #[test]
    fn a_rocev2_frame_sent_raw_is_never_sealed() {
        use crate::frame::roce::{build_roce_frame, opcode, Bth, RoceHeaders, RoceRoute};
        let route = RoceRoute::new(
            (Mac([2, 0, 10, 0, 0, 1]), Ipv4Addr::new(10, 0, 0, 1)),
            (Mac([2, 0, 10, 0, 0, 2]), Ipv4Addr::new(10, 0, 0, 2)),
        );
        let headers = RoceHeaders {
            bth: Bth {
                opcode: opcode::RC | opcode::SEND_ONLY,
                dest_qp: 0x11,
                ..Bth::default()
            },
            ..RoceHeaders::default()
        };
        let mut frame = build_roce_frame(&route, &headers, b"message");
        // Its ICRC broken: a sealed frame would pass the receiving NIC unchecked.
        let last = frame.len() - 1;
        frame[last] ^= 1;
        assert!(!prepare_send(&mut frame, SendFlags::IP_CSUM));
        assert_eq!(check_integrity(&frame), Integrity::BadIcrc);
    }

    #[test]
    fn the_flag_is_set_only_when_the_checksums_really_verify() {
        let mut spec = UdpFrameSpec::new(
            Mac([2, 0, 10, 0, 0, 1]),
            Mac([2, 0, 10, 0, 0, 2]),
            (Ipv4Addr::new(10, 0, 0, 1), 5000),
            (Ipv4Addr::new(10, 0, 0, 2), 7148),
        );
        let none = spec.build(b"payload");
        spec.udp_checksum = true;
        let summed = spec.build(b"payload");
        assert_eq!(
            receive_flags(&none, false),
            WcFlags::IP_CSUM_OK,
            "no UDP checksum"
        );
        assert_eq!(receive_flags(&summed, false), WcFlags::IP_CSUM_OK);
        let mut bad_ip = summed.clone();
        bad_ip[22] ^= 1; // TTL: the header checksum fails
        assert_eq!(receive_flags(&bad_ip, false), WcFlags::empty());
        let mut bad_udp = summed.clone();
        bad_udp[45] ^= 0x10; // payload: the UDP checksum fails
        assert_eq!(receive_flags(&bad_udp, false), WcFlags::empty());
        let mut unsummed = none.clone();
        unsummed[45] ^= 0x10; // no UDP checksum: nothing catches it
        assert_eq!(receive_flags(&unsummed, false), WcFlags::IP_CSUM_OK);
        // TCP is checked the same way: these bytes are no valid TCP segment.
        let mut tcp = none.clone();
        tcp[23] = crate::frame::ipv4::PROTO_TCP;
        offload_checksums(&mut tcp);
        assert_eq!(receive_flags(&tcp, false), WcFlags::empty());
    }

    #[test]
    fn only_ipv4_frames_get_the_checksum_flag_and_only_ready_qps_receive() {
        let mut arp = vec![0xffu8; 6];
        arp.extend_from_slice(&[2, 0, 10, 0, 0, 1, 0x08, 0x06]);
        arp.resize(60, 0);
        assert_eq!(receive_flags(&arp, false), WcFlags::empty());
        assert!(!receives(QpState::Init));
        assert!(!receives(QpState::Err));
        assert!(receives(QpState::Rtr));
        assert!(receives(QpState::Rts));
    }
}
