//! `rdma_get_cm_event`, `rdma_ack_cm_event` and `rdma_event_str`: an event of the kernel's
//! queue becomes a `struct rdma_cm_event`, with librdmacm's processing on the way
//! (cma.c `rdma_get_cm_event`): the device and route of the ids it names, the QP of a
//! connection moved to RTS and the RTU sent, a multicast group attached.

use std::ffi::{c_char, c_int};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::base::boundary::{boundary, MinusOne, Null};
use crate::base::ffi;
use crate::base::pointer::try_ref_from_ptr;
use crate::base::sync::lock;
use crate::rdmacm::api::id_qp::{modify_err, modify_rtr, modify_rts};
use crate::rdmacm::core::event_queue::{EventChannel, KEvent, UdData};
use crate::rdmacm::core::id_query::publish;
use crate::rdmacm::core::id_state::{cm_id, fail, CmId, Conn, IdShared, State};
use crate::rdmacm::core::manager::{cm, destroy_kernel};
use crate::rdmacm::core::messages::{Address, ConnData, Message};

/// `IB_CM_REQ_PRIVATE_DATA_SIZE`.
pub const REQ_PRIVATE_DATA: usize = 92;
/// `IB_CM_REP_PRIVATE_DATA_SIZE`.
pub const REP_PRIVATE_DATA: usize = 196;
/// `IB_CM_SIDR_REQ_PRIVATE_DATA_SIZE`.
pub const SIDR_REQ_PRIVATE_DATA: usize = 216;
/// The rdma_cm header that starts the private data of a REQ or SIDR REQ in the TCP and
/// UDP port spaces (`struct cma_hdr`); the program sees what follows it.
pub const CMA_HDR: usize = 36;
/// `RDMA_MAX_PRIVATE_DATA`: the private data an event can carry.
const MAX_PRIVATE_DATA: usize = 256;

/// A `struct rdma_cm_event` handed to the program, with the private data it points at.
#[repr(C)]
pub struct CmEvent {
    /// What programs read.
    pub raw: ffi::rdma_cm_event,
    /// The private data `raw.param.*.private_data` points at.
    pub private_data: [u8; MAX_PRIVATE_DATA],
    /// The id the event counts for (the listener, for a connect request).
    pub owner: Arc<IdShared>,
    /// The multicast join the event reports.
    pub mc: Option<u64>,
}

impl std::fmt::Debug for CmEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CmEvent")
            .field("event", &self.raw.event)
            .field("status", &self.raw.status)
            .finish_non_exhaustive()
    }
}

impl CmEvent {
    /// Copies connection parameters and private data in (librdmacm's
    /// `ucma_copy_conn_event`).
    fn set_conn(&mut self, d: &ConnData) {
        let n = d.private_data.len().min(MAX_PRIVATE_DATA);
        self.private_data[..n].copy_from_slice(&d.private_data[..n]);
        self.raw.param.conn = ffi::rdma_conn_param {
            private_data: if n == 0 {
                std::ptr::null()
            } else {
                self.private_data.as_ptr().cast()
            },
            private_data_len: u8::try_from(n).unwrap_or(u8::MAX),
            responder_resources: d.responder_resources,
            initiator_depth: d.initiator_depth,
            flow_control: d.flow_control,
            retry_count: d.retry_count,
            rnr_retry_count: d.rnr_retry_count,
            srq: u8::from(d.srq),
            qp_num: d.qpn,
        };
    }

    /// Copies UD parameters and private data in (`ucma_copy_ud_event`).
    fn set_ud(&mut self, ud: &UdData, private_data: &[u8]) {
        let n = private_data.len().min(MAX_PRIVATE_DATA);
        self.private_data[..n].copy_from_slice(&private_data[..n]);
        self.raw.param.ud = ffi::rdma_ud_param {
            private_data: if n == 0 {
                std::ptr::null()
            } else {
                self.private_data.as_ptr().cast()
            },
            private_data_len: u8::try_from(n).unwrap_or(u8::MAX),
            ah_attr: ud.ah_attr,
            qp_num: ud.qp_num,
            qkey: ud.qkey,
        };
    }
}

/// The user part of a REQ's private data: what follows the rdma_cm header.
fn user_part(mut d: Vec<u8>, full: usize) -> Vec<u8> {
    d.resize(full - CMA_HDR, 0);
    d
}

/// The C struct of a live id.
fn raw_of(id: &IdShared) -> *mut CmId {
    id.raw.load(Ordering::Acquire) as *mut CmId
}

