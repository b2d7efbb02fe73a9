//! `rdma_getaddrinfo` and `rdma_freeaddrinfo` (librdmacm's addrinfo.c): the system's
//! `getaddrinfo` answer as a `struct rdma_addrinfo`, its QP type and port space from the
//! hints or the socket type, the address as source (`RAI_PASSIVE`) or destination.
//! Routes through ibacm are not looked up (no `ai_route`).

use std::ffi::{c_char, c_int};
use std::ptr::null_mut;

use crate::base::boundary::{boundary, MinusOne, Nothing};
use crate::base::ffi;
use crate::rdmacm::core::id_state::fail;
use crate::rdmacm::core::manager::cm;

/// Copies `len` bytes at `src` into new malloc'd memory (librdmacm's `ucma_copy_addr`).
fn copy_addr(src: *const libc::sockaddr, len: libc::socklen_t) -> *mut ffi::sockaddr {
    // SAFETY: malloc of the address's length; checked for NULL.
    let p = unsafe { libc::malloc(len as usize) };
    if !p.is_null() {
        // SAFETY: `src` holds `len` bytes (getaddrinfo's or the caller's address).
        unsafe { std::ptr::copy_nonoverlapping(src.cast::<u8>(), p.cast::<u8>(), len as usize) };
    }
    p.cast()
}

