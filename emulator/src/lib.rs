//! # emulator: a drop-in `libibverbs.so.1` over the simulator
//!
//! Built as a shared library with the soname, symbol versions and struct layouts of
//! Debian's rdma-core 44 `libibverbs.so.1`, so an unmodified, dynamically linked verbs
//! program (`ibv_devinfo`, `ibv_rc_pingpong`, perftest, spead2 ...) that finds it first on
//! `LD_LIBRARY_PATH` runs on an emulated NIC of [`backend_sim`] instead of a device. The
//! same file serves as `librdmacm.so.1` and `libmlx5.so.1`.
//!
//! Alone, a process simulates every host of the topology and reaches only its own
//! (loopback and multicast to itself). With `VERBS_EMU_FABRIC` naming a fabric process's
//! socket, it keeps only its host's NIC and its frames cross the fabric's switch to the
//! processes of the other hosts (see docs/emulator.md; the launcher, crate `launcher`,
//! `verbs-emu run`, gives each host its address, device files and sysfs entries).
//!
//! ## Layers
//!
//! Each layer imports only from itself and the layers below it, and no two files import
//! each other, directly or around a circle. From the bottom:
//!
//! 1. [`base`]: the C types from bindgen ([`base::ffi`]), locking, log-once, C strings,
//!    errno (one helper sets it), eventfds, the one way to read a C pointer as a reference
//!    with its null check ([`base::pointer`]), the panic boundary every function C calls
//!    goes through ([`base::boundary`]), and the symbol-version macro.
//! 2. Configuration and the fabric: [`topology`] (hosts, addresses, personalities:
//!    `VERBS_EMU_TOPOLOGY`, `VERBS_EMU_HOST`, `VERBS_EMU_SEED`) and [`fabric`] (the fabric
//!    process `verbs-emu-fabric`, and a process's link to it, `VERBS_EMU_FABRIC`).
//! 3. **The runtime**, [`runtime`]: the process's emulated host and its progress thread
//!    ([`runtime::host`]), event delivery to descriptors ([`runtime::delivery`]), the leak
//!    report ([`runtime::leaks`]). It names nothing above it: the connection manager
//!    registers its handler for the fabric's messages.
//! 4. **The object model**, [`objects`]: the handles programs get, each its C twin first
//!    ([`objects::handles`]), conversions between C structs and verbs-api values
//!    ([`objects::convert`]), work requests ([`objects::work`], [`objects::pending`]).
//! 5. **The C surface of libibverbs**, [`verbs`]: one file per object kind (context, PD,
//!    MR, completion channel, CQ and its extended form, QP and its extended form, SRQ, AH,
//!    flow, work queue), the ops table above them ([`verbs::ops`]), the refused verbs, the provider
//!    interface and the string/rate/kernel-ABI helpers.
//! 6. librdmacm, [`rdmacm`]: its core ([`rdmacm::core`]: ids, event queues, the
//!    connection protocol's messages, addresses, routes, the manager) and above it **the
//!    C surface of librdmacm**, [`rdmacm::api`]. Beside it, [`extras`]: the emulator's
//!    controls (`verbs_emu_*`) and libmlx5's surface.
//! 7. At the top, [`symbols`]: the exported symbol tables and their version nodes
//!    (`libibverbs.map`).
//!
//! The C surface, where programs call in, is [`verbs`], [`rdmacm::api`] and [`extras`]
//! (with each exported symbol's version in [`symbols`], or for [`extras`] beside its
//! functions); every such function, and every handler the library registers with C
//! (`atexit`, the load-time constructor), runs its body through
//! [`base::boundary::boundary`].

pub mod base;
pub mod extras;
pub mod fabric;
pub mod objects;
pub mod rdmacm;
pub mod runtime;
pub mod symbols;
pub mod topology;
pub mod verbs;
