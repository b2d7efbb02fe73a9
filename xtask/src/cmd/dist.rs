//! `cargo xtask dist`: the emulated NIC as a self-contained tarball in `target/dist/`, for
//! projects that want it in their CI without Rust, a compiler, rdma-core's headers or
//! libclang.
//!
//! The tarball holds, under `verbs-emu-VERSION-x86_64-linux/`:
//! - `lib/`: the emulated `libibverbs.so.1` (release build), with `librdmacm.so.1` and
//!   `libmlx5.so.1` linking to it (one library serves the three sonames);
//! - `bin/`: `verbs-emu` (the launcher: `verbs-emu run --host H -- CMD` runs CMD as a host
//!   of the emulated fabric, no root needed) and `verbs-emu-fabric` (the emulated switch);
//! - `share/verbs-emu/topologies/`: the topology files (`default.toml` is the one used
//!   when none is named);
//! - `README.md`: how to use it.
//!
//! The library, the fabric and the launcher need only glibc and libgcc_s (`ldd` lists
//! nothing else); the launcher also runs `ip` (iproute2). `cargo xtask dist --verify`
//! then unpacks the tarball into an empty folder and, in a mount namespace where the
//! workspace is hidden under an empty tmpfs, runs Debian's `ibv_devinfo` with the library
//! alone, then through the launcher `ibv_devinfo` and an `ibv_rc_pingpong` server on h1
//! and client on h2 (10.100.0.1) with nothing but the unpacked files: exact output
//! checked. `cargo xtask dist --verify-debian` (root) runs the same checks in a fresh
//! Debian 12 system: a `debootstrap --variant=minbase` root file system holding only
//! `ibverbs-utils` and `iproute2` (made once under `target/dist/debian12/`), the tarball
//! unpacked into its `/opt`, the checks run chrooted into it.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::common::{root, run, Error};
use crate::vm;

/// The folder name inside the tarball (and the tarball's name without `.tar.gz`).
pub fn dist_name() -> String {
    format!("verbs-emu-{}-x86_64-linux", env!("CARGO_PKG_VERSION"))
}

const README: &str = "\
# verbs-emu: an emulated RDMA NIC

