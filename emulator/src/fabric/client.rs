//! An emulated process's side of the fabric: joining (a hello naming its host, a welcome
//! bringing the shared-memory rings), the [`Sender`] that puts what the host's NIC
//! transmits into the ring to the fabric the moment it is sent, or keeps it while the
//! ring is full (multicast joins and leaves go on the socket), and the [`Receiver`] whose frames the progress thread
//! injects into the host's port at the current virtual time ([`Member::pump`]). The
//! connection manager's messages go out through a [`CmLink`] and come in through the
//! [`Receiver`]'s handler ([`CmIn`]).

use std::collections::VecDeque;
use std::net::Ipv4Addr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use backend_sim::fabric::ExternalMsg;
use backend_sim::frame::eth::Mac;
use backend_sim::{Nanos, PortId, Sim};

use super::ring::{Consumer, Producer, Region, RingError, Way};
use super::spacing::{LastFrame, TakenFrom};
use super::sys::{self, Recv};
use super::wire::{FromFabric, ToFabric, MAX_CM, MAX_MSG};

/// How long a hello waits for the fabric's answer.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

/// Bytes the NIC may have in the ring to the fabric, not read yet: past them, what it
/// sends waits in the [`Sender`] and the host's virtual time stands still until the
/// fabric reads (as the fabric's own `PAUSE_BYTES` does for what it holds for a process):
/// frames wait little on the way, whatever the pace of the processes.
pub const QUEUE_LIMIT: u64 = 512 << 10;

/// Most frames taken from the ring in one round (the rest wait for the next).
const RECV_BATCH: usize = 256;

/// Frames injected before the simulation runs, within a round: the NIC frees each
/// frame's buffer once it has handled it, so the allocator hands the same memory to the
/// next chunk; injecting a whole batch first grew the heap by up to a megabyte and gave
/// it back every round (a page fault per received frame, the most of the receiving
/// thread's time in `ib_write_bw`).
const INJECT_CHUNK: usize = 16;

/// What both ends of a link share: where the fabric is, and whether it is gone.
#[derive(Debug)]
struct Shared {
    path: PathBuf,
    gone: AtomicBool,
    /// When the NIC last sent a frame (for the connection manager's spacing).
    last_frame: LastFrame,
}

impl Shared {
    /// Marks the fabric gone, saying so (once) on stderr.
    fn lost(&self, why: &dyn std::fmt::Display) {
        if !self.gone.swap(true, Ordering::SeqCst) {
            eprintln!(
                "verbs-emu: lost the fabric at {} ({why}); this host's frames go nowhere now",
                self.path.display()
            );
        }
    }

    fn is_gone(&self) -> bool {
        self.gone.load(Ordering::SeqCst)
    }
}

