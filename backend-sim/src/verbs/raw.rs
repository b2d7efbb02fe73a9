//! RAW_PACKET, sans-IO: a send is the whole frame the application built (with the IP and
//! UDP checksums filled in when it asks for the offload); a receive takes the frame as it
//! arrived, in the states that receive, with the checksum flag the NIC reports.

use crate::frame::offload_checksums;
use verbs_api::{QpState, SendFlags, WcFlags};

/// Prepares a frame the application gathered for the wire; true when the NIC filled
/// every checksum a receiver checks (the application asked for the offload, and it is an
/// IPv4 UDP frame: see [`offload_checksums`]).
pub(crate) fn prepare_send(frame: &mut [u8], flags: SendFlags) -> bool {
    flags.contains(SendFlags::IP_CSUM) && offload_checksums(frame)
}

/// Whether a RAW_PACKET QP in `state` takes frames.
pub(crate) fn receives(state: QpState) -> bool {
    matches!(
        state,
        QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe
    )
}

/// The completion flags of a received frame: IP_CSUM_OK for an untagged IPv4 frame.
pub(crate) fn receive_flags(frame: &[u8]) -> WcFlags {
    if frame.len() >= 34 && frame[12] == 0x08 && frame[13] == 0x00 {
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

    /// A UDP frame from 10.0.0.1:5000 to 10.0.0.2:`port`.
    fn udp_to(port: u16, payload: &[u8]) -> Vec<u8> {
        UdpFrameSpec::new(
            Mac([2, 0, 10, 0, 0, 1]),
            Mac([2, 0, 10, 0, 0, 2]),
            (Ipv4Addr::new(10, 0, 0, 1), 5000),
            (Ipv4Addr::new(10, 0, 0, 2), port),
        )
        .build(payload)
    }

    #[test]
    fn a_frame_sent_with_ip_csum_arrives_with_valid_checksums_and_the_flag() {
        let mut frame = udp_to(7148, b"payload");
        // An application that leaves the checksums to the NIC: zero them.
        frame[24..26].fill(0);
        assert_eq!(check_integrity(&frame), Integrity::BadIpChecksum);
        let mut plain = frame.clone();
        assert!(!prepare_send(&mut plain, SendFlags::empty()));
        assert_eq!(plain, frame, "without IP_CSUM the frame goes out as built");
        assert!(
            prepare_send(&mut frame, SendFlags::IP_CSUM),
            "filled: sound"
        );
        assert_eq!(check_integrity(&frame), Integrity::Ok);
        assert_eq!(receive_flags(&frame), WcFlags::IP_CSUM_OK);
    }

    #[test]
    fn only_a_filled_udp_frame_is_sound_not_roce_or_other_frames() {
        let mut frame = udp_to(4791, &[0; 40]);
        assert!(
            !prepare_send(&mut frame, SendFlags::IP_CSUM),
            "RoCEv2's ICRC is not filled, so the receiver still checks"
        );
        let mut arp = vec![0xffu8; 6];
        arp.extend_from_slice(&[2, 0, 10, 0, 0, 1, 0x08, 0x06]);
        arp.extend_from_slice(&[0; 28]);
        assert!(!prepare_send(&mut arp, SendFlags::IP_CSUM));
    }

    #[test]
    fn only_ipv4_frames_get_the_checksum_flag_and_only_ready_qps_receive() {
        let mut arp = vec![0xffu8; 6];
        arp.extend_from_slice(&[2, 0, 10, 0, 0, 1, 0x08, 0x06]);
        arp.resize(60, 0);
        assert_eq!(receive_flags(&arp), WcFlags::empty());
        assert!(!receives(QpState::Init));
        assert!(!receives(QpState::Err));
        assert!(receives(QpState::Rtr));
        assert!(receives(QpState::Rts));
    }
}
