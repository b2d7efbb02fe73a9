//! The verbs API as traits. Generic code takes `V: Verbs` (or `C: Context`) and runs on
//! the simulator and on real hardware alike.
//!
//! Resources are owned values that release their verbs resource on drop, in a safe order:
//! a QP keeps its CQs, SRQ and PD alive; an MR keeps its PD alive. So a context, CQ and QP
//! can live together in one struct, with no lifetimes in the way.
//!
//! Data-path calls are cheap and batch-friendly: [`CompletionQueue::poll`] fills a caller's
//! slice of plain [`Completion`]s; posts take slices of work requests. Posting raw
//! scatter-gather lists is `unsafe` (the device writes where they point); the safe way is
//! [`crate::pool::SlotPool`].

use std::fmt::Debug;
use std::time::Duration;

use crate::access::AccessFlags;
use crate::device::{DeviceAttr, DeviceInfo};
use crate::error::Result;
use crate::event::AsyncEvent;
use crate::flow::FlowAttr;
use crate::gid::Gid;
use crate::mw::MwType;
use crate::port::PortAttr;
use crate::qp::{AhAttr, QpAttr, QpAttrMask, QpCap, QpInitAttr, QpModify, QpState, QpType};
use crate::srq::{SrqAttr, SrqAttrMask, SrqInitAttr};
use crate::state_table::check_modify;
use crate::wc::Completion;
use crate::wq::{RxHashConf, WqInitAttr, WqState};
use crate::wr::{MwBind, RecvWr, SendWr};

/// A verbs provider: lists and opens devices (`ibv_get_device_list`, `ibv_open_device`).
#[cfg_attr(feature = "mock", mockall::automock(type Context = MockContext;))]
pub trait Verbs {
    /// The backend's device context.
    type Context: Context;

    /// The devices this provider can open.
    ///
    /// # Errors
    /// [`crate::ErrorKind::NoDevice`] when the system has no RDMA support at all.
    fn devices(&self) -> Result<Vec<DeviceInfo>>;

    /// Opens the device called `name`.
    ///
    /// # Errors
    /// [`crate::ErrorKind::NoDevice`] when there is no such device;
    /// [`crate::ErrorKind::PermissionDenied`] when the device files are not accessible.
    fn open(&self, name: &str) -> Result<Self::Context>;

    /// True when this provider's devices sit on the host's own network, so that a
    /// multicast receiver must also join its groups on the host (an IGMP membership, so
    /// that switches forward the groups), as spead2's ibverbs reader does. Real devices
    /// do; a simulated fabric has no host network, and a host join from a simulated run
    /// would be a side effect on the real machine, so the default is false.
    fn joins_host_multicast(&self) -> bool {
        false
    }
}

/// An open device (`struct ibv_context`) and the factory of every resource on it.
#[cfg_attr(
    feature = "mock",
    mockall::automock(
        type Pd = MockProtectionDomain;
        type Mr = crate::mock::fake_mr::FakeMr;
        type Mw = MockMemoryWindow;
        type CompChannel = MockCompletionChannel;
        type Cq = MockCompletionQueue;
        type Srq = MockSharedReceiveQueue;
        type Qp = MockQueuePair;
        type Ah = MockAddressHandle;
        type Flow = MockFlow;
        type Wq = MockWorkQueue;
        type RwqIndTable = MockRwqIndTable;
    )
)]
pub trait Context {
    /// Protection domain.
    type Pd: ProtectionDomain;
    /// Memory region.
    type Mr: MemoryRegion;
    /// Memory window.
    type Mw: MemoryWindow;
    /// Completion channel.
    type CompChannel: CompletionChannel;
    /// Completion queue.
    type Cq: CompletionQueue;
    /// Shared receive queue.
    type Srq: SharedReceiveQueue;
    /// Queue pair, whose UD sends name destinations by this context's address handles.
    type Qp: QueuePair<Ah = Self::Ah>;
    /// Address handle.
    type Ah: AddressHandle;
    /// Flow steering rule.
    type Flow: Flow;
    /// Receive work queue.
    type Wq: WorkQueue;
    /// Receive work queue indirection table.
    type RwqIndTable: RwqIndTable;

    /// The device this context is open on.
    fn device(&self) -> DeviceInfo;

    /// `ibv_query_device_ex`.
    ///
    /// # Errors
    /// An OS error from the backend.
    fn query_device(&self) -> Result<DeviceAttr>;