/// `rdma_get_cm_event`: waits for the next event of `channel` (unless its descriptor is
/// non-blocking: EAGAIN) and hands it out; `rdma_ack_cm_event` frees it.
///
/// # Safety
/// `channel` is a live channel of ours; `event` is NULL or valid for a write.
pub unsafe extern "C" fn rdma_get_cm_event(
    channel: *mut ffi::rdma_event_channel,
    event: *mut *mut ffi::rdma_cm_event,
) -> c_int {
    boundary(MinusOne, move || {
        let c = match cm() {
            Ok(c) => c,
            Err(e) => return fail(e),
        };
        if event.is_null() {
            return fail(libc::EINVAL);
        }
        // SAFETY: NULL or the caller's live channel.
        let ch: &EventChannel = unsafe { try_ref_from_ptr!(channel, fail(libc::EINVAL)) };
        loop {
            let q = match ch.shared.pop() {
                Ok(q) => q,
                Err(e) => return fail(e.raw_os_error().unwrap_or(libc::EIO)),
            };
            let Some(owner) = c.id(q.id.id) else {
                continue;
            };
            let Some(ev) = process(c, channel, owner, q.event) else {
                continue;
            };
            let p = Box::into_raw(ev);
            // SAFETY: the caller's writable pointer; `p` is the event just leaked.
            unsafe { event.write(std::ptr::addr_of_mut!((*p).raw)) };
            return 0;
        }
    })
}

/// Turns a queued event of `owner` into the program's event, or None when librdmacm
/// swallows it (after a connect error).
fn process(
    c: &crate::rdmacm::core::manager::Cm,
    channel: *mut ffi::rdma_event_channel,
    owner: Arc<IdShared>,
    kev: KEvent,
) -> Option<Box<CmEvent>> {
    let idp = raw_of(&owner);
    let mut ev = Box::new(CmEvent {
        raw: ffi::rdma_cm_event {
            id: idp.cast(),
            ..ffi::rdma_cm_event::default()
        },
        private_data: [0; MAX_PRIVATE_DATA],
        owner: Arc::clone(&owner),
        mc: None,
    });
    // SAFETY: the owner's C struct lives until rdma_destroy_id, which first takes the
    // owner's queued events away; this thread is the only one processing this event.
    let cid = unsafe { &mut *idp };
    let mut g = lock(&owner.inner);
    match kev {
        KEvent::AddrResolved => {
            ev.raw.event = ffi::RDMA_CM_EVENT_ADDR_RESOLVED;
            if publish(cid, &mut g).is_err() {
                ev.raw.event = ffi::RDMA_CM_EVENT_ADDR_ERROR;
                ev.raw.status = -1;
            }
        }
        KEvent::AddrError(status) => {
            ev.raw.event = ffi::RDMA_CM_EVENT_ADDR_ERROR;
            ev.raw.status = status;
        }
        KEvent::RouteResolved => {
            ev.raw.event = ffi::RDMA_CM_EVENT_ROUTE_RESOLVED;
            if publish(cid, &mut g).is_err() {
                ev.raw.event = ffi::RDMA_CM_EVENT_ROUTE_ERROR;
                ev.raw.status = -1;
            }
        }
        KEvent::ConnectRequest { conn, data } => {
            g.pending_requests = g.pending_requests.saturating_sub(1);
            let seen = ConnData {
                private_data: user_part(data.private_data.clone(), REQ_PRIVATE_DATA),
                ..data
            };
            ev.raw.event = ffi::RDMA_CM_EVENT_CONNECT_REQUEST;
            ev.set_conn(&seen);
            if !take_request(c, cid, channel, &mut ev, conn, g.sync) {
                return None;
            }
        }
        KEvent::SidrRequest { conn, private_data } => {
            g.pending_requests = g.pending_requests.saturating_sub(1);
            ev.raw.event = ffi::RDMA_CM_EVENT_CONNECT_REQUEST;
            let none = UdData {
                ah_attr: ffi::ibv_ah_attr::default(),
                qp_num: 0,
                qkey: 0,
            };
            ev.set_ud(&none, &user_part(private_data, SIDR_REQ_PRIVATE_DATA));
            if !take_request(c, cid, channel, &mut ev, conn, g.sync) {
                return None;
            }
        }
        KEvent::ConnectResponse(data) => {
            ev.set_conn(&data);
            if cid.raw.qp.is_null() {
                ev.raw.event = ffi::RDMA_CM_EVENT_CONNECT_RESPONSE;
            } else {
                // ucma_process_conn_resp: RTR, RTS, then the RTU.
                let qp = cid.raw.qp;
                // SAFETY: the id's live QP.
                let done = unsafe {
                    modify_rtr(qp, &g, ffi::RDMA_MAX_RESP_RES as u8)
                        .and_then(|()| modify_rts(qp, &g, ffi::RDMA_MAX_INIT_DEPTH as u8))
                }
                .and_then(|()| establish(c, &owner.endpoint, &mut g));
                if done.is_ok() {
                    ev.raw.event = ffi::RDMA_CM_EVENT_ESTABLISHED;
                } else {
                    // SAFETY: as above.
                    unsafe { modify_err(qp) };
                    ev.raw.event = ffi::RDMA_CM_EVENT_CONNECT_ERROR;
                    ev.raw.status = -1;
                    g.connect_error = true;
                }
            }
        }
        KEvent::Established => {
            ev.raw.event = ffi::RDMA_CM_EVENT_ESTABLISHED;
        }
        KEvent::UdEstablished { ud, private_data } => {
            ev.raw.event = ffi::RDMA_CM_EVENT_ESTABLISHED;
            ev.set_ud(&ud, &private_data);
        }
        KEvent::Rejected {
            reason,
            private_data,
        } => {
            if g.connect_error {
                return None;
            }
            ev.raw.event = ffi::RDMA_CM_EVENT_REJECTED;
            ev.raw.status = reason;
            ev.set_conn(&ConnData {
                private_data,
                ..ConnData::default()
            });
            // SAFETY: the id's QP (or NULL).
            unsafe { modify_err(cid.raw.qp) };
        }
        KEvent::Unreachable(status) => {
            ev.raw.event = ffi::RDMA_CM_EVENT_UNREACHABLE;
            ev.raw.status = status;
        }
        KEvent::Disconnected(status) => {
            if g.connect_error {
                return None;
            }
            ev.raw.event = ffi::RDMA_CM_EVENT_DISCONNECTED;
            ev.raw.status = status;
        }
        KEvent::MulticastJoin { mc, ud } => {
            let m = g.multicast.iter_mut().find(|m| m.handle == mc)?;
            m.reported += 1;
            ev.mc = Some(mc);
            ev.raw.event = ffi::RDMA_CM_EVENT_MULTICAST_JOIN;
            ev.set_ud(&ud, &[]);
            // The join's context, where librdmacm puts it.
            ev.raw.param.ud.private_data = m.context as *const std::ffi::c_void;
            let send_only = m.join_flags == ffi::RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER;
            if !cid.raw.qp.is_null() && !send_only {
                let gid = ffi::ibv_gid { raw: m.mgid };
                // SAFETY: the id's live QP and a local GID.
                if unsafe { crate::verbs::qp::ibv_attach_mcast(cid.raw.qp, &gid, 0) } != 0 {
                    ev.raw.event = ffi::RDMA_CM_EVENT_MULTICAST_ERROR;
                    ev.raw.status = -1;
                }
            }
        }
    }
    g.reported += 1;
    Some(ev)
}

