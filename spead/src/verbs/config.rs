//! Configuration of the verbs transports, with spead2's argument checks and environment
//! variables, and the lookup of the RDMA device that owns an interface address.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use verbs_api::helpers::Notification;
use verbs_api::{Context, Verbs};

use super::error::VerbsError;

/// spead2's default maximum packet (UDP payload) size.
pub const DEFAULT_MAX_SIZE: usize = 9200;
/// spead2's default receive buffer size for ibverbs readers (`recv::udp_ibv_config`).
pub const DEFAULT_BUFFER_SIZE: usize = 16 * 1024 * 1024;
/// spead2's default send buffer size for ibverbs writers (`send::udp_ibv_config`).
pub const DEFAULT_SEND_BUFFER_SIZE: usize = 512 * 1024;
/// spead2's default `max_poll`.
pub const DEFAULT_MAX_POLL: u32 = 10;

/// The environment variable naming the interface address that makes plain UDP
/// multicast readers use ibverbs (spead2's meaning).
pub const ENV_INTERFACE: &str = "SPEAD2_IBV_INTERFACE";
/// The environment variable overriding the completion vector.
pub const ENV_COMP_VECTOR: &str = "SPEAD2_IBV_COMP_VECTOR";

/// How a verbs reader or writer is set up (spead2's `udp_ibv_config`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IbvConfig {
    /// Endpoints (address and UDP port). A reader takes multicast groups, unicast
    /// addresses of the interface and `0.0.0.0` (every address, that port), each steered
    /// by its own flow rule as spead2 builds them; a writer takes multicast groups, one
    /// substream each.
    pub endpoints: Vec<SocketAddrV4>,
    /// IPv4 address of the interface: selects the RDMA device and port.
    pub interface: Option<Ipv4Addr>,
    /// Largest SPEAD packet (UDP payload), bytes.
    pub max_size: usize,
    /// Bytes of receive (or send) buffer (spead2's defaults: [`DEFAULT_BUFFER_SIZE`] to
    /// receive, [`DEFAULT_SEND_BUFFER_SIZE`] to send); with `max_size` it sets the slot count,
    /// bounded by the device's `max_qp_wr` and `max_cqe`.
    pub buffer_size: usize,
    /// Completion vector: >= 0 waits on a completion channel (interrupts), taken modulo
    /// the device's vector count; < 0 busy-polls.
    pub comp_vector: i32,
    /// Polls before waiting on the channel.
    pub max_poll: u32,
    /// IPv4 TTL of sent packets.
    pub ttl: u8,
    /// Receive side, off by default as in spead2 (which checks no checksum): when set,
    /// frames whose IPv4 header checksum is wrong are dropped
    /// ([`super::FrameDrop::IpChecksum`]), and on devices that verify checksums on
    /// receive (IBV_DEVICE_RAW_IP_CSUM) frames the NIC did not mark IBV_WC_IP_CSUM_OK
    /// (IPv4 header or a non-zero UDP checksum wrong) are dropped
    /// ([`super::FrameDrop::Checksum`]).
    pub verify_checksums: bool,
}

impl Default for IbvConfig {
    fn default() -> Self {
        IbvConfig {
            endpoints: Vec::new(),
            interface: None,
            max_size: DEFAULT_MAX_SIZE,
            buffer_size: DEFAULT_BUFFER_SIZE,
            comp_vector: 0,
            max_poll: DEFAULT_MAX_POLL,
            ttl: 1,
            verify_checksums: false,
        }
    }
}

impl IbvConfig {
    /// A reader's configuration for `endpoints` on the interface with address `interface`
    /// (spead2's `recv::udp_ibv_config` defaults).
    pub fn new(endpoints: Vec<SocketAddrV4>, interface: Ipv4Addr) -> Self {
        IbvConfig {
            endpoints,
            interface: Some(interface),
            ..IbvConfig::default()
        }
    }

    /// A writer's configuration: as [`IbvConfig::new`], with spead2's send buffer size
    /// ([`DEFAULT_SEND_BUFFER_SIZE`], `send::udp_ibv_config`'s default).
    pub fn new_sender(endpoints: Vec<SocketAddrV4>, interface: Ipv4Addr) -> Self {
        IbvConfig {
            buffer_size: DEFAULT_SEND_BUFFER_SIZE,
            ..IbvConfig::new(endpoints, interface)
        }
    }

