//! Where things are: the fabric's state directory, the emulator's build products.

use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::error::{setup, Error};
use crate::sys;

/// The directory of fabric `name`: `$XDG_RUNTIME_DIR/verbs-emu/NAME`, else
/// `/tmp/verbs-emu-UID/NAME`; made (0700) if missing, refused if another user owns it.
pub fn state_dir(name: &str) -> Result<PathBuf, Error> {
    if name.is_empty()
        || name.starts_with('.')
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return Err(Error::Usage(format!(
            "--fabric {name:?}: a fabric name is letters, digits, '-', '_' and '.'"
        )));
    }
    let (uid, _) = sys::ids();
    let base = match std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from) {
        Some(d) if d.is_absolute() && d.is_dir() => d.join("verbs-emu"),
        _ => std::env::temp_dir().join(format!("verbs-emu-{uid}")),
    };
    let dir = base.join(name);
    for d in [&base, &dir] {
        private_dir(d, uid)?;
    }
    Ok(dir)
}

fn private_dir(d: &Path, uid: u32) -> Result<(), Error> {
    match std::fs::DirBuilder::new().mode(0o700).create(d) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(setup(format!("cannot make {}: {e}", d.display()))),
    }
    let m = std::fs::symlink_metadata(d).map_err(|e| setup(format!("{}: {e}", d.display())))?;
    if !m.is_dir() || m.uid() != uid {
        return Err(setup(format!(
            "{} is not a directory of user {uid}: remove it or set XDG_RUNTIME_DIR",
            d.display()
        )));
    }
    Ok(())
}

/// The emulator's build products the launcher uses, found beside the launcher's binary
/// (`cargo build -p emulator -p verbs-emu` puts all three in `target/debug`).
#[derive(Debug, Clone)]
pub struct Emulator {
    /// `verbs-emu-fabric`.
    pub fabric: PathBuf,
    /// `libibverbs.so`, which is also librdmacm and libmlx5.
    pub library: PathBuf,
}

impl Emulator {
    /// Finds both beside the running binary.
    pub fn beside_me() -> Result<Self, Error> {
        let me = std::env::current_exe()
            .map_err(|e| setup(format!("cannot find the verbs-emu binary: {e}")))?;
        let dir = me.parent().unwrap_or(Path::new("/"));
        let find = |name: &str| {
            let p = dir.join(name);
            if p.is_file() {
                Ok(p)
            } else {
                Err(setup(format!(
                    "{name} is missing beside {}: build it with `cargo build -p emulator`",
                    me.display()
                )))
            }
        };
        Ok(Emulator {
            fabric: find("verbs-emu-fabric")?,
            library: find("libibverbs.so")?,
        })
    }

    /// `DIR/lib` holding `libibverbs.so.1`, `librdmacm.so.1` and `libmlx5.so.1`, links to
    /// the emulated library (the folder to put first on `LD_LIBRARY_PATH`).
    pub fn link_libraries(&self, dir: &Path) -> Result<PathBuf, Error> {
        let lib = dir.join("lib");
        private_dir(&lib, sys::ids().0)?;
        for name in ["libibverbs.so.1", "librdmacm.so.1", "libmlx5.so.1"] {
            let link = lib.join(name);
            if std::fs::read_link(&link).ok().as_deref() == Some(self.library.as_path()) {
                continue;
            }
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(&self.library, &link).map_err(|e| {
                setup(format!(
                    "cannot link {} to {}: {e}",
                    link.display(),
                    self.library.display()
                ))
            })?;
        }
        Ok(lib)
    }
}
