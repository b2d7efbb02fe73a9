//! Sealed RoCE frames whose ICRC a sending NIC left unwritten (four zero bytes), because
//! nothing can read it before the frame leaves the simulation by an external port's sink.
//!
//! A sealed frame's ICRC is right by construction (see [`super::Fabric::transmit_sealed`]),
//! so whoever may read the bytes writes it first ([`crate::frame::roce::fill_icrc`]): the
//! sending NIC at once when its own host could read it (a sniffer on the device, a capture,
//! a payload fault, NIC or multicast loopback, a frame short enough for the trace's hash
//! to take its last bytes), the sink's owner before the frame goes anywhere else than to a
//! receiving simulation (the emulator's fabric process checks and captures what it
//! gets), and a receiving simulation when it has something that reads it
//! ([`Fabric::reads_sealed_icrc`]). Writing an ICRC that is already written changes
//! nothing (the ICRC of a sealed frame whose ICRC happens to be 0 is written again as 0),
//! so "sealed, RoCEv2 over IPv4, last four bytes zero" is all a reader needs to know.

use super::topology::dst_mac;
use super::Fabric;
use crate::ids::PortId;

/// The bytes of a frame's start that the trace hash takes (`TraceHash::bytes_head`): an
/// ICRC left unwritten must lie past them, or the trace would differ.
const TRACED_HEAD: usize = 64;

/// True if a `sealed` frame may carry an unwritten ICRC: RoCEv2 over IPv4 (the only
/// frames a NIC seals that have one) whose last four bytes are zero.
#[must_use]
pub fn icrc_maybe_unwritten(frame: &[u8], sealed: bool) -> bool {
    sealed
        && frame.get(12..14) == Some(&[0x08, 0x00])
        && super::corruption::is_roce(frame)
        && frame.ends_with(&[0; 4])
}

impl Fabric {
    /// True if nothing in this simulation can read the ICRC of a sealed RoCEv2 `frame`
    /// that port `from` transmits now (the caller has no sniffer to show it to): the port's
    /// link leads outside through the sink, which takes it at once; nothing captures; the
    /// port corrupts no sender's payload; the frame goes to another port's unicast MAC; and
    /// its ICRC lies past the bytes the trace hashes.
    #[must_use]
    pub fn may_leave_icrc(&self, from: PortId, frame: &[u8]) -> bool {
        let Ok(port) = self.topo.port(from) else {
            return false;
        };
        let dst = dst_mac(frame);
        frame.len() >= TRACED_HEAD + 4
            && self.external.sink.is_some()
            && self.external.owns(from)
            && self.taps.capture.is_none()
            && !port.up.may_flip_payload()
            && !dst.is_multicast()
            && dst != port.config.mac
    }

    /// True if a frame arriving here can be read whole by something of the fabric (a
    /// capture); the receiving NIC's sniffers are the NIC's to count.
    #[must_use]
    pub fn reads_sealed_icrc(&self) -> bool {
        self.taps.capture.is_some()
    }
}
