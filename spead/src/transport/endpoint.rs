//! Parsing `udp:HOST:PORT`, `tcp:HOST:PORT` and `file:PATH` endpoints.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use thiserror::Error;

/// A bad endpoint string.
#[derive(Debug, Error)]
pub enum EndpointError {
    /// No known scheme.
    #[error("endpoint {0:?} must start with udp:, tcp: or file:")]
    Scheme(String),
    /// HOST:PORT did not resolve.
    #[error("cannot resolve {0:?}")]
    Resolve(String),
}

/// Where packets come from or go to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// UDP (multicast when the address is).
    Udp(SocketAddr),
    /// TCP.
    Tcp(SocketAddr),
    /// A file of back-to-back packets.
    File(PathBuf),
}

impl std::str::FromStr for Endpoint {
    type Err = EndpointError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let resolve = |a: &str| {
            a.to_socket_addrs()
                .ok()
                .and_then(|mut it| it.next())
                .ok_or_else(|| EndpointError::Resolve(a.to_string()))
        };
        if let Some(rest) = s.strip_prefix("udp:") {
            Ok(Self::Udp(resolve(rest)?))
        } else if let Some(rest) = s.strip_prefix("tcp:") {
            Ok(Self::Tcp(resolve(rest)?))
        } else if let Some(rest) = s.strip_prefix("file:") {
            Ok(Self::File(PathBuf::from(rest)))
        } else {
            Err(EndpointError::Scheme(s.to_string()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses() {
        assert_eq!(
            "udp:127.0.0.1:8888".parse::<Endpoint>().unwrap(),
            Endpoint::Udp("127.0.0.1:8888".parse().unwrap())
        );
        assert!(matches!(
            "tcp:127.0.0.1:1".parse::<Endpoint>(),
            Ok(Endpoint::Tcp(_))
        ));
        assert!(matches!(
            "file:/tmp/x".parse::<Endpoint>(),
            Ok(Endpoint::File(_))
        ));
        assert!("x:y".parse::<Endpoint>().is_err());
    }
}
