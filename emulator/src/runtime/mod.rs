//! The runtime: the process's emulated host and what runs beside the program.
//!
//! - [`leaks`]: live objects per kind, and the report at exit (`VERBS_EMU_LEAKS`).

pub mod leaks;
