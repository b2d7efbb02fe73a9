//! The emulated network: which hosts exist, their addresses and device personalities
//! (a TOML file, or the default of four hosts), and which host this process is.

use std::collections::HashSet;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;

use backend_sim::{LinkFaults, Personality};
use serde::Deserialize;

/// Environment variable naming a topology file (TOML); unset means [`Topology::default`].
pub const TOPOLOGY_ENV: &str = "VERBS_EMU_TOPOLOGY";
/// Environment variable naming the host this process is (default `h1`).
pub const HOST_ENV: &str = "VERBS_EMU_HOST";
/// Environment variable with the seed of the simulator's random draws (default 1).
pub const SEED_ENV: &str = "VERBS_EMU_SEED";

/// One emulated host: a name, the IPv4 address of its port and its device's personality.
#[derive(Debug, Clone, PartialEq)]
pub struct HostSpec {
    /// The name `VERBS_EMU_HOST` selects (`h1`).
    pub name: String,
    /// The port's IPv4 address; the RoCEv2 GID at index 1 is derived from it.
    pub ip: Ipv4Addr,
    /// Device personality (`mlx5` or `rxe`).
    pub personality: Personality,
    /// Faults on the frames the switch sends to this host (its link's receive side).
    pub faults: LinkFaults,
    /// The addresses of the host's further devices (named in order after the first:
    /// `rxe1`, `rxe2` ... or `mlx5_1` ...), each with a port of its own on the switch, of
    /// the host's personality. Only without a fabric process (`cargo xtask emu
    /// --no-fabric`): a fabric process carries one port per host.
    pub extra_devices: Vec<Ipv4Addr>,
    /// Whether an mlx5 device answers as an mlx5 direct-verbs device (a ConnectX-5:
    /// `mlx5dv_is_supported` true, striding RQs) or as one without them (false: a device
    /// whose libmlx5 answers no, ConnectX-4 Lx style). Always false for rxe.
    pub direct_verbs: bool,
    /// A host of another fabric process, reached through one of this fabric's ports
    /// (`remote = true`): this fabric has no port for it and no process may be it here,
    /// but the programs here know its address and MAC (as its own fabric's do).
    pub remote: bool,
}

/// A port of the fabric's switch that leads to a real network (see
/// `fabric::ports`): it carries Ethernet frames both ways, with `faults` on the frames
/// the switch sends out of it.
#[derive(Debug, Clone, PartialEq)]
pub struct PortSpec {
    /// What is at the other end.
    pub kind: PortKind,
    /// Faults on the frames the switch sends out of the port (as a host's `faults`).
    pub faults: LinkFaults,
    /// How many of the first CM MADs the port would send it drops (`drop_cm_mads`: a
    /// fault that picks its frames, for tests of the CM's resends).
    pub drop_cm_mads: u32,
}

/// The kinds of [`PortSpec`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortKind {
    /// VXLAN (RFC 7348): each frame in a UDP datagram from `local` to `remote` with an
    /// 8-byte header carrying `vni`.
    Vxlan {
        /// The UDP address the fabric binds.
        local: SocketAddr,
        /// The UDP address of the peer (a fabric or a Linux `vxlan` interface).
        remote: SocketAddr,
        /// The VXLAN network identifier (24 bits).
        vni: u32,
    },
    /// A QEMU `-netdev stream` peer: the fabric listens on the Unix socket `path`; each
    /// frame is preceded by its length (4 bytes, big-endian) both ways.
    QemuStream {
        /// The socket's path (made by the fabric; it must not exist).
        path: PathBuf,
    },
}

/// Largest VXLAN network identifier (24 bits).
pub const MAX_VNI: u32 = (1 << 24) - 1;

