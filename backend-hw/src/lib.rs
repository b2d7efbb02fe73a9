//! # backend-hw
//!
//! The verbs-api traits implemented over the system's libibverbs (rdma-core), for real
//! NICs and for Soft-RoCE (rxe). Every verb goes through a small C shim (`shim/shim.c`)
//! with a flat API, so no bindings generator is needed and the static-inline verbs
//! (`ibv_post_send`, `ibv_poll_cq`, `ibv_create_flow`...) are reachable.
//!
//! The backend is behind the `ibverbs` cargo feature (off by default), so that the
//! simulator build needs no system package: without it the crate only offers [`status`].
//! With it: [`HwVerbs`] lists and opens devices, [`HwContext`] creates every resource.
//!
//! Resource lifetimes are safe: a QP keeps its PD, CQs and SRQ alive (an RSS QP its
//! indirection table), a table its work queues, a WQ its PD and CQ, a CQ its completion
//! channel, an MR and a memory window their PD, a flow its QP, and everything its device
//! context (a region the device refuses to deregister, because a window is still bound
//! to it, keeps its memory: it is leaked, not freed under the device); dropping
//! releases them in libibverbs' order (a QP detaches the multicast groups it is still
//! attached to before it is destroyed).
//!
//! Errors name their cause and their fix: no kernel RDMA support (ENOSYS), no device, no
//! userspace provider, an unknown device name, RAW_PACKET without CAP_NET_RAW, RAW_PACKET
//! or flow steering on a device without them ([`diagnose`]).
//!
//! Each call goes to the device, and what the device returns is mapped to an
//! [`verbs_api::ErrorKind`]: sizes, SGE counts, inline lengths, opcodes, access flags and
//! multicast attachments are the device's to refuse (rxe and mlx5 disagree on several;
//! see docs/divergences.md). The only checks made first are the kernel's QP state table
//! (in verbs-api, with typed errors: a post before the QP is ready, an invalid
//! transition), a UD send without an address handle (the provider would dereference a
//! null AH), a BIND_MW naming a window handle or region lkey no live object of the
//! context has (libibverbs wants the objects), an indirection table of no WQs or of a
//! number that is not a power of two (libibverbs takes a log2 size and reads that many),
//! a striding RQ's receive that is not one SGE (its ring entry holds one), and objects of
//! another device.
//!
//! Work queues, indirection tables and RSS QPs go through libibverbs (`hw/wq.rs`); a
//! striding WQ through libmlx5's direct verbs (`mlx5dv_create_wq`, `mlx5dv_init_obj`),
//! loaded with dlopen when first asked for, so the crate needs libmlx5 neither to build
//! nor to run; its receives are written into the WQ's ring as `mlx5_mprq_wqe` entries,
//! as spead2 writes them.
//!
//! `attach_mcast` on a RoCEv2 port also joins the IPv4 group on the port's interface (as
//! librdmacm's `rdma_join_multicast` does), without which the kernel delivers nothing.
//!
//! Tests that need a device are in `tests/device.rs`, behind the `device-tests` feature;
//! they run on the device named by `RDMA_DEVICE` and fail (never skip) when it is unset or
//! does not work. On a machine without RDMA, run them in the Soft-RoCE VM:
//!
//! ```text
//! RDMA_DEVICE=rxe0 cargo test -p backend-hw --features device-tests
//! cargo xtask vm --env RDMA_DEVICE=rxe0 -- target/debug/deps/device-HASH
//! ```
//!
//! Examples (feature `ibverbs`): `devinfo` (what `ibv_devinfo` prints), and `rc_pingpong` /
//! `ud_pingpong`, which interoperate with rdma-core's `ibv_rc_pingpong` /
//! `ibv_ud_pingpong` in both roles (`scripts/pingpong-interop.sh` checks it in the VM).

pub mod diagnose;

#[cfg(feature = "ibverbs")]
mod ffi;
#[cfg(feature = "ibverbs")]
mod hw;

#[cfg(feature = "ibverbs")]
pub use hw::{
    HwAh, HwCompChannel, HwContext, HwCq, HwFlow, HwMr, HwPd, HwQp, HwRwqIndTable, HwSrq, HwVerbs,
    HwWq, DEVICE_ENV,
};

/// Whether this build of the crate can drive real hardware, and if not, why.
///
/// # Errors
/// Without the `ibverbs` feature: a message saying how to build the libibverbs backend.
pub fn status() -> Result<(), &'static str> {
    if cfg!(feature = "ibverbs") {
        Ok(())
    } else {
        Err(
            "backend-hw was built without the `ibverbs` feature: build with \
             `--features backend-hw/ibverbs` (needs libibverbs-dev; Debian: apt-get install \
             libibverbs-dev ibverbs-providers), or use --backend sim",
        )
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn status_matches_the_feature() {
        let s = super::status();
        if cfg!(feature = "ibverbs") {
            assert_eq!(s, Ok(()));
        } else {
            let msg = s.unwrap_err();
            assert!(msg.contains("--features backend-hw/ibverbs"), "{msg}");
            assert!(msg.contains("libibverbs-dev"), "{msg}");
        }
    }
}