    /// Applies spead2's environment variables: `SPEAD2_IBV_INTERFACE` supplies the
    /// interface when none was given, `SPEAD2_IBV_COMP_VECTOR` overrides the vector.
    ///
    /// # Errors
    /// [`VerbsError::Config`] when a variable is set but not a valid value.
    pub fn apply_env(&mut self) -> Result<(), VerbsError> {
        self.apply_vars(
            std::env::var(ENV_INTERFACE).ok(),
            std::env::var(ENV_COMP_VECTOR).ok(),
        )
    }

    fn apply_vars(
        &mut self,
        iface: Option<String>,
        vector: Option<String>,
    ) -> Result<(), VerbsError> {
        if self.interface.is_none() {
            if let Some(v) = iface.filter(|v| !v.is_empty()) {
                self.interface = Some(v.parse().map_err(|_| {
                    VerbsError::Config(format!("{ENV_INTERFACE}={v:?} is not an IPv4 address"))
                })?);
            }
        }
        if let Some(v) = vector.filter(|v| !v.is_empty()) {
            self.comp_vector = v.trim().parse().map_err(|_| {
                VerbsError::Config(format!("{ENV_COMP_VECTOR}={v:?} is not an integer"))
            })?;
        }
        Ok(())
    }

    /// spead2's checks for a reader (`recv::udp_ibv_config`): at least one endpoint
    /// (any IPv4 address: multicast, unicast or `0.0.0.0`), an interface given, sizes
    /// sensible.
    ///
    /// # Errors
    /// [`VerbsError::Config`] naming the problem.
    pub fn validate(&self) -> Result<Ipv4Addr, VerbsError> {
        let bad = |m: String| Err(VerbsError::Config(m));
        if self.endpoints.is_empty() {
            return bad("at least one endpoint is required".into());
        }
        let Some(iface) = self.interface else {
            return bad(format!(
                "an interface address is required (or set {ENV_INTERFACE})"
            ));
        };
        if iface.is_unspecified() || iface.is_multicast() {
            return bad(format!(
                "interface address {iface} is not a unicast IPv4 address"
            ));
        }
        if self.max_size < 64 || self.max_size > 65_507 {
            return bad(format!("max_size {} is outside [64, 65507]", self.max_size));
        }
        if self.buffer_size < self.max_size {
            return bad(format!(
                "buffer_size {} is smaller than max_size {}",
                self.buffer_size, self.max_size
            ));
        }
        Ok(iface)
    }

    /// As [`IbvConfig::validate`], and every endpoint IPv4 multicast: what spead2's
    /// writer (`send::udp_ibv_config`) requires, and what a UD reader needs (it can
    /// only attach to groups).
    ///
    /// # Errors
    /// [`VerbsError::Config`] naming the problem.
    pub fn validate_multicast(&self) -> Result<Ipv4Addr, VerbsError> {
        let iface = self.validate()?;
        if let Some(e) = self.endpoints.iter().find(|e| !e.ip().is_multicast()) {
            return Err(VerbsError::Config(format!(
                "endpoint {e} is not an IPv4 multicast address"
            )));
        }
        Ok(iface)
    }

    /// Whether completions are waited for on a completion channel (a `comp_vector` of 0
    /// or more, as spead2) rather than busy-polled.
    pub(crate) fn uses_channel(&self) -> bool {
        self.comp_vector >= 0
    }

    /// How an endpoint learns of completions: on its channel when
    /// [`uses_channel`](Self::uses_channel), by polling otherwise.
    pub(crate) fn notification(&self) -> Notification {
        if self.uses_channel() {
            Notification::Channel {
                solicited_only: false,
            }
        } else {
            Notification::Poll
        }
    }
}

/// Parses an interface given as text, with spead2's error for IPv6 or names.
///
/// # Errors
/// [`VerbsError::Config`] when `text` is not an IPv4 address.
pub fn parse_interface(text: &str) -> Result<Ipv4Addr, VerbsError> {
    text.parse::<Ipv4Addr>().map_err(|_| {
        if text.parse::<std::net::Ipv6Addr>().is_ok() {
            VerbsError::Config(format!("interface address {text} is not an IPv4 address"))
        } else {
            VerbsError::Config(format!("interface {text:?} is not an IPv4 address"))
        }
    })
}

/// Where an interface address lives: device name, port and GID index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceMatch {
    /// Device name.
    pub device: String,
    /// Port number.
    pub port: u8,
    /// Index of the port's GID for the address.
    pub gid_index: u8,
}

