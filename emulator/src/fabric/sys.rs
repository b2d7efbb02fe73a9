//! The system calls the fabric and its clients make, as safe functions: `SOCK_SEQPACKET`
//! Unix sockets (listen, accept, connect, send, receive), the peer's credentials
//! (`SO_PEERCRED`), descriptors passed along (`SCM_RIGHTS`), `ppoll`, a signalfd, and the
//! private run directory.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Takes ownership of a descriptor a call just returned.
fn owned(ret: libc::c_int) -> io::Result<OwnedFd> {
    let fd = check(ret)?;
    // SAFETY: `fd` is a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `sockaddr_un` for `path`.
///
/// # Errors
/// `InvalidInput` if the path does not fit `sun_path` or holds a NUL.
fn unix_addr(path: &Path) -> io::Result<(libc::sockaddr_un, libc::socklen_t)> {
    // SAFETY: sockaddr_un is plain data; all zeroes is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = path.as_os_str().as_bytes();
    if bytes.len() >= addr.sun_path.len() || bytes.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "socket path {} is longer than {} bytes or holds a NUL",
                path.display(),
                addr.sun_path.len() - 1
            ),
        ));
    }
    for (d, s) in addr.sun_path.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>() + bytes.len() + 1;
    Ok((addr, len as libc::socklen_t))
}

fn seqpacket(nonblocking: bool) -> io::Result<OwnedFd> {
    let flags = libc::SOCK_CLOEXEC | if nonblocking { libc::SOCK_NONBLOCK } else { 0 };
    // SAFETY: socket takes no pointers.
    owned(unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | flags, 0) })
}

/// A non-blocking `SOCK_SEQPACKET` socket listening at `path`, which only its owner may
/// use (mode 0600).
///
/// # Errors
/// The failing call's error.
pub fn listen(path: &Path) -> io::Result<OwnedFd> {
    let fd = seqpacket(true)?;
    let (addr, len) = unix_addr(path)?;
    // SAFETY: `addr` is a valid sockaddr_un of `len` bytes.
    check(unsafe { libc::bind(fd.as_raw_fd(), std::ptr::from_ref(&addr).cast(), len) })?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    // SAFETY: listen takes no pointers.
    check(unsafe { libc::listen(fd.as_raw_fd(), 64) })?;
    Ok(fd)
}

/// The next waiting connection, non-blocking; `None` when there is none.
///
/// # Errors
/// The error of `accept4` other than EAGAIN.
pub fn accept(listener: BorrowedFd<'_>) -> io::Result<Option<OwnedFd>> {
    // SAFETY: null address pointers are allowed (the peer's address is not wanted).
    let ret = unsafe {
        libc::accept4(
            listener.as_raw_fd(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
        )
    };
    match owned(ret) {
        Ok(fd) => Ok(Some(fd)),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
        Err(e) => Err(e),
    }
}

/// A blocking `SOCK_SEQPACKET` connection to the socket at `path`.
///
/// # Errors
/// The failing call's error.
pub fn connect(path: &Path) -> io::Result<OwnedFd> {
    let fd = seqpacket(false)?;
    let (addr, len) = unix_addr(path)?;
    // SAFETY: `addr` is a valid sockaddr_un of `len` bytes.
    check(unsafe { libc::connect(fd.as_raw_fd(), std::ptr::from_ref(&addr).cast(), len) })?;
    Ok(fd)
}

/// The user id of the process at the other end of a Unix socket.
///
/// # Errors
/// The error of `getsockopt(SO_PEERCRED)`.
pub fn peer_uid(fd: BorrowedFd<'_>) -> io::Result<u32> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are live and `len` is the size of `cred`.
    check(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            std::ptr::from_mut(&mut cred).cast(),
            &mut len,
        )
    })?;
    Ok(cred.uid)
}

/// This process's real user id.
#[must_use]
pub fn my_uid() -> u32 {
    // SAFETY: getuid takes nothing and cannot fail.
    unsafe { libc::getuid() }
}

