//! The process-wide emulator: the simulated fabric of the topology, the host this process
//! is, its devices as `struct ibv_device`s, and the progress thread that moves the
//! simulation on the wall clock and turns completion events into readable file descriptors.
//!
//! Alone, a process simulates every host of the topology (a program reaches its own host
//! only). With `VERBS_EMU_FABRIC` naming a fabric process's socket, its host's port leads
//! to that fabric instead ([`crate::fabric`]), and the progress thread also moves frames
//! between the two.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use backend_sim::{HostId, PortConfig, PortId, Sim, SimVerbs};
use verbs_api::{DeviceInfo, Verbs};

use crate::base::boundary::{boundary, Nothing};
use crate::base::c_str::copy_c_string;
use crate::base::ffi;
use crate::base::pointer::Castable;
use crate::base::sync::lock;
use crate::fabric::client::{self, CmHandler, CmIn, CmLink};
use crate::fabric::member::Member;
use crate::fabric::{sys, FABRIC_ENV};
use crate::runtime::delivery::{ChannelState, ContextState};
use crate::topology::{host_from_env, seed_from_env, HostSpec, Topology};

/// A device of this host as libibverbs hands it out: the C struct first, so a
/// `*mut ibv_device` is a `*mut EmuDevice`.
#[repr(C)]
#[derive(Debug)]
pub struct EmuDevice {
    /// What programs read (`name`, `node_type`, `transport_type`, `ibdev_path`).
    pub raw: ffi::ibv_device,
    /// Where rdma-core's `struct verbs_device` (which starts with its `ibv_device`) keeps
    /// the provider's ops: always null, so a provider library asked about this device
    /// (Debian's libmlx5's `mlx5dv_is_supported` compares that pointer with its own ops)
    /// finds it is not theirs.
    pub provider_ops: *const std::ffi::c_void,
    /// The simulator's description of it.
    pub info: DeviceInfo,
}

// SAFETY: `EmuDevice` is `#[repr(C)]` and starts with its `ibv_device`.
unsafe impl Castable for EmuDevice {
    type C = ffi::ibv_device;
}

/// A receive queue whose doorbell record the program writes (a WQ's ring handed out by
/// `mlx5dv_init_obj`, the work queues of `verbs/wq.rs`): read before each progress round and each
/// CQ poll, as the device reads a doorbell record, taking the entries the program posted.
pub trait Doorbell: Send + Sync + std::fmt::Debug {
    /// Reads the doorbell record and takes the entries posted since the last read.
    fn read_doorbell(&self);
}

/// The emulator of this process.
#[derive(Debug)]
pub struct Emu {
    /// The simulation: every host of the topology; with a fabric process, only this
    /// host's NIC does anything and its port leads to the fabric.
    pub sim: Sim,
    /// This process's host.
    pub host: HostId,
    /// Its description in the topology.
    pub spec: HostSpec,
    /// Its devices, allocated once and never freed (contexts point at them).
    pub devices: Vec<Box<EmuDevice>>,
    channels: Mutex<Vec<Weak<ChannelState>>>,
    contexts: Mutex<Vec<Weak<ContextState>>>,
    doorbells: Mutex<Vec<Weak<dyn Doorbell>>>,
    /// The fabric process this host joined, if any.
    member: Option<Joined>,
}

/// This host's membership of a fabric process.
#[derive(Debug)]
struct Joined {
    member: Mutex<Member>,
    /// Where the connection manager sends its messages to other hosts.
    cm: CmLink,
    /// When a program's thread last polled the fabric ([`Emu::poll_fabric`]), in
    /// [`wall_ns`]; 0: never, or the program has armed a CQ since ([`Emu::program_waits`]).
    polled: AtomicU64,
    /// Rung when a program that polled arms a CQ: the progress thread takes the frames
    /// over at once.
    takeover: OwnedFd,
}

