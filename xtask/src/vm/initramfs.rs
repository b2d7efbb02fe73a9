//! The guest's initramfs: busybox, the virtio + 9p modules, and a generic `/init` that
//! mounts the job share and hands over to the job's `stage1.sh` (written per run).
//!
//! The archive is written in the kernel's `newc` cpio format directly (no `cpio` tool).

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

/// Modules the initramfs loads, in this order, to reach the 9p shares. Those built into
/// the kernel (absent from modules.dep) are skipped.
pub const EARLY_MODULES: &[&str] = &[
    "virtio_ring",
    "virtio",
    "virtio_pci_modern_dev",
    "virtio_pci_legacy_dev",
    "virtio_pci",
    "netfs",
    "fscache",
    "9pnet",
    "9pnet_virtio",
    "9p",
];

/// The 9p mount tag of the per-run job share.
pub const JOB_TAG: &str = "xtask_job";

/// `/init`: generic; everything specific to a run lives in the job share's `stage1.sh`.
const INIT: &str = r#"#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
for m in $(cat /lib/modules/order); do
    insmod /lib/modules/$m.ko || echo "xtask-vm: insmod $m failed"
done
if mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 xtask_job /job; then
    . /job/stage1.sh
else
    echo "xtask-vm: cannot mount the job share"
fi
sync
poweroff -f
"#;

/// A minimal writer of the `newc` cpio format the kernel unpacks.
struct Cpio {
    out: Vec<u8>,
    ino: u32,
}

impl Cpio {
    fn new() -> Self {
        Cpio {
            out: Vec::new(),
            ino: 1,
        }
    }

    fn pad_to(&mut self, align: usize) {
        let len = self.out.len().next_multiple_of(align);
        self.out.resize(len, 0);
    }

    fn pad4(&mut self) {
        self.pad_to(4);
    }

    fn entry(&mut self, name: &str, mode: u32, rdev: (u32, u32), data: &[u8]) {
        let fields = [
            self.ino,
            mode,
            0,
            0,
            if mode & 0o170000 == 0o040000 { 2 } else { 1 },
            0,
            data.len() as u32,
            0,
            0,
            rdev.0,
            rdev.1,
            name.len() as u32 + 1,
            0,
        ];
        self.ino += 1;
        self.out.extend_from_slice(b"070701");
        for f in fields {
            self.out.extend_from_slice(format!("{f:08X}").as_bytes());
        }
        self.out.extend_from_slice(name.as_bytes());
        self.out.push(0);
        self.pad4();
        self.out.extend_from_slice(data);
        self.pad4();
    }

    fn dir(&mut self, name: &str) {
        self.entry(name, 0o040755, (0, 0), &[]);
    }

    fn file(&mut self, name: &str, mode: u32, data: &[u8]) {
        self.entry(name, 0o100000 | mode, (0, 0), data);
    }

    fn finish(mut self) -> Vec<u8> {
        self.entry("TRAILER!!!", 0, (0, 0), &[]);
        self.pad_to(512);
        self.out
    }
}

/// Reads a module file, decompressing `.ko.xz` / `.ko.zst` with the host's tools.
fn read_module(path: &Path) -> Result<Vec<u8>, String> {
    let name = path.to_string_lossy();
    let tool = if name.ends_with(".xz") {
        Some("xz")
    } else if name.ends_with(".zst") {
        Some("zstd")
    } else {
        None
    };
    match tool {
        None => std::fs::read(path).map_err(|e| format!("cannot read {name}: {e}")),
        Some(tool) => {
            let out = Command::new(tool)
                .args(["-d", "-c"])
                .arg(path)
                .output()
                .map_err(|e| format!("cannot run {tool} to decompress {name}: {e}"))?;
            if out.status.success() {
                Ok(out.stdout)
            } else {
                Err(format!("{tool} -d {name} failed ({})", out.status))
            }
        }
    }
}

