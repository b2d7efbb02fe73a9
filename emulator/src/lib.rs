//! # emulator: a drop-in `libibverbs.so.1` over the simulator
//!
//! Built as a shared library with the soname, symbol versions and struct layouts of
//! Debian's rdma-core 44 `libibverbs.so.1`, so an unmodified, dynamically linked verbs
//! program (`ibv_devinfo`, `ibv_rc_pingpong`, perftest, spead2 ...) that finds it first on
//! `LD_LIBRARY_PATH` runs on an emulated NIC of [`backend_sim`] instead of a device.
//!
//! - [`ffi`]: rdma-core's structs through bindgen (build.rs), never copied by hand;
//! - [`exports`]: each exported function's version node (`libibverbs.map` defines them);
//! - [`device`], [`resources`], [`srq`], [`cq_ex`], [`qp_ex`], [`ah`], [`async_events`], [`rates`], [`kern`]:
//!   the exported verbs; [`refused`]: those without a model yet (EOPNOTSUPP); [`provider`]: the provider
//!   interface (IBVERBS_PRIVATE_34) that Debian's provider libraries bind to; [`flow`]: steering rules; [`ops`]: the `ibv_context.ops` and
//!   `verbs_context` tables the static-inline verbs jump through;
//! - [`state`]: the process's emulator (topology, host, devices, the progress thread that
//!   runs the simulation on the wall clock); [`events`]: completion channels and async
//!   events as eventfds;
//! - [`leaks`]: live objects per kind, and the report at exit (`VERBS_EMU_LEAKS`);
//! - [`topology`]: hosts, addresses and personalities (`VERBS_EMU_TOPOLOGY`,
//!   `VERBS_EMU_HOST`, `VERBS_EMU_SEED`);
//! - [`fabric`]: the fabric process (`verbs-emu-fabric`: switch, link faults, capture)
//!   and a process's link to it (`VERBS_EMU_FABRIC`), so that two programs talk as two
//!   hosts would.
//!
//! Alone, a process simulates every host of the topology and reaches only its own
//! (loopback and multicast to itself). With `VERBS_EMU_FABRIC` naming a fabric process's
//! socket, it keeps only its host's NIC and its frames cross the fabric's switch to the
//! processes of the other hosts (see the README's emulator section).

pub mod ah;
pub mod async_events;
pub mod base;
pub mod control;
pub mod convert;
pub mod cq_ex;
pub mod device;
pub mod events;
pub mod exports;
pub mod fabric;
pub mod flow;
pub mod kern;
pub mod mlx5dv;
pub mod objects;
pub mod ops;
pub mod pending;
pub mod provider;
pub mod qp_ex;
pub mod rates;
pub mod rdmacm;
pub mod refused;
pub mod resources;
pub mod runtime;
pub mod srq;
pub mod state;
pub mod strings;
pub mod topology;
pub mod work;
pub mod wq;
