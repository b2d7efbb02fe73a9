//! The rest of librdmacm: rsockets (`rsocket`, `rsend` ... except `rpoll` and `rselect`,
//! which poll ordinary descriptors as librdmacm's do), SRQs on ids, `rdma_notify` and ECE
//! have no model: each fails with EOPNOTSUPP and says so once on stderr.
//! (`rdma_destroy_ep`, `rdma_destroy_srq` and `rdma_get_request`, which work on what the
//! other calls made, are in [`super::endpoint`].)

use std::ffi::{c_int, c_void};

use crate::base::boundary::{boundary, MinusOne, WithErrno};
use crate::base::ffi;
use crate::verbs::unsupported::refuse;

macro_rules! refused {
    ($($(#[$doc:meta])* $name:ident($($arg:ident: $t:ty),*) -> $ret:ty = $err:expr;)*) => {$(
        $(#[$doc])*
        pub extern "C" fn $name($($arg: $t),*) -> $ret {
            $(let _ = $arg;)*
            boundary(WithErrno($err), || {
            refuse(stringify!($name));
            $err
            })
        }
    )*};
}

refused! {
    /// `rsocket`.
    rsocket(domain: c_int, kind: c_int, protocol: c_int) -> c_int = -1;
    /// `rbind`.
    rbind(s: c_int, addr: *const libc::sockaddr, len: libc::socklen_t) -> c_int = -1;
    /// `rlisten`.
    rlisten(s: c_int, backlog: c_int) -> c_int = -1;
    /// `raccept`.
    raccept(s: c_int, addr: *mut libc::sockaddr, len: *mut libc::socklen_t) -> c_int = -1;
    /// `rconnect`.
    rconnect(s: c_int, addr: *const libc::sockaddr, len: libc::socklen_t) -> c_int = -1;
    /// `rshutdown`.
    rshutdown(s: c_int, how: c_int) -> c_int = -1;
    /// `rclose`.
    rclose(s: c_int) -> c_int = -1;
    /// `rrecv`.
    rrecv(s: c_int, buf: *mut c_void, len: usize, flags: c_int) -> isize = -1;
    /// `rrecvfrom`.
    rrecvfrom(s: c_int, buf: *mut c_void, len: usize, flags: c_int, addr: *mut libc::sockaddr, alen: *mut libc::socklen_t) -> isize = -1;
    /// `rrecvmsg`.
    rrecvmsg(s: c_int, msg: *mut libc::msghdr, flags: c_int) -> isize = -1;
    /// `rsend`.
    rsend(s: c_int, buf: *const c_void, len: usize, flags: c_int) -> isize = -1;
    /// `rsendto`.
    rsendto(s: c_int, buf: *const c_void, len: usize, flags: c_int, addr: *const libc::sockaddr, alen: libc::socklen_t) -> isize = -1;
    /// `rsendmsg`.
    rsendmsg(s: c_int, msg: *const libc::msghdr, flags: c_int) -> isize = -1;
    /// `rread`.
    rread(s: c_int, buf: *mut c_void, count: usize) -> isize = -1;
    /// `rreadv`.
    rreadv(s: c_int, iov: *const libc::iovec, n: c_int) -> isize = -1;
    /// `rwrite`.
    rwrite(s: c_int, buf: *const c_void, count: usize) -> isize = -1;
    /// `rwritev`.
    rwritev(s: c_int, iov: *const libc::iovec, n: c_int) -> isize = -1;
    /// `rgetpeername`.
    rgetpeername(s: c_int, addr: *mut libc::sockaddr, len: *mut libc::socklen_t) -> c_int = -1;
    /// `rgetsockname`.
    rgetsockname(s: c_int, addr: *mut libc::sockaddr, len: *mut libc::socklen_t) -> c_int = -1;
    /// `rsetsockopt`.
    rsetsockopt(s: c_int, level: c_int, name: c_int, val: *const c_void, len: libc::socklen_t) -> c_int = -1;
    /// `rgetsockopt`.
    rgetsockopt(s: c_int, level: c_int, name: c_int, val: *mut c_void, len: *mut libc::socklen_t) -> c_int = -1;
    /// `rfcntl` (variadic in C; its one optional argument arrives as the third register).
    rfcntl(s: c_int, cmd: c_int, arg: usize) -> c_int = -1;
    /// `riomap`.
    riomap(s: c_int, buf: *mut c_void, len: usize, prot: c_int, flags: c_int, offset: libc::off_t) -> libc::off_t = -1;
    /// `riounmap`.
    riounmap(s: c_int, buf: *mut c_void, len: usize) -> c_int = -1;
    /// `riowrite`.
    riowrite(s: c_int, buf: *const c_void, count: usize, offset: libc::off_t, flags: c_int) -> usize = usize::MAX;
    /// `rdma_create_srq`.
    rdma_create_srq(id: *mut ffi::rdma_cm_id, pd: *mut ffi::ibv_pd, attr: *mut ffi::ibv_srq_init_attr) -> c_int = -1;
    /// `rdma_create_srq_ex`.
    rdma_create_srq_ex(id: *mut ffi::rdma_cm_id, attr: *mut ffi::ibv_srq_init_attr_ex) -> c_int = -1;
    /// `rdma_notify`.
    rdma_notify(id: *mut ffi::rdma_cm_id, event: ffi::ibv_event_type) -> c_int = -1;
    /// `rdma_set_local_ece`.
    rdma_set_local_ece(id: *mut ffi::rdma_cm_id, ece: *mut ffi::ibv_ece) -> c_int = -1;
    /// `rdma_get_remote_ece`.
    rdma_get_remote_ece(id: *mut ffi::rdma_cm_id, ece: *mut ffi::ibv_ece) -> c_int = -1;
}

/// `rpoll`: with no rsockets, `poll` on the descriptors (what librdmacm does for
/// descriptors that are not rsockets).
///
/// # Safety
/// `fds` is valid for `nfds` entries.
pub unsafe extern "C" fn rpoll(
    fds: *mut libc::pollfd,
    nfds: libc::nfds_t,
    timeout: c_int,
) -> c_int {
    boundary(MinusOne, move || {
        // SAFETY: forwards the caller's array.
        unsafe { libc::poll(fds, nfds, timeout) }
    })
}

/// `rselect`: `select` on ordinary descriptors.
///
/// # Safety
/// The sets are NULL or valid; `timeout` is NULL or valid.
pub unsafe extern "C" fn rselect(
    nfds: c_int,
    readfds: *mut libc::fd_set,
    writefds: *mut libc::fd_set,
    exceptfds: *mut libc::fd_set,
    timeout: *mut libc::timeval,
) -> c_int {
    boundary(MinusOne, move || {
        // SAFETY: forwards the caller's sets.
        unsafe { libc::select(nfds, readfds, writefds, exceptfds, timeout) }
    })
}
