//! The verbs side of `spead-recv` and `spead-capture`: the backends (`--backend hw|sim`),
//! endpoints, the receive configuration, and the receivers of a set of endpoints
//! (`--ibv-mode raw|ud`).

use std::net::{Ipv4Addr, SocketAddrV4};

use clap::ValueEnum;
use spead::verbs::{IbvConfig, Receiver, VerbsError};
use verbs_api::Verbs;

/// Which verbs implementation runs the receivers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    /// libibverbs: a real device or Soft-RoCE (feature `hw`).
    Hw,
    /// The deterministic simulator (feature `sim`); its traffic comes from `--replay`.
    Sim,
}

/// Which verbs transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum IbvMode {
    /// RAW_PACKET QP with flow steering (mlx5), whole Ethernet frames.
    Raw,
    /// UD multicast (rxe, InfiniBand).
    Ud,
}

/// Parses `ADDRESS:PORT` (IPv4 only: a multicast group, a unicast address of the
/// interface, or `0.0.0.0`; UD takes groups only).
///
/// # Errors
/// A message naming the text.
pub fn parse_endpoint(s: &str) -> Result<SocketAddrV4, String> {
    s.parse::<SocketAddrV4>().map_err(|_| {
        if s.parse::<std::net::SocketAddrV6>().is_ok() {
            format!("{s}: IPv6 endpoints are not supported (IPv4 only)")
        } else {
            format!("{s}: not an IPv4 GROUP:PORT")
        }
    })
}

/// The receive configuration: `endpoints` on `interface` (or `SPEAD2_IBV_INTERFACE`),
/// completion vector `comp_vector` if given, else `SPEAD2_IBV_COMP_VECTOR`, else
/// `default_vector`; checked as spead2 does.
///
/// # Errors
/// A message for a bad interface, environment variable or endpoint.
pub fn ibv_config(
    endpoints: Vec<SocketAddrV4>,
    interface: Option<Ipv4Addr>,
    comp_vector: Option<i32>,
    default_vector: i32,
    max_poll: u32,
    (max_size, buffer_size): (usize, usize),
) -> Result<IbvConfig, String> {
    let mut cfg = IbvConfig {
        endpoints,
        max_size,
        buffer_size,
        max_poll,
        comp_vector: default_vector,
        ..IbvConfig::default()
    };
    if interface.is_some() {
        cfg.interface = interface;
    }
    cfg.apply_env().map_err(|e| e.to_string())?;
    if let Some(v) = comp_vector {
        cfg.comp_vector = v;
    }
    cfg.validate().map_err(|e| e.to_string())?;
    Ok(cfg)
}

/// The receivers of `cfg`'s endpoints: one RAW_PACKET receiver for all, or one UD
/// receiver per UDP port (a UD receiver's port selects its Q_Key).
///
/// # Errors
/// The receivers' errors.
pub fn open_receivers<V: Verbs>(
    verbs: &V,
    cfg: &IbvConfig,
    mode: IbvMode,
) -> Result<Vec<Receiver<V::Context>>, VerbsError> {
    match mode {
        IbvMode::Raw => Ok(vec![Receiver::raw(verbs, cfg)?]),
        IbvMode::Ud => {
            let mut ports: Vec<u16> = cfg.endpoints.iter().map(|e| e.port()).collect();
            ports.dedup();
            ports.sort_unstable();
            ports.dedup();
            ports
                .into_iter()
                .map(|p| {
                    let mut c = cfg.clone();
                    c.endpoints.retain(|e| e.port() == p);
                    Receiver::ud(verbs, &c)
                })
                .collect()
        }
    }
}

/// The error for `--backend hw` in a build without the `hw` feature.
pub fn hw_missing() -> String {
    "the hw backend is not compiled in: rebuild with `--features spead-tools/hw` (needs \
     libibverbs-dev), or use --backend sim with --replay PATH"
        .to_string()
}
