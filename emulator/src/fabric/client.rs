//! An emulated process's side of the fabric: joining (a hello naming its host, a welcome
//! bringing the shared-memory rings), the [`Sender`] that puts what the host's NIC
//! transmits into the ring to the fabric the moment it is sent, or keeps it while the
//! ring is full (multicast joins and leaves go on the socket), and the [`Receiver`] whose frames the progress thread
//! injects into the host's port at the current virtual time (`member::Member::pump`). The
//! connection manager's messages go out through a [`CmLink`] and come in through the
//! [`Receiver`]'s handler ([`CmIn`]). Frames for the host of a direct pair's peer go in
//! the pair's ring, and the receiver reads its pairs' rings too ([`super::direct`]).

use std::collections::VecDeque;
use std::net::Ipv4Addr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use backend_sim::fabric::unsummed::icrc_maybe_unwritten;
use backend_sim::fabric::ExternalMsg;
use backend_sim::frame::eth::Mac;
use backend_sim::frame::roce::fill_icrc;

use super::direct::{self, Barrier, Inbound, PeerTx};
use super::ring::{Consumer, Producer, Region, RingError, Way};
use super::spacing::{LastFrame, TakenFrom};
use super::stall::Mark;
use super::sys::{self, Recv};
use super::wire::{FromFabric, ToFabric, MAX_CM, MAX_MSG};

/// How long a hello waits for the fabric's answer.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

