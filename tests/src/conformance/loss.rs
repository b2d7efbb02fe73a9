//! Losing chosen packets between two devices, for the cases about loss. All other cases
//! run QPs on one device (rxe's loopback never touches a network device, so nothing can
//! be lost there); these put the second QP on a second device reached over a link:
//!
//! - on the simulator, a second device of the same host (its own port on the fabric),
//!   and the fault plan's drop list for the next frame;
//! - on Soft-RoCE in the VM ([`VethLink`]), `rxe1` on `veth1` (10.77.0.2), policy routes
//!   that send each device's packets across the veth pair instead of the kernel's local
//!   path, and a tc filter where `veth1` receives that drops the packets a case names
//!   (dropped on the sending side, a packet would fail rxe's transmit, which then sends
//!   it again without end);
//! - on the emulated libibverbs ([`EmuLink`]), the host's second device from the topology
//!   and the emulator's control `verbs_emu_lose_next_frame`, which loses the next frame
//!   the process's NICs send, as on the simulator.

use std::fmt;
use std::process::Command;

/// A second device joined to the env's device by a link on which packets can be lost.
/// Dropping it undoes what was set up.
pub trait LossyLink: fmt::Debug {
    /// The second device's name.
    fn peer_device(&self) -> &str;

    /// Loses the next packet the env's device sends: the one to QP `dest_qpn` with PSN
    /// `psn` (the case posts so that it is the next), on its way to the second device.
    /// The simulator loses that one frame; the VM's filter matches the BTH's destination
    /// QP and PSN, so it loses every retransmission of it too (the cases expect none).
    ///
    /// # Errors
    /// A message saying what could not be set up.
    fn lose_next(&self, dest_qpn: u32, psn: u32) -> Result<(), String>;
}

/// How a backend makes a [`LossyLink`] for a case.
pub struct LossyLinks(Box<dyn Fn() -> Result<Box<dyn LossyLink>, String>>);

impl LossyLinks {
    /// Links made by `make`.
    pub fn new(make: impl Fn() -> Result<Box<dyn LossyLink>, String> + 'static) -> Self {
        LossyLinks(Box::new(make))
    }

    /// A fresh link.
    ///
    /// # Errors
    /// The backend's message when it cannot make one.
    pub fn open(&self) -> Result<Box<dyn LossyLink>, String> {
        (self.0)()
    }
}

impl fmt::Debug for LossyLinks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LossyLinks")
    }
}

/// The second device's address in the VM (the first, rxe0 on veth0, is 10.77.0.1).
pub const PEER_IP: &str = "10.77.0.2";
const SELF_IP: &str = "10.77.0.1";

/// rxe1 on veth1 in the Soft-RoCE VM, with the routes and the filter hook described in
/// the module doc. Needs root and the VM's veth pair (`cargo xtask test --backend hw
/// --vm`).
#[derive(Debug)]
pub struct VethLink {
    /// What was set up, in order, so that drop undoes exactly that.
    done: Vec<Undo>,
}

#[derive(Debug)]
enum Undo {
    Addr,
    Device,
    Rules,
    LocalRule,
    Sysctl(String, String),
    Clsact,
}

/// Runs `program args`; an error names the command and its stderr.
fn run(program: &str, args: &[&str]) -> Result<(), String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("{program} {}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{program} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl VethLink {
    /// Sets the link up.
    ///
    /// # Errors
    /// What failed (not in the VM, not root, a command missing).
    pub fn open() -> Result<Box<dyn LossyLink>, String> {
        for dev in ["veth0", "veth1"] {
            if !std::path::Path::new("/sys/class/net").join(dev).exists() {
                return Err(format!(
                    "no {dev}: losing packets on rxe needs the Soft-RoCE VM's veth pair \
                     (cargo xtask test --backend hw --vm)"
                ));
            }
        }
        let mut link = VethLink { done: Vec::new() };
        link.set_up()?;
        Ok(Box::new(link))
    }

    fn set_up(&mut self) -> Result<(), String> {
        run(
            "ip",
            &["addr", "add", &format!("{PEER_IP}/24"), "dev", "veth1"],
        )?;
        self.done.push(Undo::Addr);
        run(
            "rdma",
            &["link", "add", "rxe1", "type", "rxe", "netdev", "veth1"],
        )?;
        self.done.push(Undo::Device);
        // Packets the host sends to the other device's address leave through its own
        // veth (rule "iif lo": locally made only), not the local path; arriving on the
        // other veth they are local (the local table, moved after these rules).
        self.done.push(Undo::Rules);
        for (pref, to, dev, src, table) in [
            ("10", PEER_IP, "veth0", SELF_IP, "100"),
            ("11", SELF_IP, "veth1", PEER_IP, "101"),
        ] {
            run(
                "ip",
                &[
                    "rule", "add", "pref", pref, "to", to, "iif", "lo", "lookup", table,
                ],
            )?;
            run(
                "ip",
                &["route", "add", to, "dev", dev, "src", src, "table", table],
            )?;
        }
        run("ip", &["rule", "add", "pref", "100", "lookup", "local"])?;
        run("ip", &["rule", "del", "pref", "0"])?;
        self.done.push(Undo::LocalRule);
        // Packets from one of the host's own addresses arrive on the other veth: accept
        // them.
        for dev in ["all", "veth0", "veth1"] {
            for knob in ["accept_local", "rp_filter"] {
                let key = format!("net/ipv4/conf/{dev}/{knob}");
                let path = format!("/proc/sys/{key}");
                let old = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
                let new = if knob == "accept_local" { "1" } else { "0" };
                std::fs::write(&path, new).map_err(|e| format!("{path}: {e}"))?;
                self.done.push(Undo::Sysctl(path, old.trim().to_string()));
            }
        }
        run("tc", &["qdisc", "add", "dev", "veth1", "clsact"])?;
        self.done.push(Undo::Clsact);
        Ok(())
    }
}

