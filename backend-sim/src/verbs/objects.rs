//! The verbs-api traits over the simulated NICs. Every object is a handle (the shared
//! world and an id); dropping it removes the object from the world. A QP keeps its PD,
//! CQs and SRQ alive, an MR its PD, a CQ its channel, as the traits promise.

use super::memory::MrEntry;
use super::personality::Personality;
use super::rc::RcState;
use super::world::{
    completion, Arm, Channel, Cq, Ctx, FlowRule, Qp, RecvWqe, SgeList, Srq, UdDest, World, WrCopy,
};
use crate::ids::HostId;
use std::alloc::Layout;
use std::collections::VecDeque;
use std::net::Ipv6Addr;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use verbs_api::{
    AccessFlags, AddressHandle, AhAttr, AsyncEvent, Completion, CompletionChannel, CompletionQueue,
    Context, DeviceAttr, DeviceInfo, Error, ErrorKind, Flow, FlowAttr, FlowRuleType, FlowSpec, Gid,
    LinkLayer, MemoryRegion, NodeType, PortAttr, PortState, ProtectionDomain, QpAttr, QpAttrMask,
    QpCap, QpInitAttr, QpState, QpType, QueuePair, RecvWr, Result, SendOpcode, SendWr,
    SharedReceiveQueue, SrqAttr, SrqAttrMask, SrqInitAttr, TransportType, Verbs, WcOpcode,
    WcStatus, WrDetail,
};

pub(crate) type Shared = Arc<Mutex<World>>;

pub(crate) fn lock(w: &Shared) -> MutexGuard<'_, World> {
    w.lock().unwrap_or_else(PoisonError::into_inner)
}

fn err(kind: ErrorKind, op: &'static str, msg: impl Into<String>) -> Error {
    let errno = match kind {
        ErrorKind::InvalidArgument | ErrorKind::InvalidState => 22,
        ErrorKind::QueueFull | ErrorKind::OutOfResources => 12,
        ErrorKind::Unsupported => 95,
        ErrorKind::NotFound => 2,
        ErrorKind::LimitExceeded => 22,
        ErrorKind::PermissionDenied => 1,
        ErrorKind::NoDevice => 19,
        _ => 5,
    };
    Error::new(kind, op, msg).with_errno(errno)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Ctx,
    Pd,
    Cq,
    Channel,
    Srq,
    Qp,
    Flow,
}

/// Ownership of one world object: removes it on drop.
#[derive(Debug)]
struct Res {
    world: Shared,
    id: u32,
    kind: Kind,
}

impl Drop for Res {
    fn drop(&mut self) {
        let mut w = lock(&self.world);
        match self.kind {
            Kind::Ctx => {
                w.ctxs.remove(&self.id);
            }
            Kind::Pd => {
                w.pds.remove(&self.id);
            }
            Kind::Cq => {
                w.cqs.remove(&self.id);
            }
            Kind::Channel => {
                w.channels.remove(&self.id);
            }
            Kind::Srq => {
                w.srqs.remove(&self.id);
            }
            Kind::Qp => w.destroy_qp(self.id),
            Kind::Flow => w.remove_flow(self.id),
        }
    }
}

/// The verbs provider of one simulated host: lists and opens that host's devices.
#[derive(Debug, Clone)]
pub struct SimVerbs {
    pub(crate) world: Shared,
    pub(crate) host: HostId,
}

fn device_info(w: &World, dev: usize) -> DeviceInfo {
    let d = &w.devices[dev];
    DeviceInfo {
        name: d.name.clone(),
        guid: d.guid,
        node_type: NodeType::Ca,
        transport_type: TransportType::Ib,
    }
}

impl Verbs for SimVerbs {
    type Context = SimContext;

    fn devices(&self) -> Result<Vec<DeviceInfo>> {
        let w = lock(&self.world);
        Ok((0..w.devices.len())
            .filter(|&i| w.devices[i].host == self.host)
            .map(|i| device_info(&w, i))
            .collect())
    }

    fn open(&self, name: &str) -> Result<SimContext> {
        let mut w = lock(&self.world);
        let Some(dev) = (0..w.devices.len())
            .find(|&i| w.devices[i].host == self.host && w.devices[i].name == name)
        else {
            return Err(err(
                ErrorKind::NoDevice,
                "ibv_open_device",
                format!("no device {name} on this host"),
            ));
        };
        let id = w.handle();
        w.ctxs.insert(
            id,
            Ctx {
                events: VecDeque::new(),
            },
        );
        drop(w);
        Ok(SimContext {
            res: Arc::new(Res {
                world: self.world.clone(),
                id,
                kind: Kind::Ctx,
            }),
            dev,
        })
    }
}

