//! Flow steering rules (`ibv_flow_attr` and its specs): which received Ethernet frames a
//! RAW_PACKET (or UD) QP gets. spead2 creates one rule per endpoint: destination MAC,
//! IPv4 destination and UDP destination port, each fully masked.
//!
//! [`FlowAttr::matches`] gives the matching semantics once, so backends and tests agree.

use std::net::Ipv4Addr;

use bitflags::bitflags;

use crate::macros::verbs_enum;

verbs_enum! {
    /// `enum ibv_flow_attr_type`.
    pub enum FlowRuleType: u32 {
        /// Steer frames that match the specs.
        Normal = 0 => "NORMAL",
        /// Catch every unicast frame no normal rule took (for this port).
        AllDefault = 1 => "ALL_DEFAULT",
        /// Catch every multicast frame no normal rule took.
        McDefault = 2 => "MC_DEFAULT",
        /// Get a copy of every frame, whatever other rules do.
        Sniffer = 3 => "SNIFFER",
    }
}

bitflags! {
    /// `enum ibv_flow_flags`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct FlowFlags: u32 {
        /// Let the frame also continue to lower-priority rules (and the kernel).
        const DONT_TRAP = 1 << 1;
        /// An egress rule.
        const EGRESS = 1 << 2;
    }
}

/// `struct ibv_flow_eth_filter`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct EthFilter {
    /// Destination MAC.
    pub dst_mac: [u8; 6],
    /// Source MAC.
    pub src_mac: [u8; 6],
    /// Ethertype (host order).
    pub ether_type: u16,
    /// VLAN tag (host order).
    pub vlan_tag: u16,
}

/// `struct ibv_flow_ipv4_filter`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Filter {
    /// Source address.
    pub src_ip: Ipv4Addr,
    /// Destination address.
    pub dst_ip: Ipv4Addr,
}

impl Default for Ipv4Filter {
    fn default() -> Self {
        Ipv4Filter {
            src_ip: Ipv4Addr::UNSPECIFIED,
            dst_ip: Ipv4Addr::UNSPECIFIED,
        }
    }
}

/// `struct ibv_flow_tcp_udp_filter`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PortFilter {
    /// Destination port (host order).
    pub dst_port: u16,
    /// Source port (host order).
    pub src_port: u16,
}

/// One spec of a rule: a value and a mask; a frame matches when its field ANDed with the
/// mask equals the value ANDed with the mask.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FlowSpec {
    /// `IBV_FLOW_SPEC_ETH` (0x20).
    Eth {
        /// Value.
        val: EthFilter,
        /// Mask.
        mask: EthFilter,
    },
    /// `IBV_FLOW_SPEC_IPV4` (0x30).
    Ipv4 {
        /// Value.
        val: Ipv4Filter,
        /// Mask.
        mask: Ipv4Filter,
    },
    /// `IBV_FLOW_SPEC_TCP` (0x40).
    Tcp {
        /// Value.
        val: PortFilter,
        /// Mask.
        mask: PortFilter,
    },
    /// `IBV_FLOW_SPEC_UDP` (0x41).
    Udp {
        /// Value.
        val: PortFilter,
        /// Mask.
        mask: PortFilter,
    },
}

impl FlowSpec {
    /// libibverbs' `enum ibv_flow_spec_type` value.
    pub fn spec_type(&self) -> u32 {
        match self {
            FlowSpec::Eth { .. } => 0x20,
            FlowSpec::Ipv4 { .. } => 0x30,
            FlowSpec::Tcp { .. } => 0x40,
            FlowSpec::Udp { .. } => 0x41,
        }
    }

    /// Exact match on the destination MAC.
    pub fn eth_dst(mac: [u8; 6]) -> Self {
        FlowSpec::Eth {
            val: EthFilter {
                dst_mac: mac,
                ..EthFilter::default()
            },
            mask: EthFilter {
                dst_mac: [0xff; 6],
                ..EthFilter::default()
            },
        }
    }

    /// Exact match on the IPv4 destination.
    pub fn ipv4_dst(ip: Ipv4Addr) -> Self {
        FlowSpec::Ipv4 {
            val: Ipv4Filter {
                dst_ip: ip,
                ..Ipv4Filter::default()
            },
            mask: Ipv4Filter {
                dst_ip: Ipv4Addr::BROADCAST,
                ..Ipv4Filter::default()
            },
        }
    }

