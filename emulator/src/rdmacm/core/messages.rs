//! The connection manager's messages: the IB CM's REQ, REP, RTU, REJ, DREQ and DREP
//! (and SIDR for UD), where they go (a listening service or an id), and their bytes on
//! the fabric's socket ([`encode`], [`decode`]), with the sender's gap since its last
//! frame ([`crate::rdmacm::core::request_hold`]).

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

/// `IB_CM_REJ_PRIVATE_DATA_SIZE`.
pub const REJ_PRIVATE_DATA: usize = 148;
/// `IB_CM_SIDR_REP_PRIVATE_DATA_SIZE`.
pub const SIDR_REP_PRIVATE_DATA: usize = 136;

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
/// Not a reason a REJ carries on a wire: the fabric's CM bridge tells an emulated id
/// that its REQ, REP or DREQ went unanswered through all its resends (cm.c's
/// `IB_CM_REQ_ERROR` / `IB_CM_REP_ERROR`, which cma.c reports as
/// `RDMA_CM_EVENT_UNREACHABLE` with status -ETIMEDOUT, and `IB_CM_DREQ_ERROR`,
/// DISCONNECTED with status -ETIMEDOUT; see `emulator/src/fabric/ports/cm_resend.rs`).
pub const SEND_TIMEOUT: i32 = -libc::ETIMEDOUT;
/// `IB_SIDR_UNSUPPORTED`: no listener for a SIDR REQ's service (`enum ib_cm_sidr_status`
/// in include/rdma/ib_cm.h: SUCCESS, UNSUPPORTED, REJECT, NO_QP, REDIRECT,
/// UNSUPPORTED_VERSION).
pub const SIDR_UNSUPPORTED: i32 = 1;
/// `IB_SIDR_REJECT`: the listener's program rejected the SIDR REQ.
pub const SIDR_REJECT: i32 = 2;

/// Where a message goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Address {
    /// The listener of a service (REQ, SIDR REQ).
    Service(Service),
    /// An id (every other message).
    Endpoint(Endpoint),
}

/// The longest private data a message may carry on the wire (a SIDR REQ's 216 bytes
/// are the most the CM sends).
const MAX_WIRE_PRIVATE: usize = 256;

/// What the gap's four bytes say when the sender had sent no frame.
const NO_FRAME: u32 = u32::MAX;

/// A decoded message: its destination, its sender and itself.
pub type Decoded = (Address, Endpoint, Message);

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_be_bytes());
}

fn put_sockaddr(out: &mut Vec<u8>, a: SocketAddr) {
    match a {
        SocketAddr::V4(v) => {
            out.push(4);
            out.extend_from_slice(&v.ip().octets());
        }
        SocketAddr::V6(v) => {
            out.push(6);
            out.extend_from_slice(&v.ip().octets());
        }
    }
    out.extend_from_slice(&a.port().to_be_bytes());
}

fn put_service(out: &mut Vec<u8>, s: Service) {
    out.extend_from_slice(&s.ip.octets());
    out.extend_from_slice(&s.port.to_be_bytes());
    put_u32(out, s.ps);
}

fn put_private(out: &mut Vec<u8>, p: &[u8]) {
    let n = p.len().min(MAX_WIRE_PRIVATE);
    out.extend_from_slice(&u16::try_from(n).unwrap_or(0).to_be_bytes());
    out.extend_from_slice(&p[..n]);
}

fn put_conn(out: &mut Vec<u8>, d: &ConnData) {
    put_u32(out, d.qpn);
    put_u32(out, d.psn);
    out.extend_from_slice(&[
        d.responder_resources,
        d.initiator_depth,
        d.flow_control,
        d.retry_count,
        d.rnr_retry_count,
        u8::from(d.srq),
    ]);
    put_private(out, &d.private_data);
}

/// Writes message `msg` from `from` to `to` into `out` (cleared first), for another
/// host's process: how long before it the sending host's NIC sent its last frame
/// (`gap`, microseconds, little-endian, 4 bytes: `u32::MAX` when `None`, the NIC has sent
/// nothing or the sender is the fabric's CM bridge; beyond 71 minutes the largest there
/// is), the destination (`S` service: address, port, port space; `E` id: address,
/// number), the sender (address, number), then the message (a tag and its fields,
/// big-endian, private data with a 2-byte length).
pub fn encode(
    gap: Option<Duration>,
    to: Address,
    from: Endpoint,
    msg: &Message,
    out: &mut Vec<u8>,
) {
    out.clear();
    let us = gap.map_or(NO_FRAME, |g| {
        u32::try_from(g.as_micros()).unwrap_or(NO_FRAME - 1)
    });
    out.extend_from_slice(&us.to_le_bytes());
    match to {
        Address::Service(s) => {
            out.push(b'S');
            put_service(out, s);
        }
        Address::Endpoint(ep) => {
            out.push(b'E');
            out.extend_from_slice(&ep.host.octets());
            put_u32(out, ep.id);
        }
    }
    out.extend_from_slice(&from.host.octets());
    put_u32(out, from.id);
    match msg {
        Message::Req {
            service,
            src,
            dst,
            qp_type,
            data,
        } => {
            out.push(b'Q');
            put_service(out, *service);
            put_sockaddr(out, *src);
            put_sockaddr(out, *dst);
            put_u32(out, *qp_type);
            put_conn(out, data);
        }
        Message::Rep(d) => {
            out.push(b'P');
            put_conn(out, d);
        }
        Message::Rtu => out.push(b'U'),
        Message::Rej {
            reason,
            private_data,
        } => {
            out.push(b'J');
            out.extend_from_slice(&reason.to_be_bytes());
            put_private(out, private_data);
        }
        Message::Dreq => out.push(b'D'),
        Message::Drep => out.push(b'd'),
        Message::SidrReq {
            service,
            src,
            dst,
            private_data,
        } => {
            out.push(b'R');
            put_service(out, *service);
            put_sockaddr(out, *src);
            put_sockaddr(out, *dst);
            put_private(out, private_data);
        }
        Message::SidrRep {
            status,
            qpn,
            qkey,
            private_data,
        } => {
            out.push(b'r');
            out.extend_from_slice(&status.to_be_bytes());
            put_u32(out, *qpn);
            put_u32(out, *qkey);
            put_private(out, private_data);
        }
    }
}

