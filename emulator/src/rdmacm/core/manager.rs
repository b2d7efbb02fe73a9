//! The process's connection manager: its ids by number, the ports they hold, the network
//! between ids, and what happens when a message reaches an id (the kernel's rdma_cm and IB
//! CM handlers, drivers/infiniband/core/cma.c and cm.c).

use std::collections::HashMap;
use std::ffi::c_int;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};

use crate::base::boundary::{boundary, Nothing};
use crate::base::ffi;
use crate::base::pointer::try_mut_from_ptr;
use crate::base::sync::lock;
use crate::fabric::client::CmIn;
use crate::rdmacm::core::event_queue::{ChannelShared, KEvent, Queued, UdData};
use crate::rdmacm::core::id_state::{CmId, Conn, IdInner, IdShared, Peer, State};
use crate::rdmacm::core::messages::{
    Address, ConnData, Endpoint, Message, REJ_CONSUMER_DEFINED, REJ_PRIVATE_DATA, REJ_TIMEOUT,
    SEND_TIMEOUT, SIDR_REP_PRIVATE_DATA, SIDR_UNSUPPORTED,
};
use crate::rdmacm::core::network::{Network, Outside};
use crate::rdmacm::core::sockaddr as addr;
use crate::rdmacm::core::{cm_devices as devices, route};
use crate::runtime::host::emu;

/// The first port `rdma_bind_addr` hands out for port 0 (the kernel's default
/// `ip_local_port_range` starts here).
const EPHEMERAL_FIRST: u16 = 32768;
/// The last one.
const EPHEMERAL_LAST: u16 = 60999;
/// The most connect requests a listener holds unretrieved (ucma's `max_backlog`).
pub const MAX_BACKLOG: usize = 1024;

/// A claimed port.
#[derive(Debug, Clone, Copy)]
struct Binding {
    ps: u32,
    ip: IpAddr,
    port: u16,
    reuse: bool,
    id: u32,
}

/// The process's connection manager.
#[derive(Debug)]
pub struct Cm {
    /// This host's address.
    pub host: Ipv4Addr,
    ids: Mutex<HashMap<u32, Weak<IdShared>>>,
    next_id: AtomicU32,
    ports: Mutex<Vec<Binding>>,
    rover: AtomicU32,
    /// The network between ids.
    pub net: Network,
}

static CM: OnceLock<Result<Cm, c_int>> = OnceLock::new();

/// The connection manager, started on first use (librdmacm's `ucma_init`).
///
/// # Errors
/// ENODEV when the emulator has no device for this process (a bad topology or host), as
/// librdmacm fails without RDMA devices; the errno of a failed thread start.
pub fn cm() -> Result<&'static Cm, c_int> {
    CM.get_or_init(|| {
        let e = emu().map_err(|_| libc::ENODEV)?;
        if e.devices.is_empty() {
            return Err(libc::ENODEV);
        }
        let host = e.spec.ip;
        let outside = e.cm_link().map(|l| l as &'static dyn Outside);
        let net = Network::new(host, deliver, outside)
            .map_err(|err| err.raw_os_error().unwrap_or(libc::EAGAIN))?;
        // SAFETY: registers a function without arguments; it only try-locks and sends.
        // It fails only once the process is exiting already (a message from another host
        // started the connection manager then): there is nothing left to say farewell to.
        let _ = unsafe { libc::atexit(at_exit) };
        Ok(Cm {
            host,
            ids: Mutex::new(HashMap::new()),
            next_id: AtomicU32::new(1),
            ports: Mutex::new(Vec::new()),
            rover: AtomicU32::new(u32::from(EPHEMERAL_FIRST)),
            net,
        })
    })
    .as_ref()
    .map_err(|e| *e)
}

/// A 24-bit starting PSN for id `n` (the kernel draws a random one; the emulator mixes
/// the id's number, so runs repeat).
fn psn_of(n: u32) -> u32 {
    let mut z = u64::from(n).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    ((z ^ (z >> 31)) & 0x00ff_ffff) as u32
}

