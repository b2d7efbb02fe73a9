//! The errors of the verbs transports.

use std::net::Ipv4Addr;

/// Errors of the verbs transports.
#[derive(Debug, thiserror::Error)]
pub enum VerbsError {
    /// A configuration spead2 would reject too.
    #[error("{0}")]
    Config(String),
    /// No RDMA device has the interface address.
    #[error("no RDMA device has interface address {iface} (devices: {})", if devices.is_empty() { "none".to_string() } else { devices.join(", ") })]
    NoInterface {
        /// The address looked for.
        iface: Ipv4Addr,
        /// The devices there are.
        devices: Vec<String>,
    },
    /// A verbs call failed.
    #[error(transparent)]
    Verbs(#[from] verbs_api::Error),
    /// A kernel socket failed (a UDP reader left on the kernel, see [`super::UdpReader`]).
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The host would not join a multicast group on the interface (real devices only).
    #[error("joining multicast group {group} on interface {iface}: {reason}")]
    HostJoin {
        /// The group.
        group: Ipv4Addr,
        /// The interface address.
        iface: Ipv4Addr,
        /// The kernel's answer.
        reason: String,
    },
}