/// An open simulated device.
#[derive(Debug)]
pub struct SimContext {
    res: Arc<Res>,
    dev: usize,
}

impl SimContext {
    fn world(&self) -> MutexGuard<'_, World> {
        lock(&self.res.world)
    }
    fn new_res(&self, id: u32, kind: Kind) -> Arc<Res> {
        Arc::new(Res {
            world: self.res.world.clone(),
            id,
            kind,
        })
    }
    fn personality(&self) -> Personality {
        self.world().devices[self.dev].personality
    }
}

/// A protection domain.
#[derive(Debug)]
pub struct SimPd {
    res: Arc<Res>,
    _ctx: Arc<Res>,
}

impl ProtectionDomain for SimPd {
    fn handle(&self) -> u32 {
        self.res.id
    }
}

#[derive(Debug)]
struct OwnedMem {
    ptr: NonNull<u8>,
    layout: Layout,
}

impl Drop for OwnedMem {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from `alloc_zeroed` with this very layout and is freed once.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) };
    }
}

/// A registered memory region. Dropping it deregisters the key before any owned memory
/// is freed, so the simulated NIC never touches freed memory.
#[derive(Debug)]
pub struct SimMr {
    world: Shared,
    ptr: *mut u8,
    len: usize,
    key: u32,
    access: AccessFlags,
    _owned: Option<OwnedMem>,
    _pd: Arc<Res>,
}

// SAFETY: the region is plain memory (owned, or vouched for by `reg_mr`'s caller); the
// handle carries no thread-affine state and every world access goes through the mutex.
unsafe impl Send for SimMr {}
// SAFETY: as above; `&SimMr` only exposes the pointer, whose use the MemoryRegion
// contract governs.
unsafe impl Sync for SimMr {}

impl Drop for SimMr {
    fn drop(&mut self) {
        lock(&self.world).mrs.deregister(self.key);
    }
}

// SAFETY: `ptr..ptr+len` is the owned allocation (freed only after deregistration in
// Drop) or the caller's memory that `reg_mr`'s contract keeps valid while registered; the
// simulator writes it only for work requests and remote accesses naming its key.
unsafe impl MemoryRegion for SimMr {
    fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }
    fn len(&self) -> usize {
        self.len
    }
    fn lkey(&self) -> u32 {
        self.key
    }
    fn rkey(&self) -> u32 {
        self.key
    }
    fn access(&self) -> AccessFlags {
        self.access
    }
}

/// A completion channel.
#[derive(Debug)]
pub struct SimChannel {
    res: Arc<Res>,
}

impl CompletionChannel for SimChannel {
    /// Waits in virtual time: runs the simulation until an event arrives on this channel,
    /// the timeout passes, or nothing is left that could ever produce one.
    fn get_cq_event(&self, timeout: Option<Duration>) -> Result<Option<u32>> {
        let mut w = lock(&self.res.world);
        let now = w.fabric.now();
        let deadline = timeout.map_or(u64::MAX, |d| {
            now.saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        });
        loop {
            if let Some(h) = w
                .channels
                .get_mut(&self.res.id)
                .and_then(|c| c.events.pop_front())
            {
                return Ok(Some(h));
            }
            if !w.advance(deadline) {
                return Ok(None);
            }
        }
    }
}

/// A completion queue.
#[derive(Debug)]
pub struct SimCq {
    res: Arc<Res>,
    cqe: u32,
    has_channel: bool,
    _channel: Option<Arc<Res>>,
}

impl CompletionQueue for SimCq {
    fn handle(&self) -> u32 {
        self.res.id
    }

    fn cqe(&self) -> u32 {
        self.cqe
    }

    /// Moves completions out; when none is there, lets the simulation take its next event
    /// first (so a busy-poll loop makes progress in virtual time) and looks again.
    fn poll(&self, wc: &mut [Completion]) -> Result<usize> {
        let mut w = lock(&self.res.world);
        let id = self.res.id;
        let n = drain_cq(&mut w, id, wc)?;
        if n > 0 || wc.is_empty() {
            return Ok(n);
        }
        w.advance(u64::MAX);
        drain_cq(&mut w, id, wc)
    }

