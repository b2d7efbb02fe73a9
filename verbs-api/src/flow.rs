//! Flow steering rules (`ibv_flow_attr` and its specs): which received Ethernet frames a
//! RAW_PACKET (or UD) QP gets. spead2 creates one rule per endpoint: destination MAC,
//! IPv4 destination and UDP destination port, each fully masked.
//!
//! [`FlowMatcher`] and [`FlowFields`] give the matching semantics once, so backends and
//! tests agree; [`FlowAttr::matches`] is the two in one call.

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
    /// header, or lack it, do not match that spec. A receive path that tests many frames
    /// compiles the rule once ([`FlowMatcher`]) and reads each frame's fields once
    /// ([`FlowFields`]), as this does per call.
    pub fn matches(&self, frame: &[u8]) -> bool {
        FlowMatcher::new(self).matches(&FlowFields::parse(frame))
    }
}

/// The header fields of one Ethernet frame that flow specs look at, read once so that
/// every rule can be compared against them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowFields {
    eth: Option<EthFields>,
    /// IPv4 source, destination, protocol.
    ip: Option<(u32, u32, u8)>,
    /// Transport source and destination ports (first fragments only).
    ports: Option<(u16, u16)>,
}

/// MACs as 48-bit integers, so a masked compare is one AND and one compare.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct EthFields {
    dst: u64,
    src: u64,
    ether_type: u16,
    vlan: u16,
}

fn mac64(m: &[u8]) -> u64 {
    u64::from_be_bytes([0, 0, m[0], m[1], m[2], m[3], m[4], m[5]])
}

impl FlowFields {
    /// Reads the fields of `f` (an Ethernet frame, optionally 802.1Q-tagged): the
    /// Ethernet header; the IPv4 addresses and protocol if it carries IPv4 with a full
    /// header; the transport ports if that is a first fragment with 4 bytes after its
    /// header.
    pub fn parse(f: &[u8]) -> FlowFields {
        let mut h = FlowFields::default();
        if f.len() < 14 {
            return h;
        }
        let mut e = EthFields {
            dst: mac64(&f[0..6]),
            src: mac64(&f[6..12]),
            ..EthFields::default()
        };
        let mut off = 12;
        let mut ether_type = u16::from_be_bytes([f[12], f[13]]);
        if ether_type == 0x8100 && f.len() >= 18 {
            e.vlan = u16::from_be_bytes([f[14], f[15]]);
            off = 16;
            ether_type = u16::from_be_bytes([f[16], f[17]]);
        }
        e.ether_type = ether_type;
        h.eth = Some(e);
        let ip = &f[off + 2..];
        if ether_type != 0x0800 || ip.len() < 20 || ip[0] >> 4 != 4 {
            return h;
        }
        let ihl = usize::from(ip[0] & 0x0f) * 4;
        let src = u32::from_be_bytes([ip[12], ip[13], ip[14], ip[15]]);
        let dst = u32::from_be_bytes([ip[16], ip[17], ip[18], ip[19]]);
        h.ip = Some((src, dst, ip[9]));
        let frag = u16::from_be_bytes([ip[6], ip[7]]) & 0x1fff;
        if ihl >= 20 && ip.len() >= ihl + 4 && frag == 0 {
            let l4 = &ip[ihl..];
            h.ports = Some((
                u16::from_be_bytes([l4[0], l4[1]]),
                u16::from_be_bytes([l4[2], l4[3]]),
            ));
        }
        h
    }
}

/// One spec, with values pre-masked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Check {
    Eth {
        val: EthFields,
        mask: EthFields,
    },
    Ipv4 {
        src: (u32, u32),
        dst: (u32, u32),
    },
    L4 {
        proto: u8,
        src: (u16, u16),
        dst: (u16, u16),
    },
}

/// A rule's specs compiled for comparing against [`FlowFields`]: values pre-masked,
/// MACs and addresses as integers.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FlowMatcher {
    checks: Vec<Check>,
}

impl FlowMatcher {
    /// Compiles the specs of `attr`.
    pub fn new(attr: &FlowAttr) -> FlowMatcher {
        let ip32 = u32::from;
        let checks = attr
            .specs
            .iter()
            .map(|s| match *s {
                FlowSpec::Eth { val, mask } => Check::Eth {
                    val: EthFields {
                        dst: mac64(&val.dst_mac) & mac64(&mask.dst_mac),
                        src: mac64(&val.src_mac) & mac64(&mask.src_mac),
                        ether_type: val.ether_type & mask.ether_type,
                        vlan: val.vlan_tag & mask.vlan_tag,
                    },
                    mask: EthFields {
                        dst: mac64(&mask.dst_mac),
                        src: mac64(&mask.src_mac),
                        ether_type: mask.ether_type,
                        vlan: mask.vlan_tag,
                    },
                },
                FlowSpec::Ipv4 { val, mask } => Check::Ipv4 {
                    src: (ip32(val.src_ip) & ip32(mask.src_ip), ip32(mask.src_ip)),
                    dst: (ip32(val.dst_ip) & ip32(mask.dst_ip), ip32(mask.dst_ip)),
                },
                FlowSpec::Tcp { val, mask } | FlowSpec::Udp { val, mask } => Check::L4 {
                    proto: if matches!(s, FlowSpec::Udp { .. }) {
                        17
                    } else {
                        6
                    },
                    src: (val.src_port & mask.src_port, mask.src_port),
                    dst: (val.dst_port & mask.dst_port, mask.dst_port),
                },
            })
            .collect();
        FlowMatcher { checks }
    }