    /// Exact match on the UDP destination port.
    pub fn udp_dst(port: u16) -> Self {
        FlowSpec::Udp {
            val: PortFilter {
                dst_port: port,
                src_port: 0,
            },
            mask: PortFilter {
                dst_port: 0xffff,
                src_port: 0,
            },
        }
    }
}

/// `struct ibv_flow_attr` with its specs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FlowAttr {
    /// Rule type.
    pub rule_type: FlowRuleType,
    /// Priority: lower values win among matching normal rules.
    pub priority: u16,
    /// Port number (1-based).
    pub port: u8,
    /// Flags.
    pub flags: FlowFlags,
    /// Specs, all of which must match.
    pub specs: Vec<FlowSpec>,
}

impl FlowAttr {
    /// A normal rule on `port` with `specs`.
    pub fn normal(port: u8, specs: Vec<FlowSpec>) -> Self {
        FlowAttr {
            rule_type: FlowRuleType::Normal,
            priority: 0,
            port,
            flags: FlowFlags::empty(),
            specs,
        }
    }

    /// spead2's rule for an endpoint: destination MAC (for a multicast group, its
    /// 01:00:5e MAC), IPv4 destination and UDP destination port.
    pub fn udp_endpoint(port: u8, dst_mac: [u8; 6], ip: Ipv4Addr, udp_port: u16) -> Self {
        Self::normal(
            port,
            vec![
                FlowSpec::eth_dst(dst_mac),
                FlowSpec::ipv4_dst(ip),
                FlowSpec::udp_dst(udp_port),
            ],
        )
    }

    /// Whether an Ethernet frame matches this rule's specs (the rule type decides what a
    /// match means; this only tests the specs). Frames that are too short for a spec's
    /// header, or lack it, do not match that spec.
    pub fn matches(&self, frame: &[u8]) -> bool {
        let h = Headers::parse(frame);
        self.specs.iter().all(|s| h.matches(s))
    }
}

/// The header fields flow specs look at, parsed once.
#[derive(Debug, Default)]
struct Headers {
    eth: Option<EthFilter>,
    ipv4: Option<(Ipv4Filter, u8)>,
    ports: Option<PortFilter>,
}

impl Headers {
    fn parse(f: &[u8]) -> Self {
        let mut h = Headers::default();
        if f.len() < 14 {
            return h;
        }
        let mut eth = EthFilter::default();
        eth.dst_mac.copy_from_slice(&f[0..6]);
        eth.src_mac.copy_from_slice(&f[6..12]);
        let mut off = 12;
        let mut ether_type = u16::from_be_bytes([f[off], f[off + 1]]);
        if ether_type == 0x8100 && f.len() >= 18 {
            eth.vlan_tag = u16::from_be_bytes([f[14], f[15]]);
            off = 16;
            ether_type = u16::from_be_bytes([f[off], f[off + 1]]);
        }
        eth.ether_type = ether_type;
        h.eth = Some(eth);
        let ip = &f[off + 2..];
        if ether_type != 0x0800 || ip.len() < 20 || ip[0] >> 4 != 4 {
            return h;
        }
        let ihl = usize::from(ip[0] & 0x0f) * 4;
        let proto = ip[9];
        let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
        let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
        h.ipv4 = Some((
            Ipv4Filter {
                src_ip: src,
                dst_ip: dst,
            },
            proto,
        ));
        let frag = u16::from_be_bytes([ip[6], ip[7]]) & 0x1fff;
        if ihl >= 20 && ip.len() >= ihl + 4 && frag == 0 {
            let l4 = &ip[ihl..];
            h.ports = Some(PortFilter {
                src_port: u16::from_be_bytes([l4[0], l4[1]]),
                dst_port: u16::from_be_bytes([l4[2], l4[3]]),
            });
        }
        h
    }