    fn req_notify(&self, solicited_only: bool) -> Result<()> {
        if !self.has_channel {
            return Err(err(
                ErrorKind::InvalidState,
                "ibv_req_notify_cq",
                "the CQ has no completion channel",
            ));
        }
        let mut w = lock(&self.res.world);
        if let Some(cq) = w.cqs.get_mut(&self.res.id) {
            cq.arm = if solicited_only {
                Arm::Solicited
            } else {
                Arm::Next
            };
        }
        Ok(())
    }

    fn ack_events(&self, n: u32) {
        let mut w = lock(&self.res.world);
        if let Some(cq) = w.cqs.get_mut(&self.res.id) {
            cq.unacked = cq.unacked.saturating_sub(n);
        }
    }
}

fn drain_cq(w: &mut World, id: u32, wc: &mut [Completion]) -> Result<usize> {
    let Some(cq) = w.cqs.get_mut(&id) else {
        return Err(err(ErrorKind::InvalidState, "ibv_poll_cq", "CQ destroyed"));
    };
    if cq.broken {
        return Err(err(
            ErrorKind::Io,
            "ibv_poll_cq",
            "CQ overrun: the CQ is in error",
        ));
    }
    let n = wc.len().min(cq.entries.len());
    for (slot, c) in wc.iter_mut().zip(cq.entries.drain(..n)) {
        *slot = c;
    }
    Ok(n)
}

/// A shared receive queue.
#[derive(Debug)]
pub struct SimSrq {
    res: Arc<Res>,
    _pd: Arc<Res>,
}

impl SharedReceiveQueue for SimSrq {
    fn handle(&self) -> u32 {
        self.res.id
    }

    unsafe fn post_recv<'a>(&self, wrs: &[RecvWr<'a>]) -> Result<()> {
        const OP: &str = "ibv_post_srq_recv";
        let mut w = lock(&self.res.world);
        let Some(srq) = w.srqs.get_mut(&self.res.id) else {
            return Err(err(ErrorKind::InvalidState, OP, "SRQ destroyed"));
        };
        for (i, wr) in wrs.iter().enumerate() {
            if wr.sg_list.len() > srq.attr.max_sge as usize {
                return Err(err(ErrorKind::InvalidArgument, OP, "too many SGEs").with_bad_wr(i));
            }
            if srq.queue.len() >= srq.attr.max_wr as usize {
                return Err(err(ErrorKind::QueueFull, OP, "the SRQ is full").with_bad_wr(i));
            }
            srq.queue.push_back(RecvWqe {
                wr_id: wr.wr_id,
                sges: SgeList::new(wr.sg_list),
            });
        }
        Ok(())
    }

    fn modify(&self, attr: &SrqAttr, mask: SrqAttrMask) -> Result<()> {
        const OP: &str = "ibv_modify_srq";
        let mut w = lock(&self.res.world);
        let Some(srq) = w.srqs.get_mut(&self.res.id) else {
            return Err(err(ErrorKind::InvalidState, OP, "SRQ destroyed"));
        };
        let max_wr = if mask.contains(SrqAttrMask::MAX_WR) {
            attr.max_wr.max(srq.attr.max_wr)
        } else {
            srq.attr.max_wr
        };
        if mask.contains(SrqAttrMask::LIMIT) && attr.srq_limit > max_wr {
            return Err(err(ErrorKind::InvalidArgument, OP, "limit above max_wr"));
        }
        srq.attr.max_wr = max_wr;
        if mask.contains(SrqAttrMask::LIMIT) {
            srq.attr.srq_limit = attr.srq_limit;
        }
        Ok(())
    }

    fn query(&self) -> Result<SrqAttr> {
        let w = lock(&self.res.world);
        w.srqs
            .get(&self.res.id)
            .map(|s| s.attr)
            .ok_or_else(|| err(ErrorKind::InvalidState, "ibv_query_srq", "SRQ destroyed"))
    }
}

/// An address handle.
#[derive(Debug, Clone)]
pub struct SimAh {
    attr: AhAttr,
}

impl AddressHandle for SimAh {
    fn attr(&self) -> AhAttr {
        self.attr
    }
}

/// A flow steering rule; dropping it removes the rule.
#[derive(Debug)]
pub struct SimFlow {
    _res: Arc<Res>,
    attr: FlowAttr,
}

impl Flow for SimFlow {
    fn attr(&self) -> FlowAttr {
        self.attr.clone()
    }
}