/// Sends one message (never raises SIGPIPE: a gone peer is EPIPE). `nonblocking` makes a
/// full socket EAGAIN instead of a wait.
///
/// # Errors
/// The error of `send`.
pub fn send(fd: BorrowedFd<'_>, msg: &[u8], nonblocking: bool) -> io::Result<()> {
    let flags = libc::MSG_NOSIGNAL | if nonblocking { libc::MSG_DONTWAIT } else { 0 };
    loop {
        // SAFETY: `msg` is valid for `msg.len()` bytes.
        let n = unsafe { libc::send(fd.as_raw_fd(), msg.as_ptr().cast(), msg.len(), flags) };
        if n >= 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Says goodbye on a connection about to be closed: the peer may send nothing more
/// (`shutdown(SHUT_RD)`), and what it sent that was not read yet is read and dropped.
/// Closing a Unix socket with unread messages makes the peer's next `recv` fail with
/// ECONNRESET *before* it reads what was sent to it (`unix_release_sock` sets the peer's
/// error; `__skb_try_recv_datagram` reports it first), so without this a peer could
/// lose the error message that tells it why it was hung up on.
pub fn discard_unread(fd: BorrowedFd<'_>) {
    // SAFETY: shutdown takes a descriptor and a constant; a bad one is only an error.
    unsafe { libc::shutdown(fd.as_raw_fd(), libc::SHUT_RD) };
    let mut byte = [0u8; 1];
    // Bounded: after SHUT_RD the queue can only shrink.
    for _ in 0..4096 {
        match recv(fd, &mut byte) {
            Ok(Recv::Msg(_) | Recv::Truncated(_)) => {}
            _ => return,
        }
    }
}

/// What [`recv`] got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recv {
    /// A message of this many bytes (in the buffer).
    Msg(usize),
    /// A message longer than the buffer (its length): the rest is discarded.
    Truncated(usize),
    /// Nothing waiting.
    Empty,
    /// The peer hung up.
    Closed,
}

/// Receives one message without waiting.
///
/// # Errors
/// The error of `recv` other than EAGAIN.
pub fn recv(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<Recv> {
    loop {
        // SAFETY: `buf` is valid for writes of `buf.len()` bytes; MSG_TRUNC only makes the
        // call return the message's real length.
        let n = unsafe {
            libc::recv(
                fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT | libc::MSG_TRUNC,
            )
        };
        if n > 0 {
            let n = n.unsigned_abs();
            return Ok(if n > buf.len() {
                Recv::Truncated(n)
            } else {
                Recv::Msg(n)
            });
        }
        if n == 0 {
            // A zero-length message and a hang-up look alike: SEQPACKET peers of ours
            // never send empty messages, so treat it as the end.
            return Ok(Recv::Closed);
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::Interrupted => {}
            io::ErrorKind::WouldBlock => return Ok(Recv::Empty),
            io::ErrorKind::ConnectionReset => return Ok(Recv::Closed),
            _ => return Err(e),
        }
    }
}

/// Receives one message, waiting at most `timeout` for it.
///
/// # Errors
/// As [`recv`]; `TimedOut` when nothing came.
pub fn recv_wait(fd: BorrowedFd<'_>, buf: &mut [u8], timeout: Duration) -> io::Result<Recv> {
    let mut p = [libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    }];
    if poll(&mut p, Some(timeout))? == 0 {
        return Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("no answer in {} s", timeout.as_secs()),
        ));
    }
    recv(fd, buf)
}

/// Most descriptors one message carries.
pub const MAX_FDS: usize = 4;

/// Sends one message with a descriptor attached (`SCM_RIGHTS`), without waiting.
///
/// # Errors
/// The error of `sendmsg`.
pub fn send_with_fd(sock: BorrowedFd<'_>, msg: &[u8], fd: BorrowedFd<'_>) -> io::Result<()> {
    send_with_fds(sock, msg, &[fd])
}

