//! The fabric's topology: hosts, their ports, and the switch's tables, with the one routing
//! decision the event loop needs (which ports get a copy of a frame).

use super::error::FabricError;
use super::port::{Host, Port, PortConfig};
use super::switch::{Route, Switch};
use crate::fault::LinkFaults;
use crate::frame::eth::{Mac, ETHERTYPE_IPV4};
use crate::ids::{HostId, PortId};
use std::net::Ipv4Addr;

/// Hosts, ports and the switch.
#[derive(Debug, Default, Clone)]
pub(crate) struct Topology {
    pub hosts: Vec<Host>,
    pub ports: Vec<Port>,
    pub switch: Switch,
}

/// The IPv4 destination of an untagged IPv4 frame, read without a full parse.
pub(crate) fn ipv4_dst(frame: &[u8]) -> Option<Ipv4Addr> {
    if frame.len() >= 34 && u16::from_be_bytes([frame[12], frame[13]]) == ETHERTYPE_IPV4 {
        Some(Ipv4Addr::new(frame[30], frame[31], frame[32], frame[33]))
    } else {
        None
    }
}

/// The destination MAC of a frame of at least 6 bytes.
pub(crate) fn dst_mac(frame: &[u8]) -> Mac {
    Mac([frame[0], frame[1], frame[2], frame[3], frame[4], frame[5]])
}

impl Topology {
    pub fn add_host(&mut self, name: String) -> HostId {
        self.hosts.push(Host {
            name,
            ports: Vec::new(),
        });
        HostId((self.hosts.len() - 1) as u32)
    }

    /// Adds a port whose links start with `faults` and draw from `seed`'s streams.
    pub fn add_port(
        &mut self,
        host: HostId,
        config: PortConfig,
        faults: &LinkFaults,
        seed: u64,
    ) -> Result<PortId, FabricError> {
        if host.0 as usize >= self.hosts.len() {
            return Err(FabricError::UnknownHost(host));
        }
        if self.switch.port_of_mac(config.mac).is_some() {
            return Err(FabricError::DuplicateMac(config.mac));
        }
        if self.switch.port_of_ip(config.ipv4).is_some() {
            return Err(FabricError::DuplicateIp(config.ipv4));
        }
        let id = PortId(self.ports.len() as u32);
        self.switch.add_port(id, config.mac, config.ipv4);
        self.ports.push(Port::new(host, config, faults, seed));
        self.hosts[host.0 as usize].ports.push(id);
        Ok(id)
    }

    pub fn port(&self, port: PortId) -> Result<&Port, FabricError> {
        self.ports
            .get(port.idx())
            .ok_or(FabricError::UnknownPort(port))
    }

    pub fn port_mut(&mut self, port: PortId) -> Result<&mut Port, FabricError> {
        self.ports
            .get_mut(port.idx())
            .ok_or(FabricError::UnknownPort(port))
    }

    pub fn mac_of_ip(&self, ip: Ipv4Addr) -> Option<Mac> {
        self.switch
            .port_of_ip(ip)
            .map(|p| self.ports[p.idx()].config.mac)
    }

    /// Adds an uplink: a port whose MAC and address the switch does not take as a
    /// host's (see [`crate::Fabric::add_uplink`]).
    pub fn add_uplink(
        &mut self,
        host: HostId,
        config: PortConfig,
        faults: &LinkFaults,
        seed: u64,
    ) -> Result<PortId, FabricError> {
        if host.0 as usize >= self.hosts.len() {
            return Err(FabricError::UnknownHost(host));
        }
        let id = PortId(self.ports.len() as u32);
        self.switch.add_uplink(id);
        self.ports.push(Port::new(host, config, faults, seed));
        self.hosts[host.0 as usize].ports.push(id);
        Ok(id)
    }

    /// The ports that get a copy of `frame` arriving at the switch from `from`, into
    /// `out` (cleared first), in port order for groups and broadcast. Multicast, and
    /// unicast to a MAC nobody has, also go out of every uplink but `from`.
    pub fn targets(&self, from: PortId, frame: &[u8], out: &mut Vec<PortId>) {
        out.clear();
        let dst = dst_mac(frame);
        let mut flood = dst.is_multicast() && !dst.is_broadcast();
        match self.switch.route(dst, ipv4_dst(frame)) {
            Route::Unicast(p) if p != from => out.push(p),
            Route::Group(a, b) => {
                out.extend(a.iter().chain(b).map(|m| m.0).filter(|&p| p != from));
                if !a.is_empty() && !b.is_empty() {
                    out.sort_unstable();
                    out.dedup();
                }
            }
            Route::Broadcast => out.extend(
                (0..self.ports.len() as u32)
                    .map(PortId)
                    .filter(|&p| p != from),
            ),
            Route::Nowhere => flood = true,
            Route::Unicast(_) => {}
        }
        let uplinks = self.switch.uplinks();
        if flood && !uplinks.is_empty() {
            out.extend(uplinks.iter().copied().filter(|&p| p != from));
            out.sort_unstable();
            out.dedup();
        }
    }
}
