//! What the emulator's integration tests share: the built library in a folder as
//! `libibverbs.so.1`, and running Debian's programs with it first on `LD_LIBRARY_PATH`.
//! A missing program or tool fails the test with the package to install (`cargo xtask
//! ci` installs them); nothing is skipped.

#![allow(dead_code)] // each test binary uses part of it

pub mod fabric;
pub mod spead;
pub mod wire;

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

/// A folder holding the built emulator as `libibverbs.so.1`, `librdmacm.so.1` and
/// `libmlx5.so.1` (one library under three names, as `cargo xtask emu` links it), the way
/// programs look them up. Made once per test binary; each link is replaced atomically (a
/// rename), so a program started meanwhile by another test never finds one missing.
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
        for name in ["libibverbs.so.1", "librdmacm.so.1", "libmlx5.so.1"] {
            let tmp = dir.join(format!(".{name}.{}", std::process::id()));
            let _ = std::fs::remove_file(&tmp);
            std::os::unix::fs::symlink(&so, &tmp).expect("link the library");
            std::fs::rename(&tmp, dir.join(name)).expect("put the link in place");
        }
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

/// Builds `tests/c/NAME.c` against Debian's rdma-core headers, linked with `libs` (Debian's
/// link libraries: `-libverbs`, `-lrdmacm` ...); returns the program.
pub fn build_c(name: &str, libs: &[&str]) -> PathBuf {
    let gcc = require("gcc", "gcc");
    assert!(
        Path::new("/usr/include/infiniband/verbs.h").exists(),
        "infiniband/verbs.h is missing: install libibverbs-dev"
    );
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/c")
        .join(format!("{name}.c"));
    // Tests run in parallel and may build the same program: each build has its own file.
    static BUILDS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = BUILDS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let exe = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{n}"));
    let mut c = Command::new(gcc);
    c.args(["-Wall", "-Werror", "-O1", "-pthread", "-o"])
        .arg(&exe)
        .arg(&src)
        .args(libs);
    let o = run(c);
    assert!(o.status.success(), "gcc {name}.c: {}", stderr(&o));
    exe
}

/// Builds `spead-send` and `spead-recv` with the `hw` feature into this test's target
/// folder (the test binary's `target/`) and returns the profile folder holding them.
pub fn hw_tools() -> PathBuf {
    let profile = std::env::current_exe()
        .expect("the test binary's path")
        .parent()
        .and_then(Path::parent)
        .expect("the test binary lives in target/<profile>/deps")
        .to_path_buf();
    let target = profile
        .parent()
        .expect("target/<profile> is in the target folder")
        .to_path_buf();
    let out = Command::new(env!("CARGO"))
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
        .args([
            "build",
            "--quiet",
            "-p",
            "spead-tools",
            "--features",
            "hw",
            "--bins",
        ])
        .arg("--target-dir")
        .arg(&target)
        .output()
        .expect("run cargo build");
    assert!(
        out.status.success(),
        "building spead-tools with hw (needs libibverbs-dev): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    target.join("debug")
}