/// The kernel's part of accepting a REP on the active side (`cma_rep_recv`): the RTU.
///
/// # Errors
/// EINVAL unless a REP waits for it.
pub fn establish(
    c: &crate::rdmacm::core::manager::Cm,
    ep: &crate::rdmacm::core::messages::Endpoint,
    g: &mut crate::rdmacm::core::id_state::IdInner,
) -> Result<(), c_int> {
    match (g.state, g.conn, g.peer) {
        (State::Connect, Conn::RepRcvd, Some(peer)) => {
            c.send(*ep, Address::Endpoint(peer.ep), Message::Rtu);
            g.conn = Conn::Established;
            Ok(())
        }
        _ => Err(libc::EINVAL),
    }
}

/// Hands the passive id of a request to the program (librdmacm's `ucma_process_conn_req`):
/// the listener's channel and context, its device and addresses. False when that fails
/// (the id is destroyed and the event dropped, as librdmacm does).
fn take_request(
    c: &crate::rdmacm::core::manager::Cm,
    listener: &mut CmId,
    channel: *mut ffi::rdma_event_channel,
    ev: &mut CmEvent,
    conn: usize,
    sync: bool,
) -> bool {
    let connp = conn as *mut CmId;
    // SAFETY: the id of a request is ours until its event is handed out, which is now.
    let new = unsafe { &mut *connp };
    new.raw.context = listener.raw.context;
    new.raw.channel = channel;
    let ok = {
        let shared = Arc::clone(&new.shared);
        let mut n = lock(&shared.inner);
        let published = publish(new, &mut n).is_ok();
        published && (!sync || crate::rdmacm::api::event_channels::make_sync(new, &mut n).is_ok())
    };
    if !ok {
        destroy_kernel(c, &new.shared);
        // SAFETY: never handed out; freed once.
        drop(unsafe { Box::from_raw(connp) });
        return false;
    }
    ev.raw.id = connp.cast();
    ev.raw.listen_id = std::ptr::addr_of_mut!(listener.raw);
    true
}