/// `rdma_getaddrinfo`: 0, or the `getaddrinfo` error (EAI_*), or -1 with errno.
///
/// # Safety
/// `node` and `service` are NULL or NUL-terminated; `hints` is NULL or valid; `res` is
/// valid for a write.
pub unsafe extern "C" fn rdma_getaddrinfo(
    node: *const c_char,
    service: *const c_char,
    hints: *const ffi::rdma_addrinfo,
    res: *mut *mut ffi::rdma_addrinfo,
) -> c_int {
    boundary(MinusOne, move || {
        if node.is_null() && service.is_null() && hints.is_null() {
            return fail(libc::EINVAL);
        }
        if let Err(e) = cm() {
            return fail(e);
        }
        if res.is_null() {
            return fail(libc::EINVAL);
        }
        let nohints = ffi::rdma_addrinfo::default();
        // SAFETY: the caller's valid hints, or our empty ones.
        let h = unsafe { hints.as_ref() }.unwrap_or(&nohints);
        // SAFETY: calloc of one struct; checked for NULL.
        let rai = unsafe { libc::calloc(1, std::mem::size_of::<ffi::rdma_addrinfo>()) }
            .cast::<ffi::rdma_addrinfo>();
        if rai.is_null() {
            return fail(libc::ENOMEM);
        }
        // SAFETY: the zeroed struct just allocated.
        let r = unsafe { &mut *rai };
        if !node.is_null() || !service.is_null() {
            let mut ai_hints: libc::addrinfo = unsafe_zeroed();
            if !hints.is_null() {
                if h.ai_flags & ffi::RAI_PASSIVE as c_int != 0 {
                    ai_hints.ai_flags = libc::AI_PASSIVE;
                }
                if h.ai_flags & ffi::RAI_NUMERICHOST as c_int != 0 {
                    ai_hints.ai_flags |= libc::AI_NUMERICHOST;
                }
                ai_hints.ai_family = h.ai_family;
                ai_hints.ai_socktype = match u32::try_from(h.ai_qp_type) {
                    Ok(ffi::IBV_QPT_RC | ffi::IBV_QPT_UC) => libc::SOCK_STREAM,
                    Ok(ffi::IBV_QPT_UD) => libc::SOCK_DGRAM,
                    _ => 0,
                };
                ai_hints.ai_protocol = match u32::try_from(h.ai_port_space) {
                    Ok(ffi::RDMA_PS_TCP) => libc::IPPROTO_TCP,
                    Ok(ffi::RDMA_PS_UDP | ffi::RDMA_PS_IPOIB) => libc::IPPROTO_UDP,
                    Ok(ffi::RDMA_PS_IB) if ai_hints.ai_socktype == libc::SOCK_STREAM => {
                        libc::IPPROTO_TCP
                    }
                    Ok(ffi::RDMA_PS_IB) if ai_hints.ai_socktype == libc::SOCK_DGRAM => {
                        libc::IPPROTO_UDP
                    }
                    _ => 0,
                };
            }
            let mut ai: *mut libc::addrinfo = null_mut();
            let hp = if hints.is_null() {
                std::ptr::null()
            } else {
                std::ptr::from_ref(&ai_hints)
            };
            // SAFETY: the caller's strings, our hints and out-pointer.
            let ret = unsafe { libc::getaddrinfo(node, service, hp, &mut ai) };
            if ret != 0 {
                // SAFETY: our zeroed struct, nothing in it yet.
                unsafe { libc::free(rai.cast()) };
                return ret;
            }
            // SAFETY: getaddrinfo's first answer.
            let a = unsafe { &*ai };
            r.ai_qp_type = if h.ai_qp_type != 0 {
                h.ai_qp_type
            } else {
                match a.ai_socktype {
                    libc::SOCK_STREAM => ffi::IBV_QPT_RC as c_int,
                    libc::SOCK_DGRAM => ffi::IBV_QPT_UD as c_int,
                    _ => 0,
                }
            };
            r.ai_port_space = if h.ai_port_space != 0 {
                h.ai_port_space
            } else {
                match a.ai_protocol {
                    libc::IPPROTO_TCP => ffi::RDMA_PS_TCP as c_int,
                    libc::IPPROTO_UDP => ffi::RDMA_PS_UDP as c_int,
                    _ => 0,
                }
            };
            r.ai_family = a.ai_family;
            let canon = if a.ai_canonname.is_null() {
                null_mut()
            } else {
                // SAFETY: getaddrinfo's NUL-terminated name.
                unsafe { libc::strdup(a.ai_canonname) }
            };
            let copy = copy_addr(a.ai_addr, a.ai_addrlen);
            if a.ai_flags & libc::AI_PASSIVE != 0 {
                r.ai_flags = ffi::RAI_PASSIVE as c_int;
                r.ai_src_canonname = canon;
                r.ai_src_addr = copy;
                r.ai_src_len = a.ai_addrlen;
            } else {
                r.ai_dst_canonname = canon;
                r.ai_dst_addr = copy;
                r.ai_dst_len = a.ai_addrlen;
            }
            // SAFETY: getaddrinfo's list, freed once.
            unsafe { libc::freeaddrinfo(ai) };
            if copy.is_null() {
                // SAFETY: our own list.
                unsafe { rdma_freeaddrinfo(rai) };
                return fail(libc::ENOMEM);
            }
        } else {
            r.ai_flags = h.ai_flags;
            r.ai_family = h.ai_family;
            r.ai_qp_type = h.ai_qp_type;
            r.ai_port_space = h.ai_port_space;
            if h.ai_dst_len != 0 {
                r.ai_dst_addr = copy_addr(h.ai_dst_addr.cast(), h.ai_dst_len);
                r.ai_dst_len = h.ai_dst_len;
            }
        }
        if r.ai_src_len == 0 && h.ai_src_len != 0 {
            r.ai_src_addr = copy_addr(h.ai_src_addr.cast(), h.ai_src_len);
            r.ai_src_len = h.ai_src_len;
        }
        // SAFETY: the caller's writable pointer.
        unsafe { res.write(rai) };
        0
    })
}

/// A zeroed `struct addrinfo` (all-zero is its empty value).
fn unsafe_zeroed() -> libc::addrinfo {
    // SAFETY: addrinfo is plain data; all zeros is a valid (empty) value.
    unsafe { std::mem::zeroed() }
}

/// `rdma_freeaddrinfo`: frees a list from `rdma_getaddrinfo`.
///
/// # Safety
/// `res` is NULL or came from `rdma_getaddrinfo` and is freed once.
pub unsafe extern "C" fn rdma_freeaddrinfo(mut res: *mut ffi::rdma_addrinfo) {
    boundary(Nothing, move || {
        while !res.is_null() {
            // SAFETY: a node of our list; each pointer in it came from malloc (or is NULL).
            unsafe {
                let r = &*res;
                let next = r.ai_next;
                for p in [
                    r.ai_connect,
                    r.ai_route,
                    r.ai_src_canonname.cast(),
                    r.ai_dst_canonname.cast(),
                    r.ai_src_addr.cast(),
                    r.ai_dst_addr.cast(),
                ] {
                    libc::free(p);
                }
                libc::free(res.cast());
                res = next;
            }
        }
    })
}
