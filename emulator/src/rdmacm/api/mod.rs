//! librdmacm's functions over the [`super::core`].
//!
//! - [`event_channels`]: event channels (their `fd` a real descriptor); [`ids`]: ids come
//!   and go;
//! - [`bind_resolve`]: binding to an address of this host (which gives `id->verbs`, as
//!   spead2 uses it), address and route resolution on the topology, listening, options;
//! - [`connection`]: connect, accept, reject, disconnect, establish (RC by REQ/REP/RTU, UD
//!   by SIDR); [`id_qp`]: QPs on ids and `rdma_init_qp_attr`;
//! - [`multicast`]: joins and leaves; [`get_event`]: `rdma_get_cm_event` and friends;
//! - `rdma_getaddrinfo` in [`getaddrinfo`]; `rdma_get_devices` in [`get_devices`];
//! - [`endpoint`]: `rdma_create_ep`, the QPs of a passive endpoint's requests,
//!   `rdma_get_request`, `rdma_destroy_ep`;
//! - [`rsockets`]: rsockets, SRQs on ids, ECE: EOPNOTSUPP, logged once.

pub mod bind_resolve;
pub mod connection;
pub mod endpoint;
pub mod event_channels;
pub mod get_devices;
pub mod get_event;
pub mod getaddrinfo;
pub mod id_qp;
pub mod ids;
pub mod multicast;
pub mod rsockets;