/// A queue pair.
#[derive(Debug)]
pub struct SimQp {
    res: Arc<Res>,
    qpn: u32,
    qp_type: QpType,
    _keep: Vec<Arc<Res>>,
}

impl SimQp {
    fn world(&self) -> MutexGuard<'_, World> {
        lock(&self.res.world)
    }
}

impl QueuePair for SimQp {
    type Ah = SimAh;

    fn qp_num(&self) -> u32 {
        self.qpn
    }

    fn qp_type(&self) -> QpType {
        self.qp_type
    }

    fn state(&self) -> Result<QpState> {
        Ok(self
            .world()
            .qps
            .get(&self.qpn)
            .map_or(QpState::Unknown, |q| q.state))
    }

    fn apply_modify(&self, attr: &QpAttr, mask: QpAttrMask) -> Result<()> {
        self.world().modify(self.qpn, attr, mask)
    }

    fn query(&self, _mask: QpAttrMask) -> Result<(QpAttr, QpCap)> {
        let w = self.world();
        let qp = w
            .qps
            .get(&self.qpn)
            .ok_or_else(|| err(ErrorKind::InvalidState, "ibv_query_qp", "QP destroyed"))?;
        let mut a = qp.attr;
        a.qp_state = qp.state;
        a.cur_qp_state = qp.state;
        a.cap = qp.cap;
        Ok((a, qp.cap))
    }

