//! Addresses of ids: `rdma_bind_addr`, `rdma_resolve_addr`, `rdma_resolve_route`,
//! `rdma_listen`, the ports, and `rdma_set_option` (drivers/infiniband/core/cma.c and
//! addr.c for the kernel's answers).

use std::ffi::{c_int, c_void};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use crate::base::boundary::{boundary, MinusOne, Value};
use crate::base::ffi;
use crate::base::pointer::try_mut_from_ptr;
use crate::base::sync::lock;
use crate::rdmacm::api::get_event::complete;
use crate::rdmacm::core::event_queue::KEvent;
use crate::rdmacm::core::id_query::publish;
use crate::rdmacm::core::id_state::CmId;
use crate::rdmacm::core::id_state::{fail, IdInner, State};
use crate::rdmacm::core::manager::cm_and_id;
use crate::rdmacm::core::manager::{listen_service, post, Cm, MAX_BACKLOG};
use crate::rdmacm::core::sockaddr as addr;
use crate::rdmacm::core::sockaddr::Local;

/// Binds id `g` to `a` (the kernel's `rdma_bind_addr` after librdmacm's checks).
fn bind(c: &Cm, n: u32, g: &mut IdInner, a: SocketAddr) -> Result<(), c_int> {
    if g.state != State::Idle {
        return Err(libc::EINVAL);
    }
    addr::check_link_local(&a)?;
    let local = addr::classify_local(a.ip(), c.host)?;
    let port = c.claim_port(g.ps, a.ip(), a.port(), g.reuseaddr, n)?;
    let mut bound = a;
    bound.set_port(port);
    g.src = Some(bound);
    g.port_claimed = true;
    g.device = (local == Local::Port).then_some(0);
    g.state = State::AddrBound;
    Ok(())
}

/// `rdma_bind_addr`: binds the id to an address of this host (and a port; 0 picks one).
/// The host's own address gives the id its device (`id->verbs`, `id->port_num`);
/// the wildcard gives none; another address fails with EADDRNOTAVAIL.
///
/// # Safety
/// `id` is a live id of ours; `addr` is NULL or a valid socket address.
pub unsafe extern "C" fn rdma_bind_addr(
    id: *mut ffi::rdma_cm_id,
    sa: *mut libc::sockaddr,
) -> c_int {
    boundary(MinusOne, move || {
        // SAFETY: the caller's live id.
        let (c, cid) = match unsafe { cm_and_id(id) } {
            Ok(x) => x,
            Err(e) => return fail(e),
        };
        // SAFETY: the caller's socket address.
        let Ok(Some(a)) = (unsafe { addr::read(sa) }) else {
            return fail(libc::EINVAL);
        };
        let shared = std::sync::Arc::clone(&cid.shared);
        let mut g = lock(&shared.inner);
        if let Err(e) = bind(c, shared.endpoint.id, &mut g, a) {
            return fail(e);
        }
        match publish(cid, &mut g) {
            Ok(()) => 0,
            Err(e) => fail(e),
        }
    })
}

/// The wildcard address of `a`'s family.
fn any_like(a: &SocketAddr) -> SocketAddr {
    match a {
        SocketAddr::V4(_) => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
        SocketAddr::V6(_) => SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0),
    }
}

/// How the emulated host reaches a destination.
enum Reach {
    /// Resolved at once.
    Now,
    /// Nobody answers ARP: ADDR_ERROR (-ETIMEDOUT) after the program's timeout.
    Silent,
    /// Synchronous failure (errno).
    Fails(c_int),
    /// Resolved, but the source has no RDMA device: ADDR_ERROR (-ENODEV).
    NoDevice,
}

/// Address resolution on the emulated host (addr.c `addr_resolve`): a topology host, a
/// multicast group, this host itself and the wildcard resolve; a silent address of the
/// host's subnet, or a link-local address of no topology host (no answer to neighbour
/// discovery), times out; loopback has no RDMA device; anything else has no route (the
/// emulated host has one interface, on its /24, and no gateway).
fn reach(dst: &SocketAddr, host: Ipv4Addr) -> Reach {
    if dst.ip().is_unspecified() {
        return Reach::Now;
    }
    let Some(v4) = addr::ipv4_of(dst) else {
        return if addr::is_link_local(&dst.ip()) {
            Reach::Silent
        } else if dst.ip().is_loopback() {
            Reach::NoDevice
        } else {
            Reach::Fails(libc::ENETUNREACH)
        };
    };
    if v4.is_loopback() {
        return Reach::NoDevice;
    }
    let known = v4 == host || v4.is_multicast() || addr::topology_mac(v4).is_some();
    if known {
        Reach::Now
    } else if addr::same_subnet(v4, host) {
        Reach::Silent
    } else {
        Reach::Fails(libc::ENETUNREACH)
    }
}

