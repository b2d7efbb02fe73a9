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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::{CaptureFilter, ExternalMsg};
    use crate::fault::{Direction, LinkFaults};
    use crate::frame::eth::Mac;
    use crate::frame::roce::{
        build_roce_frame_into, build_roce_frame_unsummed_into, fill_icrc, opcode, RoceHeaders,
        RoceRoute,
    };
    use std::net::Ipv4Addr;

    const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

    fn frame(src: Mac, dst: Mac, payload: usize, sum: bool) -> Vec<u8> {
        let mut h = RoceHeaders::default();
        h.bth.opcode = opcode::SEND_ONLY;
        let route = RoceRoute::new((src, A), (dst, B));
        let mut f = Vec::new();
        if sum {
            build_roce_frame_into(&mut f, &route, &h, &vec![7; payload]);
        } else {
            build_roce_frame_unsummed_into(&mut f, &route, &h, &vec![7; payload]);
        }
        f
    }

    /// A fabric whose port `a` leads outside through a sink.
    fn open() -> (Fabric, PortId, Mac, Mac) {
        let mut f = Fabric::new(3);
        let (_, a) = f.add_host_with_port("a", A).unwrap();
        let (_, b) = f.add_host_with_port("b", B).unwrap();
        let (ma, mb) = (f.port_config(a).unwrap().mac, f.port_config(b).unwrap().mac);
        f.set_external(a).unwrap();
        f.set_external_sink(Some(Box::new(|_, _: &mut ExternalMsg| {})));
        (f, a, ma, mb)
    }

    #[test]
    fn writing_the_icrc_later_gives_the_frame_built_whole() {
        let (ma, mb) = (Mac([2, 0, 0, 0, 0, 1]), Mac([2, 0, 0, 0, 0, 2]));
        for payload in [0, 1, 3, 4096] {
            let mut f = frame(ma, mb, payload, false);
            assert!(icrc_maybe_unwritten(&f, true));
            assert!(!icrc_maybe_unwritten(&f, false), "only a sealed frame");
            fill_icrc(&mut f);
            assert_eq!(f, frame(ma, mb, payload, true));
            let again = f.clone();
            fill_icrc(&mut f);
            assert_eq!(f, again, "writing it twice changes nothing");
        }
    }

    #[test]
    fn the_icrc_is_left_only_where_nothing_here_reads_it() {
        let (f, a, ma, mb) = open();
        assert!(f.may_leave_icrc(a, &frame(ma, mb, 4096, false)));
        // Its last bytes in the trace's hash.
        assert!(!f.may_leave_icrc(a, &frame(ma, mb, 0, false)));
        // NIC loopback and multicast stay (partly) inside.
        assert!(!f.may_leave_icrc(a, &frame(ma, ma, 4096, false)));
        let group = Mac([0x01, 0x00, 0x5e, 1, 2, 3]);
        assert!(!f.may_leave_icrc(a, &frame(ma, group, 4096, false)));

        let (mut f, a, ma, mb) = open();
        f.capture_to_memory(CaptureFilter::All).unwrap();
        assert!(!f.may_leave_icrc(a, &frame(ma, mb, 4096, false)));
        assert!(f.reads_sealed_icrc());

        let (mut f, a, ma, mb) = open();
        let faults = LinkFaults {
            corrupt_payload: 0.5,
            ..LinkFaults::default()
        };
        f.set_link_faults(a, Direction::ToSwitch, faults).unwrap();
        assert!(!f.may_leave_icrc(a, &frame(ma, mb, 4096, false)));

        let (mut f, a, ma, mb) = open();
        f.set_external_sink(None);
        assert!(
            !f.may_leave_icrc(a, &frame(ma, mb, 4096, false)),
            "the outbox"
        );
        assert!(!f.reads_sealed_icrc());
    }
}
