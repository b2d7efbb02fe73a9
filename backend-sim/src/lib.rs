//! # backend-sim
//!
//! A deterministic, in-process simulator of RDMA devices, queue pairs, completion queues,
//! memory regions, multicast and flow steering on a switched Ethernet fabric. It implements
//! the traits of [`verbs_api`] so that verbs code (and the SPEAD transports built on it) runs
//! in CI with no NIC, and so that a lost-packet bug can be replayed from a seed.
//!
//! The layers, bottom up:
//! - [`frame`]: real Ethernet/IPv4/UDP/RoCEv2 bytes, builders and parsers;
//! - [`Fabric`]: hosts, ports, links, a switch with IPv4 multicast, a virtual clock, one
//!   seeded RNG, one event queue, [`fault`]s, [`pcap`] capture and replay, and a trace hash.

pub mod clock;
mod events;
pub mod fabric;
pub mod fault;
pub mod frame;
mod hash;
pub mod ids;
pub mod link;
pub mod pcap;
pub mod rng;
mod switch;
pub mod trace;

pub use clock::Nanos;
pub use fabric::{
    CaptureFilter, Fabric, FabricError, FabricStats, Host, Output, PortConfig, PortStats,
    ReplayOptions, ReplaySummary,
};
pub use fault::{Direction, DropReason, FaultPlan, LinkFaultRule, LinkFaults, Partition};
pub use ids::{HostId, PortId};
pub use link::LinkConfig;
pub mod verbs;
pub use verbs::{Personality, Sim, SimVerbs};
