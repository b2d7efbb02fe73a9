//! The connection manager's ids: `struct rdma_cm_id` as programs see it, and the state the
//! kernel's rdma_cm and IB CM keep for it (drivers/infiniband/core/cma.c, cm.c).

use std::ffi::c_int;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Condvar, Mutex};

use crate::base::ffi;
use crate::base::pointer::Castable;
use crate::rdmacm::core::event_queue::ChannelShared;
use crate::rdmacm::core::messages::Endpoint;
use crate::rdmacm::core::sockaddr as addr;

/// The kernel's `enum rdma_cm_state` (the states the emulator reaches).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Created.
    Idle,
    /// `rdma_bind_addr` (or an implicit bind) done.
    AddrBound,
    /// `rdma_resolve_addr` under way.
    AddrQuery,
    /// The destination address is resolved.
    AddrResolved,
    /// `rdma_resolve_route` under way.
    RouteQuery,
    /// The route is resolved.
    RouteResolved,
    /// Connecting or connected (active after `rdma_connect`, passive from the request on).
    Connect,
    /// Disconnected.
    Disconnect,
    /// Listening.
    Listen,
}

/// The IB CM's state of an id's connection (`enum ib_cm_state`, the ones reached).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conn {
    /// No CM id yet.
    None,
    /// REQ sent, waiting for the REP.
    ReqSent,
    /// REQ received, not answered yet.
    ReqRcvd,
    /// REP sent, waiting for the RTU.
    RepSent,
    /// REP received, RTU not sent yet.
    RepRcvd,
    /// Connected.
    Established,
    /// DREQ sent, waiting for the DREP.
    DreqSent,
    /// DREQ received, DREP not sent yet.
    DreqRcvd,
    /// Over (rejected, or disconnected both ways).
    Closed,
    /// SIDR REQ sent.
    SidrReqSent,
    /// SIDR REQ received, not answered yet.
    SidrReqRcvd,
}

/// The other end of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    /// Its id.
    pub ep: Endpoint,
    /// Its QP number.
    pub qpn: u32,
    /// The PSN it starts sending with (this side's receive PSN ... see `rdma_init_qp_attr`).
    pub psn: u32,
}

/// A multicast group an id joined.
#[derive(Debug, Clone)]
pub struct Multicast {
    /// The handle its events name.
    pub handle: u64,
    /// The join address as the program passed it (compared by `rdma_leave_multicast`).
    pub addr: Vec<u8>,
    /// The group's MGID.
    pub mgid: [u8; 16],
    /// `RDMA_MC_JOIN_FLAG_*`.
    pub join_flags: u32,
    /// The program's context (`event->param.ud.private_data` of its events).
    pub context: usize,
    /// Its events handed to the program.
    pub reported: u64,
    /// Those acknowledged.
    pub acked: u64,
}

/// What the connection manager knows of an id.
#[derive(Debug)]
pub struct IdInner {
    /// The rdma_cm state.
    pub state: State,
    /// The IB CM state of its connection.
    pub conn: Conn,
    /// `RDMA_PS_*`.
    pub ps: u32,
    /// `IBV_QPT_*` of the QP it connects.
    pub qp_type: u32,
    /// Its address (`route.addr.src_addr`).
    pub src: Option<SocketAddr>,
    /// The destination (`route.addr.dst_addr`).
    pub dst: Option<SocketAddr>,
    /// Whether `src`'s port is claimed in the port table.
    pub port_claimed: bool,
    /// The device of the host it is bound to (index).
    pub device: Option<usize>,
    /// Whether it holds a share of the device (`id->verbs`, `id->pd`).
    pub holds_device: bool,
    /// Whether the route is resolved (`route.num_paths` is 1).
    pub routed: bool,
    /// The PSN this side starts with (the kernel's `seq_num`).
    pub seq: u32,
    /// The other end, once known.
    pub peer: Option<Peer>,
    /// RDMA reads/atomics this side accepts at once.
    pub resp_res: u8,
    /// RDMA reads/atomics this side issues at once.
    pub init_depth: u8,
    /// End-to-end flow control.
    pub flow_control: u8,
    /// Transport retries.
    pub retry_count: u8,
    /// RNR retries.
    pub rnr_retry_count: u8,
    /// The QP number announced when the id has no QP (from `rdma_conn_param`).
    pub qp_num: u32,
    /// Whether that QP uses an SRQ.
    pub srq: bool,
    /// The Q_Key of UD ids.
    pub qkey: u32,
    /// `RDMA_OPTION_ID_REUSEADDR`.
    pub reuseaddr: bool,
    /// `RDMA_OPTION_ID_TOS`.
    pub tos: Option<u8>,
    /// `RDMA_OPTION_ID_ACK_TIMEOUT`.
    pub ack_timeout: Option<u8>,
    /// Connect requests a listener may hold unretrieved.
    pub backlog: usize,
    /// Connect requests queued and not retrieved.
    pub pending_requests: usize,
    /// The multicast groups it joined.
    pub multicast: Vec<Multicast>,
    /// Events of the id handed to the program.
    pub reported: u64,
    /// Those acknowledged.
    pub acked: u64,
    /// librdmacm's `connect_error`: a REP could not be processed.
    pub connect_error: bool,
    /// Created without a channel: every call waits for its own event.
    pub sync: bool,
    /// The channel its events go to.
    pub channel: Arc<ChannelShared>,
    /// Destroyed: late work (a timed-out resolution) finds nothing to do.
    pub destroyed: bool,
}

