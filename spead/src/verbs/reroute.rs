//! `SPEAD2_IBV_INTERFACE`: plain UDP readers rerouted to the ibverbs reader, as spead2's
//! `reader_factory<udp_reader>` does (src/recv_udp.cpp).
//!
//! spead2 reads the environment once (`init_ibv_override`, under `std::call_once`):
//! - `SPEAD2_IBV_INTERFACE` unset or empty: no override.
//! - set but not an IPv4 address: a warning ("SPEAD2_IBV_INTERFACE could not be parsed
//!   as an IPv4 address: ..."), and no override: readers stay on kernel sockets.
//! - an IPv4 address: every reader of an IPv4 endpoint becomes an ibverbs reader of
//!   that one endpoint, with the UDP reader's `max_size` and `buffer_size`, on the
//!   interface given to the reader if one was (an explicit interface wins; the variable
//!   then only enables the override), else on the variable's. Its completion vector is
//!   `SPEAD2_IBV_COMP_VECTOR`, or 0 when that is unset, empty or not an integer (the
//!   latter with a warning, "SPEAD2_IBV_COMP_VECTOR is not a valid integer, ignoring").
//!
//! IPv6 endpoints are never rerouted. [`UdpReader::open`] is that factory, for either
//! verbs backend; [`EnvOverride::decide`] is the decision without the environment.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::OnceLock;
use std::time::Duration;

use verbs_api::{Context, Verbs};

use super::config::IbvConfig;
use super::config::{ENV_COMP_VECTOR, ENV_INTERFACE};
use super::error::VerbsError;
use super::receiver::Receiver;
use crate::recv::sink::HeapSink;
use crate::recv::Stream;
use crate::transport::{UdpReceiver, UdpRecvConfig};

/// What spead2's `init_ibv_override` makes of the two variables.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EnvOverride {
    /// The interface readers are rerouted to; `None`: no override.
    pub interface: Option<Ipv4Addr>,
    /// The completion vector of rerouted readers.
    pub comp_vector: i32,
    /// The warnings spead2 logs (each once).
    pub warnings: Vec<String>,
}

impl EnvOverride {
    /// The decision for the values of `SPEAD2_IBV_INTERFACE` and
    /// `SPEAD2_IBV_COMP_VECTOR` (`None`: unset).
    pub fn decide(interface: Option<&str>, comp_vector: Option<&str>) -> EnvOverride {
        let mut out = EnvOverride::default();
        let Some(text) = interface.filter(|t| !t.is_empty()) else {
            return out;
        };
        match text.parse::<Ipv4Addr>() {
            Err(e) => out.warnings.push(format!(
                "{ENV_INTERFACE} could not be parsed as an IPv4 address: {e}"
            )),
            Ok(ip) => {
                out.interface = Some(ip);
                if let Some(v) = comp_vector.filter(|v| !v.is_empty()) {
                    match v.parse::<i32>() {
                        Ok(n) => out.comp_vector = n,
                        Err(_) => out.warnings.push(format!(
                            "{ENV_COMP_VECTOR} is not a valid integer, ignoring"
                        )),
                    }
                }
            }
        }
        out
    }

    /// The decision for this process's environment, made once (the first call reads
    /// the variables and writes the warnings to stderr, as spead2's default logger
    /// does); later changes to the environment are not seen, as in spead2.
    pub fn from_env() -> &'static EnvOverride {
        static ONCE: OnceLock<EnvOverride> = OnceLock::new();
        ONCE.get_or_init(|| {
            let o = EnvOverride::decide(
                std::env::var(ENV_INTERFACE).ok().as_deref(),
                std::env::var(ENV_COMP_VECTOR).ok().as_deref(),
            );
            for w in &o.warnings {
                eprintln!("spead: warning: {w}");
            }
            o
        })
    }

    /// The ibverbs configuration a UDP reader of `cfg` becomes, or `None` when it stays
    /// on a kernel socket (no override, or an IPv6 endpoint).
    pub fn reader_config(&self, cfg: &UdpRecvConfig) -> Option<IbvConfig> {
        let env_iface = self.interface?;
        let SocketAddr::V4(endpoint) = cfg.addr else {
            return None;
        };
        Some(IbvConfig {
            endpoints: vec![endpoint],
            interface: Some(cfg.interface.unwrap_or(env_iface)),
            max_size: cfg.max_packet_size,
            buffer_size: cfg.buffer_size,
            comp_vector: self.comp_vector,
            ..IbvConfig::default()
        })
    }
}

/// A UDP reader: a kernel socket, or the ibverbs reader `SPEAD2_IBV_INTERFACE` turned it
/// into (see the module docs).
#[derive(Debug)]
pub enum UdpReader<C: Context> {
    /// A kernel UDP socket.
    Kernel(UdpReceiver),
    /// A RAW_PACKET ibverbs reader of the one endpoint; `timeout` is the UDP reader's
    /// read timeout, used as the wait of each [`UdpReader::pump`].
    Ibv {
        /// The reader.
        receiver: Box<Receiver<C>>,
        /// How long one pump waits for frames.
        timeout: Option<Duration>,
    },
}

