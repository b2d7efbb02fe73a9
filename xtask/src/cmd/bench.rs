//! `cargo xtask bench`.

use super::common::{cargo, run, Error};
use super::scenario::scenario_tool;

/// `cargo xtask bench`: the benchmarks, each printing its numbers (spead's heap assembly
/// and UDP receive against spead2, and the simulator's RAW_PACKET path).
pub fn bench() -> Result<(), Error> {
    let mut spead = cargo();
    spead.args(["bench", "-p", "spead", "--bench", "assembly"]);
    run(spead, "spead benchmark (ours vs spead2)")?;
    let mut codec = cargo();
    codec.args(["bench", "-p", "spead", "--bench", "codec"]);
    run(
        codec,
        "spead codec and assembly micro-benchmarks (criterion)",
    )?;
    let mut sim = cargo();
    sim.args(["bench", "-p", "backend-sim", "--bench", "raw_path"]);
    run(
        sim,
        "simulator benchmark (RAW_PACKET path; per-frame cost from 10^4 to 10^7 frames)",
    )?;
    let mut payload = cargo();
    payload.args(["bench", "-p", "scenarios", "--bench", "payload"]);
    run(payload, "scenario harness micro-benchmarks (criterion)")?;
    match scenario_tool(&["meerkat".to_owned()])? {
        0 => Ok(()),
        code => Err(format!("scenario meerkat failed (exit status {code})")),
    }
}
