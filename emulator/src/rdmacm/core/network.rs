//! How connection-manager messages travel between ids: the IB CM's REQ, REP, RTU, REJ,
//! DREQ and DREP (and SIDR for UD), addressed to a listening service or to an id.
//!
//! A [`Network`] delivers the messages for the ids of this process (its host's) itself, on
//! a thread of its own, and hands those for another host to the world [`Outside`]: with
//! a fabric process, the fabric's socket, which brings them to the process of that host
//! ([`encode`] and [`decode`] of [`crate::rdmacm::core::messages`] turn them into bytes) and returns them when no process is
//! that host. A message nobody takes is answered as the remote CM answers it (a REQ with
//! a REJ for an unknown service ...); so is a message for another host with no fabric
//! (a process alone reaches only its own host).

use std::collections::HashMap;
use std::ffi::c_int;
use std::net::Ipv4Addr;
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};

use crate::base::sync::lock;
use crate::rdmacm::core::messages::{
    decode, encode, Address, Endpoint, Message, Service, REJ_INVALID_SERVICE_ID, REJ_PRIVATE_DATA,
    SIDR_REP_PRIVATE_DATA, SIDR_UNSUPPORTED,
};
use crate::rdmacm::core::request_hold;

/// How a network hands a message to an id of this process: `(to, from, msg)`; false when
/// the id does not exist (any more).
pub type Deliver = fn(u32, Endpoint, Message) -> bool;

/// The world beyond this process's host: where messages for other hosts go.
pub trait Outside: Send + Sync + std::fmt::Debug {
    /// Sends `body` (an [`encode`]d message) to the process of host `host`.
    ///
    /// # Errors
    /// It cannot be sent (the reason).
    fn send(&self, host: Ipv4Addr, body: &[u8]) -> Result<(), String>;

    /// How long ago this host's NIC last sent a frame (`None`: never, or not known).
    fn since_last_frame(&self) -> Option<std::time::Duration> {
        None
    }
}

impl Outside for crate::fabric::client::CmLink {
    fn send(&self, host: Ipv4Addr, body: &[u8]) -> Result<(), String> {
        crate::fabric::client::CmLink::send(self, host, body)
    }

    fn since_last_frame(&self) -> Option<std::time::Duration> {
        crate::fabric::client::CmLink::since_last_frame(self)
    }
}

/// What the network's thread does next.
#[derive(Debug)]
enum Job {
    /// A message from an id of this process.
    Send(Address, Endpoint, Message),
    /// An encoded message from the process of another host (its address), when this
    /// process last took a frame of that host, and when the message arrived.
    Arrived(
        Ipv4Addr,
        Vec<u8>,
        Option<crate::fabric::spacing::Taken>,
        std::time::Instant,
    ),
    /// An encoded message this process sent, returned: no process is its host.
    Returned(Vec<u8>),
    /// A call, once every message queued before it has been handled.
    Then(fn(Ipv4Addr), Ipv4Addr),
}

/// The network of one host's ids: a table of listeners, and a thread that delivers every
/// message in order (the IB CM's MADs are asynchronous too: the receiver learns of a
/// message on that thread, never inside the sender's call).
#[derive(Debug)]
pub struct Network {
    shared: Arc<Shared>,
    queue: Mutex<Sender<Job>>,
}

#[derive(Debug)]
struct Shared {
    host: Ipv4Addr,
    listeners: Mutex<HashMap<Service, Endpoint>>,
    deliver: Deliver,
    outside: Option<&'static dyn Outside>,
    /// Jobs queued and not yet done.
    pending: std::sync::atomic::AtomicUsize,
}

