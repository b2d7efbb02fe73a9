//! What the emulator's integration tests share: the built library in a folder as
//! `libibverbs.so.1`, and running Debian's programs with it first on `LD_LIBRARY_PATH`.
//! A missing program or tool fails the test with the package to install (`cargo xtask
//! ci` installs them); nothing is skipped.

#![allow(dead_code)] // each test binary uses part of it

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The folder of the test binaries (`target/debug/deps`), where cargo also puts the
/// library it built for them (`cargo test` does not copy it up to `target/debug`).
fn deps_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    exe.parent()
        .expect("the test binary lives in target/<profile>/deps")
        .to_path_buf()
}

/// A folder holding the built emulator as `libibverbs.so.1`, the way programs look it up.
/// Made once per test binary; the link is replaced atomically (a rename), so a program
/// started meanwhile by another test never finds the folder without it.
pub fn lib_dir() -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let so = deps_dir().join("libibverbs.so");
        assert!(
            so.exists(),
            "{} is missing: cargo builds it with the emulator's tests",
            so.display()
        );
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("emulib");
        std::fs::create_dir_all(&dir).expect("create the library folder");
        let tmp = dir.join(format!(".libibverbs.so.1.{}", std::process::id()));
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(&so, &tmp).expect("link libibverbs.so.1");
        std::fs::rename(&tmp, dir.join("libibverbs.so.1")).expect("put libibverbs.so.1 in place");
        dir
    })
    .clone()
}

/// The absolute path of `program`, or a failure naming the Debian package that has it.
pub fn require(program: &str, package: &str) -> PathBuf {
    for dir in ["/usr/bin", "/usr/sbin", "/bin"] {
        let p = Path::new(dir).join(program);
        if p.exists() {
            return p;
        }
    }
    panic!(
        "{program} is not installed: install the Debian package {package} (as root: \
         apt-get install {package}; `cargo xtask ci` does it)"
    );
}

/// A command running `program` on the emulator (host `h1` unless `env` says otherwise).
pub fn emulated(program: &Path) -> Command {
    let mut c = Command::new(program);
    c.env("LD_LIBRARY_PATH", lib_dir())
        .env_remove("VERBS_EMU_HOST")
        .env_remove("VERBS_EMU_TOPOLOGY")
        .env_remove("VERBS_EMU_SEED")
        .env_remove("VERBS_EMU_FABRIC");
    c
}

/// Runs a command and returns its output, failing on a spawn error.
pub fn run(mut c: Command) -> Output {
    c.output()
        .unwrap_or_else(|e| panic!("cannot run {c:?}: {e}"))
}

/// Stdout as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Stderr as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}
