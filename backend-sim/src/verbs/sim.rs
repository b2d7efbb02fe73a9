//! [`Sim`]: the handle a test builds — hosts, devices, faults, capture — and the explicit
//! ways to let virtual time pass.

use super::memory::{read_span, write_span, Span};
use super::objects::{lock, Shared};
use super::personality::Personality;
use super::provider::SimVerbs;
use super::world::{NicStats, World};
use crate::clock::Nanos;
use crate::fabric::{Fabric, FabricError, PortConfig};
use crate::ids::{HostId, PortId};
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};

/// A simulated network of RDMA hosts. Cloning gives another handle to the same simulation.
#[derive(Debug, Clone)]
pub struct Sim {
    world: Shared,
}

impl Sim {
    /// An empty simulation whose random draws come from `seed`.
    #[must_use]
    pub fn new(seed: u64) -> Self {
        Sim {
            world: Arc::new(Mutex::new(World::new(seed))),
        }
    }

    /// Adds a host with one device of `personality` whose single port has address `ip`
    /// (MAC derived from it). The device is named `rxe0` or `mlx5_0`.
    ///
    /// # Errors
    /// [`FabricError::DuplicateIp`] / [`FabricError::DuplicateMac`].
    pub fn add_host(
        &self,
        name: &str,
        ip: Ipv4Addr,
        personality: Personality,
    ) -> Result<HostId, FabricError> {
        let mut w = lock(&self.world);
        let host = w.fabric.add_host(name);
        let port = w.fabric.add_port(host, PortConfig::with_ip(ip))?;
        w.add_device(host, personality, port);
        Ok(host)
    }

    /// Adds another device (with its own port) to `host`; returns the device's name.
    ///
    /// # Errors
    /// As [`Fabric::add_port`].
    pub fn add_device(
        &self,
        host: HostId,
        personality: Personality,
        port: PortConfig,
    ) -> Result<String, FabricError> {
        let mut w = lock(&self.world);
        let port = w.fabric.add_port(host, port)?;
        let d = w.add_device(host, personality, port);
        Ok(w.devices[d].name.clone())
    }

    /// The verbs provider of `host` (its devices only).
    #[must_use]
    pub fn verbs(&self, host: HostId) -> SimVerbs {
        SimVerbs {
            world: self.world.clone(),
            host,
        }
    }

    /// The port of `host`'s first device.
    #[must_use]
    pub fn port_of(&self, host: HostId) -> Option<PortId> {
        lock(&self.world)
            .devices
            .iter()
            .find(|d| d.host == host)
            .map(|d| d.port)
    }

    /// Drop counters of `host`'s NICs, summed.
    #[must_use]
    pub fn nic_stats(&self, host: HostId) -> NicStats {
        let w = lock(&self.world);
        let mut s = NicStats::default();
        for d in w.devices.iter().filter(|d| d.host == host) {
            s.add(&d.stats);
        }
        s
    }

    /// Runs `f` on the fabric: faults, capture, replay, statistics.
    pub fn with_fabric<R>(&self, f: impl FnOnce(&mut Fabric) -> R) -> R {
        f(&mut lock(&self.world).fabric)
    }

    /// Installs a fault plan on the fabric (see [`Fabric::set_faults`]).
    ///
    /// # Errors
    /// [`FabricError::UnknownPort`] for a rule naming no port.
    pub fn set_faults(&self, plan: crate::fault::FaultPlan) -> Result<(), FabricError> {
        lock(&self.world).fabric.set_faults(plan)
    }

    /// Starts capturing every frame (or one port's) to a pcap file.
    ///
    /// # Errors
    /// As [`Fabric::capture_to_file`].
    pub fn capture_to_file(
        &self,
        path: impl AsRef<std::path::Path>,
        filter: crate::fabric::CaptureFilter,
    ) -> Result<(), FabricError> {
        lock(&self.world).fabric.capture_to_file(path, filter)
    }