/// `rdma_ack_cm_event`: frees an event and counts it acknowledged (what
/// `rdma_destroy_id` and `rdma_leave_multicast` wait for).
///
/// # Safety
/// `event` is NULL or an unacknowledged event from `rdma_get_cm_event`.
pub unsafe extern "C" fn rdma_ack_cm_event(event: *mut ffi::rdma_cm_event) -> c_int {
    boundary(MinusOne, move || {
        if event.is_null() {
            return fail(libc::EINVAL);
        }
        // SAFETY: every event we hand out is the first field of a leaked CmEvent.
        let ev = unsafe { Box::from_raw(event.cast::<CmEvent>()) };
        let mut g = lock(&ev.owner.inner);
        g.acked += 1;
        if let Some(mc) = ev.mc {
            if let Some(m) = g.multicast.iter_mut().find(|m| m.handle == mc) {
                m.acked += 1;
            }
        }
        drop(g);
        ev.owner.acked.notify_all();
        0
    })
}

/// `rdma_event_str`.
pub extern "C" fn rdma_event_str(event: ffi::rdma_cm_event_type) -> *const c_char {
    boundary(Null, move || {
        let s: &'static std::ffi::CStr = match event {
            ffi::RDMA_CM_EVENT_ADDR_RESOLVED => c"RDMA_CM_EVENT_ADDR_RESOLVED",
            ffi::RDMA_CM_EVENT_ADDR_ERROR => c"RDMA_CM_EVENT_ADDR_ERROR",
            ffi::RDMA_CM_EVENT_ROUTE_RESOLVED => c"RDMA_CM_EVENT_ROUTE_RESOLVED",
            ffi::RDMA_CM_EVENT_ROUTE_ERROR => c"RDMA_CM_EVENT_ROUTE_ERROR",
            ffi::RDMA_CM_EVENT_CONNECT_REQUEST => c"RDMA_CM_EVENT_CONNECT_REQUEST",
            ffi::RDMA_CM_EVENT_CONNECT_RESPONSE => c"RDMA_CM_EVENT_CONNECT_RESPONSE",
            ffi::RDMA_CM_EVENT_CONNECT_ERROR => c"RDMA_CM_EVENT_CONNECT_ERROR",
            ffi::RDMA_CM_EVENT_UNREACHABLE => c"RDMA_CM_EVENT_UNREACHABLE",
            ffi::RDMA_CM_EVENT_REJECTED => c"RDMA_CM_EVENT_REJECTED",
            ffi::RDMA_CM_EVENT_ESTABLISHED => c"RDMA_CM_EVENT_ESTABLISHED",
            ffi::RDMA_CM_EVENT_DISCONNECTED => c"RDMA_CM_EVENT_DISCONNECTED",
            ffi::RDMA_CM_EVENT_DEVICE_REMOVAL => c"RDMA_CM_EVENT_DEVICE_REMOVAL",
            ffi::RDMA_CM_EVENT_MULTICAST_JOIN => c"RDMA_CM_EVENT_MULTICAST_JOIN",
            ffi::RDMA_CM_EVENT_MULTICAST_ERROR => c"RDMA_CM_EVENT_MULTICAST_ERROR",
            ffi::RDMA_CM_EVENT_ADDR_CHANGE => c"RDMA_CM_EVENT_ADDR_CHANGE",
            ffi::RDMA_CM_EVENT_TIMEWAIT_EXIT => c"RDMA_CM_EVENT_TIMEWAIT_EXIT",
            _ => c"UNKNOWN EVENT",
        };
        s.as_ptr()
    })
}

/// librdmacm's `ucma_complete`: an id made without a channel waits for the event of the
/// call it just made, keeps it in `id->event`, and fails as the event says.
///
/// # Safety
/// `id` is a live id of ours.
pub unsafe fn complete(id: *mut ffi::rdma_cm_id) -> c_int {
    // SAFETY: the caller's live id.
    let cid = unsafe { cm_id(id) };
    if !lock(&cid.shared.inner).sync {
        return 0;
    }
    if !cid.raw.event.is_null() {
        // SAFETY: the id's own unacknowledged event.
        unsafe { rdma_ack_cm_event(cid.raw.event) };
        cid.raw.event = std::ptr::null_mut();
    }
    let mut ev = std::ptr::null_mut();
    // SAFETY: the id's own channel and a local out-pointer.
    if unsafe { rdma_get_cm_event(cid.raw.channel, &mut ev) } != 0 {
        return -1;
    }
    cid.raw.event = ev;
    // SAFETY: the event just received.
    let (kind, status) = unsafe { ((*ev).event, (*ev).status) };
    match status {
        0 => 0,
        _ if kind == ffi::RDMA_CM_EVENT_REJECTED => fail(libc::ECONNREFUSED),
        s if s < 0 => fail(-s),
        s => fail(s),
    }
}
