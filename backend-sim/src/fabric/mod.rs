//! The fabric: a small event loop over hosts' ports, their links and one switch. It is
//! sans-IO in the manner of smoltcp's phy layer and TigerBeetle's packet simulator: the
//! layer above hands it frames with [`Fabric::transmit`] and timers with
//! [`Fabric::schedule_timer`], and takes what comes due from [`Fabric::step`]. Nothing
//! here reads the wall clock, the OS RNG or thread timing, so the same seed and the same
//! calls give the same trace hash.
//!
//! Its parts, each in a file of its own: the topology of hosts, ports and the switch; each
//! port's two link stacks (a `Wire` inside a `FaultInjector`, composed from the fault
//! plan, see [`link`]); the fabric-wide faults (drop list, partitions); the observers of
//! its events (the `Tracer` of the trace hash and `tracing` log, a pcap `Capture` when one
//! is configured); and pcap `Replay` sources.

mod capture;
mod config;
mod corruption;
mod error;
mod events;
mod external;
mod injector;
pub mod link;
mod outbox;
mod path;
mod plan;
mod port;
mod replay;
mod stats;
mod switch;
mod tap;
mod topology;
mod tracer;
pub mod unsummed;

pub use capture::CaptureFilter;
pub(crate) use corruption::{ip_checksums_verify, is_roce};
pub use corruption::{PayloadCorruption, UndetectedCorruption};
pub use error::FabricError;
pub use outbox::{ExternalMsg, ExternalSink};
pub use port::{Host, PortConfig};
pub use replay::{ReplayOptions, ReplaySummary};
pub use stats::{FabricStats, PortStats};

use crate::clock::{Clock, Nanos};
use crate::frame::eth::Mac;
use crate::ids::{HostId, PortId};
use crate::rng::SimRng;
use capture::Capture;
use events::EventQueue;
use outbox::External;
use plan::Plan;
use replay::Replay;
use std::net::Ipv4Addr;
use tap::{Seen, Tap};
use topology::Topology;
use tracer::Tracer;

/// What [`Fabric::step`] hands to the layer above.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// A frame arrived, intact, at a port.
    Frame {
        /// The receiving port.
        port: PortId,
        /// The frame (Ethernet header first, no FCS).
        frame: Vec<u8>,
        /// The global index the frame got when it was transmitted.
        index: u64,
        /// The frame came in through [`Fabric::transmit_sealed`] (or
        /// [`Fabric::arrive_now`]) and no fault changed a bit of it on the way: its
        /// IPv4 and UDP checksums (and a RoCEv2 frame's ICRC) verify, as its sender
        /// vouched, without being summed again.
        sealed: bool,
    },
    /// A timer came due.
    Timer {
        /// The token given to [`Fabric::schedule_timer`].
        token: u64,
    },
}

/// The observers of the fabric, composed from its configuration: the tracer always, a
/// capture when one runs.
#[derive(Debug, Default)]
struct Taps {
    tracer: Tracer,
    capture: Option<Capture>,
}

impl Taps {
    #[inline]
    fn seen(&mut self, ev: Seen<'_>) {
        self.tracer.seen(&ev);
        if let Some(c) = &mut self.capture {
            c.seen(&ev);
        }
    }
}

/// The simulated network.
#[derive(Debug)]
pub struct Fabric {
    clock: Clock,
    queue: EventQueue,
    seed: u64,
    rng: SimRng,
    topo: Topology,
    plan: Plan,
    taps: Taps,
    stats: FabricStats,
    replays: Vec<Replay>,
    payload_corruptions: Vec<PayloadCorruption>,
    /// Frames flipped in the switch: (index, the egress port, or `None` at ingress).
    switch_flipped: rustc_hash::FxHashSet<(u64, Option<PortId>)>,
    undetected: Vec<UndetectedCorruption>,
    scratch: Vec<PortId>,
    loopback_ns: Nanos,
    external: External,
}

impl Fabric {
    /// An empty fabric whose random draws come from `seed`.
    #[must_use]
    pub fn new(seed: u64) -> Self {
        Fabric {
            clock: Clock::default(),
            queue: EventQueue::default(),
            seed,
            rng: SimRng::new(seed),
            topo: Topology::default(),
            plan: Plan::default(),
            taps: Taps::default(),
            stats: FabricStats::default(),
            replays: Vec::new(),
            payload_corruptions: Vec::new(),
            switch_flipped: rustc_hash::FxHashSet::default(),
            undetected: Vec::new(),
            scratch: Vec::new(),
            loopback_ns: 200,
            external: External::default(),
        }
    }

