//! Event file descriptors: an eventfd in semaphore mode holds one count per event ready,
//! so programs can `poll`, `epoll` or `select` on it and a read takes one event. Completion
//! channels, a context's async events and the connection manager's event channels are such
//! descriptors.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// A new eventfd in semaphore mode (each read takes one count), close-on-exec.
pub fn semaphore_fd() -> io::Result<OwnedFd> {
    // SAFETY: eventfd takes no pointers; a negative return is checked below.
    let raw = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_SEMAPHORE) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// Adds one count to an eventfd (one event is ready).
pub fn signal(fd: &OwnedFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live u64 to our own eventfd.
    let n = unsafe {
        libc::write(
            fd.as_raw_fd(),
            std::ptr::from_ref(&one).cast(),
            std::mem::size_of::<u64>(),
        )
    };
    if n != 8 {
        eprintln!(
            "verbs-emu: cannot signal an event descriptor: {}",
            io::Error::last_os_error()
        );
    }
}

/// Takes one count from an eventfd if it has one, never waiting (whatever the program
/// set on the descriptor): true if it took one. A thread blocked in [`wait`] may take the
/// count first; then this one finds none.
pub fn try_take(fd: &OwnedFd) -> bool {
    let mut count: u64 = 0;
    let iov = libc::iovec {
        iov_base: std::ptr::from_mut(&mut count).cast(),
        iov_len: std::mem::size_of::<u64>(),
    };
    loop {
        // SAFETY: one iovec over a live u64; offset -1 reads at the current position, as
        // read(2) does; RWF_NOWAIT makes an eventfd at zero answer EAGAIN.
        let n = unsafe { libc::preadv2(fd.as_raw_fd(), &iov, 1, -1, libc::RWF_NOWAIT) };
        if n >= 0 {
            return true;
        }
        if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return false;
        }
    }
}

/// Takes one count from an eventfd: blocks while it is zero (unless the program made the
/// descriptor non-blocking: then EAGAIN). A signal whose handler was installed without
/// `SA_RESTART` ends the wait with EINTR, as it ends the one `read` (or `write`) of
/// rdma-core's `ibv_get_cq_event`, `ibv_get_async_event` (libibverbs/verbs.c) and
/// `rdma_get_cm_event` (librdmacm/cma.c), which do not retry: qperf's latency tests wait
/// in `ibv_get_cq_event` and count on its interval timer's SIGALRM to end that wait
/// when the test's time is over (its peer, whose time ran out first, sends nothing
/// more); with `SA_RESTART` the kernel restarts the read.
pub fn wait(fd: &OwnedFd) -> io::Result<()> {
    let mut count: u64 = 0;
    // SAFETY: reads at most 8 bytes into a live u64.
    let n = unsafe {
        libc::read(
            fd.as_raw_fd(),
            std::ptr::from_mut(&mut count).cast(),
            std::mem::size_of::<u64>(),
        )
    };
    if n >= 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}
