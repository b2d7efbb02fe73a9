//! The verbs-api implementation: simulated RDMA devices (personalities `rxe` and `mlx5`)
//! on the hosts of a [`crate::Fabric`].

mod memory;
mod objects;
mod personality;
mod rc;
mod sim;
mod steering;
mod ud;
mod world;

pub use objects::{
    SimAh, SimChannel, SimContext, SimCq, SimFlow, SimMr, SimPd, SimQp, SimSrq, SimVerbs,
};
pub use personality::Personality;
pub use sim::Sim;
pub use world::NicStats;