    /// `ibv_query_port`.
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidArgument`] for a port number the device lacks.
    fn query_port(&self, port_num: u8) -> Result<PortAttr>;

    /// `ibv_query_gid`.
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidArgument`] for a bad port or index.
    fn query_gid(&self, port_num: u8, index: u32) -> Result<Gid>;

    /// `ibv_alloc_pd`.
    ///
    /// # Errors
    /// [`crate::ErrorKind::OutOfResources`] past `max_pd`.
    fn alloc_pd(&self) -> Result<Self::Pd>;

    /// Allocates `len` bytes of page-aligned, zeroed memory owned by the returned region
    /// and registers it with `access` (`ibv_reg_mr` on memory the region owns). This is the
    /// safe way to get registered memory.
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidArgument`] for a zero length or an access combination
    /// libibverbs rejects; [`crate::ErrorKind::LimitExceeded`] beyond `max_mr_size`.
    fn alloc_mr(&self, pd: &Self::Pd, len: usize, access: AccessFlags) -> Result<Self::Mr>;

    /// `ibv_reg_mr` on memory the caller owns.
    ///
    /// # Errors
    /// As [`Context::alloc_mr`].
    ///
    /// # Safety
    /// `addr..addr+len` must be valid, writable memory that outlives the returned region,
    /// and while the region exists the caller must not hold Rust references to it: the
    /// device (or a remote peer, with remote access) may write it at any time.
    unsafe fn reg_mr(
        &self,
        pd: &Self::Pd,
        addr: *mut u8,
        len: usize,
        access: AccessFlags,
    ) -> Result<Self::Mr>;

    /// `ibv_alloc_mw`: a memory window of `mw_type` on `pd`, not bound. Dropping it is
    /// `ibv_dealloc_mw`, which unbinds it first.
    ///
    /// # Errors
    /// [`crate::ErrorKind::Unsupported`] or [`crate::ErrorKind::InvalidArgument`] (as the
    /// device returns it) when the device lacks windows of that type (check
    /// [`crate::DeviceCapFlags::MEM_WINDOW`] and the `MEM_WINDOW_TYPE_2*` flags);
    /// [`crate::ErrorKind::OutOfResources`] past `max_mw`.
    fn alloc_mw(&self, pd: &Self::Pd, mw_type: MwType) -> Result<Self::Mw>;

    /// `ibv_bind_mw`: posts on `qp` a BIND_MW request that binds the type 1 window `mw`
    /// as `bind` says (length 0 unbinds it), and gives the window the rkey it will have
    /// once bound ([`crate::inc_rkey`] of its current one), which it returns. The bind
    /// completes on `qp`'s send CQ (opcode [`crate::WcOpcode::BindMw`]; a refused bind
    /// completes with [`crate::WcStatus::MwBindErr`] and moves the QP to ERR; the window
    /// then keeps the new rkey, as in libibverbs: the caller knows the old one).
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidArgument`] (EINVAL) for a type 2 window, or for what the
    /// provider refuses at post time (rxe: ZERO_BASED access, a UD QP);
    /// [`crate::ErrorKind::PermissionDenied`] (EPERM) when the region and the window are
    /// on different PDs; the errors of [`QueuePair::post_send`].
    fn bind_mw(&self, qp: &Self::Qp, mw: &Self::Mw, bind: &MwBind) -> Result<u32>;

    /// `ibv_create_comp_channel`.
    ///
    /// # Errors
    /// An OS error from the backend.
    fn create_comp_channel(&self) -> Result<Self::CompChannel>;

    /// `ibv_create_cq` with `cqe` entries, an optional completion channel for events, and
    /// a completion vector (`0..num_comp_vectors`).
    ///
    /// # Errors
    /// [`crate::ErrorKind::LimitExceeded`] beyond `max_cqe`;
    /// [`crate::ErrorKind::InvalidArgument`] for `cqe == 0` or a bad vector.
    #[allow(clippy::needless_lifetimes)] // mockall needs the lifetime named
    fn create_cq<'a>(
        &self,
        cqe: u32,
        channel: Option<&'a Self::CompChannel>,
        comp_vector: u32,
    ) -> Result<Self::Cq>;

    /// `ibv_create_srq`.
    ///
    /// # Errors
    /// [`crate::ErrorKind::LimitExceeded`] beyond `max_srq_wr` or `max_srq_sge`.
    fn create_srq(&self, pd: &Self::Pd, attr: &SrqInitAttr) -> Result<Self::Srq>;

    /// `ibv_create_qp`. The QP starts in RESET.
    ///
    /// # Errors
    /// [`crate::ErrorKind::Unsupported`] for a type the device lacks (RAW_PACKET on rxe);
    /// [`crate::ErrorKind::PermissionDenied`] for RAW_PACKET without CAP_NET_RAW;
    /// [`crate::ErrorKind::LimitExceeded`] for queue sizes beyond the device's.
    fn create_qp<'a>(
        &self,
        pd: &Self::Pd,
        init: &QpInitAttr<'a, Self::Cq, Self::Srq>,
    ) -> Result<Self::Qp>;

    /// `ibv_create_ah`.
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidArgument`] for a bad port or GID index, or a RoCE
    /// address without a GRH.
    fn create_ah(&self, pd: &Self::Pd, attr: &AhAttr) -> Result<Self::Ah>;

    /// `ibv_create_flow`: steer frames matching `attr` to `qp`.
    ///
    /// # Errors
    /// [`crate::ErrorKind::Unsupported`] when the device has no managed flow steering;
    /// [`crate::ErrorKind::InvalidArgument`] for a bad port or an empty normal rule.
    fn create_flow(&self, qp: &Self::Qp, attr: &FlowAttr) -> Result<Self::Flow>;

    /// `ibv_get_async_event` without blocking (the async fd polled): the next event, if
    /// any. Events need no acknowledgement here: the backend acks them.
    ///
    /// # Errors
    /// An OS error from the backend.
    fn poll_async_event(&self) -> Result<Option<AsyncEvent>>;

    /// `ibv_create_wq` (or `mlx5dv_create_wq` when `attr.striding` is set): a receive
    /// work queue completing into `cq`, in RESET.
    ///
    /// # Errors
    /// [`crate::ErrorKind::Unsupported`] when the device has no work queues (rxe) or no
    /// striding RQs; [`crate::ErrorKind::InvalidArgument`] for sizes or a stride geometry
    /// beyond the device's.
    fn create_wq(&self, pd: &Self::Pd, cq: &Self::Cq, attr: &WqInitAttr) -> Result<Self::Wq>;

    /// `ibv_create_rwq_ind_table`: a table of `wqs` (a power of two of them).
    ///
    /// # Errors
    /// [`crate::ErrorKind::Unsupported`] when the device has no work queues;
    /// [`crate::ErrorKind::InvalidArgument`] for a size that is not a power of two.
    #[allow(clippy::needless_lifetimes)] // mockall needs the lifetime named
    fn create_rwq_ind_table<'a>(&self, wqs: &[&'a Self::Wq]) -> Result<Self::RwqIndTable>;

    /// `ibv_create_qp_ex` with `IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH`: a
    /// RAW_PACKET QP with no queues of its own; the frames flow rules steer to it go to
    /// the WQ of `table` that the RX hash of `hash` picks.
    ///
    /// # Errors
    /// [`crate::ErrorKind::Unsupported`] when the device has no RSS QPs;
    /// [`crate::ErrorKind::InvalidArgument`] for a hash function, key or field set the
    /// device does not take.
    fn create_rss_qp(
        &self,
        pd: &Self::Pd,
        table: &Self::RwqIndTable,
        hash: &RxHashConf,
    ) -> Result<Self::Qp>;
}

/// A receive work queue (`struct ibv_wq`).
#[cfg_attr(feature = "mock", mockall::automock)]
pub trait WorkQueue: Debug {
    /// `wq_num`, unique per device.
    fn wq_num(&self) -> u32;

    /// The current state.
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidState`] once destroyed.
    fn state(&self) -> Result<WqState>;

    /// `ibv_modify_wq` with `IBV_WQ_ATTR_STATE` (and `IBV_WQ_ATTR_CURR_STATE` when
    /// `current` is given: it must be the state the WQ is in).
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidArgument`] for a transition the device refuses or a
    /// wrong `current`.
    fn modify(&self, state: WqState, current: Option<WqState>) -> Result<()>;

    /// `ibv_post_wq_recv`. On a striding RQ each receive is one SGE covering exactly one
    /// WQE's buffer (`StridingRqAttr::wqe_bytes`).
    ///
    /// # Errors
    /// [`crate::ErrorKind::QueueFull`] with [`crate::Error::bad_wr`] when there is no room;
    /// [`crate::ErrorKind::InvalidArgument`] for too many SGEs.
    ///
    /// # Safety
    /// Every SGE must lie in a memory region that outlives the request's completion, and
    /// no Rust reference to that memory may exist until then.
    unsafe fn post_recv<'a>(&self, wrs: &[RecvWr<'a>]) -> Result<()>;
}

/// A receive work queue indirection table (`struct ibv_rwq_ind_table`).
#[cfg_attr(feature = "mock", mockall::automock)]
pub trait RwqIndTable: Debug {
    /// `ind_tbl_num`.
    fn ind_tbl_num(&self) -> u32;

    /// The `wq_num` of each entry, in order.
    fn wq_nums(&self) -> Vec<u32>;
}

/// A protection domain (`struct ibv_pd`).
#[cfg_attr(feature = "mock", mockall::automock)]
pub trait ProtectionDomain: Debug {
    /// The PD's handle (unique per context).
    fn handle(&self) -> u32;
}

/// What registering a memory region gave it: its keys and its access (`ibv_mr`'s
/// `lkey` and `rkey`, and the access flags it was registered with).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MrKeys {
    /// Local key, for SGEs.
    pub lkey: u32,
    /// Remote key, for peers' RDMA and atomics (0 where the device gives a region
    /// without remote access none).
    pub rkey: u32,
    /// Access the region was registered with.
    pub access: AccessFlags,
}

/// A registered memory region (`struct ibv_mr`).
///
/// `read` and `write` copy through a raw pointer, as a device would; an implementor that
/// is `Sync` must make concurrent `write`s to the same bytes impossible or harmless (the
/// backends' regions are `Send` but not `Sync`).
///
/// # Safety
/// Implementors guarantee that `as_ptr()..as_ptr()+len()` is valid memory for as long as
/// the region exists, and that the device writes to it only while work requests that
/// name it are outstanding (or, with remote access, when a peer writes it), never after
/// the region is dropped.
pub unsafe trait MemoryRegion: Debug {
    /// First byte of the region.
    fn as_ptr(&self) -> *mut u8;
    /// Length in bytes.
    fn len(&self) -> usize;
    /// The keys and access the registration gave the region.
    fn keys(&self) -> MrKeys;

    /// Local key, for SGEs.
    fn lkey(&self) -> u32 {
        self.keys().lkey
    }
    /// Remote key, for peers' RDMA and atomics.
    fn rkey(&self) -> u32 {
        self.keys().rkey
    }
    /// Access the region was registered with.
    fn access(&self) -> AccessFlags {
        self.keys().access
    }

    /// The address SGEs and remote peers use for the first byte.
    fn addr(&self) -> u64 {
        self.as_ptr() as u64
    }

    /// Whether the region is empty (never, for a registered region).
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies `out.len()` bytes at `offset` out of the region.
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidArgument`] when the range is outside the region.
    fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        check_range("MemoryRegion::read", offset, out.len(), self.len())?;
        // SAFETY: the range is inside the region (checked above), which the trait's
        // contract keeps valid; `out` is a distinct Rust buffer, so they cannot overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(self.as_ptr().add(offset), out.as_mut_ptr(), out.len())
        };
        Ok(())
    }

    /// Copies `data` into the region at `offset`.
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidArgument`] when the range is outside the region.
    fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        check_range("MemoryRegion::write", offset, data.len(), self.len())?;
        // SAFETY: as in `read`; the region is device-shared memory that no Rust reference
        // covers (the trait's contract), so writing through the raw pointer aliases nothing.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.as_ptr().add(offset), data.len())
        };
        Ok(())
    }
}

fn check_range(op: &'static str, offset: usize, len: usize, total: usize) -> Result<()> {
    if offset.checked_add(len).is_some_and(|end| end <= total) {
        Ok(())
    } else {
        Err(crate::Error::new(
            crate::ErrorKind::InvalidArgument,
            op,
            format!("range {offset}+{len} is outside the {total}-byte region"),
        ))
    }
}

/// A memory window (`struct ibv_mw`). Dropping it deallocates it (`ibv_dealloc_mw`).
#[cfg_attr(feature = "mock", mockall::automock)]
pub trait MemoryWindow: Debug {
    /// The window's handle (unique per context), as [`crate::WrDetail::BindMw`] names it.
    fn handle(&self) -> u32;
    /// Its type.
    fn mw_type(&self) -> MwType;
    /// Its rkey (`ibv_mw.rkey`): what remote peers use once it is bound. A bind through
    /// [`Context::bind_mw`] or a posted BIND_MW request sets it to the request's rkey.
    fn rkey(&self) -> u32;
}

/// A completion channel (`struct ibv_comp_channel`): the wait side of CQ events.
#[cfg_attr(feature = "mock", mockall::automock)]
pub trait CompletionChannel: Debug {
    /// `ibv_get_cq_event`: waits for the next event of an armed CQ and returns that CQ's
    /// [`CompletionQueue::handle`]. Each event must be acknowledged with
    /// [`CompletionQueue::ack_events`]; the CQ must be re-armed with
    /// [`CompletionQueue::req_notify`] for the next one.
    ///
    /// `timeout` of `None` waits as long as it takes. Returns `Ok(None)` when the timeout
    /// passed (on the simulator: virtual time; also when nothing can happen any more).
    ///
    /// # Errors
    /// An OS error from the backend.
    fn get_cq_event(&self, timeout: Option<Duration>) -> Result<Option<u32>>;
}

/// A completion queue (`struct ibv_cq`).
#[cfg_attr(feature = "mock", mockall::automock)]
pub trait CompletionQueue: Debug {
    /// The CQ's handle (unique per context), as events name it.
    fn handle(&self) -> u32;

    /// The number of entries the CQ holds (at least what was asked for; after
    /// [`CompletionQueue::resize`], what the device gave then).
    fn cqe(&self) -> u32;

    /// `ibv_resize_cq`: makes the CQ hold at least `cqe` entries, keeping the completions
    /// it holds, in order. The device rounds as at creation (rxe and mlx5: the smallest
    /// 2^k - 1 >= `cqe`) and may shrink the CQ; [`CompletionQueue::cqe`] then reports the
    /// new size.
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidArgument`] (EINVAL) for 0, for more than the device's
    /// `max_cqe`, or for fewer entries than completions wait in the CQ (the man page's
    /// rule, which rxe enforces); [`crate::ErrorKind::Unsupported`] where the device or
    /// backend cannot resize.
    fn resize(&self, cqe: u32) -> Result<()>;

    /// `ibv_poll_cq`: moves up to `wc.len()` completions into `wc`, oldest first, and
    /// returns how many. Allocates nothing.
    ///
    /// # Errors
    /// An error when the CQ is unusable (overrun on devices that break it).
    fn poll(&self, wc: &mut [Completion]) -> Result<usize>;

    /// `ibv_req_notify_cq`: arm the CQ for one event on its channel, for the next
    /// completion (`solicited_only == false`) or the next solicited or error one.
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidState`] when the CQ has no channel.
    fn req_notify(&self, solicited_only: bool) -> Result<()>;

    /// `ibv_ack_cq_events`: acknowledge `n` events got from the channel for this CQ.
    fn ack_events(&self, n: u32);
}

/// A shared receive queue (`struct ibv_srq`).
#[cfg_attr(feature = "mock", mockall::automock)]
pub trait SharedReceiveQueue: Debug {
    /// The SRQ's handle (unique per context), as events name it.
    fn handle(&self) -> u32;

    /// `ibv_post_srq_recv`.
    ///
    /// # Errors
    /// [`crate::ErrorKind::QueueFull`] with [`crate::Error::bad_wr`] when there is no room;
    /// [`crate::ErrorKind::InvalidArgument`] for too many SGEs.
    ///
    /// # Safety
    /// Every SGE must lie in a memory region that outlives the request's completion, and
    /// no Rust reference to that memory may exist until then.
    unsafe fn post_recv<'a>(&self, wrs: &[RecvWr<'a>]) -> Result<()>;

    /// `ibv_modify_srq`: resize or arm the limit.
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidArgument`] for a limit above `max_wr`.
    fn modify(&self, attr: &SrqAttr, mask: SrqAttrMask) -> Result<()>;

    /// `ibv_query_srq`.
    ///
    /// # Errors
    /// An OS error from the backend.
    fn query(&self) -> Result<SrqAttr>;
}

