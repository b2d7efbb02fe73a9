//! # backend-hw
//!
//! The verbs-api traits implemented over libibverbs (through `ibverbs-sys` and a small C
//! shim for the static-inline verbs), for real NICs and for Soft-RoCE (rxe).
//!
//! Status: the crate is laid out but does not link libibverbs yet, so that the simulator
//! build needs no system package. [`status`] says so to callers such as `cargo xtask`.

/// Whether this build of the crate can drive real hardware, and if not, why.
///
/// # Errors
/// Returns a message naming what is missing while the libibverbs backend is not built.
pub fn status() -> Result<(), &'static str> {
    Err("backend-hw is not built yet: the libibverbs backend is the subject of its own issue \
         (\"backend-hw on libibverbs, tested for real on Soft-RoCE in a VM\"); use --backend sim")
}
