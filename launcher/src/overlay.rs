//! What a host's programs see of its device in the file system, in the launcher's own
//! mount namespace: `/dev/infiniband/uverbsN` (a character device: `/dev/null` bound on
//! it) and `rdma_cm`, and the sysfs entries of the device under `/sys/class/infiniband`
//! and `/sys/class/infiniband_verbs`; `/sys/class/net` shows the host's network
//! namespace. `/dev` and `/sys/class` become tmpfs mounts with every original entry bound
//! back, so nothing outside the namespace changes.

use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use backend_sim::Personality;

use crate::sys;

/// One emulated device as sysfs describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Device {
    /// `mlx5_0`, `rxe0`.
    pub name: String,
    /// `uverbs0`.
    pub uverbs: String,
    /// The host's name (in `node_desc` and `board_id`).
    pub host: String,
    /// The port's address.
    pub ip: Ipv4Addr,
    /// The device's personality.
    pub personality: Personality,
    /// The port's network interface.
    pub interface: String,
}

impl Device {
    /// The first device of a host with `personality` and address `ip`.
    pub fn first(host: &str, ip: Ipv4Addr, personality: Personality, interface: &str) -> Self {
        let name = match personality {
            Personality::Rxe => "rxe0",
            Personality::Mlx5 => "mlx5_0",
        };
        Device {
            name: name.into(),
            uverbs: "uverbs0".into(),
            host: host.into(),
            ip,
            personality,
            interface: interface.into(),
        }
    }

    /// The port's MAC as the emulator derives it: 02:00 and the address's four bytes.
    pub fn mac(&self) -> [u8; 6] {
        let o = self.ip.octets();
        [0x02, 0x00, o[0], o[1], o[2], o[3]]
    }

    /// The node GUID: the MAC's modified EUI-64, as the emulator's.
    pub fn guid(&self) -> [u8; 8] {
        let m = self.mac();
        [m[0] ^ 0x02, m[1], m[2], 0xff, 0xfe, m[3], m[4], m[5]]
    }

    /// The port's GIDs: 0 the link-local GID of the MAC, 1 the IPv4-mapped address.
    pub fn gids(&self) -> [[u8; 16]; 2] {
        let mut ll = [0u8; 16];
        ll[0] = 0xfe;
        ll[1] = 0x80;
        ll[8..].copy_from_slice(&self.guid());
        [ll, self.ip.to_ipv6_mapped().octets()]
    }

    /// The files of the device's sysfs entries, relative to `/sys/class`, and their text.
    pub fn sysfs_files(&self) -> Vec<(PathBuf, String)> {
        let hex16 = |b: &[u8]| {
            b.chunks(2)
                .map(|c| format!("{:02x}{:02x}", c[0], c[1]))
                .collect::<Vec<_>>()
                .join(":")
        };
        let ib = PathBuf::from("infiniband").join(&self.name);
        // The port's rate as the kernel writes it from the width and speed the emulated
        // port reports (4X, 50 Gb/s a lane: HDR).
        let port = ib.join("ports/1");
        // `hw_rev` is the mlx5 driver's own attribute (the kernel's mlx5 `hw_rev_show`,
        // "%x" of the revision: the 0x0 of `ibv_devinfo`'s `hw_ver`); rxe has none.
        let (gid_types, hca, hw_rev, vendor, device, rate) = match self.personality {
            Personality::Mlx5 => (
                ["IB/RoCE v1", "RoCE v2"],
                "MT4123",
                "0",
                "0x15b3",
                "0x101b",
                "200 Gb/sec (4X HDR)",
            ),
            Personality::Rxe => (
                ["RoCE v2", "RoCE v2"],
                "",
                "",
                "",
                "",
                "200 Gb/sec (4X HDR)",
            ),
        };
        let guid = hex16(&self.guid());
        let mut f = vec![
            (ib.join("node_type"), "1: CA".to_owned()),
            (ib.join("node_guid"), guid.clone()),
            (ib.join("sys_image_guid"), guid),
            (ib.join("fw_ver"), "backend-sim".into()),
            (ib.join("hca_type"), hca.into()),
            (ib.join("hw_rev"), hw_rev.into()),
            (
                ib.join("board_id"),
                format!("VERBS_EMU_{}", self.host.to_uppercase()),
            ),
            (ib.join("node_desc"), format!("{} {}", self.host, self.name)),
            (ib.join("device/numa_node"), "-1".into()),
            (ib.join("device/vendor"), vendor.into()),
            (ib.join("device/device"), device.into()),
            (port.join("state"), "4: ACTIVE".into()),
            (port.join("phys_state"), "5: LinkUp".into()),
            (port.join("link_layer"), "Ethernet".into()),
            (port.join("lid"), "0x0".into()),
            (port.join("sm_lid"), "0x0".into()),
            (port.join("lid_mask_count"), "0".into()),
            (port.join("sm_sl"), "0".into()),
            (port.join("rate"), rate.into()),
            // ib_core's port attribute ("0x%08x" of port_cap_flags, as `ibv_devinfo`
            // shows it: CM_SUP and IP_BASED_GIDS); libibumad (`ibstat`, `umad_get_ca`)
            // refuses a port without it.
            (port.join("cap_mask"), "0x04010000".into()),
            (port.join("pkeys/0"), "0xffff".into()),
        ];
        for (i, gid) in self.gids().iter().enumerate() {
            f.push((port.join(format!("gids/{i}")), hex16(gid)));
            f.push((
                port.join(format!("gid_attrs/types/{i}")),
                gid_types[i].into(),
            ));
            f.push((
                port.join(format!("gid_attrs/ndevs/{i}")),
                self.interface.clone(),
            ));
        }
        let uverbs = PathBuf::from("infiniband_verbs").join(&self.uverbs);
        f.push((uverbs.join("ibdev"), self.name.clone()));
        f.push((uverbs.join("abi_version"), "1".into()));
        f.push((uverbs.join("dev"), "231:192".into()));
        f.push(("infiniband_verbs/abi_version".into(), "6".into()));
        f.into_iter()
            .filter(|(_, text)| !text.is_empty())
            .map(|(p, text)| (p, text + "\n"))
            .collect()
    }
}