// SAFETY: the raw `ibv_device` structs hold only inline arrays and plain values (the
// `_ops` pointers are null); they are written once before `Emu` is shared, then only read.
unsafe impl Send for Emu {}
// SAFETY: as above; every mutable part of `Emu` is behind a Mutex.
unsafe impl Sync for Emu {}

static EMU: OnceLock<Result<Emu, String>> = OnceLock::new();

/// Who takes the connection-manager messages the fabric brings (see [`set_cm_handler`]).
static CM_HANDLER: OnceLock<CmHandler> = OnceLock::new();

/// Registers the connection manager, which takes every connection-manager message the
/// fabric brings from other hosts' processes (on the thread that reads the fabric's
/// socket; it must not block). The connection manager registers itself when the library
/// is loaded; the first registration holds.
pub fn set_cm_handler(handler: CmHandler) {
    let _ = CM_HANDLER.set(handler);
}

/// Hands a connection-manager message to the registered handler (none: it is dropped).
fn deliver_cm(m: CmIn<'_>) {
    if let Some(h) = CM_HANDLER.get() {
        h(m);
    }
}

/// The emulator, built on first use from the environment (`VERBS_EMU_TOPOLOGY`,
/// `VERBS_EMU_HOST`, `VERBS_EMU_SEED`, `VERBS_EMU_FABRIC`).
///
/// # Errors
/// The one-line reason the environment is unusable (printed once on stderr as well).
pub fn emu() -> Result<&'static Emu, &'static str> {
    let r = EMU.get_or_init(|| {
        crate::runtime::leaks::arm();
        let built = Emu::from_env();
        match &built {
            Ok(e) => {
                start_progress_thread();
                if e.is_joined() {
                    DRAINER.store(std::process::id(), std::sync::atomic::Ordering::Relaxed);
                    // SAFETY: registers a function with no arguments that only touches the
                    // emulator's own state (behind its locks) and stderr.
                    if unsafe { libc::atexit(drain_at_exit) } != 0 {
                        eprintln!("verbs-emu: cannot register the drain at exit (atexit failed)");
                    }
                }
            }
            Err(msg) => eprintln!("verbs-emu: {msg}"),
        }
        built
    });
    r.as_ref().map_err(String::as_str)
}

impl Emu {
    fn from_env() -> Result<Self, String> {
        let topology = Topology::from_env()?;
        let seed = seed_from_env()?;
        let me = topology.host_index(&host_from_env())?;
        match std::env::var_os(FABRIC_ENV).filter(|p| !p.is_empty()) {
            Some(path) => Emu::joined(&topology, me, seed, std::path::Path::new(&path)),
            None => Emu::new(&topology, me, seed),
        }
    }

    /// The emulator of host `me` (an index into `topology.hosts`) on a fabric seeded `seed`.
    ///
    /// # Errors
    /// The topology cannot be built (a duplicate address).
    pub fn new(topology: &Topology, me: usize, seed: u64) -> Result<Self, String> {
        let (sim, host, ports) = build_sim(topology, me, seed)?;
        sim.set_faults(crate::fabric::fault_plan(topology, &ports))
            .map_err(|e| format!("the topology's faults: {e}"))?;
        Emu::with_sim(topology, me, sim, host, None)
    }