/// Reads what [`encode`] wrote, trusting nothing.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.0.len() < n {
            return Err("is cut short".into());
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Ok(a)
    }

    fn u8(&mut self) -> Result<u8, String> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, String> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Result<u32, String> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn i32(&mut self) -> Result<i32, String> {
        Ok(self.u32()? as i32)
    }

    fn ipv4(&mut self) -> Result<Ipv4Addr, String> {
        let b = self.take(4)?;
        Ok(Ipv4Addr::new(b[0], b[1], b[2], b[3]))
    }

    fn sockaddr(&mut self) -> Result<SocketAddr, String> {
        let ip: std::net::IpAddr = match self.u8()? {
            4 => self.ipv4()?.into(),
            6 => {
                let mut a = [0u8; 16];
                a.copy_from_slice(self.take(16)?);
                std::net::Ipv6Addr::from(a).into()
            }
            f => return Err(format!("has an address of family {f}")),
        };
        Ok(SocketAddr::new(ip, self.u16()?))
    }

    fn service(&mut self) -> Result<Service, String> {
        Ok(Service {
            ip: self.ipv4()?,
            port: self.u16()?,
            ps: self.u32()?,
        })
    }

    fn private(&mut self) -> Result<Vec<u8>, String> {
        let n = usize::from(self.u16()?);
        if n > MAX_WIRE_PRIVATE {
            return Err(format!(
                "has {n} bytes of private data (at most {MAX_WIRE_PRIVATE})"
            ));
        }
        Ok(self.take(n)?.to_vec())
    }

    fn flag(&mut self) -> Result<bool, String> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(format!("has a flag of {v}")),
        }
    }

    fn conn(&mut self) -> Result<ConnData, String> {
        Ok(ConnData {
            qpn: self.u32()?,
            psn: self.u32()?,
            responder_resources: self.u8()?,
            initiator_depth: self.u8()?,
            flow_control: self.u8()?,
            retry_count: self.u8()?,
            rnr_retry_count: self.u8()?,
            srq: self.flag()?,
            private_data: self.private()?,
        })
    }
}

/// Reads a message [`encode`] wrote: the sender's gap and `(to, from, msg)`.
///
/// # Errors
/// What is wrong with it, as the end of a sentence ("is cut short", "has an unknown
/// message tag 0x5a" ...).
pub fn decode(body: &[u8]) -> Result<(Option<Duration>, Decoded), String> {
    let mut r = Reader(body);
    let b = r.take(4)?;
    let us = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    let gap = (us != NO_FRAME).then(|| Duration::from_micros(u64::from(us)));
    let to = match r.u8()? {
        b'S' => Address::Service(r.service()?),
        b'E' => Address::Endpoint(Endpoint {
            host: r.ipv4()?,
            id: r.u32()?,
        }),
        t => return Err(format!("has an unknown destination tag 0x{t:02x}")),
    };
    let from = Endpoint {
        host: r.ipv4()?,
        id: r.u32()?,
    };
    let msg = match r.u8()? {
        b'Q' => Message::Req {
            service: r.service()?,
            src: r.sockaddr()?,
            dst: r.sockaddr()?,
            qp_type: r.u32()?,
            data: r.conn()?,
        },
        b'P' => Message::Rep(r.conn()?),
        b'U' => Message::Rtu,
        b'J' => Message::Rej {
            reason: r.i32()?,
            private_data: r.private()?,
        },
        b'D' => Message::Dreq,
        b'd' => Message::Drep,
        b'R' => Message::SidrReq {
            service: r.service()?,
            src: r.sockaddr()?,
            dst: r.sockaddr()?,
            private_data: r.private()?,
        },
        b'r' => Message::SidrRep {
            status: r.i32()?,
            qpn: r.u32()?,
            qkey: r.u32()?,
            private_data: r.private()?,
        },
        t => return Err(format!("has an unknown message tag 0x{t:02x}")),
    };
    if !r.0.is_empty() {
        return Err(format!("has {} bytes too many", r.0.len()));
    }
    Ok((gap, (to, from, msg)))
}