impl Cm {
    /// Makes a new id and hands its C struct out (`*mut CmId`).
    pub fn new_id(
        &self,
        ps: u32,
        qp_type: u32,
        channel: Arc<ChannelShared>,
        channel_ptr: *mut ffi::rdma_event_channel,
        sync: bool,
        context: *mut std::ffi::c_void,
    ) -> *mut CmId {
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        let shared = Arc::new(IdShared {
            endpoint: Endpoint {
                host: self.host,
                id: n,
            },
            raw: AtomicUsize::new(0),
            inner: Mutex::new(IdInner::new(ps, qp_type, psn_of(n), channel, sync)),
            acked: Condvar::new(),
        });
        let raw = ffi::rdma_cm_id {
            channel: channel_ptr,
            context,
            ps,
            qp_type,
            ..ffi::rdma_cm_id::default()
        };
        let p = Box::into_raw(Box::new(CmId {
            raw,
            shared: Arc::clone(&shared),
            ep_qp_init_attr: None,
        }));
        shared.raw.store(p as usize, Ordering::Release);
        lock(&self.ids).insert(n, Arc::downgrade(&shared));
        p
    }

    /// The id numbered `n`, if alive.
    pub fn id(&self, n: u32) -> Option<Arc<IdShared>> {
        lock(&self.ids).get(&n).and_then(Weak::upgrade)
    }

    /// Forgets id `n` (destroyed).
    pub fn forget(&self, n: u32) {
        lock(&self.ids).remove(&n);
        lock(&self.ports).retain(|b| b.id != n);
    }

    /// Claims `port` (0: a free ephemeral one) on `ip` in port space `ps` for id `id`
    /// (the kernel's `cma_get_port`); returns the port.
    ///
    /// # Errors
    /// EADDRINUSE when another id holds it on an overlapping address (both must set
    /// `RDMA_OPTION_ID_REUSEADDR` to share); EADDRNOTAVAIL when no ephemeral port is free.
    pub fn claim_port(
        &self,
        ps: u32,
        ip: IpAddr,
        port: u16,
        reuse: bool,
        id: u32,
    ) -> Result<u16, c_int> {
        let mut ports = lock(&self.ports);
        let clash = |p: u16, ports: &Vec<Binding>| {
            ports.iter().any(|b| {
                b.ps == ps
                    && b.port == p
                    && (b.ip == ip || b.ip.is_unspecified() || ip.is_unspecified())
                    && !(b.reuse && reuse)
            })
        };
        let chosen = if port != 0 {
            if clash(port, &ports) {
                return Err(libc::EADDRINUSE);
            }
            port
        } else {
            let span = u32::from(EPHEMERAL_LAST - EPHEMERAL_FIRST) + 1;
            let start = self.rover.load(Ordering::Relaxed);
            let free = (0..span)
                .map(|i| {
                    let off = (start - u32::from(EPHEMERAL_FIRST) + i) % span;
                    EPHEMERAL_FIRST + u16::try_from(off).unwrap_or(0)
                })
                .find(|p| !clash(*p, &ports))
                .ok_or(libc::EADDRNOTAVAIL)?;
            self.rover.store(u32::from(free) + 1, Ordering::Relaxed);
            free
        };
        ports.push(Binding {
            ps,
            ip,
            port: chosen,
            reuse,
            id,
        });
        Ok(chosen)
    }

    /// Sends a message from id `from`.
    pub fn send(&self, from: Endpoint, to: Address, msg: Message) {
        self.net.send(to, from, msg);
    }
}

/// Registers [`from_fabric`] with the runtime when the library is loaded (an ELF
/// constructor, run before the program's own code), so that messages from other hosts
/// reach the connection manager from the start, as the kernel's CM is there before any
/// process: the runtime does not name the connection manager.
#[used]
#[link_section = ".init_array"]
static REGISTER_WITH_RUNTIME: extern "C" fn() = register_with_runtime;

extern "C" fn register_with_runtime() {
    boundary(Nothing, || {
        crate::runtime::host::set_cm_handler(from_fabric)
    });
}

