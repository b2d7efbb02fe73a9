//! `cargo xtask test --wire`: the fabric's ports to real networks alone.

use super::common::{cargo, run, Error};
use crate::vm;

/// Installed for the wire tests: QEMU and its network boot ROM (a real `-netdev stream`
/// NIC on the fabric), on top of the emulator's packages.
pub const WIRE_PACKAGES: &[vm::packages::Package] = &[
    vm::packages::Package {
        name: "qemu-system-x86",
        why: "a real QEMU whose -netdev stream NIC joins the fabric's QEMU port",
    },
    vm::packages::Package {
        name: "ipxe-qemu",
        why: "the NIC boot ROM that sends the DHCP exchange the QEMU port test checks",
    },
];

/// `cargo xtask test --wire [-- TEST-ARGS]`: the VXLAN and QEMU-stream ports (unit tests,
/// the switch's uplinks in backend-sim), `emulator/tests/wire.rs` (a Linux vxlan peer in
/// a network namespace, two fabrics joined by VXLAN, a lossy port, a real QEMU NIC) and
/// `emulator/tests/wire_cm.rs` (rping and udaddy across two fabrics, CM MADs lost),
/// then the interop step (`super::interop`): the Soft-RoCE VM on the fabric's QEMU port,
/// real rxe against the emulated NIC, and the split conformance cases (`super::split`).
/// The namespace tests need root.
///
/// # Errors
/// A failing test run, named.
pub fn test_wire(rest: &[String]) -> Result<(), Error> {
    vm::packages::ensure_installed(&[vm::packages::EMU_PACKAGES, WIRE_PACKAGES])?;
    let mut units = cargo();
    units.args(["test", "-p", "emulator", "--lib", "fabric::ports"]);
    run(units, "the fabric ports' unit tests")?;
    let mut uplink = cargo();
    uplink.args(["test", "-p", "backend-sim", "--test", "fabric", "uplink"]);
    run(uplink, "the simulated switch's uplinks")?;
    let mut wire = cargo();
    wire.args([
        "test", "-p", "emulator", "--test", "wire", "--test", "wire_cm",
    ]);
    if !rest.is_empty() {
        wire.arg("--").args(rest);
    }
    run(wire, "the wire tests (emulator/tests/wire.rs, wire_cm.rs)")?;
    eprintln!("xtask: the interop step: real rxe in the VM against the emulated NIC");
    super::interop::run(&[])?;
    eprintln!("xtask: the split conformance cases: one QP on rxe in the VM, one emulated");
    super::split::run()
}
