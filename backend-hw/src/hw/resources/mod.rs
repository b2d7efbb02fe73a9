//! Protection domains, memory regions, completion channels and queues, shared receive
//! queues and address handles.

mod ah;
mod channel;
mod cq;
mod mr;
mod mw;
mod pd;
mod srq;

pub use ah::HwAh;
pub use channel::HwCompChannel;
pub use cq::HwCq;
pub use mr::HwMr;
pub use mw::HwMw;
pub use pd::HwPd;
pub use srq::HwSrq;

pub(crate) use cq::Cq;
pub(crate) use mw::{mr_ptr, mw_ptr, set_mw_rkey};
pub(crate) use pd::Pd;
pub(crate) use srq::{post_error, post_recv_chunks, Srq};