/// What the fabric brings for this host's connection manager (the progress thread calls
/// it): a message from another host's process, or one of ours that no process took.
/// The connection manager starts if it has not yet (the kernel's CM is always there to
/// answer).
pub fn from_fabric(m: CmIn<'_>) {
    if let CmIn::Gone(_) = m {
        // A connection manager not started yet has no ids: nobody to tell.
        if CM.get().is_none() {
            return;
        }
    }
    let Ok(c) = cm() else {
        return;
    };
    match m {
        CmIn::From {
            from,
            body,
            frames_taken,
        } => c.net.arrived(from, body, frames_taken),
        CmIn::Returned { body, .. } => c.net.returned(body),
        // After what that host's process sent before it went.
        CmIn::Gone(host) => c.net.then(peer_gone, host),
    }
}

/// The process of host `host` has gone without a word for some of our ids' peers
/// there (killed): each such id gets, from its peer, what the peer's kernel sends when
/// it destroys the peer's id (the [`farewell`] of the state facing ours).
fn peer_gone(host: Ipv4Addr) {
    let Ok(c) = cm() else {
        return;
    };
    let ids: Vec<Arc<IdShared>> = lock(&c.ids).values().filter_map(Weak::upgrade).collect();
    for id in ids {
        let g = lock(&id.inner);
        let Some(peer) = g.peer.filter(|p| p.ep.host == host) else {
            continue;
        };
        let rej = || Message::Rej {
            reason: REJ_CONSUMER_DEFINED,
            private_data: vec![0; REJ_PRIVATE_DATA],
        };
        let msg = match g.conn {
            // The peer had our REQ, or had sent or got the REP.
            Conn::ReqSent | Conn::RepSent | Conn::RepRcvd => rej(),
            Conn::Established => Message::Dreq,
            Conn::DreqSent => Message::Drep,
            Conn::SidrReqSent => Message::SidrRep {
                status: crate::rdmacm::core::messages::SIDR_REJECT,
                qpn: 0,
                qkey: 0,
                private_data: vec![0; SIDR_REP_PRIVATE_DATA],
            },
            _ => continue,
        };
        drop(g);
        // Through the network's queue, behind what the peer sent before it went.
        c.net.send(Address::Endpoint(id.endpoint), peer.ep, msg);
    }
}

/// Queues `event` for the id `ep` on `channel`.
pub fn post(channel: &ChannelShared, ep: Endpoint, event: KEvent) {
    channel.push(Queued { id: ep, event });
}

