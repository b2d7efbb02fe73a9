//! # backend-sim
//!
//! A deterministic, in-process simulator of RDMA devices, queue pairs, completion queues,
//! memory regions, multicast and flow steering on a switched Ethernet fabric. It implements
//! the traits of [`verbs_api`] so that verbs code (and the SPEAD transports built on it) runs
//! in CI with no NIC, and so that a lost-packet bug can be replayed from a seed.
//!
//! Status: the crate is laid out; the simulator itself is the subject of its own issue.
