//! `cargo xtask test --backend emu`: the hardware test suites (backend-hw's device tests,
//! the conformance cases, SPEAD over verbs and the differential runner), built against
//! Debian's libibverbs exactly as for the Soft-RoCE VM, run unmodified on the emulated
//! libibverbs instead. With the simulator direct (`--backend sim`) and rxe in the VM
//! (`--backend hw --vm`), every conformance case thus runs three ways, except the three
//! about packet loss (`lossy_link::`): they need a second device behind a link whose
//! packets a case can drop, and an emulated host has one device, whose link a program
//! cannot yet tell to lose a chosen packet.

use std::path::Path;

use crate::cmd::{build_hw_tests, emu, root, EmuArgs, Error};
use crate::vm;

/// The topology the suites run on: one host with one rxe-personality device, as in the VM.
const TOPOLOGY: &str = "emulator/topologies/one-rxe-host.toml";
/// The device and interface address the suites are told to use (the topology's).
const DEVICE: &str = "rxe0";
const IFACE: &str = "10.100.0.1";

/// Builds the hardware suites and runs each test binary on the emulated libibverbs, one
/// test at a time (the tests share one device and its multicast groups, as in the VM).
///
/// # Errors
/// A build failure, or the names of the binaries whose tests failed.
pub fn run(rest: &[String]) -> Result<(), Error> {
    vm::packages::ensure_installed(&[vm::packages::EMU_PACKAGES])?;
    let build = build_hw_tests()?;
    let topology = root().join(TOPOLOGY);
    let mut failed = Vec::new();
    for b in build.tests.iter().filter(|b| b.tests != Some(0)) {
        let mut cmd = vec![
            "env".to_owned(),
            "-C".to_owned(),
            b.cwd.to_string_lossy().into_owned(),
            format!("RDMA_DEVICE={DEVICE}"),
            format!("RDMA_IFACE={IFACE}"),
            b.executable.to_string_lossy().into_owned(),
            "--test-threads=1".to_owned(),
            "--skip".to_owned(),
            "lossy_link::".to_owned(),
        ];
        cmd.extend(rest.iter().cloned());
        eprintln!("xtask: on the emulated libibverbs: {}", name(&b.executable));
        let args = EmuArgs {
            topology: Some(topology.clone()),
            ..EmuArgs::default()
        };
        let code = emu(&cmd, &args)?;
        if code != 0 {
            failed.push(format!("{} (exit {code})", name(&b.executable)));
        }
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "hardware suites on the emulated libibverbs failed: {}",
            failed.join(", ")
        ))
    }
}

fn name(exe: &Path) -> String {
    exe.file_name().map_or_else(
        || exe.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}
