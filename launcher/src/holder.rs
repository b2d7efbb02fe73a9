//! The holder of a fabric: a background process that the first `verbs-emu run` of a
//! fabric starts. It owns the namespaces of the emulated network (a user namespace when
//! not root; a "switch" network namespace with a bridge; a network namespace per host
//! whose veth to the bridge holds the host's address) and the fabric process, and hands
//! the namespaces to each launcher that asks on its control socket. When the last
//! launcher has gone it stops the fabric and exits, and the namespaces go with it.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::Ipv4Addr;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use ibverbs::topology::Topology;

use crate::proto::{self, Request, Response};
use crate::sys;

/// The bridge in the switch namespace that joins the hosts' veths.
const BRIDGE: &str = "br0";
/// The host's interface, in its own network namespace.
pub const INTERFACE: &str = "eth0";
/// The prefix length of the hosts' subnet.
const PREFIX: u8 = 24;
/// The control socket's file name in the state directory.
pub const CONTROL: &str = "control.sock";
/// The lock file's name: a launcher holds it while it joins (or starts) the fabric, the
/// holder while it stops.
pub const LOCK: &str = "lock";
/// The seed of a fabric whose first launcher gives none.
pub const DEFAULT_SEED: u64 = 1;
/// The topology file the fabric and the programs read, in the state directory.
pub const TOPOLOGY: &str = "topology.toml";

/// What the holder is started with (by the launcher, as `verbs-emu holder ...`).
#[derive(Debug, Clone)]
pub struct Config {
    /// The fabric's state directory.
    pub state: PathBuf,
    /// The `verbs-emu-fabric` binary.
    pub fabric_bin: PathBuf,
    /// The topology file (`None`: the default topology).
    pub topology: Option<PathBuf>,
    /// The seed of the fabric and the programs.
    pub seed: u64,
    /// Where the fabric captures frames.
    pub pcap: Option<PathBuf>,
}

/// The one-line hint for a kernel that refuses an unprivileged user namespace.
pub fn userns_hint() -> String {
    let read = |p: &str| std::fs::read_to_string(p).ok().map(|s| s.trim().to_owned());
    if read("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") {
        "unprivileged user namespaces are off: enable them with \
         `sudo sysctl -w kernel.unprivileged_userns_clone=1`, or run verbs-emu as root"
            .into()
    } else if read("/proc/sys/user/max_user_namespaces").as_deref() == Some("0") {
        "user namespaces are off: enable them with \
         `sudo sysctl -w user.max_user_namespaces=15000`, or run verbs-emu as root"
            .into()
    } else if read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").as_deref() == Some("1")
    {
        "AppArmor restricts unprivileged user namespaces: allow them with \
         `sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`, or run verbs-emu as root"
            .into()
    } else {
        "the kernel refuses an unprivileged user namespace: run verbs-emu as root".into()
    }
}

/// The `ip` command: on `PATH`, or in the folders that hold it where `PATH` lacks them
/// (an ordinary user's `PATH` on Debian has no `/usr/sbin`).
fn ip_command() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|d| d.join("ip"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("ip"))
}

/// Runs `ip -batch -` with `lines` in the calling thread's namespaces.
fn ip(lines: &[String]) -> Result<(), String> {
    let mut child = Command::new(ip_command())
        .args(["-batch", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                "the `ip` command is missing: install iproute2 (`sudo apt-get install iproute2`)"
                    .to_owned()
            } else {
                format!("cannot run ip: {e}")
            }
        })?;
    let script = lines.join("\n") + "\n";
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(script.as_bytes())
            .map_err(|e| format!("cannot talk to ip: {e}"))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("waiting for ip: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    let err = String::from_utf8_lossy(&out.stderr);
    let first = err.lines().next().unwrap_or("").trim().to_owned();
    if err.contains("Unknown device type") {
        return Err(format!(
            "the kernel cannot make veth or bridge links ({first}): load them with \
             `sudo modprobe -a veth bridge`"
        ));
    }
    if err.contains("Operation not permitted") && sys::ids().0 != 0 {
        return Err(format!("ip: {first}: {}", userns_hint()));
    }
    Err(format!(
        "ip failed ({first}) on: {}",
        script.trim().replace('\n', "; ")
    ))
}

