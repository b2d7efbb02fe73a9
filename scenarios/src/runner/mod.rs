//! Runners: a scenario on a backend, producing an [`Outcome`](crate::Outcome).
//!
//! The drive loop ([`drive`]) is generic over the verbs backend: senders packetize their
//! heaps and send them round robin (as concurrent senders would), exact drops and
//! duplicates of the fault schedule are applied at the sender (so the same drop list
//! gives the same expected outcome on any backend), receivers poll their verbs transport
//! into a SPEAD stream and record every heap that comes out. The backend-specific part
//! builds the hosts (the simulator's fabric with the scenario's faults, or one real
//! device shared by all hosts) and says how time passes.

pub mod differential;
pub mod drive;
#[cfg(feature = "hw")]
pub mod hw;
#[cfg(feature = "sim")]
pub mod sim;

pub use differential::compare;
pub use drive::{build, Clock, Drive, RunError};
#[cfg(feature = "sim")]
pub use sim::{run_sim, SimRun};
