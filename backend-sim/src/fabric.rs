//! The fabric: hosts with NIC ports joined by one switch, a virtual clock, one seeded RNG,
//! one event queue, faults, capture and replay. It is sans-IO in the manner of smoltcp's
//! phy layer and TigerBeetle's packet simulator: the layer above hands it frames with
//! [`Fabric::transmit`] and timers with [`Fabric::schedule_timer`], and takes what comes
//! due from [`Fabric::step`]. Nothing here reads the wall clock, the OS RNG or thread
//! timing, so the same seed and the same calls give the same trace hash.

use crate::clock::{Clock, Nanos};
use crate::events::{EventKind, EventQueue};
use crate::fault::{Direction, DropReason, FaultPlan, LinkFaults};
use crate::frame::eth::{Mac, ETHERTYPE_IPV4};
use crate::frame::{check_integrity, Integrity};
use crate::hash::FastSet as HashSet;
use crate::ids::{HostId, PortId};
use crate::link::{LinkConfig, LinkDir, Verdict};
use crate::pcap::{to_ethernet, Converted, PcapError, PcapFile, PcapWriter};
use crate::rng::SimRng;
use crate::switch::{Route, Switch};
use crate::trace::{tag, TraceHash};
use std::collections::VecDeque;
use std::io::{self, Write};
use std::net::Ipv4Addr;

/// Errors of fabric calls.
#[derive(Debug, thiserror::Error)]
pub enum FabricError {
    /// No such port.
    #[error("no port {0} on this fabric")]
    UnknownPort(PortId),
    /// No such host.
    #[error("no host {0:?} on this fabric")]
    UnknownHost(HostId),
    /// Another port already has this MAC.
    #[error("MAC {0} is already used by another port")]
    DuplicateMac(Mac),
    /// Another port already has this IPv4 address.
    #[error("IPv4 address {0} is already used by another port")]
    DuplicateIp(Ipv4Addr),
    /// The frame exceeds the port's maximum frame size.
    #[error("frame of {len} bytes exceeds the port's maximum of {max}")]
    FrameTooLong {
        /// Frame length.
        len: usize,
        /// The port's maximum.
        max: usize,
    },
    /// The frame is shorter than an Ethernet header.
    #[error("frame of {0} bytes is shorter than an Ethernet header")]
    FrameTooShort(usize),
    /// A pcap could not be read or replayed.
    #[error(transparent)]
    Pcap(#[from] PcapError),
    /// Capture output failed.
    #[error("capture I/O: {0}")]
    Io(#[from] io::Error),
}

/// How a port is set up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortConfig {
    /// The port's MAC.
    pub mac: Mac,
    /// The port's IPv4 address (its RoCE GID is the IPv4-mapped IPv6 form).
    pub ipv4: Ipv4Addr,
    /// The link to the switch (both directions alike).
    pub link: LinkConfig,
    /// Largest frame (without FCS) the port sends or accepts.
    pub max_frame: usize,
    /// Whether multicast the port sends also comes back to it when it joined the group
    /// (NIC loopback; the verbs layer decides which QPs see the copy).
    pub multicast_loopback: bool,
    /// Whether arriving frames have their IP/UDP checksums and ICRC verified (and dropped
    /// when wrong), as a NIC does.
    pub verify_checksums: bool,
}

impl PortConfig {
    /// A port with `ipv4` and a locally administered MAC derived from it
    /// (02:00 followed by the four address bytes).
    #[must_use]
    pub fn with_ip(ipv4: Ipv4Addr) -> Self {
        let o = ipv4.octets();
        PortConfig {
            mac: Mac([0x02, 0x00, o[0], o[1], o[2], o[3]]),
            ipv4,
            link: LinkConfig::default(),
            max_frame: 9014,
            multicast_loopback: true,
            verify_checksums: true,
        }
    }
}

/// Counters of one port.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortStats {
    /// Frames handed to the fabric by this port.
    pub tx_frames: u64,
    /// Bytes handed to the fabric by this port.
    pub tx_bytes: u64,
    /// Frames delivered to this port.
    pub rx_frames: u64,
    /// Bytes delivered to this port.
    pub rx_bytes: u64,
    /// Frames that reached this port with a bad checksum or ICRC and were dropped.
    pub rx_bad_checksum: u64,
    /// Frames lost because this port's receive buffer was full.
    pub rx_overrun: u64,
}