/// Builds the initramfs for the kernel whose modules are in `moddir`
/// (`.../lib/modules/VERSION`), with busybox from `busybox`, into `dest`.
pub fn build(moddir: &Path, busybox: &Path, dest: &Path) -> Result<(), String> {
    let dep_file = moddir.join("modules.dep");
    let dep = std::fs::read_to_string(&dep_file)
        .map_err(|e| format!("cannot read {}: {e}", dep_file.display()))?;
    // Module name (dashes as underscores) -> path relative to moddir.
    let mut paths: HashMap<String, String> = HashMap::new();
    for line in dep.lines() {
        let Some((path, _)) = line.split_once(':') else {
            continue;
        };
        let file = path.rsplit('/').next().unwrap_or(path);
        let base = file.split(".ko").next().unwrap_or(file).replace('-', "_");
        paths.insert(base, path.to_owned());
    }

    let mut cpio = Cpio::new();
    for d in [
        "bin",
        "dev",
        "proc",
        "sys",
        "mnt",
        "mnt/root",
        "job",
        "lib",
        "lib/modules",
    ] {
        cpio.dir(d);
    }
    cpio.entry("dev/console", 0o020600, (5, 1), &[]);
    let bb =
        std::fs::read(busybox).map_err(|e| format!("cannot read {}: {e}", busybox.display()))?;
    cpio.file("bin/busybox", 0o755, &bb);
    cpio.file("init", 0o755, INIT.as_bytes());

    let mut order = String::new();
    for m in EARLY_MODULES {
        let Some(rel) = paths.get(*m) else {
            continue; // built into the kernel
        };
        let data = read_module(&moddir.join(rel))?;
        cpio.file(&format!("lib/modules/{m}.ko"), 0o644, &data);
        order.push_str(m);
        order.push('\n');
    }
    if !paths.contains_key("9p") {
        let builtin = std::fs::read_to_string(moddir.join("modules.builtin")).unwrap_or_default();
        if !builtin.contains("/9p.ko") {
            return Err(format!(
                "the guest kernel in {} has no 9p file system module",
                moddir.display()
            ));
        }
    }
    cpio.file("lib/modules/order", 0o644, order.as_bytes());

    let bytes = cpio.finish();
    let tmp = super::paths::sibling(dest, "tmp");
    std::fs::write(&tmp, bytes).map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, dest).map_err(|e| format!("cannot write {}: {e}", dest.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses a newc archive back into (name, mode, data).
    fn parse(mut b: &[u8]) -> Vec<(String, u32, Vec<u8>)> {
        let mut out = Vec::new();
        let mut off = 0usize;
        loop {
            assert_eq!(&b[..6], b"070701", "magic at {off}");
            let field = |i: usize| {
                u32::from_str_radix(std::str::from_utf8(&b[6 + 8 * i..14 + 8 * i]).unwrap(), 16)
                    .unwrap()
            };
            let (mode, size, namesize) = (field(1), field(6) as usize, field(11) as usize);
            let name = String::from_utf8(b[110..110 + namesize - 1].to_vec()).unwrap();
            let data_start = (110 + namesize).next_multiple_of(4);
            let data = b[data_start..data_start + size].to_vec();
            let next = (data_start + size).next_multiple_of(4);
            off += next;
            b = &b[next..];
            if name == "TRAILER!!!" {
                return out;
            }
            out.push((name, mode, data));
        }
    }

    #[test]
    fn newc_round_trips() {
        let mut c = Cpio::new();
        c.dir("bin");
        c.entry("dev/console", 0o020600, (5, 1), &[]);
        c.file("init", 0o755, b"#!/bin/sh\n");
        c.file("a/b", 0o644, b"12345");
        let bytes = c.finish();
        assert_eq!(bytes.len() % 512, 0);
        let entries = parse(&bytes);
        let names: Vec<&str> = entries.iter().map(|e| e.0.as_str()).collect();
        assert_eq!(names, ["bin", "dev/console", "init", "a/b"]);
        assert_eq!(entries[0].1, 0o040755);
        assert_eq!(entries[2].1, 0o100755);
        assert_eq!(entries[2].2, b"#!/bin/sh\n");
        assert_eq!(entries[3].2, b"12345");
    }
}