    /// Ends the capture and flushes the file.
    ///
    /// # Errors
    /// The capture's first I/O error.
    pub fn finish_capture(&self) -> Result<Option<Vec<u8>>, FabricError> {
        lock(&self.world).fabric.finish_capture()
    }

    /// Replays a pcap file as if `host`'s first port had sent it, at the recorded spacing
    /// from now, faults applied.
    ///
    /// # Errors
    /// [`FabricError::UnknownHost`] for a host without ports, else as [`Fabric::replay_file`].
    pub fn replay_file(
        &self,
        host: HostId,
        path: impl AsRef<std::path::Path>,
    ) -> Result<crate::fabric::ReplaySummary, FabricError> {
        let port = self.port_of(host).ok_or(FabricError::UnknownHost(host))?;
        lock(&self.world)
            .fabric
            .replay_file(port, path, crate::fabric::ReplayOptions::default())
    }

    /// Takes the next event. False when none is left.
    pub fn step(&self) -> bool {
        lock(&self.world).advance(Nanos::MAX)
    }

    /// Runs until no event is left; returns how many were taken. Stops after `u64::MAX`
    /// events, which a finite workload never reaches (RC retries are bounded unless
    /// `rnr_retry` is 7 against a receiver that never posts: bound such runs with
    /// [`Sim::run_for`]).
    pub fn run_until_idle(&self) -> u64 {
        let mut w = lock(&self.world);
        let span = tracing::debug_span!("run_until_idle", now = w.fabric.now());
        let _enter = span.enter();
        let mut n = 0;
        while w.advance(Nanos::MAX) {
            n += 1;
        }
        tracing::debug!(events = n, now = w.fabric.now(), "idle");
        n
    }

    /// Runs every event due in the next `ns` nanoseconds and moves the clock by `ns`.
    pub fn run_for(&self, ns: Nanos) {
        let mut w = lock(&self.world);
        let deadline = w.fabric.now().saturating_add(ns);
        let span = tracing::debug_span!("run_for", now = w.fabric.now(), ns);
        let _enter = span.enter();
        while w.advance(deadline) {}
    }

    /// Hands frames from outside to the NICs where they lie: `f` gets a function that
    /// takes a frame arriving at a port now (its port, bytes, trace index and seal, as
    /// [`Fabric::arrive_now`] takes them) and has its NIC handle
    /// it at once, without the event queue, so the frame is never copied into a buffer
    /// of the simulation. What the NIC starts (completions, replies) runs at the next
    /// [`Sim::run_for`]. A frame the port refuses (too short, an unknown port) is dropped.
    pub fn receive<R>(&self, f: impl FnOnce(&mut dyn FnMut(PortId, &[u8], u64, bool)) -> R) -> R {
        let mut w = lock(&self.world);
        f(&mut |port, frame, index, sealed| {
            let _ = w.receive_now(port, frame, index, sealed);
        })
    }

    /// Virtual time now.
    #[must_use]
    pub fn now(&self) -> Nanos {
        lock(&self.world).fabric.now()
    }

    /// The trace hash of everything so far (fabric and NIC events).
    #[must_use]
    pub fn trace_hash(&self) -> u64 {
        lock(&self.world).fabric.trace_hash()
    }

    /// The verbs objects that exist now, of every host: after a program has dropped
    /// everything it made, all counts are 0 (anything else is a leak).
    #[must_use]
    pub fn live_objects(&self) -> LiveObjects {
        let w = lock(&self.world);
        LiveObjects {
            contexts: w.ctxs.len(),
            pds: w.pds.len(),
            mrs: w.mrs.len(),
            cqs: w.cqs.len(),
            channels: w.channels.len(),
            srqs: w.srqs.len(),
            qps: w.qps.len(),
            flows: w.flows.len(),
            wqs: w.wqs.len(),
            ind_tables: w.ind_tables.len(),
        }
    }

    /// The seed (print it when a test fails).
    #[must_use]
    pub fn seed(&self) -> u64 {
        lock(&self.world).fabric.seed()
    }

