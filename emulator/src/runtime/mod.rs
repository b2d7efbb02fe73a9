//! The runtime: the process's emulated host and what runs beside the program.
//!
//! - [`host`]: the emulator of this process (topology, host, devices, the fabric process
//!   it joined) and the progress thread that runs the simulation on the wall clock;
//! - [`delivery`]: completion channels' and contexts' async events delivered as readable
//!   descriptors;
//! - [`leaks`]: live objects per kind, and the report at exit (`VERBS_EMU_LEAKS`).
//!
//! The runtime names no layer above it: the connection manager registers its handler for
//! the fabric's messages ([`host::set_cm_handler`]).

pub mod delivery;
pub mod host;
pub mod leaks;