/// Sends one message with up to [`MAX_FDS`] descriptors attached (`SCM_RIGHTS`), without
/// waiting.
///
/// # Errors
/// The error of `sendmsg`.
///
/// # Panics
/// More than [`MAX_FDS`] descriptors (the caller's bug).
pub fn send_with_fds(sock: BorrowedFd<'_>, msg: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
    assert!(
        (1..=MAX_FDS).contains(&fds.len()),
        "1 to {MAX_FDS} descriptors"
    );
    let mut iov = libc::iovec {
        iov_base: msg.as_ptr().cast_mut().cast(),
        iov_len: msg.len(),
    };
    // A control buffer for MAX_FDS descriptors, 8-aligned as cmsghdr needs.
    let mut control = [0u64; 6];
    let ints = (fds.len() * std::mem::size_of::<libc::c_int>()) as u32;
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(ints) } as usize;
    assert!(
        space <= std::mem::size_of_val(&control),
        "control buffer too small"
    );
    // SAFETY: msghdr is plain data; all zeroes is valid before the fields are set.
    let mut hdr: libc::msghdr = unsafe { std::mem::zeroed() };
    hdr.msg_iov = &mut iov;
    hdr.msg_iovlen = 1;
    hdr.msg_control = control.as_mut_ptr().cast();
    hdr.msg_controllen = space as _;
    // SAFETY: `hdr` points at a control buffer of `space` bytes, enough for one cmsghdr
    // with `fds.len()` ints, so CMSG_FIRSTHDR is non-null and its data area is inside the
    // buffer.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&hdr);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(ints) as _;
        let data = libc::CMSG_DATA(cmsg).cast::<libc::c_int>();
        for (i, fd) in fds.iter().enumerate() {
            std::ptr::write_unaligned(data.add(i), fd.as_raw_fd());
        }
    }
    loop {
        // SAFETY: `hdr` and everything it points at are live for the call.
        let n = unsafe {
            libc::sendmsg(
                sock.as_raw_fd(),
                &hdr,
                libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
            )
        };
        if n >= 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Receives one message and the descriptor attached to it, if any, waiting at most
/// `timeout`. Descriptors beyond the first are closed.
///
/// # Errors
/// The error of `ppoll` or `recvmsg`; `TimedOut` when nothing came.
pub fn recv_with_fd(
    sock: BorrowedFd<'_>,
    buf: &mut [u8],
    timeout: Duration,
) -> io::Result<(Recv, Option<OwnedFd>)> {
    let mut p = [pollin(sock.as_raw_fd())];
    if poll(&mut p, Some(timeout))? == 0 {
        return Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("no answer in {} s", timeout.as_secs()),
        ));
    }
    let (got, fds) = recv_fds(sock, buf)?;
    Ok((got, fds.into_iter().next()))
}

/// Receives one message and the descriptors attached to it, without waiting.
///
/// # Errors
/// The error of `recvmsg` other than EAGAIN.
pub fn recv_fds(sock: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<(Recv, Vec<OwnedFd>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut control = [0u64; 16];
    // SAFETY: msghdr is plain data; all zeroes is valid before the fields are set.
    let mut hdr: libc::msghdr = unsafe { std::mem::zeroed() };
    hdr.msg_iov = &mut iov;
    hdr.msg_iovlen = 1;
    hdr.msg_control = control.as_mut_ptr().cast();
    hdr.msg_controllen = std::mem::size_of_val(&control) as _;
    let n = loop {
        // SAFETY: `hdr` points at live buffers of the sizes it gives.
        let n = unsafe {
            libc::recvmsg(
                sock.as_raw_fd(),
                &mut hdr,
                libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC,
            )
        };
        if n >= 0 {
            break n.unsigned_abs();
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::Interrupted => {}
            io::ErrorKind::WouldBlock => return Ok((Recv::Empty, Vec::new())),
            io::ErrorKind::ConnectionReset => return Ok((Recv::Closed, Vec::new())),
            _ => return Err(e),
        }
    };
    let mut passed = Vec::new();
    // SAFETY: the kernel filled `control` and set `msg_controllen`; the CMSG macros walk
    // only inside it, and each SCM_RIGHTS payload holds whole ints, each a new descriptor
    // of ours.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&hdr);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg).cast::<libc::c_int>();
                let bytes = (*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                for i in 0..bytes / std::mem::size_of::<libc::c_int>() {
                    passed.push(OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(i))));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&hdr, cmsg);
        }
    }
    let got = if n == 0 {
        Recv::Closed
    } else if hdr.msg_flags & libc::MSG_TRUNC != 0 {
        Recv::Truncated(n)
    } else {
        Recv::Msg(n)
    };
    Ok((got, passed))
}

/// A new non-blocking eventfd: the wake-up a process rings for another when it puts
/// frames in their shared ring.
///
/// # Errors
/// The error of `eventfd`.
pub fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: eventfd takes no pointers.
    let raw = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// Rings an eventfd (best effort: a counter at its maximum is readable already).
pub fn ring_event(fd: BorrowedFd<'_>) {
    let one = 1u64;
    // SAFETY: writes 8 bytes from a live u64.
    let _ = unsafe { libc::write(fd.as_raw_fd(), std::ptr::from_ref(&one).cast(), 8) };
}

