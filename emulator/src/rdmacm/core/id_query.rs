//! What librdmacm copies from the kernel into `struct rdma_cm_id` after binding, resolving
//! or accepting a request (cma.c `ucma_query_route`, the kernel's `ucma_copy_iboe_route`):
//! the device (`verbs`, `pd`, `port_num`), the addresses, and once routed the path record.

use std::ffi::c_int;
use std::net::{IpAddr, SocketAddr};

use crate::base::ffi;
use crate::rdmacm::core::cm_devices as devices;
use crate::rdmacm::core::id_state::{CmId, IdInner};
use crate::rdmacm::core::route;
use crate::rdmacm::core::sockaddr as addr;

/// The MAC of `ip` on the fabric (a multicast group's for a group), zeros if unknown.
fn mac_of(ip: IpAddr) -> [u8; 6] {
    let Some(v4) = addr::ipv4_of(&SocketAddr::new(ip, 0)) else {
        return [0; 6];
    };
    if v4.is_multicast() {
        return verbs_api::ipv4_multicast_mac(v4);
    }
    addr::topology_mac(v4).unwrap_or([0; 6])
}

/// The GID field of an unrouted RoCE id: the interface's hardware address, as the kernel
/// copies `dev_addr` (`rdma_addr_get_sgid`: no GID offset on Ethernet).
fn hw_gid(a: Option<SocketAddr>, resolved: bool) -> [u8; 16] {
    let mut g = [0; 16];
    if let (Some(a), true) = (a, resolved) {
        g[..6].copy_from_slice(&mac_of(a.ip()));
    }
    g
}

/// Copies the kernel's view of id `g` into its C struct, taking a share of its device
/// the first time it has one (librdmacm's `ucma_get_device`).
///
/// # Errors
/// The errno of opening the device or allocating its PD.
pub fn publish(cid: &mut CmId, g: &mut IdInner) -> Result<(), c_int> {
    if let (Some(d), false) = (g.device, g.holds_device) {
        let (ctx, pd) = devices::acquire(d)?;
        g.holds_device = true;
        cid.raw.verbs = ctx;
        cid.raw.pd = pd;
        cid.raw.port_num = route::PORT;
    }
    let a = &mut cid.raw.route.addr;
    a.__bindgen_anon_1.src_storage = g.src.map(|s| addr::storage(&s)).unwrap_or_default();
    a.__bindgen_anon_2.dst_storage = match g.dst {
        Some(d) => addr::storage(&d),
        None => {
            // The kernel gives the destination the family of the source at bind time.
            let mut s = ffi::sockaddr_storage::default();
            if let Some(src) = g.src {
                s.ss_family = addr::storage(&src).ss_family;
            }
            s
        }
    };
    let resolved = !matches!(
        g.state,
        crate::rdmacm::core::id_state::State::Idle
            | crate::rdmacm::core::id_state::State::AddrBound
            | crate::rdmacm::core::id_state::State::AddrQuery
            | crate::rdmacm::core::id_state::State::Listen
    );
    let (sgid, dgid) = if g.routed {
        (g.sgid(), g.dgid())
    } else {
        (hw_gid(g.src, g.device.is_some()), hw_gid(g.dst, resolved))
    };
    a.addr.ibaddr = ffi::rdma_ib_addr {
        sgid: ffi::ibv_gid { raw: sgid },
        dgid: ffi::ibv_gid { raw: dgid },
        pkey: 0xffff_u16.to_be(),
    };
    if g.routed {
        if let Some(d) = g.device {
            set_path(cid, route::path_record(g, d));
        }
    }
    Ok(())
}

/// Gives the id one path record, in memory from `malloc` as librdmacm's is.
fn set_path(cid: &mut CmId, rec: ffi::ibv_sa_path_rec) {
    if cid.raw.route.path_rec.is_null() {
        // SAFETY: malloc of one record; checked below.
        let p = unsafe { libc::malloc(std::mem::size_of::<ffi::ibv_sa_path_rec>()) };
        if p.is_null() {
            return;
        }
        cid.raw.route.path_rec = p.cast();
    }
    // SAFETY: `path_rec` is our malloc'd record.
    unsafe { cid.raw.route.path_rec.write(rec) };
    cid.raw.route.num_paths = 1;
}

/// Frees the path record (the id is destroyed).
pub fn free_path(cid: &mut CmId) {
    if !cid.raw.route.path_rec.is_null() {
        // SAFETY: it came from malloc in `set_path` and is freed once.
        unsafe { libc::free(cid.raw.route.path_rec.cast()) };
        cid.raw.route.path_rec = std::ptr::null_mut();
        cid.raw.route.num_paths = 0;
    }
}
