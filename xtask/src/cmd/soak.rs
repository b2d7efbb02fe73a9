//! `cargo xtask soak`.

use super::common::{cargo, run, Error};

/// `cargo xtask soak`: the `soak` program of workspace-tests (release build) for
/// `seconds`.
///
/// # Errors
/// When it cannot be built, or finds a drop not counted, a wrong heap or memory growing.
pub fn soak(seconds: u64) -> Result<(), Error> {
    soak_in(true, seconds)
}

pub(crate) fn soak_in(release: bool, seconds: u64) -> Result<(), Error> {
    let mut c = cargo();
    c.args(["run", "--quiet"]);
    if release {
        c.arg("--release");
    }
    c.args(["-p", "workspace-tests", "--bin", "soak", "--"]);
    c.args(["--seconds", &seconds.to_string()]);
    run(c, "soak")
}
