//! The scenario value. Every field has a TOML name; unknown fields are errors, so a typo
//! in a hand-written scenario is caught rather than ignored.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

/// Why a scenario is not runnable.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ScenarioError {
    /// The TOML does not parse or does not fit the model: one line, with the line and
    /// column where the parser stopped (none for a field missing from the whole file).
    #[error("{0}")]
    Toml(String),
    /// A reference to a host, group or sender that does not exist.
    #[error("{0} refers to {1}, which does not exist")]
    Dangling(String, String),
    /// A value out of its range.
    #[error("{0}")]
    Invalid(String),
}

/// A TOML error as one line: `line L, column C: message` (toml's own rendering quotes
/// the source over several lines); no position when the error is about the whole text
/// (a missing top-level field).
fn one_line(text: &str, e: &toml::de::Error) -> String {
    let message = e
        .message()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ");
    match e.span() {
        Some(span) if !(span.start == 0 && span.end >= text.len()) => {
            let before = &text[..span.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            format!("line {line}, column {column}: {message}")
        }
        _ => message,
    }
}

/// The NIC model a host has (the simulator's personality; on hardware, what is there).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Nic {
    /// ConnectX-style: RAW_PACKET QPs and flow steering.
    #[default]
    Mlx5,
    /// Soft-RoCE: UD and RC only.
    Rxe,
}

/// A simulated (or real) host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Host {
    /// Name the senders and receivers refer to.
    pub name: String,
    /// IPv4 address of its NIC.
    pub ip: Ipv4Addr,
    /// NIC model.
    #[serde(default)]
    pub nic: Nic,
}

/// A multicast group and UDP port heaps are sent to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Group {
    /// IPv4 multicast address.
    pub addr: Ipv4Addr,
    /// UDP port.
    pub port: u16,
}

/// A SPEAD sender.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sender {
    /// The host it runs on.
    pub host: String,
    /// Index into [`Scenario::groups`].
    pub group: usize,
    /// Heaps to send.
    pub heaps: u32,
    /// Payload bytes per heap.
    pub heap_size: usize,
    /// Addressed items the payload is split into (>= 1).
    #[serde(default = "one")]
    pub items: u32,
    /// Maximum SPEAD packet size in bytes (spead2's `--packet`).
    #[serde(default = "default_packet")]
    pub packet_size: usize,
    /// Send rate in bytes per second of packets; 0 = as fast as possible.
    #[serde(default)]
    pub rate: f64,
    /// Substreams: heap counters interleave `substreams` ways.
    #[serde(default = "one")]
    pub substreams: u32,
}

/// How a receiver gets packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// RAW_PACKET QP with flow steering (spead2's ibv path; mlx5 only).
    #[default]
    Raw,
    /// UD QP attached to the multicast group (runs on rxe and InfiniBand).
    Ud,
    /// Kernel UDP socket.
    Udp,
}

/// A SPEAD receiver.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Receiver {
    /// The host it runs on.
    pub host: String,
    /// Transport.
    #[serde(default)]
    pub transport: Transport,
    /// Indices into [`Scenario::groups`] it subscribes to.
    pub groups: Vec<usize>,
    /// Live heaps per substream (spead2's `max_heaps`).
    #[serde(default = "default_max_heaps")]
    pub max_heaps: usize,
    /// Substreams the receiver's stream splits heaps into.
    #[serde(default = "one")]
    pub substreams: u32,
    /// Receive buffer slots (each one packet).
    #[serde(default = "default_slots")]
    pub buffer_slots: usize,
    /// Simulated time the consumer spends per heap, in ns (a slow consumer).
    #[serde(default)]
    pub consumer_delay_ns: u64,
}

/// A window of time in which a host is cut off from the fabric.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Partition {
    /// The host.
    pub host: String,
    /// Start, simulated ns.
    pub start_ns: u64,
    /// End, simulated ns.
    pub end_ns: u64,
}