/// Bytes the NIC may have in the ring to the fabric, not read yet: past them, what it
/// sends waits in the [`Sender`] and the host's virtual time stands still until the
/// fabric reads (as the fabric's own `PAUSE_BYTES` does for what it holds for a process):
/// frames wait little on the way, whatever the pace of the processes.
pub const QUEUE_LIMIT: u64 = 512 << 10;

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
        Ok(_) => return Err(format!("{} spoke before its welcome", at())),
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
            peers: Vec::new(),
        },
        Receiver {
            fd,
            buf,
            out: Vec::with_capacity(MAX_MSG),
            rx: Consumer::new(region, Way::FromFabric),
            shared,
            cm: None,
            inbound: Inbound::default(),
            news: Vec::new(),
            held: VecDeque::new(),
            turn: false,
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
        /// When this process last took a frame of that host (all the frames it sent
        /// before the message had come by then): see [`super::spacing`].
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
    /// Frames sent while their ring was full (the fabric paused this host, or is slow to
    /// drain it, or a pair's peer is), in order, each with its way (`None`: the fabric,
    /// else a pair's id), for [`Sender::flush`].
    waiting: VecDeque<Waiting>,
    /// The direct pairs' writing halves.
    peers: Vec<PeerTx>,
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
    /// sending never blocks; a frame that waits is kept, its buffer taken from `msg`
    /// without a copy), the rest on the socket. Nothing is sent once the fabric is gone.
    pub fn send(&mut self, msg: &mut ExternalMsg) {
        if self.shared.is_gone() {
            return;
        }
        match msg {
            ExternalMsg::Frame { frame, sealed, .. } => self.push(frame, *sealed),
            ExternalMsg::JoinGroup(g) => self.control(ToFabric::Join(*g)),
            ExternalMsg::LeaveGroup(g) => self.control(ToFabric::Leave(*g)),
            ExternalMsg::JoinMac(m) => self.control(ToFabric::JoinMac(*m)),
            ExternalMsg::LeaveMac(m) => self.control(ToFabric::LeaveMac(*m)),
        }
    }

    fn push(&mut self, frame: &mut Vec<u8>, sealed: bool) {
        self.shared.last_frame.sent();
        let clear = self.flush();
        let way = self.way(frame, clear);
        if clear && self.queued(way) < QUEUE_LIMIT {
            match self.push_on(way, frame, sealed) {
                Ok(()) => return,
                // Make sure the fabric is awake to drain it (a pair's peer polls its ring).
                Err(RingError::Full) if way.is_none() => self.control(ToFabric::Doorbell),
                Err(RingError::Full) => {}
                Err(e) => return self.shared.lost(&e),
            }
        }
        self.waiting.push_back(Waiting {
            way,
            frame: std::mem::take(frame),
            sealed,
        });
    }

    /// The way of a frame: the pair of the host it is for, if any (`clear`: no frame
    /// waits, so a pair not switched to yet may be now), else the fabric.
    fn way(&mut self, frame: &[u8], clear: bool) -> Option<u32> {
        let k = self.peers.iter().position(|p| frame[..6] == p.mac.0)?;
        if !self.peers[k].switched {
            if !clear {
                return None;
            }
            // Every earlier frame for the peer is in the ring to the fabric: the fabric
            // opens the pair to the peer once they have arrived.
            self.control(ToFabric::Switched(self.peers[k].id));
            self.peers[k].switched = true;
        }
        Some(self.peers[k].id)
    }

    /// Bytes written and not read yet in the ring of `way`.
    fn queued(&self, way: Option<u32>) -> u64 {
        match way.and_then(|id| self.peers.iter().find(|p| p.id == id)) {
            Some(p) => p.tx.queued(),
            None => self.tx.queued(),
        }
    }

    /// Puts a frame in the ring of `way` (the fabric's if the pair is gone), ringing its
    /// reader if it sleeps. A pair's ring carries the NIC's `sealed` with the frame (no
    /// bit of it changes on the way), and the frame as the NIC made it: a sealed frame's
    /// ICRC may be unwritten ([`icrc_maybe_unwritten`]), which the receiving simulation
    /// writes if it has something that reads it. The fabric's ring carries no seal (its
    /// links may change bits) and the fabric checks and captures what it gets, so a frame
    /// for it gets its ICRC written here.
    fn push_on(
        &mut self,
        way: Option<u32>,
        frame: &mut [u8],
        sealed: bool,
    ) -> Result<(), RingError> {
        if let Some(k) = way.and_then(|id| self.peers.iter().position(|p| p.id == id)) {
            match self.peers[k].tx.push_record(frame, 0, sealed) {
                Ok(ring) => {
                    if ring {
                        self.peers[k].ring();
                    }
                    return Ok(());
                }
                Err(RingError::Full) => return Err(RingError::Full),
                Err(e) => {
                    // The peer wrote garbage into the pair: drop it, the fabric carries on.
                    eprintln!("verbs-emu: dropped direct pair {}: {e}", self.peers[k].id);
                    self.peers.remove(k);
                }
            }
        }
        if icrc_maybe_unwritten(frame, sealed) {
            fill_icrc(frame);
        }
        if self.tx.push(frame, 0)? {
            self.control(ToFabric::Doorbell);
        }
        Ok(())
    }

    /// Moves the frames waiting for room into their rings, as far as they have room (up
    /// to [`QUEUE_LIMIT`] queued), in order. True if none waits any more (also once the
    /// fabric is gone: they go nowhere).
    pub fn flush(&mut self) -> bool {
        while let Some(mut w) = self.waiting.pop_front() {
            if self.shared.is_gone() {
                self.waiting.clear();
                break;
            }
            if self.queued(w.way) >= QUEUE_LIMIT {
                self.waiting.push_front(w);
                break;
            }
            match self.push_on(w.way, &mut w.frame, w.sealed) {
                Ok(()) => {}
                Err(RingError::Full) => {
                    self.waiting.push_front(w);
                    break;
                }
                Err(e) => {
                    self.shared.lost(&e);
                    self.waiting.clear();
                }
            }
        }
        self.waiting.is_empty()
    }

    /// Where the reader of each ring this sender writes stands: the fabric's ring and
    /// each direct pair's (for [`super::stall::StallWatch`]); none once the fabric is
    /// gone (nothing reads them any more, and the host's timers must still run).
    pub fn marks(&self) -> impl Iterator<Item = Mark> + '_ {
        let mark = |way, tx: &Producer| Mark {
            way,
            consumed: tx.consumed(),
            queued: tx.queued(),
        };
        let rings = if self.shared.is_gone() { 0 } else { usize::MAX };
        std::iter::once(mark(None, &self.tx))
            .chain(self.peers.iter().map(move |p| mark(Some(p.id), &p.tx)))
            .take(rings)
    }

    /// How many frames wait for room.
    #[must_use]
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// Applies what the receiver learned about pairs.
    pub fn apply(&mut self, news: News) {
        match news {
            News::Added(p) => self.peers.push(p),
            News::Removed(id) => {
                // Frames still waiting for it go through the fabric (which counts them
                // as for no process, unless a new process is that host by then).
                self.peers.retain(|p| p.id != id);
            }
        }
    }
}

