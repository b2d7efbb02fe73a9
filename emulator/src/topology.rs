//! The emulated network: which hosts exist, their addresses and device personalities
//! (a TOML file, or the default of four hosts), and which host this process is.

use std::collections::HashSet;
use std::net::Ipv4Addr;

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
}

/// The hosts of the emulated fabric (one switch joins them all).
#[derive(Debug, Clone, PartialEq)]
pub struct Topology {
    /// Every host, in file order.
    pub hosts: Vec<HostSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileTopology {
    host: Vec<FileHost>,
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
                })
                .collect(),
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
    /// ```
    ///
    /// Faults (all optional): `loss`, `duplicate`, `corrupt`, `reorder` (probabilities),
    /// `delay_ns`, `jitter_ns`, `reorder_window_ns`; drawn from the run's seed.
    ///
    /// # Errors
    /// A one-line message for bad TOML, an unknown key or personality, no host, a
    /// repeated host name or address, a fault probability outside 0..=1, or
    /// `direct_verbs = true` on an rxe host.
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
            hosts.push(HostSpec {
                name: h.name,
                ip: h.ip,
                personality,
                faults,
                extra_devices: h.extra_devices,
                direct_verbs,
            });
        }
        Ok(Topology { hosts })
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
}