/// Faults. `drop` names exact packets (indices in the order senders emit them, counted
/// over all senders); the probabilities are drawn from the scenario's seed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Faults {
    /// Exact packet indices to drop.
    #[serde(default)]
    pub drop: Vec<u64>,
    /// Exact packet indices to duplicate.
    #[serde(default)]
    pub duplicate: Vec<u64>,
    /// Probability each packet is lost.
    #[serde(default)]
    pub loss: f64,
    /// Probability each packet is duplicated.
    #[serde(default)]
    pub dup: f64,
    /// Packets may be delivered up to this many positions late.
    #[serde(default)]
    pub reorder_window: u32,
    /// Probability, on every link, that a packet gets one bit flipped on the wire (the
    /// receiving port drops it by its Ethernet FCS).
    #[serde(default)]
    pub corrupt: f64,
    /// Probability, on every link, that a packet gets one bit flipped inside the switch
    /// (the FCS stays good: a RoCEv2 receiver's NIC drops it by IPv4 header, UDP checksum
    /// or ICRC; a raw receiver sees IP_CSUM_OK unset and drops it).
    #[serde(default)]
    pub corrupt_switch: f64,
    /// Probability that a sender corrupts one bit of a packet's payload before making its
    /// checksums (a buggy sender: the packet is valid on the wire, and only the receiver's
    /// own checks, SPEAD decoding or the heap digest, can notice).
    #[serde(default)]
    pub corrupt_payload: f64,
    /// Bursts of loss on every link (a Gilbert-Elliott channel).
    #[serde(default)]
    pub burst: Option<Burst>,
    /// Extra delay per packet, ns.
    #[serde(default)]
    pub delay_ns: u64,
    /// Uniform jitter on top of the delay, ns.
    #[serde(default)]
    pub jitter_ns: u64,
    /// Partitions.
    #[serde(default)]
    pub partitions: Vec<Partition>,
}

impl Faults {
    /// True when the run should lose nothing.
    pub fn is_none(&self) -> bool {
        self.drop.is_empty()
            && self.duplicate.is_empty()
            && self.loss == 0.0
            && self.dup == 0.0
            && self.reorder_window == 0
            && self.corrupt == 0.0
            && self.corrupt_switch == 0.0
            && self.corrupt_payload == 0.0
            && self.burst.is_none()
            && self.partitions.is_empty()
    }

    /// True when only faults a sender can apply by itself are present (exact drops and
    /// duplicates), so the scenario runs the same on hardware.
    pub fn sender_applicable(&self) -> bool {
        self.loss == 0.0
            && self.dup == 0.0
            && self.reorder_window == 0
            && self.corrupt == 0.0
            && self.corrupt_switch == 0.0
            && self.corrupt_payload == 0.0
            && self.burst.is_none()
            && self.delay_ns == 0
            && self.jitter_ns == 0
            && self.partitions.is_empty()
    }
}

/// Bursts of loss: before each packet a link enters a burst with probability `enter` and
/// leaves one with probability `leave`; in a burst it loses each packet with probability
/// `loss` (1 when not given).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Burst {
    /// Probability per packet of entering a burst.
    pub enter: f64,
    /// Probability per packet of leaving a burst (the mean burst is `1 / leave` packets).
    pub leave: f64,
    /// Probability of losing a packet during a burst.
    #[serde(default = "certain")]
    pub loss: f64,
}

fn certain() -> f64 {
    1.0
}

/// A whole scenario.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Name, for reports and file names.
    pub name: String,
    /// The seed: breaks ties and draws probabilistic faults. TOML integers are signed
    /// 64-bit, so seeds above `i64::MAX` are written as strings.
    #[serde(default, with = "seed_serde")]
    pub seed: u64,
    /// Hosts.
    pub hosts: Vec<Host>,
    /// Multicast groups.
    pub groups: Vec<Group>,
    /// Senders.
    pub senders: Vec<Sender>,
    /// Receivers.
    pub receivers: Vec<Receiver>,
    /// Faults.
    #[serde(default)]
    pub faults: Faults,
}

/// The seed as a TOML integer when it fits, else as a decimal string; both read back.
mod seed_serde {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(seed: &u64, s: S) -> Result<S::Ok, S::Error> {
        match i64::try_from(*seed) {
            Ok(v) => s.serialize_i64(v),
            Err(_) => s.serialize_str(&seed.to_string()),
        }
    }

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Repr {
        Int(u64),
        Text(String),
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        match Repr::deserialize(d)? {
            Repr::Int(v) => Ok(v),
            Repr::Text(t) => t.trim().parse().map_err(serde::de::Error::custom),
        }
    }
}

