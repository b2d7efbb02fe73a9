//! Faults as plain values. They derive `Debug`, `Clone` and `PartialEq` so a property test
//! can generate and shrink them and a failing case prints as the exact value to paste into
//! a regression test. The run's seed only draws the probabilistic ones.

use crate::clock::Nanos;
use crate::ids::PortId;

/// Which way across a host's link to the switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Direction {
    /// From the host port to the switch (the port's transmit side).
    ToSwitch,
    /// From the switch to the host port (the port's receive side).
    FromSwitch,
}

/// Faults on one direction of one link.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LinkFaults {
    /// Probability that a frame is lost.
    pub loss: f64,
    /// Probability that a frame is delivered twice.
    pub duplicate: f64,
    /// Probability that one bit of the frame (after the Ethernet header) is flipped. The
    /// receiver then drops it by IP checksum, UDP checksum or ICRC, as hardware does.
    pub corrupt: f64,
    /// Extra fixed delay for every frame.
    pub delay_ns: Nanos,
    /// Extra uniform delay in `0..=jitter_ns` per frame; order is kept (a frame never
    /// overtakes the one before it).
    pub jitter_ns: Nanos,
    /// Probability that a frame is held back by a uniform `1..=reorder_window_ns`, free to
    /// be overtaken by later frames.
    pub reorder: f64,
    /// The largest hold-back of a reordered frame.
    pub reorder_window_ns: Nanos,
    /// Receive-buffer size in frames: frames arriving while this many are still queued for
    /// the link are dropped (buffer overrun, as on a switch egress port or a NIC whose
    /// receive FIFO is full). `None`: unbounded.
    pub buffer_frames: Option<u32>,
}

impl LinkFaults {
    /// True if this value injects nothing.
    #[must_use]
    pub fn is_clean(&self) -> bool {
        *self == LinkFaults::default()
    }

    /// Only loss, with probability `p`.
    #[must_use]
    pub fn loss(p: f64) -> Self {
        LinkFaults {
            loss: p,
            ..LinkFaults::default()
        }
    }
}

/// Faults on one link direction of one port.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkFaultRule {
    /// The port whose link it is.
    pub port: PortId,
    /// Which direction.
    pub direction: Direction,
    /// The faults.
    pub faults: LinkFaults,
}

/// A network partition: from `start_ns` until `end_ns` (exclusive) no frame crosses the
/// switch between a port of `side_a` and a port of `side_b` (an empty `side_b` means every
/// port not in `side_a`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Partition {
    /// One side.
    pub side_a: Vec<PortId>,
    /// The other side (empty: everybody else).
    pub side_b: Vec<PortId>,
    /// When it starts.
    pub start_ns: Nanos,
    /// When it heals.
    pub end_ns: Nanos,
}

impl Partition {
    /// True if a frame from `from` to `to` at `now` is cut off by this partition.
    #[must_use]
    pub fn cuts(&self, now: Nanos, from: PortId, to: PortId) -> bool {
        if now < self.start_ns || now >= self.end_ns {
            return false;
        }
        let a_from = self.side_a.contains(&from);
        let a_to = self.side_a.contains(&to);
        let b = |p: PortId, in_a: bool| {
            if self.side_b.is_empty() {
                !in_a
            } else {
                self.side_b.contains(&p)
            }
        };
        (a_from && b(to, a_to)) || (a_to && b(from, a_from))
    }
}

/// Every fault of a run.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FaultPlan {
    /// Faults for every link direction not named in `links`.
    pub default_link: LinkFaults,
    /// Faults of particular link directions.
    pub links: Vec<LinkFaultRule>,
    /// Exact global packet indices to drop: the n-th frame handed to the fabric (counting
    /// from 0, in transmit order, replayed frames included) is lost.
    pub drop_packets: Vec<u64>,
    /// Partitions.
    pub partitions: Vec<Partition>,
}

impl FaultPlan {
    /// No faults at all.
    #[must_use]
    pub fn none() -> Self {
        FaultPlan::default()
    }
}

/// Why the fabric lost a frame (counted in [`crate::FabricStats`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// Random loss on a link.
    Loss,
    /// Named by the plan's drop list.
    DropList,
    /// A partition was in force.
    Partition,
    /// The receive buffer was full.
    Overrun,
    /// No port has the destination MAC.
    NoRoute,
    /// The receiver found a bad checksum or ICRC (the frame was corrupted).
    BadChecksum,
    /// The frame was larger than the port's maximum frame size.
    TooLong,
}
