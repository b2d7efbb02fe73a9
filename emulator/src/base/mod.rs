//! The base layer: what every other layer uses, and which uses none of them.
//!
//! - [`ffi`]: rdma-core's C structs, enums and constants through bindgen (build.rs);
//! - [`sync`]: locking that survives a panic elsewhere; [`log`]: saying a thing once;
//! - [`c_str`]: C strings in fixed arrays; [`errno`]: setting and reading errno;
//! - [`eventfd`]: event descriptors programs can poll;
//! - [`boundary`]: the panic boundary every function C calls goes through;
//! - [`symver`]: the versioned symbols of an exported function table;
//! - [`pointer`](mod@pointer): C pointers read as references, with their null check.

pub mod boundary;
pub mod c_str;
pub mod errno;
pub mod eventfd;
pub mod ffi;
pub mod log;
pub mod pointer;
pub mod symver;
pub mod sync;
