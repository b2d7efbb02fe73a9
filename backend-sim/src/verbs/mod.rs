//! The verbs-api implementation: simulated RDMA devices (personalities `rxe` and `mlx5`)
//! on the hosts of a [`crate::Fabric`].

mod ah;
mod context;
mod cq;
mod memory;
mod mr;
mod mw;
mod objects;
mod pd;
mod personality;
mod provider;
mod qp;
mod raw;
mod rc;
mod records;
mod roce_addr;
mod send_queue;
mod sim;
mod srq;
mod steering;
mod striding;
mod toeplitz;
mod ud;
mod world;
mod wq;
mod wq_create;
mod wqe;

pub use ah::SimAh;
pub use context::{SimContext, SimFlow};
pub use cq::{SimChannel, SimCq};
pub use mr::SimMr;
pub use mw::SimMw;
pub use pd::SimPd;
pub use personality::Personality;
pub use provider::SimVerbs;
pub use qp::SimQp;
pub use records::NicStats;
pub use sim::{LiveObjects, Sim, Snapshot, SnapshotError};
pub use srq::SimSrq;
pub use wq::{SimRwqIndTable, SimWq, StridingRqLimits, STRIDING_RQ_LIMITS};