/// Says once on stderr that messages from other hosts were dropped, and why.
fn dropped(why: &str) {
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if !SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
        eprintln!("verbs-emu: dropped a connection-manager message: {why}");
    }
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

    /// Whether `ip` is this host (the unspecified address too: a service on it is ours).
    fn is_here(&self, ip: Ipv4Addr) -> bool {
        ip == self.host || ip.is_unspecified()
    }

    fn route(&self, to: Address, from: Endpoint, msg: Message) {
        let dest = to_host(to);
        if !self.is_here(dest) {
            if let Some(out) = self.outside {
                let mut body = Vec::new();
                encode(out.since_last_frame(), to, from, &msg, &mut body);
                match out.send(dest, &body) {
                    Ok(()) => return,
                    Err(why) => dropped(&format!("to {dest}: {why}")),
                }
            }
            return self.answer(to, from, msg);
        }
        let target = match to {
            Address::Endpoint(ep) => Some(ep),
            Address::Service(s) => self.listener(s),
        };
        let delivered = target
            .filter(|ep| ep.host == self.host)
            .is_some_and(|ep| (self.deliver)(ep.id, from, msg.clone()));
        if !delivered {
            self.answer(to, from, msg);
        }
    }

    /// What the remote CM answers a message nobody takes (drivers/infiniband/core/cm.c): a
    /// REQ with REJ (invalid service id), a SIDR REQ with SIDR REP (unsupported), a DREQ
    /// for a gone id with a DREP; anything else is dropped.
    fn answer(&self, to: Address, from: Endpoint, msg: Message) {
        let here = Endpoint {
            host: to_host(to),
            id: 0,
        };
        let Some(answer) = answer_to(&msg) else {
            return;
        };
        if self.is_here(from.host) {
            (self.deliver)(from.id, here, answer);
        } else {
            // An answer to another host's message: it travels back the way it came.
            self.route(Address::Endpoint(from), here, answer);
        }
    }

    fn run(&self, job: Job) {
        match job {
            Job::Send(to, from, msg) => self.route(to, from, msg),
            Job::Arrived(host, body, frames_taken, arrived) => match decode(&body) {
                Ok((gap, (to, from, msg))) => {
                    if from.host != host {
                        dropped(&format!("host {host} sent one from {}", from.host));
                    } else if !self.is_here(to_host(to)) {
                        dropped(&format!("host {host} sent one for {}", to_host(to)));
                    } else {
                        if matches!(msg, Message::Req { .. } | Message::SidrReq { .. }) {
                            request_hold::hold_request(frames_taken, gap, arrived);
                        }
                        self.route(to, from, msg);
                    }
                }
                Err(why) => dropped(&format!("host {host} sent one that {why}")),
            },
            Job::Returned(body) => match decode(&body).map(|(_, m)| m) {
                Ok((to, from, msg)) if self.is_here(from.host) => self.answer(to, from, msg),
                Ok(_) => dropped("the fabric returned one this host did not send"),
                Err(why) => dropped(&format!("the fabric returned one that {why}")),
            },
            Job::Then(f, host) => f(host),
        }
    }
}

fn to_host(to: Address) -> Ipv4Addr {
    match to {
        Address::Endpoint(ep) => ep.host,
        Address::Service(s) => s.ip,
    }
}