/// `rdma_resolve_addr`: binds the id if it is not (to `src_addr`, or the wildcard), then
/// resolves `dst_addr`; ADDR_RESOLVED or ADDR_ERROR follows on the id's channel.
///
/// # Safety
/// `id` is a live id of ours; the addresses are NULL or valid socket addresses.
pub unsafe extern "C" fn rdma_resolve_addr(
    id: *mut ffi::rdma_cm_id,
    src_addr: *mut libc::sockaddr,
    dst_addr: *mut libc::sockaddr,
    timeout_ms: c_int,
) -> c_int {
    boundary(MinusOne, move || {
        // SAFETY: the caller's live id.
        let (c, cid) = match unsafe { cm_and_id(id) } {
            Ok(x) => x,
            Err(e) => return fail(e),
        };
        // SAFETY: the caller's socket addresses.
        let (src, dst) = match unsafe { (addr::read(src_addr), addr::read(dst_addr)) } {
            (Ok(s), Ok(Some(d))) => (s, d),
            _ => return fail(libc::EINVAL),
        };
        let shared = std::sync::Arc::clone(&cid.shared);
        {
            let mut g = lock(&shared.inner);
            if g.state == State::Idle {
                let from = src.unwrap_or_else(|| any_like(&dst));
                if let Err(e) = bind(c, shared.endpoint.id, &mut g, from) {
                    return fail(e);
                }
            }
            if g.src.map(|s| s.is_ipv4()) != Some(dst.is_ipv4()) {
                return fail(libc::EINVAL);
            }
            if g.state != State::AddrBound {
                return fail(libc::EINVAL);
            }
            g.dst = Some(dst);
            g.state = State::AddrQuery;
            let ep = shared.endpoint;
            match reach(&dst, c.host) {
                Reach::Now => {
                    resolved(&mut g, c.host);
                    post(&g.channel, ep, KEvent::AddrResolved);
                }
                Reach::NoDevice if g.device.is_none() => {
                    g.state = State::AddrBound;
                    post(&g.channel, ep, KEvent::AddrError(-libc::ENODEV));
                }
                Reach::NoDevice => {
                    g.state = State::AddrResolved;
                    post(&g.channel, ep, KEvent::AddrResolved);
                }
                Reach::Fails(e) => {
                    g.state = State::AddrBound;
                    g.dst = None;
                    return fail(e);
                }
                Reach::Silent => {
                    let wait = Duration::from_millis(u64::try_from(timeout_ms).unwrap_or(0));
                    let later = std::sync::Arc::clone(&shared);
                    let spawned = std::thread::Builder::new()
                        .name("verbs-emu-arp".into())
                        .spawn(move || {
                            std::thread::sleep(wait);
                            let mut g = lock(&later.inner);
                            if !g.destroyed && g.state == State::AddrQuery {
                                g.state = State::AddrBound;
                                post(
                                    &g.channel,
                                    later.endpoint,
                                    KEvent::AddrError(-libc::ETIMEDOUT),
                                );
                            }
                        });
                    if spawned.is_err() {
                        g.state = State::AddrBound;
                        return fail(libc::EAGAIN);
                    }
                }
            }
        }
        // librdmacm copies the destination in at once.
        cid.raw.route.addr.__bindgen_anon_2.dst_storage = addr::storage(&dst);
        // SAFETY: the caller's live id.
        unsafe { complete(id) }
    })
}

/// The destination resolved: a wildcard source becomes the host's address (its
/// link-local one, in the destination's scope, for a link-local destination, as the
/// kernel's source address selection picks), and the id gets the host's device (cma.c
/// `addr_handler`, `cma_acquire_dev_by_src_ip`).
fn resolved(g: &mut IdInner, host: Ipv4Addr) {
    let dst = g.dst;
    if let Some(src) = g.src.as_mut() {
        if src.ip().is_unspecified() {
            match (src, dst) {
                (SocketAddr::V6(s), Some(SocketAddr::V6(d)))
                    if netwire::ipv6::is_link_local(d.ip()) =>
                {
                    s.set_ip(addr::link_local_of(host));
                    s.set_scope_id(d.scope_id());
                }
                (SocketAddr::V6(s), _) => s.set_ip(host.to_ipv6_mapped()),
                (src @ SocketAddr::V4(_), _) => src.set_ip(IpAddr::V4(host)),
            }
        }
    }
    if g.dst.is_some_and(|d| d.ip().is_unspecified()) {
        g.dst = g.src;
    }
    g.device = Some(0);
    g.state = State::AddrResolved;
}