/// Counters of the whole fabric.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FabricStats {
    /// Frames handed to the fabric (the next global packet index).
    pub transmitted: u64,
    /// Frames (copies) delivered to ports.
    pub delivered: u64,
    /// Copies made by duplication faults.
    pub duplicated: u64,
    /// Frames with a flipped bit.
    pub corrupted: u64,
    /// Lost to random loss.
    pub dropped_loss: u64,
    /// Lost to the drop list.
    pub dropped_list: u64,
    /// Lost to partitions.
    pub dropped_partition: u64,
    /// Lost to full buffers.
    pub dropped_overrun: u64,
    /// Lost for want of a destination.
    pub dropped_no_route: u64,
    /// Dropped by receivers for bad checksums.
    pub dropped_checksum: u64,
    /// Rejected as too long.
    pub dropped_too_long: u64,
}

impl FabricStats {
    fn count_drop(&mut self, r: DropReason) {
        match r {
            DropReason::Loss => self.dropped_loss += 1,
            DropReason::DropList => self.dropped_list += 1,
            DropReason::Partition => self.dropped_partition += 1,
            DropReason::Overrun => self.dropped_overrun += 1,
            DropReason::NoRoute => self.dropped_no_route += 1,
            DropReason::BadChecksum => self.dropped_checksum += 1,
            DropReason::TooLong => self.dropped_too_long += 1,
        }
    }

    /// All frames lost, for any reason.
    #[must_use]
    pub fn dropped(&self) -> u64 {
        self.dropped_loss
            + self.dropped_list
            + self.dropped_partition
            + self.dropped_overrun
            + self.dropped_no_route
            + self.dropped_checksum
            + self.dropped_too_long
    }
}

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

/// Which frames a capture records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaptureFilter {
    /// Every frame once, when a port transmits it.
    All,
    /// What this port transmits and receives, as tcpdump on its interface would show.
    Port(PortId),
}

#[derive(Debug)]
enum Sink {
    Memory(Vec<u8>),
    File(io::BufWriter<std::fs::File>),
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sink::Memory(v) => v.write(buf),
            Sink::File(f) => f.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Sink::Memory(_) => Ok(()),
            Sink::File(f) => f.flush(),
        }
    }
}

#[derive(Debug)]
struct Capture {
    filter: CaptureFilter,
    writer: PcapWriter<Sink>,
    error: Option<io::Error>,
}

impl Capture {
    fn record(&mut self, ts: Nanos, frame: &[u8]) {
        if self.error.is_none() {
            if let Err(e) = self.writer.write(ts, frame) {
                self.error = Some(e);
            }
        }
    }
}

#[derive(Debug)]
struct Port {
    host: HostId,
    config: PortConfig,
    up: LinkDir,
    down: LinkDir,
    stats: PortStats,
}

/// A simulated host: a name and its ports.
#[derive(Debug, Clone)]
pub struct Host {
    /// Name, for messages.
    pub name: String,
    /// Its ports, in the order they were added.
    pub ports: Vec<PortId>,
}

#[derive(Debug)]
struct Replay {
    from: PortId,
    frames: VecDeque<(Nanos, Vec<u8>)>,
}

/// How to replay a pcap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReplayOptions {
    /// Virtual time of the first record (default: now). Later records keep their recorded
    /// spacing; a timestamp that goes backwards is sent right after its predecessor.
    pub start_at: Option<Nanos>,
}

