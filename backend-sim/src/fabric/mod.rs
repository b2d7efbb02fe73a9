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
mod error;
mod events;
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
pub use error::FabricError;
pub use port::{Host, PortConfig};
pub use replay::{ReplayOptions, ReplaySummary};
pub use stats::{FabricStats, PortStats};

use crate::clock::{Clock, Nanos};
use crate::fault::{Direction, DropReason, FaultPlan, LinkFaults};
use crate::frame::eth::Mac;
use crate::frame::{check_integrity, Integrity};
use crate::ids::{HostId, PortId};
use crate::pcap::PcapFile;
use crate::rng::SimRng;
use capture::{Capture, Sink};
use events::{EventKind, EventQueue};
use link::{Link, Verdict};
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
    rng: SimRng,
    topo: Topology,
    plan: Plan,
    taps: Taps,
    stats: FabricStats,
    replays: Vec<Replay>,
    scratch: Vec<PortId>,
    loopback_ns: Nanos,
}

impl Fabric {
    /// An empty fabric whose random draws come from `seed`.
    #[must_use]
    pub fn new(seed: u64) -> Self {
        Fabric {
            clock: Clock::default(),
            queue: EventQueue::default(),
            rng: SimRng::new(seed),
            topo: Topology::default(),
            plan: Plan::default(),
            taps: Taps::default(),
            stats: FabricStats::default(),
            replays: Vec::new(),
            scratch: Vec::new(),
            loopback_ns: 200,
        }
    }