/// `rdma_resolve_route`: after ADDR_RESOLVED; ROUTE_RESOLVED follows (one path).
///
/// # Safety
/// `id` is a live id of ours.
pub unsafe extern "C" fn rdma_resolve_route(id: *mut ffi::rdma_cm_id, _timeout_ms: c_int) -> c_int {
    boundary(MinusOne, move || {
        // SAFETY: NULL or the caller's live id.
        let cid: &mut CmId = unsafe { try_mut_from_ptr!(id, fail(libc::EINVAL)) };
        {
            let mut g = lock(&cid.shared.inner);
            if g.state != State::AddrResolved {
                return fail(libc::EINVAL);
            }
            g.routed = true;
            g.state = State::RouteResolved;
            post(&g.channel, cid.shared.endpoint, KEvent::RouteResolved);
        }
        // SAFETY: the caller's live id.
        unsafe { complete(id) }
    })
}

/// `rdma_listen`: binds an unbound id to the wildcard first; a backlog of 0 or less (or
/// above 1024) means 1024 (ucma's `max_backlog`).
///
/// # Safety
/// `id` is a live id of ours.
pub unsafe extern "C" fn rdma_listen(id: *mut ffi::rdma_cm_id, backlog: c_int) -> c_int {
    boundary(MinusOne, move || {
        // SAFETY: the caller's live id.
        let (c, cid) = match unsafe { cm_and_id(id) } {
            Ok(x) => x,
            Err(e) => return fail(e),
        };
        let shared = std::sync::Arc::clone(&cid.shared);
        let mut g = lock(&shared.inner);
        if g.state == State::Idle {
            let any = SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0);
            if let Err(e) = bind(c, shared.endpoint.id, &mut g, any) {
                return fail(e);
            }
        }
        if g.state != State::AddrBound {
            return fail(libc::EINVAL);
        }
        let Some(service) = listen_service(&g) else {
            return fail(libc::EINVAL);
        };
        if let Err(e) = c.net.listen(service, shared.endpoint) {
            return fail(e);
        }
        g.backlog = match usize::try_from(backlog) {
            Ok(b) if b > 0 && b < MAX_BACKLOG => b,
            _ => MAX_BACKLOG,
        };
        g.state = State::Listen;
        match publish(cid, &mut g) {
            Ok(()) => 0,
            Err(e) => fail(e),
        }
    })
}

fn port_of(s: &ffi::sockaddr_storage) -> u16 {
    let p = std::ptr::from_ref(s).cast::<libc::sockaddr>();
    // SAFETY: a storage holds a sockaddr of its family (or zeros).
    match unsafe { addr::read(p) } {
        Ok(Some(a)) => a.port().to_be(),
        _ => 0,
    }
}

/// `rdma_get_src_port`: the bound port, in network byte order.
///
/// # Safety
/// `id` is a live id of ours.
pub unsafe extern "C" fn rdma_get_src_port(id: *mut ffi::rdma_cm_id) -> u16 {
    boundary(Value(0), move || {
        // SAFETY: the caller's live id; reading the storage view of the union.
        unsafe { port_of(&(*id).route.addr.__bindgen_anon_1.src_storage) }
    })
}

/// `rdma_get_dst_port`: the destination port, in network byte order.
///
/// # Safety
/// `id` is a live id of ours.
pub unsafe extern "C" fn rdma_get_dst_port(id: *mut ffi::rdma_cm_id) -> u16 {
    boundary(Value(0), move || {
        // SAFETY: as above.
        unsafe { port_of(&(*id).route.addr.__bindgen_anon_2.dst_storage) }
    })
}

