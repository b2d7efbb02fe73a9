//! The system calls the launcher needs that std has no wrapper for: namespaces, mounts,
//! descriptors passed over a Unix socket, file locks and signals.

use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

fn cstr(s: &OsStr) -> io::Result<CString> {
    CString::new(s.as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

fn check(ret: libc::c_int) -> io::Result<()> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `unshare(2)`: moves the calling thread into new namespaces of the `CLONE_NEW*` kinds in
/// `flags`.
pub fn unshare(flags: libc::c_int) -> io::Result<()> {
    // SAFETY: unshare takes flags only; the launcher and the holder call it while they
    // have one thread.
    check(unsafe { libc::unshare(flags) })
}

/// `setns(2)`: joins the namespace `fd` refers to (of kind `nstype`).
pub fn setns(fd: BorrowedFd<'_>, nstype: libc::c_int) -> io::Result<()> {
    // SAFETY: a live descriptor and a namespace kind; no pointers.
    check(unsafe { libc::setns(fd.as_raw_fd(), nstype) })
}

/// A descriptor of the calling thread's network namespace (it keeps the namespace alive).
pub fn current_netns() -> io::Result<OwnedFd> {
    Ok(std::fs::File::open("/proc/thread-self/ns/net")?.into())
}

/// A descriptor of the calling process's user namespace.
pub fn current_userns() -> io::Result<OwnedFd> {
    Ok(std::fs::File::open("/proc/self/ns/user")?.into())
}

/// Maps uid 0 and gid 0 of the (new) user namespace of this process to `uid` and `gid`
/// outside, as `unshare --map-root-user` does: the only mapping an unprivileged process
/// may write.
pub fn map_root_to(uid: u32, gid: u32) -> io::Result<()> {
    map_to(0, 0, uid, gid)
}

/// Maps `uid` and `gid` of the (new) user namespace of this process to `outer_uid` and
/// `outer_gid` of its parent: the process's own ids there, the one mapping it may write.
pub fn map_to(uid: u32, gid: u32, outer_uid: u32, outer_gid: u32) -> io::Result<()> {
    std::fs::write("/proc/self/setgroups", "deny")?;
    std::fs::write("/proc/self/uid_map", format!("{uid} {outer_uid} 1"))?;
    std::fs::write("/proc/self/gid_map", format!("{gid} {outer_gid} 1"))?;
    Ok(())
}

/// `mount(2)`.
pub fn mount(
    source: Option<&Path>,
    target: &Path,
    fstype: Option<&str>,
    flags: libc::c_ulong,
    data: Option<&str>,
) -> io::Result<()> {
    let source = source.map(|s| cstr(s.as_os_str())).transpose()?;
    let target = cstr(target.as_os_str())?;
    let fstype = fstype.map(|s| cstr(OsStr::new(s))).transpose()?;
    let data = data.map(|s| cstr(OsStr::new(s))).transpose()?;
    let p = |c: &Option<CString>| c.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
    // SAFETY: NUL-terminated strings (or null where mount allows it) that outlive the call.
    check(unsafe {
        libc::mount(
            p(&source),
            target.as_ptr(),
            p(&fstype),
            flags,
            p(&data).cast::<libc::c_void>(),
        )
    })
}

/// A bind mount of `source` on `target` (with the mounts below `source`).
pub fn bind(source: &Path, target: &Path) -> io::Result<()> {
    mount(
        Some(source),
        target,
        None,
        libc::MS_BIND | libc::MS_REC,
        None,
    )
}

/// The mount points of a `/proc/self/mountinfo` text (its fifth field, with the kernel's
/// octal escapes of space, tab, newline and backslash undone), in its order.
pub fn mount_points(mountinfo: &str) -> Vec<PathBuf> {
    mountinfo
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|field| {
            let mut out = Vec::with_capacity(field.len());
            let b = field.as_bytes();
            let mut i = 0;
            while i < b.len() {
                let octal = b.get(i + 1..i + 4).and_then(|d| {
                    std::str::from_utf8(d)
                        .ok()
                        .and_then(|d| u8::from_str_radix(d, 8).ok())
                });
                match (b[i], octal) {
                    (b'\\', Some(c)) => {
                        out.push(c);
                        i += 4;
                    }
                    (c, _) => {
                        out.push(c);
                        i += 1;
                    }
                }
            }
            PathBuf::from(std::ffi::OsString::from_vec(out))
        })
        .collect()
}

/// `umount2(target, MNT_DETACH)`.
pub fn detach(target: &Path) -> io::Result<()> {
    let target = cstr(target.as_os_str())?;
    // SAFETY: a NUL-terminated path that outlives the call.
    check(unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) })
}

