//! The object model: the objects the library hands out and what crosses between C and
//! the simulator.
//!
//! - [`handles`]: each object as the C struct a program reads followed by the simulator's
//!   object (`EmuContext`, `EmuPd`, `EmuCq`, `EmuQp` ...), handing them out and taking
//!   them back;
//! - [`convert`]: rdma-core's C structs to verbs-api's values and back;
//! - [`pending`]: the work requests an extended QP's session has built;
//! - [`work`]: work requests from programs' C structs (scatter-gather lists, binds,
//!   chains).

pub mod convert;
pub mod handles;
pub mod pending;
pub mod work;
