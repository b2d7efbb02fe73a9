//! Event channels: `struct rdma_event_channel` whose `fd` is a real file descriptor (an
//! eventfd in semaphore mode holding one count per queued event), so programs can poll it,
//! and the queue of events the connection manager has for the ids on it.

use std::collections::VecDeque;
use std::ffi::c_int;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex};

use crate::base::eventfd::{semaphore_fd, signal, try_take, wait};
use crate::base::ffi;
use crate::base::pointer::Castable;
use crate::base::sync::lock;
use crate::rdmacm::core::messages::{ConnData, Endpoint};

/// The UD parameters of an event (`struct rdma_ud_param` without its private data).
#[derive(Clone, Copy)]
pub struct UdData {
    /// How to reach the peer (or the multicast group).
    pub ah_attr: ffi::ibv_ah_attr,
    /// The peer's QP number (0xffffff for a multicast group).
    pub qp_num: u32,
    /// Its Q_Key.
    pub qkey: u32,
}

impl std::fmt::Debug for UdData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UdData")
            .field("qp_num", &self.qp_num)
            .field("qkey", &self.qkey)
            .finish_non_exhaustive()
    }
}

/// An event as the kernel's connection manager queues it, before librdmacm's processing in
/// `rdma_get_cm_event` turns it into a `struct rdma_cm_event`.
#[derive(Debug)]
pub enum KEvent {
    /// `rdma_resolve_addr` found the destination.
    AddrResolved,
    /// It did not (negative errno).
    AddrError(c_int),
    /// `rdma_resolve_route` is done.
    RouteResolved,
    /// A REQ reached a listener: the new id (handed out by address) and the REQ's
    /// parameters as the listener sees them.
    ConnectRequest {
        /// The new id, a `*mut rdma_cm_id` as an address.
        conn: usize,
        /// The requester's parameters.
        data: ConnData,
    },
    /// A SIDR REQ reached a UD listener.
    SidrRequest {
        /// The new id.
        conn: usize,
        /// Its private data (the user's part).
        private_data: Vec<u8>,
    },
    /// The REP to our REQ.
    ConnectResponse(ConnData),
    /// The RTU to our REP (passive side): the connection is up.
    Established,
    /// The SIDR REP accepting our SIDR REQ.
    UdEstablished {
        /// How to reach the listener's QP.
        ud: UdData,
        /// The SIDR REP's private data.
        private_data: Vec<u8>,
    },
    /// A REJ to our REQ or REP.
    Rejected {
        /// The IB CM reason (the event's status).
        reason: c_int,
        /// The REJ's private data.
        private_data: Vec<u8>,
    },
    /// No usable answer (a SIDR REP with an error status).
    Unreachable(c_int),
    /// The connection is down (the event's status: 0, or -ETIMEDOUT when a DREQ went
    /// unanswered, cma.c's IB_CM_DREQ_ERROR).
    Disconnected(c_int),
    /// A multicast join finished.
    MulticastJoin {
        /// The join (its handle in the id's list).
        mc: u64,
        /// The group's address vector, QPN and Q_Key.
        ud: UdData,
    },
}

/// One queued event and the id it is for.
#[derive(Debug)]
pub struct Queued {
    /// The id the event is reported on (the listener, for a connect request).
    pub id: Endpoint,
    /// The event.
    pub event: KEvent,
}

/// The shared part of an event channel.
#[derive(Debug)]
pub struct ChannelShared {
    fd: OwnedFd,
    queue: Mutex<VecDeque<Queued>>,
}

impl ChannelShared {
    /// A channel with a new descriptor.
    ///
    /// # Errors
    /// The OS refuses an eventfd.
    pub fn new() -> io::Result<Self> {
        Ok(ChannelShared {
            fd: semaphore_fd()?,
            queue: Mutex::new(VecDeque::new()),
        })
    }

    /// `rdma_event_channel.fd`.
    pub fn raw_fd(&self) -> c_int {
        self.fd.as_raw_fd()
    }

    /// Queues an event and makes the descriptor readable.
    pub fn push(&self, q: Queued) {
        lock(&self.queue).push_back(q);
        signal(&self.fd);
    }

