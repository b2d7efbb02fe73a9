//! The fabric process's event loop: one [`Fabric`] with a port per host of the topology
//! (the switch, the links with the topology's faults drawn from the seed, the pcap
//! capture) and no NICs: those live in the emulated processes, one per host, that join
//! over the Unix socket and get a pair of shared-memory rings with the welcome. A frame a
//! process puts in its ring is transmitted from its host's port at the fabric's virtual
//! time (the wall clock since the fabric started); what arrives at a port goes into the
//! ring to the process of its host.
//!
//! The socket lives in a fresh private directory (0700) and is 0600; a peer of another
//! user is refused (`SO_PEERCRED`). Whatever a peer sends, the fabric does not fall over:
//! a malformed message gets the peer an error message and a hang-up, and the others go
//! on.

use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use backend_sim::frame::eth::Mac;
use backend_sim::{CaptureFilter, Fabric, FabricStats, Nanos, Output, PortConfig, PortId};

use super::direct::{DirectCounts, Pair, PairNews};
use super::ports::cm_bridge::Bridge;
use super::ports::cm_resend::Resend;
use super::ports::{arp, nd, Ports};
use super::ring::{Consumer, Producer, RingError};
use super::sys::{self};
use super::wire::{FromFabric, MAX_MSG};
use crate::topology::Topology;

mod pairs;
mod peers;
mod remote_cm;
mod summary;

/// How a fabric is set up.
#[derive(Debug, Clone)]
pub struct Config {
    /// The hosts and their links' faults.
    pub topology: Topology,
    /// The seed of the links' random draws.
    pub seed: u64,
    /// Where to write a pcap of every frame a host sends (`None`: no capture).
    pub pcap: Option<PathBuf>,
    /// The private directory to make for the socket (it must not exist); `None`:
    /// `verbs-emu-fabric-PID` under `$XDG_RUNTIME_DIR` or the temporary directory.
    pub dir: Option<PathBuf>,
    /// Whether two processes whose hosts' links have no faults send each other their
    /// unicast frames through a ring pair of their own when nothing is captured
    /// ([`crate::fabric::direct`]); false: every frame crosses the fabric.
    pub direct: bool,
}

/// The socket's file name in the run directory.
pub const SOCKET_NAME: &str = "fabric.sock";

/// Most multicast memberships one process may hold (a bound on what a peer can make the
/// fabric remember).
const MAX_MEMBERSHIPS: usize = 4096;

/// Most messages or frames read from one process in one round, so one busy sender cannot
/// starve the others.
const READ_BATCH: usize = 256;

/// Most bytes of frames the fabric holds for a process whose ring is full (the egress
/// queue of its switch port): a process descheduled for a moment loses nothing; one that
/// stays behind loses what does not fit ("process full").
pub const BACKLOG_BYTES: usize = 16 << 20;

/// Bytes queued for a process (in its ring and its backlog) at which the fabric pauses
/// every sender (stops taking frames from their rings), as a lossless (PFC) Ethernet
/// switch pauses its ingress ports when an egress queue fills: a process slower than the
/// others' NICs slows them instead of losing their frames, and what waits for it stays
/// small, so that the time a frame waits (some 5 ms at 100 MB/s here, and as much in the
/// sender's ring) stays under the transport timeouts programs set (perftest's 67 ms). A
/// paused process's virtual time stands still, its timers with it (see `Member::pump`).
pub const PAUSE_BYTES: u64 = 512 << 10;

/// How long a process with more than [`PAUSE_BYTES`] queued may read nothing at all
/// before the fabric stops pausing for it (a process stopped or stuck: as a PFC watchdog
/// does, its queue then drops what does not fit, and the others go on).
pub const PAUSE_WATCHDOG: Duration = Duration::from_millis(100);