/// The hosts of the emulated fabric (one switch joins them all) and its ports to real
/// networks.
#[derive(Debug, Clone, PartialEq)]
pub struct Topology {
    /// Every host, in file order.
    pub hosts: Vec<HostSpec>,
    /// Ports to real networks, in file order (only a fabric process has them).
    pub ports: Vec<PortSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileTopology {
    host: Vec<FileHost>,
    #[serde(default)]
    port: Vec<FilePort>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FilePort {
    kind: String,
    #[serde(default)]
    local: Option<SocketAddr>,
    #[serde(default)]
    remote: Option<SocketAddr>,
    #[serde(default)]
    vni: Option<u32>,
    #[serde(default)]
    path: Option<PathBuf>,
    #[serde(default)]
    faults: Option<FileFaults>,
    #[serde(default)]
    drop_cm_mads: u32,
}

impl FilePort {
    fn into_spec(self) -> Result<PortSpec, String> {
        let faults = self.faults.unwrap_or_default().into_faults()?;
        let kind = match self.kind.as_str() {
            "vxlan" => {
                if self.path.is_some() {
                    return Err("a vxlan port has no path".into());
                }
                let local = self.local.ok_or("a vxlan port needs local")?;
                let remote = self.remote.ok_or("a vxlan port needs remote")?;
                let vni = self.vni.ok_or("a vxlan port needs vni")?;
                vxlan_kind(local, remote, vni)?
            }
            "qemu-stream" => {
                if self.local.is_some() || self.remote.is_some() || self.vni.is_some() {
                    return Err("a qemu-stream port has a path only (no local, remote, vni)".into());
                }
                let path = self.path.ok_or("a qemu-stream port needs path")?;
                if path.as_os_str().is_empty() {
                    return Err("a qemu-stream port's path is empty".into());
                }
                PortKind::QemuStream { path }
            }
            other => {
                return Err(format!(
                    "unknown port kind {other:?} (expected \"vxlan\" or \"qemu-stream\")"
                ))
            }
        };
        Ok(PortSpec {
            kind,
            faults,
            drop_cm_mads: self.drop_cm_mads,
        })
    }
}

/// A VXLAN port's kind, checked: a 24-bit VNI and a remote with a port.
fn vxlan_kind(local: SocketAddr, remote: SocketAddr, vni: u32) -> Result<PortKind, String> {
    if vni > MAX_VNI {
        return Err(format!("vni = {vni} is not a 24-bit VNI (0..={MAX_VNI})"));
    }
    if remote.port() == 0 || remote.ip().is_unspecified() {
        return Err(format!("remote = {remote} names no peer"));
    }
    if local.is_ipv4() != remote.is_ipv4() {
        return Err(format!(
            "local {local} and remote {remote} are not of one IP version"
        ));
    }
    Ok(PortKind::Vxlan { local, remote, vni })
}

/// Reads the fabric's `--vxlan LOCAL,REMOTE,VNI` (`127.0.0.1:4789,127.0.0.1:4790,42`)
/// as a port without faults.
///
/// # Errors
/// A one-line message naming what is wrong.
pub fn parse_vxlan_flag(s: &str) -> Result<PortSpec, String> {
    let bad = |why: String| format!("--vxlan {s}: {why}");
    let parts: Vec<&str> = s.split(',').collect();
    let [local, remote, vni] = parts[..] else {
        return Err(bad(
            "expected LOCAL,REMOTE,VNI (e.g. 127.0.0.1:4789,127.0.0.1:4790,42)".into(),
        ));
    };
    let addr = |what: &str, v: &str| {
        v.parse::<SocketAddr>()
            .map_err(|_| bad(format!("{what} {v:?} is not an IP:PORT")))
    };
    let (local, remote) = (addr("LOCAL", local)?, addr("REMOTE", remote)?);
    let vni = vni
        .parse::<u32>()
        .map_err(|_| bad(format!("VNI {vni:?} is not a number")))?;
    let kind = vxlan_kind(local, remote, vni).map_err(bad)?;
    Ok(PortSpec {
        kind,
        faults: LinkFaults::default(),
        drop_cm_mads: 0,
    })
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileHost {
    name: String,
    ip: Ipv4Addr,
    #[serde(default)]
    personality: Option<String>,
    #[serde(default)]
    faults: Option<FileFaults>,
    #[serde(default)]
    extra_devices: Vec<Ipv4Addr>,
    #[serde(default)]
    direct_verbs: Option<bool>,
    #[serde(default)]
    remote: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileFaults {
    loss: Option<f64>,
    duplicate: Option<f64>,
    corrupt: Option<f64>,
    corrupt_switch: Option<f64>,
    corrupt_payload: Option<f64>,
    reorder: Option<f64>,
    delay_ns: Option<u64>,
    jitter_ns: Option<u64>,
    reorder_window_ns: Option<u64>,
}

impl FileFaults {
    fn into_faults(self) -> Result<LinkFaults, String> {
        let p = |name: &str, v: Option<f64>| match v {
            None => Ok(0.0),
            Some(x) if (0.0..=1.0).contains(&x) => Ok(x),
            Some(x) => Err(format!("{name} = {x} is not a probability in 0..=1")),
        };
        let f = LinkFaults {
            loss: p("loss", self.loss)?,
            duplicate: p("duplicate", self.duplicate)?,
            corrupt: p("corrupt", self.corrupt)?,
            corrupt_switch: p("corrupt_switch", self.corrupt_switch)?,
            corrupt_payload: p("corrupt_payload", self.corrupt_payload)?,
            burst: None,
            reorder: p("reorder", self.reorder)?,
            delay_ns: self.delay_ns.unwrap_or(0),
            jitter_ns: self.jitter_ns.unwrap_or(0),
            reorder_window_ns: self.reorder_window_ns.unwrap_or(0),
            buffer_frames: None,
        };
        if f.reorder > 0.0 && f.reorder_window_ns == 0 {
            return Err("reorder needs a reorder_window_ns above 0".into());
        }
        Ok(f)
    }
}

impl Default for Topology {
    /// One switch, hosts `h1` .. `h4` with 10.100.0.1 .. 10.100.0.4, one mlx5 device each.
    fn default() -> Self {
        Topology {
            hosts: (1..=4u8)
                .map(|i| HostSpec {
                    name: format!("h{i}"),
                    ip: Ipv4Addr::new(10, 100, 0, i),
                    personality: Personality::Mlx5,
                    faults: LinkFaults::default(),
                    extra_devices: Vec::new(),
                    direct_verbs: true,
                    remote: false,
                })
                .collect(),
            ports: Vec::new(),
        }
    }
}

/// Reads a personality name.
///
/// # Errors
/// A message naming the value when it is neither `mlx5` nor `rxe`.
pub fn parse_personality(s: &str) -> Result<Personality, String> {
    match s {
        "mlx5" => Ok(Personality::Mlx5),
        "rxe" => Ok(Personality::Rxe),
        other => Err(format!(
            "unknown personality {other:?} (expected \"mlx5\" or \"rxe\")"
        )),
    }
}

impl Topology {
    /// Parses a topology file's text:
    ///
    /// ```toml
    /// [[host]]
    /// name = "h1"
    /// ip = "10.100.0.1"
    /// personality = "mlx5"   # optional, mlx5 by default; or "rxe"
    /// faults = { loss = 0.01, delay_ns = 5000 }   # optional: on frames to this host
    /// extra_devices = ["10.100.0.11"]   # optional: more devices, without a fabric process
    /// direct_verbs = false   # optional, mlx5 only: no mlx5 direct verbs (ConnectX-4 Lx style)
    /// remote = false         # optional: true for a host of another fabric, beyond a port
    ///
    /// [[port]]               # optional: ports of a fabric process to real networks
    /// kind = "vxlan"         # or "qemu-stream" with path = "/run/vm.sock"
    /// local = "127.0.0.1:4789"
    /// remote = "127.0.0.1:4790"
    /// vni = 42
    /// faults = { loss = 0.01 }   # optional: on the frames the switch sends out
    /// ```
    ///
    /// Faults (all optional): `loss`, `duplicate`, `corrupt`, `reorder` (probabilities),
    /// `delay_ns`, `jitter_ns`, `reorder_window_ns`; drawn from the run's seed.
    ///
    /// # Errors
    /// A one-line message for bad TOML, an unknown key or personality, no host, a
    /// repeated host name or address, a fault probability outside 0..=1,
    /// `direct_verbs = true` on an rxe host, or a bad port (unknown kind, missing or
    /// extra field, VNI over 24 bits, two ports on one address).
    pub fn parse(text: &str) -> Result<Self, String> {
        let file: FileTopology = toml::from_str(text).map_err(|e| {
            format!(
                "bad topology: {}",
                e.to_string().lines().collect::<Vec<_>>().join(" ")
            )
        })?;
        if file.host.is_empty() {
            return Err("bad topology: no [[host]]".into());
        }
        let mut names = HashSet::new();
        let mut ips = HashSet::new();
        let mut hosts = Vec::new();
        for h in file.host {
            if h.name.is_empty() {
                return Err("bad topology: a host has an empty name".into());
            }
            if !names.insert(h.name.clone()) {
                return Err(format!("bad topology: host {} appears twice", h.name));
            }
            for ip in std::iter::once(h.ip).chain(h.extra_devices.iter().copied()) {
                if !ips.insert(ip) {
                    return Err(format!("bad topology: address {ip} appears twice"));
                }
            }
            let personality = match h.personality.as_deref() {
                None => Personality::Mlx5,
                Some(p) => parse_personality(p)
                    .map_err(|e| format!("bad topology: host {}: {e}", h.name))?,
            };
            let direct_verbs = match (personality, h.direct_verbs) {
                (Personality::Rxe, Some(true)) => {
                    return Err(format!(
                        "bad topology: host {}: rxe has no mlx5 direct verbs",
                        h.name
                    ))
                }
                (Personality::Rxe, _) => false,
                (Personality::Mlx5, dv) => dv.unwrap_or(true),
            };
            let faults = h
                .faults
                .unwrap_or_default()
                .into_faults()
                .map_err(|e| format!("bad topology: host {}: {e}", h.name))?;
            if h.remote && !h.extra_devices.is_empty() {
                return Err(format!(
                    "bad topology: host {}: a remote host has no extra_devices here",
                    h.name
                ));
            }
            hosts.push(HostSpec {
                name: h.name,
                ip: h.ip,
                personality,
                faults,
                extra_devices: h.extra_devices,
                direct_verbs,
                remote: h.remote,
            });
        }
        let mut ports = Vec::new();
        for (i, p) in file.port.into_iter().enumerate() {
            let spec = p
                .into_spec()
                .map_err(|e| format!("bad topology: port {}: {e}", i + 1))?;
            ports.push(spec);
        }
        let topology = Topology { hosts, ports };
        topology
            .check_ports()
            .map_err(|e| format!("bad topology: {e}"))?;
        Ok(topology)
    }

    /// Checks the ports together: no two bind one address or socket path.
    ///
    /// # Errors
    /// A one-line message naming the clash.
    pub fn check_ports(&self) -> Result<(), String> {
        let mut seen = HashSet::new();
        for p in &self.ports {
            let key = match &p.kind {
                PortKind::Vxlan { local, .. } => format!("local address {local}"),
                PortKind::QemuStream { path } => format!("path {}", path.display()),
            };
            if !seen.insert(key.clone()) {
                return Err(format!("two ports have the {key}"));
            }
        }
        Ok(())
    }

    /// The topology the environment names: the file in `VERBS_EMU_TOPOLOGY`, else the default.
    ///
    /// # Errors
    /// The file cannot be read or parsed.
    pub fn from_env() -> Result<Self, String> {
        match std::env::var_os(TOPOLOGY_ENV) {
            None => Ok(Topology::default()),
            Some(path) => {
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| format!("{TOPOLOGY_ENV}={}: {e}", path.to_string_lossy()))?;
                Topology::parse(&text)
                    .map_err(|e| format!("{TOPOLOGY_ENV}={}: {e}", path.to_string_lossy()))
            }
        }
    }

    /// The index of host `name`.
    ///
    /// # Errors
    /// A message listing the hosts when there is no such host.
    pub fn host_index(&self, name: &str) -> Result<usize, String> {
        self.hosts
            .iter()
            .position(|h| h.name == name)
            .ok_or_else(|| {
                let all: Vec<&str> = self.hosts.iter().map(|h| h.name.as_str()).collect();
                format!(
                    "{HOST_ENV}={name} names no host of the topology ({})",
                    all.join(", ")
                )
            })
    }
}

/// The seed in `VERBS_EMU_SEED` (1 when unset).
///
/// # Errors
/// The variable is not a decimal `u64`.
pub fn seed_from_env() -> Result<u64, String> {
    match std::env::var(SEED_ENV) {
        Err(_) => Ok(1),
        Ok(s) => s
            .parse()
            .map_err(|_| format!("{SEED_ENV}={s}: expected a decimal number")),
    }
}

/// The host named in `VERBS_EMU_HOST` (`h1` when unset).
pub fn host_from_env() -> String {
    std::env::var(HOST_ENV).unwrap_or_else(|_| "h1".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_four_mlx5_hosts() {
        let t = Topology::default();
        let names: Vec<&str> = t.hosts.iter().map(|h| h.name.as_str()).collect();
        assert_eq!(names, ["h1", "h2", "h3", "h4"]);
        assert_eq!(t.hosts[3].ip, Ipv4Addr::new(10, 100, 0, 4));
        assert!(t.hosts.iter().all(|h| h.personality == Personality::Mlx5));
        assert_eq!(t.host_index("h3"), Ok(2));
        assert_eq!(
            t.host_index("h9"),
            Err("VERBS_EMU_HOST=h9 names no host of the topology (h1, h2, h3, h4)".into())
        );
    }

    #[test]
    fn parses_a_file() {
        let t = Topology::parse(
            "[[host]]\nname = \"a\"\nip = \"10.1.0.1\"\n\n\
             [[host]]\nname = \"b\"\nip = \"10.1.0.2\"\npersonality = \"rxe\"\n\
             faults = { loss = 0.25, delay_ns = 1000 }\n",
        )
        .unwrap();
        assert_eq!(
            t.hosts,
            vec![
                HostSpec {
                    name: "a".into(),
                    ip: Ipv4Addr::new(10, 1, 0, 1),
                    personality: Personality::Mlx5,
                    faults: LinkFaults::default(),
                    extra_devices: Vec::new(),
                    direct_verbs: true,
                    remote: false,
                },
                HostSpec {
                    name: "b".into(),
                    ip: Ipv4Addr::new(10, 1, 0, 2),
                    personality: Personality::Rxe,
                    faults: LinkFaults {
                        loss: 0.25,
                        delay_ns: 1000,
                        ..LinkFaults::default()
                    },
                    extra_devices: Vec::new(),
                    direct_verbs: false,
                    remote: false,
                },
            ]
        );
    }

    #[test]
    fn direct_verbs_can_be_turned_off_on_mlx5_only() {
        let t =
            Topology::parse("[[host]]\nname = \"a\"\nip = \"10.1.0.1\"\ndirect_verbs = false\n")
                .unwrap();
        assert!(!t.hosts[0].direct_verbs);
        assert_eq!(t.hosts[0].personality, Personality::Mlx5);
        let e = Topology::parse(
            "[[host]]\nname = \"a\"\nip = \"10.1.0.1\"\npersonality = \"rxe\"\ndirect_verbs = true\n",
        )
        .unwrap_err();
        assert_eq!(e, "bad topology: host a: rxe has no mlx5 direct verbs");
    }

    #[test]
    fn a_host_may_have_more_devices_with_addresses_of_their_own() {
        let t = Topology::parse(
            "[[host]]\nname = \"a\"\nip = \"10.1.0.1\"\nextra_devices = [\"10.1.0.11\"]\n",
        )
        .unwrap();
        assert_eq!(t.hosts[0].extra_devices, [Ipv4Addr::new(10, 1, 0, 11)]);
        let clash = "[[host]]\nname = \"a\"\nip = \"10.1.0.1\"\nextra_devices = [\"10.1.0.2\"]\n\
                     [[host]]\nname = \"b\"\nip = \"10.1.0.2\"\n";
        assert_eq!(
            Topology::parse(clash),
            Err("bad topology: address 10.1.0.2 appears twice".into())
        );
    }

    #[test]
    fn refuses_bad_files() {
        let two = "[[host]]\nname = \"a\"\nip = \"10.1.0.1\"\n[[host]]\nname = \"a\"\nip = \"10.1.0.2\"\n";
        assert_eq!(
            Topology::parse(two),
            Err("bad topology: host a appears twice".into())
        );
        let ip = "[[host]]\nname = \"a\"\nip = \"10.1.0.1\"\n[[host]]\nname = \"b\"\nip = \"10.1.0.1\"\n";
        assert_eq!(
            Topology::parse(ip),
            Err("bad topology: address 10.1.0.1 appears twice".into())
        );
        let p = "[[host]]\nname = \"a\"\nip = \"10.1.0.1\"\npersonality = \"cx9\"\n";
        assert_eq!(
            Topology::parse(p),
            Err(
                "bad topology: host a: unknown personality \"cx9\" (expected \"mlx5\" or \"rxe\")"
                    .into()
            )
        );
        let f = "[[host]]\nname = \"a\"\nip = \"10.1.0.1\"\nfaults = { loss = 1.5 }\n";
        assert_eq!(
            Topology::parse(f),
            Err("bad topology: host a: loss = 1.5 is not a probability in 0..=1".into())
        );
        let r = "[[host]]\nname = \"a\"\nip = \"10.1.0.1\"\nfaults = { reorder = 0.1 }\n";
        assert_eq!(
            Topology::parse(r),
            Err("bad topology: host a: reorder needs a reorder_window_ns above 0".into())
        );
        assert_eq!(
            Topology::parse("host = []\n"),
            Err("bad topology: no [[host]]".into())
        );
        assert!(
            Topology::parse("[[host]]\nname = \"a\"\nip = \"10.1.0.300\"\n")
                .unwrap_err()
                .starts_with("bad topology: ")
        );
    }

    #[test]
    fn ports_and_remote_hosts_parse() {
        let t = Topology::parse(
            "[[host]]\nname = \"a\"\nip = \"10.1.0.1\"\n\
             [[host]]\nname = \"b\"\nip = \"10.1.0.2\"\nremote = true\n\
             [[port]]\nkind = \"vxlan\"\nlocal = \"127.0.0.1:4789\"\n\
             remote = \"127.0.0.1:4790\"\nvni = 42\nfaults = { loss = 0.5 }\n\
             drop_cm_mads = 2\n\
             [[port]]\nkind = \"qemu-stream\"\npath = \"/tmp/vm.sock\"\n",
        )
        .unwrap();
        assert!(!t.hosts[0].remote && t.hosts[1].remote);
        assert_eq!(
            t.ports,
            vec![
                PortSpec {
                    kind: PortKind::Vxlan {
                        local: "127.0.0.1:4789".parse().unwrap(),
                        remote: "127.0.0.1:4790".parse().unwrap(),
                        vni: 42,
                    },
                    faults: LinkFaults::loss(0.5),
                    drop_cm_mads: 2,
                },
                PortSpec {
                    kind: PortKind::QemuStream {
                        path: "/tmp/vm.sock".into()
                    },
                    faults: LinkFaults::default(),
                    drop_cm_mads: 0,
                },
            ]
        );
    }

    #[test]
    fn bad_ports_are_refused_in_one_line() {
        let host = "[[host]]\nname = \"a\"\nip = \"10.1.0.1\"\n";
        let port = |body: &str| Topology::parse(&format!("{host}[[port]]\n{body}")).unwrap_err();
        let vx = "kind = \"vxlan\"\nlocal = \"127.0.0.1:4789\"\nremote = \"127.0.0.1:4790\"\n";
        assert_eq!(
            port(&format!("{vx}vni = 16777216\n")),
            "bad topology: port 1: vni = 16777216 is not a 24-bit VNI (0..=16777215)"
        );
        assert_eq!(port(vx), "bad topology: port 1: a vxlan port needs vni");
        assert_eq!(
            port("kind = \"gre\"\n"),
            "bad topology: port 1: unknown port kind \"gre\" (expected \"vxlan\" or \"qemu-stream\")"
        );
        assert_eq!(
            port("kind = \"vxlan\"\nlocal = \"127.0.0.1:1\"\nremote = \"127.0.0.1:0\"\nvni = 1\n"),
            "bad topology: port 1: remote = 127.0.0.1:0 names no peer"
        );
        assert_eq!(
            port("kind = \"qemu-stream\"\npath = \"x\"\nvni = 3\n"),
            "bad topology: port 1: a qemu-stream port has a path only (no local, remote, vni)"
        );
        assert_eq!(
            port(&format!("{vx}vni = 1\nfaults = {{ loss = 2.0 }}\n")),
            "bad topology: port 1: loss = 2 is not a probability in 0..=1"
        );
        let twice = format!("{host}[[port]]\n{vx}vni = 1\n[[port]]\n{vx}vni = 2\n");
        assert_eq!(
            Topology::parse(&twice).unwrap_err(),
            "bad topology: two ports have the local address 127.0.0.1:4789"
        );
        let e = port("kind = \"vxlan\"\nlocal = \"nowhere\"\n");
        assert!(e.starts_with("bad topology: ") && !e.contains('\n'), "{e}");
    }

    #[test]
    fn the_vxlan_flag_parses_and_bad_ones_are_named() {
        assert_eq!(
            parse_vxlan_flag("127.0.0.1:4789,127.0.0.1:4790,42").unwrap(),
            PortSpec {
                kind: PortKind::Vxlan {
                    local: "127.0.0.1:4789".parse().unwrap(),
                    remote: "127.0.0.1:4790".parse().unwrap(),
                    vni: 42,
                },
                faults: LinkFaults::default(),
                drop_cm_mads: 0,
            }
        );
        assert_eq!(
            parse_vxlan_flag("127.0.0.1:4789,42").unwrap_err(),
            "--vxlan 127.0.0.1:4789,42: expected LOCAL,REMOTE,VNI (e.g. 127.0.0.1:4789,127.0.0.1:4790,42)"
        );
        assert_eq!(
            parse_vxlan_flag("127.0.0.1:4789,here:1,42").unwrap_err(),
            "--vxlan 127.0.0.1:4789,here:1,42: REMOTE \"here:1\" is not an IP:PORT"
        );
        assert_eq!(
            parse_vxlan_flag("127.0.0.1:4789,127.0.0.1:4790,x").unwrap_err(),
            "--vxlan 127.0.0.1:4789,127.0.0.1:4790,x: VNI \"x\" is not a number"
        );
        assert_eq!(
            parse_vxlan_flag("127.0.0.1:4789,[::1]:4790,7").unwrap_err(),
            "--vxlan 127.0.0.1:4789,[::1]:4790,7: local 127.0.0.1:4789 and remote [::1]:4790 are not of one IP version"
        );
    }
}