Drop-in `libibverbs.so.1`, `librdmacm.so.1` and `libmlx5.so.1` (rdma-core 44's sonames,
symbol versions and struct layouts) over a simulated NIC and switch: unmodified,
dynamically linked verbs programs (rdma-core's tools, perftest, rping, pyverbs, spead2)
run without an RDMA device. Built for x86_64 Debian 12 (glibc 2.36) and later.

Programs as hosts of the emulated fabric, each command a host with its address on eth0
(10.100.0.N/24 for hN), /dev/infiniband/uverbs0 and the device's sysfs entries, without
root (unprivileged user and network namespaces) and without any set-up:

    bin/verbs-emu run -- ibv_devinfo -v
    bin/verbs-emu run --host h1 -- ibv_rc_pingpong -g 1 &
    sleep 1; bin/verbs-emu run --host h2 -- ibv_rc_pingpong -g 1 10.100.0.1
    bin/verbs-emu run --host h1 -- python3 my_spead2_receiver.py &
    bin/verbs-emu run --host h2 -- python3 my_spead2_sender.py

`bin/verbs-emu run --help` lists the options (`--topology FILE`, `--seed N`, `--pcap OUT`
for a capture of every frame, `--fabric NAME` for a second fabric).
`share/verbs-emu/topologies/default.toml` describes the default hosts.

Without the launcher, one program simulating every host itself:

    LD_LIBRARY_PATH=$PWD/lib ibv_devinfo -v

Environment read by the library: `VERBS_EMU_HOST` (h1 by default), `VERBS_EMU_TOPOLOGY`,
`VERBS_EMU_SEED`, `VERBS_EMU_FABRIC` (a fabric's socket), `VERBS_EMU_LEAKS=1` (report
objects not destroyed at exit). The project's docs/emulator.md says what is emulated.

In a CI job (Debian 12 or later with the programs to test, e.g. ibverbs-utils):

    tar -xzf verbs-emu-*-x86_64-linux.tar.gz
    verbs-emu-*/bin/verbs-emu run -- python3 -m pytest tests/

";

/// Builds the release library and fabric and writes `target/dist/NAME.tar.gz`; returns
/// its path.
///
/// # Errors
/// A build, copy or `tar` failure, named.
pub fn make() -> Result<PathBuf, Error> {
    vm::packages::ensure_installed(&[vm::packages::EMU_PACKAGES])?;
    super::common::build_release(
        &["-p", "emulator", "-p", "verbs-emu"],
        "the emulated libraries and the fabric",
    )?;
    let release = root().join("target/release");
    let out = root().join("target/dist");
    let stage = out.join(dist_name());
    let _ = std::fs::remove_dir_all(&stage);
    for d in ["bin", "lib", "share/verbs-emu/topologies"] {
        mkdir(&stage.join(d))?;
    }
    copy(
        &release.join("libibverbs.so"),
        &stage.join("lib/libibverbs.so.1"),
    )?;
    for name in ["librdmacm.so.1", "libmlx5.so.1"] {
        let link = stage.join("lib").join(name);
        std::os::unix::fs::symlink("libibverbs.so.1", &link)
            .map_err(|e| format!("cannot link {}: {e}", link.display()))?;
    }
    for bin in ["verbs-emu", "verbs-emu-fabric"] {
        copy(&release.join(bin), &stage.join("bin").join(bin))?;
    }
    let topologies = root().join("emulator/topologies");
    for e in std::fs::read_dir(&topologies)
        .map_err(|e| format!("cannot read {}: {e}", topologies.display()))?
    {
        let p = e
            .map_err(|e| format!("{}: {e}", topologies.display()))?
            .path();
        if p.extension().is_some_and(|x| x == "toml") {
            let name = p.file_name().unwrap_or_default();
            copy(&p, &stage.join("share/verbs-emu/topologies").join(name))?;
        }
    }
    std::fs::write(stage.join("README.md"), README)
        .map_err(|e| format!("cannot write the README: {e}"))?;
    let tarball = out.join(format!("{}.tar.gz", dist_name()));
    let mut tar = Command::new("tar");
    tar.arg("-czf")
        .arg(&tarball)
        .arg("-C")
        .arg(&out)
        .arg(dist_name());
    run(tar, "packing the tarball")?;
    Ok(tarball)
}

fn mkdir(p: &Path) -> Result<(), Error> {
    std::fs::create_dir_all(p).map_err(|e| format!("cannot create {}: {e}", p.display()))
}

fn copy(from: &Path, to: &Path) -> Result<(), Error> {
    std::fs::copy(from, to)
        .map(|_| ())
        .map_err(|e| format!("cannot copy {} to {}: {e}", from.display(), to.display()))
}

/// The checks `--verify` runs inside the namespace: `$1` is the unpacked folder. Each
/// line of output it prints is a check that passed; any failure exits non-zero with the
/// reason.
const VERIFY_SCRIPT: &str = r#"set -eu
d=$1
cd "$d"
fail() { echo "dist verify: $*" >&2; exit 1; }
[ -e "$WORKSPACE/Cargo.toml" ] && fail "the workspace is still reachable at $WORKSPACE"
out=$(LD_LIBRARY_PATH=$d/lib ibv_devinfo) || fail "ibv_devinfo exited $?"
printf '%s\n' "$out" | grep -qx 'hca_id:	mlx5_0' || fail "ibv_devinfo did not list mlx5_0: $out"
echo "ibv_devinfo with lib/ alone: mlx5_0"
out=$(bin/verbs-emu run --fabric dist-verify --host h2 -- ibv_devinfo) || fail "verbs-emu run ibv_devinfo exited $?"
printf '%s\n' "$out" | grep -qx 'hca_id:	mlx5_0' || fail "ibv_devinfo under the launcher: $out"
echo "verbs-emu run --host h2 -- ibv_devinfo: mlx5_0"
timeout 120 bin/verbs-emu run --fabric dist-verify --host h1 -- ibv_rc_pingpong -g 1 -p 18999 > server.out 2>&1 &
server=$!
sleep 2
timeout 120 bin/verbs-emu run --fabric dist-verify --host h2 -- ibv_rc_pingpong -g 1 -p 18999 10.100.0.1 > client.out 2>&1 || fail "client: $(cat client.out)"
wait $server || fail "server: $(cat server.out)"
grep -q '^8192000 bytes in' client.out || fail "client output: $(cat client.out)"
grep -q '^1000 iters in' server.out || fail "server output: $(cat server.out)"
echo "verbs-emu run: ibv_rc_pingpong h1 <-> h2 (10.100.0.1): 8192000 bytes, 1000 iters each way"
"#;

/// What the fresh Debian 12 system of [`verify_debian`] holds besides `debootstrap
/// --variant=minbase`: the programs the checks run (and `ip`, which the launcher runs).
const DEBIAN_PROGRAMS: &str = "ibverbs-utils,iproute2";

/// debootstrap, to make the fresh Debian 12 system of [`verify_debian`].
const DEBOOTSTRAP: &[vm::packages::Package] = &[vm::packages::Package {
    name: "debootstrap",
    why: "a fresh Debian 12 root file system for `cargo xtask dist --verify-debian`",
}];

/// Unpacks `tarball` into the `/opt` of a fresh Debian 12 system (`debootstrap
/// --variant=minbase bookworm` with [`DEBIAN_PROGRAMS`], made once under
/// `target/dist/debian12/` from deb.debian.org) and runs [`VERIFY_SCRIPT`] chrooted into
/// it, in mount and PID namespaces of its own with `/proc`, `/sys`, `/dev` and a `/tmp`
/// mounted: no Rust, compiler, headers or file of the workspace is there.
///
/// # Errors
/// Not root, debootstrap failing, or a check that failed, with the script's reason.
pub fn verify_debian(tarball: &Path) -> Result<(), Error> {
    if !as_root() {
        return Err("`dist --verify-debian` makes a Debian root file system and chroots into it: run it as root".into());
    }
    vm::packages::ensure_installed(&[DEBOOTSTRAP])?;
    let rootfs = root().join("target/dist/debian12");
    let done = rootfs.join(".verbs-emu-debootstrap-done");
    if !done.exists() {
        let _ = std::fs::remove_dir_all(&rootfs);
        let mut d = Command::new("debootstrap");
        d.args([
            "--variant=minbase",
            &format!("--include={DEBIAN_PROGRAMS}"),
            "bookworm",
        ])
        .arg(&rootfs)
        .arg("http://deb.debian.org/debian");
        run(d, "making a fresh Debian 12 system (debootstrap, once)")?;
        std::fs::write(&done, "").map_err(|e| format!("cannot write {}: {e}", done.display()))?;
    }
    let opt = rootfs.join("opt");
    let _ = std::fs::remove_dir_all(opt.join(dist_name()));
    mkdir(&opt)?;
    let mut untar = Command::new("tar");
    untar.arg("-xzf").arg(tarball).arg("-C").arg(&opt);
    run(untar, "unpacking the tarball into the Debian system's /opt")?;
    let script = rootfs.join("verify.sh");
    std::fs::write(&script, VERIFY_SCRIPT)
        .map_err(|e| format!("cannot write {}: {e}", script.display()))?;
    let mut c = Command::new("unshare");
    c.args([
        "--mount",
        "--propagation",
        "private",
        "--pid",
        "--fork",
        "sh",
        "-c",
        "r=$0; mount -t proc proc \"$r/proc\" && mount -t sysfs sysfs \"$r/sys\" && \
         mount --rbind /dev \"$r/dev\" && mount -t tmpfs tmpfs \"$r/tmp\" && \
         exec chroot \"$r\" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
         WORKSPACE=\"$1\" sh /verify.sh \"$2\"",
    ])
    .arg(&rootfs)
    .arg(root())
    .arg(Path::new("/opt").join(dist_name()))
    .current_dir("/");
    run(
        c,
        "running ibv_devinfo and ibv_rc_pingpong from the tarball in a fresh Debian 12 system",
    )
}

/// Whether this process runs as root (its effective uid is 0).
fn as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"))
}

