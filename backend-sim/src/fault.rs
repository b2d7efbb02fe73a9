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
    /// Probability that a frame is lost (independently of every other frame).
    pub loss: f64,
    /// Bursts of loss (a Gilbert-Elliott channel), on top of `loss`.
    pub burst: Option<BurstLoss>,
    /// Probability that a frame is delivered twice.
    pub duplicate: f64,
    /// Probability that one bit of the frame (after the Ethernet header) is flipped on the
    /// wire. Every Ethernet frame carries an FCS (CRC-32, which catches any single-bit
    /// error), so the receiving port (the switch's ingress for [`Direction::ToSwitch`],
    /// the NIC for [`Direction::FromSwitch`]) drops it as [`DropReason::Fcs`].
    pub corrupt: f64,
    /// Probability that one bit (after the Ethernet header) is flipped inside the switch,
    /// after its ingress FCS check and before the egress FCS is made (a memory error in a
    /// store-and-forward buffer): on [`Direction::ToSwitch`] as the frame enters the
    /// switch (every copy it forwards carries the flip), on [`Direction::FromSwitch`] in
    /// the egress buffer of this port. The FCS then passes; only the end-to-end checks can
    /// catch it: the receiving NIC drops a RoCEv2 frame by IPv4 header, UDP checksum or
    /// ICRC ([`DropReason::IpHeader`], [`DropReason::UdpChecksum`], [`DropReason::Icrc`]),
    /// and a RAW_PACKET receive reports IBV_WC_IP_CSUM_OK unset.
    pub corrupt_switch: f64,
    /// Probability that one bit of a frame's payload (the UDP payload; for RoCEv2 the
    /// message payload after the transport headers) is flipped by its sender before the
    /// checksums and the ICRC are made (a buggy sender): the frame is valid on the wire and
    /// only the receiving application's own validation can notice. Frames are made at the
    /// sender, so this acts on [`Direction::ToSwitch`] only (a switch makes no checksums);
    /// frames replayed from a capture are sent as recorded, without it.
    pub corrupt_payload: f64,
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

    /// Only wire corruption, with probability `p`.
    #[must_use]
    pub fn corrupt(p: f64) -> Self {
        LinkFaults {
            corrupt: p,
            ..LinkFaults::default()
        }
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

/// Bursts of loss as a Gilbert-Elliott channel: a link is in a good or a bad state; before
/// each frame it moves from good to bad with probability `enter` and from bad to good with
/// probability `leave`, and in the bad state it loses a frame with probability `loss`
/// (counted as [`DropReason::Burst`]). The mean burst lasts `1 / leave` frames.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BurstLoss {
    /// Probability per frame of entering a burst.
    pub enter: f64,
    /// Probability per frame of leaving a burst.
    pub leave: f64,
    /// Probability of losing a frame during a burst.
    pub loss: f64,
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
    /// Lost in a burst of loss on a link.
    Burst,
    /// Named by the plan's drop list.
    DropList,
    /// A partition was in force.
    Partition,
    /// The receive buffer was full.
    Overrun,
    /// No port has the destination MAC.
    NoRoute,
    /// The receiving port found a bad Ethernet FCS (a bit flipped on the wire): the
    /// switch's ingress or the NIC drops the frame before anything else looks at it.
    Fcs,
    /// The receiving NIC found the IPv4 header of a RoCEv2 frame bad: its checksum fails
    /// or its lengths do not fit the frame (rxe: the kernel's `ip_rcv_core`).
    IpHeader,
    /// The receiving NIC found the UDP checksum of a RoCEv2 frame present and wrong
    /// (rxe: the kernel's UDP input verifies it before handing the datagram to rxe).
    UdpChecksum,
    /// The receiving NIC found the ICRC of a RoCEv2 frame wrong (rxe: `rxe_rcv` calls
    /// `rxe_icrc_check`, drivers/infiniband/sw/rxe/rxe_icrc.c, and drops the packet).
    Icrc,
    /// The frame was larger than the port's maximum frame size.
    TooLong,
}
