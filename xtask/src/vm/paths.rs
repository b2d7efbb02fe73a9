//! Where the VM's files go: the workspace, the cache under `target/softroce/`, and private
//! temporary names next to a file being written.

use std::path::{Path, PathBuf};

/// The workspace root (the parent of the xtask crate).
pub fn workspace_root() -> PathBuf {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(PathBuf::from).unwrap_or(manifest)
}

/// `target/softroce/` (under `CARGO_TARGET_DIR` when that is set).
pub fn cache_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|t| {
            if t.is_absolute() {
                t
            } else {
                workspace_root().join(t)
            }
        })
        .unwrap_or_else(|| workspace_root().join("target"));
    target.join("softroce")
}

/// `path` with `.SUFFIX-PID` appended: a private temporary name next to it, so that
/// concurrent runs never write the same file.
pub(crate) fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{suffix}-{}", std::process::id()));
    PathBuf::from(name)
}

pub(crate) fn io_err(what: &str, p: &Path, e: std::io::Error) -> String {
    format!("{what} {}: {e}", p.display())
}
