//! Preparing what the VM boots from, once, under the cache: Debian's kernel (and its PVH
//! entry), busybox and the initramfs.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::paths::{cache_dir, io_err, sibling};
use super::{initramfs, packages};

/// Everything the VM boots from, prepared under [`cache_dir`].
#[derive(Debug, Clone)]
pub struct Assets {
    /// The kernel version (`uname -r` in the guest).
    pub version: String,
    /// The guest kernel image.
    pub kernel: PathBuf,
    /// The initramfs.
    pub initramfs: PathBuf,
    /// The folder to pass to `modprobe -d` (it holds `lib/modules/VERSION`).
    pub module_base: PathBuf,
}

/// The unpacked kernel in `dir`: (version, vmlinuz, module base).
fn kernel_layout(dir: &Path) -> Option<(String, PathBuf, PathBuf)> {
    let boot = dir.join("boot");
    let vmlinuz = std::fs::read_dir(&boot)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("vmlinuz-"))
        })?;
    let version = vmlinuz
        .file_name()?
        .to_str()?
        .trim_start_matches("vmlinuz-")
        .to_owned();
    let base = [dir.to_path_buf(), dir.join("usr")]
        .into_iter()
        .find(|b| b.join("lib/modules").join(&version).is_dir())?;
    Some((version, vmlinuz, base))
}

/// The uncompressed ELF kernel inside the bzImage `vmlinuz` (Debian's is xz-compressed),
/// extracted once to `dest`. QEMU boots it through its PVH entry point, which skips the
/// decompression that costs seconds under TCG. None (boot the bzImage) when that fails.
fn pvh_kernel(vmlinuz: &Path, dest: &Path) -> Option<PathBuf> {
    if dest.exists() {
        return Some(dest.to_path_buf());
    }
    let image = std::fs::read(vmlinuz).ok()?;
    let magic = b"\xfd7zXZ\x00";
    let start = image.windows(magic.len()).position(|w| w == magic)?;
    let mut child = Command::new("xz")
        .args(["-d", "-c", "--single-stream"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let mut stdin = child.stdin.take()?;
    let payload = image[start..].to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&payload);
    });
    let out = child.wait_with_output().ok()?;
    let _ = writer.join();
    if !out.status.success() || !out.stdout.starts_with(b"\x7fELF") {
        return None;
    }
    let tmp = sibling(dest, "tmp");
    std::fs::write(&tmp, &out.stdout).ok()?;
    std::fs::rename(&tmp, dest).ok()?;
    Some(dest.to_path_buf())
}

/// Installs the host packages and prepares (or reuses) the kernel, modules, busybox and
/// initramfs under [`cache_dir`].
pub fn prepare() -> Result<Assets, String> {
    packages::ensure_installed(&[packages::VM_PACKAGES])?;
    let cache = cache_dir();
    let kernels = cache.join("kernel");
    std::fs::create_dir_all(&kernels).map_err(|e| io_err("cannot create", &kernels, e))?;
    let _lock = CacheLock::take(&cache.join(".prepare.lock"))?;
    prepare_locked(&cache)
}

/// A lock on the cache while it is filled (a folder: `mkdir` is atomic), so that runs
/// started together on a fresh checkout do not download and unpack into each other. A
/// lock older than 15 minutes is taken to be left by a killed run and removed.
#[derive(Debug)]
struct CacheLock(PathBuf);

impl CacheLock {
    fn take(path: &Path) -> Result<CacheLock, String> {
        let stale = Duration::from_secs(15 * 60);
        let mut said = false;
        loop {
            match std::fs::create_dir(path) {
                Ok(()) => return Ok(CacheLock(path.to_path_buf())),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let age = std::fs::metadata(path)
                        .and_then(|m| m.modified())
                        .ok()
                        .and_then(|t| t.elapsed().ok());
                    if age.is_some_and(|a| a > stale) {
                        let _ = std::fs::remove_dir(path);
                        continue;
                    }
                    if !said {
                        eprintln!(
                            "xtask vm: waiting for another run to finish preparing {}",
                            path.parent().unwrap_or(path).display()
                        );
                        said = true;
                    }
                    std::thread::sleep(Duration::from_millis(500));
                }
                Err(e) => return Err(io_err("cannot create", path, e)),
            }
        }
    }
}

impl Drop for CacheLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

fn prepare_locked(cache: &Path) -> Result<Assets, String> {
    let kernels = cache.join("kernel");
    let debs = cache.join("debs");

    // A kernel unpacked and indexed by an earlier run (newest name first), else download.
    let mut ready: Vec<PathBuf> = std::fs::read_dir(&kernels)
        .map_err(|e| io_err("cannot read", &kernels, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join(".ready").exists())
        .collect();
    ready.sort();
    let kdir = match ready.pop() {
        Some(k) => k,
        None => {
            let name = packages::kernel_package_name()?;
            let kdir = kernels.join(&name);
            if kdir.exists() {
                std::fs::remove_dir_all(&kdir).map_err(|e| io_err("cannot remove", &kdir, e))?;
            }
            packages::download_and_unpack(&name, &debs, &kdir)?;
            let (version, _, base) = kernel_layout(&kdir).ok_or_else(|| {
                format!(
                    "{name} unpacked in {} has no vmlinuz or modules",
                    kdir.display()
                )
            })?;
            let mut c = Command::new("depmod");
            c.arg("-b").arg(&base).arg(&version);
            eprintln!("xtask vm: indexing the guest kernel's modules: {c:?}");
            let st = c.status().map_err(|e| format!("cannot run depmod: {e}"))?;
            if !st.success() {
                return Err(format!("depmod failed ({st}): {c:?}"));
            }
            std::fs::write(kdir.join(".ready"), name.as_bytes())
                .map_err(|e| io_err("cannot write in", &kdir, e))?;
            kdir
        }
    };
    let (version, vmlinuz, module_base) = kernel_layout(&kdir)
        .ok_or_else(|| format!("{} has no vmlinuz or modules", kdir.display()))?;
    let kernel = pvh_kernel(&vmlinuz, &kdir.join("vmlinux-pvh")).unwrap_or(vmlinuz);

    let bbdir = cache.join("busybox");
    if !bbdir.join("bin/busybox").exists() {
        if bbdir.exists() {
            std::fs::remove_dir_all(&bbdir).map_err(|e| io_err("cannot remove", &bbdir, e))?;
        }
        packages::download_and_unpack("busybox-static", &debs, &bbdir)?;
    }

    let initramfs = cache.join(format!("initramfs-{version}.cpio"));
    initramfs::build(
        &module_base.join("lib/modules").join(&version),
        &bbdir.join("bin/busybox"),
        &initramfs,
    )?;
    Ok(Assets {
        version,
        kernel,
        initramfs,
        module_base,
    })
}
