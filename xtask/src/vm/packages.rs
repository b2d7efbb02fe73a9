//! Debian packages: what the Soft-RoCE VM and the backend-hw build need from the host,
//! installing what is missing (as root), and downloading + unpacking the packages that
//! must not be installed (the guest kernel, busybox) into the cache.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// A Debian package the host needs, and why.
#[derive(Debug, Clone, Copy)]
pub struct Package {
    /// The package name.
    pub name: &'static str,
    /// Why we need it (printed when it gets installed).
    pub why: &'static str,
}

const fn pkg(name: &'static str, why: &'static str) -> Package {
    Package { name, why }
}

/// Installed on the host for the VM: the guest runs the host's root file system (shared
/// read-only), so every tool used inside the guest is a host tool.
pub const VM_PACKAGES: &[Package] = &[
    pkg(
        "qemu-system-x86",
        "qemu-system-x86_64 boots the Soft-RoCE VM (TCG, no KVM)",
    ),
    pkg(
        "kmod",
        "depmod indexes the unpacked guest kernel modules, modprobe loads them in the guest",
    ),
    pkg(
        "iproute2",
        "`ip` makes the veth pair in the guest, `rdma link add` creates rxe0",
    ),
    pkg(
        "rdma-core",
        "the RDMA userspace core (rdma service configuration, udev rules)",
    ),
    pkg(
        "ibverbs-providers",
        "librxe, the libibverbs provider for the Soft-RoCE (rxe) device",
    ),
    pkg(
        "ibverbs-utils",
        "ibv_devinfo, ibv_rc_pingpong, ibv_ud_pingpong for the smoke check",
    ),
    pkg(
        "libibverbs-dev",
        "libibverbs headers and link library for backend-hw",
    ),
    pkg(
        "rdmacm-utils",
        "mckey and rping, librdmacm checks inside the VM",
    ),
    pkg(
        "perftest",
        "ib_send_bw and friends, verbs benchmarks inside the VM",
    ),
];

/// Installed on the host to build backend-hw with its `ibverbs` feature: a C shim over
/// the system's libibverbs headers, compiled with the `cc` crate.
pub const BUILD_PACKAGES: &[Package] = &[
    pkg(
        "libibverbs-dev",
        "libibverbs headers and link library for backend-hw",
    ),
    pkg(
        "gcc",
        "the cc crate compiles backend-hw's C shim over libibverbs",
    ),
];

/// Installed on the host for the checks that decode our captures with Wireshark's
/// dissectors (`cargo xtask ci`; the simulator suite itself needs none).
pub const TOOL_PACKAGES: &[Package] = &[pkg(
    "tshark",
    "decodes the simulator's and spead-capture's pcaps (RoCEv2, UDP) in CI",
)];

/// Installed on the host for `cargo xtask bench emu`: the kernel loopback figures the
/// emulator is compared with, and the perftest programs it runs.
pub const BENCH_PACKAGES: &[Package] = &[
    pkg(
        "qperf",
        "kernel UDP latency and TCP bandwidth on loopback (udp_lat, tcp_bw)",
    ),
    pkg(
        "perftest",
        "ib_send_lat, ib_write_bw and ib_send_bw between two emulated hosts",
    ),
];

