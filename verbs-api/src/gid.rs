//! Global identifiers (`union ibv_gid`) and the address mappings RoCEv2 uses.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

/// A 128-bit GID. On RoCEv2 with IPv4, a port's GID is the IPv4-mapped IPv6 address
/// (`::ffff:a.b.c.d`) and a multicast group's GID is its group address mapped the same way.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct Gid(pub [u8; 16]);

impl Gid {
    /// The all-zero GID (an unused table entry).
    pub const ZERO: Gid = Gid([0; 16]);

    /// The IPv4-mapped GID of `addr`, as rdma-core and the kernel build it for RoCEv2.
    pub fn from_ipv4(addr: Ipv4Addr) -> Self {
        Gid(addr.to_ipv6_mapped().octets())
    }

    /// The IPv4 address, when this GID is IPv4-mapped.
    pub fn to_ipv4(&self) -> Option<Ipv4Addr> {
        Ipv6Addr::from(self.0).to_ipv4_mapped()
    }

    /// Big-endian subnet prefix (the first 8 bytes), as `ibv_gid.global.subnet_prefix`.
    pub fn subnet_prefix(&self) -> u64 {
        u64::from_be_bytes(self.0[..8].try_into().unwrap_or([0; 8]))
    }

    /// Big-endian interface id (the last 8 bytes), as `ibv_gid.global.interface_id`.
    pub fn interface_id(&self) -> u64 {
        u64::from_be_bytes(self.0[8..].try_into().unwrap_or([0; 8]))
    }

    /// True for a multicast GID: an IPv6 multicast address (first byte 0xff) or an
    /// IPv4-mapped multicast group (224.0.0.0/4).
    pub fn is_multicast(&self) -> bool {
        self.0[0] == 0xff || self.to_ipv4().is_some_and(|a| a.is_multicast())
    }
}

impl From<Ipv6Addr> for Gid {
    fn from(a: Ipv6Addr) -> Self {
        Gid(a.octets())
    }
}

impl fmt::Debug for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Gid({self})")
    }
}

impl fmt::Display for Gid {
    /// Formats as rdma-core's tools show a GID: eight groups of four hex digits.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, pair) in self.0.chunks(2).enumerate() {
            if i > 0 {
                f.write_str(":")?;
            }
            write!(f, "{:02x}{:02x}", pair[0], pair[1])?;
        }
        Ok(())
    }
}

/// The Ethernet multicast MAC of an IPv4 group: 01:00:5e and the group's low 23 bits
/// (RFC 1112), which is what flow rules for a multicast endpoint match.
pub fn ipv4_multicast_mac(group: Ipv4Addr) -> [u8; 6] {
    let o = group.octets();
    [0x01, 0x00, 0x5e, o[1] & 0x7f, o[2], o[3]]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv4_mapping_round_trips() {
        let a = Ipv4Addr::new(10, 77, 0, 1);
        let g = Gid::from_ipv4(a);
        assert_eq!(g.to_string(), "0000:0000:0000:0000:0000:ffff:0a4d:0001");
        assert_eq!(g.to_ipv4(), Some(a));
        assert_eq!(g.subnet_prefix(), 0);
        assert_eq!(g.interface_id(), 0x0000_ffff_0a4d_0001);
        assert!(!g.is_multicast());
        assert!(Gid::from_ipv4(Ipv4Addr::new(239, 1, 2, 3)).is_multicast());
    }

    #[test]
    fn multicast_mac_uses_low_23_bits() {
        assert_eq!(
            ipv4_multicast_mac(Ipv4Addr::new(239, 129, 2, 3)),
            [0x01, 0x00, 0x5e, 0x01, 0x02, 0x03]
        );
    }
}
