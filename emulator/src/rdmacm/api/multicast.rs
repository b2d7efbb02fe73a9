//! Multicast on RoCE: `rdma_join_multicast(_ex)` and `rdma_leave_multicast`
//! (drivers/infiniband/core/cma.c `cma_iboe_join_multicast`, `cma_make_mc_event`;
//! librdmacm's attach on MULTICAST_JOIN). No SA is asked: the join's event is made at once,
//! with the group's MGID, the port's RoCE v2 GID as source, hop limit 64, QPN 0xffffff and
//! the id's Q_Key.

use std::ffi::{c_int, c_void};
use std::net::SocketAddr;

use crate::base::boundary::{boundary, MinusOne};
use crate::base::ffi;
use crate::base::pointer::{try_mut_from_ptr, try_ref_from_ptr};
use crate::base::sync::lock;
use crate::rdmacm::core::event_queue::{KEvent, UdData};
use crate::rdmacm::core::id_state::CmId;
use crate::rdmacm::core::id_state::{cm_id, fail, Multicast, State};
use crate::rdmacm::core::manager::post;
use crate::rdmacm::core::route;
use crate::rdmacm::core::sockaddr as addr;

/// The kernel's `ENOTSUPP` (not a userspace errno), what a RoCE v2 join of an IPv6 group
/// fails with.
const ENOTSUPP: c_int = 524;

/// The MGID of a group on a RoCE v2 port (`cma_iboe_set_mgid` with
/// `IB_GID_TYPE_ROCE_UDP_ENCAP`): IPv4 groups IPv4-mapped, IPv6 groups as they are.
fn mgid_of(a: &SocketAddr) -> [u8; 16] {
    addr::gid_of(a.ip())
}

fn join(id: *mut ffi::rdma_cm_id, a: SocketAddr, join_flags: u32, context: *mut c_void) -> c_int {
    // SAFETY: the caller's live id.
    let cid = unsafe { cm_id(id) };
    let ep = cid.shared.endpoint;
    let mut g = lock(&cid.shared.inner);
    if g.device.is_none() || !matches!(g.state, State::AddrBound | State::AddrResolved) {
        return fail(libc::EINVAL);
    }
    if g.qp_type != ffi::IBV_QPT_UD || a.ip().is_unspecified() {
        return fail(libc::EINVAL);
    }
    if a.is_ipv6() {
        return fail(ENOTSUPP);
    }
    let handle = g.multicast.iter().map(|m| m.handle).max().unwrap_or(0) + 1;
    let mgid = mgid_of(&a);
    g.multicast.push(Multicast {
        handle,
        addr: addr::bytes_of(&a),
        mgid,
        join_flags,
        context: context as usize,
        reported: 0,
        acked: 0,
    });
    let ah_attr = ffi::ibv_ah_attr {
        grh: ffi::ibv_global_route {
            dgid: ffi::ibv_gid { raw: mgid },
            flow_label: 0,
            sgid_index: route::SGID_INDEX,
            hop_limit: route::HOP_LIMIT,
            traffic_class: 0,
        },
        dlid: 0,
        sl: 0,
        src_path_bits: 0,
        static_rate: 0,
        is_global: 1,
        port_num: route::PORT,
    };
    let ud = UdData {
        ah_attr,
        qp_num: 0x00ff_ffff,
        qkey: g.qkey,
    };
    post(&g.channel, ep, KEvent::MulticastJoin { mc: handle, ud });
    drop(g);
    // SAFETY: the caller's live id.
    unsafe { crate::rdmacm::api::get_event::complete(id) }
}

/// `rdma_join_multicast`: joins the group at `addr` as a full member; MULTICAST_JOIN follows
/// (and the id's QP, if any, is attached to the group when the program gets it).
///
/// # Safety
/// `id` is a live id of ours; `addr` is NULL or a valid socket address.
pub unsafe extern "C" fn rdma_join_multicast(
    id: *mut ffi::rdma_cm_id,
    sa: *mut libc::sockaddr,
    context: *mut c_void,
) -> c_int {
    boundary(MinusOne, move || {
        if id.is_null() {
            return fail(libc::EINVAL);
        }
        // SAFETY: the caller's socket address.
        match unsafe { addr::read(sa) } {
            Ok(Some(a)) => join(id, a, ffi::RDMA_MC_JOIN_FLAG_FULLMEMBER, context),
            _ => fail(libc::EINVAL),
        }
    })
}

