//! RAW_PACKET, sans-IO: a send is the whole frame the application built (with the IP and
//! UDP checksums filled in when it asks for the offload); a receive takes the frame as it
//! arrived, in the states that receive, with the checksum flag the NIC reports.

use crate::frame::offload_checksums;
use verbs_api::{QpState, SendFlags, WcFlags};

/// Prepares a frame the application gathered for the wire.
pub(crate) fn prepare_send(frame: &mut [u8], flags: SendFlags) {
    if flags.contains(SendFlags::IP_CSUM) {
        offload_checksums(frame);
    }
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
