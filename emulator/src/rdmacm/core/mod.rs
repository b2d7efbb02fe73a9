//! The connection manager's core: the state behind librdmacm's functions.
//!
//! - [`sockaddr`]: socket addresses as programs pass them, and the host's address plan;
//! - [`messages`]: the connection manager's messages (REQ, REP, RTU, REJ, DREQ, DREP,
//!   SIDR) and their bytes on the wire; [`network`]: how they travel between ids: a [`network::Network`] delivers those for this process's ids
//!   itself and, with a fabric process, hands those for another host to the fabric,
//!   each with its sender's gap since its last frame, by which [`request_hold`] keeps a
//!   request as far behind its sender's frames as it was sent after them;
//! - [`event_queue`]: event channels' descriptors and queues of events;
//! - [`id_state`]: `struct rdma_cm_id` and the state the kernel keeps for an id;
//! - [`route`]: RoCE routes and path records; [`cm_devices`]: the connection manager's
//!   own device contexts and PDs;
//! - [`id_query`]: what librdmacm copies from the kernel into an id;
//! - [`manager`]: the process's connection manager: its ids, ports, network, and what
//!   happens when a message reaches an id; it registers itself with the runtime for the
//!   fabric's messages.

pub mod cm_devices;
pub mod event_queue;
pub mod id_query;
pub mod id_state;
pub mod manager;
pub mod messages;
pub mod network;
pub mod request_hold;
pub mod route;
pub mod sockaddr;
