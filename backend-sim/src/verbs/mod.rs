//! The verbs-api implementation: simulated RDMA devices (personalities `rxe` and `mlx5`)
//! on the hosts of a [`crate::Fabric`].

mod context;
mod cq;
mod flow_match;
mod memory;
mod mr;
mod objects;
mod personality;
mod qp;
mod raw;
mod rc;
mod records;
mod sim;
mod srq;
mod steering;
mod ud;
mod world;
mod wqe;

pub use context::{SimAh, SimContext, SimFlow, SimPd};
pub use cq::{SimChannel, SimCq};
pub use mr::SimMr;
pub use objects::SimVerbs;
pub use personality::Personality;
pub use qp::SimQp;
pub use records::NicStats;
pub use sim::Sim;
pub use srq::SimSrq;
