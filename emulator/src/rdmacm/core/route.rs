//! The route of a RoCE connection as the kernel's rdma_cm builds it
//! (drivers/infiniband/core/cma.c: `cma_resolve_iboe_route`): one path record from the
//! source and destination IP addresses, and the address vector a QP uses along it.

use verbs_api::Context;

use crate::base::ffi;
use crate::rdmacm::core::cm_devices as devices;
use crate::rdmacm::core::id_state::IdInner;

/// The hop limit of the path: the IPv4 route's default TTL (`ip4_dst_hoplimit`).
pub const HOP_LIMIT: u8 = 64;
/// `CMA_IBOE_PACKET_LIFETIME`, the packet life time of every RoCE path.
pub const PACKET_LIFE_TIME: u8 = 18;
/// `IB_SA_EQ`: the path's MTU, rate and life time are exact.
const SA_EQ: u8 = 2;
/// The GID index of the port's RoCE v2 (IPv4) GID, the type the kernel's rdma_cm prefers
/// (`CMA_PREFERRED_ROCE_GID_TYPE`).
pub const SGID_INDEX: u8 = 1;
/// The GID index of the port's link-local IPv6 GID (RoCE v2).
pub const LINK_LOCAL_SGID_INDEX: u8 = 0;

/// The index of the source GID of `id`'s path, the GID of its source address
/// (`rdma_ip2gid`) in the port's table: the IPv4 GID, or for a link-local source the
/// link-local GID.
pub fn sgid_index(id: &IdInner) -> u8 {
    if id
        .src
        .is_some_and(|s| super::sockaddr::is_link_local(&s.ip()))
    {
        LINK_LOCAL_SGID_INDEX
    } else {
        SGID_INDEX
    }
}
/// The port every emulated device has.
pub const PORT: u8 = 1;

/// The active MTU (`enum ibv_mtu`) of port 1 of device `device`: the path MTU
/// (`iboe_get_mtu` of the interface's MTU, which the port's active MTU reflects).
pub fn path_mtu(device: usize) -> u32 {
    devices::context(device)
        .ok()
        .and_then(|ctx| {
            // SAFETY: the CM's contexts stay open for the life of the process.
            let c = unsafe { crate::objects::handles::context(ctx) };
            c.sim().query_port(PORT).ok()
        })
        .map_or(ffi::IBV_MTU_1024, |p| p.active_mtu.as_raw())
}

/// The path record `rdma_resolve_route` gives a RoCE id. The rate is
/// `IB_RATE_PORT_CURRENT`: the kernel sets it so for RoCE ("RDMA/cma: Always set static
/// rate to 0 for RoCE").
pub fn path_record(id: &IdInner, device: usize) -> ffi::ibv_sa_path_rec {
    ffi::ibv_sa_path_rec {
        dgid: ffi::ibv_gid { raw: id.dgid() },
        sgid: ffi::ibv_gid { raw: id.sgid() },
        dlid: 0,
        slid: 0,
        raw_traffic: 0,
        flow_label: 0,
        hop_limit: HOP_LIMIT,
        traffic_class: id.tos.unwrap_or(0),
        reversible: 1,
        numb_path: 1,
        pkey: 0xffff_u16.to_be(),
        sl: 0,
        mtu_selector: SA_EQ,
        mtu: u8::try_from(path_mtu(device)).unwrap_or(3),
        rate_selector: SA_EQ,
        rate: 0,
        packet_life_time_selector: SA_EQ,
        packet_life_time: PACKET_LIFE_TIME,
        preference: 0,
    }
}

/// The address vector along the path to `id`'s destination (`ib_init_ah_attr_from_path`).
pub fn ah_attr(id: &IdInner) -> ffi::ibv_ah_attr {
    ffi::ibv_ah_attr {
        grh: ffi::ibv_global_route {
            dgid: ffi::ibv_gid { raw: id.dgid() },
            flow_label: 0,
            sgid_index: sgid_index(id),
            hop_limit: HOP_LIMIT,
            traffic_class: id.tos.unwrap_or(0),
        },
        dlid: 0,
        sl: 0,
        src_path_bits: 0,
        static_rate: 0,
        is_global: 1,
        port_num: PORT,
    }
}

/// The local ACK timeout of a connection's QP: the path's packet life time + 1
/// (cm.c: `cm_init_av_by_path`), unless `RDMA_OPTION_ID_ACK_TIMEOUT` set one.
pub fn ack_timeout(id: &IdInner) -> u8 {
    id.ack_timeout.unwrap_or(PACKET_LIFE_TIME + 1)
}