/// Opens `path` as an `O_PATH` directory descriptor: its contents stay reachable through
/// `/proc/self/fd/N` after something is mounted over it.
pub fn open_dir_path(path: &Path) -> io::Result<OwnedFd> {
    let c = cstr(path.as_os_str())?;
    // SAFETY: a NUL-terminated path; the result is checked before it is owned.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: open returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `flock(fd, LOCK_EX)`, or with `LOCK_NB` when `wait` is false (then `Ok(false)` when
/// another holds it).
pub fn lock_exclusive(fd: BorrowedFd<'_>, wait: bool) -> io::Result<bool> {
    let op = if wait {
        libc::LOCK_EX
    } else {
        libc::LOCK_EX | libc::LOCK_NB
    };
    // SAFETY: a live descriptor and an operation; no pointers.
    match check(unsafe { libc::flock(fd.as_raw_fd(), op) }) {
        Ok(()) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::EWOULDBLOCK) => Ok(false),
        Err(e) => Err(e),
    }
}

/// `flock(fd, LOCK_UN)`.
pub fn unlock(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: a live descriptor and an operation; no pointers.
    check(unsafe { libc::flock(fd.as_raw_fd(), libc::LOCK_UN) })
}

/// Sends `data` with the descriptors `fds` attached (`SCM_RIGHTS`).
pub fn send_with_fds(sock: &UnixStream, data: &[u8], fds: &[RawFd]) -> io::Result<()> {
    let fd_bytes = std::mem::size_of_val(fds);
    let fd_len =
        u32::try_from(fd_bytes).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: CMSG_SPACE computes a size from a length; no memory is touched.
    let space = unsafe { libc::CMSG_SPACE(fd_len) } as usize;
    let mut control = vec![0u8; if fds.is_empty() { 0 } else { space }];
    let mut iov = libc::iovec {
        iov_base: data.as_ptr().cast_mut().cast::<libc::c_void>(),
        iov_len: data.len(),
    };
    // SAFETY: an all-zero msghdr is valid (no name, no control); fields are set below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if !fds.is_empty() {
        msg.msg_control = control.as_mut_ptr().cast::<libc::c_void>();
        msg.msg_controllen = control.len();
        // SAFETY: msg_control points at `space` bytes, room for one header and the
        // descriptors; CMSG_FIRSTHDR gives its start, CMSG_DATA the data after the
        // header, and the copy writes exactly `fd_bytes` there.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(fd_len) as usize;
            std::ptr::copy_nonoverlapping(
                fds.as_ptr().cast::<u8>(),
                libc::CMSG_DATA(cmsg),
                fd_bytes,
            );
        }
    }
    // SAFETY: msg points at the live iovec and control buffer above.
    let n = unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
    match usize::try_from(n) {
        Ok(n) if n == data.len() => Ok(()),
        Ok(_) => Err(io::Error::new(io::ErrorKind::WriteZero, "short send")),
        Err(_) => Err(io::Error::last_os_error()),
    }
}

/// Receives up to `buf.len()` bytes and the descriptors attached to them (at most 8).
pub fn recv_with_fds(sock: &UnixStream, buf: &mut [u8]) -> io::Result<(usize, Vec<OwnedFd>)> {
    const MAX_FDS: u32 = 8;
    let fd_size = u32::try_from(std::mem::size_of::<RawFd>()).unwrap_or(4);
    // SAFETY: CMSG_SPACE computes a size from a length; no memory is touched.
    let space = unsafe { libc::CMSG_SPACE(MAX_FDS * fd_size) } as usize;
    let mut control = vec![0u8; space];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast::<libc::c_void>(),
        iov_len: buf.len(),
    };
    // SAFETY: an all-zero msghdr is valid; fields are set below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast::<libc::c_void>();
    msg.msg_controllen = control.len();
    // SAFETY: msg points at the live buffer and control area above.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
    let n = usize::try_from(n).map_err(|_| io::Error::last_os_error())?;
    let mut fds = Vec::new();
    // SAFETY: the kernel filled msg_control with msg_controllen bytes of headers; the
    // CMSG_* macros walk them within that length, and each SCM_RIGHTS header holds
    // (cmsg_len - CMSG_LEN(0)) / sizeof(int) descriptors, now ours.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg).cast::<RawFd>();
                let len = (*cmsg).cmsg_len - libc::CMSG_LEN(0) as usize;
                for i in 0..len / std::mem::size_of::<RawFd>() {
                    fds.push(OwnedFd::from_raw_fd(data.add(i).read_unaligned()));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
    }
    Ok((n, fds))
}

