//! Completion channels and a context's async events as real file descriptors: an eventfd in semaphore mode that holds
//! one count per completion event, so `poll`, `epoll` and `select` on `channel->fd` work
//! and `ibv_get_cq_event` reads one event at a time (or fails with EAGAIN when the
//! program made the fd non-blocking).

use std::collections::{HashMap, VecDeque};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Mutex;
use std::time::Duration;

use backend_sim::verbs::{SimChannel, SimContext};
use verbs_api::{AsyncEvent, CompletionChannel, Context, EventElement};

use crate::base::eventfd::{semaphore_fd, signal, wait};
use crate::base::sync::lock;

/// The kinds of object an async event can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Object {
    /// A CQ, by handle.
    Cq,
    /// A QP, by number.
    Qp,
    /// An SRQ, by handle.
    Srq,
}

/// An open context's shared part: the simulator's context, and its async events as a
/// real descriptor (`ibv_context.async_fd`), with the C objects they can name.
#[derive(Debug)]
pub struct ContextState {
    /// The simulator's context.
    pub ctx: SimContext,
    fd: OwnedFd,
    ready: Mutex<VecDeque<AsyncEvent>>,
    objects: Mutex<HashMap<(Object, u32), usize>>,
}

impl ContextState {
    /// The shared part of a context just opened.
    ///
    /// # Errors
    /// The OS refuses an eventfd.
    pub fn new(ctx: SimContext) -> io::Result<Self> {
        Ok(ContextState {
            ctx,
            fd: semaphore_fd()?,
            ready: Mutex::new(VecDeque::new()),
            objects: Mutex::new(HashMap::new()),
        })
    }

    /// `ibv_context.async_fd`.
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Remembers the C object at `addr` for events naming `(kind, id)`.
    pub fn add_object(&self, kind: Object, id: u32, addr: usize) {
        lock(&self.objects).insert((kind, id), addr);
    }

    /// Forgets a destroyed object; its pending events are dropped.
    pub fn remove_object(&self, kind: Object, id: u32) {
        lock(&self.objects).remove(&(kind, id));
    }

    /// Moves the simulator's async events of this context onto the descriptor.
    pub fn collect_events(&self) {
        while let Ok(Some(ev)) = self.ctx.poll_async_event() {
            lock(&self.ready).push_back(ev);
            signal(&self.fd);
        }
    }

    /// `ibv_get_async_event`: waits for the next event and returns it with the address of
    /// the C object it names (0 for a port or the device).
    ///
    /// # Errors
    /// The read's error (EAGAIN on a non-blocking descriptor with no event).
    pub fn get_event(&self) -> io::Result<(AsyncEvent, usize)> {
        loop {
            wait(&self.fd)?;
            let Some(ev) = lock(&self.ready).pop_front() else {
                continue;
            };
            let key = match ev.element {
                EventElement::Cq(h) => (Object::Cq, h),
                EventElement::Qp(n) => (Object::Qp, n),
                EventElement::Srq(h) => (Object::Srq, h),
                EventElement::Port(_) | EventElement::Device => return Ok((ev, 0)),
            };
            // An event of an object destroyed in between has nobody to tell: wait on.
            if let Some(addr) = lock(&self.objects).get(&key).copied() {
                return Ok((ev, addr));
            }
        }
    }
}

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
        Ok(ChannelState {
            sim,
            fd: semaphore_fd()?,
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
            signal(&self.fd);
        }
    }

    /// `ibv_get_cq_event`: waits for one event (unless the fd is non-blocking) and returns
    /// the address of its CQ.
    ///
    /// # Errors
    /// The read's error (EAGAIN on a non-blocking fd with no event).
    pub fn get_event(&self) -> io::Result<usize> {
        loop {
            wait(&self.fd)?;
            let handle = lock(&self.ready).pop_front();
            // An event of a CQ destroyed in between has no C object any more: wait on.
            if let Some(addr) = handle.and_then(|h| lock(&self.cqs).get(&h).copied()) {
                return Ok(addr);
            }
        }
    }
}