/// `rdma_set_option`: TOS, REUSEADDR, AFONLY and ACK_TIMEOUT of `RDMA_OPTION_ID`
/// (the kernel's `ucma_set_option_id`); the IB path option is for InfiniBand ports
/// (EINVAL on RoCE), anything else ENOSYS.
///
/// # Safety
/// `id` is a live id of ours; `optval` is valid for `optlen` bytes.
pub unsafe extern "C" fn rdma_set_option(
    id: *mut ffi::rdma_cm_id,
    level: c_int,
    optname: c_int,
    optval: *mut c_void,
    optlen: usize,
) -> c_int {
    boundary(MinusOne, move || {
        if optval.is_null() {
            return fail(libc::EINVAL);
        }
        // SAFETY: NULL or the caller's live id.
        let cid: &mut CmId = unsafe { try_mut_from_ptr!(id, fail(libc::EINVAL)) };
        let mut g = lock(&cid.shared.inner);
        let byte = || {
            (optlen == 1).then(|| {
                // SAFETY: one readable byte.
                unsafe { *optval.cast::<u8>() }
            })
        };
        let int = || {
            (optlen == std::mem::size_of::<c_int>()).then(|| {
                // SAFETY: one readable int.
                unsafe { optval.cast::<c_int>().read_unaligned() }
            })
        };
        let level = u32::try_from(level).unwrap_or(u32::MAX);
        let optname = u32::try_from(optname).unwrap_or(u32::MAX);
        let r = match (level, optname) {
            (ffi::RDMA_OPTION_ID, ffi::RDMA_OPTION_ID_TOS) => byte().map(|t| g.tos = Some(t)),
            (ffi::RDMA_OPTION_ID, ffi::RDMA_OPTION_ID_REUSEADDR) => {
                if g.state != State::Idle {
                    return fail(libc::EINVAL);
                }
                int().map(|v| g.reuseaddr = v != 0)
            }
            (ffi::RDMA_OPTION_ID, ffi::RDMA_OPTION_ID_AFONLY) => int().map(|_| ()),
            (ffi::RDMA_OPTION_ID, ffi::RDMA_OPTION_ID_ACK_TIMEOUT) => {
                byte().map(|t| g.ack_timeout = Some(t))
            }
            (ffi::RDMA_OPTION_IB, ffi::RDMA_OPTION_IB_PATH) => None,
            _ => return fail(libc::ENOSYS),
        };
        match r {
            Some(()) => 0,
            None => fail(libc::EINVAL),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rdmacm::core::event_queue::ChannelShared;
    use crate::rdmacm::core::route;

    const H1: Ipv4Addr = Ipv4Addr::new(10, 100, 0, 1);

    /// A link-local address of no topology host (none here: no emulated world in a unit
    /// test) goes unanswered, as a neighbour solicitation would; other IPv6 addresses
    /// have no route.
    #[test]
    fn a_link_local_address_of_no_host_times_out() {
        let r = |s: &str| reach(&s.parse().unwrap(), H1);
        assert!(matches!(r("[fe80::aff:fe64:9%1]:7"), Reach::Silent));
        assert!(matches!(
            r("[2001:db8::1]:7"),
            Reach::Fails(libc::ENETUNREACH)
        ));
        assert!(matches!(r("[::1]:7"), Reach::NoDevice));
        assert!(matches!(r("10.100.0.1:7"), Reach::Now));
    }

    /// Resolving a link-local destination from the wildcard gives the id the host's
    /// link-local address in the destination's scope, and its path GID 0; an IPv4 one
    /// the host's address and GID 1.
    #[test]
    fn a_wildcard_source_becomes_the_link_local_address_for_a_link_local_destination() {
        let id = |src: &str, dst: &str| {
            let ch = std::sync::Arc::new(ChannelShared::new().unwrap());
            let mut g = IdInner::new(ffi::RDMA_PS_TCP, ffi::IBV_QPT_RC, 1, ch, false);
            g.src = Some(src.parse().unwrap());
            g.dst = Some(dst.parse().unwrap());
            resolved(&mut g, H1);
            g
        };
        let g = id("[::]:0", "[fe80::aff:fe64:14%3]:18600");
        assert_eq!(g.src, Some("[fe80::aff:fe64:1%3]:0".parse().unwrap()));
        assert_eq!(route::sgid_index(&g), 0);
        assert_eq!(route::ah_attr(&g).grh.sgid_index, 0);
        let g = id("0.0.0.0:0", "10.100.0.20:18600");
        assert_eq!(g.src, Some("10.100.0.1:0".parse().unwrap()));
        assert_eq!(route::sgid_index(&g), 1);
        let g = id("[::]:0", "[::ffff:10.100.0.20]:18600");
        assert_eq!(g.src, Some("[::ffff:10.100.0.1]:0".parse().unwrap()));
        assert_eq!(route::sgid_index(&g), 1);
    }
}
