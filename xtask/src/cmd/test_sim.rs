//! `cargo xtask test --backend sim`.

use super::common::{cargo, run, Error};

/// `cargo xtask test --backend sim`: every test that needs no device and no system package.
pub fn test_sim(rest: &[String]) -> Result<(), Error> {
    let mut c = cargo();
    c.args([
        "test",
        "--workspace",
        "--exclude",
        "xtask",
        // The emulator needs Debian packages (rdma-core's headers, its programs): `cargo
        // xtask ci` installs them and runs its tests on their own.
        "--exclude",
        "emulator",
        // The launcher runs the emulator's programs as hosts (root or user namespaces,
        // Debian's programs): `cargo xtask ci` runs its tests after the emulator's.
        "--exclude",
        "verbs-emu",
        "--features",
        "verbs-api/mock",
    ]);
    if !rest.is_empty() {
        c.arg("--").args(rest);
    }
    run(c, "tests (backend sim)")
}