/// Finds the device and port whose GID table holds `iface` (IPv4-mapped), as spead2
/// finds the device of an interface.
///
/// # Errors
/// [`VerbsError::Verbs`] when no device can be listed; [`VerbsError::NoInterface`] when
/// no device has the address.
pub fn find_device<V: Verbs>(verbs: &V, iface: Ipv4Addr) -> Result<DeviceMatch, VerbsError> {
    let mut names = Vec::new();
    for info in verbs.devices()? {
        names.push(info.name.clone());
        let Ok(ctx) = verbs.open(&info.name) else {
            continue;
        };
        let Ok(attr) = ctx.query_device() else {
            continue;
        };
        for port in 1..=attr.phys_port_cnt {
            let Ok(p) = ctx.query_port(port) else {
                continue;
            };
            for index in 0..p.gid_tbl_len.min(256) {
                if ctx.query_gid(port, index).ok().and_then(|g| g.to_ipv4()) == Some(iface) {
                    return Ok(DeviceMatch {
                        device: info.name,
                        port,
                        gid_index: index as u8,
                    });
                }
            }
        }
    }
    Err(VerbsError::NoInterface {
        iface,
        devices: names,
    })
}

/// The wait used by receivers: none when busy-polling.
pub(crate) fn wait_timeout(busy: bool, timeout: Option<Duration>) -> Option<Duration> {
    if busy {
        Some(Duration::ZERO)
    } else {
        timeout
    }
}

/// The Q_Key a UD endpoint's port maps to.
pub fn ud_qkey(port: u16) -> u32 {
    0x1100_0000 | u32::from(port)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readers_and_writers_have_spead2s_buffer_defaults() {
        let group = SocketAddrV4::new(Ipv4Addr::new(239, 1, 2, 3), 7148);
        let iface = Ipv4Addr::new(10, 0, 0, 1);
        assert_eq!(IbvConfig::new(vec![group], iface).buffer_size, 16 << 20);
        let w = IbvConfig::new_sender(vec![group], iface);
        assert_eq!(w.buffer_size, 512 << 10);
        assert_eq!((w.max_size, w.ttl, w.interface), (9200, 1, Some(iface)));
    }

    #[test]
    fn spead2_argument_checks() {
        let group = SocketAddrV4::new(Ipv4Addr::new(239, 1, 2, 3), 7148);
        let ok = IbvConfig::new(vec![group], Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(ok.validate().unwrap(), Ipv4Addr::new(10, 0, 0, 1));
        let uni = IbvConfig::new(
            vec![SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 9), 1)],
            Ipv4Addr::new(10, 0, 0, 1),
        );
        assert_eq!(uni.validate().unwrap(), Ipv4Addr::new(10, 0, 0, 1));
        assert!(uni
            .validate_multicast()
            .unwrap_err()
            .to_string()
            .contains("not an IPv4 multicast address"));
        let mut none = ok.clone();
        none.interface = None;
        assert!(none
            .validate()
            .unwrap_err()
            .to_string()
            .contains("interface address is required"));
        assert!(parse_interface("::1")
            .unwrap_err()
            .to_string()
            .contains("not an IPv4 address"));
        assert!(parse_interface("eth0").is_err());
        assert!(IbvConfig {
            endpoints: vec![],
            ..ok.clone()
        }
        .validate()
        .is_err());
    }

    #[test]
    fn environment_variables_have_spead2_meaning() {
        let mut c = IbvConfig::default();
        c.apply_vars(Some("10.1.2.3".into()), Some("-1".into()))
            .unwrap();
        assert_eq!(c.interface, Some(Ipv4Addr::new(10, 1, 2, 3)));
        assert_eq!(c.comp_vector, -1);
        let mut given = IbvConfig {
            interface: Some(Ipv4Addr::new(10, 9, 9, 9)),
            ..IbvConfig::default()
        };
        given.apply_vars(Some("10.1.2.3".into()), None).unwrap();
        assert_eq!(
            given.interface,
            Some(Ipv4Addr::new(10, 9, 9, 9)),
            "an explicit interface wins"
        );
        assert!(IbvConfig::default()
            .apply_vars(Some("x".into()), None)
            .is_err());
        assert!(IbvConfig::default()
            .apply_vars(None, Some("two".into()))
            .is_err());
    }
}
