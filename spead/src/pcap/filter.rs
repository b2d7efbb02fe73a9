//! Destination filters (`GROUP:PORT`, either a wildcard) and `pcap:` source strings.

use std::fmt;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;
use std::str::FromStr;

use thiserror::Error;

/// A bad filter or `pcap:` source string.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FilterError {
    /// Not `GROUP:PORT`.
    #[error("filter {0:?} must be GROUP:PORT (IPv4 address or *, port or *)")]
    Syntax(String),
    /// GROUP is neither an IPv4 address nor `*`.
    #[error("filter address {0:?} is neither an IPv4 address nor *")]
    Address(String),
    /// PORT is neither a port number nor `*`.
    #[error("filter port {0:?} is neither a port number nor *")]
    Port(String),
    /// No path before the filter.
    #[error("pcap source needs a path: pcap:PATH[?GROUP:PORT]")]
    NoPath,
}

/// Keeps datagrams by destination address and port; `None` matches anything.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Filter {
    /// Destination address (a multicast group, usually).
    pub addr: Option<Ipv4Addr>,
    /// Destination UDP port.
    pub port: Option<u16>,
}

impl Filter {
    /// Matches every datagram.
    pub const ANY: Self = Self {
        addr: None,
        port: None,
    };

    /// Whether a datagram to `dst` passes.
    pub fn matches(&self, dst: SocketAddrV4) -> bool {
        self.addr.map_or(true, |a| a == *dst.ip()) && self.port.map_or(true, |p| p == dst.port())
    }
}

impl FromStr for Filter {
    type Err = FilterError;

    /// `GROUP:PORT`, where GROUP is an IPv4 address or `*` and PORT a port number or `*`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (addr, port) = s
            .rsplit_once(':')
            .ok_or_else(|| FilterError::Syntax(s.to_string()))?;
        let addr = match addr {
            "*" => None,
            a => Some(
                a.parse::<Ipv4Addr>()
                    .map_err(|_| FilterError::Address(a.to_string()))?,
            ),
        };
        let port = match port {
            "*" => None,
            p => Some(
                p.parse::<u16>()
                    .map_err(|_| FilterError::Port(p.to_string()))?,
            ),
        };
        Ok(Self { addr, port })
    }
}

impl fmt::Display for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.addr {
            Some(a) => write!(f, "{a}:")?,
            None => f.write_str("*:")?,
        }
        match self.port {
            Some(p) => write!(f, "{p}"),
            None => f.write_str("*"),
        }
    }
}

/// What follows `pcap:` in a source string: `PATH` or `PATH?GROUP:PORT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PcapSpec {
    /// The capture file.
    pub path: PathBuf,
    /// Which datagrams to keep.
    pub filter: Filter,
}

impl FromStr for PcapSpec {
    type Err = FilterError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (path, filter) = match s.rsplit_once('?') {
            Some((path, filter)) => (path, filter.parse()?),
            None => (s, Filter::ANY),
        };
        if path.is_empty() {
            return Err(FilterError::NoPath);
        }
        Ok(Self {
            path: PathBuf::from(path),
            filter,
        })
    }
}
