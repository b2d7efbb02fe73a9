//! # The emulated librdmacm
//!
//! The connection manager of rdma-core's `librdmacm.so.1` over the emulated NIC: the same
//! library file serves as `librdmacm.so.1` (`cargo xtask emu` links the name to it), with
//! Debian's RDMACM_1.0 .. 1.3 symbol versions ([`exports`]). It plays both librdmacm and
//! the kernel's rdma_cm and IB CM for the ids of this process:
//!
//! - [`channels`]: event channels (their `fd` a real descriptor); [`lifecycle`]: ids;
//! - [`address`]: binding to an address of this host (which gives `id->verbs`, as spead2
//!   uses it), address and route resolution on the topology, listening, options;
//! - [`connection`]: connect, accept, reject, disconnect, establish (RC by REQ/REP/RTU, UD
//!   by SIDR); [`qp`]: QPs on ids and `rdma_init_qp_attr`;
//! - [`multicast`]: joins and leaves; [`event`]: `rdma_get_cm_event` and friends;
//! - [`devices`], [`addrinfo`]: `rdma_get_devices`, `rdma_getaddrinfo`;
//! - [`endpoint`]: `rdma_create_ep`, the QPs of a passive endpoint's requests,
//!   `rdma_get_request`, `rdma_destroy_ep`;
//! - [`refused`]: rsockets, SRQs on ids, ECE: EOPNOTSUPP, logged once;
//! - [`cm`], [`id`], [`channel`], [`network`], [`route`], [`query`], [`addr`]: the state
//!   behind them. Messages between ids travel over a [`network::Network`]: it delivers
//!   those for this process's ids itself and, with a fabric process, hands those for
//!   another host to the fabric, which brings them to that host's process.

pub mod addr;
pub mod address;
pub mod addrinfo;
pub mod channel;
pub mod channels;
pub mod cm;
pub mod connection;
pub mod devices;
pub mod endpoint;
pub mod event;
pub mod exports;
pub mod id;
pub mod lifecycle;
pub mod multicast;
pub mod network;
pub mod qp;
pub mod query;
pub mod refused;
pub mod route;
