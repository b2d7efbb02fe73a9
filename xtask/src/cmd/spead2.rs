//! spead2 for the commands that run it (the interop step's SPEAD cases, the spead2 pair of
//! `cargo xtask bench emu`): the Python of `target/spead2-venv`, the virtual environment
//! the workspace's tests install spead2 into (`tests/src/spead2.rs`).

use std::path::{Path, PathBuf};
use std::process::Command;

use super::common::{root, Error};

/// The spead2 version installed (as `tests/src/spead2.rs` installs it).
const SPEAD2: &str = "spead2==4.5.1";

/// The Python of `target/spead2-venv` with spead2 and numpy, installing them from PyPI
/// into a new virtual environment there when they are missing.
///
/// # Errors
/// The environment cannot be made or spead2 cannot be installed into it.
pub fn python() -> Result<PathBuf, Error> {
    let venv = root().join("target/spead2-venv");
    let python = venv.join("bin/python");
    let has = |p: &Path| {
        Command::new(p)
            .args(["-c", "import spead2, numpy"])
            .status()
            .is_ok_and(|s| s.success())
    };
    if has(&python) {
        return Ok(python);
    }
    eprintln!("xtask: installing {SPEAD2} into {}", venv.display());
    let ok = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .status()
        .is_ok_and(|s| s.success())
        && Command::new(&python)
            .args(["-m", "pip", "install", "--quiet", SPEAD2, "numpy"])
            .status()
            .is_ok_and(|s| s.success());
    if ok && has(&python) {
        Ok(python)
    } else {
        Err(format!("cannot install spead2 into {}", venv.display()))
    }
}