/// Unpacks `tarball` into an empty folder outside the workspace and runs [`VERIFY_SCRIPT`]
/// with the workspace hidden (a mount namespace with an empty tmpfs over it).
///
/// # Errors
/// A check that failed, with the script's reason.
pub fn verify(tarball: &Path) -> Result<(), Error> {
    let base = std::env::temp_dir().join(format!("verbs-emu-dist-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    mkdir(&base)?;
    let mut untar = Command::new("tar");
    untar.arg("-xzf").arg(tarball).arg("-C").arg(&base);
    run(untar, "unpacking the tarball into an empty folder")?;
    let unpacked = base.join(dist_name());
    let ws = root();
    // As root a mount namespace is enough; otherwise an unprivileged user namespace maps
    // the user to root in it.
    let mut c = Command::new("unshare");
    if !as_root() {
        c.arg("--map-root-user");
    }
    let script = base.join("verify.sh");
    std::fs::write(&script, VERIFY_SCRIPT)
        .map_err(|e| format!("cannot write {}: {e}", script.display()))?;
    c.args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(format!(
            "mount -t tmpfs none '{}' && exec sh \"$0\" \"$1\"",
            ws.display()
        ))
        .arg(&script)
        .arg(&unpacked)
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .env("WORKSPACE", &ws)
        .current_dir("/");
    let res = run(
        c,
        "running ibv_devinfo and ibv_rc_pingpong from the tarball alone",
    );
    let _ = std::fs::remove_dir_all(&base);
    res
}