    /// Waits for the next event (unless the descriptor is non-blocking) and takes it.
    ///
    /// # Errors
    /// The read's error (EAGAIN on a non-blocking descriptor with nothing queued).
    pub fn pop(&self) -> io::Result<Queued> {
        loop {
            wait(&self.fd)?;
            // Events of a destroyed id leave a count behind: skip it.
            if let Some(q) = lock(&self.queue).pop_front() {
                return Ok(q);
            }
        }
    }

    /// Takes every queued event of the id `ep` out (it is destroyed, or moves to another
    /// channel), in order.
    pub fn take_events_of(&self, ep: Endpoint) -> Vec<Queued> {
        self.take_where(|q| q.id == ep)
    }

    /// Takes the queued events `pick` chooses out, in order; the others keep their places.
    /// Their counts leave the descriptor too (as the kernel drops a destroyed id's events
    /// from its file), so a thread waiting on it is not woken for them; one that took a
    /// count already finds the queue short and waits again.
    pub fn take_where(&self, pick: impl Fn(&Queued) -> bool) -> Vec<Queued> {
        let mut q = lock(&self.queue);
        let (mine, rest): (VecDeque<Queued>, VecDeque<Queued>) = q.drain(..).partition(pick);
        *q = rest;
        drop(q);
        for _ in 0..mine.len() {
            if !try_take(&self.fd) {
                break;
            }
        }
        mine.into()
    }
}

// SAFETY: `EventChannel` is `#[repr(C)]` and starts with its `rdma_event_channel`.
unsafe impl Castable for EventChannel {
    type C = ffi::rdma_event_channel;
}

/// `struct rdma_event_channel` and its shared part.
#[repr(C)]
#[derive(Debug)]
pub struct EventChannel {
    /// What programs read (`fd`).
    pub raw: ffi::rdma_event_channel,
    /// The events.
    pub shared: Arc<ChannelShared>,
}

impl EventChannel {
    /// A new channel, boxed for handing out.
    ///
    /// # Errors
    /// The OS refuses an eventfd.
    pub fn boxed() -> io::Result<Box<EventChannel>> {
        let shared = Arc::new(ChannelShared::new()?);
        Ok(Box::new(EventChannel {
            raw: ffi::rdma_event_channel {
                fd: shared.raw_fd(),
            },
            shared,
        }))
    }

    /// The `EventChannel` of a program's `struct rdma_event_channel`.
    ///
    /// # Safety
    /// `p` is a live channel this library returned.
    pub unsafe fn of<'a>(p: *mut ffi::rdma_event_channel) -> &'a EventChannel {
        // SAFETY: every channel we hand out is the first field of a leaked EventChannel.
        unsafe { &*EventChannel::from_c(p) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn ep(id: u32) -> Endpoint {
        Endpoint {
            host: Ipv4Addr::new(10, 100, 0, 1),
            id,
        }
    }

    #[test]
    fn events_come_out_in_order_and_an_ids_events_can_be_taken_away() {
        let ch = ChannelShared::new().unwrap();
        ch.push(Queued {
            id: ep(1),
            event: KEvent::AddrResolved,
        });
        ch.push(Queued {
            id: ep(2),
            event: KEvent::RouteResolved,
        });
        ch.push(Queued {
            id: ep(1),
            event: KEvent::Disconnected(0),
        });
        let taken = ch.take_events_of(ep(1));
        assert_eq!(taken.len(), 2);
        assert!(matches!(taken[1].event, KEvent::Disconnected(0)));
        let q = ch.pop().unwrap();
        assert_eq!(q.id, ep(2));
        // The taken events' counts left with them: nothing makes the descriptor readable.
        let mut p = [libc::pollfd {
            fd: ch.raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        // SAFETY: one live pollfd, no waiting.
        assert_eq!(unsafe { libc::poll(p.as_mut_ptr(), 1, 0) }, 0);
        // SAFETY: sets O_NONBLOCK on our own descriptor.
        unsafe { libc::fcntl(ch.raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
        let e = ch.pop().unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EAGAIN));
    }
}