    unsafe fn post_send<'a>(&self, wrs: &[SendWr<'a, SimAh>]) -> Result<()> {
        const OP: &str = "ibv_post_send";
        let mut w = self.world();
        for (i, wr) in wrs.iter().enumerate() {
            let Some(qp) = w.qps.get(&self.qpn) else {
                return Err(err(ErrorKind::InvalidState, OP, "QP destroyed").with_bad_wr(i));
            };
            let state = qp.state;
            // RTS sends; SQD queues (connected QPs) until the QP is back in RTS; ERR and SQE
            // flush.
            let connected = matches!(self.qp_type, QpType::Rc | QpType::Uc);
            let queues = state == QpState::Sqd && connected;
            if !matches!(state, QpState::Rts | QpState::Err | QpState::Sqe) && !queues {
                return Err(err(
                    ErrorKind::InvalidState,
                    OP,
                    format!("cannot post sends in {state}"),
                )
                .with_bad_wr(i));
            }
            if wr.sg_list.len() > qp.cap.max_send_sge as usize {
                return Err(err(ErrorKind::InvalidArgument, OP, "too many SGEs").with_bad_wr(i));
            }
            let inline = wr.send_flags.contains(verbs_api::SendFlags::INLINE);
            if inline && wr.total_len() > u64::from(qp.cap.max_inline_data) {
                return Err(err(
                    ErrorKind::InvalidArgument,
                    OP,
                    "inline data above max_inline_data",
                )
                .with_bad_wr(i));
            }
            let ok_op = match self.qp_type {
                QpType::RawPacket => wr.opcode == SendOpcode::Send,
                QpType::Ud => matches!(wr.opcode, SendOpcode::Send | SendOpcode::SendWithImm),
                QpType::Uc => matches!(
                    wr.opcode,
                    SendOpcode::Send
                        | SendOpcode::SendWithImm
                        | SendOpcode::RdmaWrite
                        | SendOpcode::RdmaWriteWithImm
                ),
                _ => true,
            };
            if !ok_op {
                return Err(err(
                    ErrorKind::InvalidArgument,
                    OP,
                    format!("{} QPs do not take {}", self.qp_type, wr.opcode),
                )
                .with_bad_wr(i));
            }
            let mut copy = WrCopy {
                wr_id: wr.wr_id,
                opcode: wr.opcode,
                flags: wr.send_flags,
                imm: wr.imm_data,
                sges: SgeList::new(wr.sg_list),
                rdma: None,
                atomic: None,
                ud: None,
                inline: None,
            };
            match wr.detail {
                WrDetail::Rdma { remote_addr, rkey } => copy.rdma = Some((remote_addr, rkey)),
                WrDetail::Atomic {
                    remote_addr,
                    compare_add,
                    swap,
                    rkey,
                } => copy.atomic = Some((remote_addr, rkey, compare_add, swap)),
                WrDetail::Ud {
                    ah,
                    remote_qpn,
                    remote_qkey,
                } => {
                    copy.ud = Some(UdDest {
                        ah: ah.attr,
                        remote_qpn,
                        remote_qkey,
                    })
                }
                WrDetail::None => {}
            }
            if self.qp_type == QpType::Ud && copy.ud.is_none() {
                return Err(err(
                    ErrorKind::InvalidArgument,
                    OP,
                    "a UD send needs an address handle",
                )
                .with_bad_wr(i));
            }
            if (wr.opcode.is_rdma() && copy.rdma.is_none())
                || (wr.opcode.is_atomic() && copy.atomic.is_none())
            {
                return Err(err(
                    ErrorKind::InvalidArgument,
                    OP,
                    "RDMA and atomic requests need their remote address",
                )
                .with_bad_wr(i));
            }
            let (send_cq, sig_all) = (qp.send_cq, qp.sq_sig_all);
            let now = w.fabric.now();
            w.fabric.trace_event(
                super::world::vtag::POST_SEND,
                &[
                    now,
                    u64::from(self.qpn),
                    wr.wr_id,
                    u64::from(wr.opcode.as_raw()),
                ],
            );
            let wc_op = wr.opcode.completion_opcode();
            if state != QpState::Rts && !queues {
                w.complete(
                    send_cq,
                    completion(wr.wr_id, WcStatus::WrFlushErr, wc_op, self.qpn),
                    false,
                );
                continue;
            }
            match self.qp_type {
                QpType::RawPacket | QpType::Ud => {
                    let posted = w.send_now(self.qpn, &copy);
                    let ok = posted.status.is_success();
                    if !ok || sig_all || wr.send_flags.contains(verbs_api::SendFlags::SIGNALED) {
                        let mut c = completion(wr.wr_id, posted.status, wc_op, self.qpn);
                        c.byte_len = posted.byte_len;
                        w.complete(send_cq, c, false);
                    }
                    if !ok {
                        if let Some(q) = w.qps.get_mut(&self.qpn) {
                            q.state = QpState::Sqe;
                        }
                    }
                }
                _ => {
                    if inline {
                        let mut data = Vec::new();
                        // SAFETY: inline SGEs point at memory the caller vouched for in
                        // post_send's contract; it is copied now, as the NIC copies inline
                        // data into the WQE at post time.
                        unsafe { super::memory::gather(wr.sg_list, &mut data) };
                        copy.inline = Some(data);
                    }
                    w.rc_post(self.qpn, copy).map_err(|e| e.with_bad_wr(i))?;
                }
            }
        }
        Ok(())
    }

    unsafe fn post_recv<'a>(&self, wrs: &[RecvWr<'a>]) -> Result<()> {
        const OP: &str = "ibv_post_recv";
        let mut w = self.world();
        for (i, wr) in wrs.iter().enumerate() {
            let now = w.fabric.now();
            let Some(qp) = w.qps.get_mut(&self.qpn) else {
                return Err(err(ErrorKind::InvalidState, OP, "QP destroyed").with_bad_wr(i));
            };
            if qp.srq.is_some() {
                return Err(err(ErrorKind::InvalidState, OP, "the QP uses an SRQ").with_bad_wr(i));
            }
            if qp.state == QpState::Reset {
                return Err(
                    err(ErrorKind::InvalidState, OP, "cannot post receives in RESET")
                        .with_bad_wr(i),
                );
            }
            if wr.sg_list.len() > qp.cap.max_recv_sge as usize {
                return Err(err(ErrorKind::InvalidArgument, OP, "too many SGEs").with_bad_wr(i));
            }
            if qp.rq.len() >= qp.cap.max_recv_wr as usize {
                return Err(
                    err(ErrorKind::QueueFull, OP, "the receive queue is full").with_bad_wr(i)
                );
            }
            if qp.state == QpState::Err {
                let cq = qp.recv_cq;
                w.complete(
                    cq,
                    completion(wr.wr_id, WcStatus::WrFlushErr, WcOpcode::Recv, self.qpn),
                    false,
                );
                continue;
            }
            qp.rq.push_back(RecvWqe {
                wr_id: wr.wr_id,
                sges: SgeList::new(wr.sg_list),
            });
            w.fabric.trace_event(
                super::world::vtag::POST_RECV,
                &[now, u64::from(self.qpn), wr.wr_id],
            );
        }
        Ok(())
    }

    fn attach_mcast(&self, gid: &Gid, _lid: u16) -> Result<()> {
        const OP: &str = "ibv_attach_mcast";
        let Some(ip) = gid.to_ipv4().filter(|i| i.is_multicast()) else {
            return Err(err(
                ErrorKind::InvalidArgument,
                OP,
                format!("{gid} is not an IPv4 multicast GID"),
            ));
        };
        if self.qp_type != QpType::Ud {
            return Err(err(
                ErrorKind::InvalidArgument,
                OP,
                "only UD QPs attach to multicast groups",
            ));
        }
        self.world().attach(self.qpn, ip);
        Ok(())
    }

    fn detach_mcast(&self, gid: &Gid, _lid: u16) -> Result<()> {
        let ip = gid.to_ipv4().unwrap_or(std::net::Ipv4Addr::UNSPECIFIED);
        if self.world().detach(self.qpn, ip) {
            Ok(())
        } else {
            Err(err(
                ErrorKind::NotFound,
                "ibv_detach_mcast",
                format!("QP not attached to {gid}"),
            ))
        }
    }
}

