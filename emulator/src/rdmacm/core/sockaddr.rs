//! Socket addresses as the connection manager reads them from programs and writes them into
//! `struct rdma_cm_id` (IPv4 and IPv6; librdmacm's `ucma_addrlen`), and the address plan of
//! the emulated host: which addresses are its own, which it can reach.

use std::ffi::c_int;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use crate::base::ffi;

/// Reads the address a program passed; `None` for NULL.
///
/// # Errors
/// EINVAL for a family other than AF_INET and AF_INET6 (librdmacm's `ucma_addrlen` gives
/// length 0 and the call fails with EINVAL; AF_IB is not emulated).
///
/// # Safety
/// `addr` is NULL or points at a socket address of the length its family implies.
pub unsafe fn read(addr: *const libc::sockaddr) -> Result<Option<SocketAddr>, c_int> {
    if addr.is_null() {
        return Ok(None);
    }
    // SAFETY: the caller passes a readable sockaddr; its family decides the struct.
    let family = c_int::from(unsafe { (*addr).sa_family });
    match family {
        libc::AF_INET => {
            // SAFETY: an AF_INET address is a sockaddr_in.
            let sin = unsafe { &*addr.cast::<libc::sockaddr_in>() };
            Ok(Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)),
                u16::from_be(sin.sin_port),
            ))))
        }
        libc::AF_INET6 => {
            // SAFETY: an AF_INET6 address is a sockaddr_in6.
            let sin6 = unsafe { &*addr.cast::<libc::sockaddr_in6>() };
            Ok(Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                u16::from_be(sin6.sin6_port),
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            ))))
        }
        _ => Err(libc::EINVAL),
    }
}

/// The length of the C socket address of `a`'s family.
pub fn len_of(a: &SocketAddr) -> usize {
    match a {
        SocketAddr::V4(_) => std::mem::size_of::<libc::sockaddr_in>(),
        SocketAddr::V6(_) => std::mem::size_of::<libc::sockaddr_in6>(),
    }
}

/// A `struct sockaddr_storage` holding `a` (zeros elsewhere).
pub fn storage(a: &SocketAddr) -> ffi::sockaddr_storage {
    let mut s = ffi::sockaddr_storage::default();
    let p = std::ptr::from_mut(&mut s);
    match a {
        SocketAddr::V4(v4) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: v4.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*v4.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: a sockaddr_storage is large and aligned enough for any sockaddr.
            unsafe { p.cast::<libc::sockaddr_in>().write(sin) };
        }
        SocketAddr::V6(v6) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: v6.port().to_be(),
                sin6_flowinfo: v6.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: v6.ip().octets(),
                },
                sin6_scope_id: v6.scope_id(),
            };
            // SAFETY: as above.
            unsafe { p.cast::<libc::sockaddr_in6>().write(sin6) };
        }
    }
    s
}

/// The bytes of `a` as its C struct (what `rdma_leave_multicast` compares, as librdmacm's
/// `memcmp` of the join address does).
pub fn bytes_of(a: &SocketAddr) -> Vec<u8> {
    let s = storage(a);
    // SAFETY: `s` is a plain struct of `size_of` bytes, all initialised (zeroed, then written).
    let all = unsafe {
        std::slice::from_raw_parts(
            std::ptr::from_ref(&s).cast::<u8>(),
            std::mem::size_of::<ffi::sockaddr_storage>(),
        )
    };
    all[..len_of(a)].to_vec()
}

/// The IPv4 address of the host `a` names: its own (IPv4-mapped IPv6 included), or for
/// a link-local IPv6 address that of the topology's host whose MAC it is made from
/// ([`host_of_link_local`]; the emulated connection manager knows hosts by their IPv4
/// address).
pub fn ipv4_of(a: &SocketAddr) -> Option<Ipv4Addr> {
    match a.ip() {
        IpAddr::V4(v4) => Some(v4),
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .or_else(|| host_of_link_local(&v6, topology_mac)),
    }
}