    /// True if every spec matches (a frame lacking a spec's header does not match it).
    pub fn matches(&self, h: &FlowFields) -> bool {
        self.checks.iter().all(|c| match c {
            Check::Eth { val, mask } => h.eth.is_some_and(|e| {
                e.dst & mask.dst == val.dst
                    && e.src & mask.src == val.src
                    && e.ether_type & mask.ether_type == val.ether_type
                    && e.vlan & mask.vlan == val.vlan
            }),
            Check::Ipv4 { src, dst } => {
                h.ip.is_some_and(|(s, d, _)| s & src.1 == src.0 && d & dst.1 == dst.0)
            }
            Check::L4 { proto, src, dst } => match (h.ip, h.ports) {
                (Some((_, _, p)), Some((sp, dp))) if p == *proto => {
                    sp & src.1 == src.0 && dp & dst.1 == dst.0
                }
                _ => false,
            },
        })
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

    /// A frame from 01:00:5e:01:02:03 to 02:00:00:00:00:01 (sic: dst first), VLAN 5 if
    /// `vlan`, with an IPv4 header of `ihl` words (options zero), fragment field `frag`,
    /// protocol `proto`, 10.0.0.1 -> 239.1.2.3, ports 5000 -> 7148.
    fn frame(vlan: bool, ether_type: u16, ihl: u8, frag: u16, proto: u8) -> Vec<u8> {
        let mut f = vec![0x01, 0x00, 0x5e, 1, 2, 3, 2, 0, 0, 0, 0, 1];
        if vlan {
            f.extend_from_slice(&[0x81, 0x00, 0x00, 0x05]);
        }
        f.extend_from_slice(&ether_type.to_be_bytes());
        let mut ip = vec![0u8; usize::from(ihl) * 4];
        ip[0] = 0x40 | ihl;
        ip[6..8].copy_from_slice(&frag.to_be_bytes());
        ip[8] = 64;
        ip[9] = proto;
        ip[12..16].copy_from_slice(&[10, 0, 0, 1]);
        ip[16..20].copy_from_slice(&[239, 1, 2, 3]);
        f.extend_from_slice(&ip);
        f.extend_from_slice(&5000u16.to_be_bytes());
        f.extend_from_slice(&7148u16.to_be_bytes());
        f.extend_from_slice(&[0, 8, 0, 0]);
        f
    }

    fn fields(eth: Option<(u16, u16)>, ip: Option<u8>, ports: bool) -> FlowFields {
        FlowFields {
            eth: eth.map(|(ether_type, vlan)| EthFields {
                dst: 0x0100_5e01_0203,
                src: 0x0200_0000_0001,
                ether_type,
                vlan,
            }),
            ip: ip.map(|proto| (0x0a00_0001, 0xef01_0203, proto)),
            ports: ports.then_some((5000, 7148)),
        }
    }

    #[test]
    fn fields_are_read_from_each_header_present() {
        let udp = frame(false, 0x0800, 5, 0, 17);
        let eth = Some((0x0800, 0));
        let cases: [(&str, Vec<u8>, FlowFields); 9] = [
            ("UDP", udp.clone(), fields(eth, Some(17), true)),
            (
                "802.1Q: the tag, then the inner EtherType and headers",
                frame(true, 0x0800, 5, 0, 6),
                fields(Some((0x0800, 0x0005)), Some(6), true),
            ),
            (
                "IPv4 options: the ports follow the IHL, not byte 20",
                frame(false, 0x0800, 6, 0, 17),
                fields(eth, Some(17), true),
            ),
            (
                "a later fragment has no transport header",
                frame(false, 0x0800, 5, 0x0001, 17),
                fields(eth, Some(17), false),
            ),
            (
                "DF alone is a first fragment",
                frame(false, 0x0800, 5, 0x4000, 17),
                fields(eth, Some(17), true),
            ),
            (
                "not IPv4: Ethernet only",
                frame(false, 0x86dd, 5, 0, 17),
                fields(Some((0x86dd, 0)), None, false),
            ),
            (
                "3 bytes after the IPv4 header: no ports",
                udp[..14 + 20 + 3].to_vec(),
                fields(eth, Some(17), false),
            ),
            (
                "a cut IPv4 header: Ethernet only",
                udp[..14 + 19].to_vec(),
                fields(eth, None, false),
            ),
            (
                "no whole Ethernet header",
                udp[..13].to_vec(),
                FlowFields::default(),
            ),
        ];
        for (what, f, want) in cases {
            assert_eq!(FlowFields::parse(&f), want, "{what}");
        }
    }

    #[test]
    fn a_compiled_rule_needs_every_spec_and_its_header() {
        let group = Ipv4Addr::new(239, 1, 2, 3);
        let rule = FlowAttr::udp_endpoint(1, ipv4_multicast_mac(group), group, 7148);
        let m = FlowMatcher::new(&rule);
        let udp = frame(false, 0x0800, 5, 0, 17);
        assert!(m.matches(&FlowFields::parse(&udp)));
        assert!(m.matches(&FlowFields::parse(&frame(true, 0x0800, 6, 0x4000, 17))));
        assert!(!m.matches(&FlowFields::parse(&frame(false, 0x0800, 5, 0, 6))));
        assert!(!m.matches(&FlowFields::parse(&frame(false, 0x0800, 5, 1, 17))));
        assert!(!m.matches(&FlowFields::parse(&udp[..14 + 20 + 3])));
        // No specs: every frame, even one with no Ethernet header.
        let all = FlowMatcher::new(&FlowAttr::normal(1, Vec::new()));
        assert!(all.matches(&FlowFields::parse(&[])));
        // A TCP spec with zero masks still needs TCP.
        let tcp = FlowAttr::normal(
            1,
            vec![FlowSpec::Tcp {
                val: PortFilter::default(),
                mask: PortFilter::default(),
            }],
        );
        assert!(tcp.matches(&frame(false, 0x0800, 5, 0, 6)));
        assert!(!tcp.matches(&udp));
    }
}