/// The next frame of an open pair, handed to `f` ([`Inbound::take`]); a pair whose ring is
/// corrupt is dropped, saying so.
fn take_pairs<R>(
    inbound: &mut Inbound,
    fabric_tail: u64,
    f: impl FnOnce(&[u8], u64, bool) -> R,
) -> Option<R> {
    match inbound.take(fabric_tail, f) {
        Ok(got) => got,
        Err(id) => {
            eprintln!("verbs-emu: dropped direct pair {id}: its ring is corrupt");
            inbound.drop_pair(id);
            None
        }
    }
}

/// A frame the NIC sent that waits for room in its ring.
#[derive(Debug)]
struct Waiting {
    /// `None`: the fabric's ring; else a pair's id.
    way: Option<u32>,
    frame: Vec<u8>,
    /// The NIC sealed it (see [`Sender::push_on`]).
    sealed: bool,
}

/// What the receiver learned about pairs, for the sender ([`Sender::apply`]).
#[derive(Debug)]
pub enum News {
    /// A new pair: frames for its peer's host may go in its ring.
    Added(PeerTx),
    /// Pair `.0`'s peer has gone: send it nothing more.
    Removed(u32),
}

/// A connection-manager message or news held until the pairs' rings are read up to where
/// they stood when it came.
#[derive(Debug)]
enum Held {
    Cm { from: Ipv4Addr, body: Vec<u8> },
    Returned { to: Ipv4Addr, body: Vec<u8> },
    Gone(Ipv4Addr),
}

/// What the fabric sends to the host's port.
#[derive(Debug)]
pub struct Receiver {
    fd: OwnedFd,
    buf: Vec<u8>,
    out: Vec<u8>,
    rx: Consumer,
    shared: Arc<Shared>,
    cm: Option<CmHandler>,
    /// The direct pairs' reading halves.
    inbound: Inbound,
    /// What the sender has to learn ([`Receiver::take_news`]).
    news: Vec<News>,
    /// Messages held behind frames in the pairs' rings, in order.
    held: VecDeque<(Held, Barrier)>,
    /// Whose turn is first: the ring from the fabric or the pairs'.
    turn: bool,
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
    /// wake up), connection-manager messages (to the handler, once the pairs' rings are
    /// read up to where they stood when it came), the pairs' comings and goings (news
    /// for the sender, [`Receiver::take_news`]), or the fabric's farewell.
    pub fn read_control(&mut self) {
        self.inbound.clear_events();
        while !self.is_gone() {
            let (got, fds) = match sys::recv_fds(self.fd.as_fd(), &mut self.buf) {
                Ok(r) => r,
                Err(e) => return self.shared.lost(&e),
            };
            match got {
                Recv::Empty => break,
                Recv::Msg(n) => {
                    let buf = std::mem::take(&mut self.buf);
                    self.act(&buf[..n], fds);
                    self.buf = buf;
                }
                Recv::Closed => self.shared.lost(&"it hung up"),
                Recv::Truncated(n) => self.shared.lost(&format!("a message of {n} bytes")),
            }
        }
        self.release_held();
    }

    fn act(&mut self, msg: &[u8], fds: Vec<OwnedFd>) {
        match FromFabric::decode(msg) {
            Ok(FromFabric::Doorbell) => {}
            Ok(FromFabric::Cm { from, body }) => self.hand_on(Held::Cm {
                from,
                body: body.to_vec(),
            }),
            Ok(FromFabric::CmReturned { to, body }) => self.hand_on(Held::Returned {
                to,
                body: body.to_vec(),
            }),
            Ok(FromFabric::Gone(host)) => self.hand_on(Held::Gone(host)),
            Ok(FromFabric::Peer {
                id,
                mac,
                ring,
                first,
            }) => match direct::accept(id, mac, ring, first, fds) {
                Ok((tx, rx)) => {
                    self.inbound.add(rx);
                    self.news.push(News::Added(tx));
                }
                Err(why) => self.shared.lost(&why),
            },
            Ok(FromFabric::Open(id)) => self.inbound.open(id, self.rx.published()),
            Ok(FromFabric::Unpeer(id)) => {
                if self.inbound.close(id, self.rx.published()) {
                    self.news.push(News::Removed(id));
                } else {
                    self.control(ToFabric::Unpeered(id));
                }
            }
            Ok(FromFabric::Error(why)) => self.shared.lost(&format!("it said: {why}")),
            Ok(FromFabric::Welcome { .. }) | Err(_) => {
                self.shared
                    .lost(&"it sent something that is not a doorbell");
            }
        }
    }