fn mac_of(ip: Ipv4Addr) -> String {
    let o = ip.octets();
    format!("02:00:{:02x}:{:02x}:{:02x}:{:02x}", o[0], o[1], o[2], o[3])
}

/// The namespaces of the emulated network, made in the calling (single-threaded)
/// process: it ends in the switch namespace.
struct Network {
    userns: Option<OwnedFd>,
    hosts: HashMap<String, OwnedFd>,
}

fn build_network(topology: &Topology) -> Result<Network, String> {
    let (uid, gid) = sys::ids();
    let userns = if uid == 0 {
        sys::unshare(libc::CLONE_NEWNET)
            .map_err(|e| format!("cannot make a network namespace: {e}"))?;
        None
    } else {
        sys::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET)
            .map_err(|e| format!("cannot make a user namespace ({e}): {}", userns_hint()))?;
        sys::map_root_to(uid, gid).map_err(|e| {
            format!(
                "cannot map uid {uid} in a user namespace ({e}): {}",
                userns_hint()
            )
        })?;
        Some(sys::current_userns().map_err(|e| format!("/proc/self/ns/user: {e}"))?)
    };
    let switch = sys::current_netns().map_err(|e| format!("/proc/thread-self/ns/net: {e}"))?;
    ip(&[
        "link set lo up".into(),
        format!("link add {BRIDGE} type bridge"),
        format!("link set {BRIDGE} up"),
    ])?;
    let me = std::process::id();
    let mut hosts = HashMap::new();
    for (i, h) in topology.hosts.iter().enumerate() {
        sys::unshare(libc::CLONE_NEWNET)
            .map_err(|e| format!("cannot make the network namespace of {}: {e}", h.name))?;
        let netns = sys::current_netns().map_err(|e| format!("/proc/thread-self/ns/net: {e}"))?;
        ip(&["link set lo up".into()])?;
        sys::setns(switch.as_fd(), libc::CLONE_NEWNET)
            .map_err(|e| format!("cannot return to the switch namespace: {e}"))?;
        let veth = format!("vh{i}");
        ip(&[
            format!(
                "link add {veth} type veth peer name {INTERFACE} netns /proc/{me}/fd/{}",
                netns.as_raw_fd()
            ),
            format!("link set {veth} master {BRIDGE} up"),
        ])?;
        sys::setns(netns.as_fd(), libc::CLONE_NEWNET)
            .map_err(|e| format!("cannot enter the network namespace of {}: {e}", h.name))?;
        ip(&[
            format!("link set {INTERFACE} address {}", mac_of(h.ip)),
            format!("addr add {}/{PREFIX} dev {INTERFACE}", h.ip),
            format!("link set {INTERFACE} up"),
        ])?;
        sys::setns(switch.as_fd(), libc::CLONE_NEWNET)
            .map_err(|e| format!("cannot return to the switch namespace: {e}"))?;
        hosts.insert(h.name.clone(), netns);
    }
    Ok(Network { userns, hosts })
}

/// The running fabric process.
struct Fabric {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: ChildStdout,
    socket: PathBuf,
}

