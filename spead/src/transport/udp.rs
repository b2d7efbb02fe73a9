//! UDP over kernel sockets: unicast and IPv4 multicast, batched with
//! `recvmmsg`/`sendmmsg` through libc (std and socket2 have neither); sockets, their
//! options and addresses through socket2.
//!
//! These types hold raw pointers for the batch calls, so they are not `Send`: create
//! them on the thread that uses them.
//!
//! The receiver sets SO_RXQ_OVFL, so the kernel attaches to each datagram the socket's
//! drop counter as it stood when the datagram was queued (datagrams the kernel dropped
//! because the receive buffer was full); [`UdpReceiver::kernel_drops`] is the count as
//! of the last datagram received.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::Duration;

use socket2::{Domain, SockAddr, SockRef, Socket, Type};

use crate::recv::sink::HeapSink;
use crate::recv::Stream;

/// Receiver settings (spead2 defaults: 8 MiB buffer, 9200-byte packets).
#[derive(Debug, Clone)]
pub struct UdpRecvConfig {
    /// Address to bind; a multicast group address joins that group.
    pub addr: SocketAddr,
    /// Socket receive buffer (SO_RCVBUF) in bytes.
    pub buffer_size: usize,
    /// Largest datagram accepted.
    pub max_packet_size: usize,
    /// Datagrams per `recvmmsg`.
    pub batch: usize,
    /// Interface address for multicast joins.
    pub interface: Option<Ipv4Addr>,
    /// Give up a blocking receive after this long (so callers can check for stop).
    pub read_timeout: Option<Duration>,
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
        }
    }
}

