//! How connection-manager messages travel between ids: the IB CM's REQ, REP, RTU, REJ,
//! DREQ and DREP (and SIDR for UD), addressed to a listening service or to an id.
//!
//! [`CmNetwork`] is what the ids need from the network; [`LocalNetwork`] carries messages
//! between the ids of this process (every listener is one of its ids). Ids of two processes
//! talk once the fabric process carries these messages between processes (a
//! `CmNetwork` over the fabric's control socket); until then a REQ for another process's
//! listener finds none and is rejected as the remote CM rejects an unknown service.

use std::collections::HashMap;
use std::ffi::c_int;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};

use crate::state::lock;

/// An id of the connection manager, on a host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Endpoint {
    /// The host's IPv4 address.
    pub host: Ipv4Addr,
    /// The id's number on that host.
    pub id: u32,
}

/// A service a listener claims: an address (the wildcard for every address of its host),
/// a port and the port space (`RDMA_PS_TCP` ...), as the kernel's service id combines them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Service {
    /// The listening address; UNSPECIFIED listens on every address of the host.
    pub ip: Ipv4Addr,
    /// The port.
    pub port: u16,
    /// The port space.
    pub ps: u32,
}

/// The connection parameters a REQ or REP carries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnData {
    /// The sender's QP number.
    pub qpn: u32,
    /// The sender's starting PSN.
    pub psn: u32,
    /// RDMA reads/atomics the sender accepts at once.
    pub responder_resources: u8,
    /// RDMA reads/atomics the sender issues at once.
    pub initiator_depth: u8,
    /// End-to-end flow control.
    pub flow_control: u8,
    /// Transport retries.
    pub retry_count: u8,
    /// RNR retries.
    pub rnr_retry_count: u8,
    /// Whether the sender's QP uses an SRQ.
    pub srq: bool,
    /// The message's private data, at the message's full length.
    pub private_data: Vec<u8>,
}

/// A connection-manager message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// Connection request (RC, UC) to a listening service.
    Req {
        /// The service asked for.
        service: Service,
        /// The requester's address.
        src: SocketAddr,
        /// The address it connected to.
        dst: SocketAddr,
        /// The requester's QP type.
        qp_type: u32,
        /// Its parameters.
        data: ConnData,
    },
    /// Reply to a REQ: the request is accepted.
    Rep(ConnData),
    /// Ready to use: the requester's QP is connected.
    Rtu,
    /// Reject, with the IB CM reason.
    Rej {
        /// `IB_CM_REJ_*`.
        reason: i32,
        /// Private data (the REJ's full 148 bytes).
        private_data: Vec<u8>,
    },
    /// Disconnect request.
    Dreq,
    /// Disconnect reply.
    Drep,
    /// Service ID resolution request (UD) to a listening service.
    SidrReq {
        /// The service asked for.
        service: Service,
        /// The requester's address.
        src: SocketAddr,
        /// The address it resolved.
        dst: SocketAddr,
        /// Private data (the SIDR REQ's full 216 bytes).
        private_data: Vec<u8>,
    },
    /// SIDR reply.
    SidrRep {
        /// `IB_SIDR_*` (0: success).
        status: i32,
        /// The listener side's QP number.
        qpn: u32,
        /// Its Q_Key.
        qkey: u32,
        /// Private data (the SIDR REP's full 136 bytes).
        private_data: Vec<u8>,
    },
}

/// The IB CM reject reason for a REQ no listener takes (`IB_CM_REJ_INVALID_SERVICE_ID`,
/// include/rdma/ib_cm.h).
pub const REJ_INVALID_SERVICE_ID: i32 = 8;
/// `IB_CM_REJ_CONSUMER_DEFINED`: the listener's program rejected (or dropped) the request.
pub const REJ_CONSUMER_DEFINED: i32 = 28;
/// `IB_CM_REJ_TIMEOUT`: the requester gave up (destroyed its id) before the reply.
pub const REJ_TIMEOUT: i32 = 1;
/// `IB_SIDR_UNSUPPORTED`: no listener for a SIDR REQ's service.
pub const SIDR_UNSUPPORTED: i32 = 2;
/// `IB_SIDR_REJECT`: the listener's program rejected the SIDR REQ.
pub const SIDR_REJECT: i32 = 1;

