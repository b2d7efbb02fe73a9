//! Completion channels as real file descriptors: an eventfd in semaphore mode that holds
//! one count per completion event, so `poll`, `epoll` and `select` on `channel->fd` work
//! and `ibv_get_cq_event` reads one event at a time (or fails with EAGAIN when the
//! program made the fd non-blocking).

use std::collections::{HashMap, VecDeque};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Mutex;
use std::time::Duration;

use backend_sim::verbs::SimChannel;
use verbs_api::CompletionChannel;

use crate::state::lock;

/// The emulator's side of a completion channel.
#[derive(Debug)]
pub struct ChannelState {
    /// The simulator's channel: where armed CQs' events arrive.
    pub sim: SimChannel,
    fd: OwnedFd,
    /// CQ handles whose event has been counted on the fd, oldest first.
    ready: Mutex<VecDeque<u32>>,
    /// The C `ibv_cq` of each CQ handle on this channel (as an address).
    cqs: Mutex<HashMap<u32, usize>>,
}

impl ChannelState {
    /// A channel with a new eventfd.
    ///
    /// # Errors
    /// The OS refuses an eventfd (EMFILE, ENFILE, ENOMEM).
    pub fn new(sim: SimChannel) -> io::Result<Self> {
        // SAFETY: eventfd takes no pointers; a negative return is checked below.
        let raw = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_SEMAPHORE) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(ChannelState {
            sim,
            // SAFETY: `raw` is a new descriptor that nothing else owns.
            fd: unsafe { OwnedFd::from_raw_fd(raw) },
            ready: Mutex::new(VecDeque::new()),
            cqs: Mutex::new(HashMap::new()),
        })
    }

    /// The descriptor programs poll (`channel->fd`).
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Remembers that CQ `handle` is the C object at `addr`.
    pub fn add_cq(&self, handle: u32, addr: usize) {
        lock(&self.cqs).insert(handle, addr);
    }

    /// Forgets CQ `handle` (destroyed); its pending events are dropped.
    pub fn remove_cq(&self, handle: u32) {
        lock(&self.cqs).remove(&handle);
        lock(&self.ready).retain(|&h| h != handle);
    }

    /// The number of CQs on the channel (a channel with CQs cannot be destroyed).
    pub fn cq_count(&self) -> usize {
        lock(&self.cqs).len()
    }

    /// Moves every event the simulator has for this channel onto the fd.
    pub fn collect_events(&self) {
        while let Ok(Some(handle)) = self.sim.get_cq_event(Some(Duration::ZERO)) {
            lock(&self.ready).push_back(handle);
            let one: u64 = 1;
            // SAFETY: writes 8 bytes from a live u64 to our own eventfd.
            let n = unsafe {
                libc::write(
                    self.fd.as_raw_fd(),
                    std::ptr::from_ref(&one).cast(),
                    std::mem::size_of::<u64>(),
                )
            };
            if n != 8 {
                eprintln!(
                    "verbs-emu: cannot signal a completion channel: {}",
                    io::Error::last_os_error()
                );
            }
        }
    }

    /// `ibv_get_cq_event`: waits for one event (unless the fd is non-blocking) and returns
    /// the address of its CQ.
    ///
    /// # Errors
    /// The read's error (EAGAIN on a non-blocking fd with no event).
    pub fn get_event(&self) -> io::Result<usize> {
        loop {
            let mut count: u64 = 0;
            // SAFETY: reads at most 8 bytes into a live u64.
            let n = unsafe {
                libc::read(
                    self.fd.as_raw_fd(),
                    std::ptr::from_mut(&mut count).cast(),
                    std::mem::size_of::<u64>(),
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            let handle = lock(&self.ready).pop_front();
            // An event of a CQ destroyed in between has no C object any more: wait on.
            if let Some(addr) = handle.and_then(|h| lock(&self.cqs).get(&h).copied()) {
                return Ok(addr);
            }
        }
    }
}