impl Network {
    /// The network of host `host`, handing messages to `deliver` on its own thread, and
    /// those for other hosts to `outside` (none: nobody else is reachable).
    ///
    /// # Errors
    /// The thread cannot be started.
    pub fn new(
        host: Ipv4Addr,
        deliver: Deliver,
        outside: Option<&'static dyn Outside>,
    ) -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            host,
            listeners: Mutex::new(HashMap::new()),
            deliver,
            outside,
            pending: std::sync::atomic::AtomicUsize::new(0),
        });
        let (tx, rx) = channel::<Job>();
        let s = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("verbs-emu-cm".into())
            .spawn(move || {
                for job in rx {
                    s.run(job);
                    s.pending.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
                }
            })?;
        Ok(Network {
            shared,
            queue: Mutex::new(tx),
        })
    }

    /// Claims `service` for the listener `ep`.
    ///
    /// # Errors
    /// EADDRINUSE when another id listens on it.
    pub fn listen(&self, service: Service, ep: Endpoint) -> Result<(), c_int> {
        let mut l = lock(&self.shared.listeners);
        if l.contains_key(&service) {
            return Err(libc::EADDRINUSE);
        }
        l.insert(service, ep);
        Ok(())
    }

    /// Gives `service` up (the listener is destroyed).
    pub fn unlisten(&self, service: Service, ep: Endpoint) {
        let mut l = lock(&self.shared.listeners);
        if l.get(&service) == Some(&ep) {
            l.remove(&service);
        }
    }

    fn push(&self, job: Job) {
        self.shared
            .pending
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        // The receiving thread lives as long as the process; a send fails only during exit.
        if lock(&self.queue).send(job).is_err() {
            self.shared
                .pending
                .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// Calls `f(host)` on the network's thread once every message queued before has been
    /// handled.
    pub fn then(&self, f: fn(Ipv4Addr), host: Ipv4Addr) {
        self.push(Job::Then(f, host));
    }

    /// Waits until every message queued so far has been handled (delivered here or
    /// handed to the world outside), at most `timeout`; false if some were still waiting.
    pub fn drain(&self, timeout: std::time::Duration) -> bool {
        let begin = std::time::Instant::now();
        while self
            .shared
            .pending
            .load(std::sync::atomic::Ordering::SeqCst)
            > 0
        {
            if begin.elapsed() > timeout {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        true
    }

    /// Sends `msg` from `from` to `to`, later: the receiver learns it on the network's
    /// thread (or another host's).
    pub fn send(&self, to: Address, from: Endpoint, msg: Message) {
        self.push(Job::Send(to, from, msg));
    }

    /// An [`encode`]d message from the process of host `from` arrived (the fabric brought
    /// it); this process last took a frame of that host at `frames_taken`. A request
    /// waits on the network's thread until it is as far behind those frames as it was
    /// sent after them ([`request_hold::hold`]).
    pub fn arrived(
        &self,
        from: Ipv4Addr,
        body: &[u8],
        frames_taken: Option<crate::fabric::spacing::Taken>,
    ) {
        let now = std::time::Instant::now();
        self.push(Job::Arrived(from, body.to_vec(), frames_taken, now));
    }

    /// A message this host sent came back: no process is its destination host,
    /// so nobody takes it.
    pub fn returned(&self, body: &[u8]) {
        self.push(Job::Returned(body.to_vec()));
    }
}

/// What the kernel's CM answers a message no id takes (drivers/infiniband/core/cm.c): a
/// REQ with REJ (invalid service id), a SIDR REQ with SIDR REP (unsupported), a DREQ for
/// a gone id with a DREP; `None` for anything else (dropped).
#[must_use]
pub fn answer_to(msg: &Message) -> Option<Message> {
    Some(match msg {
        Message::Req { .. } => Message::Rej {
            reason: REJ_INVALID_SERVICE_ID,
            private_data: vec![0; REJ_PRIVATE_DATA],
        },
        Message::SidrReq { .. } => Message::SidrRep {
            status: SIDR_UNSUPPORTED,
            qpn: 0,
            qkey: 0,
            private_data: vec![0; SIDR_REP_PRIVATE_DATA],
        },
        Message::Dreq => Message::Drep,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rdmacm::core::messages::{ConnData, REJ_CONSUMER_DEFINED};
    use std::sync::mpsc::{sync_channel, SyncSender};
    use std::sync::OnceLock;
    use std::time::Duration;

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
        let net = Network::new(host, record, None).unwrap();
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

    fn every_message() -> Vec<Message> {
        let data = ConnData {
            qpn: 0x11,
            psn: 0xabcdef,
            responder_resources: 1,
            initiator_depth: 2,
            flow_control: 1,
            retry_count: 7,
            rnr_retry_count: 6,
            srq: true,
            private_data: vec![9; 56],
        };
        let service = Service {
            ip: Ipv4Addr::new(10, 100, 0, 1),
            port: 7174,
            ps: 0x106,
        };
        vec![
            Message::Req {
                service,
                src: "10.100.0.2:32768".parse().unwrap(),
                dst: "[::ffff:10.100.0.1]:7174".parse().unwrap(),
                qp_type: 2,
                data: data.clone(),
            },
            Message::Rep(data),
            Message::Rtu,
            Message::Rej {
                reason: REJ_CONSUMER_DEFINED,
                private_data: vec![1; 148],
            },
            Message::Dreq,
            Message::Drep,
            Message::SidrReq {
                service,
                src: "10.100.0.2:32768".parse().unwrap(),
                dst: "10.100.0.1:7174".parse().unwrap(),
                private_data: vec![2; 216],
            },
            Message::SidrRep {
                status: -1,
                qpn: 0x12,
                qkey: 0x0123_4567,
                private_data: vec![3; 136],
            },
        ]
    }

    #[test]
    fn messages_cross_the_fabric_as_they_were_and_garbage_is_named() {
        let to = Address::Endpoint(Endpoint {
            host: Ipv4Addr::new(10, 100, 0, 2),
            id: 5,
        });
        let from = Endpoint {
            host: Ipv4Addr::new(10, 100, 0, 1),
            id: 7,
        };
        let mut buf = Vec::new();
        for m in every_message() {
            encode(None, to, from, &m, &mut buf);
            assert!(buf.len() <= crate::fabric::wire::MAX_CM, "{m:?}");
            assert_eq!(decode(&buf), Ok((None, (to, from, m.clone()))));
            // Every shorter prefix is refused, and so is a byte too many.
            for n in 0..buf.len() {
                assert!(decode(&buf[..n]).is_err(), "{m:?} cut at {n}");
            }
            buf.push(0);
            assert_eq!(decode(&buf).unwrap_err(), "has 1 bytes too many");
        }
        // The sender's gap travels with the message; beyond 71 minutes it is told as the
        // largest there is.
        let us = Duration::from_micros;
        for (gap, told) in [
            (us(0), us(0)),
            (us(3300), us(3300)),
            (Duration::from_secs(10_000), us(4_294_967_294)),
        ] {
            encode(Some(gap), to, from, &Message::Rtu, &mut buf);
            assert_eq!(decode(&buf), Ok((Some(told), (to, from, Message::Rtu))));
        }
        encode(None, to, from, &Message::Rtu, &mut buf);
        buf[4] = b'x';
        assert_eq!(
            decode(&buf).unwrap_err(),
            "has an unknown destination tag 0x78"
        );
        encode(None, to, from, &Message::Rtu, &mut buf);
        let last = buf.len() - 1;
        buf[last] = b'?';
        assert_eq!(decode(&buf).unwrap_err(), "has an unknown message tag 0x3f");
        encode(None, to, from, &Message::Rep(ConnData::default()), &mut buf);
        let at = buf.len() - 3;
        buf[at] = 2;
        assert_eq!(decode(&buf).unwrap_err(), "has a flag of 2");
        buf[at] = 0;
        let end = buf.len();
        buf[end - 2..].copy_from_slice(&300u16.to_be_bytes());
        assert_eq!(
            decode(&buf).unwrap_err(),
            "has 300 bytes of private data (at most 256)"
        );
    }

    /// The other host, as a process's network sees it: what it sends there.
    #[derive(Debug)]
    struct Wire(Mutex<SyncSender<(Ipv4Addr, Vec<u8>)>>);

    impl Outside for Wire {
        fn send(&self, host: Ipv4Addr, body: &[u8]) -> Result<(), String> {
            lock(&self.0).send((host, body.to_vec())).unwrap();
            Ok(())
        }
    }

    static SEEN2: OnceLock<Mutex<SyncSender<(u32, Endpoint, Message)>>> = OnceLock::new();

    /// Id 1 exists on this host.
    fn record2(to: u32, from: Endpoint, msg: Message) -> bool {
        to == 1 && lock(SEEN2.get().unwrap()).send((to, from, msg)).is_ok()
    }

    #[test]
    fn messages_for_other_hosts_go_outside_and_come_back_answered() {
        let (tx, seen) = sync_channel(16);
        SEEN2.set(Mutex::new(tx)).unwrap();
        let (wtx, wire) = sync_channel(16);
        let outside: &'static Wire = Box::leak(Box::new(Wire(Mutex::new(wtx))));
        let h1 = Ipv4Addr::new(10, 100, 0, 1);
        let h2 = Ipv4Addr::new(10, 100, 0, 2);
        let net = Network::new(h1, record2, Some(outside)).unwrap();
        let me = Endpoint { host: h1, id: 1 };
        let peer = Endpoint { host: h2, id: 4 };
        let svc = Service {
            ip: h2,
            port: 7174,
            ps: 0x106,
        };
        let req = every_message().remove(0);
        // A REQ to h2's service leaves for h2, encoded.
        net.send(Address::Service(svc), me, req.clone());
        let (host, body) = wire.recv().unwrap();
        assert_eq!(host, h2);
        assert_eq!(decode(&body), Ok((None, (Address::Service(svc), me, req))));
        // h2's REP arrives for id 1.
        let mut rep = Vec::new();
        let rep_msg = Message::Rep(ConnData::default());
        encode(None, Address::Endpoint(me), peer, &rep_msg, &mut rep);
        net.arrived(h2, &rep, None);
        assert_eq!(seen.recv().unwrap(), (1, peer, rep_msg));
        // The fabric returns the REQ (no process is h2): REJ 8, as h2's CM would answer.
        net.returned(&body);
        let (to, from, m) = seen.recv().unwrap();
        assert_eq!((to, from.host), (1, h2));
        assert!(matches!(
            m,
            Message::Rej {
                reason: REJ_INVALID_SERVICE_ID,
                ..
            }
        ));
        // A DREQ from h2 for a gone id here: the DREP goes back to h2.
        let mut dreq = Vec::new();
        encode(
            None,
            Address::Endpoint(Endpoint { host: h1, id: 9 }),
            peer,
            &Message::Dreq,
            &mut dreq,
        );
        net.arrived(h2, &dreq, None);
        let (host, body) = wire.recv().unwrap();
        assert_eq!(host, h2);
        assert_eq!(
            decode(&body),
            Ok((
                None,
                (
                    Address::Endpoint(peer),
                    Endpoint { host: h1, id: 0 },
                    Message::Drep
                )
            ))
        );
        // A message claiming to come from another host than the one that sent it, or
        // garbage, is dropped: the next good message is the next thing delivered.
        net.arrived(Ipv4Addr::new(10, 100, 0, 3), &rep, None);
        net.arrived(h2, b"garbage", None);
        net.arrived(h2, &rep, None);
        assert_eq!(seen.recv().unwrap().1, peer);
        assert!(seen.try_recv().is_err() && wire.try_recv().is_err());
    }
}