/// Where a message goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Address {
    /// The listener of a service (REQ, SIDR REQ).
    Service(Service),
    /// An id (every other message).
    Endpoint(Endpoint),
}

/// What the connection manager needs from the network between ids.
pub trait CmNetwork: Send + Sync + std::fmt::Debug {
    /// Claims `service` for the listener `ep`.
    ///
    /// # Errors
    /// EADDRINUSE when another id listens on it.
    fn listen(&self, service: Service, ep: Endpoint) -> Result<(), c_int>;

    /// Gives `service` up (the listener is destroyed).
    fn unlisten(&self, service: Service, ep: Endpoint);

    /// Sends `msg` from `from` to `to`, later (the network is asynchronous, as the IB CM's
    /// MADs are): the receiver learns it on the network's own thread.
    fn send(&self, to: Address, from: Endpoint, msg: Message);
}

/// How a network hands a message to an id of this process: `(to, from, msg)`; false when
/// the id does not exist (any more).
pub type Deliver = fn(u32, Endpoint, Message) -> bool;

/// The network between the ids of one process: a table of listeners, and a thread that
/// delivers every message in order.
#[derive(Debug)]
pub struct LocalNetwork {
    shared: Arc<Shared>,
    queue: Mutex<Sender<(Address, Endpoint, Message)>>,
}

#[derive(Debug)]
struct Shared {
    host: Ipv4Addr,
    listeners: Mutex<HashMap<Service, Endpoint>>,
    deliver: Deliver,
}

impl Shared {
    /// The listener a message to `s` reaches: one on its exact address, else one on every
    /// address of its host (`cma_ib_id_from_event` looks the same way).
    fn listener(&self, s: Service) -> Option<Endpoint> {
        let l = lock(&self.listeners);
        l.get(&s).copied().or_else(|| {
            (s.ip == self.host)
                .then(|| {
                    l.get(&Service {
                        ip: Ipv4Addr::UNSPECIFIED,
                        ..s
                    })
                    .copied()
                })
                .flatten()
        })
    }

    fn route(&self, to: Address, from: Endpoint, msg: Message) {
        let target = match to {
            Address::Endpoint(ep) => Some(ep),
            Address::Service(s) => self.listener(s),
        };
        let delivered = target
            .filter(|ep| ep.host == self.host)
            .is_some_and(|ep| (self.deliver)(ep.id, from, msg.clone()));
        if delivered {
            return;
        }
        // What the remote CM answers a message nobody takes (drivers/infiniband/core/cm.c):
        // a REQ with REJ (invalid service id), a SIDR REQ with SIDR REP (unsupported), a
        // DREQ for a gone id with a DREP; anything else is dropped.
        let here = Endpoint {
            host: to_host(to),
            id: 0,
        };
        let answer = match msg {
            Message::Req { .. } => Some(Message::Rej {
                reason: REJ_INVALID_SERVICE_ID,
                private_data: vec![0; crate::rdmacm::event::REJ_PRIVATE_DATA],
            }),
            Message::SidrReq { .. } => Some(Message::SidrRep {
                status: SIDR_UNSUPPORTED,
                qpn: 0,
                qkey: 0,
                private_data: vec![0; crate::rdmacm::event::SIDR_REP_PRIVATE_DATA],
            }),
            Message::Dreq => Some(Message::Drep),
            _ => None,
        };
        if let Some(a) = answer {
            if from.host == self.host {
                (self.deliver)(from.id, here, a);
            }
        }
    }
}

fn to_host(to: Address) -> Ipv4Addr {
    match to {
        Address::Endpoint(ep) => ep.host,
        Address::Service(s) => s.ip,
    }
}

