//! The batched receiver: `recvmmsg`, GRO buffers split back into datagrams, and the
//! kernel's drop counter.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::Duration;

use crate::recv::sink::HeapSink;
use crate::recv::Stream;

use super::socket::{
    set_buffer, set_int_option, udp_socket, CONTROL_SPACE, GRO_BATCH, GSO_MAX_BYTES, UDP_GRO,
};

/// Receiver settings (spead2 defaults: 8 MiB buffer, 9200-byte packets).
#[derive(Debug, Clone)]
pub struct UdpRecvConfig {
    /// Address to bind; a multicast group address joins that group.
    pub addr: SocketAddr,
    /// Socket receive buffer (SO_RCVBUF) in bytes.
    pub buffer_size: usize,
    /// Largest datagram accepted.
    pub max_packet_size: usize,
    /// Buffers per `recvmmsg`: one datagram each, or with GRO at most 16 buffers of up
    /// to 64 KiB of coalesced datagrams each.
    pub batch: usize,
    /// Interface address for multicast joins.
    pub interface: Option<Ipv4Addr>,
    /// Give up a blocking receive after this long (so callers can check for stop).
    pub read_timeout: Option<Duration>,
    /// Let the kernel coalesce datagrams of one flow (UDP_GRO, Linux 5.0+; a no-op
    /// where the kernel refuses it). Each coalesced buffer is split back into its
    /// datagrams, so the stream sees exactly the datagrams that were sent.
    pub gro: bool,
}

impl UdpRecvConfig {
    /// Defaults for `addr`.
    pub fn new(addr: SocketAddr) -> Self {
        Self {
            addr,
            buffer_size: 8 << 20,
            max_packet_size: 9200,
            batch: 64,
            interface: None,
            read_timeout: Some(Duration::from_millis(100)),
            gro: true,
        }
    }
}

/// Receives UDP datagrams in batches and feeds them to a [`Stream`].
#[derive(Debug)]
pub struct UdpReceiver {
    pub(super) sock: UdpSocket,
    stride: usize,
    /// Largest datagram accepted (longer ones are counted as malformed).
    max_packet_size: usize,
    /// UDP_GRO is on: a buffer may hold several datagrams.
    gro: bool,
    bufs: Vec<u8>,
    /// One control message buffer per datagram buffer (u64 for cmsghdr alignment).
    control: Vec<[u64; CONTROL_SPACE / 8]>,
    iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
    /// The kernel's last reported drop counter (it is a wrapping `u32`).
    last_drops: u32,
    /// Kernel drops seen so far, unwrapped.
    kernel_drops: u64,
}

impl UdpReceiver {
    /// Binds (and joins the group for a multicast address).
    ///
    /// # Errors
    /// Socket errors.
    pub fn bind(config: &UdpRecvConfig) -> io::Result<Self> {
        let sock = match config.addr {
            SocketAddr::V4(a) if a.ip().is_multicast() => {
                let s = udp_socket(config.addr, true)?;
                s.join_multicast_v4(a.ip(), &config.interface.unwrap_or(Ipv4Addr::UNSPECIFIED))?;
                s
            }
            addr => udp_socket(addr, false)?,
        };
        set_buffer(&sock, true, config.buffer_size)?;
        sock.set_read_timeout(config.read_timeout)?;
        if !set_int_option(&sock, libc::SOL_SOCKET, libc::SO_RXQ_OVFL, 1) {
            return Err(io::Error::last_os_error());
        }
        let max_packet_size = config.max_packet_size.max(64);
        let gro = config.gro && set_int_option(&sock, libc::SOL_UDP, UDP_GRO, 1);
        let (batch, stride) = if gro {
            (
                config.batch.clamp(1, GRO_BATCH),
                GSO_MAX_BYTES.max(max_packet_size),
            )
        } else {
            (config.batch.max(1), max_packet_size)
        };
        Ok(Self {
            sock,
            stride,
            max_packet_size,
            gro,
            bufs: vec![0; stride * batch],
            control: vec![[0; CONTROL_SPACE / 8]; batch],
            // SAFETY: iovec and mmsghdr are plain old data; zeroed values are valid
            // and every pointer is set before use.
            iovs: (0..batch).map(|_| unsafe { zeroed() }).collect(),
            // SAFETY: as above.
            hdrs: (0..batch).map(|_| unsafe { zeroed() }).collect(),
            last_drops: 0,
            kernel_drops: 0,
        })
    }

    /// Datagrams the kernel dropped for this socket (its receive buffer was full), as of
    /// the last datagram received: the kernel reports its counter with each datagram
    /// (SO_RXQ_OVFL), so drops after the last one received show with the next.
    pub fn kernel_drops(&self) -> u64 {
        self.kernel_drops
    }

