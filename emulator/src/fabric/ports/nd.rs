//! IPv6 neighbour advertisements for the fabric's hosts (RFC 4861), ARP's counterpart
//! (see [`super::arp`]): a peer on a real network resolves an emulated host's link-local
//! address (its GID 0, RoCE v2 over IPv6 between link-local GIDs) by a neighbour
//! solicitation to the address's solicited-node group, as the kernel's
//! `rdma_addr_find_l2_eth_by_grh` does for rxe in the Soft-RoCE VM. An emulated NIC has
//! no kernel to answer it: each host's port is a member of its solicited-node group's MAC
//! ([`solicited_node_mac`]), and the fabric answers a solicitation for the host's
//! link-local address from the host's port, as the host's kernel would.

use std::net::Ipv6Addr;

use backend_sim::frame::eth::Mac;
use netwire::checksum::{fold_checksum, pseudo_header_sum_v6, sum_words};
use netwire::ipv6::link_local_of_mac;

/// EtherType of IPv6.
const ETHERTYPE_IPV6: u16 = 0x86dd;
/// ICMPv6's next-header number.
const ICMPV6: u8 = 58;
/// ICMPv6 types of a neighbour solicitation and advertisement.
const SOLICITATION: u8 = 135;
const ADVERTISEMENT: u8 = 136;
/// An advertisement's length after the IPv6 header: type, code, checksum, flags, the
/// target, and the target link-layer address option (type 2, 8 bytes).
const NA_LEN: usize = 32;

/// The Ethernet group of the solicited-node multicast address of `mac`'s link-local
/// address (`ff02::1:ffXX:XXXX`, RFC 4291 2.7.1, on Ethernet 33:33 and its last four
/// bytes, RFC 2464 7): 33:33:ff and the MAC's last three bytes.
#[must_use]
pub fn solicited_node_mac(mac: Mac) -> Mac {
    Mac([0x33, 0x33, 0xff, mac.0[3], mac.0[4], mac.0[5]])
}

/// If `frame` is a neighbour solicitation (no extension headers, hop limit 255, code 0,
/// from an address: not a duplicate-address probe) for the link-local address of `mac`,
/// the solicited advertisement of that host (RFC 4861 7.2.4: to the soliciting address
/// and MAC, flags solicited and override, its MAC as the target link-layer address).
#[must_use]
pub fn advert_for(frame: &[u8], mac: Mac) -> Option<Vec<u8>> {
    const IP: usize = 14;
    const ICMP: usize = IP + 40;
    if frame.len() < ICMP + 24 || u16::from_be_bytes([frame[12], frame[13]]) != ETHERTYPE_IPV6 {
        return None;
    }
    let ip = &frame[IP..ICMP];
    let icmp = &frame[ICMP..];
    let octets = |b: &[u8]| {
        let mut o = [0u8; 16];
        o.copy_from_slice(&b[..16]);
        Ipv6Addr::from(o)
    };
    let (src, target) = (octets(&ip[8..24]), octets(&icmp[8..24]));
    let me = link_local_of_mac(mac.0);
    if ip[0] >> 4 != 6
        || ip[6] != ICMPV6
        || ip[7] != 255
        || icmp[0] != SOLICITATION
        || icmp[1] != 0
        || target != me
        || src.is_unspecified()
    {
        return None;
    }
    let mut r = Vec::with_capacity(ICMP + NA_LEN);
    r.extend_from_slice(&frame[6..12]);
    r.extend_from_slice(&mac.0);
    r.extend_from_slice(&ETHERTYPE_IPV6.to_be_bytes());
    r.extend_from_slice(&[0x60, 0, 0, 0]);
    r.extend_from_slice(&(NA_LEN as u16).to_be_bytes());
    r.extend_from_slice(&[ICMPV6, 255]);
    r.extend_from_slice(&me.octets());
    r.extend_from_slice(&src.octets());
    r.extend_from_slice(&[ADVERTISEMENT, 0, 0, 0, 0x60, 0, 0, 0]);
    r.extend_from_slice(&me.octets());
    r.extend_from_slice(&[2, 1]);
    r.extend_from_slice(&mac.0);
    let sum = sum_words(pseudo_header_sum_v6(me, src, ICMPV6, NA_LEN), &r[ICMP..]);
    let sum = fold_checksum(sum);
    r[ICMP + 2..ICMP + 4].copy_from_slice(&sum.to_be_bytes());
    Some(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A solicitation as the VM's kernel sent it for h1 (target fe80::aff:fe64:1).
    fn solicitation(src: Ipv6Addr, target: Ipv6Addr, from: [u8; 6]) -> Vec<u8> {
        let mut f = vec![0x33, 0x33, 0xff, 0x64, 0, 1];
        f.extend_from_slice(&from);
        f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0, 0, 32, 58, 255]);
        f.extend_from_slice(&src.octets());
        f.extend_from_slice(&"ff02::1:ff64:1".parse::<Ipv6Addr>().unwrap().octets());
        f.extend_from_slice(&[135, 0, 0, 0, 0, 0, 0, 0]);
        f.extend_from_slice(&target.octets());
        f.extend_from_slice(&[1, 1]);
        f.extend_from_slice(&from);
        f
    }

    #[test]
    fn a_solicitation_for_the_hosts_link_local_address_gets_its_advertisement() {
        let mac = Mac([2, 0, 10, 100, 0, 1]);
        let vm = [2, 0, 10, 100, 0, 0x14];
        let vm_ll: Ipv6Addr = "fe80::aff:fe64:14".parse().unwrap();
        let me: Ipv6Addr = "fe80::aff:fe64:1".parse().unwrap();
        assert_eq!(solicited_node_mac(mac).0, [0x33, 0x33, 0xff, 0x64, 0, 1]);
        let r = advert_for(&solicitation(vm_ll, me, vm), mac).unwrap();
        assert_eq!(r.len(), 14 + 40 + 32);
        assert_eq!(r[..6], vm);
        assert_eq!(r[6..12], mac.0);
        assert_eq!(r[20..22], [58, 255]);
        assert_eq!(r[22..38], me.octets());
        assert_eq!(r[38..54], vm_ll.octets());
        assert_eq!(r[54..62], [136, 0, r[56], r[57], 0x60, 0, 0, 0]);
        assert_eq!(r[62..78], me.octets());
        assert_eq!(r[78..86], [2, 1, 2, 0, 10, 100, 0, 1]);
        // The checksum verifies: over the pseudo-header and the message it is 0.
        let sum = sum_words(pseudo_header_sum_v6(me, vm_ll, 58, 32), &r[54..]);
        assert_eq!(fold_checksum(sum), 0);
        // Another target, a duplicate-address probe, another hop limit: nothing.
        let other: Ipv6Addr = "fe80::aff:fe64:2".parse().unwrap();
        assert_eq!(advert_for(&solicitation(vm_ll, other, vm), mac), None);
        assert_eq!(
            advert_for(&solicitation(Ipv6Addr::UNSPECIFIED, me, vm), mac),
            None
        );
        let mut hops = solicitation(vm_ll, me, vm);
        hops[21] = 64;
        assert_eq!(advert_for(&hops, mac), None);
        assert_eq!(advert_for(&solicitation(vm_ll, me, vm)[..70], mac), None);
    }
}
