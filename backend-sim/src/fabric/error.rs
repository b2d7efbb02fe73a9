//! [`FabricError`]: what fabric calls refuse, each naming the bad value.

use crate::frame::eth::Mac;
use crate::ids::{HostId, PortId};
use crate::pcap::PcapError;
use std::io;
use std::net::Ipv4Addr;

/// Errors of fabric calls.
#[derive(Debug, thiserror::Error)]
pub enum FabricError {
    /// No such port.
    #[error("no port {0} on this fabric")]
    UnknownPort(PortId),
    /// No such host.
    #[error("no host {0:?} on this fabric")]
    UnknownHost(HostId),
    /// Another port already has this MAC.
    #[error("MAC {0} is already used by another port")]
    DuplicateMac(Mac),
    /// Another port already has this IPv4 address.
    #[error("IPv4 address {0} is already used by another port")]
    DuplicateIp(Ipv4Addr),
    /// The frame exceeds the port's maximum frame size.
    #[error("frame of {len} bytes exceeds the port's maximum of {max}")]
    FrameTooLong {
        /// Frame length.
        len: usize,
        /// The port's maximum.
        max: usize,
    },
    /// The frame is shorter than an Ethernet header.
    #[error("frame of {0} bytes is shorter than an Ethernet header")]
    FrameTooShort(usize),
    /// A pcap could not be read or replayed.
    #[error(transparent)]
    Pcap(#[from] PcapError),
    /// Capture output failed.
    #[error("capture I/O: {0}")]
    Io(#[from] io::Error),
}