fn one() -> u32 {
    1
}
fn default_packet() -> usize {
    1472
}
fn default_max_heaps() -> usize {
    4
}
fn default_slots() -> usize {
    4096
}

/// The largest UD message: the active MTU of rxe on a 1500-byte netdev (and of the
/// simulated ports).
pub const UD_MTU: usize = 1024;

/// Bytes of SPEAD header and the four standard item pointers every packet carries.
pub const SPEAD_OVERHEAD: usize = 8 + 4 * 8;

impl Scenario {
    /// Parses TOML and validates.
    ///
    /// # Errors
    /// [`ScenarioError`] for bad TOML or an invalid scenario.
    pub fn from_toml(text: &str) -> Result<Self, ScenarioError> {
        let s: Scenario =
            toml::from_str(text).map_err(|e| ScenarioError::Toml(one_line(text, &e)))?;
        s.validate()?;
        Ok(s)
    }

    /// Writes TOML.
    ///
    /// # Errors
    /// [`ScenarioError::Toml`] for values TOML cannot hold (integers above `i64::MAX`
    /// outside the seed).
    pub fn to_toml(&self) -> Result<String, ScenarioError> {
        toml::to_string_pretty(self).map_err(|e| ScenarioError::Toml(e.to_string()))
    }

    /// The index of the host called `name`.
    pub fn host_index(&self, name: &str) -> Option<usize> {
        self.hosts.iter().position(|h| h.name == name)
    }