/// Network delivery: message `msg` from `from` reaches id `to` of this process. False
/// when no such id lives (the network answers for it).
pub fn deliver(to: u32, from: Endpoint, msg: Message) -> bool {
    let Ok(c) = cm() else {
        return false;
    };
    let Some(id) = c.id(to) else {
        return false;
    };
    let mut g = lock(&id.inner);
    if g.destroyed {
        return false;
    }
    let ep = id.endpoint;
    match msg {
        Message::Req {
            src,
            dst,
            qp_type,
            data,
            ..
        } => connect_request(c, &id, &mut g, from, src, dst, qp_type, data),
        Message::SidrReq {
            src,
            dst,
            private_data,
            ..
        } => sidr_request(c, &id, &mut g, from, src, dst, private_data),
        Message::Rep(data) => {
            if g.state == State::Connect && g.conn == Conn::ReqSent {
                // cm.c `cm_rep_handler`: the REP's resources, from our side.
                g.peer = Some(Peer {
                    ep: from,
                    qpn: data.qpn,
                    psn: data.psn,
                });
                g.resp_res = data.initiator_depth;
                g.init_depth = data.responder_resources;
                g.rnr_retry_count = data.rnr_retry_count;
                g.conn = Conn::RepRcvd;
                let seen = ConnData {
                    responder_resources: data.initiator_depth,
                    initiator_depth: data.responder_resources,
                    ..data
                };
                post(&g.channel, ep, KEvent::ConnectResponse(seen));
            }
        }
        Message::Rtu => {
            if g.state == State::Connect && g.conn == Conn::RepSent {
                g.conn = Conn::Established;
                post(&g.channel, ep, KEvent::Established);
            }
        }
        Message::Rej {
            reason: SEND_TIMEOUT,
            ..
        } if g.conn == Conn::DreqSent => {
            // cma.c `cma_ib_handler`: IB_CM_DREQ_ERROR is DISCONNECTED, -ETIMEDOUT.
            g.conn = Conn::Closed;
            disconnected(&mut g, ep, SEND_TIMEOUT);
        }
        Message::Rej {
            reason,
            private_data,
        } => {
            let rejectable = matches!(g.conn, Conn::ReqSent | Conn::RepSent | Conn::RepRcvd);
            if g.state == State::Connect && rejectable {
                g.conn = Conn::Closed;
                let ev = if reason == SEND_TIMEOUT {
                    // cma.c `cma_ib_handler`: IB_CM_REQ_ERROR, IB_CM_REP_ERROR.
                    KEvent::Unreachable(SEND_TIMEOUT)
                } else {
                    KEvent::Rejected {
                        reason,
                        private_data,
                    }
                };
                post(&g.channel, ep, ev);
            }
        }
        Message::Dreq => match g.conn {
            Conn::Established | Conn::RepSent | Conn::DreqSent => {
                if g.conn != Conn::DreqSent {
                    g.conn = Conn::DreqRcvd;
                }
                disconnected(&mut g, ep, 0);
            }
            // A DREQ to a connection already over is answered at once (cm.c
            // `cm_dreq_handler` for an id in timewait).
            Conn::Closed => c.send(ep, Address::Endpoint(from), Message::Drep),
            _ => {}
        },
        Message::Drep => {
            if g.conn == Conn::DreqSent {
                g.conn = Conn::Closed;
                disconnected(&mut g, ep, 0);
            }
        }
        Message::SidrRep {
            status,
            qpn,
            qkey,
            private_data,
        } => {
            if g.state == State::Connect && g.conn == Conn::SidrReqSent {
                g.conn = Conn::Closed;
                let ev = if status == 0 {
                    KEvent::UdEstablished {
                        ud: UdData {
                            ah_attr: route::ah_attr(&g),
                            qp_num: qpn,
                            qkey,
                        },
                        private_data,
                    }
                } else {
                    KEvent::Unreachable(status)
                };
                post(&g.channel, ep, ev);
            }
        }
    }
    true
}

/// The connection is down: one DISCONNECTED event per id (cma.c moves CONNECT to
/// DISCONNECT once), of status `status`.
fn disconnected(g: &mut IdInner, ep: Endpoint, status: i32) {
    if g.state == State::Connect {
        g.state = State::Disconnect;
        post(&g.channel, ep, KEvent::Disconnected(status));
    }
}

/// A new passive id for a request reaching listener `l` (cma.c `cma_ib_new_conn_id`): in
/// state CONNECT, on the listener's channel, with the request's addresses swapped. Its C
/// struct gets the listener's channel and context when the program retrieves the request
/// (librdmacm's `ucma_process_conn_req`).
fn passive_id(c: &Cm, l: &IdInner, src: SocketAddr, dst: SocketAddr) -> *mut CmId {
    let p = c.new_id(
        l.ps,
        l.qp_type,
        Arc::clone(&l.channel),
        std::ptr::null_mut(),
        false,
        std::ptr::null_mut(),
    );
    // SAFETY: `p` was just made and nobody else has it yet.
    let conn = unsafe { &*p };
    let mut g = lock(&conn.shared.inner);
    g.state = State::Connect;
    g.src = Some(dst);
    g.dst = Some(src);
    g.device = Some(0);
    g.routed = true;
    g.qkey = l.qkey;
    g.tos = l.tos;
    drop(g);
    p
}

/// Whether listener `g` takes one more request (ucma's backlog): a request beyond it is
/// dropped, as ucma drops it (the requester's CM retries; the emulator has no retry).
fn backlog_full(g: &IdInner) -> bool {
    g.pending_requests >= g.backlog
}