fn start_fabric(c: &Config) -> Result<Fabric, String> {
    let dir = c.state.join("fabric");
    if dir.exists() {
        // Left by a fabric that was killed: this holder has the fabric's lock.
        let _ = std::fs::remove_dir_all(&dir);
    }
    let mut cmd = Command::new(&c.fabric_bin);
    cmd.arg("--stop-on-eof")
        .arg("--dir")
        .arg(&dir)
        .args(["--seed", &c.seed.to_string()])
        // What the fabric reads is on its command line, not in the first launcher's
        // environment.
        .env_remove(ibverbs::topology::TOPOLOGY_ENV)
        .env_remove(ibverbs::topology::SEED_ENV)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    if let Some(t) = &c.topology {
        cmd.arg("--topology").arg(t);
    }
    if let Some(p) = &c.pcap {
        cmd.arg("--pcap").arg(p);
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", c.fabric_bin.display()))?;
    let stdin = child.stdin.take();
    let mut stdout = BufReader::new(child.stdout.take().ok_or("no fabric stdout")?);
    let mut line = String::new();
    if !matches!(stdout.read_line(&mut line), Ok(n) if n > 0) {
        let status = child
            .wait()
            .map_or_else(|e| e.to_string(), |s| s.to_string());
        return Err(format!(
            "the fabric process did not start ({status}; see {})",
            c.state.join("fabric.log").display()
        ));
    }
    Ok(Fabric {
        child,
        stdin,
        stdout: stdout.into_inner(),
        socket: PathBuf::from(line.trim_end()),
    })
}

/// The holder, serving.
struct Holder {
    config: Config,
    topology: Topology,
    topology_text: Option<String>,
    network: Network,
    fabric: Fabric,
    listener: UnixListener,
    lock: std::fs::File,
    clients: Vec<UnixStream>,
    /// The connection of a launcher waiting for this fabric to stop.
    stopping: Option<UnixStream>,
}

/// `verbs-emu holder`: prints `ready` (or the one-line reason it cannot start) on stdout,
/// then serves until the last launcher goes. Returns the process's exit status.
pub fn main(config: Config) -> u8 {
    let _ = sys::own_process_group();
    match start(config) {
        Err(e) => {
            println!("{e}");
            1
        }
        Ok(mut h) => {
            println!("ready");
            let _ = std::io::stdout().flush();
            h.serve()
        }
    }
}

fn start(config: Config) -> Result<Holder, String> {
    let topology_text = match &config.topology {
        Some(p) => Some(std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()))?),
        None => None,
    };
    let topology = match &topology_text {
        Some(t) => Topology::parse(t)?,
        None => Topology::default(),
    };
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(config.state.join(LOCK))
        .map_err(|e| format!("{}: {e}", config.state.join(LOCK).display()))?;
    // The fabric first, in the caller's network and user namespaces: its ports to real
    // networks (a VXLAN tunnel to another machine's fabric, a QEMU socket) are there, not
    // in the emulated hosts' network. Should the network fail, dropping it closes its
    // stdin and it stops.
    let fabric = start_fabric(&config)?;
    let network = build_network(&topology)?;
    let path = config.state.join(CONTROL);
    let _ = std::fs::remove_file(&path);
    let listener = UnixListener::bind(&path)
        .map_err(|e| format!("cannot listen on {}: {e}", path.display()))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(Holder {
        config,
        topology,
        topology_text,
        network,
        fabric,
        listener,
        lock,
        clients: Vec::new(),
        stopping: None,
    })
}

impl Holder {
    fn serve(&mut self) -> u8 {
        loop {
            let mut fds = vec![
                (self.listener.as_raw_fd(), libc::POLLIN),
                (self.fabric.stdout.as_raw_fd(), libc::POLLIN),
            ];
            fds.extend(self.clients.iter().map(|c| (c.as_raw_fd(), libc::POLLIN)));
            let timeout = if self.clients.is_empty() { 100 } else { -1 };
            let ev = match sys::poll(&fds, timeout) {
                Ok(ev) => ev,
                Err(e) => {
                    eprintln!("verbs-emu holder: poll: {e}");
                    return self.stop(1);
                }
            };
            if ev[1] != 0 {
                eprintln!("verbs-emu holder: the fabric process ended");
                return self.stop(1);
            }
            // Gone launchers first (a connection only ever closes), then new ones.
            let mut i = 0;
            self.clients.retain(|_| {
                i += 1;
                ev[i + 1] == 0
            });
            if ev[0] != 0 {
                self.accept();
            }
            // A launcher that holds the lock waits for this process to go.
            if self.stopping.is_some() {
                return self.stop(0);
            }
            if self.clients.is_empty() && self.idle() {
                return self.stop(0);
            }
        }
    }

    /// True when no launcher is joining: this holder then has the lock and stops.
    fn idle(&self) -> bool {
        if !sys::lock_exclusive(self.lock.as_fd(), false).unwrap_or(false) {
            return false;
        }
        let pending = sys::poll(&[(self.listener.as_raw_fd(), libc::POLLIN)], 0)
            .map_or(true, |ev| ev[0] != 0);
        if pending {
            let _ = sys::unlock(self.lock.as_fd());
            return false;
        }
        true
    }

