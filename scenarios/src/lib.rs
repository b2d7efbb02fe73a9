//! # scenarios
//!
//! Scenarios are values (hosts, multicast groups, senders, receivers, faults) that run on
//! any verbs backend; proptest searches their space and shrinks failures, and a
//! differential runner compares the simulator's outcome with real verbs.
//!
//! Status: the crate is laid out; the scenario model is the subject of its own issue.
