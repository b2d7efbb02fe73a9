//! The conformance suite (the same cases `backend-sim` runs with its rxe personality) on
//! the real device named by `RDMA_DEVICE`: rxe0 in the Soft-RoCE VM, or a NIC. Built only
//! with the `device-tests` feature; every case FAILS (never skips) when the variable is
//! unset or the device does not behave.
//!
//! ```text
//! RDMA_DEVICE=rxe0 cargo test -p backend-hw --features device-tests --test conformance
//! ```

use backend_hw::{HwVerbs, DEVICE_ENV};
use workspace_tests::conformance::Env;

fn env() -> Env<HwVerbs> {
    let device = match std::env::var(DEVICE_ENV) {
        Ok(d) if !d.is_empty() => d,
        _ => panic!(
            "the conformance cases on hardware need {DEVICE_ENV}=<device> (e.g. rxe0): run \
             them through `cargo xtask test --backend hw [--vm]`, or set {DEVICE_ENV}"
        ),
    };
    Env {
        verbs: HwVerbs::new(),
        device,
        port: 1,
    }
}

workspace_tests::conformance_tests!(env());