impl<C: Context> UdpReader<C> {
    /// spead2's UDP reader factory: with `SPEAD2_IBV_INTERFACE` set to an IPv4 address
    /// (read once per process, [`EnvOverride::from_env`]) an IPv4 endpoint gets an
    /// ibverbs reader on `verbs`; otherwise a kernel socket.
    ///
    /// # Errors
    /// The socket's or the ibverbs reader's.
    pub fn open<V: Verbs<Context = C>>(verbs: &V, cfg: &UdpRecvConfig) -> Result<Self, VerbsError> {
        Self::open_with(verbs, cfg, EnvOverride::from_env())
    }

    /// As [`UdpReader::open`], with the override decided by the caller.
    ///
    /// # Errors
    /// As [`UdpReader::open`].
    pub fn open_with<V: Verbs<Context = C>>(
        verbs: &V,
        cfg: &UdpRecvConfig,
        env: &EnvOverride,
    ) -> Result<Self, VerbsError> {
        match env.reader_config(cfg) {
            Some(ibv) => Ok(UdpReader::Ibv {
                receiver: Box::new(Receiver::raw(verbs, &ibv)?),
                timeout: cfg.read_timeout,
            }),
            None => Ok(UdpReader::Kernel(UdpReceiver::bind(cfg)?)),
        }
    }

    /// True when the reader was rerouted to ibverbs.
    pub fn is_ibv(&self) -> bool {
        matches!(self, UdpReader::Ibv { .. })
    }

    /// Receives one batch into `stream`: datagrams (kernel) or completions (ibverbs)
    /// handled, 0 after a wait with nothing.
    ///
    /// # Errors
    /// The socket's or the verbs reader's.
    pub fn pump<H: HeapSink>(&mut self, stream: &mut Stream<H>) -> Result<usize, VerbsError> {
        match self {
            UdpReader::Kernel(rx) => Ok(rx.pump(stream)?),
            UdpReader::Ibv { receiver, timeout } => receiver.poll_into(stream, *timeout),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_as_spead2_reads_it() {
        assert_eq!(EnvOverride::decide(None, Some("3")), EnvOverride::default());
        assert_eq!(EnvOverride::decide(Some(""), None), EnvOverride::default());
        let bad = EnvOverride::decide(Some("eth0"), Some("3"));
        assert_eq!(bad.interface, None, "a bad value is ignored");
        assert_eq!(
            bad.warnings,
            ["SPEAD2_IBV_INTERFACE could not be parsed as an IPv4 address: invalid IPv4 address syntax"]
        );
        let ok = EnvOverride::decide(Some("10.0.0.2"), Some("-1"));
        assert_eq!(
            (ok.interface, ok.comp_vector, ok.warnings.len()),
            (Some(Ipv4Addr::new(10, 0, 0, 2)), -1, 0)
        );
        let vector = EnvOverride::decide(Some("10.0.0.2"), Some("two"));
        assert_eq!((vector.interface.is_some(), vector.comp_vector), (true, 0));
        assert_eq!(
            vector.warnings,
            ["SPEAD2_IBV_COMP_VECTOR is not a valid integer, ignoring"]
        );
    }

    #[test]
    fn reader_configs_follow_spead2s_factory() {
        let env = EnvOverride::decide(Some("10.0.0.2"), Some("5"));
        let mut udp = UdpRecvConfig::new("239.1.2.3:7148".parse().unwrap());
        udp.max_packet_size = 4000;
        udp.buffer_size = 1 << 20;
        let c = env.reader_config(&udp).unwrap();
        assert_eq!(c.endpoints, ["239.1.2.3:7148".parse().unwrap()]);
        assert_eq!(c.interface, Some(Ipv4Addr::new(10, 0, 0, 2)));
        assert_eq!(
            (c.max_size, c.buffer_size, c.comp_vector),
            (4000, 1 << 20, 5)
        );
        udp.interface = Some(Ipv4Addr::new(10, 9, 9, 9));
        assert_eq!(
            env.reader_config(&udp).unwrap().interface,
            Some(Ipv4Addr::new(10, 9, 9, 9)),
            "an explicit interface wins"
        );
        let any = UdpRecvConfig::new("0.0.0.0:7148".parse().unwrap());
        assert!(env.reader_config(&any).is_some(), "every IPv4 endpoint");
        let v6 = UdpRecvConfig::new("[::1]:7148".parse().unwrap());
        assert_eq!(env.reader_config(&v6), None);
        assert_eq!(EnvOverride::default().reader_config(&any), None);
    }
}