    /// Everything the simulation holds now, to come back to with [`Sim::restore`]: the
    /// fabric (clock, events in flight, links, trace), every verbs object's state, and
    /// the bytes of every registered region. A fuzz target sets its hosts up once and
    /// restores this before each input instead of building them again.
    ///
    /// # Errors
    /// While a capture runs or with external ports (a file and peers outside the
    /// simulation cannot be copied).
    pub fn snapshot(&self) -> Result<Snapshot, SnapshotError> {
        let w = lock(&self.world);
        let world = w.duplicate().map_err(SnapshotError)?;
        let memory = w
            .mrs
            .spans()
            .into_iter()
            .map(|span| {
                let mut bytes = Vec::with_capacity(span.len);
                // SAFETY: the span is a registered region (from the key table), whose
                // memory stays valid while it is registered, as the simulated DMA assumes.
                unsafe { read_span(span, &mut bytes) };
                (span, bytes)
            })
            .collect();
        Ok(Snapshot { world, memory })
    }

    /// Puts the simulation back as it was at `snapshot`: afterwards every call gives
    /// what it gave right after the snapshot was taken. The application's handles must
    /// be the same as then (the same contexts, PDs, regions, windows, CQs, channels,
    /// SRQs, QPs and flows alive, no host or device added): a handle made since, or one
    /// dropped since, would name an object the restored world does not have.
    /// What the handles hold themselves is the application's (the size a [`SimCq`] was
    /// resized to).
    ///
    /// [`SimCq`]: super::SimCq
    ///
    /// # Errors
    /// When the objects alive differ from the snapshot's (nothing is changed then).
    pub fn restore(&self, snapshot: &Snapshot) -> Result<(), SnapshotError> {
        let mut w = lock(&self.world);
        if w.objects() != snapshot.world.objects() {
            return Err(SnapshotError(
                "the verbs objects alive are not the ones alive at the snapshot",
            ));
        }
        *w = snapshot.world.duplicate().map_err(SnapshotError)?;
        for (span, bytes) in &snapshot.memory {
            // SAFETY: the same region (key, address, length) is registered now, checked
            // above, and its memory is valid while registered.
            unsafe { write_span(*span, bytes) };
        }
        Ok(())
    }

    /// Gives every random stream the draws of `seed`, as if the simulation had been made
    /// with `Sim::new(seed)` and set up the same way: for a restored [`Snapshot`] whose
    /// set-up drew nothing at random, so that each input of a fuzz target has its own
    /// seed.
    ///
    /// # Errors
    /// When something was drawn already (nothing is changed then).
    pub fn reseed(&self, seed: u64) -> Result<(), SnapshotError> {
        lock(&self.world).fabric.reseed(seed).map_err(SnapshotError)
    }
}

/// A simulation's state at one moment ([`Sim::snapshot`]).
#[derive(Debug)]
pub struct Snapshot {
    world: World,
    memory: Vec<(Span, Vec<u8>)>,
}

/// Why a simulation could not be snapshot, restored or reseeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SnapshotError(&'static str);

impl std::fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl std::error::Error for SnapshotError {}

/// How many verbs objects of each kind exist in a simulation ([`Sim::live_objects`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LiveObjects {
    /// Open device contexts.
    pub contexts: usize,
    /// Protection domains.
    pub pds: usize,
    /// Memory regions.
    pub mrs: usize,
    /// Completion queues.
    pub cqs: usize,
    /// Completion channels.
    pub channels: usize,
    /// Shared receive queues.
    pub srqs: usize,
    /// Queue pairs.
    pub qps: usize,
    /// Flow steering rules.
    pub flows: usize,
    /// Receive work queues.
    pub wqs: usize,
    /// Receive work queue indirection tables.
    pub ind_tables: usize,
}

impl LiveObjects {
    /// All objects of every kind.
    #[must_use]
    pub fn total(&self) -> usize {
        self.contexts
            + self.pds
            + self.mrs
            + self.cqs
            + self.channels
            + self.srqs
            + self.qps
            + self.flows
            + self.wqs
            + self.ind_tables
    }
}