/// Clears a non-blocking eventfd that rang (nothing if it did not).
pub fn clear_event(fd: BorrowedFd<'_>) {
    let mut n = 0u64;
    // SAFETY: reads at most 8 bytes into a live u64.
    let _ = unsafe { libc::read(fd.as_raw_fd(), std::ptr::from_mut(&mut n).cast(), 8) };
}

/// `ppoll` on `fds` for at most `timeout` (`None`: until one is ready); retries after
/// EINTR with the same timeout. Returns how many descriptors are ready.
///
/// # Errors
/// The error of `ppoll`.
pub fn poll(fds: &mut [libc::pollfd], timeout: Option<Duration>) -> io::Result<usize> {
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: libc::time_t::try_from(t.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: libc::c_long::from(t.subsec_nanos() as i32),
    });
    let tsp = ts.as_ref().map_or(std::ptr::null(), std::ptr::from_ref);
    loop {
        // SAFETY: `fds` is valid for `fds.len()` entries; `tsp` is null or a live timespec;
        // a null signal mask keeps the current one.
        let n = unsafe {
            libc::ppoll(
                fds.as_mut_ptr(),
                fds.len() as libc::nfds_t,
                tsp,
                std::ptr::null(),
            )
        };
        if n >= 0 {
            return Ok(n.unsigned_abs() as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// True if the peer of a connected socket has hung up (whatever it left unread).
#[must_use]
pub fn hung_up(fd: BorrowedFd<'_>) -> bool {
    let mut p = [libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLRDHUP,
        revents: 0,
    }];
    poll(&mut p, Some(Duration::ZERO))
        .is_ok_and(|_| p[0].revents & (libc::POLLHUP | libc::POLLRDHUP | libc::POLLERR) != 0)
}

/// A poll entry waiting for input on `fd`.
#[must_use]
pub fn pollin(fd: RawFd) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}

/// Blocks SIGTERM, SIGINT and SIGHUP for this thread (and the threads it starts) and
/// returns a signalfd that becomes readable when one arrives: a stop request the event
/// loop polls like any descriptor.
///
/// # Errors
/// The error of `sigprocmask` or `signalfd`.
pub fn stop_signals() -> io::Result<OwnedFd> {
    // SAFETY: sigset_t is plain data; sigemptyset initialises it before use.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a live sigset_t; the signal numbers are valid.
    unsafe {
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGHUP);
    }
    // SAFETY: `set` is initialised; the old mask is not wanted (null).
    check(unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) })?;
    // SAFETY: -1 asks for a new descriptor; `set` is initialised.
    owned(unsafe { libc::signalfd(-1, &set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK) })
}

/// A directory only this user may enter (mode 0700), made fresh at `path`: it must not
/// exist yet, so nobody can have prepared it.
///
/// # Errors
/// The error of `mkdir` (`AlreadyExists` included), or a check that fails.
pub fn private_dir(path: &Path) -> io::Result<()> {
    std::fs::DirBuilder::new().mode(0o700).create(path)?;
    let meta = std::fs::symlink_metadata(path)?;
    if !meta.is_dir() || meta.uid() != my_uid() || meta.mode() & 0o077 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{} is not a private directory of ours", path.display()),
        ));
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))?;
    Ok(())
}