    /// The seed of this run.
    #[must_use]
    pub fn seed(&self) -> u64 {
        self.rng.seed()
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

    /// The fabric's random generator, for the layer above's own tie-breaking draws.
    pub fn rng(&mut self) -> &mut SimRng {
        &mut self.rng
    }

    /// Counters.
    #[must_use]
    pub fn stats(&self) -> FabricStats {
        self.stats
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
            .add_port(host, config, &self.plan.plan.default_link)
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
        Ok(())
    }

    /// Drops one membership; returns whether there was one.
    ///
    /// # Errors
    /// [`FabricError::UnknownPort`].
    pub fn leave_group(&mut self, port: PortId, group: Ipv4Addr) -> Result<bool, FabricError> {
        self.topo.port(port)?;
        Ok(self.topo.switch.leave(port, group))
    }

    /// Registers one membership of `port` in the Ethernet multicast group `mac` (for
    /// frames whose group is named only by MAC).
    ///
    /// # Errors
    /// [`FabricError::UnknownPort`].
    pub fn join_mac_group(&mut self, port: PortId, mac: Mac) -> Result<(), FabricError> {
        self.topo.port(port)?;
        self.topo.switch.join_mac(port, mac);
        Ok(())
    }

    /// Drops one MAC-group membership; returns whether there was one.
    ///
    /// # Errors
    /// [`FabricError::UnknownPort`].
    pub fn leave_mac_group(&mut self, port: PortId, mac: Mac) -> Result<bool, FabricError> {
        self.topo.port(port)?;
        Ok(self.topo.switch.leave_mac(port, mac))
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
        let src_mac = self.topo.port(from)?.config.mac;
        let now = self.clock.now();
        let start = opts.start_at.unwrap_or(now).max(now);
        let resolve = |ip: Ipv4Addr| self.topo.mac_of_ip(ip);
        let (replay, summary) = Replay::new(from, pcap, src_mac, &resolve, start)?;
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
        self.send_frame(from, frame, false)
    }

    /// As [`Fabric::transmit`], for a frame whose IPv4 and UDP checksums the sending NIC
    /// has just filled (a checksum offload). They hold, and the fabric never delivers an
    /// altered frame (a corrupted one is dropped by the next hop's FCS check), so the
    /// receiving port does not compute them again: checksums are computed once.
    ///
    /// # Errors
    /// As [`Fabric::transmit`].
    pub fn transmit_offloaded(&mut self, from: PortId, frame: Vec<u8>) -> Result<u64, FabricError> {
        self.send_frame(from, frame, true)
    }

    fn send_frame(
        &mut self,
        from: PortId,
        frame: Vec<u8>,
        sound: bool,
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
                    sound,
                },
            );
            return Ok(index);
        }
        if dst.is_multicast() && mc_loopback {
            if let Some(g) = ipv4_dst(&frame) {
                if g.is_multicast() && self.topo.switch.is_member(from, g) {
                    let at = now + self.loopback_ns;
                    let to = from;
                    let frame = frame.clone();
                    self.queue.push(
                        at,
                        EventKind::Arrive {
                            to,
                            frame,
                            index,
                            sound,
                        },
                    );
                }
            }
        }
        let verdict = self.topo.ports[from.idx()]
            .up
            .send(now, frame.len(), &mut self.rng);
        // The switch's ingress FCS check drops a corrupted frame, as Ethernet hardware does.
        self.cross(verdict, now, from, None, (frame, sound), index);
        Ok(index)
    }

    /// Acts on a link's verdict for a frame crossing from `from` (to the switch when `to`
    /// is `None`, else down to port `to`): the drop, the FCS check of a corrupted frame,
    /// the duplicate and the arrival.
    fn cross(
        &mut self,
        verdict: Verdict,
        now: Nanos,
        from: PortId,
        to: Option<PortId>,
        (frame, sound): (Vec<u8>, bool),
        index: u64,
    ) {
        let near = to.unwrap_or(from);
        let (arrival, duplicate, corrupt_bit) = match verdict {
            Verdict::Drop(r) => return self.drop(r, now, near, index),
            Verdict::Deliver {
                arrival,
                duplicate,
                corrupt_bit,
                ..
            } => (arrival, duplicate, corrupt_bit),
        };
        if let Some(bit) = corrupt_bit.filter(|&b| b / 8 < frame.len()) {
            // Every Ethernet frame carries an FCS (CRC-32) that catches any single-bit
            // error, so the next hop drops the frame whatever its own checksums say.
            self.stats.corrupted += 1;
            self.taps.seen(Seen::Corrupt { index, bit });
            if let Some(to) = to {
                self.topo.ports[to.idx()].stats.rx_bad_checksum += 1;
            }
            return self.drop(DropReason::BadChecksum, now, near, index);
        }
        let event = |frame| match to {
            None => EventKind::AtSwitch {
                from,
                frame,
                index,
                sound,
            },
            Some(to) => EventKind::Arrive {
                to,
                frame,
                index,
                sound,
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

    /// Takes events in (time, sequence) order until one produces an [`Output`] for the
    /// layer above, advancing the clock to it. `None` when the queue is empty.
    pub fn step(&mut self) -> Option<Output> {
        self.step_until(Nanos::MAX)
    }

    /// Like [`Fabric::step`], but takes no event later than `deadline`; when none is left
    /// by then the clock moves to `deadline` (if it is not `Nanos::MAX`) and `None` is
    /// returned.
    pub fn step_until(&mut self, deadline: Nanos) -> Option<Output> {
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
                    sound,
                } => self.forward(now, from, (frame, sound), index),
                EventKind::Arrive {
                    to,
                    frame,
                    index,
                    sound,
                } => {
                    if let Some(out) = self.arrive(now, to, (frame, sound), index) {
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
    fn forward(&mut self, now: Nanos, from: PortId, (frame, sound): (Vec<u8>, bool), index: u64) {
        self.taps.seen(Seen::AtSwitch { now, from, index });
        let mut targets = std::mem::take(&mut self.scratch);
        self.topo.targets(from, &frame, &mut targets);
        if let Some((&last, rest)) = targets.split_last() {
            for &to in rest {
                self.egress(now, from, to, (frame.clone(), sound), index);
            }
            self.egress(now, from, last, (frame, sound), index);
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
        (frame, sound): (Vec<u8>, bool),
        index: u64,
    ) {
        if self.plan.cuts(now, from, to) {
            return self.drop(DropReason::Partition, now, to, index);
        }
        let verdict = self.topo.ports[to.idx()]
            .down
            .send(now, frame.len(), &mut self.rng);
        self.cross(verdict, now, from, Some(to), (frame, sound), index);
    }

    /// A frame at a port: the port's own checks, then up to the layer above.
    fn arrive(
        &mut self,
        now: Nanos,
        to: PortId,
        (frame, sound): (Vec<u8>, bool),
        index: u64,
    ) -> Option<Output> {
        let port = &mut self.topo.ports[to.idx()];
        if frame.len() > port.config.max_frame {
            self.drop(DropReason::TooLong, now, to, index);
            return None;
        }
        if port.config.verify_checksums && !sound && check_integrity(&frame) != Integrity::Ok {
            port.stats.rx_bad_checksum += 1;
            self.drop(DropReason::BadChecksum, now, to, index);
            return None;
        }
        port.stats.rx_frames += 1;
        port.stats.rx_bytes += frame.len() as u64;
        self.stats.delivered += 1;
        self.taps.seen(Seen::Arrive {
            now,
            port: to,
            index,
            frame: &frame,
        });
        Some(Output::Frame {
            port: to,
            frame,
            index,
        })
    }

    fn replay_next(&mut self, now: Nanos, id: usize) {
        let Some(r) = self.replays.get_mut(id) else {
            return;
        };
        let from = r.from;
        let Some(frame) = r.pop() else {
            return;
        };
        let next = r.next_at();
        self.taps.seen(Seen::Replay { now, id });
        // A frame the port cannot send is counted (too long) and the replay goes on.
        let _ = self.transmit(from, frame);
        if let Some(at) = next {
            self.queue.push(at, EventKind::Replay { id });
        }
    }
}
