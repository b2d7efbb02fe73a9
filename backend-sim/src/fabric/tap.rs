//! What the fabric tells its observers: every frame a port transmits or receives, every
//! hop, drop and timer. Observers ([`super::tracer::Tracer`] for the trace hash and
//! `tracing` events, [`super::capture::Capture`] for pcap) see the ports' traffic the way
//! smoltcp's `Tracer` and `PcapWriter` see a device's: they wrap its edges and change
//! nothing.

use super::link::FlipAt;
use crate::clock::Nanos;
use crate::fault::DropReason;
use crate::ids::PortId;

/// One thing that happened on the fabric.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Seen<'a> {
    /// A port handed a frame to the fabric; `index` is its global packet index.
    Transmit {
        now: Nanos,
        port: PortId,
        index: u64,
        frame: &'a [u8],
    },
    /// A frame crossed an uplink and reached the switch.
    AtSwitch {
        now: Nanos,
        from: PortId,
        index: u64,
    },
    /// A frame reached a port with a good FCS (what a capture on the port shows); the
    /// NIC's checks of a RoCEv2 frame follow, and a [`Seen::Drop`] if one fails.
    Arrive {
        now: Nanos,
        port: PortId,
        index: u64,
        frame: &'a [u8],
    },
    /// A frame was lost near `port`.
    Drop {
        now: Nanos,
        port: PortId,
        index: u64,
        reason: DropReason,
    },
    /// A link delivers a second copy.
    Duplicate {
        now: Nanos,
        port: PortId,
        index: u64,
    },
    /// `bit` of a frame was flipped, `at` where.
    Corrupt { index: u64, bit: usize, at: FlipAt },
    /// A timer of the layer above came due.
    Timer { now: Nanos, token: u64 },
    /// The next record of replay `id` is sent.
    Replay { now: Nanos, id: usize },
}

/// An observer of the fabric.
pub(crate) trait Tap {
    /// Called for every event, in event order.
    fn seen(&mut self, ev: &Seen<'_>);
}