fn alloc_owned(len: usize) -> Result<OwnedMem> {
    let layout = Layout::from_size_align(len, 4096)
        .map_err(|e| err(ErrorKind::InvalidArgument, "ibv_reg_mr", e.to_string()))?;
    // SAFETY: the layout has a non-zero size (len > 0 is checked by the caller).
    let p = unsafe { std::alloc::alloc_zeroed(layout) };
    let ptr = NonNull::new(p)
        .ok_or_else(|| err(ErrorKind::OutOfResources, "ibv_reg_mr", "out of memory"))?;
    Ok(OwnedMem { ptr, layout })
}

impl SimContext {
    fn register(
        &self,
        pd: &SimPd,
        ptr: *mut u8,
        len: usize,
        access: AccessFlags,
        owned: Option<OwnedMem>,
    ) -> Result<SimMr> {
        let key = self.world().mrs.register(MrEntry {
            pd: pd.res.id,
            addr: ptr as u64,
            len: len as u64,
            access,
        });
        Ok(SimMr {
            world: self.res.world.clone(),
            ptr,
            len,
            key,
            access,
            _owned: owned,
            _pd: pd.res.clone(),
        })
    }
}

impl Context for SimContext {
    type Pd = SimPd;
    type Mr = SimMr;
    type CompChannel = SimChannel;
    type Cq = SimCq;
    type Srq = SimSrq;
    type Qp = SimQp;
    type Ah = SimAh;
    type Flow = SimFlow;

    fn device(&self) -> DeviceInfo {
        device_info(&self.world(), self.dev)
    }

    fn query_device(&self) -> Result<DeviceAttr> {
        let w = self.world();
        let d = &w.devices[self.dev];
        Ok(d.personality.device_attr(d.guid))
    }

    fn query_port(&self, port_num: u8) -> Result<PortAttr> {
        if port_num != 1 {
            return Err(err(
                ErrorKind::InvalidArgument,
                "ibv_query_port",
                format!("no port {port_num}"),
            ));
        }
        let p = self.personality();
        Ok(PortAttr {
            state: PortState::Active,
            max_mtu: verbs_api::Mtu::Mtu4096,
            active_mtu: p.active_mtu(),
            gid_tbl_len: 2,
            port_cap_flags: 0x0401_0000,
            max_msg_sz: 0x8000_0000,
            pkey_tbl_len: 1,
            active_width: 2,
            active_speed: 64,
            phys_state: 5,
            link_layer: LinkLayer::Ethernet,
            ..PortAttr::default()
        })
    }

    fn query_gid(&self, port_num: u8, index: u32) -> Result<Gid> {
        let w = self.world();
        let d = &w.devices[self.dev];
        match (port_num, index) {
            (1, 0) => {
                let m = d.mac.0;
                Ok(Gid(Ipv6Addr::new(
                    0xfe80,
                    0,
                    0,
                    0,
                    u16::from_be_bytes([m[0] ^ 2, m[1]]),
                    u16::from_be_bytes([m[2], 0xff]),
                    u16::from_be_bytes([0xfe, m[3]]),
                    u16::from_be_bytes([m[4], m[5]]),
                )
                .octets()))
            }
            (1, 1) => Ok(Gid::from_ipv4(d.ip)),
            _ => Err(err(
                ErrorKind::InvalidArgument,
                "ibv_query_gid",
                format!("no GID {index} on port {port_num}"),
            )),
        }
    }

    fn alloc_pd(&self) -> Result<SimPd> {
        let mut w = self.world();
        let id = w.handle();
        w.pds.insert(id, self.dev);
        drop(w);
        Ok(SimPd {
            res: self.new_res(id, Kind::Pd),
            _ctx: self.res.clone(),
        })
    }