impl LocalNetwork {
    /// The network of host `host`, handing messages to `deliver` on its own thread.
    ///
    /// # Errors
    /// The thread cannot be started.
    pub fn new(host: Ipv4Addr, deliver: Deliver) -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            host,
            listeners: Mutex::new(HashMap::new()),
            deliver,
        });
        let (tx, rx) = channel::<(Address, Endpoint, Message)>();
        let s = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("verbs-emu-cm".into())
            .spawn(move || {
                for (to, from, msg) in rx {
                    s.route(to, from, msg);
                }
            })?;
        Ok(LocalNetwork {
            shared,
            queue: Mutex::new(tx),
        })
    }
}

impl CmNetwork for LocalNetwork {
    fn listen(&self, service: Service, ep: Endpoint) -> Result<(), c_int> {
        let mut l = lock(&self.shared.listeners);
        if l.contains_key(&service) {
            return Err(libc::EADDRINUSE);
        }
        l.insert(service, ep);
        Ok(())
    }

    fn unlisten(&self, service: Service, ep: Endpoint) {
        let mut l = lock(&self.shared.listeners);
        if l.get(&service) == Some(&ep) {
            l.remove(&service);
        }
    }

    fn send(&self, to: Address, from: Endpoint, msg: Message) {
        // The receiving thread lives as long as the process; a send fails only during exit.
        let _ = lock(&self.queue).send((to, from, msg));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::{sync_channel, SyncSender};
    use std::sync::OnceLock;

    static SEEN: OnceLock<Mutex<SyncSender<(u32, Endpoint, Message)>>> = OnceLock::new();

    /// Ids 1 and 2 exist; 3 does not.
    fn record(to: u32, from: Endpoint, msg: Message) -> bool {
        if to == 3 {
            return false;
        }
        let _ = lock(SEEN.get().unwrap()).send((to, from, msg));
        true
    }

    #[test]
    fn requests_reach_listeners_and_the_rest_is_answered_like_a_cm() {
        let (tx, rx) = sync_channel(16);
        SEEN.set(Mutex::new(tx)).unwrap();
        let host = Ipv4Addr::new(10, 100, 0, 1);
        let net = LocalNetwork::new(host, record).unwrap();
        let any = Service {
            ip: Ipv4Addr::UNSPECIFIED,
            port: 7000,
            ps: 0x106,
        };
        let ep = |id| Endpoint { host, id };
        net.listen(any, ep(1)).unwrap();
        assert_eq!(net.listen(any, ep(2)), Err(libc::EADDRINUSE));
        let req = |port| Message::Req {
            service: Service {
                ip: host,
                port,
                ps: 0x106,
            },
            src: "10.100.0.1:40000".parse().unwrap(),
            dst: "10.100.0.1:7000".parse().unwrap(),
            qp_type: 2,
            data: ConnData::default(),
        };
        let Message::Req { service, .. } = req(7000) else {
            unreachable!()
        };
        // A REQ to the host's address finds the wildcard listener.
        net.send(Address::Service(service), ep(2), req(7000));
        assert_eq!(rx.recv().unwrap(), (1, ep(2), req(7000)));
        // No listener on port 7001: the requester gets REJ (invalid service id).
        net.send(
            Address::Service(Service {
                port: 7001,
                ..service
            }),
            ep(2),
            req(7001),
        );
        let (to, _, m) = rx.recv().unwrap();
        assert_eq!(to, 2);
        assert!(matches!(
            m,
            Message::Rej {
                reason: REJ_INVALID_SERVICE_ID,
                ..
            }
        ));
        // A DREQ for a gone id is answered with a DREP.
        net.send(Address::Endpoint(ep(3)), ep(2), Message::Dreq);
        assert_eq!(rx.recv().unwrap().2, Message::Drep);
        net.unlisten(any, ep(1));
        net.send(Address::Service(service), ep(2), req(7000));
        assert!(matches!(rx.recv().unwrap().2, Message::Rej { .. }));
    }
}