    /// The emulator of host `me` joined to the fabric process at `socket`: the fabric
    /// applies the links' faults, so this process's simulation has none.
    ///
    /// # Errors
    /// The topology cannot be built, or the fabric cannot be joined (the reason names
    /// the socket).
    pub fn joined(
        topology: &Topology,
        me: usize,
        seed: u64,
        socket: &std::path::Path,
    ) -> Result<Self, String> {
        let spec = &topology.hosts[me];
        if !spec.extra_devices.is_empty() {
            return Err(format!(
                "host {}: extra_devices need the emulator without a fabric process \
                 (cargo xtask emu --no-fabric): a fabric process carries one port per host",
                spec.name
            ));
        }
        let (sim, host, ports) = build_sim(topology, me, seed)?;
        let port = ports[me];
        let mac = sim
            .with_fabric(|f| f.port_config(port).map(|c| c.mac))
            .map_err(|e| format!("host {}: {e}", spec.name))?;
        let (tx, mut rx) = client::join(socket, &spec.name, mac, spec.ip)?;
        let cm = tx.cm_link()?;
        rx.set_cm_handler(deliver_cm);
        let member = Member::new(&sim, port, tx, rx)?;
        let joined = Joined {
            member: Mutex::new(member),
            cm,
            polled: AtomicU64::new(0),
            takeover: sys::eventfd()
                .map_err(|e| format!("an eventfd for the progress thread: {e}"))?,
        };
        Emu::with_sim(topology, me, sim, host, Some(joined))
    }

    fn with_sim(
        topology: &Topology,
        me: usize,
        sim: Sim,
        host: HostId,
        member: Option<Joined>,
    ) -> Result<Self, String> {
        let infos = sim
            .verbs(host)
            .devices()
            .map_err(|e| format!("listing the devices of {}: {e}", topology.hosts[me].name))?;
        let devices = infos
            .into_iter()
            .enumerate()
            .map(|(i, info)| new_device(i, info))
            .collect();
        Ok(Emu {
            sim,
            host,
            spec: topology.hosts[me].clone(),
            devices,
            channels: Mutex::new(Vec::new()),
            contexts: Mutex::new(Vec::new()),
            doorbells: Mutex::new(Vec::new()),
            member,
        })
    }

    /// Loses the next frame a NIC of this process hands to the network (the fault plan's
    /// drop list, as the simulator's own loss cases do).
    ///
    /// # Errors
    /// When this host joined a fabric process (whose network it is), or the plan is refused.
    pub fn lose_next_frame(&self) -> Result<(), String> {
        if self.is_joined() {
            return Err("the network is the fabric process's: no frame can be chosen here".into());
        }
        let (next, mut plan) = self
            .sim
            .with_fabric(|f| (f.stats().transmitted, f.faults().clone()));
        plan.drop_packets.push(next);
        self.sim.set_faults(plan).map_err(|e| e.to_string())
    }

    /// True if this host joined a fabric process.
    #[must_use]
    pub fn is_joined(&self) -> bool {
        self.member.is_some()
    }

    /// The link that carries the connection manager's messages to the processes of other
    /// hosts, if this host joined a fabric process.
    #[must_use]
    pub fn cm_link(&self) -> Option<&CmLink> {
        self.member.as_ref().map(|j| &j.cm)
    }

    /// This host's verbs provider.
    pub fn verbs(&self) -> SimVerbs {
        self.sim.verbs(self.host)
    }

    /// Lets the progress thread deliver `channel`'s events.
    pub fn register_channel(&self, channel: &Arc<ChannelState>) {
        lock(&self.channels).push(Arc::downgrade(channel));
    }

    /// Lets the progress thread deliver `context`'s async events.
    pub fn register_context(&self, context: &Arc<ContextState>) {
        lock(&self.contexts).push(Arc::downgrade(context));
    }

    /// Lets the progress thread, and every CQ poll, read `doorbell`.
    pub fn register_doorbell(&self, doorbell: Weak<dyn Doorbell>) {
        lock(&self.doorbells).push(doorbell);
    }

    /// Reads every registered doorbell: before each progress round and before each poll
    /// of a CQ (a poll that finds nothing moves the simulation, whose frames must find the
    /// receives the program has posted by then, as a device reads a doorbell record at
    /// once).
    pub fn read_doorbells(&self) {
        for d in live_of(&self.doorbells) {
            d.read_doorbell();
        }
    }