/// Takes a request from `from` at listener `g`: a new passive id (see [`passive_id`])
/// in connection state `conn` with `peer`, after `init` set what else the request says;
/// the request counts against the backlog until the program takes its event. `None`
/// when the backlog is full: the request is dropped.
fn take_request(
    c: &Cm,
    g: &mut IdInner,
    src: SocketAddr,
    dst: SocketAddr,
    conn: Conn,
    peer: Peer,
    init: impl FnOnce(&mut IdInner),
) -> Option<*mut CmId> {
    if backlog_full(g) {
        return None;
    }
    let p = passive_id(c, g, src, dst);
    // SAFETY: `p` is the new id, ours alone until its event is handed out.
    let id = unsafe { &*p };
    {
        let mut n = lock(&id.shared.inner);
        n.conn = conn;
        n.peer = Some(peer);
        init(&mut n);
    }
    g.pending_requests += 1;
    Some(p)
}

#[allow(clippy::too_many_arguments)]
fn connect_request(
    c: &Cm,
    id: &IdShared,
    g: &mut IdInner,
    from: Endpoint,
    src: SocketAddr,
    dst: SocketAddr,
    qp_type: u32,
    data: ConnData,
) {
    let ep = id.endpoint;
    // cma.c `cma_ib_req_handler`: a listener of another QP type, or one no longer
    // listening, makes the CM reject (consumer defined).
    if g.state != State::Listen || g.qp_type != qp_type {
        c.send(
            ep,
            Address::Endpoint(from),
            Message::Rej {
                reason: REJ_CONSUMER_DEFINED,
                private_data: vec![0; REJ_PRIVATE_DATA],
            },
        );
        return;
    }
    let peer = Peer {
        ep: from,
        qpn: data.qpn,
        psn: data.psn,
    };
    let Some(p) = take_request(c, g, src, dst, Conn::ReqRcvd, peer, |n| {
        // cm.c `cm_format_req_event`: the requester's resources, from our side.
        n.resp_res = data.initiator_depth;
        n.init_depth = data.responder_resources;
        n.flow_control = data.flow_control;
        n.retry_count = data.retry_count;
        n.rnr_retry_count = data.rnr_retry_count;
    }) else {
        return;
    };
    let seen = ConnData {
        responder_resources: data.initiator_depth,
        initiator_depth: data.responder_resources,
        ..data
    };
    post(
        &g.channel,
        ep,
        KEvent::ConnectRequest {
            conn: p as usize,
            data: seen,
        },
    );
}

fn sidr_request(
    c: &Cm,
    id: &IdShared,
    g: &mut IdInner,
    from: Endpoint,
    src: SocketAddr,
    dst: SocketAddr,
    private_data: Vec<u8>,
) {
    let ep = id.endpoint;
    if g.state != State::Listen || g.qp_type != ffi::IBV_QPT_UD {
        c.send(
            ep,
            Address::Endpoint(from),
            Message::SidrRep {
                status: SIDR_UNSUPPORTED,
                qpn: 0,
                qkey: 0,
                private_data: vec![0; SIDR_REP_PRIVATE_DATA],
            },
        );
        return;
    }
    let peer = Peer {
        ep: from,
        qpn: 0,
        psn: 0,
    };
    let Some(p) = take_request(c, g, src, dst, Conn::SidrReqRcvd, peer, |_| {}) else {
        return;
    };
    post(
        &g.channel,
        ep,
        KEvent::SidrRequest {
            conn: p as usize,
            private_data,
        },
    );
}

/// The message the kernel sends the peer of an id destroyed in `g`'s state (cm.c
/// `cm_destroy_id`): a REJ for a connection being set up, a DREQ for one established, the
/// DREP to a DREQ received, a SIDR REP (reject) to a SIDR request.
fn farewell(g: &IdInner) -> Option<Message> {
    let rej = |reason| Message::Rej {
        reason,
        private_data: vec![0; REJ_PRIVATE_DATA],
    };
    match g.conn {
        Conn::ReqSent => Some(rej(REJ_TIMEOUT)),
        Conn::ReqRcvd | Conn::RepSent | Conn::RepRcvd => Some(rej(REJ_CONSUMER_DEFINED)),
        Conn::Established => Some(Message::Dreq),
        Conn::DreqRcvd => Some(Message::Drep),
        Conn::SidrReqRcvd => Some(Message::SidrRep {
            status: crate::rdmacm::core::messages::SIDR_REJECT,
            qpn: 0,
            qkey: 0,
            private_data: vec![0; SIDR_REP_PRIVATE_DATA],
        }),
        _ => None,
    }
}

