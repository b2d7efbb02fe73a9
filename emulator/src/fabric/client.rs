//! An emulated process's side of the fabric: the connection it joins with (a hello naming
//! its host), and the pump its progress thread runs: frames from the fabric are injected
//! into the host's port at the current virtual time, and what the host's NIC transmitted
//! (frames, multicast joins and leaves) goes to the fabric.

use std::collections::VecDeque;
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::Duration;

use backend_sim::fabric::ExternalMsg;
use backend_sim::frame::eth::Mac;
use backend_sim::{Nanos, PortId, Sim};

use super::sys::{self, Recv};
use super::wire::{FromFabric, ToFabric, MAX_MSG};

/// How long a hello waits for the fabric's answer.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

/// Most messages taken from the socket in one round (the rest wait for the next).
const RECV_BATCH: usize = 256;

/// A joined connection to the fabric process.
#[derive(Debug)]
pub struct FabricLink {
    fd: OwnedFd,
    path: PathBuf,
    buf: Vec<u8>,
    out: Vec<u8>,
    /// Set once the fabric is gone (told once on stderr).
    gone: bool,
}

impl FabricLink {
    /// Connects to the fabric's socket at `path` and joins as `host` (whose port has
    /// `mac` and `ip`); waits for the fabric's welcome.
    ///
    /// # Errors
    /// A one-line reason: no fabric there, or the fabric refused (an unknown host, one
    /// another process already is, a topology that differs).
    pub fn join(path: &Path, host: &str, mac: Mac, ip: Ipv4Addr) -> Result<Self, String> {
        let at = || format!("the fabric at {}", path.display());
        let fd = sys::connect(path).map_err(|e| format!("cannot join {}: {e}", at()))?;
        let mut link = FabricLink {
            fd,
            path: path.to_path_buf(),
            buf: vec![0; MAX_MSG + 1],
            out: Vec::with_capacity(MAX_MSG),
            gone: false,
        };
        ToFabric::Hello { mac, ip, host }.encode(&mut link.out);
        sys::send(link.fd.as_fd(), &link.out, false)
            .map_err(|e| format!("cannot join {}: {e}", at()))?;
        let n = match sys::recv_wait(link.fd.as_fd(), &mut link.buf, HELLO_TIMEOUT) {
            Ok(Recv::Msg(n)) => n,
            Ok(Recv::Closed) => return Err(format!("{} hung up on host {host}", at())),
            Ok(other) => return Err(format!("{} answered {other:?} to the hello", at())),
            Err(e) => return Err(format!("{} did not welcome host {host}: {e}", at())),
        };
        match FromFabric::decode(&link.buf[..n]) {
            Ok(FromFabric::Welcome) => Ok(link),
            Ok(FromFabric::Error(why)) => Err(format!("{} refused host {host}: {why}", at())),
            Ok(FromFabric::Frame { .. }) => {
                Err(format!("{} sent a frame before its welcome", at()))
            }
            Err(why) => Err(format!("{} answered garbage: {why}", at())),
        }
    }

    /// The socket, for polling.
    #[must_use]
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// True once the fabric has gone away.
    #[must_use]
    pub fn is_gone(&self) -> bool {
        self.gone
    }

    fn lost(&mut self, e: &io::Error) {
        if !self.gone {
            self.gone = true;
            eprintln!(
                "verbs-emu: lost the fabric at {} ({e}); this host's frames go nowhere now",
                self.path.display()
            );
        }
    }

    /// Tells the fabric what the port did (waits while the socket is full: the fabric
    /// always reads). Nothing is sent once the fabric is gone.
    pub fn send(&mut self, msg: &ExternalMsg) {
        if self.gone {
            return;
        }
        let m = match msg {
            ExternalMsg::Frame { frame, .. } => ToFabric::Frame(frame),
            ExternalMsg::JoinGroup(g) => ToFabric::Join(*g),
            ExternalMsg::LeaveGroup(g) => ToFabric::Leave(*g),
            ExternalMsg::JoinMac(m) => ToFabric::JoinMac(*m),
            ExternalMsg::LeaveMac(m) => ToFabric::LeaveMac(*m),
        };
        m.encode(&mut self.out);
        if let Err(e) = sys::send(self.fd.as_fd(), &self.out, false) {
            self.lost(&e);
        }
    }

