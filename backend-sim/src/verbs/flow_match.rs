//! Flow rules compiled for the receive path: the frame's header fields are read once per
//! frame ([`Fields::parse`]) and every rule's specs are compared against them, instead of
//! each rule parsing the frame again. The semantics are exactly those of
//! [`verbs_api::FlowAttr::matches`] (a property test compares the two).

use std::net::Ipv4Addr;
use verbs_api::{FlowAttr, FlowSpec};

/// The header fields flow specs look at.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Fields {
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

impl Fields {
    /// Reads the fields of `f` (an Ethernet frame, optionally 802.1Q-tagged).
    pub(crate) fn parse(f: &[u8]) -> Fields {
        let mut h = Fields::default();
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

/// A rule's specs, ready to compare against [`Fields`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Matcher {
    checks: Vec<Check>,
}

fn ip32(a: Ipv4Addr) -> u32 {
    u32::from(a)
}

impl Matcher {
    /// Compiles the specs of `attr`.
    pub(crate) fn new(attr: &FlowAttr) -> Matcher {
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
        Matcher { checks }
    }

    /// True if every spec matches.
    pub(crate) fn matches(&self, h: &Fields) -> bool {
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
    use proptest::prelude::*;
    use verbs_api::{EthFilter, FlowRuleType, Ipv4Filter, PortFilter};

    fn frame() -> impl Strategy<Value = Vec<u8>> {
        (
            any::<bool>(),
            prop_oneof![Just(0x0800u16), Just(0x86ddu16), any::<u16>()],
            prop_oneof![Just(0x45u8), Just(0x46u8), Just(0x65u8)],
            prop_oneof![Just(17u8), Just(6u8), Just(1u8)],
            prop_oneof![Just(0u16), Just(0x4000u16), any::<u16>()],
            any::<[u8; 4]>(),
            any::<[u8; 4]>(),
            any::<[u8; 4]>(),
            0..60usize,
        )
            .prop_map(|(vlan, et, vihl, proto, frag, src, dst, ports, cut)| {
                let mut f = vec![0x01, 0x00, 0x5e, 1, 2, 3, 2, 0, 0, 0, 0, 1];
                if vlan {
                    f.extend_from_slice(&[0x81, 0x00, 0x20, 0x05]);
                }
                f.extend_from_slice(&et.to_be_bytes());
                f.extend_from_slice(&[vihl, 0, 0, 40, 0, 0]);
                f.extend_from_slice(&frag.to_be_bytes());
                f.extend_from_slice(&[64, proto, 0, 0]);
                f.extend_from_slice(&src);
                f.extend_from_slice(&dst);
                f.extend_from_slice(&[0; 4]); // options, if IHL says so
                f.extend_from_slice(&ports);
                f.extend_from_slice(&[0; 8]);
                let keep = f.len().saturating_sub(cut % f.len().max(1));
                f.truncate(keep);
                f
            })
    }

    fn spec() -> impl Strategy<Value = FlowSpec> {
        let mac = || {
            prop_oneof![
                Just([0u8; 6]),
                Just([0xff; 6]),
                Just([0xff, 0xff, 0xff, 0, 0, 0]),
                any::<[u8; 6]>()
            ]
        };
        let ip = || {
            prop_oneof![
                Just(Ipv4Addr::UNSPECIFIED),
                Just(Ipv4Addr::BROADCAST),
                Just(Ipv4Addr::new(255, 255, 0, 0)),
                any::<[u8; 4]>().prop_map(Ipv4Addr::from)
            ]
        };
        let port = || prop_oneof![Just(0u16), Just(0xffff), Just(0xf000), any::<u16>()];
        prop_oneof![
            (mac(), mac(), mac(), mac(), port(), port(), port(), port()).prop_map(
                |(v1, m1, v2, m2, e, em, t, tm)| FlowSpec::Eth {
                    val: EthFilter {
                        dst_mac: v1,
                        src_mac: v2,
                        ether_type: e,
                        vlan_tag: t
                    },
                    mask: EthFilter {
                        dst_mac: m1,
                        src_mac: m2,
                        ether_type: em,
                        vlan_tag: tm
                    },
                }
            ),
            (ip(), ip(), ip(), ip()).prop_map(|(a, b, c, d)| FlowSpec::Ipv4 {
                val: Ipv4Filter {
                    src_ip: a,
                    dst_ip: b
                },
                mask: Ipv4Filter {
                    src_ip: c,
                    dst_ip: d
                },
            }),
            (port(), port(), port(), port(), any::<bool>()).prop_map(|(a, b, c, d, udp)| {
                let val = PortFilter {
                    dst_port: a,
                    src_port: b,
                };
                let mask = PortFilter {
                    dst_port: c,
                    src_port: d,
                };
                if udp {
                    FlowSpec::Udp { val, mask }
                } else {
                    FlowSpec::Tcp { val, mask }
                }
            }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        #[test]
        fn compiled_rules_match_exactly_what_verbs_api_matches(f in frame(), specs in prop::collection::vec(spec(), 0..4)) {
            let attr = FlowAttr { rule_type: FlowRuleType::Normal, ..FlowAttr::normal(1, specs) };
            prop_assert_eq!(Matcher::new(&attr).matches(&Fields::parse(&f)), attr.matches(&f));
        }
    }
}