    /// Reads the SO_RXQ_OVFL counter from datagram `i`'s control messages.
    fn note_drops(&mut self, i: usize) {
        let h = &self.hdrs[i].msg_hdr;
        // SAFETY: `h` is a header the kernel filled by recvmmsg: msg_control points into
        // `self.control[i]` (alive, CONTROL_SPACE bytes) and msg_controllen
        // is what the kernel wrote there; CMSG_FIRSTHDR/NXTHDR stay inside that length
        // and CMSG_DATA of an SO_RXQ_OVFL message holds a u32 (read unaligned).
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(h);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SO_RXQ_OVFL {
                    let v = libc::CMSG_DATA(c).cast::<u32>().read_unaligned();
                    self.kernel_drops += u64::from(v.wrapping_sub(self.last_drops));
                    self.last_drops = v;
                }
                c = libc::CMSG_NXTHDR(h, c);
            }
        }
    }

    /// The bound local address.
    ///
    /// # Errors
    /// Socket errors.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.local_addr()
    }

    /// Receives one batch (blocking up to the read timeout). Returns the number of
    /// buffers; get them with [`Self::message`].
    ///
    /// # Errors
    /// Socket errors other than timeouts and interrupts.
    pub fn recv_batch(&mut self) -> io::Result<usize> {
        let batch = self.hdrs.len();
        let base = self.bufs.as_mut_ptr();
        for i in 0..batch {
            // SAFETY: i * stride + stride <= bufs.len(), so the pointer stays inside
            // the buffer.
            self.iovs[i].iov_base = unsafe { base.add(i * self.stride) }.cast();
            self.iovs[i].iov_len = self.stride;
            let h = &mut self.hdrs[i].msg_hdr;
            h.msg_name = std::ptr::null_mut();
            h.msg_namelen = 0;
            h.msg_iov = &mut self.iovs[i];
            h.msg_iovlen = 1;
            // Every datagram may carry SO_RXQ_OVFL's counter, and with GRO its segment size.
            h.msg_control = self.control[i].as_mut_ptr().cast();
            h.msg_controllen = CONTROL_SPACE as _;
            h.msg_flags = 0;
            self.hdrs[i].msg_len = 0;
        }
        // SAFETY: hdrs holds `batch` initialised headers whose iovecs point into
        // `bufs`, which outlives the call; no timeout pointer is passed.
        let r = unsafe {
            libc::recvmmsg(
                self.sock.as_raw_fd(),
                self.hdrs.as_mut_ptr(),
                batch as libc::c_uint,
                libc::MSG_WAITFORONE,
                std::ptr::null_mut(),
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock
                | io::ErrorKind::TimedOut
                | io::ErrorKind::Interrupted => Ok(0),
                _ => Err(e),
            };
        }
        for i in 0..r as usize {
            self.note_drops(i);
        }
        Ok(r as usize)
    }

    /// Buffer `i` of the last batch and the size of the datagrams in it (with GRO a
    /// buffer holds datagrams of that size back to back, the last possibly shorter;
    /// without, one datagram), or `None` if it was truncated.
    pub fn message(&self, i: usize) -> Option<(&[u8], usize)> {
        let h = &self.hdrs[i];
        if h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0 {
            return None;
        }
        let len = (h.msg_len as usize).min(self.stride);
        let data = &self.bufs[i * self.stride..i * self.stride + len];
        let segment = if self.gro {
            self.gro_segment(i).unwrap_or(len)
        } else {
            len
        };
        Some((data, segment.max(1)))
    }

    /// The UDP_GRO segment size the kernel reported for buffer `i`, if any.
    fn gro_segment(&self, i: usize) -> Option<usize> {
        let hdr = &self.hdrs[i].msg_hdr;
        if hdr.msg_controllen == 0 {
            return None;
        }
        // SAFETY: `hdr` is the header recvmmsg filled: its control pointer and length
        // describe `self.control[i]`, which the kernel wrote and which lives as long
        // as `self`; CMSG_FIRSTHDR/CMSG_NXTHDR stay within that length and CMSG_DATA
        // of a message of at least CMSG_LEN(int) bytes holds an int (read unaligned).
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(hdr);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_UDP
                    && (*c).cmsg_type == UDP_GRO
                    && (*c).cmsg_len as usize
                        >= libc::CMSG_LEN(size_of::<libc::c_int>() as u32) as usize
                {
                    let v = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>());
                    return usize::try_from(v).ok().filter(|&v| v > 0);
                }
                c = libc::CMSG_NXTHDR(hdr, c);
            }
        }
        None
    }

    /// Receives one batch into `stream`. Returns the number of datagrams.
    ///
    /// # Errors
    /// Socket errors.
    pub fn pump<H: HeapSink>(&mut self, stream: &mut Stream<H>) -> io::Result<usize> {
        let n = self.recv_batch()?;
        let mut datagrams = 0;
        'batch: for i in 0..n {
            match self.message(i) {
                Some((data, segment)) => {
                    for d in data.chunks(segment) {
                        if stream.is_stopped() {
                            break 'batch;
                        }
                        datagrams += 1;
                        if d.len() > self.max_packet_size {
                            stream.stats_mut().packets_malformed += 1;
                        } else {
                            let _ = stream.add_datagram(d);
                        }
                    }
                }
                None => {
                    datagrams += 1;
                    stream.stats_mut().packets_malformed += 1;
                }
            }
        }
        stream.note_batch(datagrams);
        Ok(datagrams)
    }
}