/// Sets a socket buffer size, forcing past `rmem_max`/`wmem_max` when permitted (as
/// spead2 does; socket2 has no call for the FORCE options).
fn set_buffer(sock: &UdpSocket, recv: bool, size: usize) -> io::Result<()> {
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
fn udp_socket(bind: SocketAddr, reuse: bool) -> io::Result<UdpSocket> {
    let sock = Socket::new(Domain::for_address(bind), Type::DGRAM, None)?;
    if reuse {
        sock.set_reuse_address(true)?;
    }
    sock.bind(&bind.into())?;
    Ok(sock.into())
}

/// Control-message space per datagram: one SO_RXQ_OVFL message (a `u32`), in `u64`
/// words so that the buffer is aligned for `cmsghdr`.
const CONTROL_WORDS: usize = 4;

/// Receives UDP datagrams in batches and feeds them to a [`Stream`].
#[derive(Debug)]
pub struct UdpReceiver {
    sock: UdpSocket,
    stride: usize,
    bufs: Vec<u8>,
    iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
    /// Each datagram's control buffer ([`CONTROL_WORDS`] words each).
    control: Vec<u64>,
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
        let one: libc::c_int = 1;
        // SAFETY: the fd is a live socket owned by `sock`; the option value points to a
        // c_int that outlives the call and its size is passed.
        let r = unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RXQ_OVFL,
                (&one as *const libc::c_int).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        let batch = config.batch.max(1);
        let stride = config.max_packet_size.max(64);
        Ok(Self {
            sock,
            stride,
            bufs: vec![0; stride * batch],
            // SAFETY: iovec and mmsghdr are plain old data; zeroed values are valid
            // and every pointer is set before use.
            iovs: (0..batch).map(|_| unsafe { zeroed() }).collect(),
            // SAFETY: as above.
            hdrs: (0..batch).map(|_| unsafe { zeroed() }).collect(),
            control: vec![0; batch * CONTROL_WORDS],
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
        // `self.control` (alive, CONTROL_WORDS words for this datagram) and msg_controllen
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
    /// datagrams; get them with [`Self::datagram`].
    ///
    /// # Errors
    /// Socket errors other than timeouts and interrupts.
    pub fn recv_batch(&mut self) -> io::Result<usize> {
        let batch = self.hdrs.len();
        let base = self.bufs.as_mut_ptr();
        let control = self.control.as_mut_ptr();
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
            // SAFETY: (i + 1) * CONTROL_WORDS <= control.len().
            h.msg_control = unsafe { control.add(i * CONTROL_WORDS) }.cast();
            h.msg_controllen = CONTROL_WORDS * size_of::<u64>();
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

    /// Datagram `i` of the last batch, or `None` if it was truncated.
    pub fn datagram(&self, i: usize) -> Option<&[u8]> {
        let h = &self.hdrs[i];
        if h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0 {
            return None;
        }
        let len = (h.msg_len as usize).min(self.stride);
        Some(&self.bufs[i * self.stride..i * self.stride + len])
    }

    /// Receives one batch into `stream`. Returns the number of datagrams.
    ///
    /// # Errors
    /// Socket errors.
    pub fn pump<H: HeapSink>(&mut self, stream: &mut Stream<H>) -> io::Result<usize> {
        let n = self.recv_batch()?;
        for i in 0..n {
            if stream.is_stopped() {
                break;
            }
            match self.datagram(i) {
                Some(d) => {
                    let _ = stream.add_datagram(d);
                }
                None => stream.stats_mut().packets_malformed += 1,
            }
        }
        stream.note_batch(n);
        Ok(n)
    }
}

/// Sender settings (spead2 defaults: 512 KiB buffer).
#[derive(Debug, Clone)]
pub struct UdpSendConfig {
    /// Destinations, one per substream.
    pub dests: Vec<SocketAddr>,
    /// Socket send buffer (SO_SNDBUF) in bytes.
    pub buffer_size: usize,
    /// TTL for multicast (and unicast) packets.
    pub ttl: Option<u32>,
    /// Interface address for multicast sends.
    pub interface: Option<Ipv4Addr>,
    /// Local address to bind.
    pub bind: Option<SocketAddr>,
}

impl UdpSendConfig {
    /// Defaults for the given destinations.
    pub fn new(dests: Vec<SocketAddr>) -> Self {
        Self {
            dests,
            buffer_size: 512 << 10,
            ttl: None,
            interface: None,
            bind: None,
        }
    }
}

/// Sends packets to one or more UDP destinations with `sendmmsg`.
#[derive(Debug)]
pub struct UdpSender {
    sock: UdpSocket,
    /// The destinations as the kernel takes them (IPv4 or IPv6).
    addrs: Vec<SockAddr>,
    iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
}

impl UdpSender {
    /// Opens the socket.
    ///
    /// # Errors
    /// Socket errors.
    pub fn new(config: &UdpSendConfig) -> io::Result<Self> {
        let v6 = config.dests.iter().any(SocketAddr::is_ipv6);
        let any = if v6 {
            SocketAddr::from((Ipv6Addr::UNSPECIFIED, 0))
        } else {
            SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0))
        };
        let sock = udp_socket(config.bind.unwrap_or(any), false)?;
        set_buffer(&sock, false, config.buffer_size)?;
        if let Some(ttl) = config.ttl {
            if !v6 {
                sock.set_multicast_ttl_v4(ttl)?;
            }
            sock.set_ttl(ttl)?;
        }
        if let Some(iface) = config.interface {
            SockRef::from(&sock).set_multicast_if_v4(&iface)?;
        }
        Ok(Self {
            sock,
            addrs: config.dests.iter().map(|&d| SockAddr::from(d)).collect(),
            iovs: Vec::new(),
            hdrs: Vec::new(),
        })
    }

    /// Number of destinations (substreams).
    pub fn substreams(&self) -> usize {
        self.addrs.len()
    }

    /// Sends packets, each to the destination of its substream index. Retries when
    /// the socket buffer is full.
    ///
    /// # Errors
    /// Socket errors, and `InvalidInput` (nothing sent) when a substream index is not
    /// below the number of destinations: as spead2, an index is never wrapped.
    pub fn send_batch(&mut self, packets: &[(&[u8], usize)]) -> io::Result<()> {
        if self.addrs.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "no destinations",
            ));
        }
        let nd = self.addrs.len();
        if let Some((_, sub)) = packets.iter().find(|(_, s)| *s >= nd) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("substream index {sub} is out of range for {nd} destinations"),
            ));
        }
        let n = packets.len();
        // SAFETY: plain old data; every pointer is set below before use.
        self.iovs.resize_with(n, || unsafe { zeroed() });
        // SAFETY: as above.
        self.hdrs.resize_with(n, || unsafe { zeroed() });
        for (i, (p, sub)) in packets.iter().enumerate() {
            self.iovs[i].iov_base = p.as_ptr() as *mut libc::c_void;
            self.iovs[i].iov_len = p.len();
            let h = &mut self.hdrs[i].msg_hdr;
            let to = &self.addrs[*sub];
            // sendmmsg only reads the name; the pointer is mutable in the C type only.
            h.msg_name = to.as_ptr().cast_mut().cast();
            h.msg_namelen = to.len();
            h.msg_iov = &mut self.iovs[i];
            h.msg_iovlen = 1;
            h.msg_control = std::ptr::null_mut();
            h.msg_controllen = 0;
            h.msg_flags = 0;
        }
        let mut done = 0;
        while done < n {
            // SAFETY: hdrs[done..n] are initialised; their iovecs point into
            // `packets` and their names into `addrs`, all alive for the call.
            let r = unsafe {
                libc::sendmmsg(
                    self.sock.as_raw_fd(),
                    self.hdrs[done..].as_mut_ptr(),
                    (n - done) as libc::c_uint,
                    0,
                )
            };
            if r < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::ENOBUFS | libc::EAGAIN | libc::EINTR) => {
                        std::thread::yield_now();
                        continue;
                    }
                    _ => return Err(e),
                }
            }
            done += r as usize;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recv::StreamConfig;
    use crate::send::{GroupMode, Heap, HeapGroup, HeapReference};
    use crate::wire::Flavour;

    #[test]
    fn loopback_round_trip() {
        round_trip("127.0.0.1:0");
    }

    #[test]
    fn ipv6_loopback_round_trip_through_sendmmsg() {
        round_trip("[::1]:0");
    }

    #[test]
    fn buffer_sizes_are_applied() {
        // Linux reports double what it granted; 64 KiB is within every default limit.
        let mut cfg = UdpRecvConfig::new("127.0.0.1:0".parse().unwrap());
        cfg.buffer_size = 64 << 10;
        let rx = UdpReceiver::bind(&cfg).unwrap();
        assert_eq!(
            SockRef::from(&rx.sock).recv_buffer_size().unwrap(),
            128 << 10
        );
        let mut send = UdpSendConfig::new(vec![rx.local_addr().unwrap()]);
        send.buffer_size = 64 << 10;
        let tx = UdpSender::new(&send).unwrap();
        assert_eq!(
            SockRef::from(&tx.sock).send_buffer_size().unwrap(),
            128 << 10
        );
    }

    fn round_trip(addr: &str) {
        let mut cfg = UdpRecvConfig::new(addr.parse().unwrap());
        cfg.buffer_size = 4 << 20;
        let mut rx = UdpReceiver::bind(&cfg).unwrap();
        let dest = rx.local_addr().unwrap();
        let mut tx = UdpSender::new(&UdpSendConfig::new(vec![dest])).unwrap();
        let mut h = Heap::new(Flavour::SPEAD_64_40);
        h.add_item(
            0x1000,
            (0..20000u32).map(|i| i as u8).collect::<Vec<_>>(),
            false,
        );
        let refs = [HeapReference {
            heap: &h,
            cnt: 7,
            substream: 0,
        }];
        let mut g = HeapGroup::new(&refs, 1472, GroupMode::Serial).unwrap();
        let mut bufs = Vec::new();
        let mut buf = vec![0u8; 1472];
        while let Some((len, _)) = g.next_packet(&mut buf).unwrap() {
            bufs.push(buf[..len].to_vec());
        }
        let batch: Vec<(&[u8], usize)> = bufs.iter().map(|b| (&b[..], 0)).collect();
        tx.send_batch(&batch).unwrap();
        let mut stream = Stream::new(StreamConfig::default());
        let mut got = 0;
        while got < bufs.len() {
            let n = rx.pump(&mut stream).unwrap();
            assert!(n > 0, "timed out");
            got += n;
        }
        let heap = stream.pop_heap().unwrap();
        assert!(heap.complete);
        assert_eq!(heap.cnt, 7);
        assert_eq!(heap.items()[0].bytes().len(), 20000);
    }
}