/// Whether `ip` is a link-local IPv6 address (fe80::/10).
pub fn is_link_local(ip: &IpAddr) -> bool {
    matches!(ip, IpAddr::V6(v6) if netwire::ipv6::is_link_local(v6))
}

/// The MAC the emulator gives host `ip` (`02:00` and the address's four bytes, as every
/// topology host has).
fn conventional_mac(ip: Ipv4Addr) -> [u8; 6] {
    backend_sim::PortConfig::with_ip(ip).mac.0
}

/// The link-local address of host `ip`: the modified EUI-64 of its MAC (RFC 4291), its
/// port's GID 0.
pub fn link_local_of(ip: Ipv4Addr) -> Ipv6Addr {
    netwire::ipv6::link_local_of_mac(conventional_mac(ip))
}

/// The host whose link-local address `v6` is: the MAC in its interface identifier is the
/// emulator's MAC of an IPv4 address, and `mac_of` (the topology) gives that host that
/// MAC.
pub fn host_of_link_local(
    v6: &Ipv6Addr,
    mac_of: impl Fn(Ipv4Addr) -> Option<[u8; 6]>,
) -> Option<Ipv4Addr> {
    let mac = netwire::ipv6::link_local_mac(v6)?;
    let ip = Ipv4Addr::new(mac[2], mac[3], mac[4], mac[5]);
    (conventional_mac(ip) == mac && mac_of(ip) == Some(mac)).then_some(ip)
}

/// Checks the scope of a link-local address given to `rdma_bind_addr` (the kernel's
/// `cma_check_linklocal`, drivers/infiniband/core/cma.c: it must name an interface, which
/// becomes the id's `bound_dev_if`). The emulated host has one interface, its port's:
/// any scope id names it.
///
/// # Errors
/// EINVAL for a link-local address of scope id 0.
pub fn check_link_local(a: &SocketAddr) -> Result<(), c_int> {
    match a {
        SocketAddr::V6(v6) if is_link_local(&a.ip()) && v6.scope_id() == 0 => Err(libc::EINVAL),
        _ => Ok(()),
    }
}

/// `rdma_ip2gid`: the GID of an IP address (IPv4 as an IPv4-mapped IPv6 address).
pub fn gid_of(ip: IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}

/// What the emulated host makes of an address given to `rdma_bind_addr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Local {
    /// The wildcard address: bound to no device.
    Any,
    /// The address of this host's port.
    Port,
}

/// Classifies a local address the way the kernel's `rdma_bind_addr` does
/// (drivers/infiniband/core/cma.c: `rdma_translate_ip` finds no interface with it:
/// EADDRNOTAVAIL; an interface without an RDMA device (loopback): ENODEV). The host's
/// addresses are its IPv4 address and its link-local IPv6 address ([`link_local_of`]).
///
/// # Errors
/// EADDRNOTAVAIL or ENODEV, as above.
pub fn classify_local(ip: IpAddr, host: Ipv4Addr) -> Result<Local, c_int> {
    if ip.is_unspecified() {
        return Ok(Local::Any);
    }
    let v4 = match ip {
        IpAddr::V4(v4) => Some(v4),
        IpAddr::V6(v6) if v6 == link_local_of(host) => Some(host),
        IpAddr::V6(v6) => v6.to_ipv4_mapped(),
    };
    match v4 {
        Some(v4) if v4 == host => Ok(Local::Port),
        Some(v4) if v4.is_loopback() => Err(libc::ENODEV),
        None if ip.is_loopback() => Err(libc::ENODEV),
        _ => Err(libc::EADDRNOTAVAIL),
    }
}

/// The MAC of a host of the topology with address `ip` (None: no such host). The one place
/// the connection manager asks the emulated fabric.
pub fn topology_mac(ip: Ipv4Addr) -> Option<[u8; 6]> {
    crate::runtime::host::emu()
        .ok()
        .and_then(|e| e.sim.with_fabric(|f| f.mac_of_ip(ip)))
        .map(|m| m.0)
}