    fn accept(&mut self) {
        while let Ok((sock, _)) = self.listener.accept() {
            let _ = sock.set_nonblocking(false);
            let _ = sock.set_read_timeout(Some(Duration::from_secs(10)));
            let req = match proto::recv::<Request>(&sock) {
                Ok(Some((req, _))) => req,
                _ => continue,
            };
            if self.clients.is_empty() && !self.is_exactly(&req) {
                // Nobody uses this fabric: rather than refuse other settings, make way for
                // a fabric with them. The connection closes when this process exits.
                if proto::send(&sock, &Response::Stopping, &[]).is_ok() {
                    self.stopping = Some(sock);
                }
                return;
            }
            let (resp, fds) = self.answer(&req);
            if proto::send(&sock, &resp, &fds).is_ok() && matches!(resp, Response::Joined { .. }) {
                self.clients.push(sock);
            }
        }
    }

    /// Whether this fabric has the settings `req` asks for, the defaults where it names
    /// none.
    fn is_exactly(&self, req: &Request) -> bool {
        req.topology == self.topology_text
            && req.seed.unwrap_or(DEFAULT_SEED) == self.config.seed
            && req.pcap == self.config.pcap
    }

    fn answer(&self, req: &Request) -> (Response, Vec<&OwnedFd>) {
        let name = self
            .config
            .state
            .file_name()
            .map_or(String::new(), |n| n.to_string_lossy().into_owned());
        let refuse = |why: String| (Response::Refused(why), Vec::new());
        if let Some(t) = &req.topology {
            if Some(t) != self.topology_text.as_ref() {
                return refuse(format!(
                    "fabric {name} already runs with another topology: give the same \
                     --topology as its first launcher, or another --fabric NAME"
                ));
            }
        }
        if req.seed.is_some_and(|s| s != self.config.seed) {
            return refuse(format!(
                "fabric {name} already runs with seed {}: give the same --seed, or another --fabric NAME",
                self.config.seed
            ));
        }
        if req.pcap.is_some() && req.pcap != self.config.pcap {
            return refuse(format!(
                "fabric {name} already runs{}: --pcap belongs to its first launcher \
                 (or give another --fabric NAME)",
                self.config
                    .pcap
                    .as_ref()
                    .map_or(" without a capture".to_owned(), |p| format!(
                        ", capturing to {}",
                        p.display()
                    ))
            ));
        }
        let Some(netns) = self.network.hosts.get(&req.host) else {
            let all: Vec<&str> = self
                .topology
                .hosts
                .iter()
                .map(|h| h.name.as_str())
                .collect();
            return refuse(format!(
                "--host {}: no such host in the topology of fabric {name} ({})",
                req.host,
                all.join(", ")
            ));
        };
        if let Some(h) = self.topology.hosts.iter().find(|h| h.name == req.host) {
            if !h.extra_devices.is_empty() {
                let extra: Vec<String> = h.extra_devices.iter().map(ToString::to_string).collect();
                return refuse(format!(
                    "--host {}: its extra_devices ({}) need the emulator without a fabric \
                     process, and verbs-emu runs one: remove them from the topology",
                    h.name,
                    extra.join(", ")
                ));
            }
        }
        let mut fds = Vec::new();
        if let Some(u) = &self.network.userns {
            fds.push(u);
        }
        fds.push(netns);
        (
            Response::Joined {
                fabric: self.fabric.socket.clone(),
                topology: self.config.topology.clone(),
                seed: self.config.seed,
                userns: self.network.userns.is_some(),
                interface: INTERFACE.into(),
            },
            fds,
        )
    }

    /// Stops the fabric (it prints its summary to the log) and removes the control socket.
    fn stop(&mut self, code: u8) -> u8 {
        let _ = std::fs::remove_file(self.config.state.join(CONTROL));
        drop(self.fabric.stdin.take());
        match self.fabric.child.wait() {
            Ok(s) if s.success() => code,
            Ok(s) => {
                eprintln!("verbs-emu holder: the fabric process failed ({s})");
                1
            }
            Err(e) => {
                eprintln!("verbs-emu holder: waiting for the fabric: {e}");
                1
            }
        }
    }
}

/// The control socket of the holder of the fabric in `dir`.
pub fn control_path(dir: &Path) -> PathBuf {
    dir.join(CONTROL)
}