    /// Checks references and ranges.
    ///
    /// # Errors
    /// [`ScenarioError::Dangling`] or [`ScenarioError::Invalid`] naming the problem.
    pub fn validate(&self) -> Result<(), ScenarioError> {
        let invalid = |m: String| Err(ScenarioError::Invalid(m));
        let mut names = BTreeSet::new();
        for h in &self.hosts {
            if !names.insert(&h.name) {
                return invalid(format!("host name {:?} is used twice", h.name));
            }
            if h.ip.is_multicast() || h.ip.is_unspecified() || h.ip.is_broadcast() {
                return invalid(format!(
                    "host {} has address {}, not a unicast address",
                    h.name, h.ip
                ));
            }
        }
        for (i, g) in self.groups.iter().enumerate() {
            if !g.addr.is_multicast() {
                return invalid(format!(
                    "group {i} address {} is not IPv4 multicast",
                    g.addr
                ));
            }
            if g.port == 0 {
                return invalid(format!("group {i} has port 0"));
            }
        }
        for (i, s) in self.senders.iter().enumerate() {
            let who = format!("sender {i}");
            if self.host_index(&s.host).is_none() {
                return Err(ScenarioError::Dangling(who, format!("host {:?}", s.host)));
            }
            if s.group >= self.groups.len() {
                return Err(ScenarioError::Dangling(who, format!("group {}", s.group)));
            }
            if s.packet_size < SPEAD_OVERHEAD + 8 * (s.items as usize + 1) + 8
                || s.packet_size > 9000
            {
                return invalid(format!(
                    "{who}: packet size {} is outside [{}, 9000]",
                    s.packet_size,
                    SPEAD_OVERHEAD + 8 * (s.items as usize + 1) + 8
                ));
            }
            if s.items == 0 || s.substreams == 0 || !(s.rate >= 0.0 && s.rate.is_finite()) {
                return invalid(format!(
                    "{who}: items and substreams must be >= 1 and rate finite and >= 0"
                ));
            }
            if s.heap_size == 0 || s.heap_size > 64 << 20 {
                return invalid(format!(
                    "{who}: heap size {} is outside [1, 64 MiB]",
                    s.heap_size
                ));
            }
        }
        for (i, snd) in self.senders.iter().enumerate() {
            let raw = self
                .receivers
                .iter()
                .any(|r| r.transport == Transport::Raw && r.groups.contains(&snd.group));
            let h = self.host_index(&snd.host).unwrap_or(0);
            if raw && self.hosts[h].nic == Nic::Rxe {
                return invalid(format!("sender {i}: its group has raw receivers, which need an mlx5 NIC at the sender; host {} has rxe", snd.host));
            }
        }
        for (i, r) in self.receivers.iter().enumerate() {
            let who = format!("receiver {i}");
            let Some(h) = self.host_index(&r.host) else {
                return Err(ScenarioError::Dangling(who, format!("host {:?}", r.host)));
            };
            if let Some(&g) = r.groups.iter().find(|&&g| g >= self.groups.len()) {
                return Err(ScenarioError::Dangling(who, format!("group {g}")));
            }
            if r.max_heaps == 0 || r.buffer_slots == 0 || r.substreams == 0 {
                return invalid(format!(
                    "{who}: max_heaps, substreams and buffer_slots must be >= 1"
                ));
            }
            if r.transport == Transport::Ud {
                let ports: BTreeSet<u16> = r.groups.iter().map(|&g| self.groups[g].port).collect();
                if ports.len() > 1 {
                    return invalid(format!("{who}: a UD receiver's groups must share one UDP port (it selects the Q_Key)"));
                }
            }
            if r.transport == Transport::Raw && self.hosts[h].nic == Nic::Rxe {
                return invalid(format!(
                    "{who}: the raw transport needs an mlx5 NIC, host {} has rxe",
                    r.host
                ));
            }
        }
        let p = &self.faults;
        let burst = p.burst.map_or([0.0; 3], |b| [b.enter, b.leave, b.loss]);
        for (name, v) in [
            ("loss", p.loss),
            ("dup", p.dup),
            ("corrupt", p.corrupt),
            ("corrupt_switch", p.corrupt_switch),
            ("corrupt_payload", p.corrupt_payload),
            ("burst.enter", burst[0]),
            ("burst.leave", burst[1]),
            ("burst.loss", burst[2]),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return invalid(format!("fault probability {name} = {v} is outside [0, 1]"));
            }
        }
        for part in &p.partitions {
            if self.host_index(&part.host).is_none() {
                return Err(ScenarioError::Dangling(
                    "a partition".into(),
                    format!("host {:?}", part.host),
                ));
            }
            if part.end_ns < part.start_ns {
                return invalid(format!("partition of {} ends before it starts", part.host));
            }
        }
        Ok(())
    }

    /// The heap counter of a sender's `k`-th heap: senders of a scenario never share a
    /// counter, and a sender's counters run up from 1 as spead2's do.
    pub fn heap_cnt(&self, sender: usize, k: u32) -> u64 {
        u64::from(k) * self.senders.len() as u64 + sender as u64 + 1
    }

    /// The sender that sent heap `cnt`, and which of its heaps it was.
    pub fn heap_origin(&self, cnt: u64) -> Option<(usize, u32)> {
        let n = self.senders.len() as u64;
        if cnt == 0 || n == 0 {
            return None;
        }
        let sender = ((cnt - 1) % n) as usize;
        let k = u32::try_from((cnt - 1) / n).ok()?;
        (k < self.senders[sender].heaps).then_some((sender, k))
    }

    /// The packet size sender `i` really uses: its `packet_size` rounded down to a
    /// multiple of 8, and cut to [`UD_MTU`] when a UD receiver subscribes to its group.
    pub fn effective_packet_size(&self, i: usize) -> usize {
        let snd = &self.senders[i];
        let ud = self
            .receivers
            .iter()
            .any(|r| r.transport == Transport::Ud && r.groups.contains(&snd.group));
        if ud {
            snd.packet_size.min(UD_MTU) & !7
        } else {
            snd.packet_size & !7
        }
    }

    /// Packets sender `i` sends per heap (no drops or duplicates).
    pub fn packets_per_heap(&self, i: usize) -> u64 {
        let snd = &self.senders[i];
        let per = self
            .effective_packet_size(i)
            .saturating_sub(SPEAD_OVERHEAD + 8 * snd.items as usize + 8)
            .max(1);
        (snd.heap_size / per + 1) as u64
    }

    /// The senders whose heaps receiver `r` subscribes to.
    pub fn senders_of(&self, r: usize) -> Vec<usize> {
        let groups = &self.receivers[r].groups;
        (0..self.senders.len())
            .filter(|&s| groups.contains(&self.senders[s].group))
            .collect()
    }

    /// A small scenario: one sender multicasting to `receivers` receivers on mlx5 hosts.
    pub fn simple(receivers: usize, heaps: u32, heap_size: usize) -> Self {
        let hosts: Vec<Host> = (0..=receivers)
            .map(|i| Host {
                name: format!("h{i}"),
                ip: Ipv4Addr::new(10, 0, 0, 1 + i as u8),
                nic: Nic::Mlx5,
            })
            .collect();
        Scenario {
            name: "simple".into(),
            seed: 1,
            groups: vec![Group {
                addr: Ipv4Addr::new(239, 10, 0, 1),
                port: 7148,
            }],
            senders: vec![Sender {
                host: "h0".into(),
                group: 0,
                heaps,
                heap_size,
                items: 2,
                packet_size: 1472,
                rate: 0.0,
                substreams: 1,
            }],
            receivers: (1..=receivers)
                .map(|i| Receiver {
                    host: format!("h{i}"),
                    transport: Transport::Raw,
                    groups: vec![0],
                    max_heaps: 4,
                    substreams: 1,
                    buffer_slots: 4096,
                    consumer_delay_ns: 0,
                })
                .collect(),
            hosts,
            faults: Faults::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_round_trips_and_defaults_apply() {
        let s = Scenario::simple(2, 10, 4096);
        let text = s.to_toml().unwrap();
        let mut big = s.clone();
        big.seed = u64::MAX;
        assert_eq!(
            Scenario::from_toml(&big.to_toml().unwrap()).unwrap().seed,
            u64::MAX
        );
        assert_eq!(Scenario::from_toml(&text).unwrap(), s);
        let minimal = r#"
            name = "m"
            [[hosts]]
            name = "a"
            ip = "10.0.0.1"
            [[groups]]
            addr = "239.1.1.1"
            port = 7148
            [[senders]]
            host = "a"
            group = 0
            heaps = 3
            heap_size = 100
            [[receivers]]
            host = "a"
            groups = [0]
        "#;
        let m = Scenario::from_toml(minimal).unwrap();
        assert_eq!(m.senders[0].packet_size, 1472);
        assert_eq!(m.receivers[0].max_heaps, 4);
        assert_eq!(m.hosts[0].nic, Nic::Mlx5);
        assert!(m.faults.is_none());
    }

    #[test]
    fn mistakes_are_named() {
        let e = Scenario::from_toml("name = 1").unwrap_err();
        assert!(matches!(e, ScenarioError::Toml(_)));
        let mut s = Scenario::simple(1, 1, 10);
        s.senders[0].host = "nowhere".into();
        assert!(matches!(s.validate(), Err(ScenarioError::Dangling(..))));
        let mut s = Scenario::simple(1, 1, 10);
        s.groups[0].addr = Ipv4Addr::new(10, 1, 1, 1);
        assert!(s
            .validate()
            .unwrap_err()
            .to_string()
            .contains("not IPv4 multicast"));
        let mut s = Scenario::simple(1, 1, 10);
        s.hosts[1].nic = Nic::Rxe;
        assert!(s.validate().unwrap_err().to_string().contains("mlx5"));
        let mut s = Scenario::simple(1, 1, 10);
        s.faults.loss = 1.5;
        assert!(s.validate().is_err());
        let mut s = Scenario::simple(1, 1, 10);
        s.faults.burst = Some(Burst {
            enter: 0.1,
            leave: f64::NAN,
            loss: 1.0,
        });
        assert_eq!(
            s.validate().unwrap_err().to_string(),
            "fault probability burst.leave = NaN is outside [0, 1]"
        );
        let b: Faults =
            toml::from_str("corrupt_switch = 0.1\n[burst]\nenter = 0.01\nleave = 0.2").unwrap();
        assert_eq!(b.burst.map(|b| b.loss), Some(1.0));
        assert!(!b.is_none() && !b.sender_applicable());
        let e = Scenario::from_toml(
            "name = \"x\"\nhosts = []\ngroups = []\nsenders = []\nreceivers = []\ntypo = 1",
        )
        .unwrap_err();
        assert!(e.to_string().contains("typo"), "{e}");
    }

    #[test]
    fn heap_counters_map_back_to_senders() {
        let mut s = Scenario::simple(1, 5, 10);
        s.senders.push(s.senders[0].clone());
        for sender in 0..2 {
            for k in 0..5 {
                assert_eq!(s.heap_origin(s.heap_cnt(sender, k)), Some((sender, k)));
            }
        }
        assert_eq!(s.heap_origin(0), None);
        assert_eq!(s.heap_origin(s.heap_cnt(0, 5)), None);
    }
}
