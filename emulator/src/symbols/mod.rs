//! The exported symbol tables: each exported function and its version node, for
//! `libibverbs.so.1` ([`libibverbs`]) and `librdmacm.so.1` ([`librdmacm`]); `libibverbs.map`
//! defines the nodes. (The tables of [`crate::extras`] sit with their functions.)

pub mod libibverbs;
pub mod librdmacm;