    /// For a program's thread that found a CQ empty: takes the frames the fabric brought
    /// and runs the simulation up to now, unless the progress thread is doing so (then it
    /// returns at once). True if it ran. A program polling a CQ in a loop so sees a frame
    /// as soon as the fabric puts it in the ring, without waiting for the progress thread
    /// to be woken and scheduled (on a loaded machine, tens of microseconds per wakeup).
    pub fn poll_fabric(&self) -> bool {
        let Some(j) = &self.member else {
            return false;
        };
        let now = wall_ns();
        j.polled.store(now, Ordering::Relaxed);
        let Ok(mut member) = j.member.try_lock() else {
            return false;
        };
        member.pump_frames(&self.sim, now);
        true
    }

    /// For a program that arms a CQ (`ibv_req_notify_cq`) to wait for its event: if it
    /// polled the fabric a moment ago, the progress thread, which left the frames to it,
    /// takes them over now instead of at its next look (`Joined::wait`).
    pub fn program_waits(&self) {
        if let Some(j) = &self.member {
            if j.polled.swap(0, Ordering::Relaxed) != 0 {
                sys::ring_event(j.takeover.as_fd());
            }
        }
    }

    /// One round of progress: runs the simulation up to `virtual_now` and hands every
    /// completion event to its channel's file descriptor and every async event to its
    /// context's.
    pub fn progress(&self, virtual_now: u64) {
        self.read_doorbells();
        match &self.member {
            Some(j) => lock(&j.member).pump(&self.sim, virtual_now),
            None => {
                let now = self.sim.now();
                if virtual_now > now {
                    self.sim.run_for(virtual_now - now);
                }
            }
        }
        let live = live_of(&self.channels);
        for c in live {
            c.collect_events();
        }
        for c in live_of(&self.contexts) {
            c.collect_events();
        }
    }
}

/// Builds the simulation of every host of `topology` (no faults yet): the simulator's id
/// of host `me`, and each host's port.
fn build_sim(
    topology: &Topology,
    me: usize,
    seed: u64,
) -> Result<(Sim, HostId, Vec<PortId>), String> {
    let sim = Sim::new(seed);
    let mut host = None;
    let mut ports = Vec::new();
    for (i, h) in topology.hosts.iter().enumerate() {
        let id = sim
            .add_host(&h.name, h.ip, h.personality)
            .map_err(|e| format!("host {}: {e}", h.name))?;
        for &ip in &h.extra_devices {
            sim.add_device(id, h.personality, PortConfig::with_ip(ip))
                .map_err(|e| format!("host {}, device at {ip}: {e}", h.name))?;
        }
        if i == me {
            host = Some(id);
        }
        ports.push(
            sim.port_of(id)
                .ok_or_else(|| format!("host {} has no port", h.name))?,
        );
    }
    let host = host.ok_or_else(|| format!("no host number {me} in the topology"))?;
    Ok((sim, host, ports))
}

/// The registered objects still alive (the dead are forgotten).
fn live_of<T: ?Sized>(list: &Mutex<Vec<Weak<T>>>) -> Vec<Arc<T>> {
    let mut l = lock(list);
    l.retain(|w| w.strong_count() > 0);
    l.iter().filter_map(Weak::upgrade).collect()
}

/// Device `index` of its host: named `uverbs<index>` in `/dev/infiniband` and
/// `/sys/class/infiniband_verbs` as a kernel device is (`verbs-emu run` puts a host's
/// `uverbs0` in both).
fn new_device(index: usize, info: DeviceInfo) -> Box<EmuDevice> {
    let mut raw = ffi::ibv_device {
        node_type: info.node_type.as_raw(),
        transport_type: info.transport_type.as_raw(),
        ..ffi::ibv_device::default()
    };
    copy_c_string(&mut raw.name, &info.name);
    copy_c_string(&mut raw.dev_name, &format!("uverbs{index}"));
    copy_c_string(
        &mut raw.dev_path,
        &format!("/sys/class/infiniband_verbs/uverbs{index}"),
    );
    copy_c_string(&mut raw.ibdev_path, &ibdev_path(&info.name));
    Box::new(EmuDevice {
        raw,
        provider_ops: std::ptr::null(),
        info,
    })
}