/// Installed on the host to build the emulated libibverbs (bindgen reads rdma-core's
/// headers through libclang) and to run its tests: the unmodified Debian programs it must
/// run, gcc for the C test programs and the layout check, objdump for the symbol checks.
pub const EMU_PACKAGES: &[Package] = &[
    pkg(
        "libibverbs-dev",
        "infiniband/verbs.h, whose structs bindgen turns into the emulator's layouts",
    ),
    pkg(
        "libclang-dev",
        "libclang, which bindgen uses to read infiniband/verbs.h",
    ),
    pkg(
        "ibverbs-utils",
        "ibv_devices, ibv_devinfo and the pingpongs, run unmodified on the emulator",
    ),
    pkg(
        "librdmacm-dev",
        "rdma/rdma_cma.h, whose structs bindgen turns into the emulated librdmacm's layouts",
    ),
    pkg(
        "rdmacm-utils",
        "rping and mckey, run on the emulated librdmacm",
    ),
    pkg(
        "gcc",
        "builds the emulator's C test programs and its layout check against verbs.h",
    ),
    pkg(
        "binutils",
        "objdump, which the emulator's tests use to compare symbol versions",
    ),
    pkg(
        "iproute2",
        "`ip` gives spead2's network namespace the emulated host's address (its multicast join)",
    ),
    pkg(
        "perftest",
        "ib_send_bw .. ib_read_lat, run unmodified between two emulated hosts",
    ),
    pkg(
        "python3-pyverbs",
        "rdma-core's Python bindings, which the emulator's pyverbs tests drive with /usr/bin/python3",
    ),
    pkg(
        "ucx-utils",
        "ucx_info and ucx_perftest, run unmodified under the launcher (verbs-emu run)",
    ),
    pkg(
        "libfabric-bin",
        "fi_info and fi_pingpong (libfabric's verbs provider) under the launcher",
    ),
    pkg(
        "qperf",
        "qperf's RC tests between two launched hosts, and kernel loopback in bench emu",
    ),
    pkg(
        "infiniband-diags",
        "ibstat, which reads the launched host's device through libibumad (sysfs)",
    ),
    pkg(
        "openmpi-bin",
        "mpirun: an Open MPI ping-pong over UCX between two launched hosts",
    ),
    pkg(
        "libopenmpi-dev",
        "mpicc, which builds that ping-pong (launcher/tests/c/mpi_pingpong.c)",
    ),
];

static APT_UPDATED: AtomicBool = AtomicBool::new(false);

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|euid| euid == "0"))
        })
        .unwrap_or(false)
}

fn installed(name: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${db:Status-Abbrev}", name])
        .output()
        .map(|o| o.status.success() && o.stdout.starts_with(b"ii"))
        .unwrap_or(false)
}

fn run_checked(mut c: Command, what: &str) -> Result<(), String> {
    eprintln!("xtask vm: {what}: {c:?}");
    let status = c
        .status()
        .map_err(|e| format!("{what}: cannot start {c:?}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{what} failed ({status}): {c:?}"))
    }
}

fn apt_get() -> Command {
    let mut c = Command::new("apt-get");
    c.env("DEBIAN_FRONTEND", "noninteractive")
        .args(["-o", "DPkg::Lock::Timeout=600"]);
    c
}

/// Runs an apt-get command; while another apt-get or dpkg holds apt's locks (apt-get
/// update does not wait for them by itself), waits and retries for up to 10 minutes.
fn run_apt(make: impl Fn() -> Command, what: &str) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let mut c = make();
        eprintln!("xtask vm: {what}: {c:?}");
        let out = c
            .stderr(Stdio::piped())
            .output()
            .map_err(|e| format!("{what}: cannot start {c:?}: {e}"))?;
        let err = String::from_utf8_lossy(&out.stderr);
        if out.status.success() {
            eprint!("{err}");
            return Ok(());
        }
        if err.contains("Could not get lock") && Instant::now() < deadline {
            eprintln!("xtask vm: another apt-get or dpkg holds apt's lock; retrying in 5 s");
            std::thread::sleep(Duration::from_secs(5));
            continue;
        }
        eprint!("{err}");
        return Err(format!("{what} failed ({}): {c:?}", out.status));
    }
}

/// `apt-get update`, at most once per xtask run (and only as root).
fn apt_update() -> Result<(), String> {
    if APT_UPDATED.swap(true, Ordering::SeqCst) {
        return Ok(());
    }
    run_apt(
        || {
            let mut c = apt_get();
            c.args(["update", "-q"]);
            c
        },
        "refreshing Debian's package lists",
    )
}

