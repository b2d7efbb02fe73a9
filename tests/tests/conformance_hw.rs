//! The conformance suite on real verbs: the device named by `RDMA_DEVICE` (rxe0 in the
//! Soft-RoCE VM of `cargo xtask test --backend hw --vm`). Built only with the `hw`
//! feature; when built, every case fails (never skips) if the device does not work. The
//! cases about loss set up rxe1 on the VM's veth1 for themselves (and remove it); on the
//! emulated libibverbs they use the topology's second device and the emulator's control.

use backend_hw::HwVerbs;
use workspace_tests::conformance::{EmuLink, Env, LossyLinks, VethLink};

fn env() -> Env<HwVerbs> {
    let device = std::env::var("RDMA_DEVICE").expect(
        "RDMA_DEVICE names the device to test (e.g. rxe0); `cargo xtask test --backend hw --vm` sets it",
    );
    Env {
        verbs: HwVerbs::new(),
        device,
        port: 1,
        lossy: Some(if EmuLink::available() {
            LossyLinks::new(EmuLink::open)
        } else {
            LossyLinks::new(VethLink::open)
        }),
    }
}

workspace_tests::conformance_tests!(env());