/// Connects to the fabric's socket at `path` and joins as `host` (whose port has `mac`
/// and `ip`); waits for the fabric's welcome and maps the rings it brings.
///
/// # Errors
/// A one-line reason: no fabric there, or the fabric refused (an unknown host, one
/// another process already is, a topology that differs).
pub fn join(path: &Path, host: &str, mac: Mac, ip: Ipv4Addr) -> Result<(Sender, Receiver), String> {
    let at = || format!("the fabric at {}", path.display());
    let fd = sys::connect(path).map_err(|e| format!("cannot join {}: {e}", at()))?;
    let mut buf = vec![0; MAX_MSG + 1];
    let mut out = Vec::with_capacity(MAX_MSG);
    ToFabric::Hello { mac, ip, host }.encode(&mut out);
    sys::send(fd.as_fd(), &out, false).map_err(|e| format!("cannot join {}: {e}", at()))?;
    let (n, rings) = match sys::recv_with_fd(fd.as_fd(), &mut buf, HELLO_TIMEOUT) {
        Ok((Recv::Msg(n), rings)) => (n, rings),
        Ok((Recv::Closed, _)) => return Err(format!("{} hung up on host {host}", at())),
        Ok((other, _)) => return Err(format!("{} answered {other:?} to the hello", at())),
        Err(e) => return Err(format!("{} did not welcome host {host}: {e}", at())),
    };
    let ring = match FromFabric::decode(&buf[..n]) {
        Ok(FromFabric::Welcome { ring }) => ring as usize,
        Ok(FromFabric::Error(why)) => return Err(format!("{} refused host {host}: {why}", at())),
        Ok(
            FromFabric::Doorbell
            | FromFabric::Cm { .. }
            | FromFabric::CmReturned { .. }
            | FromFabric::Gone(_),
        ) => return Err(format!("{} spoke before its welcome", at())),
        Err(why) => return Err(format!("{} answered garbage: {why}", at())),
    };
    let rings = rings.ok_or_else(|| format!("{} sent no rings with its welcome", at()))?;
    let region = Region::map(rings.as_fd(), ring)
        .map_err(|e| format!("cannot map the rings of {}: {e}", at()))?;
    let region = Arc::new(region);
    let send_fd = fd
        .try_clone()
        .map_err(|e| format!("cannot share the socket of {}: {e}", at()))?;
    let shared = Arc::new(Shared {
        path: path.to_path_buf(),
        gone: AtomicBool::new(false),
        last_frame: LastFrame::default(),
    });
    Ok((
        Sender {
            fd: send_fd,
            out,
            tx: Producer::new(region.clone(), Way::ToFabric),
            shared: shared.clone(),
            waiting: VecDeque::new(),
        },
        Receiver {
            fd,
            buf,
            rx: Consumer::new(region, Way::FromFabric),
            shared,
            cm: None,
            taken: TakenFrom::default(),
        },
    ))
}

/// A connection-manager message the fabric brought.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmIn<'a> {
    /// From the process of host `from`.
    From {
        /// The sending host.
        from: Ipv4Addr,
        /// The message.
        body: &'a [u8],
        /// When this process last took a frame of that host from the fabric (all
        /// the frames it sent before the message had come by then): see
        /// [`super::spacing`].
        frames_taken: Option<super::spacing::Taken>,
    },
    /// One this process sent to host `to`, returned: no process is that host.
    Returned {
        /// The destination it had.
        to: Ipv4Addr,
        /// The message.
        body: &'a [u8],
    },
    /// The process of host `.0` has gone: its kernel would have said farewell to every
    /// peer of its ids.
    Gone(Ipv4Addr),
}