/// Where the fabric makes its run directory by default: `$XDG_RUNTIME_DIR`, else the
/// system's temporary directory.
#[must_use]
pub fn runtime_root() -> PathBuf {
    std::env::var_os("XDG_RUNTIME_DIR")
        .filter(|d| !d.is_empty())
        .map_or_else(std::env::temp_dir, PathBuf::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    fn temp_dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("verbs-emu-sys-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    /// A new private directory with a socket listening in it: (directory, socket path,
    /// listener).
    fn listening(tag: &str) -> (PathBuf, PathBuf, OwnedFd) {
        let d = temp_dir(tag);
        private_dir(&d).unwrap();
        let path = d.join("s");
        let l = listen(&path).unwrap();
        (d, path, l)
    }

    /// A connection to `path` and its other end, accepted from `l`: (client, server).
    fn connected(l: &OwnedFd, path: &Path) -> (OwnedFd, OwnedFd) {
        let c = connect(path).unwrap();
        let s = accept(l.as_fd()).unwrap().unwrap();
        (c, s)
    }

    #[test]
    fn a_private_dir_is_0700_and_must_be_new() {
        let d = temp_dir("priv");
        private_dir(&d).unwrap();
        let m = std::fs::metadata(&d).unwrap();
        assert_eq!(m.mode() & 0o777, 0o700);
        assert_eq!(
            private_dir(&d).unwrap_err().kind(),
            io::ErrorKind::AlreadyExists
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn seqpacket_keeps_message_boundaries_and_reports_truncation() {
        let (d, path, l) = listening("sock");
        assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
        assert!(accept(l.as_fd()).unwrap().is_none());
        let (c, s) = connected(&l, &path);
        assert_eq!(peer_uid(s.as_fd()).unwrap(), my_uid());
        send(c.as_fd(), b"one", false).unwrap();
        send(c.as_fd(), b"second", false).unwrap();
        send(c.as_fd(), &[9u8; 100], false).unwrap();
        let mut buf = [0u8; 16];
        assert_eq!(recv(s.as_fd(), &mut buf).unwrap(), Recv::Msg(3));
        assert_eq!(&buf[..3], b"one");
        assert_eq!(
            recv_wait(s.as_fd(), &mut buf, Duration::from_secs(5)).unwrap(),
            Recv::Msg(6)
        );
        assert_eq!(recv(s.as_fd(), &mut buf).unwrap(), Recv::Truncated(100));
        assert_eq!(recv(s.as_fd(), &mut buf).unwrap(), Recv::Empty);
        assert!(!hung_up(s.as_fd()));
        send(c.as_fd(), b"left behind", false).unwrap();
        drop(c);
        assert!(hung_up(s.as_fd()));
        assert_eq!(recv(s.as_fd(), &mut buf).unwrap(), Recv::Msg(11));
        assert_eq!(recv(s.as_fd(), &mut buf).unwrap(), Recv::Closed);
        assert_eq!(
            send(s.as_fd(), b"x", true).unwrap_err().kind(),
            io::ErrorKind::BrokenPipe
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_goodbye_reaches_a_peer_whose_messages_were_not_read() {
        let (d, path, l) = listening("bye");
        let mut buf = [0u8; 16];
        // Closed with the peer's message unread, the goodbye is lost: the peer's recv
        // fails with ECONNRESET first (what `discard_unread` is for).
        let (c, s) = connected(&l, &path);
        send(c.as_fd(), b"unread", false).unwrap();
        send(s.as_fd(), b"bye", false).unwrap();
        drop(s);
        assert_eq!(recv(c.as_fd(), &mut buf).unwrap(), Recv::Closed);
        // With `discard_unread` first, the peer reads the goodbye, then the end, and
        // cannot send any more.
        let (c, s) = connected(&l, &path);
        send(c.as_fd(), b"unread", false).unwrap();
        send(s.as_fd(), b"bye", false).unwrap();
        discard_unread(s.as_fd());
        assert_eq!(
            send(c.as_fd(), b"more", true).unwrap_err().kind(),
            io::ErrorKind::BrokenPipe
        );
        drop(s);
        assert_eq!(recv(c.as_fd(), &mut buf).unwrap(), Recv::Msg(3));
        assert_eq!(&buf[..3], b"bye");
        assert_eq!(recv(c.as_fd(), &mut buf).unwrap(), Recv::Closed);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_descriptor_travels_with_a_message() {
        let (d, path, l) = listening("fd");
        let (c, s) = connected(&l, &path);
        let file = std::fs::File::create(d.join("passed")).unwrap();
        send_with_fd(s.as_fd(), b"here", file.as_fd()).unwrap();
        let mut buf = [0u8; 16];
        let (got, fd) = recv_with_fd(c.as_fd(), &mut buf, Duration::from_secs(5)).unwrap();
        assert_eq!(got, Recv::Msg(4));
        let fd = fd.unwrap();
        assert_ne!(fd.as_raw_fd(), file.as_raw_fd());
        // The same open file.
        let got = std::fs::File::from(fd).metadata().unwrap();
        assert_eq!(got.ino(), file.metadata().unwrap().ino());
        send(s.as_fd(), b"plain", false).unwrap();
        let (got, fd) = recv_with_fd(c.as_fd(), &mut buf, Duration::from_secs(5)).unwrap();
        assert_eq!((got, fd.is_none()), (Recv::Msg(5), true));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_long_socket_path_is_refused() {
        let long = PathBuf::from(format!("/tmp/{}", "x".repeat(200)));
        let e = listen(&long).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }
}