/// `rdma_join_multicast_ex`: as `rdma_join_multicast`, with the join flags (a send-only
/// member's QP is not attached).
///
/// # Safety
/// `id` is a live id of ours; `mc_join_attr` is valid.
pub unsafe extern "C" fn rdma_join_multicast_ex(
    id: *mut ffi::rdma_cm_id,
    mc_join_attr: *mut ffi::rdma_cm_join_mc_attr_ex,
    context: *mut c_void,
) -> c_int {
    boundary(MinusOne, move || {
        if id.is_null() {
            return fail(libc::EINVAL);
        }
        // SAFETY: NULL or the caller's valid attributes.
        let m: &ffi::rdma_cm_join_mc_attr_ex =
            unsafe { try_ref_from_ptr!(mc_join_attr, fail(libc::EINVAL)) };
        if m.comp_mask >= ffi::RDMA_CM_JOIN_MC_ATTR_RESERVED {
            return fail(libc::ENOTSUP);
        }
        if m.comp_mask & ffi::RDMA_CM_JOIN_MC_ATTR_ADDRESS == 0 {
            return fail(libc::EINVAL);
        }
        if m.comp_mask & ffi::RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS == 0
            || m.join_flags >= ffi::RDMA_MC_JOIN_FLAG_RESERVED
        {
            return fail(libc::EINVAL);
        }
        // SAFETY: the caller's socket address.
        match unsafe { addr::read(m.addr.cast()) } {
            Ok(Some(a)) => join(id, a, m.join_flags, context),
            _ => fail(libc::EINVAL),
        }
    })
}

/// `rdma_leave_multicast`: detaches the id's QP, forgets the group and waits until its
/// events are acknowledged. EADDRNOTAVAIL for a group the id did not join.
///
/// # Safety
/// `id` is a live id of ours; `addr` is NULL or a valid socket address.
pub unsafe extern "C" fn rdma_leave_multicast(
    id: *mut ffi::rdma_cm_id,
    sa: *mut libc::sockaddr,
) -> c_int {
    boundary(MinusOne, move || {
        // SAFETY: NULL or the caller's live id.
        let cid: &mut CmId = unsafe { try_mut_from_ptr!(id, fail(libc::EINVAL)) };
        // SAFETY: the caller's socket address.
        let Ok(Some(a)) = (unsafe { addr::read(sa) }) else {
            return fail(libc::EINVAL);
        };
        let bytes = addr::bytes_of(&a);
        let mut g = lock(&cid.shared.inner);
        let Some(i) = g.multicast.iter().position(|m| m.addr == bytes) else {
            return fail(libc::EADDRNOTAVAIL);
        };
        let m = g.multicast[i].clone();
        if !cid.raw.qp.is_null() && m.join_flags != ffi::RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER {
            let gid = ffi::ibv_gid { raw: m.mgid };
            // SAFETY: the id's live QP; a group it may or may not be attached to (a detach of
            // a group never attached fails harmlessly, as in librdmacm).
            unsafe { crate::verbs::qp::ibv_detach_mcast(cid.raw.qp, &gid, 0) };
        }
        // Events of the join not yet retrieved are dropped with it.
        let ep = cid.shared.endpoint;
        g.channel.take_where(|q| {
            q.id == ep && matches!(q.event, KEvent::MulticastJoin { mc, .. } if mc == m.handle)
        });
        while let Some(cur) = g.multicast.iter().find(|x| x.handle == m.handle) {
            if cur.acked >= cur.reported {
                break;
            }
            g = cid
                .shared
                .acked
                .wait(g)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        g.multicast.retain(|x| x.handle != m.handle);
        0
    })
}