    fn alloc_mr(&self, pd: &SimPd, len: usize, access: AccessFlags) -> Result<SimMr> {
        if len == 0 {
            return Err(err(
                ErrorKind::InvalidArgument,
                "ibv_reg_mr",
                "zero-length region",
            ));
        }
        access.validate("ibv_reg_mr")?;
        let owned = alloc_owned(len)?;
        let ptr = owned.ptr.as_ptr();
        self.register(pd, ptr, len, access, Some(owned))
    }

    unsafe fn reg_mr(
        &self,
        pd: &SimPd,
        addr: *mut u8,
        len: usize,
        access: AccessFlags,
    ) -> Result<SimMr> {
        if len == 0 || addr.is_null() {
            return Err(err(
                ErrorKind::InvalidArgument,
                "ibv_reg_mr",
                "null or zero-length region",
            ));
        }
        access.validate("ibv_reg_mr")?;
        self.register(pd, addr, len, access, None)
    }

    fn create_comp_channel(&self) -> Result<SimChannel> {
        let mut w = self.world();
        let id = w.handle();
        w.channels.insert(id, Channel::default());
        drop(w);
        Ok(SimChannel {
            res: self.new_res(id, Kind::Channel),
        })
    }

    fn create_cq(&self, cqe: u32, channel: Option<&SimChannel>, comp_vector: u32) -> Result<SimCq> {
        const OP: &str = "ibv_create_cq";
        let mut w = self.world();
        let d = &w.devices[self.dev];
        let attr = d.personality.device_attr(d.guid);
        if cqe == 0 {
            return Err(err(
                ErrorKind::InvalidArgument,
                OP,
                "cqe must be at least 1",
            ));
        }
        if cqe > attr.max_cqe {
            return Err(err(
                ErrorKind::LimitExceeded,
                OP,
                format!("cqe {cqe} above max_cqe {}", attr.max_cqe),
            ));
        }
        if comp_vector >= attr.num_comp_vectors {
            return Err(err(
                ErrorKind::InvalidArgument,
                OP,
                format!("no completion vector {comp_vector}"),
            ));
        }
        let personality = d.personality;
        let id = w.handle();
        let ctx = self.res.id;
        w.cqs.insert(
            id,
            Cq {
                ctx,
                personality,
                cqe,
                entries: VecDeque::new(),
                channel: channel.map(|c| c.res.id),
                arm: Arm::None,
                unacked: 0,
                broken: false,
            },
        );
        drop(w);
        Ok(SimCq {
            res: self.new_res(id, Kind::Cq),
            cqe,
            has_channel: channel.is_some(),
            _channel: channel.map(|c| c.res.clone()),
        })
    }

    fn create_srq(&self, pd: &SimPd, init: &SrqInitAttr) -> Result<SimSrq> {
        const OP: &str = "ibv_create_srq";
        let mut w = self.world();
        let d = &w.devices[self.dev];
        let attr = d.personality.device_attr(d.guid);
        if init.attr.max_wr == 0
            || init.attr.max_wr > attr.max_srq_wr
            || init.attr.max_sge > attr.max_srq_sge
        {
            return Err(err(
                ErrorKind::LimitExceeded,
                OP,
                "SRQ sizes beyond the device's",
            ));
        }
        let id = w.handle();
        let ctx = self.res.id;
        w.srqs.insert(
            id,
            Srq {
                ctx,
                pd: pd.res.id,
                attr: SrqAttr {
                    srq_limit: 0,
                    ..init.attr
                },
                queue: VecDeque::new(),
            },
        );
        drop(w);
        Ok(SimSrq {
            res: self.new_res(id, Kind::Srq),
            _pd: pd.res.clone(),
        })
    }