/// How long after frames last moved the fabric keeps looking at the rings without
/// sleeping (yielding the processor between looks) instead of asking the processes for
/// doorbells: a doorbell costs the sender a system call and the fabric a wakeup, and on
/// a loaded machine a woken process waits tens of microseconds for a processor, once per
/// frame's crossing of the fabric.
const SPIN_AFTER: Duration = Duration::from_micros(100);

/// How soon the fabric looks again at a ring it holds frames for (the process does not
/// ring when it makes room).
const BACKLOG_RETRY: Duration = Duration::from_micros(50);

/// Counters of what the fabric did besides moving frames (those are in [`FabricStats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// Processes that joined.
    pub joined: u64,
    /// Connections refused before they joined (another user, garbage or a refused
    /// hello).
    pub refused: u64,
    /// Joined processes hung up on for a malformed message.
    pub bad_messages: u64,
    /// Frames for a host no process is.
    pub no_process: u64,
    /// Frames dropped because the receiving process's ring was full and its backlog too
    /// ([`BACKLOG_BYTES`]).
    pub process_full: u64,
    /// Times the fabric paused the senders for a process's backlog ([`PAUSE_BYTES`]).
    pub pauses: u64,
    /// Connection-manager messages handed to the process of their destination host, or
    /// sent as a CM MAD to a host beyond a port.
    pub cm_forwarded: u64,
    /// Connection-manager messages returned to their sender: no process was the
    /// destination host (or its process had just gone). Counted also when the sender has
    /// gone too and nobody hears it.
    pub cm_returned: u64,
    /// Connection-manager messages lost: the receiving process's socket was full.
    pub cm_lost: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Group {
    Ip(Ipv4Addr),
    Mac(Mac),
}

/// A host of the topology, as the fabric sees it.
#[derive(Debug)]
struct Slot {
    name: String,
    ip: Ipv4Addr,
    mac: Mac,
    port: PortId,
    /// The connection that is this host.
    conn: Option<usize>,
    /// Its link has no faults (it may have direct pairs).
    clean: bool,
}

#[derive(Debug)]
struct Conn {
    fd: OwnedFd,
    /// The host (an index into the slots) once the hello was accepted.
    host: Option<usize>,
    /// Memberships held, with counts, to undo when the process goes.
    groups: Vec<(Group, u32)>,
    /// The rings, once joined: frames from the process, frames to it.
    rings: Option<(Consumer, Producer)>,
    /// Frames for the process that did not fit its ring yet, in order, with their index.
    backlog: std::collections::VecDeque<(Vec<u8>, u64)>,
    /// Their bytes.
    backlog_bytes: usize,
    /// How far the process had read its ring when last looked at, and when it last read
    /// (or had nothing to read).
    read: (u64, Instant),
}

impl Conn {
    /// True if what is queued for the process calls for pausing the senders at `now`:
    /// over [`PAUSE_BYTES`] in its ring and backlog, and the process read within
    /// [`PAUSE_WATCHDOG`].
    fn wants_pause(&mut self, now: Instant) -> bool {
        let Some((_, tx)) = &self.rings else {
            return false;
        };
        let consumed = tx.consumed();
        let queued = tx.queued() + self.backlog_bytes as u64;
        if consumed != self.read.0 || queued == 0 {
            self.read = (consumed, now);
        }
        queued > PAUSE_BYTES && now.duration_since(self.read.1) < PAUSE_WATCHDOG
    }
}

