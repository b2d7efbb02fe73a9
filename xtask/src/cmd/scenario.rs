//! The scenario tool behind `cargo xtask demo`, `scenario`, `replay` and `swarm`.

use super::common::{cargo, exit_status, Error};

/// Runs the `scenario` tool (scenarios crate, release build) with `args` and returns its
/// exit status (it prints its own errors).
///
/// # Errors
/// When it cannot be built or started.
pub fn scenario_tool(args: &[String]) -> Result<i32, Error> {
    scenario_tool_in(true, args)
}

/// Runs the `scenario` tool with `args`, built in release or (where the test suite has
/// just built it, as in CI) debug; returns its exit status.
pub(crate) fn scenario_tool_in(release: bool, args: &[String]) -> Result<i32, Error> {
    let mut c = cargo();
    c.args(["run", "--quiet"]);
    if release {
        c.arg("--release");
    }
    c.args(["-p", "scenarios", "--bin", "scenario", "--"]);
    c.args(args);
    exit_status(c, "scenario tool")
}