    /// Hands each frame waiting from the fabric to `each` (its index and bytes), up to a
    /// batch; returns how many. A message that is not a frame ends the link (the fabric
    /// sends nothing else after its welcome).
    pub fn receive(&mut self, mut each: impl FnMut(u64, &[u8])) -> usize {
        let mut n = 0;
        while n < RECV_BATCH && !self.gone {
            let len = match sys::recv(self.fd.as_fd(), &mut self.buf) {
                Ok(Recv::Msg(len)) => len,
                Ok(Recv::Empty) => break,
                Ok(Recv::Closed) => {
                    self.lost(&io::Error::from(io::ErrorKind::ConnectionReset));
                    break;
                }
                Ok(Recv::Truncated(len)) => {
                    let e = io::Error::other(format!("a message of {len} bytes"));
                    self.lost(&e);
                    break;
                }
                Err(e) => {
                    self.lost(&e);
                    break;
                }
            };
            match FromFabric::decode(&self.buf[..len]) {
                Ok(FromFabric::Frame { index, frame }) => {
                    each(index, frame);
                    n += 1;
                }
                Ok(FromFabric::Error(why)) => {
                    let e = io::Error::other(format!("it said: {why}"));
                    self.lost(&e);
                }
                Ok(FromFabric::Welcome) | Err(_) => {
                    let e = io::Error::other("it sent something that is not a frame");
                    self.lost(&e);
                }
            }
        }
        n
    }
}

/// The process's host as a member of the fabric: the link, the host's external port,
/// and the buffers of one pump round.
#[derive(Debug)]
pub struct Member {
    link: FabricLink,
    port: PortId,
    outq: VecDeque<(PortId, ExternalMsg)>,
    sent: Vec<Vec<u8>>,
}

impl Member {
    /// `port` of `sim` leads to the fabric over `link` from now on; `wake` is signalled
    /// when the port has something to send.
    ///
    /// # Errors
    /// The port does not exist.
    pub fn new(sim: &Sim, port: PortId, link: FabricLink, wake: &OwnedFd) -> Result<Self, String> {
        let waker = wake
            .try_clone()
            .map_err(|e| format!("cannot share the progress thread's wake-up descriptor: {e}"))?;
        sim.with_fabric(|f| {
            f.set_external(port)?;
            f.set_horizon(Some(f.now()));
            f.set_external_waker(Some(Box::new(move || sys::signal(waker.as_fd()))));
            Ok::<_, backend_sim::FabricError>(())
        })
        .map_err(|e| format!("the host's port: {e}"))?;
        Ok(Member {
            link,
            port,
            outq: VecDeque::new(),
            sent: Vec::new(),
        })
    }

    /// The link's socket, for polling.
    #[must_use]
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.link.fd()
    }

    /// One round at wall-clock time `now` (virtual nanoseconds): lets the simulation run
    /// up to `now` and no further, injects what the fabric sent, lets the NIC handle it,
    /// and sends what the port has for the fabric.
    pub fn pump(&mut self, sim: &Sim, now: Nanos) {
        sim.with_fabric(|f| f.set_horizon(Some(now)));
        sim.run_for(now.saturating_sub(sim.now()));
        let port = self.port;
        let link = &mut self.link;
        let got = sim.with_fabric(|f| {
            link.receive(|index, frame| {
                // The wire checked the length: a port refuses nothing else.
                let _ = f.inject(port, frame, index);
            })
        });
        if got > 0 {
            sim.run_for(0);
        }
        self.flush(sim);
    }

    /// Sends everything the port has for the fabric, then gives the frame buffers back.
    pub fn flush(&mut self, sim: &Sim) {
        loop {
            sim.with_fabric(|f| f.take_external(&mut self.outq));
            if self.outq.is_empty() {
                return;
            }
            while let Some((_, msg)) = self.outq.pop_front() {
                self.link.send(&msg);
                if let ExternalMsg::Frame { frame, .. } = msg {
                    self.sent.push(frame);
                }
            }
            let sent = &mut self.sent;
            sim.with_fabric(|f| sent.drain(..).for_each(|b| f.recycle_frame(b)));
        }
    }
}