impl LossyLink for VethLink {
    fn peer_device(&self) -> &str {
        "rxe1"
    }

    fn lose_next(&self, dest_qpn: u32, psn: u32) -> Result<(), String> {
        // The BTH follows the IPv4 (20 bytes) and UDP (8) headers: its destination QP is
        // the low 24 bits of the word at 32, its PSN those of the word at 36.
        let qpn = format!("{:#x}", dest_qpn & 0x00ff_ffff);
        let psn = format!("{:#x}", psn & 0x00ff_ffff);
        run(
            "tc",
            &[
                "filter", "add", "dev", "veth1", "ingress", "protocol", "ip", "prio", "1", "u32",
                "match", "ip", "protocol", "17", "0xff", "match", "ip", "dport", "4791", "0xffff",
                "match", "u32", &qpn, "0xffffff", "at", "32", "match", "u32", &psn, "0xffffff",
                "at", "36", "action", "drop",
            ],
        )
    }
}

impl Drop for VethLink {
    fn drop(&mut self) {
        // Best effort, in reverse: a step that fails leaves the rest to undo.
        while let Some(u) = self.done.pop() {
            let _ = match u {
                Undo::Clsact => run("tc", &["qdisc", "del", "dev", "veth1", "clsact"]),
                Undo::Sysctl(path, old) => std::fs::write(&path, old).map_err(|e| e.to_string()),
                Undo::LocalRule => run("ip", &["rule", "add", "pref", "0", "lookup", "local"])
                    .and_then(|()| run("ip", &["rule", "del", "pref", "100"])),
                Undo::Rules => {
                    for (pref, table) in [("10", "100"), ("11", "101")] {
                        let _ = run("ip", &["rule", "del", "pref", pref]);
                        let _ = run("ip", &["route", "flush", "table", table]);
                    }
                    Ok(())
                }
                Undo::Device => run("rdma", &["link", "delete", "rxe1"]),
                Undo::Addr => run(
                    "ip",
                    &["addr", "del", &format!("{PEER_IP}/24"), "dev", "veth1"],
                ),
            };
        }
    }
}

/// The emulated libibverbs' link (`cargo xtask test --backend emu`, which runs these cases
/// on `emulator/topologies/one-rxe-host-two-devices.toml` without a fabric process): the
/// host's second device `rxe1`, and the emulator's `verbs_emu_lose_next_frame`, which
/// loses the next frame this process's NICs send (the one the case names: nothing else
/// is in flight then).
#[derive(Debug)]
pub struct EmuLink {
    lose: extern "C" fn() -> std::ffi::c_int,
}

impl EmuLink {
    /// The emulator's control, when the libibverbs this process runs on is the emulated one.
    fn control() -> Option<extern "C" fn() -> std::ffi::c_int> {
        // SAFETY: dlsym only looks a NUL-terminated name up among the loaded objects.
        let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"verbs_emu_lose_next_frame".as_ptr()) };
        // SAFETY: the emulated library defines the symbol as `extern "C" fn() -> c_int`
        // (emulator/src/extras/control.rs); a null pointer means it is not loaded.
        (!p.is_null()).then(|| unsafe {
            std::mem::transmute::<*mut libc::c_void, extern "C" fn() -> std::ffi::c_int>(p)
        })
    }

    /// True when this process runs on the emulated libibverbs.
    #[must_use]
    pub fn available() -> bool {
        Self::control().is_some()
    }

    /// The link.
    ///
    /// # Errors
    /// When this process does not run on the emulated libibverbs.
    pub fn open() -> Result<Box<dyn LossyLink>, String> {
        let lose = Self::control()
            .ok_or("no verbs_emu_lose_next_frame: not on the emulated libibverbs")?;
        Ok(Box::new(EmuLink { lose }))
    }
}

impl LossyLink for EmuLink {
    fn peer_device(&self) -> &str {
        "rxe1"
    }

    fn lose_next(&self, _dest_qpn: u32, _psn: u32) -> Result<(), String> {
        match (self.lose)() {
            0 => Ok(()),
            e => Err(format!(
                "verbs_emu_lose_next_frame: {}",
                std::io::Error::from_raw_os_error(e)
            )),
        }
    }
}