/// What a replay scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplaySummary {
    /// Frames scheduled.
    pub frames: usize,
    /// Records skipped (not IPv4).
    pub skipped: usize,
    /// Virtual time of the first frame.
    pub first_at: Nanos,
    /// Virtual time of the last frame.
    pub last_at: Nanos,
}

/// The simulated network.
#[derive(Debug)]
pub struct Fabric {
    clock: Clock,
    queue: EventQueue,
    rng: SimRng,
    trace: TraceHash,
    hosts: Vec<Host>,
    ports: Vec<Port>,
    switch: Switch,
    plan: FaultPlan,
    drop_set: HashSet<u64>,
    stats: FabricStats,
    capture: Option<Capture>,
    replays: Vec<Replay>,
    scratch: Vec<PortId>,
    loopback_ns: Nanos,
}

/// The IPv4 destination of an untagged IPv4 frame, read without a full parse.
fn ipv4_dst(frame: &[u8]) -> Option<Ipv4Addr> {
    if frame.len() >= 34 && u16::from_be_bytes([frame[12], frame[13]]) == ETHERTYPE_IPV4 {
        Some(Ipv4Addr::new(frame[30], frame[31], frame[32], frame[33]))
    } else {
        None
    }
}

fn dst_mac(frame: &[u8]) -> Mac {
    Mac([frame[0], frame[1], frame[2], frame[3], frame[4], frame[5]])
}

