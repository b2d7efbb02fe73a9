//! What every command uses: the workspace root, cargo, and running a command with its
//! failure as an error for the user.

use std::path::{Path, PathBuf};
use std::process::Command;

/// An error that ends an xtask command, with a message for the user.
pub type Error = String;

/// The workspace root (the parent of this crate's directory).
pub fn root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(PathBuf::from).unwrap_or(manifest)
}

pub fn cargo() -> Command {
    let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    c.current_dir(root());
    c
}

/// Runs a command, echoing it first, and turns a non-zero exit into an error.
pub fn run(mut c: Command, what: &str) -> Result<(), Error> {
    eprintln!("xtask: {what}: {c:?}");
    let status = c
        .status()
        .map_err(|e| format!("{what}: cannot start {c:?}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{what} failed ({status})"))
    }
}

/// Builds `args` (packages and features) with `cargo build --release --quiet`, saying
/// `what` is built.
///
/// # Errors
/// The build failing, named.
pub fn build_release(args: &[&str], what: &str) -> Result<(), Error> {
    let mut build = cargo();
    build.args(["build", "--release", "--quiet"]).args(args);
    run(build, &format!("building {what} (release)"))
}

/// Runs a command, echoing it first, and returns its exit status (128 + the signal when
/// a signal ended it).
pub fn exit_status(mut c: Command, what: &str) -> Result<i32, Error> {
    eprintln!("xtask: {what}: {c:?}");
    let status = c
        .status()
        .map_err(|e| format!("{what}: cannot start {c:?}: {e}"))?;
    use std::os::unix::process::ExitStatusExt;
    Ok(status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1))
}

/// Makes `dir` hold `libibverbs.so.1`, `librdmacm.so.1` and `libmlx5.so.1`, links to the
/// built emulated library `so` (one file serves the three sonames): the folder to put
/// first on `LD_LIBRARY_PATH`. Returns `dir`.
///
/// # Errors
/// The folder or a link cannot be made, named.
pub fn link_emulated_libraries(so: &Path, dir: &Path) -> Result<PathBuf, Error> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    for name in ["libibverbs.so.1", "librdmacm.so.1", "libmlx5.so.1"] {
        let link = dir.join(name);
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(so, &link)
            .map_err(|e| format!("cannot link {} to {}: {e}", link.display(), so.display()))?;
    }
    Ok(dir.to_path_buf())
}
