//! The fabric's configuration after set-up: its fault plan, the capture of its frames
//! and the replay of recorded ones.

use super::capture::{Capture, CaptureFilter, Sink};
use super::error::FabricError;
use super::events::EventKind;
use super::plan::Plan;
use super::replay::{Replay, ReplayOptions, ReplaySummary};
use super::Fabric;
use crate::fault::{Direction, FaultPlan, LinkFaults};
use crate::frame::eth::Mac;
use crate::ids::PortId;
use crate::pcap::PcapFile;
use std::io;
use std::net::Ipv4Addr;

impl Fabric {
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
}