/// The `ibdev_path` the emulator gives device `name`; `ibv_read_sysfs_file` answers for it.
pub fn ibdev_path(name: &str) -> String {
    format!("/sys/class/infiniband/{name}")
}

/// How long a process's exit waits for the fabric to take the frames its NIC sent and its
/// ring had no room for (the fabric paused it).
const EXIT_DRAIN: Duration = Duration::from_secs(10);

/// The process that registered [`drain_at_exit`]: a child forked from it inherits the
/// handler and a copy of the frames waiting, but the ring is its parent's (one
/// producer), so a child's exit must not send them again.
static DRAINER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// At exit: what the NIC sent (and completed) is on its way, as frames in a real NIC's
/// transmit buffer outlive the program; so the process waits until the fabric has room
/// for them (at most [`EXIT_DRAIN`], then says how many are lost). Nothing in a forked
/// child (see [`DRAINER`]).
extern "C" fn drain_at_exit() {
    boundary(Nothing, move || {
        if DRAINER.load(std::sync::atomic::Ordering::Relaxed) != std::process::id() {
            return;
        }
        let Some(Ok(emu)) = EMU.get() else {
            return;
        };
        let Some(j) = &emu.member else {
            return;
        };
        let begin = Instant::now();
        loop {
            // Never wait for the lock itself: exit may run in a signal handler (a program's
            // SIGTERM handler calling exit) that interrupted this very thread holding the
            // simulation's lock, while the progress thread holds this one and waits for
            // that: waiting here would hang the exit for ever.
            let left = match j.member.try_lock() {
                Ok(m) => Some(m.flush()),
                Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner().flush()),
                Err(std::sync::TryLockError::WouldBlock) => None,
            };
            if left == Some(0) {
                return;
            }
            if begin.elapsed() > EXIT_DRAIN {
                match left {
                    Some(n) => eprintln!(
                        "verbs-emu: {n} frames the NIC sent were still waiting for the fabric \
                         {EXIT_DRAIN:?} after exit began: lost"
                    ),
                    None => eprintln!(
                        "verbs-emu: the NIC's link to the fabric was still busy {EXIT_DRAIN:?} \
                         after exit began (exit from a signal handler?): frames it held are lost"
                    ),
                }
                return;
            }
            std::thread::sleep(Duration::from_micros(100));
        }
    })
}

/// The wall clock's origin: virtual time is the time since (in wall-clock mode).
static CLOCK: OnceLock<Instant> = OnceLock::new();