/// A queue pair (`struct ibv_qp`).
#[cfg_attr(feature = "mock", mockall::automock(type Ah = MockAddressHandle;))]
pub trait QueuePair: Debug {
    /// The address handle type UD sends name destinations with.
    type Ah: AddressHandle;

    /// The QP number.
    fn qp_num(&self) -> u32;

    /// The QP's transport type.
    fn qp_type(&self) -> QpType;

    /// The QP's current state as the device sees it (it moves to ERR or SQE by itself
    /// after some errors).
    ///
    /// # Errors
    /// An OS error from the backend.
    fn state(&self) -> Result<QpState>;

    /// The backend's half of [`QueuePairExt::modify`]: applies a modify that the state table
    /// has already accepted. Users call [`QueuePairExt::modify`], which checks first.
    ///
    /// # Errors
    /// Backend-specific rejections of attribute values (a bad port, a path MTU above the
    /// port's, an unreachable destination).
    fn apply_modify(&self, attr: &QpAttr, mask: QpAttrMask) -> Result<()>;

    /// `ibv_query_qp`: the attributes named by `mask`, and the QP's queue sizes.
    ///
    /// # Errors
    /// An OS error from the backend.
    fn query(&self, mask: QpAttrMask) -> Result<(QpAttr, QpCap)>;

