//! The verbs: libibverbs' exported functions and context ops, one file per object kind,
//! with the ops table above them.
//!
//! - [`device_list`]: the device list; [`context`]: `ibv_open_device`'s context
//!   (opened by [`ops`]), queries of device, port, GID and P_Key; [`async_event`]: a context's async events;
//! - [`pd`]: protection and parent domains; [`mr`]: memory regions and windows;
//! - [`comp_channel`]: completion channels; [`cq`], [`cq_ex`]: completion queues and
//!   their extended form;
//! - [`qp`], [`qp_ex`]: queue pairs and their extended form (the `ibv_wr_*` send API);
//! - [`srq`]: shared receive queues; [`ah`]: address handles; [`flow`]: steering rules;
//! - [`ops`]: the `ibv_context.ops` and `verbs_context` tables the static-inline verbs
//!   jump through, and `ibv_open_device`, which installs them;
//! - [`unsupported`]: exported verbs without a model (EOPNOTSUPP); [`provider`]: the
//!   provider interface (IBVERBS_PRIVATE_34) Debian's provider libraries bind to;
//! - [`names`], [`rates`], [`kern`]: the string, rate and kernel-ABI helpers.

pub mod ah;
pub mod async_event;
pub mod comp_channel;
pub mod context;
pub mod cq;
pub mod cq_ex;
pub mod device_list;
pub mod flow;
pub mod kern;
pub mod mr;
pub mod names;
pub mod ops;
pub mod pd;
pub mod provider;
pub mod qp;
pub mod qp_ex;
pub mod rates;
pub mod srq;
pub mod unsupported;
