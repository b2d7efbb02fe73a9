//! The conformance cases, by topic. Each takes an [`Env`](super::Env) and panics with a precise
//! message on the first difference from what rxe does (and, where they agree, the man pages). Where
//! rxe, mlx5 and the man pages disagree, the case's doc says so and docs/divergences.md lists it.

mod cq;
mod cq_resize;
mod device;
mod ipv6;
mod loss;
mod memory;
mod multicast;
mod mw;
pub(crate) mod prelude;
mod qp;
mod rc_errors;
mod rc_ops;
mod send_queue;
mod srq;
mod uc;
mod ud;
mod wq;

pub use cq::*;
pub use cq_resize::*;
pub use device::*;
pub use ipv6::*;
pub use loss::*;
pub use memory::*;
pub use multicast::*;
pub use mw::*;
pub use qp::*;
pub use rc_errors::*;
pub use rc_ops::*;
pub use send_queue::*;
pub use srq::*;
pub use uc::*;
pub use ud::*;
pub use wq::*;