/// What the [`Receiver`] calls with each connection-manager message (on the thread
/// that reads the socket; it must not block).
pub type CmHandler = fn(CmIn<'_>);

/// Sends the connection manager's messages to the fabric, from any thread (each is one
/// message on the socket, sent whole).
#[derive(Debug)]
pub struct CmLink {
    fd: OwnedFd,
    shared: Arc<Shared>,
}

impl CmLink {
    /// How long ago this host's NIC last sent a frame; `None` if it never has.
    #[must_use]
    pub fn since_last_frame(&self) -> Option<Duration> {
        self.shared.last_frame.since()
    }

    /// Sends `body` to the process of host `to`.
    ///
    /// # Errors
    /// The message is longer than [`MAX_CM`], or the fabric is gone (the reason).
    pub fn send(&self, to: Ipv4Addr, body: &[u8]) -> Result<(), String> {
        if body.len() > MAX_CM {
            return Err(format!(
                "a connection-manager message of {} bytes (at most {MAX_CM})",
                body.len()
            ));
        }
        if self.shared.is_gone() {
            return Err("the fabric is gone".into());
        }
        let mut out = Vec::with_capacity(MAX_MSG);
        ToFabric::Cm { to, body }.encode(&mut out);
        sys::send(self.fd.as_fd(), &out, false).map_err(|e| {
            self.shared.lost(&e);
            e.to_string()
        })
    }
}

/// What the host's port sends to the fabric.
#[derive(Debug)]
pub struct Sender {
    fd: OwnedFd,
    out: Vec<u8>,
    tx: Producer,
    shared: Arc<Shared>,
    /// Frames sent while the ring was full (the fabric paused this host, or is slow to
    /// drain it), in order, for [`Sender::flush`].
    waiting: VecDeque<Vec<u8>>,
}

impl Sender {
    /// A link for the connection manager's messages, on this sender's socket.
    ///
    /// # Errors
    /// The socket cannot be shared (out of descriptors).
    pub fn cm_link(&self) -> Result<CmLink, String> {
        Ok(CmLink {
            fd: self
                .fd
                .try_clone()
                .map_err(|e| format!("cannot share the fabric's socket: {e}"))?,
            shared: self.shared.clone(),
        })
    }

    fn control(&mut self, m: ToFabric<'_>) {
        m.encode(&mut self.out);
        if let Err(e) = sys::send(self.fd.as_fd(), &self.out, false) {
            self.shared.lost(&e);
        }
    }

    /// Tells the fabric what the port did: a frame goes into the ring (or, while the
    /// ring is full or holds [`QUEUE_LIMIT`] bytes, waits here for [`Sender::flush`]:
    /// sending never blocks), the rest on the socket. Nothing is sent once the fabric is
    /// gone.
    pub fn send(&mut self, msg: &ExternalMsg) {
        if self.shared.is_gone() {
            return;
        }
        match msg {
            ExternalMsg::Frame { frame, .. } => self.push(frame),
            ExternalMsg::JoinGroup(g) => self.control(ToFabric::Join(*g)),
            ExternalMsg::LeaveGroup(g) => self.control(ToFabric::Leave(*g)),
            ExternalMsg::JoinMac(m) => self.control(ToFabric::JoinMac(*m)),
            ExternalMsg::LeaveMac(m) => self.control(ToFabric::LeaveMac(*m)),
        }
    }

    fn push(&mut self, frame: &[u8]) {
        self.shared.last_frame.sent();
        if self.flush() && self.tx.queued() < QUEUE_LIMIT {
            match self.tx.push(frame, 0) {
                Ok(ring) => {
                    if ring {
                        self.control(ToFabric::Doorbell);
                    }
                    return;
                }
                // Make sure the fabric is awake to drain it.
                Err(RingError::Full) => self.control(ToFabric::Doorbell),
                Err(e) => return self.shared.lost(&e),
            }
        }
        self.waiting.push_back(frame.to_vec());
    }

    /// Moves the frames waiting for room into the ring, as far as it has room (up to
    /// [`QUEUE_LIMIT`] queued). True if none waits any more (also once the fabric is
    /// gone: they go nowhere).
    pub fn flush(&mut self) -> bool {
        let mut ring = false;
        while let Some(frame) = self.waiting.front() {
            if self.shared.is_gone() {
                self.waiting.clear();
                break;
            }
            if self.tx.queued() >= QUEUE_LIMIT {
                break;
            }
            match self.tx.push(frame, 0) {
                Ok(r) => {
                    ring |= r;
                    self.waiting.pop_front();
                }
                Err(RingError::Full) => break,
                Err(e) => {
                    self.shared.lost(&e);
                    self.waiting.clear();
                }
            }
        }
        if ring {
            self.control(ToFabric::Doorbell);
        }
        self.waiting.is_empty()
    }

    /// How many frames wait for room.
    #[must_use]
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }
}

/// What the fabric sends to the host's port.
#[derive(Debug)]
pub struct Receiver {
    fd: OwnedFd,
    buf: Vec<u8>,
    rx: Consumer,
    shared: Arc<Shared>,
    cm: Option<CmHandler>,
    /// When frames of each host were last taken.
    taken: TakenFrom,
}

impl Receiver {
    /// Hands every connection-manager message that comes from now on to `handler`
    /// (without one they are dropped).
    pub fn set_cm_handler(&mut self, handler: CmHandler) {
        self.cm = Some(handler);
    }

