//! # verbs-api
//!
//! The RDMA verbs API (libibverbs) as Rust traits, so that verbs code, and the SPEAD
//! transports built on it, run unchanged on a deterministic simulator (`backend-sim`) and
//! on real hardware (`backend-hw`).
//!
//! - [`Verbs`], [`Context`] and the resource traits ([`ProtectionDomain`],
//!   [`MemoryRegion`], [`MemoryWindow`], [`CompletionChannel`], [`CompletionQueue`], [`SharedReceiveQueue`],
//!   [`QueuePair`], [`AddressHandle`], [`Flow`]): the contract both backends implement.
//! - Plain data with libibverbs' names and numeric values: [`Completion`], [`WcStatus`],
//!   [`WcOpcode`], [`QpState`], [`QpType`], [`QpAttr`] with [`QpAttrMask`],
//!   [`AccessFlags`], [`DeviceAttr`], [`PortAttr`], [`SendWr`], [`RecvWr`], [`Sge`],
//!   [`FlowAttr`], [`AsyncEvent`]... Each enum has `as_str()` giving libibverbs' string
//!   (`ibv_wc_status_str` and friends; see also [`names`]).
//! - [`state_table`]: the kernel's QP state table; every modify is checked against it
//!   before a backend sees it.
//! - [`Error`] with an [`ErrorKind`] generic code can branch on. A completion's status is
//!   data, never an error.
//! - [`pool`]: the safe buffer layer: registered memory as a pool of slots, where posting
//!   consumes a [`pool::SlotToken`] and the completion hands it back.
//! - [`helpers`]: a context builder, work-request sets, posting with automatic QP
//!   transitions, and a repost loop, in the spirit of InfinibandVerbs.jl.
//! - With the `mock` feature, [`mock`] has mockall mocks of every trait.
//!
//! ## A slot token cannot be used twice
//! Posting consumes the token, so it cannot be posted again, nor read after posting:
//!
//! ```compile_fail
//! # use verbs_api::pool::{SlotPool, SlotToken};
//! # use verbs_api::Context;
//! fn twice<C: Context>(pool: &SlotPool<C>, qp: &C::Qp, token: SlotToken) {
//!     let _ = pool.post_recv(qp, token);
//!     let _ = pool.post_recv(qp, token); // error[E0382]: use of moved value: `token`
//! }
//! ```
//!
//! ```compile_fail
//! # use verbs_api::pool::{SlotPool, SlotToken};
//! # use verbs_api::Context;
//! fn read_after_post<C: Context>(pool: &SlotPool<C>, qp: &C::Qp, token: SlotToken) {
//!     let _ = pool.post_recv(qp, token);
//!     let _ = pool.slot(&token); // error[E0382]: borrow of moved value: `token`
//! }
//! ```
//!
//! ```compile_fail
//! # use verbs_api::pool::SlotToken;
//! fn copy(token: &SlotToken) -> SlotToken {
//!     token.clone() // error[E0599]: SlotToken is not Clone
//! }
//! ```

#![warn(missing_docs)]

mod access;
mod c_fields;
mod device;
mod error;
mod event;
mod flow;
mod gid;
mod macros;
mod mw;
pub mod names;
mod port;
mod qp;
mod srq;
pub mod state_table;
mod traits;
mod wc;
mod wq;
mod wr;

pub mod helpers;
pub mod pool;

#[cfg(feature = "mock")]
pub mod mock;

pub use access::AccessFlags;
pub use device::{
    AtomicCap, DeviceAttr, DeviceCapFlags, DeviceInfo, NodeType, RawPacketCaps, TransportType,
};
pub use error::{Error, ErrorKind, Result};
pub use event::{AsyncEvent, EventElement, EventType};
pub use flow::{
    EthFilter, FlowAttr, FlowFields, FlowFlags, FlowMatcher, FlowRuleType, FlowSpec, Ipv4Filter,
    PortFilter,
};
pub use gid::{ipv4_multicast_mac, Gid};
pub use mw::{inc_rkey, MwType};
pub use port::{LinkLayer, Mtu, PortAttr, PortState};
pub use qp::{
    AhAttr, GlobalRoute, PathMigState, QpAttr, QpAttrMask, QpCap, QpInitAttr, QpModify, QpState,
    QpType,
};
pub use srq::{SrqAttr, SrqAttrMask, SrqInitAttr};
pub use traits::{
    AddressHandle, CompletionChannel, CompletionQueue, Context, Flow, MemoryRegion, MemoryWindow,
    MrKeys, ProtectionDomain, QueuePair, QueuePairExt, RwqIndTable, SharedReceiveQueue, Verbs,
    WorkQueue,
};
pub use wc::{Completion, WcFlags, WcOpcode, WcStatus};
pub use wq::{
    RssCaps, RxHashConf, RxHashFields, StridingRqAttr, WqInitAttr, WqState, RX_HASH_FUNC_TOEPLITZ,
};
pub use wr::{MwBind, MwBindInfo, RecvWr, SendFlags, SendOpcode, SendWr, Sge, WrDetail};

/// The QP number UD sends use to reach every QP attached to a multicast group.
pub const MULTICAST_QPN: u32 = 0x00ff_ffff;

/// Bytes of the Global Routing Header that UD receives place at the start of each
/// receive buffer (RoCEv2 with IPv4 puts the IPv4 header in its last 20 bytes).
pub const GRH_LEN: usize = 40;