/// The signals the launcher forwards to its command.
pub const FORWARDED: [libc::c_int; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

/// Blocks [`FORWARDED`] and SIGCHLD and returns a signalfd that reads them. A child
/// inherits the mask: it calls [`unblock_all`] before it runs its program.
pub fn signals() -> io::Result<OwnedFd> {
    // SAFETY: sigset_t is plain data that sigemptyset initialises.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a live sigset_t; the signal numbers are valid.
    unsafe {
        libc::sigemptyset(&mut set);
        for s in FORWARDED.iter().chain(&[libc::SIGCHLD]) {
            libc::sigaddset(&mut set, *s);
        }
    }
    // SAFETY: `set` is initialised; the old mask is not asked for.
    let r = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if r != 0 {
        return Err(io::Error::from_raw_os_error(r));
    }
    // SAFETY: -1 asks for a new descriptor; `set` is initialised.
    let fd = unsafe { libc::signalfd(-1, &set, libc::SFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: signalfd returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Unblocks every signal of the calling thread (async-signal-safe: for a child between
/// fork and exec).
pub fn unblock_all() -> io::Result<()> {
    // SAFETY: sigset_t is plain data that sigemptyset initialises.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a live sigset_t; the old mask is not asked for.
    let r = unsafe {
        libc::sigemptyset(&mut set);
        libc::pthread_sigmask(libc::SIG_SETMASK, &set, std::ptr::null_mut())
    };
    if r != 0 {
        return Err(io::Error::from_raw_os_error(r));
    }
    Ok(())
}

/// One signal read from a signalfd: its number and whether the kernel sent it (a
/// terminal's Ctrl-C or Ctrl-\, which reaches the whole foreground process group).
pub fn read_signal(fd: BorrowedFd<'_>) -> io::Result<(libc::c_int, bool)> {
    // SAFETY: signalfd_siginfo is plain data.
    let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::signalfd_siginfo>();
    // SAFETY: `info` is valid for `size` bytes.
    let n = unsafe {
        libc::read(
            fd.as_raw_fd(),
            std::ptr::addr_of_mut!(info).cast::<libc::c_void>(),
            size,
        )
    };
    if usize::try_from(n).ok() != Some(size) {
        return Err(io::Error::last_os_error());
    }
    let signo = libc::c_int::try_from(info.ssi_signo).unwrap_or(0);
    Ok((signo, info.ssi_code == libc::SI_KERNEL))
}

/// Sends `sig` to process `pid`.
pub fn kill(pid: u32, sig: libc::c_int) -> io::Result<()> {
    let pid =
        libc::pid_t::try_from(pid).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: kill takes numbers only.
    check(unsafe { libc::kill(pid, sig) })
}

/// Asks the kernel to send `sig` to the calling process when its parent (thread) dies.
pub fn die_with_parent(sig: libc::c_int) -> io::Result<()> {
    // SAFETY: PR_SET_PDEATHSIG takes a signal number and no pointers.
    check(unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::c_ulong::try_from(sig).unwrap_or(0),
        )
    })
}

/// `setpgid(0, 0)`: a process group of its own, away from the terminal's foreground
/// group (whose Ctrl-C would stop the fabric under later launchers). Not a session of its
/// own: with autogroup scheduling a session is scheduled as one group, and with the
/// fabric in a session of its own `ibv_rc_pingpong` between two hosts timed out on a
/// loaded two-core machine in 7 runs of 7 (in none of 7 without).
pub fn own_process_group() -> io::Result<()> {
    // SAFETY: numbers only.
    check(unsafe { libc::setpgid(0, 0) })
}

/// `poll(2)` on `fds` (descriptor, events); returns the events seen on each.
pub fn poll(
    fds: &[(RawFd, libc::c_short)],
    timeout_ms: libc::c_int,
) -> io::Result<Vec<libc::c_short>> {
    let mut p: Vec<libc::pollfd> = fds
        .iter()
        .map(|&(fd, events)| libc::pollfd {
            fd,
            events,
            revents: 0,
        })
        .collect();
    let n = libc::nfds_t::try_from(p.len())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    loop {
        // SAFETY: `p` holds `n` pollfd entries.
        let r = unsafe { libc::poll(p.as_mut_ptr(), n, timeout_ms) };
        if r >= 0 {
            return Ok(p.iter().map(|x| x.revents).collect());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// The effective user and group ids.
pub fn ids() -> (u32, u32) {
    // SAFETY: geteuid and getegid cannot fail.
    unsafe { (libc::geteuid(), libc::getegid()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_points_are_the_fifth_field_unescaped() {
        let info = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/vda rw
35 22 0:5 / /dev rw,nosuid shared:2 - devtmpfs udev rw
61 22 0:50 / /mnt/with\\040space\\134x rw - tmpfs tmpfs rw
";
        assert_eq!(
            mount_points(info),
            vec![
                PathBuf::from("/"),
                PathBuf::from("/dev"),
                PathBuf::from("/mnt/with space\\x"),
            ]
        );
    }
}
