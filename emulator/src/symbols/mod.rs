//! The exported symbol tables: each exported function and its version node, for
//! `libibverbs.so.1` ([`ibverbs`]) and `librdmacm.so.1` ([`rdmacm`]); `libibverbs.map`
//! defines the nodes. (The tables of [`crate::extras`] sit with their functions.)

pub mod ibverbs;
pub mod rdmacm;