impl Fabric {
    /// An empty fabric whose random draws come from `seed`.
    #[must_use]
    pub fn new(seed: u64) -> Self {
        Fabric {
            clock: Clock::default(),
            queue: EventQueue::default(),
            rng: SimRng::new(seed),
            trace: TraceHash::default(),
            hosts: Vec::new(),
            ports: Vec::new(),
            switch: Switch::default(),
            plan: FaultPlan::default(),
            drop_set: HashSet::default(),
            stats: FabricStats::default(),
            capture: None,
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
        self.trace.value()
    }

    /// Events folded into the trace so far.
    #[must_use]
    pub fn trace_events(&self) -> u64 {
        self.trace.events()
    }

    /// Folds an event of the layer above (tags from [`tag::USER`] on) into the trace.
    pub fn trace_event(&mut self, tag: u8, words: &[u64]) {
        self.trace.event(tag, words);
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

    /// Adds a host with no ports.
    pub fn add_host(&mut self, name: impl Into<String>) -> HostId {
        self.hosts.push(Host {
            name: name.into(),
            ports: Vec::new(),
        });
        HostId((self.hosts.len() - 1) as u32)
    }

    /// Adds a port to `host`, linked to the switch.
    ///
    /// # Errors
    /// [`FabricError::UnknownHost`], or [`FabricError::DuplicateMac`] /
    /// [`FabricError::DuplicateIp`] if another port has the address.
    pub fn add_port(&mut self, host: HostId, config: PortConfig) -> Result<PortId, FabricError> {
        if host.0 as usize >= self.hosts.len() {
            return Err(FabricError::UnknownHost(host));
        }
        if self.switch.port_of_mac(config.mac).is_some() {
            return Err(FabricError::DuplicateMac(config.mac));
        }
        if self.switch.port_of_ip(config.ipv4).is_some() {
            return Err(FabricError::DuplicateIp(config.ipv4));
        }
        let id = PortId(self.ports.len() as u32);
        let mut up = LinkDir::new(config.link);
        let mut down = LinkDir::new(config.link);
        up.faults = self.plan.default_link.clone();
        down.faults = self.plan.default_link.clone();
        self.switch.add_port(id, config.mac, config.ipv4);
        self.ports.push(Port {
            host,
            config,
            up,
            down,
            stats: PortStats::default(),
        });
        self.hosts[host.0 as usize].ports.push(id);
        Ok(id)
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
        &self.hosts
    }

    /// Number of ports.
    #[must_use]
    pub fn port_count(&self) -> usize {
        self.ports.len()
    }

    /// A port's configuration.
    ///
    /// # Errors
    /// [`FabricError::UnknownPort`].
    pub fn port_config(&self, port: PortId) -> Result<&PortConfig, FabricError> {
        self.ports
            .get(port.idx())
            .map(|p| &p.config)
            .ok_or(FabricError::UnknownPort(port))
    }

    /// The host a port belongs to.
    ///
    /// # Errors
    /// [`FabricError::UnknownPort`].
    pub fn port_host(&self, port: PortId) -> Result<HostId, FabricError> {
        self.ports
            .get(port.idx())
            .map(|p| p.host)
            .ok_or(FabricError::UnknownPort(port))
    }

    /// A port's counters.
    ///
    /// # Errors
    /// [`FabricError::UnknownPort`].
    pub fn port_stats(&self, port: PortId) -> Result<PortStats, FabricError> {
        self.ports
            .get(port.idx())
            .map(|p| p.stats)
            .ok_or(FabricError::UnknownPort(port))
    }

    /// The port that owns `ip`, if any (the fabric's stand-in for ARP).
    #[must_use]
    pub fn port_of_ip(&self, ip: Ipv4Addr) -> Option<PortId> {
        self.switch.port_of_ip(ip)
    }

    /// The MAC of the port that owns `ip`, if any.
    #[must_use]
    pub fn mac_of_ip(&self, ip: Ipv4Addr) -> Option<Mac> {
        self.switch
            .port_of_ip(ip)
            .map(|p| self.ports[p.idx()].config.mac)
    }

    /// Registers one membership of `port` in the IPv4 multicast `group` at the switch
    /// (what IGMP snooping would learn; several QPs may each add one).
    ///
    /// # Errors
    /// [`FabricError::UnknownPort`].
    pub fn join_group(&mut self, port: PortId, group: Ipv4Addr) -> Result<(), FabricError> {
        self.check_port(port)?;
        self.switch.join(port, group);
        Ok(())
    }

    /// Drops one membership; returns whether there was one.
    ///
    /// # Errors
    /// [`FabricError::UnknownPort`].
    pub fn leave_group(&mut self, port: PortId, group: Ipv4Addr) -> Result<bool, FabricError> {
        self.check_port(port)?;
        Ok(self.switch.leave(port, group))
    }

    /// Registers one membership of `port` in the Ethernet multicast group `mac` (for
    /// frames whose group is named only by MAC).
    ///
    /// # Errors
    /// [`FabricError::UnknownPort`].
    pub fn join_mac_group(&mut self, port: PortId, mac: Mac) -> Result<(), FabricError> {
        self.check_port(port)?;
        self.switch.join_mac(port, mac);
        Ok(())
    }

    /// Drops one MAC-group membership; returns whether there was one.
    ///
    /// # Errors
    /// [`FabricError::UnknownPort`].
    pub fn leave_mac_group(&mut self, port: PortId, mac: Mac) -> Result<bool, FabricError> {
        self.check_port(port)?;
        Ok(self.switch.leave_mac(port, mac))
    }

    /// True if `port` is a member of `group`.
    #[must_use]
    pub fn is_member(&self, port: PortId, group: Ipv4Addr) -> bool {
        self.switch.is_member(port, group)
    }

    fn check_port(&self, port: PortId) -> Result<(), FabricError> {
        if port.idx() < self.ports.len() {
            Ok(())
        } else {
            Err(FabricError::UnknownPort(port))
        }
    }

    /// Installs a fault plan, replacing the previous one (links not named get the plan's
    /// default faults).
    ///
    /// # Errors
    /// [`FabricError::UnknownPort`] if a rule names a port that does not exist; nothing is
    /// changed then.
    pub fn set_faults(&mut self, plan: FaultPlan) -> Result<(), FabricError> {
        for r in &plan.links {
            self.check_port(r.port)?;
        }
        for p in &mut self.ports {
            p.up.faults = plan.default_link.clone();
            p.down.faults = plan.default_link.clone();
        }
        for r in &plan.links {
            let p = &mut self.ports[r.port.idx()];
            match r.direction {
                Direction::ToSwitch => p.up.faults = r.faults.clone(),
                Direction::FromSwitch => p.down.faults = r.faults.clone(),
            }
        }
        self.drop_set = plan.drop_packets.iter().copied().collect();
        self.plan = plan;
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
        self.check_port(port)?;
        let p = &mut self.ports[port.idx()];
        match direction {
            Direction::ToSwitch => p.up.faults = faults,
            Direction::FromSwitch => p.down.faults = faults,
        }
        Ok(())
    }

    /// The plan in force.
    #[must_use]
    pub fn faults(&self) -> &FaultPlan {
        &self.plan
    }

    /// Starts capturing into memory (replacing any capture in progress, whose output is
    /// discarded); [`Fabric::finish_capture`] returns the pcap bytes.
    ///
    /// # Errors
    /// [`FabricError::UnknownPort`] for a port filter naming no port.
    pub fn capture_to_memory(&mut self, filter: CaptureFilter) -> Result<(), FabricError> {
        if let CaptureFilter::Port(p) = filter {
            self.check_port(p)?;
        }
        let writer = PcapWriter::new(Sink::Memory(Vec::new()))?;
        self.capture = Some(Capture {
            filter,
            writer,
            error: None,
        });
        Ok(())
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
            self.check_port(p)?;
        }
        let f = std::fs::File::create(path)?;
        let writer = PcapWriter::new(Sink::File(io::BufWriter::new(f)))?;
        self.capture = Some(Capture {
            filter,
            writer,
            error: None,
        });
        Ok(())
    }

    /// Ends the capture: returns the pcap bytes of a memory capture (`None` for a file
    /// capture, which is flushed, or when none was running).
    ///
    /// # Errors
    /// [`FabricError::Io`] with the first write error of the capture.
    pub fn finish_capture(&mut self) -> Result<Option<Vec<u8>>, FabricError> {
        let Some(c) = self.capture.take() else {
            return Ok(None);
        };
        if let Some(e) = c.error {
            return Err(e.into());
        }
        match c.writer.finish()? {
            Sink::Memory(v) => Ok(Some(v)),
            Sink::File(_) => Ok(None),
        }
    }

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
        let Some(port) = self.ports.get_mut(from.idx()) else {
            return Err(FabricError::UnknownPort(from));
        };
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
        self.trace.event(
            tag::TRANSMIT,
            &[now, u64::from(from.0), index, frame.len() as u64],
        );
        self.trace.bytes_head(&frame);
        if let Some(c) = &mut self.capture {
            if matches!(c.filter, CaptureFilter::All) || c.filter == CaptureFilter::Port(from) {
                c.record(now, &frame);
            }
        }
        if !self.drop_set.is_empty() && self.drop_set.contains(&index) {
            self.drop(DropReason::DropList, now, from, index);
            return Ok(index);
        }
        let dst = dst_mac(&frame);
        let port = &mut self.ports[from.idx()];
        if dst == port.config.mac {
            // NIC loopback: never reaches the wire.
            self.queue.push(
                now + self.loopback_ns,
                EventKind::Arrive {
                    to: from,
                    frame,
                    index,
                },
            );
            return Ok(index);
        }
        if dst.is_multicast() && port.config.multicast_loopback {
            if let Some(g) = ipv4_dst(&frame) {
                if g.is_multicast() && self.switch.is_member(from, g) {
                    self.queue.push(
                        now + self.loopback_ns,
                        EventKind::Arrive {
                            to: from,
                            frame: frame.clone(),
                            index,
                        },
                    );
                }
            }
        }
        let port = &mut self.ports[from.idx()];
        match port.up.send(now, frame.len(), &mut self.rng) {
            Verdict::Drop(r) => self.drop(r, now, from, index),
            Verdict::Deliver {
                arrival,
                duplicate,
                corrupt_bit,
            } => {
                let Some(frame) = self.maybe_corrupt(frame, corrupt_bit, index) else {
                    // The switch's ingress FCS check drops it, as Ethernet hardware does.
                    self.drop(DropReason::BadChecksum, now, from, index);
                    return Ok(index);
                };
                if duplicate {
                    self.stats.duplicated += 1;
                    self.trace
                        .event(tag::DUPLICATE, &[now, u64::from(from.0), index]);
                    self.queue.push(
                        arrival,
                        EventKind::AtSwitch {
                            from,
                            frame: frame.clone(),
                            index,
                        },
                    );
                }
                self.queue
                    .push(arrival, EventKind::AtSwitch { from, frame, index });
            }
        }
        Ok(index)
    }