/// Nanoseconds of wall-clock time since [`CLOCK`]'s origin.
fn wall_ns() -> u64 {
    let start = CLOCK.get_or_init(Instant::now);
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// How long after it last took frames from the fabric the progress thread looks again
/// without sleeping (see `Joined::wait`).
const PROGRESS_SPIN: u64 = 100_000;

/// How often the progress thread looks, at most.
const PROGRESS_TICK: Duration = Duration::from_micros(200);

/// How long after a program's thread last polled the fabric the progress thread leaves
/// the frames to it (see `Joined::wait`).
const PROGRAM_POLLING: Duration = Duration::from_micros(50);

/// How long the progress thread sleeps at a time while a program polls (unless the
/// fabric's socket has a message, or the program arms a CQ, [`Emu::program_waits`]):
/// each wakeup takes a core from a poller for a moment; a program that stops polling
/// otherwise (to sleep, or to compute) leaves its frames in the rings at most this long.
const POLLING_SLEEP: Duration = Duration::from_millis(1);

/// Starts the thread that runs the simulation on the wall clock. It needs `&'static Emu`,
/// which exists once the OnceLock holds it: it waits for that, then runs for the life of
/// the process.
fn start_progress_thread() {
    let spawned = std::thread::Builder::new()
        .name("verbs-emu-progress".into())
        .spawn(|| {
            let _ = wall_ns();
            let emu = loop {
                match EMU.get() {
                    Some(Ok(e)) => break e,
                    Some(Err(_)) => return,
                    None => std::thread::sleep(PROGRESS_TICK),
                }
            };
            loop {
                emu.progress(wall_ns());
                match &emu.member {
                    Some(j) => j.wait(),
                    None => std::thread::sleep(PROGRESS_TICK),
                }
            }
        });
    if let Err(e) = spawned {
        eprintln!(
            "verbs-emu: cannot start the progress thread: {e}; completion channels will not signal"
        );
    }
}

impl Joined {
    /// Waits until the fabric rings (frames in the ring, or a control message) or a tick
    /// has passed (timers of the simulation are due at most that late, and completion
    /// channels are signalled at least that often).
    fn wait(&self) {
        let polled = self.polled.load(Ordering::Relaxed);
        if polled != 0 && wall_ns().saturating_sub(polled) < PROGRAM_POLLING.as_nanos() as u64 {
            // A program's thread polls a CQ in a loop and takes the frames itself
            // (`Emu::poll_fabric`): this thread neither spins nor asks for doorbells, and
            // leaves the cores to the pollers (on two cores, two programs polling and two
            // progress threads spinning took turns, each poller getting half a core). It
            // looks again when the fabric's socket has a message, an eventfd rings, the
            // program arms a CQ to wait, or after POLLING_SLEEP.
            let mut fds = Vec::with_capacity(5);
            lock(&self.member).poll_fds(&mut fds);
            fds.push(sys::pollin(self.takeover.as_raw_fd()));
            if sys::poll(&mut fds, Some(POLLING_SLEEP)).is_err() {
                std::thread::sleep(PROGRAM_POLLING);
            }
            sys::clear_event(self.takeover.as_fd());
            return;
        }
        let member = lock(&self.member);
        if member.took_frames_within(wall_ns(), PROGRESS_SPIN) {
            // Frames came a moment ago: more are likely (a stream). Looking again at
            // once costs the fabric no doorbell and this thread no wakeup (tens of
            // microseconds on a loaded machine); yielding lets the others run meanwhile.
            drop(member);
            std::thread::yield_now();
            return;
        }
        let timeout = if member.about_to_sleep() {
            Duration::ZERO
        } else {
            PROGRESS_TICK
        };
        let mut fds = Vec::with_capacity(4);
        member.poll_fds(&mut fds);
        drop(member);
        if sys::poll(&mut fds, Some(timeout)).is_err() {
            std::thread::sleep(PROGRESS_TICK);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use backend_sim::{Direction, LinkFaultRule};

    #[test]
    fn topology_faults_reach_the_fabric() {
        let mut t = Topology::default();
        t.hosts[1].faults = backend_sim::LinkFaults::loss(0.25);
        let e = Emu::new(&t, 0, 7).unwrap();
        let h2 = e.sim.port_of(HostId(1)).unwrap();
        let plan = e.sim.with_fabric(|f| f.faults().clone());
        assert!(!e.is_joined());
        assert_eq!(
            plan.links,
            vec![LinkFaultRule {
                port: h2,
                direction: Direction::FromSwitch,
                faults: backend_sim::LinkFaults::loss(0.25),
            }]
        );
        assert!(plan.default_link.is_clean());
    }

    #[test]
    fn each_host_sees_its_own_device() {
        let t = Topology::default();
        let e = Emu::new(&t, 1, 7).unwrap();
        assert_eq!(e.spec.name, "h2");
        assert_eq!(e.devices.len(), 1);
        assert_eq!(e.devices[0].info.name, "mlx5_0");
        let name: Vec<u8> = e.devices[0].raw.name[..7]
            .iter()
            .map(|&c| c as u8)
            .collect();
        assert_eq!(&name, b"mlx5_0\0");
    }
}
