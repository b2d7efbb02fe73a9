//! The QEMU command line: TCG only (KVM guests hang here and `-cpu host` aborts), no
//! disk, no network device, the host root shared read-only over virtio-9p, the job share
//! and the extra shares writable.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// What QEMU is started with.
#[derive(Debug)]
pub struct QemuConfig<'a> {
    /// The guest kernel (`vmlinuz`).
    pub kernel: &'a Path,
    /// The initramfs (newc cpio).
    pub initrd: &'a Path,
    /// The writable per-run job share (mount tag [`super::initramfs::JOB_TAG`]).
    pub job_dir: &'a Path,
    /// Extra writable shares: (mount tag, host folder).
    pub shares: &'a [(String, PathBuf)],
    /// Guest memory in MiB.
    pub memory_mib: u32,
    /// Guest CPUs.
    pub cpus: u32,
}

/// The mount tag of the read-only host root.
pub const ROOT_TAG: &str = "hostroot";

/// QEMU splits option values on commas; a literal comma is written twice.
fn escape(p: &Path) -> String {
    p.to_string_lossy().replace(',', ",,")
}

fn virtfs(path: &Path, tag: &str, readonly: bool) -> String {
    format!(
        "local,path={},mount_tag={tag},security_model=none,multidevs=remap{}",
        escape(path),
        if readonly { ",readonly=on" } else { "" }
    )
}

/// The full QEMU command for `cfg`.
pub fn command(cfg: &QemuConfig<'_>) -> Command {
    let mut c = Command::new("qemu-system-x86_64");
    c.args(["-accel", "tcg", "-machine", "pc"])
        .args(["-m", &cfg.memory_mib.to_string()])
        .args(["-smp", &cfg.cpus.to_string()])
        .args(["-nodefaults", "-no-user-config", "-no-reboot"])
        .args(["-display", "none", "-monitor", "none", "-nic", "none"])
        .arg("-serial")
        .arg(format!("file:{}", escape(&cfg.job_dir.join("console.log"))))
        .arg("-kernel")
        .arg(cfg.kernel)
        .arg("-initrd")
        .arg(cfg.initrd)
        .args([
            "-append",
            "console=ttyS0 quiet loglevel=4 panic=-1 net.ifnames=0 mitigations=off cryptomgr.notests",
        ])
        .arg("-virtfs")
        .arg(virtfs(Path::new("/"), ROOT_TAG, true))
        .arg("-virtfs")
        .arg(virtfs(cfg.job_dir, super::initramfs::JOB_TAG, false));
    for (tag, path) in cfg.shares {
        c.arg("-virtfs").arg(virtfs(path, tag, false));
    }
    c
}

/// Starts QEMU with its own messages going to `qemu.log` in the job folder.
pub fn spawn(cfg: &QemuConfig<'_>) -> Result<Child, String> {
    let log_path = cfg.job_dir.join("qemu.log");
    let log = File::create(&log_path)
        .map_err(|e| format!("cannot create {}: {e}", log_path.display()))?;
    let log2 = log
        .try_clone()
        .map_err(|e| format!("cannot dup {}: {e}", log_path.display()))?;
    let mut c = command(cfg);
    c.stdin(Stdio::null())
        .stdout(Stdio::from(log))
        .stderr(Stdio::from(log2));
    c.spawn()
        .map_err(|e| format!("cannot start qemu-system-x86_64: {e} ({c:?})"))
}
