//! The switch: forwards unicast by destination MAC, IPv4 multicast to the ports that joined
//! the group (IGMP-less snooping: membership is registered directly when a QP attaches to a
//! group or a flow rule asks for it), and broadcast to every port but the ingress.
//!
//! Lookups use hash maps but nothing iterates them, so forwarding order (and with it the
//! event order) is fixed: group members are kept sorted by port id.

use crate::frame::eth::Mac;
use crate::hash::FastMap as HashMap;
use crate::ids::PortId;
use std::net::Ipv4Addr;

#[derive(Debug, Default, Clone)]
struct Group {
    /// Members sorted by port, each with a reference count (several QPs on one port may
    /// join the same group; the port leaves when the last one detaches).
    members: Vec<(PortId, u32)>,
}

/// Where a frame goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route<'a> {
    /// One port.
    Unicast(PortId),
    /// These ports (minus the ingress).
    Group(&'a [(PortId, u32)]),
    /// Every port but the ingress.
    Broadcast,
    /// Nobody has the address.
    Nowhere,
}

/// The switch's tables.
#[derive(Debug, Default, Clone)]
pub(crate) struct Switch {
    macs: HashMap<Mac, PortId>,
    ips: HashMap<Ipv4Addr, PortId>,
    groups: HashMap<Ipv4Addr, Group>,
}

impl Switch {
    pub fn add_port(&mut self, port: PortId, mac: Mac, ip: Ipv4Addr) {
        self.macs.insert(mac, port);
        self.ips.insert(ip, port);
    }

    pub fn port_of_ip(&self, ip: Ipv4Addr) -> Option<PortId> {
        self.ips.get(&ip).copied()
    }

    pub fn port_of_mac(&self, mac: Mac) -> Option<PortId> {
        self.macs.get(&mac).copied()
    }

    /// Adds one reference of `port` to `group`.
    pub fn join(&mut self, port: PortId, group: Ipv4Addr) {
        let g = self.groups.entry(group).or_default();
        match g.members.binary_search_by_key(&port, |m| m.0) {
            Ok(i) => g.members[i].1 += 1,
            Err(i) => g.members.insert(i, (port, 1)),
        }
    }

    /// Drops one reference of `port` to `group`; returns false if it held none.
    pub fn leave(&mut self, port: PortId, group: Ipv4Addr) -> bool {
        let Some(g) = self.groups.get_mut(&group) else {
            return false;
        };
        match g.members.binary_search_by_key(&port, |m| m.0) {
            Ok(i) => {
                g.members[i].1 -= 1;
                if g.members[i].1 == 0 {
                    g.members.remove(i);
                }
                if g.members.is_empty() {
                    self.groups.remove(&group);
                }
                true
            }
            Err(_) => false,
        }
    }

    /// True if `port` holds a reference to `group`.
    pub fn is_member(&self, port: PortId, group: Ipv4Addr) -> bool {
        self.groups
            .get(&group)
            .is_some_and(|g| g.members.binary_search_by_key(&port, |m| m.0).is_ok())
    }

    /// Decides where a frame goes from its destination MAC and, for IPv4 multicast, its
    /// destination IP.
    pub fn route(&self, dst: Mac, ipv4_dst: Option<Ipv4Addr>) -> Route<'_> {
        if dst.is_broadcast() {
            return Route::Broadcast;
        }
        if dst.is_multicast() {
            return match ipv4_dst
                .filter(Ipv4Addr::is_multicast)
                .and_then(|ip| self.groups.get(&ip))
            {
                Some(g) => Route::Group(&g.members),
                None => Route::Nowhere,
            };
        }
        match self.macs.get(&dst) {
            Some(&p) => Route::Unicast(p),
            None => Route::Nowhere,
        }
    }
}