    /// The socket, for polling (doorbells and the fabric's farewell arrive there).
    #[must_use]
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// True once the fabric has gone away.
    #[must_use]
    pub fn is_gone(&self) -> bool {
        self.shared.is_gone()
    }

    /// Reads the control messages waiting on the socket: doorbells (nothing to do but
    /// wake up), connection-manager messages (to the handler), or the fabric's farewell.
    pub fn read_control(&mut self) {
        while !self.is_gone() {
            match sys::recv(self.fd.as_fd(), &mut self.buf) {
                Ok(Recv::Empty) => return,
                Ok(Recv::Msg(n)) => match FromFabric::decode(&self.buf[..n]) {
                    Ok(FromFabric::Doorbell) => {}
                    Ok(FromFabric::Cm { from, body }) => {
                        if let Some(h) = self.cm {
                            let frames_taken = self.taken.last_from(from);
                            h(CmIn::From {
                                from,
                                body,
                                frames_taken,
                            });
                        }
                    }
                    Ok(FromFabric::CmReturned { to, body }) => {
                        if let Some(h) = self.cm {
                            h(CmIn::Returned { to, body });
                        }
                    }
                    Ok(FromFabric::Gone(host)) => {
                        if let Some(h) = self.cm {
                            h(CmIn::Gone(host));
                        }
                    }
                    Ok(FromFabric::Error(why)) => self.shared.lost(&format!("it said: {why}")),
                    Ok(FromFabric::Welcome { .. }) | Err(_) => {
                        self.shared
                            .lost(&"it sent something that is not a doorbell");
                    }
                },
                Ok(Recv::Closed) => self.shared.lost(&"it hung up"),
                Ok(Recv::Truncated(n)) => self.shared.lost(&format!("a message of {n} bytes")),
                Err(e) => self.shared.lost(&e),
            }
        }
    }

    /// Takes the next frame from the fabric into `buf` (the one copy out of the shared
    /// memory) and returns its index; `None` when there is none (or the ring broke).
    pub fn pop(&mut self, buf: &mut Vec<u8>) -> Option<u64> {
        if self.is_gone() {
            return None;
        }
        match self.rx.pop(buf) {
            Ok(got) => {
                if got.is_some() {
                    self.taken.frame(buf);
                }
                got
            }
            Err(e) => {
                self.shared.lost(&e);
                None
            }
        }
    }

    /// The frames [`Receiver::pop`] gave since the last call were all taken now.
    pub fn round_done(&mut self) {
        self.taken.round_done();
    }

    /// Before sleeping on [`Receiver::fd`]: asks for a doorbell when frames come. True
    /// if some are there already (then do not sleep).
    #[must_use]
    pub fn about_to_sleep(&self) -> bool {
        !self.is_gone() && self.rx.sleep_or_not()
    }
}

/// The process's host as a member of the fabric: its external port and what the fabric
/// sends it.
#[derive(Debug)]
pub struct Member {
    rx: Receiver,
    tx: Arc<Mutex<Sender>>,
    port: PortId,
    /// How far virtual time is behind the wall clock: the time spent paused.
    lag: Nanos,
    /// The wall-clock time of the last round.
    last: Nanos,
    /// When a [`Member::pump`] last took frames.
    took_at: Option<Nanos>,
}

impl Member {
    /// `port` of `sim` leads to the fabric from now on: what it sends goes out through
    /// `tx` as it is sent, and [`Member::pump`] brings in what `rx` receives. Virtual
    /// time stops where it stands until the first pump.
    ///
    /// # Errors
    /// The port does not exist.
    pub fn new(sim: &Sim, port: PortId, tx: Sender, rx: Receiver) -> Result<Self, String> {
        let tx = Arc::new(Mutex::new(tx));
        let sink = Arc::clone(&tx);
        sim.with_fabric(|f| {
            f.set_external(port)?;
            f.set_horizon(Some(f.now()));
            f.set_external_sink(Some(Box::new(move |_, msg| {
                sink.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .send(msg);
            })));
            Ok::<_, backend_sim::FabricError>(())
        })
        .map_err(|e| format!("the host's port: {e}"))?;
        Ok(Member {
            rx,
            tx,
            port,
            lag: 0,
            last: 0,
            took_at: None,
        })
    }