fn err(what: &str, path: &Path, e: std::io::Error) -> String {
    format!("{what} {}: {e}", path.display())
}

/// `/proc/self/fd/N/name`: an entry of the directory `fd` holds, after a mount hid it.
fn under(fd: &OwnedFd, name: &std::ffi::OsStr) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd())).join(name)
}

/// Mounts a tmpfs on `dir` and binds each of its original entries back (directories and
/// files bound, symbolic links copied), except those `skip` names.
fn overlay(dir: &Path, skip: impl Fn(&str) -> bool) -> Result<(), String> {
    let entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| err("cannot read", dir, e))?
        .filter_map(Result::ok)
        .collect();
    let old = sys::open_dir_path(dir).map_err(|e| err("cannot open", dir, e))?;
    sys::mount(
        Some(Path::new("tmpfs")),
        dir,
        Some("tmpfs"),
        libc::MS_NOSUID,
        Some("mode=755"),
    )
    .map_err(|e| err("cannot mount a tmpfs on", dir, e))?;
    for e in entries {
        let name = e.file_name();
        if skip(&name.to_string_lossy()) {
            continue;
        }
        let target = dir.join(&name);
        let Ok(kind) = e.file_type() else { continue };
        if kind.is_symlink() {
            if let Ok(to) = std::fs::read_link(under(&old, &name)) {
                std::os::unix::fs::symlink(to, &target)
                    .map_err(|e| err("cannot link", &target, e))?;
            }
            continue;
        }
        if kind.is_dir() {
            std::fs::create_dir(&target).map_err(|e| err("cannot make", &target, e))?;
        } else {
            std::fs::File::create(&target).map_err(|e| err("cannot make", &target, e))?;
        }
        sys::bind(&under(&old, &name), &target).map_err(|e| err("cannot bind", &target, e))?;
    }
    Ok(())
}

/// Binds the host network namespace's view of sysfs (`class/net`, `devices/virtual/net`)
/// over the original's. Sysfs shows the network devices of the namespace that mounts it,
/// so a fresh mount is made (under the tmpfs on `/sys/class`) and bound from.
fn net_sysfs() -> Result<(), String> {
    let tmp = Path::new("/sys/class/.verbs-emu-sysfs");
    std::fs::create_dir(tmp).map_err(|e| err("cannot make", tmp, e))?;
    let mounted = sys::mount(
        Some(Path::new("sysfs")),
        tmp,
        Some("sysfs"),
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC | libc::MS_RDONLY,
        None,
    );
    let result = match mounted {
        Ok(()) => {
            let r = [
                ("class/net", "/sys/class/net"),
                ("devices/virtual/net", "/sys/devices/virtual/net"),
            ]
            .iter()
            .try_for_each(|(from, to)| {
                sys::bind(&tmp.join(from), Path::new(to))
                    .map_err(|e| err("cannot bind", Path::new(to), e))
            });
            let _ = sys::detach(tmp);
            r
        }
        Err(e) => Err(err("cannot mount sysfs on", tmp, e)),
    };
    let _ = std::fs::remove_dir(tmp);
    result
}

/// Makes every mount of the new mount namespace private: nothing mounted below may reach
/// the namespace it came from.
///
/// In a chroot whose root directory is not a mount point, `mount(2)` refuses `/` with
/// EINVAL; then each mount the process can see (`/proc/self/mountinfo` lists those under
/// its root) is made private one by one.
fn make_private() -> Result<(), String> {
    let private = |p: &Path| sys::mount(None, p, None, libc::MS_REC | libc::MS_PRIVATE, None);
    match private(Path::new("/")) {
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            let info = Path::new("/proc/self/mountinfo");
            let text = std::fs::read_to_string(info).map_err(|e| {
                format!(
                    "cannot make the mounts private: / is not a mount point and {} cannot be read ({e}); mount /proc",
                    info.display()
                )
            })?;
            sys::mount_points(&text)
                .iter()
                .try_for_each(|p| private(p).map_err(|e| err("cannot make private:", p, e)))
        }
        r => r.map_err(|e| format!("cannot make the mounts private: {e}")),
    }
}