    fn matches(&self, spec: &FlowSpec) -> bool {
        fn m16(v: u16, val: u16, mask: u16) -> bool {
            v & mask == val & mask
        }
        fn m32(v: Ipv4Addr, val: Ipv4Addr, mask: Ipv4Addr) -> bool {
            u32::from(v) & u32::from(mask) == u32::from(val) & u32::from(mask)
        }
        fn mac(v: &[u8; 6], val: &[u8; 6], mask: &[u8; 6]) -> bool {
            (0..6).all(|i| v[i] & mask[i] == val[i] & mask[i])
        }
        match spec {
            FlowSpec::Eth { val, mask } => self.eth.is_some_and(|e| {
                mac(&e.dst_mac, &val.dst_mac, &mask.dst_mac)
                    && mac(&e.src_mac, &val.src_mac, &mask.src_mac)
                    && m16(e.ether_type, val.ether_type, mask.ether_type)
                    && m16(e.vlan_tag, val.vlan_tag, mask.vlan_tag)
            }),
            FlowSpec::Ipv4 { val, mask } => self.ipv4.is_some_and(|(ip, _)| {
                m32(ip.src_ip, val.src_ip, mask.src_ip) && m32(ip.dst_ip, val.dst_ip, mask.dst_ip)
            }),
            FlowSpec::Tcp { val, mask } | FlowSpec::Udp { val, mask } => {
                let want = if matches!(spec, FlowSpec::Udp { .. }) {
                    17
                } else {
                    6
                };
                match (self.ipv4, self.ports) {
                    (Some((_, proto)), Some(p)) if proto == want => {
                        m16(p.dst_port, val.dst_port, mask.dst_port)
                            && m16(p.src_port, val.src_port, mask.src_port)
                    }
                    _ => false,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gid::ipv4_multicast_mac;

    fn udp_frame(dst_mac: [u8; 6], dst: Ipv4Addr, dport: u16, proto: u8) -> Vec<u8> {
        let mut f = Vec::new();
        f.extend_from_slice(&dst_mac);
        f.extend_from_slice(&[2, 0, 0, 0, 0, 1]);
        f.extend_from_slice(&0x0800u16.to_be_bytes());
        let mut ip = [0u8; 20];
        ip[0] = 0x45;
        ip[8] = 64;
        ip[9] = proto;
        ip[12..16].copy_from_slice(&[10, 0, 0, 1]);
        ip[16..20].copy_from_slice(&dst.octets());
        f.extend_from_slice(&ip);
        f.extend_from_slice(&7148u16.to_be_bytes());
        f.extend_from_slice(&dport.to_be_bytes());
        f.extend_from_slice(&[0, 8, 0, 0]);
        f
    }

    #[test]
    fn spead2_endpoint_rule_matches_exactly() {
        let group = Ipv4Addr::new(239, 10, 0, 1);
        let mac = ipv4_multicast_mac(group);
        let rule = FlowAttr::udp_endpoint(1, mac, group, 7148);
        assert!(rule.matches(&udp_frame(mac, group, 7148, 17)));
        assert!(!rule.matches(&udp_frame(mac, group, 7149, 17)));
        assert!(
            !rule.matches(&udp_frame(mac, group, 7148, 6)),
            "TCP is not UDP"
        );
        let other = Ipv4Addr::new(239, 10, 0, 2);
        assert!(!rule.matches(&udp_frame(ipv4_multicast_mac(other), other, 7148, 17)));
        assert!(!rule.matches(&[0u8; 10]), "short frames match nothing");
    }

    #[test]
    fn masks_select_bits() {
        let rule = FlowAttr::normal(
            1,
            vec![FlowSpec::Ipv4 {
                val: Ipv4Filter {
                    dst_ip: Ipv4Addr::new(239, 0, 0, 0),
                    ..Default::default()
                },
                mask: Ipv4Filter {
                    dst_ip: Ipv4Addr::new(255, 0, 0, 0),
                    ..Default::default()
                },
            }],
        );
        assert!(rule.matches(&udp_frame([1; 6], Ipv4Addr::new(239, 9, 9, 9), 1, 17)));
        assert!(!rule.matches(&udp_frame([1; 6], Ipv4Addr::new(238, 9, 9, 9), 1, 17)));
        assert_eq!(FlowSpec::udp_dst(1).spec_type(), 0x41);
        assert_eq!(FlowRuleType::Sniffer.as_raw(), 3);
    }
}