    /// `ibv_post_send`. On error, the requests before [`crate::Error::bad_wr`] were posted.
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidState`] when the QP is not in RTS (or SQD/SQE as the
    /// man page allows); [`crate::ErrorKind::QueueFull`] when the send queue is full;
    /// [`crate::ErrorKind::InvalidArgument`] for too many SGEs, inline data above
    /// `max_inline_data`, or an opcode the QP type does not take.
    ///
    /// # Safety
    /// Every SGE (unless the request is INLINE) must lie in a memory region that outlives
    /// the request's completion; memory the device writes (RDMA READ and atomic results)
    /// must not be referenced by Rust until then; a UD request's address handle must live
    /// until the completion.
    unsafe fn post_send<'a>(&self, wrs: &[SendWr<'a, Self::Ah>]) -> Result<()>;

    /// `ibv_post_recv`. On error, the requests before [`crate::Error::bad_wr`] were posted.
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidState`] when the QP is in RESET or uses an SRQ;
    /// [`crate::ErrorKind::QueueFull`] when the receive queue is full.
    ///
    /// # Safety
    /// Every SGE must lie in a memory region that outlives the request's completion, and
    /// no Rust reference to that memory may exist until then.
    unsafe fn post_recv<'a>(&self, wrs: &[RecvWr<'a>]) -> Result<()>;

    /// `ibv_attach_mcast`: receive UD traffic sent to multicast group `gid` (LID ignored
    /// on RoCE). Attaching twice is not an error.
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidArgument`] for a non-multicast GID or a non-UD QP.
    fn attach_mcast(&self, gid: &Gid, lid: u16) -> Result<()>;

    /// `ibv_detach_mcast`.
    ///
    /// # Errors
    /// [`crate::ErrorKind::NotFound`] when the QP is not attached to `gid`.
    fn detach_mcast(&self, gid: &Gid, lid: u16) -> Result<()>;
}

/// What every [`QueuePair`] can do on top of its backend's methods. It is a separate,
/// blanket-implemented trait so that no backend (and no mock) can skip the state-table
/// check: both backends reject the same mistakes with the same [`crate::ErrorKind`].
pub trait QueuePairExt: QueuePair {
    /// `ibv_modify_qp`, checked against the kernel's state table first (see
    /// [`crate::state_table::check_modify`]), so every backend rejects the same mistakes
    /// with the same [`crate::ErrorKind`].
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidState`] for a transition not in the table;
    /// [`crate::ErrorKind::InvalidArgument`] for a missing or unexpected attribute; the
    /// backend's errors from [`QueuePair::apply_modify`].
    fn modify(&self, attr: &QpAttr, mask: QpAttrMask) -> Result<()> {
        let current = if mask.contains(QpAttrMask::CUR_STATE) {
            attr.cur_qp_state
        } else {
            self.state()?
        };
        let target = if mask.contains(QpAttrMask::STATE) {
            attr.qp_state
        } else {
            current
        };
        check_modify(self.qp_type(), current, target, mask)?;
        self.apply_modify(attr, mask)
    }

    /// [`QueuePairExt::modify`] with a [`QpModify`] that carries its own mask.
    ///
    /// # Errors
    /// As [`QueuePairExt::modify`].
    fn modify_with(&self, m: &QpModify) -> Result<()> {
        self.modify(&m.attr, m.mask)
    }
}

impl<Q: QueuePair + ?Sized> QueuePairExt for Q {}

/// An address handle (`struct ibv_ah`): a UD destination.
#[cfg_attr(feature = "mock", mockall::automock)]
pub trait AddressHandle: Debug {
    /// The attributes it was created with.
    fn attr(&self) -> AhAttr;
}

/// A flow steering rule (`struct ibv_flow`); dropping it removes the rule.
#[cfg_attr(feature = "mock", mockall::automock)]
pub trait Flow: Debug {
    /// The rule's attributes.
    fn attr(&self) -> FlowAttr;
}
