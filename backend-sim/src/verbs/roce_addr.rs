//! From an address vector's GIDs to the addresses of the RoCE frames a port sends: RoCEv2
//! over IPv4 for an IPv4-mapped destination GID; for a link-local one, RoCEv2 over IPv6
//! on rxe, RoCE v1 on mlx5.
//!
//! A simulated port has two GIDs (see `SimContext::query_gid`): GID 0, the link-local
//! IPv6 address formed from its MAC, and GID 1, its IPv4 address. rxe lists both as
//! RoCE v2 (in the Soft-RoCE VM, `ibv_devinfo -v` shows `GID[0] fe80::…, RoCE v2` and
//! `GID[1] ::ffff:10.77.0.1, RoCE v2`) and sends RoCEv2 over IPv6 from GID 0
//! (rxe_net.c, `prepare6`: flow label 0, traffic class and hop limit from the GRH, UDP
//! checksum 0). mlx5 lists GID 0 as RoCE v1 (a real port lists the link-local address
//! twice, RoCE v1 then v2; the simulated one has the first only) and sends RoCE v1 from
//! it: the GRH and the IB transport straight in Ethernet (IBA annex A16).

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::frame::ipv6::{link_local_mac, link_local_of_mac};
use verbs_api::GlobalRoute;

use crate::frame::eth::Mac;
use crate::frame::roce::RoceIps;
use crate::verbs::personality::Personality;

/// The source and destination addresses of frames a port (MAC `mac`, IPv4 address
/// `ip`) sends along `grh`: over IPv4 to an IPv4-mapped destination GID, from the port's
/// IPv4 address; to a link-local destination GID from the port's link-local GID 0
/// (`sgid_index` 0), over IPv6 on rxe (RoCE v2) or as RoCE v1 on mlx5. `None` for what
/// the simulator does not carry: IPv6 or GRH multicast, other IPv6 addresses, a
/// link-local destination from the IPv4 GID.
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
    if grh.sgid_index != 0 || link_local_mac(&dst).is_none() {
        return None;
    }
    let src = link_local_of_mac(mac.0);
    Some(if personality.roce_v1_gid(0) {
        RoceIps::V1(src, dst)
    } else {
        RoceIps::V6(src, dst)
    })
}

/// Why [`roce_ips`] refused `grh`, for the error of the verb that was given it.
pub(crate) fn not_carried(grh: &GlobalRoute) -> String {
    let dst = Ipv6Addr::from(grh.dgid.0);
    if link_local_mac(&dst).is_none() {
        format!("destination GID {dst} is neither IPv4-mapped nor a link-local RoCE GID")
    } else {
        format!(
            "destination GID {dst} is link-local, but source GID {} is not the port's \
             link-local GID 0",
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
        RoceIps::V6(_, dst) | RoceIps::V1(_, dst) => link_local_mac(dst).map(Mac),
    }
}

/// The hop limit (IPv4 TTL) of frames to `ips`' destination when the address vector asks
/// for `asked`: 64 to a unicast address, whatever was asked, because the kernel resolves
/// every RoCE v2 unicast address vector through the IP route and takes the route's hop
/// limit (`ib_resolve_unicast_gid_dmac`, drivers/infiniband/core/verbs.c; the default is
/// 64: the pingpongs ask for 1 and rxe sends 64, netwire/tests/data/README.md); a group's
/// is left as asked (0: 64), and so is RoCE v1's, which no IP route resolves ("If
/// destination is link local and source GID is RoCEv1, IP stack is not used", there).
pub(crate) fn hop_limit(ips: &RoceIps, asked: u8) -> u8 {
    match ips {
        RoceIps::V4(_, dst) if dst.is_multicast() && asked != 0 => asked,
        RoceIps::V1(..) if asked != 0 => asked,
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
    fn ipv4_gids_go_over_ipv4_and_link_local_ones_over_ipv6_on_rxe_as_roce_v1_on_mlx5() {
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
        let v1 = roce_ips(MAC, IP, Personality::Mlx5, &v6);
        assert_eq!(v1, Some(RoceIps::V1(link_local_of_mac(MAC.0), ll)));
        assert_eq!(hop_limit(&v1.unwrap(), 1), 1, "RoCE v1: as asked");
        let from_v4_gid = grh(Gid(ll.octets()), 1);
        assert_eq!(roce_ips(MAC, IP, Personality::Rxe, &from_v4_gid), None);
        assert_eq!(
            not_carried(&from_v4_gid),
            format!(
                "destination GID {ll} is link-local, but source GID 1 is not the port's \
                 link-local GID 0"
            )
        );
        let global = grh(Gid("2001:db8::1".parse::<Ipv6Addr>().unwrap().octets()), 0);
        assert_eq!(roce_ips(MAC, IP, Personality::Rxe, &global), None);
        assert_eq!(
            not_carried(&global),
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
