//! What the receiver and the sender share: Linux's UDP socket options and opening a
//! socket.

use std::io;
use std::mem::size_of;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;

use socket2::{Domain, SockRef, Socket, Type};

/// `linux/udp.h`: segment size for GSO sends (socket option and control message).
pub(super) const UDP_SEGMENT: libc::c_int = 103;
/// `linux/udp.h`: receive coalesced datagrams (socket option; control message with
/// the segment size).
pub(super) const UDP_GRO: libc::c_int = 104;
/// Most datagrams the kernel segments from one GSO send (`UDP_MAX_SEGMENTS`).
pub(super) const GSO_MAX_SEGMENTS: usize = 64;
/// Most bytes in one GSO send or GRO buffer (an IPv4 datagram's largest payload).
pub(super) const GSO_MAX_BYTES: usize = 65507;
/// Room for the control messages of one datagram buffer: UDP_GRO's segment size and
/// SO_RXQ_OVFL's drop counter (an int and a u32, each `CMSG_SPACE(4)` = 24 bytes).
pub(super) const CONTROL_SPACE: usize = 64;
/// Datagram buffers per batch when GRO is on (each holds up to 64 KiB).
pub(super) const GRO_BATCH: usize = 16;

/// Sets an int socket option; true if the kernel took it.
pub(super) fn set_int_option(
    sock: &UdpSocket,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> bool {
    // SAFETY: the fd is a live socket owned by `sock`; the value points to a c_int
    // that outlives the call and its size is passed.
    unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            level,
            name,
            (&value as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        ) == 0
    }
}

/// Sets a socket buffer size, forcing past `rmem_max`/`wmem_max` when permitted (as
/// spead2 does; socket2 has no call for the FORCE options).
pub(super) fn set_buffer(sock: &UdpSocket, recv: bool, size: usize) -> io::Result<()> {
    let s = SockRef::from(sock);
    let (got, force) = if recv {
        s.set_recv_buffer_size(size)?;
        (s.recv_buffer_size()?, libc::SO_RCVBUFFORCE)
    } else {
        s.set_send_buffer_size(size)?;
        (s.send_buffer_size()?, libc::SO_SNDBUFFORCE)
    };
    // Linux reports double the size granted; less than asked means the limit applied.
    if got < size {
        let value = libc::c_int::try_from(size).unwrap_or(libc::c_int::MAX);
        // SAFETY: the fd is a live socket owned by `sock`; the option value points to
        // a c_int that outlives the call and its size is passed. Failure (without
        // CAP_NET_ADMIN) leaves the size the kernel granted, which is what we want.
        let _ = unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                force,
                (&value as *const libc::c_int).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
    }
    Ok(())
}

/// A UDP socket bound to `bind`, with SO_REUSEADDR set before the bind if `reuse`
/// (several receivers of one multicast group).
pub(super) fn udp_socket(bind: SocketAddr, reuse: bool) -> io::Result<UdpSocket> {
    let sock = Socket::new(Domain::for_address(bind), Type::DGRAM, None)?;
    if reuse {
        sock.set_reuse_address(true)?;
    }
    sock.bind(&bind.into())?;
    Ok(sock.into())
}