    /// The socket the fabric rings on, for polling.
    #[must_use]
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.rx.fd()
    }

    /// Moves what the NIC sent and the ring had no room for into the ring, as far as it
    /// has room; how many frames still wait.
    pub fn flush(&self) -> usize {
        let mut tx = self.tx.lock().unwrap_or_else(PoisonError::into_inner);
        tx.flush();
        tx.waiting()
    }

    /// Before the progress thread sleeps: true if frames are waiting already.
    #[must_use]
    pub fn about_to_sleep(&self) -> bool {
        self.rx.about_to_sleep()
    }

    /// One round at wall-clock time `now` (virtual nanoseconds): injects what the fabric
    /// sent, then lets the simulation run up to `now` and no further (the NIC handles the
    /// frames; what it sends in turn leaves through the sink at once), then reads the
    /// socket's messages: a connection manager's message comes after the frames the
    /// fabric put in the ring before it, as on a wire. Two turns of the simulation's
    /// lock: a program polling a CQ in a loop takes it all the time.
    ///
    /// While frames the NIC sent still wait for room in the ring (the fabric paused this
    /// host: see `PAUSE_BYTES` in the fabric's server), virtual time stands still: the
    /// NIC sends nothing new and its timers wait, as a NIC paused by its switch, and what
    /// comes in is still taken and handled at the current virtual time. Afterwards
    /// virtual time goes on from where it stood (it stays behind the wall clock by the
    /// time spent paused), so that no timer fires for the pause.
    pub fn pump(&mut self, sim: &Sim, now: Nanos) {
        if self.advance(sim, now) > 0 {
            self.took_at = Some(now);
        }
        self.rx.read_control();
    }

    /// True if a [`Member::pump`] took frames from the ring less than `within`
    /// nanoseconds before `now` (more are likely to come soon).
    #[must_use]
    pub fn took_frames_within(&self, now: Nanos, within: Nanos) -> bool {
        self.took_at.is_some_and(|t| now.saturating_sub(t) < within)
    }

    /// Injects what the ring holds and runs the simulation up to `now` (see
    /// [`Member::pump`]); how many frames it took.
    fn advance(&mut self, sim: &Sim, now: Nanos) -> usize {
        let clear = self
            .tx
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .flush();
        if !clear {
            self.lag += now.saturating_sub(self.last);
        }
        self.last = self.last.max(now);
        let target = now.saturating_sub(self.lag);
        let port = self.port;
        let rx = &mut self.rx;
        sim.with_fabric(|f| {
            f.set_horizon(Some(if clear { target.max(f.now()) } else { f.now() }));
        });
        let mut taken = 0;
        loop {
            let got = sim.with_fabric(|f| {
                for n in 0..INJECT_CHUNK {
                    let mut buf = f.spare_frame();
                    let Some(index) = rx.pop(&mut buf) else {
                        f.recycle_frame(buf);
                        return n;
                    };
                    // The ring checked the length: the port refuses nothing else.
                    let _ = f.inject(port, buf, index);
                }
                INJECT_CHUNK
            });
            // Everything due by the horizon: the frames just injected, timers.
            sim.run_for(Nanos::MAX);
            taken += got;
            if got < INJECT_CHUNK || taken >= RECV_BATCH {
                self.rx.round_done();
                return taken;
            }
        }
    }

    /// [`Member::pump`] without reading the socket, for a program's thread that polls a
    /// CQ: it takes what the fabric put in the ring and moves the simulation to `now`,
    /// and leaves the connection manager's messages (and the doorbells) to the progress
    /// thread, which reads them after the frames before them, as `pump` does.
    pub fn pump_frames(&mut self, sim: &Sim, now: Nanos) {
        let _ = self.advance(sim, now);
    }
}