    fn control(&mut self, m: ToFabric<'_>) {
        m.encode(&mut self.out);
        if let Err(e) = sys::send(self.fd.as_fd(), &self.out, false) {
            self.shared.lost(&e);
        }
    }

    /// Hands a message to the handler now, or once the pairs' rings are read up to where
    /// they stand now (their peers wrote those frames before it was sent).
    fn hand_on(&mut self, m: Held) {
        let barrier = self.inbound.barrier();
        self.held.push_back((m, barrier));
        self.release_held();
    }

    fn release_held(&mut self) {
        while let Some((_, b)) = self.held.front() {
            if !self.inbound.passed(b) {
                return;
            }
            let Some((m, _)) = self.held.pop_front() else {
                return;
            };
            let Some(h) = self.cm else {
                continue;
            };
            match &m {
                Held::Cm { from, body } => h(CmIn::From {
                    from: *from,
                    body,
                    frames_taken: self.taken.last_from(*from),
                }),
                Held::Returned { to, body } => h(CmIn::Returned { to: *to, body }),
                Held::Gone(host) => h(CmIn::Gone(*host)),
            }
        }
    }

    /// What the sender has to learn about pairs since the last call.
    pub fn take_news(&mut self) -> Vec<News> {
        std::mem::take(&mut self.news)
    }

    /// After the sender has learned the news: drops the pairs whose peer has gone and
    /// whose ring is read to its end, telling the fabric, and hands on what waited for
    /// them.
    pub fn settle(&mut self) {
        for id in self.inbound.finished() {
            self.control(ToFabric::Unpeered(id));
        }
        self.release_held();
    }

    /// Takes the next frame from the fabric or a pair (in turn) into `buf` and returns its
    /// index, and whether its sending NIC sealed it (only a pair's frame is: it came
    /// through nothing but shared memory); `None` when there is none (or the ring broke).
    pub fn pop(&mut self, buf: &mut Vec<u8>) -> Option<(u64, bool)> {
        self.take(|frame, index, sealed| {
            buf.clear();
            buf.extend_from_slice(frame);
            (index, sealed)
        })
    }

    /// [`Receiver::pop`] that hands the frame to `f` where it lies in the shared memory
    /// (with its index and seal), without copying it out: the receiving NIC parses it and
    /// writes its payload to memory from there.
    pub fn take<R>(&mut self, f: impl FnOnce(&[u8], u64, bool) -> R) -> Option<R> {
        if self.is_gone() {
            return None;
        }
        self.turn = !self.turn;
        let taken = &mut self.taken;
        let mut f = Some(f);
        let mut hand = |frame: &[u8], index: u64, sealed: bool| {
            taken.frame(frame);
            f.take().map(|f| f(frame, index, sealed))
        };
        if self.turn && !self.inbound.is_empty() {
            if let Some(r) = take_pairs(&mut self.inbound, self.rx.tail(), &mut hand) {
                return r;
            }
        }
        // The fabric's ring carries no seal (its links may have faults).
        match self.rx.take(|frame, index, _| hand(frame, index, false)) {
            Ok(Some(r)) => r,
            Ok(None) => take_pairs(&mut self.inbound, self.rx.tail(), &mut hand).flatten(),
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

    /// Before sleeping on [`Receiver::poll_fds`]: asks for a doorbell when frames come.
    /// True if some are there already (then do not sleep).
    #[must_use]
    pub fn about_to_sleep(&self) -> bool {
        !self.is_gone() && (self.rx.sleep_or_not() | self.inbound.sleep_or_not())
    }

    /// The descriptors to poll before sleeping: the socket (doorbells, the fabric's
    /// messages and farewell) and the pairs' eventfds.
    pub fn poll_fds(&self, fds: &mut Vec<libc::pollfd>) {
        use std::os::fd::AsRawFd;
        fds.push(sys::pollin(self.fd.as_raw_fd()));
        self.inbound.poll_fds(fds);
    }
}
