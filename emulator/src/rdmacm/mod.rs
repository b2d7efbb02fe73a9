//! # The emulated librdmacm
//!
//! The connection manager of rdma-core's `librdmacm.so.1` over the emulated NIC: the same
//! library file serves as `librdmacm.so.1` (`cargo xtask emu` links the name to it), with
//! Debian's RDMACM_1.0 .. 1.3 symbol versions ([`crate::symbols::librdmacm`]). It plays both
//! librdmacm and the kernel's rdma_cm and IB CM for the ids of this process, in two
//! layers: [`core`] (the state) and above it [`api`] (the exported functions).

pub mod api;
pub mod core;
