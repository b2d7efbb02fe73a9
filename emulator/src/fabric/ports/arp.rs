//! ARP replies for the fabric's hosts (RFC 826, Ethernet and IPv4). An emulated NIC has no
//! kernel behind it to answer ARP; a peer on a real network (a Linux `vxlan` interface, a
//! VM) must learn the hosts' MACs to send them unicast. The fabric answers for a host
//! when a request for its address reaches its port, from that port, as the host's kernel
//! would: the reply crosses the switch and the links like any frame the host sends.

use std::net::Ipv4Addr;

use backend_sim::frame::eth::Mac;

/// EtherType of ARP.
pub const ETHERTYPE_ARP: u16 = 0x0806;
/// Length of an ARP packet for Ethernet and IPv4 after the Ethernet header.
const ARP_LEN: usize = 28;

/// If `frame` is an ARP request (Ethernet, IPv4) for `ip`, the reply of the host that has
/// `ip` and `mac`: to the requester, padded to 60 bytes as a NIC sends it.
#[must_use]
pub fn reply_for(frame: &[u8], ip: Ipv4Addr, mac: Mac) -> Option<Vec<u8>> {
    if frame.len() < 14 + ARP_LEN || u16::from_be_bytes([frame[12], frame[13]]) != ETHERTYPE_ARP {
        return None;
    }
    let a = &frame[14..14 + ARP_LEN];
    // Hardware Ethernet (1), protocol IPv4, 6- and 4-byte addresses, a request (1).
    if a[..8] != [0, 1, 0x08, 0x00, 6, 4, 0, 1] || a[24..28] != ip.octets() {
        return None;
    }
    let (sha, spa) = (&a[8..14], &a[14..18]);
    let mut r = Vec::with_capacity(60);
    r.extend_from_slice(sha);
    r.extend_from_slice(&mac.0);
    r.extend_from_slice(&ETHERTYPE_ARP.to_be_bytes());
    r.extend_from_slice(&[0, 1, 0x08, 0x00, 6, 4, 0, 2]);
    r.extend_from_slice(&mac.0);
    r.extend_from_slice(&ip.octets());
    r.extend_from_slice(sha);
    r.extend_from_slice(spa);
    r.resize(60, 0);
    Some(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(sha: [u8; 6], spa: [u8; 4], tpa: [u8; 4]) -> Vec<u8> {
        let mut f = vec![0xff; 6];
        f.extend_from_slice(&sha);
        f.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 1]);
        f.extend_from_slice(&sha);
        f.extend_from_slice(&spa);
        f.extend_from_slice(&[0; 6]);
        f.extend_from_slice(&tpa);
        f
    }

    #[test]
    fn a_request_for_the_host_gets_its_reply_and_others_none() {
        let me = Ipv4Addr::new(10, 100, 0, 2);
        let mac = Mac([2, 0, 10, 100, 0, 2]);
        let peer = [0x52, 0x54, 0, 1, 2, 3];
        let req = request(peer, [10, 100, 0, 9], me.octets());
        let r = reply_for(&req, me, mac).unwrap();
        assert_eq!(r.len(), 60);
        assert_eq!(r[..6], peer);
        assert_eq!(r[6..12], mac.0);
        assert_eq!(r[12..22], [0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 2]);
        assert_eq!(r[22..28], mac.0);
        assert_eq!(r[28..32], me.octets());
        assert_eq!(r[32..38], peer);
        assert_eq!(r[38..42], [10, 100, 0, 9]);
        assert!(r[42..].iter().all(|&b| b == 0));
        // For another address, a reply, or not ARP: nothing.
        assert_eq!(
            reply_for(&request(peer, [10, 100, 0, 9], [10, 100, 0, 3]), me, mac),
            None
        );
        let mut reply = req.clone();
        reply[21] = 2;
        assert_eq!(reply_for(&reply, me, mac), None);
        let mut ipv4 = req.clone();
        ipv4[12..14].copy_from_slice(&[0x08, 0]);
        assert_eq!(reply_for(&ipv4, me, mac), None);
        assert_eq!(reply_for(&req[..41], me, mac), None);
    }
}