/// Makes the launcher's mount namespace (the calling thread must be in the host's
/// network namespace, with the capabilities of its user namespace) and lays out the
/// devices' entries in it.
pub fn prepare(devices: &[Device]) -> Result<(), String> {
    sys::unshare(libc::CLONE_NEWNS).map_err(|e| format!("cannot make a mount namespace: {e}"))?;
    make_private()?;

    let class = Path::new("/sys/class");
    overlay(class, |n| n.starts_with("infiniband"))?;
    if let Err(e) = net_sysfs() {
        eprintln!("verbs-emu: warning: /sys/class/net shows the interfaces outside the host ({e})");
    }
    for d in devices {
        for (rel, text) in d.sysfs_files() {
            let p = class.join(rel);
            if let Some(parent) = p.parent() {
                std::fs::create_dir_all(parent).map_err(|e| err("cannot make", parent, e))?;
            }
            std::fs::write(&p, text).map_err(|e| err("cannot write", &p, e))?;
        }
        let link = class
            .join("infiniband_verbs")
            .join(&d.uverbs)
            .join("device");
        std::os::unix::fs::symlink(format!("../../infiniband/{}/device", d.name), &link)
            .map_err(|e| err("cannot link", &link, e))?;
    }
    // As sysfs is: nobody writes there.
    sys::mount(
        None,
        class,
        None,
        libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | libc::MS_NOSUID,
        None,
    )
    .map_err(|e| err("cannot make read-only:", class, e))?;

    let dev = Path::new("/dev");
    let old_dev = sys::open_dir_path(dev).map_err(|e| err("cannot open", dev, e))?;
    let null = under(&old_dev, std::ffi::OsStr::new("null"));
    overlay(dev, |n| n == "infiniband")?;
    let ib = dev.join("infiniband");
    std::fs::create_dir(&ib).map_err(|e| err("cannot make", &ib, e))?;
    let nodes = devices
        .iter()
        .map(|d| d.uverbs.as_str())
        .chain(std::iter::once("rdma_cm"));
    for n in nodes {
        let p = ib.join(n);
        std::fs::File::create(&p).map_err(|e| err("cannot make", &p, e))?;
        sys::bind(&null, &p).map_err(|e| err("cannot bind /dev/null on", &p, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_mlx5_device_has_the_emulators_guid_gids_and_names() {
        let d = Device::first(
            "h2",
            Ipv4Addr::new(10, 100, 0, 2),
            Personality::Mlx5,
            "eth0",
        );
        let f: std::collections::HashMap<_, _> = d
            .sysfs_files()
            .into_iter()
            .map(|(p, t)| (p.to_string_lossy().into_owned(), t))
            .collect();
        assert_eq!(f["infiniband/mlx5_0/node_guid"], "0000:0aff:fe64:0002\n");
        assert_eq!(
            f["infiniband/mlx5_0/ports/1/gids/0"],
            "fe80:0000:0000:0000:0000:0aff:fe64:0002\n"
        );
        assert_eq!(
            f["infiniband/mlx5_0/ports/1/gids/1"],
            "0000:0000:0000:0000:0000:ffff:0a64:0002\n"
        );
        assert_eq!(
            f["infiniband/mlx5_0/ports/1/gid_attrs/types/0"],
            "IB/RoCE v1\n"
        );
        assert_eq!(
            f["infiniband/mlx5_0/ports/1/gid_attrs/types/1"],
            "RoCE v2\n"
        );
        assert_eq!(f["infiniband/mlx5_0/ports/1/gid_attrs/ndevs/1"], "eth0\n");
        assert_eq!(f["infiniband_verbs/uverbs0/ibdev"], "mlx5_0\n");
        assert_eq!(f["infiniband/mlx5_0/board_id"], "VERBS_EMU_H2\n");
        assert_eq!(f["infiniband/mlx5_0/hw_rev"], "0\n");
        assert_eq!(f["infiniband/mlx5_0/ports/1/cap_mask"], "0x04010000\n");
    }

    #[test]
    fn an_rxe_device_lists_roce_v2_gids_only() {
        let d = Device::first("a", Ipv4Addr::new(10, 1, 0, 1), Personality::Rxe, "eth0");
        let f = d.sysfs_files();
        let get = |k: &str| {
            f.iter()
                .find(|(p, _)| p == Path::new(k))
                .map(|(_, t)| t.as_str())
        };
        assert_eq!(
            get("infiniband/rxe0/ports/1/gid_attrs/types/0"),
            Some("RoCE v2\n")
        );
        assert_eq!(get("infiniband_verbs/uverbs0/ibdev"), Some("rxe0\n"));
        assert_eq!(get("infiniband/rxe0/hca_type"), None);
        assert_eq!(get("infiniband/rxe0/hw_rev"), None);
        assert_eq!(
            get("infiniband/rxe0/ports/1/cap_mask"),
            Some("0x04010000\n")
        );
    }
}