/// The fabric process's state.
#[derive(Debug)]
pub struct Server {
    fabric: Fabric,
    listener: OwnedFd,
    dir: PathBuf,
    socket: PathBuf,
    slots: Vec<Slot>,
    conns: Vec<Option<Conn>>,
    start: Instant,
    buf: Vec<u8>,
    out: Vec<u8>,
    /// Frame buffers for reuse.
    spare: Vec<Vec<u8>>,
    fds: Vec<libc::pollfd>,
    stats: ServerStats,
    capturing: bool,
    /// Senders paused (see [`PAUSE_BYTES`]).
    paused: bool,
    /// The fabric's counts of frames transmitted and delivered when last looked at, and
    /// when they last changed (see [`SPIN_AFTER`]).
    moved: (u64, u64),
    active: Instant,
    /// Hosts whose process has gone, not told to the others yet: each waits until the
    /// frames transmitted before it went (global index below the second) have reached
    /// their processes' rings, so that the news does not overtake them (a kernel's DREQ
    /// follows the data on the same wire).
    gone: Vec<(Ipv4Addr, u64)>,
    /// Connection-manager messages held, in order, until the frames their sender sent
    /// before them have reached their processes' rings (a MAD follows the data on the
    /// wire): (from, to, body, frames transmitted before it).
    held_cm: std::collections::VecDeque<(Ipv4Addr, Ipv4Addr, Vec<u8>, u64)>,
    /// The ports to real networks (see [`super::ports`]).
    ports: Ports,
    /// Direct pairs allowed ([`Config::direct`]).
    direct: bool,
    /// The live direct pairs.
    pairs: Vec<Pair>,
    /// The next pair's id.
    next_pair: u32,
    /// What the pairs' sides are to be told, in order, once the frames before it have
    /// arrived.
    held_pairs: std::collections::VecDeque<PairNews>,
    /// The frames of the pairs counted and forgotten.
    finished_direct: DirectCounts,
    /// CM messages to and from the hosts beyond them, as CM MADs (see `remote_cm`).
    cm_bridge: Bridge,
    /// The kernel CM's resends and answers to repeats around those MADs.
    cm_resend: Resend,
}