    /// Flips the fault's bit, as a noisy link would. Every Ethernet frame carries an FCS
    /// (CRC-32) that catches any single-bit error, so the next hop drops the frame:
    /// `None` says so. Frames with checksums of their own (IP, UDP, ICRC) never reach
    /// those checks corrupted, which is also why a UDP checksum of 0 does not let a
    /// damaged payload through.
    fn maybe_corrupt(&mut self, frame: Vec<u8>, bit: Option<usize>, index: u64) -> Option<Vec<u8>> {
        let Some(bit) = bit.filter(|&b| b / 8 < frame.len()) else {
            return Some(frame);
        };
        self.stats.corrupted += 1;
        self.trace.event(tag::CORRUPT, &[index, bit as u64]);
        None
    }

    fn drop(&mut self, reason: DropReason, now: Nanos, port: PortId, index: u64) {
        self.stats.count_drop(reason);
        if reason == DropReason::Overrun {
            self.ports[port.idx()].stats.rx_overrun += 1;
        }
        self.trace
            .event(tag::DROP, &[now, u64::from(port.0), index, reason as u64]);
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
                EventKind::AtSwitch { from, frame, index } => self.forward(now, from, frame, index),
                EventKind::Arrive { to, frame, index } => {
                    if let Some(out) = self.arrive(now, to, frame, index) {
                        return Some(out);
                    }
                }
                EventKind::Timer { token } => {
                    self.trace.event(tag::TIMER, &[now, token]);
                    return Some(Output::Timer { token });
                }
                EventKind::Replay { id } => self.replay_next(id),
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

    fn forward(&mut self, now: Nanos, from: PortId, frame: Vec<u8>, index: u64) {
        self.trace
            .event(tag::AT_SWITCH, &[now, u64::from(from.0), index]);
        let dst = dst_mac(&frame);
        let mut targets = std::mem::take(&mut self.scratch);
        targets.clear();
        match self.switch.route(dst, ipv4_dst(&frame)) {
            Route::Unicast(p) if p != from => targets.push(p),
            Route::Group(a, b) => {
                targets.extend(a.iter().chain(b).map(|m| m.0).filter(|&p| p != from));
                if !a.is_empty() && !b.is_empty() {
                    targets.sort_unstable();
                    targets.dedup();
                }
            }
            Route::Broadcast => targets.extend(
                (0..self.ports.len() as u32)
                    .map(PortId)
                    .filter(|&p| p != from),
            ),
            Route::Unicast(_) | Route::Nowhere => {}
        }
        if targets.is_empty() {
            self.drop(DropReason::NoRoute, now, from, index);
        } else {
            let last = targets.len() - 1;
            for &to in &targets[..last] {
                self.egress(now, from, to, frame.clone(), index);
            }
            self.egress(now, from, targets[last], frame, index);
        }
        self.scratch = targets;
    }

    fn egress(&mut self, now: Nanos, from: PortId, to: PortId, frame: Vec<u8>, index: u64) {
        if self.plan.partitions.iter().any(|p| p.cuts(now, from, to)) {
            self.drop(DropReason::Partition, now, to, index);
            return;
        }
        match self.ports[to.idx()]
            .down
            .send(now, frame.len(), &mut self.rng)
        {
            Verdict::Drop(r) => self.drop(r, now, to, index),
            Verdict::Deliver {
                arrival,
                duplicate,
                corrupt_bit,
            } => {
                let Some(frame) = self.maybe_corrupt(frame, corrupt_bit, index) else {
                    // The NIC's FCS check drops it, whatever the frame's own checksums.
                    self.ports[to.idx()].stats.rx_bad_checksum += 1;
                    self.drop(DropReason::BadChecksum, now, to, index);
                    return;
                };
                if duplicate {
                    self.stats.duplicated += 1;
                    self.trace
                        .event(tag::DUPLICATE, &[now, u64::from(to.0), index]);
                    self.queue.push(
                        arrival,
                        EventKind::Arrive {
                            to,
                            frame: frame.clone(),
                            index,
                        },
                    );
                }
                self.queue
                    .push(arrival, EventKind::Arrive { to, frame, index });
            }
        }
    }

    fn arrive(&mut self, now: Nanos, to: PortId, frame: Vec<u8>, index: u64) -> Option<Output> {
        let port = &mut self.ports[to.idx()];
        if frame.len() > port.config.max_frame {
            self.drop(DropReason::TooLong, now, to, index);
            return None;
        }
        if port.config.verify_checksums && check_integrity(&frame) != Integrity::Ok {
            port.stats.rx_bad_checksum += 1;
            self.drop(DropReason::BadChecksum, now, to, index);
            return None;
        }
        port.stats.rx_frames += 1;
        port.stats.rx_bytes += frame.len() as u64;
        self.stats.delivered += 1;
        self.trace.event(
            tag::ARRIVE,
            &[now, u64::from(to.0), index, frame.len() as u64],
        );
        self.trace.bytes_head(&frame);
        if let Some(c) = &mut self.capture {
            if c.filter == CaptureFilter::Port(to) {
                c.record(now, &frame);
            }
        }
        Some(Output::Frame {
            port: to,
            frame,
            index,
        })
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
        self.check_port(from)?;
        let src_mac = self.ports[from.idx()].config.mac;
        let resolve = |ip: Ipv4Addr| self.mac_of_ip(ip);
        let start = opts
            .start_at
            .unwrap_or(self.clock.now())
            .max(self.clock.now());
        let mut frames = VecDeque::with_capacity(pcap.records.len());
        let mut skipped = 0;
        let first_ts = pcap.records.first().map_or(0, |r| r.ts_ns);
        let mut last_at = start;
        for (index, rec) in pcap.records.iter().enumerate() {
            match to_ethernet(pcap.link_type, rec, src_mac, &resolve) {
                Ok(Converted::Frame(f)) => {
                    let at = start
                        .saturating_add(rec.ts_ns.saturating_sub(first_ts))
                        .max(last_at);
                    last_at = at;
                    frames.push_back((at, f));
                }
                Ok(Converted::Skipped(_)) => skipped += 1,
                Err(reason) => {
                    return Err(PcapError::BadRecord {
                        index,
                        offset: 0,
                        reason,
                    }
                    .into());
                }
            }
        }
        let summary = ReplaySummary {
            frames: frames.len(),
            skipped,
            first_at: frames.front().map_or(start, |f| f.0),
            last_at,
        };
        if let Some(&(at, _)) = frames.front() {
            let id = self.replays.len();
            self.replays.push(Replay { from, frames });
            self.queue.push(at, EventKind::Replay { id });
        }
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

    fn replay_next(&mut self, id: usize) {
        let Some(r) = self.replays.get_mut(id) else {
            return;
        };
        let from = r.from;
        let Some((_, frame)) = r.frames.pop_front() else {
            return;
        };
        let next = r.frames.front().map(|f| f.0);
        self.trace
            .event(tag::REPLAY, &[self.clock.now(), id as u64]);
        // A frame the port cannot send is counted (too long) and the replay goes on.
        let _ = self.transmit(from, frame);
        match next {
            Some(at) => self.queue.push(at, EventKind::Replay { id }),
            None => {
                if let Some(r) = self.replays.get_mut(id) {
                    r.frames = VecDeque::new();
                }
            }
        }
    }
}
