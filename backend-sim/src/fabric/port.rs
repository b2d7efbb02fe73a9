//! Hosts and their ports: a port's configuration, its counters, and the two link stacks
//! that join it to the switch.

use super::injector::{FaultInjector, LinkId};
use super::link::{LinkConfig, Wire};
use super::stats::PortStats;
use crate::fault::{Direction, LinkFaults};
use crate::frame::eth::Mac;
use crate::ids::{HostId, PortId};
use std::net::Ipv4Addr;

/// How a port is set up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortConfig {
    /// The port's MAC.
    pub mac: Mac,
    /// The port's IPv4 address (its RoCE GID is the IPv4-mapped IPv6 form).
    pub ipv4: Ipv4Addr,
    /// The link to the switch (both directions alike).
    pub link: LinkConfig,
    /// Largest frame (without FCS) the port sends or accepts.
    pub max_frame: usize,
    /// Whether multicast the port sends also comes back to it when it joined the group
    /// (NIC loopback; the verbs layer decides which QPs see the copy).
    pub multicast_loopback: bool,
    /// Whether arriving RoCEv2 frames have their IPv4 header, UDP checksum and ICRC
    /// verified (and are dropped when one fails), as a RoCE NIC does. Other frames go up
    /// whatever their checksums say (a RAW_PACKET receive reports them as the NIC does).
    /// The FCS is always checked.
    pub verify_checksums: bool,
}

impl PortConfig {
    /// A port with `ipv4` and a locally administered MAC derived from it
    /// (02:00 followed by the four address bytes).
    #[must_use]
    pub fn with_ip(ipv4: Ipv4Addr) -> Self {
        let o = ipv4.octets();
        PortConfig {
            mac: Mac([0x02, 0x00, o[0], o[1], o[2], o[3]]),
            ipv4,
            link: LinkConfig::default(),
            max_frame: 9014,
            multicast_loopback: true,
            verify_checksums: true,
        }
    }
}

/// A simulated host: a name and its ports.
#[derive(Debug, Clone)]
pub struct Host {
    /// Name, for messages.
    pub name: String,
    /// Its ports, in the order they were added.
    pub ports: Vec<PortId>,
}

/// The link stack of one direction of a port's link.
pub(crate) type PortLink = FaultInjector<Wire>;

/// A port on the switch.
#[derive(Debug, Clone)]
pub(crate) struct Port {
    pub host: HostId,
    pub config: PortConfig,
    /// Host to switch.
    pub up: PortLink,
    /// Switch to host.
    pub down: PortLink,
    pub stats: PortStats,
}

impl Port {
    /// True once either direction of the port's link has drawn randomness.
    pub(crate) fn drawn(&self) -> bool {
        self.up.drawn() || self.down.drawn()
    }

    /// Gives both directions the streams of `seed` (see [`FaultInjector::reseed`]).
    pub(crate) fn reseed(&mut self, seed: u64) {
        let mac = self.config.mac;
        for (link, direction) in [
            (&mut self.up, Direction::ToSwitch),
            (&mut self.down, Direction::FromSwitch),
        ] {
            link.reseed(seed, LinkId { mac, direction });
        }
    }

    /// A port of `host` whose links start with `faults`, drawing from `seed`'s streams
    /// named by the port's MAC.
    pub fn new(host: HostId, config: PortConfig, faults: &LinkFaults, seed: u64) -> Self {
        let link = |direction| {
            let id = LinkId {
                mac: config.mac,
                direction,
            };
            FaultInjector::new(Wire::new(config.link), faults.clone(), seed, id)
        };
        Port {
            host,
            up: link(Direction::ToSwitch),
            down: link(Direction::FromSwitch),
            config,
            stats: PortStats::default(),
        }
    }
}