impl Server {
    /// Builds the fabric of `config` and listens on its socket.
    ///
    /// # Errors
    /// A one-line reason: the directory, socket or pcap file cannot be made, or the
    /// topology does not build.
    pub fn bind(config: &Config) -> Result<Self, String> {
        let mut fabric = Fabric::new(config.seed);
        let mut slots = Vec::new();
        // A remote host is beyond a port: its own fabric has its port.
        for h in config.topology.hosts.iter().filter(|h| !h.remote) {
            let id = fabric.add_host(h.name.clone());
            let port_config = PortConfig {
                // The NIC in the host's process loops multicast back and checks RoCE
                // checksums; the fabric is the wire and the switch only.
                multicast_loopback: false,
                verify_checksums: false,
                ..PortConfig::with_ip(h.ip)
            };
            let mac = port_config.mac;
            let port = fabric
                .add_port(id, port_config)
                .map_err(|e| format!("host {}: {e}", h.name))?;
            // Its link-local address's solicited-node group, as its kernel would join
            // (the fabric answers for it, see `nd`).
            fabric
                .join_mac_group(port, nd::solicited_node_mac(mac))
                .map_err(|e| format!("host {}: {e}", h.name))?;
            slots.push(Slot {
                name: h.name.clone(),
                ip: h.ip,
                mac,
                port,
                conn: None,
                clean: h.faults.is_clean(),
            });
        }
        let remote = config.topology.hosts.iter().filter(|h| h.remote);
        let cm_bridge = Bridge::new(remote.map(|h| h.ip).collect());
        let ports: Vec<PortId> = slots.iter().map(|s| s.port).collect();
        let mut plan = super::fault_plan(&config.topology, &ports);
        let (ports, rules) = Ports::open(&mut fabric, &config.topology.ports)?;
        plan.links.extend(rules);
        fabric
            .set_faults(plan)
            .map_err(|e| format!("the topology's faults: {e}"))?;
        let dir = config.dir.clone().unwrap_or_else(|| {
            sys::runtime_root().join(format!("verbs-emu-fabric-{}", std::process::id()))
        });
        sys::private_dir(&dir)
            .map_err(|e| format!("cannot make the private directory {}: {e}", dir.display()))?;
        let socket = dir.join(SOCKET_NAME);
        let listener = match sys::listen(&socket) {
            Ok(l) => l,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(format!("cannot listen on {}: {e}", socket.display()));
            }
        };
        let mut server = Server {
            fabric,
            listener,
            dir,
            socket,
            slots,
            conns: Vec::new(),
            start: Instant::now(),
            buf: vec![0; MAX_MSG + 1],
            out: Vec::with_capacity(MAX_MSG),
            spare: Vec::new(),
            fds: Vec::new(),
            stats: ServerStats::default(),
            gone: Vec::new(),
            held_cm: std::collections::VecDeque::new(),
            capturing: false,
            paused: false,
            ports,
            cm_bridge,
            cm_resend: Resend::default(),
            moved: (0, 0),
            active: Instant::now(),
            direct: config.direct,
            pairs: Vec::new(),
            next_pair: 0,
            held_pairs: std::collections::VecDeque::new(),
            finished_direct: DirectCounts::default(),
        };
        if let Some(p) = &config.pcap {
            server
                .fabric
                .capture_to_file(p, CaptureFilter::All)
                .map_err(|e| format!("cannot capture to {}: {e}", p.display()))?;
            server.capturing = true;
        }
        Ok(server)
    }

    /// The socket processes join at (what `VERBS_EMU_FABRIC` names).
    #[must_use]
    pub fn socket_path(&self) -> &Path {
        &self.socket
    }

    /// The fabric's counters.
    #[must_use]
    pub fn fabric_stats(&self) -> FabricStats {
        self.fabric.stats()
    }

    /// The server's own counters.
    #[must_use]
    pub fn stats(&self) -> ServerStats {
        self.stats
    }

    fn now(&self) -> Nanos {
        Nanos::try_from(self.start.elapsed().as_nanos()).unwrap_or(Nanos::MAX)
    }

    /// Serves until one of `stop` becomes readable (or hangs up), then ends the capture.
    ///
    /// # Errors
    /// A failing `ppoll` or `accept`, or the capture's first write error.
    pub fn run(&mut self, stop: &[BorrowedFd<'_>]) -> io::Result<()> {
        let n = stop.len();
        loop {
            let now = self.now();
            self.deliver(now);
            self.release_cm();
            self.release_pairs();
            self.tell_gone();
            self.cm_timers();
            let next = match (self.fabric.next_event_time(), self.cm_due()) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let mut timeout = next.map(|t| Duration::from_nanos(t.saturating_sub(self.now())));
            let wall = Instant::now();
            let mut pause = false;
            for c in self.conns.iter_mut().flatten() {
                pause |= c.wants_pause(wall);
            }
            if pause && !self.paused {
                self.stats.pauses += 1;
            }
            self.paused = pause;
            let f = self.fabric.stats();
            if (f.transmitted, f.delivered) != self.moved {
                self.moved = (f.transmitted, f.delivered);
                self.active = wall;
            }
            if !pause && wall.duration_since(self.active) < SPIN_AFTER {
                // Frames moved a moment ago: the next ones (a reply) are likely to come
                // soon. Looking at the rings again costs less than a doorbell and a
                // wakeup; yielding lets the processes run meanwhile.
                timeout = Some(Duration::ZERO);
                std::thread::yield_now();
            } else if !pause && self.rings_waiting() {
                timeout = Some(Duration::ZERO);
            } else if pause
                || !self.gone.is_empty()
                || !self.held_cm.is_empty()
                || !self.held_pairs.is_empty()
                || self.conns.iter().flatten().any(|c| !c.backlog.is_empty())
            {
                timeout = Some(timeout.map_or(BACKLOG_RETRY, |t| t.min(BACKLOG_RETRY)));
            }
            self.fds.clear();
            self.fds
                .extend(stop.iter().map(|s| sys::pollin(s.as_raw_fd())));
            self.fds.push(sys::pollin(self.listener.as_raw_fd()));
            for c in self.conns.iter().flatten() {
                self.fds.push(sys::pollin(c.fd.as_raw_fd()));
            }
            let port_fds = self.fds.len();
            self.ports.poll_fds(&mut self.fds);
            sys::poll(&mut self.fds, timeout)?;
            if self.fds[port_fds..].iter().any(|p| p.revents != 0) {
                self.ports.receive(&mut self.fabric);
            }
            if self.fds[..n].iter().any(|p| p.revents != 0) {
                break;
            }
            let ready: Vec<bool> = self.fds[n + 1..].iter().map(|p| p.revents != 0).collect();
            let live: Vec<usize> = (0..self.conns.len())
                .filter(|&i| self.conns[i].is_some())
                .collect();
            for (i, r) in live.into_iter().zip(ready) {
                if r {
                    self.read(i);
                }
                if !self.paused {
                    self.drain_ring(i);
                }
            }
            if self.fds[n].revents != 0 {
                self.accept()?;
            }
        }
        self.finish()
    }

    /// Ends the capture (flushing the file).
    fn finish(&mut self) -> io::Result<()> {
        if self.capturing {
            self.capturing = false;
            self.fabric
                .finish_capture()
                .map_err(|e| io::Error::other(format!("the capture: {e}")))?;
        }
        Ok(())
    }

    /// Before sleeping: asks every joined process for a doorbell when it puts frames in
    /// its ring. True if one has some already (then do not sleep).
    fn rings_waiting(&self) -> bool {
        let mut any = false;
        for c in self.conns.iter().flatten() {
            if let Some((rx, _)) = &c.rings {
                any |= rx.sleep_or_not();
            }
        }
        any
    }

    /// Transmits what connection `i` put in its ring (a batch at most), from its host's
    /// port, now; hangs up on it if the ring is corrupt.
    fn drain_ring(&mut self, i: usize) {
        let Some(c) = self.conns[i].as_mut() else {
            return;
        };
        let Some((port, (rx, _))) = c.host.map(|s| self.slots[s].port).zip(c.rings.as_mut()) else {
            return;
        };
        if let Err(why) = transmit_ring(&mut self.fabric, &mut self.spare, port, rx, READ_BATCH) {
            self.hang_up(i, &why);
        }
    }

    /// Hands every frame due by `now` to its host's process: what its ring has no room
    /// for waits in its backlog, behind what waits there already.
    fn deliver(&mut self, now: Nanos) {
        for i in 0..self.conns.len() {
            self.flush_backlog(i);
        }
        while let Some(out) = self.fabric.step_until(now) {
            // A seal does not cross to another process: its NIC sums the frame again.
            let Output::Frame {
                port, frame, index, ..
            } = out
            else {
                continue;
            };
            if !self.ports.is_empty() {
                if self.ports.owns(port) {
                    self.ports.send(port, &frame);
                    self.recycle(frame);
                    continue;
                }
                self.answer_arp(port, &frame);
                if self.cm_mad_in(port, &frame) {
                    self.recycle(frame);
                    continue;
                }
            }
            let conn = self.slots.get(port.0 as usize).and_then(|s| s.conn);
            let Some((i, c)) = conn.and_then(|i| self.conns[i].as_mut().map(|c| (i, c))) else {
                self.stats.no_process += 1;
                self.recycle(frame);
                continue;
            };
            if c.backlog.is_empty() {
                let pushed = c.rings.as_mut().map(|(_, tx)| tx.push(&frame, index));
                match pushed {
                    Some(Ok(ring)) => {
                        if ring {
                            FromFabric::Doorbell.encode(&mut self.out);
                            // A full socket already holds a message that wakes the process.
                            let _ = sys::send(c.fd.as_fd(), &self.out, true);
                        }
                        self.recycle(frame);
                        continue;
                    }
                    Some(Err(RingError::Full)) => {}
                    Some(Err(e)) => {
                        self.recycle(frame);
                        self.hang_up(i, &format!("its ring: {e}"));
                        continue;
                    }
                    None => {
                        self.stats.no_process += 1;
                        self.recycle(frame);
                        continue;
                    }
                }
            }
            if c.backlog_bytes + frame.len() > BACKLOG_BYTES {
                self.stats.process_full += 1;
                self.recycle(frame);
            } else {
                c.backlog_bytes += frame.len();
                c.backlog.push_back((frame, index));
            }
        }
    }

    /// Answers an ARP request or an IPv6 neighbour solicitation for a host that reached
    /// its port, from that port (its NIC has no kernel to do it; see [`arp`], [`nd`]).
    fn answer_arp(&mut self, port: PortId, frame: &[u8]) {
        let Some(slot) = self.slots.get(port.0 as usize) else {
            return;
        };
        let reply =
            arp::reply_for(frame, slot.ip, slot.mac).or_else(|| nd::advert_for(frame, slot.mac));
        if let Some(reply) = reply {
            // A reply (60 or 86 bytes) from a host's own port is never refused.
            let _ = self.fabric.transmit(port, reply);
        }
    }

    /// Moves what connection `i`'s ring has room for from its backlog into it.
    fn flush_backlog(&mut self, i: usize) {
        let Some(c) = self.conns[i].as_mut() else {
            return;
        };
        let Some((_, tx)) = c.rings.as_mut() else {
            return;
        };
        let mut ring = false;
        let mut broken = None;
        while let Some((frame, index)) = c.backlog.front() {
            match tx.push(frame, *index) {
                Ok(r) => {
                    ring |= r;
                    let Some((frame, _)) = c.backlog.pop_front() else {
                        break;
                    };
                    c.backlog_bytes -= frame.len();
                    if self.spare.len() < 1024 {
                        self.spare.push(frame);
                    }
                }
                Err(RingError::Full) => break,
                Err(e) => {
                    broken = Some(e);
                    break;
                }
            }
        }
        if ring {
            FromFabric::Doorbell.encode(&mut self.out);
            let _ = sys::send(c.fd.as_fd(), &self.out, true);
        }
        if let Some(e) = broken {
            self.hang_up(i, &format!("its ring: {e}"));
        }
    }

    /// Keeps a frame buffer for reuse.
    fn recycle(&mut self, frame: Vec<u8>) {
        if self.spare.len() < 1024 {
            self.spare.push(frame);
        }
    }
}