    /// A copy of this fabric for [`crate::Sim::snapshot`]. Refused while a capture runs
    /// or with external ports: a capture's file and the peers outside cannot be copied.
    pub(crate) fn duplicate(&self) -> Result<Fabric, &'static str> {
        if self.taps.capture.is_some() {
            return Err("a capture is running");
        }
        if !self.external.is_unused() {
            return Err("the fabric has external ports");
        }
        Ok(Fabric {
            clock: self.clock,
            queue: self.queue.clone(),
            seed: self.seed,
            rng: self.rng.clone(),
            topo: self.topo.clone(),
            plan: self.plan.clone(),
            taps: Taps {
                tracer: self.taps.tracer.clone(),
                capture: None,
            },
            stats: self.stats,
            replays: self.replays.clone(),
            payload_corruptions: self.payload_corruptions.clone(),
            switch_flipped: self.switch_flipped.clone(),
            undetected: self.undetected.clone(),
            scratch: Vec::new(),
            loopback_ns: self.loopback_ns,
            external: self.external.unused_copy(),
        })
    }

    /// Makes every random stream (the layer above's and each link's) the one of `seed`,
    /// as if the fabric had been made with it. Refused once anything has been drawn:
    /// those draws could not be made again under the new seed.
    pub(crate) fn reseed(&mut self, seed: u64) -> Result<(), &'static str> {
        if self.rng.drawn() || self.topo.ports.iter().any(|p| p.drawn()) {
            return Err("random draws were made before");
        }
        self.seed = seed;
        self.rng = SimRng::new(seed);
        for p in &mut self.topo.ports {
            p.reseed(seed);
        }
        Ok(())
    }

    /// The seed of this run.
    #[must_use]
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Virtual time now.
    #[must_use]
    pub fn now(&self) -> Nanos {
        self.clock.now()
    }

    /// The hash of every event so far: equal for equal seeds, configurations and calls.
    #[must_use]
    pub fn trace_hash(&self) -> u64 {
        self.taps.tracer.hash.value()
    }

    /// Events folded into the trace so far.
    #[must_use]
    pub fn trace_events(&self) -> u64 {
        self.taps.tracer.hash.events()
    }

    /// Folds an event of the layer above (tags from [`crate::trace::tag::USER`] on) into
    /// the trace.
    pub fn trace_event(&mut self, tag: u8, words: &[u64]) {
        self.taps.tracer.hash.event(tag, words);
    }

    /// A random generator for the layer above's own draws: stream 0 of the run's seed,
    /// which no link draws from (the links' streams are their own, see [`link`]).
    pub fn rng(&mut self) -> &mut SimRng {
        &mut self.rng
    }

    /// Counters.
    #[must_use]
    pub fn stats(&self) -> FabricStats {
        self.stats
    }

    /// Every frame a sender corrupted so far, as it left (one record per
    /// [`FabricStats::corrupted_payload`]): what a run's checker needs to tell the damage
    /// a buggy sender did from a receiver's own mistakes.
    #[must_use]
    pub fn payload_corruptions(&self) -> &[PayloadCorruption] {
        &self.payload_corruptions
    }

    /// Every frame flipped inside the switch that a port's checks then passed as good,
    /// as it arrived: bad bytes that go up to the layer above, and nothing below it can
    /// tell (see [`UndetectedCorruption`]).
    #[must_use]
    pub fn undetected_corruptions(&self) -> &[UndetectedCorruption] {
        &self.undetected
    }

    // ---- topology ----

    /// Adds a host with no ports.
    pub fn add_host(&mut self, name: impl Into<String>) -> HostId {
        self.topo.add_host(name.into())
    }

    /// Adds a port to `host`, linked to the switch.
    ///
    /// # Errors
    /// [`FabricError::UnknownHost`], or [`FabricError::DuplicateMac`] /
    /// [`FabricError::DuplicateIp`] if another port has the address.
    pub fn add_port(&mut self, host: HostId, config: PortConfig) -> Result<PortId, FabricError> {
        self.topo
            .add_port(host, config, &self.plan.plan.default_link, self.seed)
    }

    /// Adds an uplink to `host`: a port that leads to another network (a tunnel to
    /// another fabric, a virtual machine's NIC) rather than to one NIC. Its `config`'s
    /// MAC and address are not entered in the switch's tables (nothing is addressed to
    /// the uplink itself; the MAC names its links' random streams and should be unique);
    /// the switch learns the source MACs of the frames arriving from it, and sends it
    /// unicast for MACs it does not know and every multicast frame (see the switch).
    ///
    /// # Errors
    /// [`FabricError::UnknownHost`].
    pub fn add_uplink(&mut self, host: HostId, config: PortConfig) -> Result<PortId, FabricError> {
        self.topo
            .add_uplink(host, config, &self.plan.plan.default_link, self.seed)
    }

    /// The uplink on which the switch learned `mac`, if any.
    #[must_use]
    pub fn learned_port(&self, mac: Mac) -> Option<PortId> {
        self.topo.switch.learned_port(mac)
    }

    /// Adds a host with one port at `ipv4` (MAC derived from it, default link).
    ///
    /// # Errors
    /// As [`Fabric::add_port`].
    pub fn add_host_with_port(
        &mut self,
        name: impl Into<String>,
        ipv4: Ipv4Addr,
    ) -> Result<(HostId, PortId), FabricError> {
        let h = self.add_host(name);
        let p = self.add_port(h, PortConfig::with_ip(ipv4))?;
        Ok((h, p))
    }

    /// The hosts.
    #[must_use]
    pub fn hosts(&self) -> &[Host] {
        &self.topo.hosts
    }

    /// Number of ports.
    #[must_use]
    pub fn port_count(&self) -> usize {
        self.topo.ports.len()
    }

    /// A port's configuration.
    ///
    /// # Errors
    /// [`FabricError::UnknownPort`].
    pub fn port_config(&self, port: PortId) -> Result<&PortConfig, FabricError> {
        self.topo.port(port).map(|p| &p.config)
    }

    /// The host a port belongs to.
    ///
    /// # Errors
    /// [`FabricError::UnknownPort`].
    pub fn port_host(&self, port: PortId) -> Result<HostId, FabricError> {
        self.topo.port(port).map(|p| p.host)
    }

    /// A port's counters.
    ///
    /// # Errors
    /// [`FabricError::UnknownPort`].
    pub fn port_stats(&self, port: PortId) -> Result<PortStats, FabricError> {
        self.topo.port(port).map(|p| p.stats)
    }

    /// The port that owns `ip`, if any (the fabric's stand-in for ARP).
    #[must_use]
    pub fn port_of_ip(&self, ip: Ipv4Addr) -> Option<PortId> {
        self.topo.switch.port_of_ip(ip)
    }

    /// The MAC of the port that owns `ip`, if any.
    #[must_use]
    pub fn mac_of_ip(&self, ip: Ipv4Addr) -> Option<Mac> {
        self.topo.mac_of_ip(ip)
    }

    /// Registers one membership of `port` in the IPv4 multicast `group` at the switch
    /// (what IGMP snooping would learn; several QPs may each add one).
    ///
    /// # Errors
    /// [`FabricError::UnknownPort`].
    pub fn join_group(&mut self, port: PortId, group: Ipv4Addr) -> Result<(), FabricError> {
        self.topo.port(port)?;
        self.topo.switch.join(port, group);
        self.external.tell(port, ExternalMsg::JoinGroup(group));
        Ok(())
    }

    /// Drops one membership; returns whether there was one.
    ///
    /// # Errors
    /// [`FabricError::UnknownPort`].
    pub fn leave_group(&mut self, port: PortId, group: Ipv4Addr) -> Result<bool, FabricError> {
        self.topo.port(port)?;
        let had = self.topo.switch.leave(port, group);
        if had {
            self.external.tell(port, ExternalMsg::LeaveGroup(group));
        }
        Ok(had)
    }

    /// Registers one membership of `port` in the Ethernet multicast group `mac` (for
    /// frames whose group is named only by MAC).
    ///
    /// # Errors
    /// [`FabricError::UnknownPort`].
    pub fn join_mac_group(&mut self, port: PortId, mac: Mac) -> Result<(), FabricError> {
        self.topo.port(port)?;
        self.topo.switch.join_mac(port, mac);
        self.external.tell(port, ExternalMsg::JoinMac(mac));
        Ok(())
    }

    /// Drops one MAC-group membership; returns whether there was one.
    ///
    /// # Errors
    /// [`FabricError::UnknownPort`].
    pub fn leave_mac_group(&mut self, port: PortId, mac: Mac) -> Result<bool, FabricError> {
        self.topo.port(port)?;
        let had = self.topo.switch.leave_mac(port, mac);
        if had {
            self.external.tell(port, ExternalMsg::LeaveMac(mac));
        }
        Ok(had)
    }

    /// True if `port` is a member of `group`.
    #[must_use]
    pub fn is_member(&self, port: PortId, group: Ipv4Addr) -> bool {
        self.topo.switch.is_member(port, group)
    }
}
