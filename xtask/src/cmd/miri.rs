//! `cargo xtask miri`: the tests that exercise our `unsafe` code outside FFI under Miri
//! (nightly): the slot pool's raw slices over registered memory (verbs-api's interaction
//! tests on mocks, and the pool driven against its model on the simulator, whose DMA into
//! registered memory is raw-pointer code too), and spead's chunk cells, which several
//! reader threads write at once.
//!
//! It installs the `miri` and `rust-src` components of the nightly toolchain when missing.

use std::path::Path;
use std::process::{Command, Stdio};

use super::common::Error;

/// The test runs, as `cargo miri test` arguments.
pub const RUNS: &[&[&str]] = &[
    &[
        "-p",
        "verbs-api",
        "--features",
        "mock",
        "--test",
        "interactions",
    ],
    &[
        "-p",
        "workspace-tests",
        "--test",
        "pool_model",
        "--",
        "a_plain_exchange_delivers_every_message",
        "forged_completions_are_refused",
    ],
    // Chunk groups' lock-free writes into shared chunks (raw slices of claimed
    // ranges, the close handshake across threads, reused cells).
    &[
        "-p",
        "spead",
        "--lib",
        "--",
        "recv::chunk::cell",
        "recv::chunk::tests::group::heaps_placed_over_a_live_heaps_bytes_are_rejected",
        "recv::chunk::tests::group::a_small_lossy_group_on_threads",
    ],
];

fn ensure_miri(root: &Path) -> Result<(), Error> {
    let have = Command::new("cargo")
        .args(["+nightly", "miri", "--version"])
        .current_dir(root)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if have {
        return Ok(());
    }
    eprintln!("xtask miri: rustup component add miri rust-src --toolchain nightly");
    let status = Command::new("rustup")
        .args([
            "component",
            "add",
            "miri",
            "rust-src",
            "--toolchain",
            "nightly",
        ])
        .status()
        .map_err(|e| format!("cannot start rustup: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "rustup component add miri rust-src --toolchain nightly failed ({status}); \
             Miri needs the nightly toolchain (rustup toolchain install nightly)"
        ))
    }
}

/// Runs every entry of [`RUNS`] under Miri.
///
/// # Errors
/// Missing tools, or a run that fails (undefined behaviour or a failing test).
pub fn run(root: &Path) -> Result<(), Error> {
    ensure_miri(root)?;
    for args in RUNS {
        let mut c = Command::new("cargo");
        c.current_dir(root)
            .args(["+nightly", "miri", "test"])
            .args(*args);
        eprintln!("xtask miri: {c:?}");
        let status = c
            .status()
            .map_err(|e| format!("cannot start cargo miri: {e}"))?;
        if !status.success() {
            return Err(format!(
                "miri: `cargo miri test {}` failed ({status})",
                args.join(" ")
            ));
        }
    }
    Ok(())
}