/// Transmits up to `limit` frames from ring `rx` out of `port`, now.
///
/// # Errors
/// The ring is corrupt, or holds a frame the port cannot send.
fn transmit_ring(
    fabric: &mut Fabric,
    spare: &mut Vec<Vec<u8>>,
    port: PortId,
    rx: &mut Consumer,
    limit: usize,
) -> Result<(), String> {
    for _ in 0..limit {
        let mut v = spare.pop().unwrap_or_default();
        match rx.pop(&mut v) {
            Ok(Some(_)) => {
                // The ring checked the length against the ports' maximum.
                fabric
                    .transmit(port, v)
                    .map_err(|e| format!("a frame its port cannot send: {e}"))?;
            }
            Ok(None) => {
                spare.push(v);
                return Ok(());
            }
            Err(e) => return Err(format!("its ring: {e}")),
        }
    }
    Ok(())
}

impl Drop for Server {
    /// Removes the run directory and its socket; flushes a capture not yet finished.
    fn drop(&mut self) {
        let _ = self.finish();
        let _ = std::fs::remove_file(&self.socket);
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Whether a peer of user `peer` may join a fabric run by user `me`: only the same user.
#[must_use]
pub fn uid_allowed(peer: u32, me: u32) -> bool {
    peer == me
}

/// Whether a send failed because the peer's process has gone (its hang-up not read yet),
/// rather than because its socket was full.
fn peer_gone(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_same_user_may_join() {
        assert!(uid_allowed(1000, 1000));
        assert!(!uid_allowed(0, 1000));
        assert!(!uid_allowed(1000, 0));
    }
}
