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
mod corruption;
mod error;
mod events;
mod external;
mod injector;
pub mod link;
mod plan;
mod port;
mod replay;
mod stats;
mod switch;
mod tap;
mod topology;
mod tracer;

pub use capture::CaptureFilter;
pub(crate) use corruption::{ip_checksums_verify, is_roce};
pub use corruption::{PayloadCorruption, UndetectedCorruption};
pub use error::FabricError;
pub use external::{ExternalMsg, ExternalSink};
pub use port::{Host, PortConfig};
pub use replay::{ReplayOptions, ReplaySummary};
pub use stats::{FabricStats, PortStats};

use crate::clock::{Clock, Nanos};
use crate::fault::{Direction, DropReason, FaultPlan, LinkFaults};
use crate::frame::eth::Mac;
use crate::ids::{HostId, PortId};
use crate::pcap::PcapFile;
use crate::rng::SimRng;
use capture::{Capture, Sink};
use events::{EventKind, EventQueue};
use external::External;
use link::{FlipAt, Link, Verdict};
use plan::Plan;
use replay::Replay;
use std::io;
use std::net::Ipv4Addr;
use tap::{Seen, Tap};
use topology::{dst_mac, ipv4_dst, Topology};
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
        /// The frame came in through [`Fabric::transmit_sealed`] and no fault changed a
        /// bit of it on the way: its IPv4 and UDP checksums verify, as its sender
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

    // ---- configuration: faults, capture, replay ----

    /// Installs a fault plan, replacing the previous one (links not named get the plan's
    /// default faults).
    ///
    /// # Errors
    /// [`FabricError::UnknownPort`] if a rule names a port that does not exist; nothing is
    /// changed then.
    pub fn set_faults(&mut self, plan: FaultPlan) -> Result<(), FabricError> {
        for r in &plan.links {
            self.topo.port(r.port)?;
        }
        for p in &mut self.topo.ports {
            p.up.set_faults(plan.default_link.clone());
            p.down.set_faults(plan.default_link.clone());
        }
        for r in &plan.links {
            self.set_link_faults(r.port, r.direction, r.faults.clone())?;
        }
        tracing::debug!(
            links = plan.links.len(),
            drop_list = plan.drop_packets.len(),
            partitions = plan.partitions.len(),
            "fault plan installed"
        );
        self.plan = Plan::new(plan);
        Ok(())
    }

    /// Sets the faults of one link direction, leaving the rest of the plan alone.
    ///
    /// # Errors
    /// [`FabricError::UnknownPort`].
    pub fn set_link_faults(
        &mut self,
        port: PortId,
        direction: Direction,
        faults: LinkFaults,
    ) -> Result<(), FabricError> {
        let p = self.topo.port_mut(port)?;
        match direction {
            Direction::ToSwitch => p.up.set_faults(faults),
            Direction::FromSwitch => p.down.set_faults(faults),
        }
        Ok(())
    }

    /// The plan in force.
    #[must_use]
    pub fn faults(&self) -> &FaultPlan {
        &self.plan.plan
    }

    fn start_capture(&mut self, filter: CaptureFilter, sink: Sink) -> Result<(), FabricError> {
        if let CaptureFilter::Port(p) = filter {
            self.topo.port(p)?;
        }
        self.taps.capture = Some(Capture::new(filter, sink)?);
        Ok(())
    }

    /// Starts capturing into memory (replacing any capture in progress, whose output is
    /// discarded); [`Fabric::finish_capture`] returns the pcap bytes.
    ///
    /// # Errors
    /// [`FabricError::UnknownPort`] for a port filter naming no port.
    pub fn capture_to_memory(&mut self, filter: CaptureFilter) -> Result<(), FabricError> {
        self.start_capture(filter, Sink::Memory(Vec::new()))
    }

    /// Starts capturing into a pcap file at `path`.
    ///
    /// # Errors
    /// [`FabricError::UnknownPort`], or [`FabricError::Io`] if the file cannot be created.
    pub fn capture_to_file(
        &mut self,
        path: impl AsRef<std::path::Path>,
        filter: CaptureFilter,
    ) -> Result<(), FabricError> {
        if let CaptureFilter::Port(p) = filter {
            self.topo.port(p)?;
        }
        let f = std::fs::File::create(path)?;
        self.start_capture(filter, Sink::File(io::BufWriter::new(f)))
    }

    /// Ends the capture: returns the pcap bytes of a memory capture (`None` for a file
    /// capture, which is flushed, or when none was running).
    ///
    /// # Errors
    /// [`FabricError::Io`] with the first write error of the capture.
    pub fn finish_capture(&mut self) -> Result<Option<Vec<u8>>, FabricError> {
        let Some(c) = self.taps.capture.take() else {
            return Ok(None);
        };
        match c.finish()? {
            Sink::Memory(v) => Ok(Some(v)),
            Sink::File(_) => Ok(None),
        }
    }

    /// Schedules a pcap's records to be transmitted from port `from` at their recorded
    /// spacing, as if that port's host sent them; the fault plan applies to them like to any
    /// frame. Every record is converted before anything is scheduled, so a bad file
    /// schedules nothing.
    ///
    /// # Errors
    /// [`FabricError::UnknownPort`], or [`FabricError::Pcap`] naming the first bad record.
    pub fn replay(
        &mut self,
        from: PortId,
        pcap: &PcapFile,
        opts: ReplayOptions,
    ) -> Result<ReplaySummary, FabricError> {
        self.schedule_replay(from, pcap, opts, false)
    }

    /// Schedules a capture of this fabric (an Ethernet pcap such as
    /// [`CaptureFilter::All`] writes) to be transmitted again in its recorded order and at
    /// its recorded times, each frame from the port whose MAC is its source (`default`
    /// when none is). A capture of a run, replayed on a fabric with the same hosts, seed
    /// and fault plan, puts the same frames on the same links in the same order, so every
    /// link draws the same faults and every receiver gets what it got in the run, however
    /// many senders there were.
    ///
    /// # Errors
    /// As [`Fabric::replay`].
    pub fn replay_by_source(
        &mut self,
        default: PortId,
        pcap: &PcapFile,
        opts: ReplayOptions,
    ) -> Result<ReplaySummary, FabricError> {
        self.schedule_replay(default, pcap, opts, true)
    }

    fn schedule_replay(
        &mut self,
        from: PortId,
        pcap: &PcapFile,
        opts: ReplayOptions,
        by_source: bool,
    ) -> Result<ReplaySummary, FabricError> {
        let src_mac = self.topo.port(from)?.config.mac;
        let now = self.clock.now();
        let start = opts.start_at.unwrap_or(now).max(now);
        let resolve = |ip: Ipv4Addr| self.topo.mac_of_ip(ip);
        let switch = &self.topo.switch;
        let port_of = |f: &[u8]| {
            let src = Mac([f[6], f[7], f[8], f[9], f[10], f[11]]);
            by_source
                .then(|| switch.port_of_mac(src))
                .flatten()
                .unwrap_or(from)
        };
        let (replay, summary) = Replay::new(pcap, src_mac, &resolve, &port_of, start)?;
        if let Some(at) = replay.next_at() {
            let id = self.replays.len();
            self.replays.push(replay);
            self.queue.push(at, EventKind::Replay { id });
        }
        tracing::debug!(%from, frames = summary.frames, skipped = summary.skipped, "replay scheduled");
        Ok(summary)
    }

    /// Reads a pcap file and replays it as [`Fabric::replay`] does.
    ///
    /// # Errors
    /// As [`PcapFile::read`] and [`Fabric::replay`].
    pub fn replay_file(
        &mut self,
        from: PortId,
        path: impl AsRef<std::path::Path>,
        opts: ReplayOptions,
    ) -> Result<ReplaySummary, FabricError> {
        let pcap = PcapFile::read(path)?;
        self.replay(from, &pcap, opts)
    }

    // ---- the event loop ----

    /// Sets a timer: [`Fabric::step`] returns [`Output::Timer`] with `token` at virtual time
    /// `at` (or now, if `at` has passed). Timers cannot be cancelled; the layer above
    /// ignores tokens it no longer cares about.
    pub fn schedule_timer(&mut self, at: Nanos, token: u64) {
        let at = at.max(self.clock.now());
        self.queue.push(at, EventKind::Timer { token });
    }

    /// Hands a frame to the fabric at `from` now. Returns the frame's global packet index
    /// (what [`FaultPlan::drop_packets`] names), also when a fault then loses it.
    ///
    /// # Errors
    /// [`FabricError::UnknownPort`], [`FabricError::FrameTooShort`] or
    /// [`FabricError::FrameTooLong`]; no index is used up then.
    pub fn transmit(&mut self, from: PortId, frame: Vec<u8>) -> Result<u64, FabricError> {
        self.send_frame(from, frame, true, false)
    }

    /// [`Fabric::transmit`] of a frame whose IPv4 header checksum and UDP checksum the
    /// caller vouches for (a sending NIC's checksum offload filled them, see
    /// [`crate::frame::offload_checksums`]): it arrives [`Output::Frame`]`::sealed`
    /// unless a fault flips one of its bits.
    ///
    /// # Errors
    /// As [`Fabric::transmit`].
    pub fn transmit_sealed(&mut self, from: PortId, frame: Vec<u8>) -> Result<u64, FabricError> {
        self.send_frame(from, frame, true, true)
    }

    /// [`Fabric::transmit`] of a frame made at `from` now (`made`: the sender's payload
    /// corruption applies) or replayed as recorded; `sealed` as
    /// [`Fabric::transmit_sealed`].
    fn send_frame(
        &mut self,
        from: PortId,
        mut frame: Vec<u8>,
        made: bool,
        mut sealed: bool,
    ) -> Result<u64, FabricError> {
        let port = self.topo.port_mut(from)?;
        if frame.len() < 14 {
            return Err(FabricError::FrameTooShort(frame.len()));
        }
        if frame.len() > port.config.max_frame {
            self.stats.dropped_too_long += 1;
            return Err(FabricError::FrameTooLong {
                len: frame.len(),
                max: port.config.max_frame,
            });
        }
        let now = self.clock.now();
        let index = self.stats.transmitted;
        self.stats.transmitted += 1;
        port.stats.tx_frames += 1;
        port.stats.tx_bytes += frame.len() as u64;
        let (mac, mc_loopback) = (port.config.mac, port.config.multicast_loopback);
        // A buggy sender corrupts the payload before the checksums are made: the frame
        // leaves (and is captured) bad but valid.
        if let Some(draw) = made.then(|| port.up.payload_flip()).flatten() {
            if let Some(bit) = corruption::corrupt_payload(&mut frame, draw) {
                // The checksums are made again over the flipped payload, but the seal
                // covered the bytes as they were: the receiver sums them itself.
                sealed = false;
                self.stats.corrupted_payload += 1;
                self.payload_corruptions.push(PayloadCorruption {
                    index,
                    bit,
                    frame: frame.clone(),
                });
                self.taps.seen(Seen::Corrupt {
                    index,
                    bit,
                    at: FlipAt::Payload,
                });
            }
        }
        self.taps.seen(Seen::Transmit {
            now,
            port: from,
            index,
            frame: &frame,
        });
        if self.plan.drops(index) {
            self.drop(DropReason::DropList, now, from, index);
            return Ok(index);
        }
        let dst = dst_mac(&frame);
        if dst == mac {
            // NIC loopback: never reaches the wire.
            let at = now + self.loopback_ns;
            self.queue.push(
                at,
                EventKind::Arrive {
                    to: from,
                    frame,
                    index,
                    sealed,
                },
            );
            return Ok(index);
        }
        // Multicast loopback: a copy for the sending port when it is a member of the
        // frame's group, by IPv4 group or by Ethernet group (a flow rule naming a
        // multicast MAC joins one), as mlx5 loops multicast back to its own steering.
        if dst.is_multicast() && mc_loopback {
            let by_ip = ipv4_dst(&frame)
                .is_some_and(|g| g.is_multicast() && self.topo.switch.is_member(from, g));
            if by_ip || self.topo.switch.is_mac_member(from, dst) {
                let at = now + self.loopback_ns;
                let to = from;
                let frame = frame.clone();
                let arrive = EventKind::Arrive {
                    to,
                    frame,
                    index,
                    sealed,
                };
                self.queue.push(at, arrive);
            }
        }
        if self.external.owns(from) {
            // The link leads outside: its switch takes it from there.
            self.external
                .tell(from, ExternalMsg::Frame { frame, index });
            return Ok(index);
        }
        let verdict = self.topo.ports[from.idx()].up.send(now, frame.len());
        self.cross(verdict, now, from, None, frame, index, sealed);
        Ok(index)
    }

    /// Acts on a link's verdict for a frame crossing from `from` (to the switch when `to`
    /// is `None`, else down to port `to`): the drop, the flipped bit (on the wire the
    /// receiving port's FCS check drops the frame; in the switch it goes on, bad), the
    /// duplicate and the arrival. A flipped bit breaks the frame's seal.
    #[allow(clippy::too_many_arguments)]
    fn cross(
        &mut self,
        verdict: Verdict,
        now: Nanos,
        from: PortId,
        to: Option<PortId>,
        mut frame: Vec<u8>,
        index: u64,
        mut sealed: bool,
    ) {
        let near = to.unwrap_or(from);
        let (arrival, duplicate, flip) = match verdict {
            Verdict::Drop(r) => return self.drop(r, now, near, index),
            Verdict::Deliver {
                arrival,
                duplicate,
                flip,
                ..
            } => (arrival, duplicate, flip),
        };
        if let Some(f) = flip {
            if let Some(bit) = corruption::bit_after_header(frame.len(), f.draw) {
                corruption::flip(&mut frame, bit);
                sealed = false;
                self.taps.seen(Seen::Corrupt {
                    index,
                    bit,
                    at: f.at,
                });
                if f.at == FlipAt::Wire {
                    // Every Ethernet frame carries an FCS (CRC-32) that catches any
                    // single-bit error: the receiving port drops the frame.
                    self.stats.corrupted_wire += 1;
                    let stats = &mut self.topo.ports[near.idx()].stats;
                    match to {
                        Some(_) => stats.rx_fcs_errors += 1,
                        None => stats.switch_fcs_errors += 1,
                    }
                    return self.drop(DropReason::Fcs, now, near, index);
                }
                self.stats.corrupted_switch += 1;
                self.switch_flipped.insert((index, to));
            }
        }
        let event = |frame| match to {
            None => EventKind::AtSwitch {
                from,
                frame,
                index,
                sealed,
            },
            Some(to) => EventKind::Arrive {
                to,
                frame,
                index,
                sealed,
            },
        };
        if duplicate {
            self.stats.duplicated += 1;
            self.taps.seen(Seen::Duplicate {
                now,
                port: near,
                index,
            });
            self.queue.push(arrival, event(frame.clone()));
        }
        self.queue.push(arrival, event(frame));
    }

    fn drop(&mut self, reason: DropReason, now: Nanos, port: PortId, index: u64) {
        self.stats.count_drop(reason);
        if reason == DropReason::Overrun {
            self.topo.ports[port.idx()].stats.rx_overrun += 1;
        }
        self.taps.seen(Seen::Drop {
            now,
            port,
            index,
            reason,
        });
    }

    /// Virtual time of the next event, if any.
    #[must_use]
    pub fn next_event_time(&self) -> Option<Nanos> {
        self.queue.peek_time()
    }

    /// Events waiting.
    #[must_use]
    pub fn pending_events(&self) -> usize {
        self.queue.len()
    }

    /// True while a frame transmitted before the one of global index `index` (see
    /// [`Fabric::transmit`]) is still crossing the fabric: what a message that must not
    /// overtake them waits for.
    #[must_use]
    pub fn frames_in_flight_before(&self, index: u64) -> bool {
        self.queue.holds_frame_below(index)
    }

    /// Takes events in (time, sequence) order until one produces an [`Output`] for the
    /// layer above, advancing the clock to it. `None` when the queue is empty.
    pub fn step(&mut self) -> Option<Output> {
        self.step_until(Nanos::MAX)
    }

    /// Like [`Fabric::step`], but takes no event later than `deadline`; when none is left
    /// by then the clock moves to `deadline` (if it is not `Nanos::MAX`) and `None` is
    /// returned.
    pub fn step_until(&mut self, deadline: Nanos) -> Option<Output> {
        let now = self.clock.now();
        let deadline = self
            .external
            .horizon
            .map_or(deadline, |h| deadline.min(h.max(now)));
        loop {
            match self.queue.peek_time() {
                Some(t) if t <= deadline => {}
                _ => {
                    if deadline != Nanos::MAX {
                        self.clock.advance_to(deadline);
                    }
                    return None;
                }
            }
            let ev = self.queue.pop()?;
            self.clock.advance_to(ev.time);
            let now = ev.time;
            match ev.kind {
                EventKind::AtSwitch {
                    from,
                    frame,
                    index,
                    sealed,
                } => self.forward(now, from, frame, index, sealed),
                EventKind::Arrive {
                    to,
                    frame,
                    index,
                    sealed,
                } => {
                    if let Some(out) = self.arrive(now, to, frame, index, sealed) {
                        return Some(out);
                    }
                }
                EventKind::Timer { token } => {
                    self.taps.seen(Seen::Timer { now, token });
                    return Some(Output::Timer { token });
                }
                EventKind::Replay { id } => self.replay_next(now, id),
            }
        }
    }

    /// Runs until no event is left, handing every output to `handle` (which may transmit
    /// and set timers in turn).
    pub fn run_until_idle(&mut self, mut handle: impl FnMut(&mut Fabric, Output)) {
        while let Some(out) = self.step() {
            handle(self, out);
        }
    }

    /// Runs until idle and returns every output, for tests of the bare fabric.
    pub fn drain(&mut self) -> Vec<(Nanos, Output)> {
        let mut v = Vec::new();
        while let Some(out) = self.step() {
            v.push((self.now(), out));
        }
        v
    }

    /// A frame at the switch: a copy down every target port's link (or a drop when there
    /// is none).
    fn forward(&mut self, now: Nanos, from: PortId, frame: Vec<u8>, index: u64, sealed: bool) {
        self.taps.seen(Seen::AtSwitch { now, from, index });
        if frame.len() >= 12 {
            let src = Mac([frame[6], frame[7], frame[8], frame[9], frame[10], frame[11]]);
            self.topo.switch.learn(from, src);
        }
        let mut targets = std::mem::take(&mut self.scratch);
        self.topo.targets(from, &frame, &mut targets);
        if let Some((&last, rest)) = targets.split_last() {
            for &to in rest {
                self.egress(now, from, to, frame.clone(), index, sealed);
            }
            self.egress(now, from, last, frame, index, sealed);
        } else {
            self.drop(DropReason::NoRoute, now, from, index);
        }
        self.scratch = targets;
    }

    fn egress(
        &mut self,
        now: Nanos,
        from: PortId,
        to: PortId,
        frame: Vec<u8>,
        index: u64,
        sealed: bool,
    ) {
        if self.plan.cuts(now, from, to) {
            return self.drop(DropReason::Partition, now, to, index);
        }
        let verdict = self.topo.ports[to.idx()].down.send(now, frame.len());
        self.cross(verdict, now, from, Some(to), frame, index, sealed);
    }

    /// A frame at a port (its FCS good): seen there (a capture of the port shows it), then
    /// the NIC's checks of a RoCEv2 frame, then up to the layer above.
    fn arrive(
        &mut self,
        now: Nanos,
        to: PortId,
        frame: Vec<u8>,
        index: u64,
        sealed: bool,
    ) -> Option<Output> {
        let port = &mut self.topo.ports[to.idx()];
        if frame.len() > port.config.max_frame {
            self.drop(DropReason::TooLong, now, to, index);
            return None;
        }
        self.taps.seen(Seen::Arrive {
            now,
            port: to,
            index,
            frame: &frame,
        });
        let port = &mut self.topo.ports[to.idx()];
        if let Some(reason) = port
            .config
            .verify_checksums
            .then(|| corruption::roce_drop(&frame))
            .flatten()
        {
            let s = &mut port.stats;
            match reason {
                DropReason::IpHeader => s.rx_ip_header_errors += 1,
                DropReason::UdpChecksum => s.rx_udp_checksum_errors += 1,
                _ => s.rx_icrc_errors += 1,
            }
            self.drop(reason, now, to, index);
            return None;
        }
        port.stats.rx_frames += 1;
        port.stats.rx_bytes += frame.len() as u64;
        self.stats.delivered += 1;
        if !self.switch_flipped.is_empty()
            && (self.switch_flipped.contains(&(index, None))
                || self.switch_flipped.contains(&(index, Some(to))))
            && corruption::passes_checks(&frame)
        {
            self.undetected.push(UndetectedCorruption {
                index,
                port: to,
                frame: frame.clone(),
            });
        }
        Some(Output::Frame {
            port: to,
            frame,
            index,
            sealed,
        })
    }

    fn replay_next(&mut self, now: Nanos, id: usize) {
        let Some(r) = self.replays.get_mut(id) else {
            return;
        };
        let Some((from, frame)) = r.pop() else {
            return;
        };
        let next = r.next_at();
        self.taps.seen(Seen::Replay { now, id });
        // A frame the port cannot send is counted (too long) and the replay goes on. It is
        // sent as recorded: a sender's payload corruption is already in it.
        let _ = self.send_frame(from, frame, false, false);
        if let Some(at) = next {
            self.queue.push(at, EventKind::Replay { id });
        }
    }
}
