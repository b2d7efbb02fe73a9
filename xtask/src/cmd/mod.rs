//! The commands behind `cargo xtask`, one file each, each a sequence of cargo
//! invocations over the few helpers in `common` (the workspace root, cargo, running a
//! command).

mod bench;
pub mod bench_emu;
pub mod bench_fabric;
mod bench_spead2;
pub mod ci;
mod common;
pub mod dist;
mod emu;
pub mod emu_suite;
mod fabric;
pub mod fuzz;
pub mod interop;
pub mod miri;
mod roce_capture;
mod scenario;
mod soak;
mod spead2;
pub mod split;
mod split_emu;
mod test_hw;
mod test_sim;
pub mod test_wire;
mod vm;

pub use bench::bench;
pub use ci::{ci, CI_SOAK_SECONDS};
pub use common::{root, Error};
pub use emu::{emu, EmuArgs};
pub use scenario::scenario_tool;
pub use soak::soak;
pub use test_hw::test_hw;
pub use test_sim::test_sim;
pub use vm::{smoke_command, vm, VmArgs};
