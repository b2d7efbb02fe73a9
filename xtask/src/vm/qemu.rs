//! The QEMU command line: TCG only (KVM guests hang here and `-cpu host` aborts), no
//! disk, the host root shared read-only over virtio-9p, the job share and the extra shares
//! writable. No network device, unless the VM joins an emulated fabric
//! ([`FabricNic`]): then one virtio-net NIC on the fabric's QEMU port (`-netdev stream`)
//! and one on QEMU's user-mode network (for the out-of-band TCP of verbs programs).

use std::fs::File;
use std::net::Ipv4Addr;
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
    /// The NICs joining an emulated fabric, if any (else the VM has no network device).
    pub fabric: Option<&'a FabricNic>,
    /// The CPU model (`-cpu`), if not QEMU's default.
    pub cpu: Option<&'a str>,
}

/// A VM's NIC on an emulated fabric's QEMU port (`verbs-emu-fabric --qemu-stream SOCK`),
/// plus a user-mode NIC (slirp) through which the guest reaches the host's loopback as
/// 10.0.2.2 (QEMU's default) and the host reaches the guest's [`FabricNic::forward`] ports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FabricNic {
    /// The fabric's QEMU stream socket (QEMU connects to it as a client).
    pub socket: PathBuf,
    /// The VM's address on the fabric (a `remote = true` host of the fabric's topology).
    pub ip: Ipv4Addr,
    /// TCP ports of the host's loopback forwarded to the same port in the guest.
    pub forward: Vec<u16>,
}

/// The guest's address on the user-mode network (QEMU's default first DHCP address).
pub const USER_GUEST_IP: &str = "10.0.2.15";
/// The MAC of the guest's user-mode NIC (QEMU's default for a first NIC).
pub const USER_MAC: &str = "52:54:00:12:34:56";

impl FabricNic {
    /// The NIC's MAC: `02:00` and the four bytes of its address, as the emulator gives
    /// every host (so the fabric's ARP answers and its topology agree with the VM).
    pub fn mac(&self) -> String {
        let o = self.ip.octets();
        format!("02:00:{:02x}:{:02x}:{:02x}:{:02x}", o[0], o[1], o[2], o[3])
    }

    /// QEMU's arguments for the two NICs. `romfile=` leaves out the NICs' boot ROM (the
    /// kernel is booted directly).
    pub fn qemu_args(&self) -> Vec<String> {
        let mut user = String::from("user,id=user");
        for p in &self.forward {
            user.push_str(&format!(",hostfwd=tcp:127.0.0.1:{p}-:{p}"));
        }
        vec![
            "-netdev".into(),
            format!(
                "stream,id=fab,server=off,addr.type=unix,addr.path={}",
                escape(&self.socket)
            ),
            "-device".into(),
            format!("virtio-net-pci,netdev=fab,mac={},romfile=", self.mac()),
            "-netdev".into(),
            user,
            "-device".into(),
            format!("virtio-net-pci,netdev=user,mac={USER_MAC},romfile="),
        ]
    }
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
        .args(cfg.cpu.map(|m| ["-cpu", m]).into_iter().flatten())
        .args(["-nodefaults", "-no-user-config", "-no-reboot"])
        .args(["-display", "none", "-monitor", "none"]);
    match cfg.fabric {
        Some(f) => c.args(f.qemu_args()),
        None => c.args(["-nic", "none"]),
    };
    c
        .arg("-serial")
        .arg(format!("file:{}", escape(&cfg.job_dir.join("console.log"))))
        .arg("-kernel")
        .arg(cfg.kernel)
        .arg("-initrd")
        .arg(cfg.initrd)
        // no_timer_check: the kernel's boot-time test that the timer interrupt ticks
        // (`timer_irq_works` in arch/x86/kernel/apic/io_apic.c, within a delay loop of
        // about 10 ticks) fails when TCG is starved by a loaded host, and the boot ends in
        // "Kernel panic - not syncing: IO-APIC + timer doesn't work!" (seen at a load
        // average of 14 on 2 cores); the parameter skips the test (kernel-parameters.txt:
        // "Disables the code which tests for broken timer IRQ sources").
        .args([
            "-append",
            "console=ttyS0 quiet loglevel=4 panic=-1 net.ifnames=0 mitigations=off cryptomgr.notests no_timer_check",
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

#[cfg(test)]
mod tests {
    use super::*;

    fn args(c: &Command) -> Vec<String> {
        c.get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    fn config<'a>(fabric: Option<&'a FabricNic>) -> QemuConfig<'a> {
        QemuConfig {
            kernel: Path::new("/k"),
            initrd: Path::new("/i"),
            job_dir: Path::new("/job"),
            shares: &[],
            memory_mib: 2048,
            cpus: 2,
            fabric,
            cpu: None,
        }
    }

    #[test]
    fn the_cpu_model_is_qemus_default_unless_asked() {
        let a = args(&command(&config(None)));
        assert!(!a.iter().any(|x| x == "-cpu"), "{a:?}");
        let mut cfg = config(None);
        cfg.cpu = Some("max");
        let a = args(&command(&cfg));
        let at = a.iter().position(|x| x == "-cpu").expect("-cpu");
        assert_eq!(a[at + 1], "max");
    }

    #[test]
    fn without_a_fabric_the_vm_has_no_nic() {
        let a = args(&command(&config(None)));
        let nic = a.iter().position(|x| x == "-nic").expect("-nic");
        assert_eq!(a[nic + 1], "none");
        assert!(!a.iter().any(|x| x == "-netdev"), "{a:?}");
    }

    #[test]
    fn a_fabric_nic_joins_the_stream_socket_with_the_emulators_mac() {
        let nic = FabricNic {
            socket: "/run/a,b/vm.sock".into(),
            ip: "10.100.0.20".parse().unwrap(),
            forward: vec![18601, 18602],
        };
        assert_eq!(nic.mac(), "02:00:0a:64:00:14");
        let a = args(&command(&config(Some(&nic))));
        assert!(!a.iter().any(|x| x == "-nic"), "{a:?}");
        let netdevs: Vec<&String> = a
            .iter()
            .zip(a.iter().skip(1))
            .filter(|(k, _)| *k == "-netdev")
            .map(|(_, v)| v)
            .collect();
        assert_eq!(
            netdevs,
            [
                "stream,id=fab,server=off,addr.type=unix,addr.path=/run/a,,b/vm.sock",
                "user,id=user,hostfwd=tcp:127.0.0.1:18601-:18601,hostfwd=tcp:127.0.0.1:18602-:18602",
            ]
        );
        let devices: Vec<&String> = a
            .iter()
            .zip(a.iter().skip(1))
            .filter(|(k, _)| *k == "-device")
            .map(|(_, v)| v)
            .collect();
        assert_eq!(
            devices,
            [
                "virtio-net-pci,netdev=fab,mac=02:00:0a:64:00:14,romfile=",
                "virtio-net-pci,netdev=user,mac=52:54:00:12:34:56,romfile=",
            ]
        );
    }
}