/// How long a process's exit waits for its connection manager's last messages to leave.
const EXIT_DRAIN: std::time::Duration = std::time::Duration::from_secs(1);

/// At exit, what the kernel does when the process's rdma_cm file closes (ucma's
/// `ucma_close` destroys every id it still has): each id's peer gets the message of its
/// state, and the messages queued so far leave before the process does (the network's
/// thread dies with it), waiting at most [`EXIT_DRAIN`]. Ids another thread holds locked
/// at exit are passed over.
extern "C" fn at_exit() {
    boundary(Nothing, move || {
        let Some(Ok(c)) = CM.get() else {
            return;
        };
        let ids: Vec<Arc<IdShared>> = match c.ids.try_lock() {
            Ok(m) => m.values().filter_map(Weak::upgrade).collect(),
            Err(_) => Vec::new(),
        };
        for id in ids {
            let Ok(mut g) = id.inner.try_lock() else {
                continue;
            };
            if g.destroyed {
                continue;
            }
            g.destroyed = true;
            if let (Some(peer), Some(m)) = (g.peer, farewell(&g)) {
                c.send(id.endpoint, Address::Endpoint(peer.ep), m);
            }
        }
        c.net.drain(EXIT_DRAIN);
    })
}

/// The kernel's side of destroying an id (cma.c `rdma_destroy_id`, cm.c `cm_destroy_id`):
/// the message its connection's state calls for, its listen and port given up, its
/// queued events (and the ids of unretrieved connect requests) dropped, its device share
/// returned. The caller frees the C struct.
pub fn destroy_kernel(c: &Cm, id: &IdShared) {
    let ep = id.endpoint;
    let mut g = lock(&id.inner);
    if g.destroyed {
        return;
    }
    g.destroyed = true;
    let to = g.peer.map(|p| Address::Endpoint(p.ep));
    if let (Some(to), Some(m)) = (to, farewell(&g)) {
        c.send(ep, to, m);
    }
    if g.state == State::Listen {
        if let Some(s) = listen_service(&g) {
            c.net.unlisten(s, ep);
        }
    }
    let dropped = g.channel.take_events_of(ep);
    if g.holds_device {
        if let Some(d) = g.device {
            devices::release(d);
        }
        g.holds_device = false;
    }
    drop(g);
    c.forget(ep.id);
    // Connect requests nobody retrieved: their ids go too (ucma destroys them).
    for q in dropped {
        if let KEvent::ConnectRequest { conn, .. } | KEvent::SidrRequest { conn, .. } = q.event {
            // SAFETY: the id of an unretrieved request was never handed to the program.
            let b = unsafe { Box::from_raw(conn as *mut CmId) };
            destroy_kernel(c, &b.shared);
        }
    }
}

/// The service a listening id claims.
pub fn listen_service(g: &IdInner) -> Option<crate::rdmacm::core::messages::Service> {
    let src = g.src?;
    Some(crate::rdmacm::core::messages::Service {
        ip: addr::ipv4_of(&src).unwrap_or(Ipv4Addr::UNSPECIFIED),
        port: src.port(),
        ps: g.ps,
    })
}

/// What a librdmacm call on `id` starts with: the connection manager (ENODEV without a
/// device) and the id (EINVAL for a NULL one), or the errno to [`fail`](super::id_state::fail) with.
///
/// # Safety
/// `id` is NULL or a live id of ours.
pub unsafe fn cm_and_id<'a>(
    id: *mut ffi::rdma_cm_id,
) -> Result<(&'static Cm, &'a mut CmId), c_int> {
    let c = cm()?;
    // SAFETY: NULL or a live id of ours, as the caller promises.
    Ok((c, unsafe { try_mut_from_ptr!(id, Err(libc::EINVAL)) }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn psns_are_24_bits_and_differ_between_ids() {
        let a: Vec<u32> = (1..100).map(psn_of).collect();
        assert!(a.iter().all(|&p| p <= 0x00ff_ffff));
        let mut b = a.clone();
        b.sort_unstable();
        b.dedup();
        assert_eq!(b.len(), a.len());
    }
}