/// Whether `dst` lies in the /24 of `host` (the subnet every topology host shares the
/// switch on).
pub fn same_subnet(dst: Ipv4Addr, host: Ipv4Addr) -> bool {
    dst.octets()[..3] == host.octets()[..3]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_round_trip_through_their_c_struct() {
        for a in [
            "10.100.0.1:7471".parse::<SocketAddr>().unwrap(),
            "[fe80::1]:9".parse().unwrap(),
        ] {
            let s = storage(&a);
            // SAFETY: `s` holds a sockaddr of `a`'s family.
            let back = unsafe { read(std::ptr::from_ref(&s).cast()) }.unwrap();
            assert_eq!(back, Some(a));
            assert_eq!(bytes_of(&a).len(), len_of(&a));
        }
        // SAFETY: NULL is allowed.
        assert_eq!(unsafe { read(std::ptr::null()) }, Ok(None));
        let mut unix = ffi::sockaddr_storage::default();
        // SAFETY: writes the family of a zeroed storage.
        unsafe { (*std::ptr::from_mut(&mut unix).cast::<libc::sockaddr>()).sa_family = 1 };
        // SAFETY: a readable storage.
        let unknown = unsafe { read(std::ptr::from_ref(&unix).cast()) };
        assert_eq!(unknown, Err(libc::EINVAL));
    }

    /// A link-local address names the topology host whose MAC it is made from (h1,
    /// 10.100.0.1, MAC 02:00:0a:64:00:01: fe80::aff:fe64:1), and only one the topology has;
    /// bound, it needs a scope id.
    #[test]
    fn link_local_addresses_name_their_hosts() {
        let h1 = Ipv4Addr::new(10, 100, 0, 1);
        let ll: Ipv6Addr = "fe80::aff:fe64:1".parse().unwrap();
        assert_eq!(link_local_of(h1), ll);
        let topo = |ip: Ipv4Addr| (ip == h1).then(|| conventional_mac(ip));
        assert_eq!(host_of_link_local(&ll, topo), Some(h1));
        let vm: Ipv6Addr = "fe80::aff:fe64:14".parse().unwrap();
        assert_eq!(host_of_link_local(&vm, topo), None);
        assert_eq!(host_of_link_local(&"fe80::1".parse().unwrap(), topo), None);
        assert!(is_link_local(&IpAddr::V6(ll)));
        assert!(!is_link_local(&"::ffff:10.100.0.1".parse().unwrap()));
        let bound = |s: &str| check_link_local(&s.parse().unwrap());
        assert_eq!(bound("[fe80::aff:fe64:1%2]:7471"), Ok(()));
        assert_eq!(bound("[fe80::aff:fe64:1]:7471"), Err(libc::EINVAL));
        assert_eq!(bound("10.100.0.1:7471"), Ok(()));
    }

    #[test]
    fn local_addresses_are_classified_like_the_kernel_does() {
        let host = Ipv4Addr::new(10, 100, 0, 1);
        let c = |s: &str| classify_local(s.parse().unwrap(), host);
        assert_eq!(c("0.0.0.0"), Ok(Local::Any));
        assert_eq!(c("::"), Ok(Local::Any));
        assert_eq!(c("10.100.0.1"), Ok(Local::Port));
        assert_eq!(c("::ffff:10.100.0.1"), Ok(Local::Port));
        assert_eq!(c("10.100.0.2"), Err(libc::EADDRNOTAVAIL));
        assert_eq!(c("fe80::aff:fe64:1"), Ok(Local::Port));
        assert_eq!(c("fe80::aff:fe64:2"), Err(libc::EADDRNOTAVAIL));
        assert_eq!(c("127.0.0.1"), Err(libc::ENODEV));
        assert_eq!(c("::1"), Err(libc::ENODEV));
        assert!(same_subnet(Ipv4Addr::new(10, 100, 0, 9), host));
        assert!(!same_subnet(Ipv4Addr::new(10, 101, 0, 1), host));
        assert_eq!(
            gid_of("10.100.0.1".parse().unwrap())[10..],
            [0xff, 0xff, 10, 100, 0, 1]
        );
    }
}