impl IdInner {
    /// A new id in state Idle.
    pub fn new(ps: u32, qp_type: u32, seq: u32, channel: Arc<ChannelShared>, sync: bool) -> Self {
        IdInner {
            state: State::Idle,
            conn: Conn::None,
            ps,
            qp_type,
            src: None,
            dst: None,
            port_claimed: false,
            device: None,
            holds_device: false,
            routed: false,
            seq,
            peer: None,
            resp_res: 0,
            init_depth: 0,
            flow_control: 0,
            retry_count: 0,
            rnr_retry_count: 0,
            qp_num: 0,
            srq: false,
            qkey: 0,
            reuseaddr: false,
            tos: None,
            ack_timeout: None,
            backlog: 0,
            pending_requests: 0,
            multicast: Vec::new(),
            reported: 0,
            acked: 0,
            connect_error: false,
            sync,
            channel,
            destroyed: false,
        }
    }

    /// The source IP address, if bound.
    pub fn src_ip(&self) -> Option<IpAddr> {
        self.src.map(|a| a.ip())
    }

    /// The GID of the destination (`rdma_ip2gid` of `dst`), zeros without one.
    pub fn dgid(&self) -> [u8; 16] {
        self.dst.map_or([0; 16], |a| addr::gid_of(a.ip()))
    }

    /// The GID of the source.
    pub fn sgid(&self) -> [u8; 16] {
        self.src.map_or([0; 16], |a| addr::gid_of(a.ip()))
    }
}

/// The shared part of an id: its number, the address of its C struct, and its state.
#[derive(Debug)]
pub struct IdShared {
    /// The id on its host.
    pub endpoint: Endpoint,
    /// The `*mut rdma_cm_id` programs hold (the `CmId`), as an address.
    pub raw: AtomicUsize,
    /// The state.
    pub inner: Mutex<IdInner>,
    /// Signalled when an event is acknowledged.
    pub acked: Condvar,
}

impl IdShared {
    /// Waits, with `g` (this id's state) locked, until the program has acknowledged every
    /// event reported for the id; returns the lock.
    pub fn wait_all_acked<'a>(
        &'a self,
        mut g: std::sync::MutexGuard<'a, IdInner>,
    ) -> std::sync::MutexGuard<'a, IdInner> {
        while g.acked < g.reported {
            g = self
                .acked
                .wait(g)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        g
    }
}

// SAFETY: `CmId` is `#[repr(C)]` and starts with its `rdma_cm_id`.
unsafe impl Castable for CmId {
    type C = ffi::rdma_cm_id;
}

/// `struct rdma_cm_id` and the id it is.
#[repr(C)]
#[derive(Debug)]
pub struct CmId {
    /// What programs read and write.
    pub raw: ffi::rdma_cm_id,
    /// The connection manager's state of it.
    pub shared: Arc<IdShared>,
    /// A passive endpoint's QP attributes (`rdma_create_ep`), for the QP of each id
    /// `rdma_get_request` hands out.
    pub ep_qp_init_attr: Option<ffi::ibv_qp_init_attr>,
}

/// The `CmId` of a program's `struct rdma_cm_id`.
///
/// # Safety
/// `id` is a live id this library returned.
pub unsafe fn cm_id<'a>(id: *mut ffi::rdma_cm_id) -> &'a mut CmId {
    // SAFETY: every id we hand out is the first field of a leaked CmId.
    unsafe { &mut *CmId::from_c(id).cast_mut() }
}

/// The librdmacm return of a failure: -1 with errno.
pub fn fail(errno: c_int) -> c_int {
    crate::base::errno::set_errno(errno);
    -1
}

// The raw struct holds pointers into the program's objects: Debug prints the id's number.
impl std::fmt::Debug for ffi::rdma_cm_id {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("rdma_cm_id")
            .field("verbs", &self.verbs)
            .field("qp", &self.qp)
            .finish_non_exhaustive()
    }
}
