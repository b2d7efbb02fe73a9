//! `cargo xtask ci`: every check of a submission, in order.

use super::common::{cargo, root, run, Error};
use super::soak::soak_in;
use super::test_hw::{test_hw, HW_PACKAGES};
use super::test_sim::test_sim;
use super::{emu_suite, fuzz, miri};
use crate::vm;

/// Seconds each fuzz target runs in CI (the long form: `cargo xtask fuzz --time 3600`).
pub const CI_FUZZ_SECONDS: u64 = 15;

/// Seconds of the soak in CI and of `cargo xtask soak` without `--minutes`.
pub const CI_SOAK_SECONDS: u64 = 20;

/// `cargo xtask ci`: what `.ci/run` calls on every submission.
pub fn ci() -> Result<(), Error> {
    // The workspace's clippy builds the emulator, whose build reads rdma-core's headers.
    vm::packages::ensure_installed(&[vm::packages::EMU_PACKAGES])?;
    let mut fmt = cargo();
    fmt.args(["fmt", "--all", "--", "--check"]);
    run(fmt, "format check")?;

    let mut clippy = cargo();
    clippy.args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--features",
        "verbs-api/mock",
        "--",
        "-D",
        "warnings",
    ]);
    run(clippy, "clippy")?;

    let mut doc = cargo();
    doc.args([
        "doc",
        "--no-deps",
        "-p",
        "verbs-api",
        "--features",
        "verbs-api/mock",
    ]);
    doc.env("RUSTDOCFLAGS", "-D warnings");
    run(doc, "verbs-api docs")?;

    test_sim(&[])?;
    // xtask's own tests: its bad-input table (no build, no VM: every row is refused
    // while the arguments are checked).
    let mut xtask = cargo();
    xtask.args(["test", "-p", "xtask"]);
    run(xtask, "xtask tests")?;
    // The emulated libibverbs: unmodified Debian programs and C programs on it.
    // The emulator's tests include the wire tests (a real QEMU NIC on the fabric).
    vm::packages::ensure_installed(&[super::test_wire::WIRE_PACKAGES])?;
    let mut emu = cargo();
    emu.args(["test", "-p", "emulator"]);
    run(
        emu,
        "emulator tests (Debian programs on the emulated libibverbs)",
    )?;
    // The launcher (`verbs-emu run`): hosts with their addresses, device files and sysfs,
    // unmodified programs (pingpongs, perftest, spead2, UCX, libfabric, qperf) between
    // two launched hosts, as root and as an unprivileged user.
    let mut launcher = cargo();
    launcher.args(["test", "-p", "verbs-emu"]);
    run(launcher, "launcher tests (verbs-emu run)")?;
    // The hardware suites (conformance, backend-hw, SPEAD over verbs, differential),
    // unmodified, on the emulated libibverbs.
    emu_suite::run(&[])?;
    // The tarball of the emulated NIC, unpacked where nothing of the workspace is
    // reachable, running Debian's programs alone.
    let tarball = super::dist::make()?;
    super::dist::verify(&tarball)?;
    // And in a fresh Debian 12 system (debootstrap minbase with ibverbs-utils and
    // iproute2, chrooted; it needs root, as CI's machine is).
    super::dist::verify_debian(&tarball)?;
    // The short form of the fault swarm is the `swarm` test binary of scenarios (seeds
    // 0..400), which the simulator suite above runs; the long form: `cargo xtask swarm
    // --seeds 0..10000`, or sharded with nextest or Slurm (scenarios/SWARM.md).
    // The short soak (the long form: `cargo xtask soak --minutes 10`), debug build too.
    soak_in(false, CI_SOAK_SECONDS)?;
    // The short form of every fuzz target.
    fuzz::run(&root(), None, fuzz::Budget::Seconds(CI_FUZZ_SECONDS))?;
    // The slot pool's and the simulator's unsafe code under Miri.
    miri::run(&root())?;
    // The checks that decode our captures with tshark (a Debian package, so not part of
    // the simulator suite): the simulator's RoCEv2/RAW capture and spead-capture's pcaps.
    vm::packages::ensure_installed(&[vm::packages::TOOL_PACKAGES])?;
    let mut tshark = cargo();
    tshark.args([
        "test",
        "-p",
        "backend-sim",
        "--features",
        "backend-sim/tshark",
        "--test",
        "verbs_system",
    ]);
    tshark.args([
        "-p",
        "spead-tools",
        "--features",
        "spead-tools/tshark",
        "--test",
        "spead_capture",
    ]);
    run(tshark, "capture checks with tshark")?;
    // The hardware backend and its tests must also pass clippy: they need libibverbs-dev.
    vm::packages::ensure_installed(&[vm::packages::BUILD_PACKAGES])?;
    let mut clippy_hw = cargo();
    clippy_hw.args(["clippy", "--all-targets"]);
    for (package, feature) in HW_PACKAGES {
        clippy_hw.args(["-p", package, "--features", &format!("{package}/{feature}")]);
    }
    clippy_hw.args([
        "-p",
        "spead-tools",
        "--features",
        "spead-tools/hw",
        "--",
        "-D",
        "warnings",
    ]);
    run(clippy_hw, "clippy (hardware features)")?;
    // Real verbs on every run: backend-hw's device tests, the conformance suite, SPEAD
    // over UD verbs and the differential scenarios, on Soft-RoCE in a throwaway VM.
    test_hw(true, 1500, &[])?;
    // On the wire: real rxe in a VM whose NIC is on the emulated switch, against emulated
    // hosts (RC and UD pingpongs, perftest and rping, each way, on the IPv4 and the
    // link-local GID; SPEAD
    // between RAW QPs and the VM's kernel sockets; a lossy port), captures checked by
    // tshark and netwire's ICRC (`cargo xtask test --wire --interop` alone).
    super::interop::run(&[])?;
    // The split conformance cases: one QP on rxe in the VM, one emulated, both ways round,
    // against both on rxe, and under loss (`cargo xtask test --wire --split` alone).
    super::split::run()?;
    Ok(())
}
