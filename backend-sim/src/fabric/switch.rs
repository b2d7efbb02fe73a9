//! The switch: forwards unicast by destination MAC, IPv4 multicast to the ports that joined
//! the group (IGMP-less snooping: membership is registered directly when a QP attaches to a
//! group or a flow rule asks for it), and broadcast to every port but the ingress.
//!
//! Uplinks (ports that lead to another network, see [`crate::Fabric::add_uplink`]) are
//! what a real switch's trunk ports are: the switch learns the source MAC of what
//! arrives on one, sends unicast for a MAC it does not know out of every uplink (a host
//! port's MAC is always known), and sends every multicast frame out of every uplink as
//! well as to the group's members (they are multicast router ports: the hosts beyond
//! join groups the switch does not see).
//!
//! Lookups use hash maps but nothing iterates them, so forwarding order (and with it the
//! event order) is fixed: group members are kept sorted by port id.

use crate::frame::eth::Mac;
use crate::ids::PortId;
use rustc_hash::FxHashMap as HashMap;
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
    /// The members of the IPv4 group and of the MAC group (either may be empty), minus
    /// the ingress; a port in both gets one copy.
    Group(&'a [(PortId, u32)], &'a [(PortId, u32)]),
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
    mac_groups: HashMap<Mac, Group>,
    /// Uplink ports, sorted.
    uplinks: Vec<PortId>,
    /// MACs learned on uplinks (a host port's own MAC is never learned).
    learned: HashMap<Mac, PortId>,
}

fn join_group(g: &mut Group, port: PortId) {
    match g.members.binary_search_by_key(&port, |m| m.0) {
        Ok(i) => g.members[i].1 += 1,
        Err(i) => g.members.insert(i, (port, 1)),
    }
}

/// Drops one reference; returns (had one, group now empty).
fn leave_group(g: &mut Group, port: PortId) -> (bool, bool) {
    match g.members.binary_search_by_key(&port, |m| m.0) {
        Ok(i) => {
            g.members[i].1 -= 1;
            if g.members[i].1 == 0 {
                g.members.remove(i);
            }
            (true, g.members.is_empty())
        }
        Err(_) => (false, g.members.is_empty()),
    }
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

    /// Makes `port` an uplink.
    pub fn add_uplink(&mut self, port: PortId) {
        if let Err(i) = self.uplinks.binary_search(&port) {
            self.uplinks.insert(i, port);
        }
    }

    /// The uplinks, in port order.
    pub fn uplinks(&self) -> &[PortId] {
        &self.uplinks
    }

    /// Learns that `src` is beyond `port` when `port` is an uplink and `src` is a
    /// unicast MAC that is not a host port's own.
    pub fn learn(&mut self, port: PortId, src: Mac) {
        if !src.is_multicast()
            && self.uplinks.binary_search(&port).is_ok()
            && !self.macs.contains_key(&src)
        {
            self.learned.insert(src, port);
        }
    }

    /// The uplink `mac` was learned on, if any.
    pub fn learned_port(&self, mac: Mac) -> Option<PortId> {
        self.learned.get(&mac).copied()
    }

    /// Adds one reference of `port` to `group`.
    pub fn join(&mut self, port: PortId, group: Ipv4Addr) {
        join_group(self.groups.entry(group).or_default(), port);
    }

    /// Adds one reference of `port` to the Ethernet multicast group `mac` (for flow rules
    /// that name only a destination MAC).
    pub fn join_mac(&mut self, port: PortId, mac: Mac) {
        join_group(self.mac_groups.entry(mac).or_default(), port);
    }

    /// Drops one reference of `port` to the MAC group; returns false if it held none.
    pub fn leave_mac(&mut self, port: PortId, mac: Mac) -> bool {
        let Some(g) = self.mac_groups.get_mut(&mac) else {
            return false;
        };
        let (had, empty) = leave_group(g, port);
        if empty {
            self.mac_groups.remove(&mac);
        }
        had
    }

    /// Drops one reference of `port` to `group`; returns false if it held none.
    pub fn leave(&mut self, port: PortId, group: Ipv4Addr) -> bool {
        let Some(g) = self.groups.get_mut(&group) else {
            return false;
        };
        let (had, empty) = leave_group(g, port);
        if empty {
            self.groups.remove(&group);
        }
        had
    }

    /// True if `port` holds a reference to `group`.
    pub fn is_member(&self, port: PortId, group: Ipv4Addr) -> bool {
        self.groups
            .get(&group)
            .is_some_and(|g| g.members.binary_search_by_key(&port, |m| m.0).is_ok())
    }

    /// Whether `port` joined the Ethernet multicast group `mac`.
    pub fn is_mac_member(&self, port: PortId, mac: Mac) -> bool {
        self.mac_groups
            .get(&mac)
            .is_some_and(|g| g.members.binary_search_by_key(&port, |m| m.0).is_ok())
    }

    /// Decides where a frame goes from its destination MAC and, for IPv4 multicast, its
    /// destination IP.
    pub fn route(&self, dst: Mac, ipv4_dst: Option<Ipv4Addr>) -> Route<'_> {
        if dst.is_broadcast() {
            return Route::Broadcast;
        }
        if dst.is_multicast() {
            let by_ip = ipv4_dst
                .filter(Ipv4Addr::is_multicast)
                .and_then(|ip| self.groups.get(&ip))
                .map_or(&[][..], |g| &g.members[..]);
            let by_mac = self
                .mac_groups
                .get(&dst)
                .map_or(&[][..], |g| &g.members[..]);
            if by_ip.is_empty() && by_mac.is_empty() {
                return Route::Nowhere;
            }
            return Route::Group(by_ip, by_mac);
        }
        match self.macs.get(&dst).or_else(|| self.learned.get(&dst)) {
            Some(&p) => Route::Unicast(p),
            None => Route::Nowhere,
        }
    }
}
