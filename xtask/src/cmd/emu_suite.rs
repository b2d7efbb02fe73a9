//! `cargo xtask test --backend emu`: the hardware test suites (backend-hw's device tests,
//! the conformance cases, SPEAD over verbs and the differential runner), built against
//! Debian's libibverbs exactly as for the Soft-RoCE VM, run unmodified on the emulated
//! libibverbs instead. With the simulator direct (`--backend sim`) and rxe in the VM
//! (`--backend hw --vm`), every conformance case thus runs three ways. The cases about
//! packet loss (`lossy_link::`) need a second device behind a link a case can lose a
//! packet on: they run in a second pass, on a host with two devices and without a fabric
//! process (the emulator's `verbs_emu_lose_next_frame` chooses the frame, as the
//! simulator's drop list does). The cases of work queues, indirection tables, RSS QPs and
//! striding RQs (`queues::`), which on rxe check its refusals, run a third time on a
//! host whose device is an mlx5 (`mlx5_0`), through the emulated libibverbs and libmlx5. Last, without TEST-ARGS, the split conformance cases
//! with both sides emulated (`super::split_emu`).

use std::path::Path;

use super::common::{root, Error};
use super::emu::{emu, EmuArgs};
use super::test_hw::{build_hw_tests, TestBinary};
use crate::vm;

/// The topology the suites run on: one host with one rxe-personality device, as in the VM.
const TOPOLOGY: &str = "emulator/topologies/one-rxe-host.toml";
/// The topology of the loss cases: the same host with a second device, rxe1.
const LOSSY_TOPOLOGY: &str = "emulator/topologies/one-rxe-host-two-devices.toml";
/// The cases about loss (a module of the conformance suite).
const LOSSY: &str = "lossy_link::";
/// The topology, device and module of the conformance cases that need an mlx5.
const MLX5_TOPOLOGY: &str = "emulator/topologies/one-mlx5-host.toml";
const MLX5_DEVICE: &str = "mlx5_0";
const QUEUES: &str = "queues::";
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
    let mut failed = Vec::new();
    for b in build.tests.iter().filter(|b| b.tests != Some(0)) {
        // Every test but the loss cases, through the fabric process.
        let mut filter = vec!["--skip".to_owned(), LOSSY.to_owned()];
        filter.extend(rest.iter().cloned());
        let args = EmuArgs {
            topology: Some(root().join(TOPOLOGY)),
            debug: true,
            direct: true,
            ..EmuArgs::default()
        };
        eprintln!("xtask: on the emulated libibverbs: {}", name(&b.executable));
        let code = emu(&command(b, DEVICE, &filter), &args)?;
        if code != 0 {
            failed.push(format!("{} (exit {code})", name(&b.executable)));
        }
    }
    // The loss cases, where they are: on two devices of one host, without a fabric process.
    for b in build
        .tests
        .iter()
        .filter(|b| name(&b.executable).starts_with("conformance_hw"))
    {
        let mut filter = vec![LOSSY.to_owned()];
        filter.extend(rest.iter().cloned());
        let args = EmuArgs {
            topology: Some(root().join(LOSSY_TOPOLOGY)),
            no_fabric: true,
            debug: true,
            direct: true,
            ..EmuArgs::default()
        };
        eprintln!(
            "xtask: on the emulated libibverbs, the loss cases: {}",
            name(&b.executable)
        );
        let code = emu(&command(b, DEVICE, &filter), &args)?;
        if code != 0 {
            failed.push(format!("{} {LOSSY} (exit {code})", name(&b.executable)));
        }
        // The queue cases again, on an mlx5: all of them, or those the caller's filters
        // name (libtest's filters select any test one matches, so a filter naming other
        // cases would run rxe's cases on the mlx5).
        if !rest.is_empty() && !rest.iter().any(|a| a.contains("queues")) {
            eprintln!("xtask: no {QUEUES} case selected by {rest:?}: not run on {MLX5_DEVICE}");
            continue;
        }
        let mut filter = vec![QUEUES.to_owned()];
        filter.extend(rest.iter().cloned());
        let args = EmuArgs {
            topology: Some(root().join(MLX5_TOPOLOGY)),
            debug: true,
            direct: true,
            ..EmuArgs::default()
        };
        eprintln!(
            "xtask: on the emulated libibverbs and libmlx5 ({MLX5_DEVICE}), the {QUEUES} cases: {}",
            name(&b.executable)
        );
        let code = emu(&command(b, MLX5_DEVICE, &filter), &args)?;
        if code != 0 {
            failed.push(format!(
                "{} {QUEUES} on {MLX5_DEVICE} (exit {code})",
                name(&b.executable)
            ));
        }
    }
    // The split conformance cases, both sides emulated, against rxe's committed outcome
    // (not when TEST-ARGS filter the suites).
    if rest.is_empty() {
        if let Err(e) = super::split_emu::run() {
            eprintln!("xtask: {e}");
            failed.push("the split cases, both sides emulated".into());
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

/// Runs test binary `b` in its folder with `device` and the suite's address, one test at
/// a time, with `args` (libtest's filters) after.
fn command(b: &TestBinary, device: &str, args: &[String]) -> Vec<String> {
    let mut cmd = vec![
        "env".to_owned(),
        "-C".to_owned(),
        b.cwd.to_string_lossy().into_owned(),
        format!("RDMA_DEVICE={device}"),
        format!("RDMA_IFACE={IFACE}"),
        b.executable.to_string_lossy().into_owned(),
        "--test-threads=1".to_owned(),
    ];
    cmd.extend(args.iter().cloned());
    cmd
}

fn name(exe: &Path) -> String {
    exe.file_name().map_or_else(
        || exe.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}