    fn create_qp<'a>(&self, pd: &SimPd, init: &QpInitAttr<'a, SimCq, SimSrq>) -> Result<SimQp> {
        const OP: &str = "ibv_create_qp";
        let mut w = self.world();
        let d = &w.devices[self.dev];
        let p = d.personality;
        let attr = p.device_attr(d.guid);
        if init.qp_type == QpType::RawPacket && !p.raw_packet() {
            return Err(err(
                ErrorKind::Unsupported,
                OP,
                format!("{} has no RAW_PACKET QPs", d.name),
            ));
        }
        let c = init.cap;
        if c.max_send_wr > attr.max_qp_wr
            || c.max_recv_wr > attr.max_qp_wr
            || c.max_send_sge > attr.max_sge
            || c.max_recv_sge > attr.max_sge
            || c.max_inline_data > attr.max_inline_data
        {
            return Err(err(
                ErrorKind::LimitExceeded,
                OP,
                "queue sizes beyond the device's",
            ));
        }
        let qpn = w.qpn();
        let ctx = self.res.id;
        let rc =
            matches!(init.qp_type, QpType::Rc | QpType::Uc).then(|| Box::new(RcState::default()));
        let qp = Qp {
            ctx,
            dev: self.dev,
            qp_type: init.qp_type,
            pd: pd.res.id,
            send_cq: init.send_cq.res.id,
            recv_cq: init.recv_cq.res.id,
            srq: init.srq.map(|s| s.res.id),
            cap: c,
            sq_sig_all: init.sq_sig_all,
            state: QpState::Reset,
            attr: QpAttr {
                port_num: 1,
                ..QpAttr::default()
            },
            rq: VecDeque::new(),
            groups: Vec::new(),
            ud_psn: 0,
            rc,
        };
        w.qps.insert(qpn, qp);
        drop(w);
        let mut keep = vec![
            pd.res.clone(),
            init.send_cq.res.clone(),
            init.recv_cq.res.clone(),
        ];
        if let Some(s) = init.srq {
            keep.push(s.res.clone());
        }
        Ok(SimQp {
            res: self.new_res(qpn, Kind::Qp),
            qpn,
            qp_type: init.qp_type,
            _keep: keep,
        })
    }

    fn create_ah(&self, _pd: &SimPd, attr: &AhAttr) -> Result<SimAh> {
        const OP: &str = "ibv_create_ah";
        if attr.port_num != 1 {
            return Err(err(
                ErrorKind::InvalidArgument,
                OP,
                format!("no port {}", attr.port_num),
            ));
        }
        if !attr.is_global || attr.grh.dgid.to_ipv4().is_none() {
            return Err(err(
                ErrorKind::InvalidArgument,
                OP,
                "a RoCE address needs a GRH with an IPv4-mapped GID",
            ));
        }
        Ok(SimAh { attr: *attr })
    }

    fn create_flow(&self, qp: &SimQp, attr: &FlowAttr) -> Result<SimFlow> {
        const OP: &str = "ibv_create_flow";
        if !self.personality().raw_packet() {
            return Err(err(
                ErrorKind::Unsupported,
                OP,
                "the device has no managed flow steering",
            ));
        }
        if attr.port != 1 {
            return Err(err(
                ErrorKind::InvalidArgument,
                OP,
                format!("no port {}", attr.port),
            ));
        }
        if qp.qp_type != QpType::RawPacket {
            return Err(err(
                ErrorKind::InvalidArgument,
                OP,
                "flow rules steer to RAW_PACKET QPs",
            ));
        }
        if attr.rule_type == FlowRuleType::Normal && attr.specs.is_empty() {
            return Err(err(
                ErrorKind::InvalidArgument,
                OP,
                "a normal rule needs at least one spec",
            ));
        }
        // IGMP-less membership: a rule for an exact IPv4 multicast destination joins it.
        let groups = attr
            .specs
            .iter()
            .filter_map(|s| match s {
                FlowSpec::Ipv4 { val, mask }
                    if val.dst_ip.is_multicast()
                        && mask.dst_ip == std::net::Ipv4Addr::BROADCAST =>
                {
                    Some(val.dst_ip)
                }
                _ => None,
            })
            .collect();
        let mac_groups = attr
            .specs
            .iter()
            .filter_map(|s| match s {
                FlowSpec::Eth { val, mask }
                    if val.dst_mac[0] & 1 != 0 && mask.dst_mac == [0xff; 6] =>
                {
                    Some(crate::frame::eth::Mac(val.dst_mac))
                }
                _ => None,
            })
            .collect();
        let mut w = self.world();
        let id = w.handle();
        w.add_flow(
            id,
            FlowRule {
                qpn: qp.qpn,
                dev: self.dev,
                attr: attr.clone(),
                groups,
                mac_groups,
            },
        );
        drop(w);
        Ok(SimFlow {
            _res: self.new_res(id, Kind::Flow),
            attr: attr.clone(),
        })
    }

    fn poll_async_event(&self) -> Result<Option<AsyncEvent>> {
        Ok(self
            .world()
            .ctxs
            .get_mut(&self.res.id)
            .and_then(|c| c.events.pop_front()))
    }
}
