//! Higher-level helpers in the spirit of InfinibandVerbs.jl: the set-up and loops every
//! verbs program writes, written once.
//!
//! - [`builder`]: open a device and create PD, CQ (with or without a completion
//!   channel), and a QP sized against the device's limits, in one call.
//! - [`transition`]: bring a QP up through the states with the masks its type requires,
//!   and post with automatic transition.
//! - [`wr_set`]: a fixed set of pooled buffers posted and completed together.
//! - [`repost`]: a receive loop driven by a callback that reposts every completed slot.

pub mod builder;
pub mod repost;
pub mod transition;
pub mod wr_set;

pub use builder::{ContextBuilder, Endpoint, Notification};
pub use repost::{repost_loop, RecvBatch, RepostOptions, RepostStats};
pub use transition::{bring_up, post_recv_ready, post_send_ready, ConnectParams, RemoteQp};
pub use wr_set::WrSet;
