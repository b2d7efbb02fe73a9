//! From an address vector's GIDs to the addresses of the RoCEv2 frames a port sends: IPv4
//! for an IPv4-mapped destination GID, IPv6 for a link-local one on rxe.
//!
//! A simulated port has two GIDs (see `SimContext::query_gid`): GID 0, the link-local
//! IPv6 address formed from its MAC, and GID 1, its IPv4 address. rxe lists both as
//! RoCE v2 (in the Soft-RoCE VM, `ibv_devinfo -v` shows `GID[0] fe80::…, RoCE v2` and
//! `GID[1] ::ffff:10.77.0.1, RoCE v2`) and sends RoCEv2 over IPv6 from GID 0
//! (rxe_net.c, `prepare6`: flow label 0, traffic class and hop limit from the GRH, UDP
//! checksum 0). mlx5 lists GID 0 as RoCE v1, which the simulator does not carry.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::frame::ipv6::{link_local_mac, link_local_of_mac};
use verbs_api::GlobalRoute;

use crate::frame::eth::Mac;
use crate::frame::roce::RoceIps;
use crate::verbs::Personality;

/// The source and destination addresses of frames a port (MAC `mac`, IPv4 address
/// `ip`) sends along `grh`: over IPv4 to an IPv4-mapped destination GID, from the port's
/// IPv4 address; over IPv6 to a link-local destination GID when the source GID
/// (`sgid_index`) is the port's link-local RoCE v2 GID 0 (rxe). `None` for what the
/// simulator does not carry: RoCE v1 (mlx5's GID 0), IPv6 multicast, other IPv6
/// addresses, an IPv6 destination from the IPv4 GID.
pub(crate) fn roce_ips(
    mac: Mac,
    ip: Ipv4Addr,
    personality: Personality,
    grh: &GlobalRoute,
) -> Option<RoceIps> {
    if let Some(dst) = grh.dgid.to_ipv4() {
        return Some(RoceIps::V4(ip, dst));
    }
    let dst = Ipv6Addr::from(grh.dgid.0);
    let from_link_local = grh.sgid_index == 0 && !personality.roce_v1_gid(0);
    (from_link_local && link_local_mac(&dst).is_some())
        .then(|| RoceIps::V6(link_local_of_mac(mac.0), dst))
}

/// Why [`roce_ips`] refused `grh`, for the error of the verb that was given it.
pub(crate) fn not_carried(personality: Personality, grh: &GlobalRoute) -> String {
    let dst = Ipv6Addr::from(grh.dgid.0);
    if grh.sgid_index == 0 && personality.roce_v1_gid(0) {
        "source GID 0 is a RoCE v1 GID, which the simulator does not carry (use GID 1)".into()
    } else if link_local_mac(&dst).is_none() {
        format!("destination GID {dst} is neither IPv4-mapped nor a link-local RoCE GID")
    } else {
        format!(
            "destination GID {dst} is IPv6, but source GID {} is not the port's IPv6 GID 0",
            grh.sgid_index
        )
    }
}

/// The MAC frames to `ips`' destination go to: an IPv4 group's multicast MAC, the owner
/// of an IPv4 address (`mac_of_ip`), or the MAC a link-local address was formed from.
pub(crate) fn dst_mac(ips: &RoceIps, mac_of_ip: impl Fn(Ipv4Addr) -> Option<Mac>) -> Option<Mac> {
    match ips {
        RoceIps::V4(_, dst) if dst.is_multicast() => Some(Mac::for_ipv4_multicast(*dst)),
        RoceIps::V4(_, dst) => mac_of_ip(*dst),
        RoceIps::V6(_, dst) => link_local_mac(dst).map(Mac),
    }
}

/// The hop limit (IPv4 TTL) of frames to `ips`' destination when the address vector asks
/// for `asked`: 64 to a unicast address, whatever was asked, because the kernel resolves
/// every RoCE v2 unicast address vector through the IP route and takes the route's hop
/// limit (`ib_resolve_unicast_gid_dmac`, drivers/infiniband/core/verbs.c; the default is
/// 64: the pingpongs ask for 1 and rxe sends 64, netwire/tests/data/README.md); a group's
/// is left as asked (0: 64).
pub(crate) fn hop_limit(ips: &RoceIps, asked: u8) -> u8 {
    match ips {
        RoceIps::V4(_, dst) if dst.is_multicast() && asked != 0 => asked,
        _ => 64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use verbs_api::Gid;

    const MAC: Mac = Mac([2, 0, 10, 0, 0, 1]);
    const IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);

    fn grh(dgid: Gid, sgid_index: u8) -> GlobalRoute {
        GlobalRoute {
            dgid,
            sgid_index,
            ..GlobalRoute::default()
        }
    }

    #[test]
    fn ipv4_gids_go_over_ipv4_and_link_local_ones_over_ipv6_on_rxe_only() {
        let peer = Mac([2, 0, 10, 0, 0, 2]);
        let v4 = grh(Gid::from_ipv4(Ipv4Addr::new(10, 0, 0, 2)), 1);
        for p in [Personality::Rxe, Personality::Mlx5] {
            assert_eq!(
                roce_ips(MAC, IP, p, &v4),
                Some(RoceIps::V4(IP, Ipv4Addr::new(10, 0, 0, 2)))
            );
        }
        let ll = link_local_of_mac(peer.0);
        let v6 = grh(Gid(ll.octets()), 0);
        let ips = roce_ips(MAC, IP, Personality::Rxe, &v6);
        assert_eq!(ips, Some(RoceIps::V6(link_local_of_mac(MAC.0), ll)));
        assert_eq!(dst_mac(&ips.unwrap(), |_| None), Some(peer));
        assert_eq!(roce_ips(MAC, IP, Personality::Mlx5, &v6), None);
        assert_eq!(
            not_carried(Personality::Mlx5, &v6),
            "source GID 0 is a RoCE v1 GID, which the simulator does not carry (use GID 1)"
        );
        let from_v4_gid = grh(Gid(ll.octets()), 1);
        assert_eq!(roce_ips(MAC, IP, Personality::Rxe, &from_v4_gid), None);
        assert_eq!(
            not_carried(Personality::Rxe, &from_v4_gid),
            format!("destination GID {ll} is IPv6, but source GID 1 is not the port's IPv6 GID 0")
        );
        let global = grh(Gid("2001:db8::1".parse::<Ipv6Addr>().unwrap().octets()), 0);
        assert_eq!(roce_ips(MAC, IP, Personality::Rxe, &global), None);
        assert_eq!(
            not_carried(Personality::Rxe, &global),
            "destination GID 2001:db8::1 is neither IPv4-mapped nor a link-local RoCE GID"
        );
        let group = Ipv4Addr::new(239, 1, 1, 1);
        assert_eq!(
            dst_mac(&RoceIps::V4(IP, group), |_| None),
            Some(Mac::for_ipv4_multicast(group))
        );
        assert_eq!(hop_limit(&RoceIps::V4(IP, group), 1), 1);
        assert_eq!(hop_limit(&RoceIps::V4(IP, group), 0), 64);
        assert_eq!(
            hop_limit(&RoceIps::V4(IP, Ipv4Addr::new(10, 0, 0, 2)), 1),
            64
        );
        assert_eq!(hop_limit(&ips.unwrap(), 1), 64);
    }
}