/// Makes sure every package of `sets` is installed, installing the missing ones with
/// apt-get when we are root, or failing with the exact command to run otherwise.
pub fn ensure_installed(sets: &[&[Package]]) -> Result<(), String> {
    let mut missing: Vec<Package> = Vec::new();
    for p in sets.iter().flat_map(|s| s.iter()) {
        if !missing.iter().any(|m| m.name == p.name) && !installed(p.name) {
            missing.push(*p);
        }
    }
    if missing.is_empty() {
        return Ok(());
    }
    let names: Vec<&str> = missing.iter().map(|p| p.name).collect();
    let why: String = missing
        .iter()
        .map(|p| format!("\n  {:<20} {}", p.name, p.why))
        .collect();
    if !is_root() {
        return Err(format!(
            "missing Debian packages:{why}\nInstall them (as root) with:\n  \
             sudo apt-get update && sudo apt-get install -y --no-install-recommends {}",
            names.join(" ")
        ));
    }
    eprintln!(
        "xtask vm: installing {} missing Debian package(s):{why}",
        missing.len()
    );
    apt_update()?;
    run_apt(
        || {
            let mut c = apt_get();
            c.args(["install", "-y", "-q", "--no-install-recommends"])
                .args(&names);
            c
        },
        "installing packages",
    )?;
    let still: Vec<&str> = names.iter().copied().filter(|n| !installed(n)).collect();
    if still.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "apt-get install finished but these packages are still not installed: {}",
            still.join(" ")
        ))
    }
}

/// The name of the kernel package that Debian's `linux-image-amd64` points at
/// (e.g. `linux-image-6.1.0-35-amd64`).
pub fn kernel_package_name() -> Result<String, String> {
    let query = || -> Option<String> {
        let out = Command::new("apt-cache")
            .args(["show", "--no-all-versions", "linux-image-amd64"])
            .output()
            .ok()?;
        if !out.status.success() {
            return None;
        }
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let deps = text.lines().find(|l| l.starts_with("Depends:"))?;
        deps.trim_start_matches("Depends:")
            .split(',')
            .map(|d| d.split_whitespace().next().unwrap_or(""))
            .find(|d| d.starts_with("linux-image-") && d.ends_with("-amd64"))
            .map(str::to_owned)
    };
    if let Some(name) = query() {
        return Ok(name);
    }
    if is_root() {
        apt_update()?;
        if let Some(name) = query() {
            return Ok(name);
        }
    }
    Err(
        "cannot find Debian's kernel package: `apt-cache show linux-image-amd64` found no \
         `linux-image-*-amd64` dependency. Run `apt-get update` (as root) and retry."
            .into(),
    )
}

/// Downloads (without installing) `package` with `apt-get download` into `debs` and
/// unpacks it with `dpkg -x` into `dest`, which must not exist yet (it is created).
pub fn download_and_unpack(package: &str, debs: &Path, dest: &Path) -> Result<(), String> {
    std::fs::create_dir_all(debs).map_err(|e| format!("cannot create {}: {e}", debs.display()))?;
    let find_deb = || -> Option<PathBuf> {
        let prefix = format!("{package}_");
        let mut found: Vec<PathBuf> = std::fs::read_dir(debs)
            .ok()?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".deb"))
            })
            .collect();
        found.sort();
        found.pop()
    };
    let deb = match find_deb() {
        Some(deb) => deb,
        None => {
            eprintln!(
                "xtask vm: downloading Debian package {package} (unpacked into {}, not installed)",
                dest.display()
            );
            let mut c = apt_get();
            c.current_dir(debs)
                .args(["download", "-q", "-o", "APT::Sandbox::User=root", package]);
            if let Err(e) = run_checked(c, "downloading") {
                if !is_root() {
                    return Err(e);
                }
                apt_update()?;
                let mut c = apt_get();
                c.current_dir(debs).args([
                    "download",
                    "-q",
                    "-o",
                    "APT::Sandbox::User=root",
                    package,
                ]);
                run_checked(c, "downloading")?;
            }
            find_deb().ok_or_else(|| {
                format!(
                    "apt-get download {package} succeeded but no .deb is in {}",
                    debs.display()
                )
            })?
        }
    };
    let partial = super::paths::sibling(dest, "partial");
    let _ = std::fs::remove_dir_all(&partial);
    std::fs::create_dir_all(&partial)
        .map_err(|e| format!("cannot create {}: {e}", partial.display()))?;
    let mut c = Command::new("dpkg");
    c.arg("-x").arg(&deb).arg(&partial);
    run_checked(c, "unpacking")?;
    std::fs::rename(&partial, dest).map_err(|e| {
        format!(
            "cannot rename {} to {}: {e}",
            partial.display(),
            dest.display()
        )
    })
}
