//! UDP over kernel sockets: unicast and IPv4 multicast, batched with
//! `recvmmsg`/`sendmmsg` through libc (std has neither).
//!
//! These types hold raw pointers for the batch calls, so they are not `Send`: create
//! them on the thread that uses them.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd};
use std::time::Duration;

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

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn set_int_opt(
    sock: &UdpSocket,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: the fd is a live socket owned by `sock`; the option value points to a
    // c_int that outlives the call and its size is passed correctly.
    cvt(unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            level,
            name,
            (&value as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    })
    .map(drop)
}

fn get_int_opt(sock: &UdpSocket, level: libc::c_int, name: libc::c_int) -> io::Result<libc::c_int> {
    let mut value: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: value and len are valid for writes and len holds value's size.
    cvt(unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            level,
            name,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    })?;
    Ok(value)
}

/// Sets a socket buffer size, forcing past `rmem_max`/`wmem_max` when permitted.
fn set_buffer(sock: &UdpSocket, recv: bool, size: usize) -> io::Result<()> {
    let size = libc::c_int::try_from(size).unwrap_or(libc::c_int::MAX);
    let (opt, force) = if recv {
        (libc::SO_RCVBUF, libc::SO_RCVBUFFORCE)
    } else {
        (libc::SO_SNDBUF, libc::SO_SNDBUFFORCE)
    };
    set_int_opt(sock, libc::SOL_SOCKET, opt, size)?;
    // Linux reports double the requested size.
    if get_int_opt(sock, libc::SOL_SOCKET, opt)? < size {
        let _ = set_int_opt(sock, libc::SOL_SOCKET, force, size);
    }
    Ok(())
}

fn sockaddr_v4(addr: &SocketAddrV4) -> libc::sockaddr_in {
    // SAFETY: sockaddr_in is plain old data; all-zero is a valid value.
    let mut sa: libc::sockaddr_in = unsafe { zeroed() };
    sa.sin_family = libc::AF_INET as libc::sa_family_t;
    sa.sin_port = addr.port().to_be();
    sa.sin_addr = libc::in_addr {
        s_addr: u32::from(*addr.ip()).to_be(),
    };
    sa
}

/// An IPv4 UDP socket, optionally with SO_REUSEADDR set before bind (multicast).
fn udp_v4(bind: SocketAddrV4, reuse: bool) -> io::Result<UdpSocket> {
    // SAFETY: socket() has no memory preconditions.
    let fd = cvt(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: fd is a freshly created socket that nothing else owns.
    let sock = unsafe { UdpSocket::from_raw_fd(fd) };
    if reuse {
        set_int_opt(&sock, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
    }
    let sa = sockaddr_v4(&bind);
    // SAFETY: sa is a valid sockaddr_in and the length passed is its size.
    cvt(unsafe {
        libc::bind(
            sock.as_raw_fd(),
            (&sa as *const libc::sockaddr_in).cast(),
            size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    })?;
    Ok(sock)
}

/// Receives UDP datagrams in batches and feeds them to a [`Stream`].
#[derive(Debug)]
pub struct UdpReceiver {
    sock: UdpSocket,
    stride: usize,
    bufs: Vec<u8>,
    iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
}

impl UdpReceiver {
    /// Binds (and joins the group for a multicast address).
    ///
    /// # Errors
    /// Socket errors.
    pub fn bind(config: &UdpRecvConfig) -> io::Result<Self> {
        let sock = match config.addr {
            SocketAddr::V4(a) if a.ip().is_multicast() => {
                let s = udp_v4(a, true)?;
                s.join_multicast_v4(a.ip(), &config.interface.unwrap_or(Ipv4Addr::UNSPECIFIED))?;
                s
            }
            SocketAddr::V4(a) => udp_v4(a, false)?,
            SocketAddr::V6(_) => UdpSocket::bind(config.addr)?,
        };
        set_buffer(&sock, true, config.buffer_size)?;
        sock.set_read_timeout(config.read_timeout)?;
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
        })
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
            h.msg_control = std::ptr::null_mut();
            h.msg_controllen = 0;
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
    dests: Vec<SocketAddr>,
    addrs: Vec<libc::sockaddr_in>,
    iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
}

impl UdpSender {
    /// Opens the socket.
    ///
    /// # Errors
    /// Socket errors; IPv6 destinations are sent one `send_to` at a time.
    pub fn new(config: &UdpSendConfig) -> io::Result<Self> {
        let v6 = config.dests.iter().any(SocketAddr::is_ipv6);
        let sock = match (config.bind, v6) {
            (Some(b), _) => UdpSocket::bind(b)?,
            (None, false) => udp_v4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0), false)?,
            (None, true) => UdpSocket::bind("[::]:0")?,
        };
        set_buffer(&sock, false, config.buffer_size)?;
        if let Some(ttl) = config.ttl {
            if !v6 {
                sock.set_multicast_ttl_v4(ttl)?;
            }
            sock.set_ttl(ttl)?;
        }
        if let Some(iface) = config.interface {
            let addr = libc::in_addr {
                s_addr: u32::from(iface).to_be(),
            };
            // SAFETY: addr is a valid in_addr for IP_MULTICAST_IF and its size is passed.
            cvt(unsafe {
                libc::setsockopt(
                    sock.as_raw_fd(),
                    libc::IPPROTO_IP,
                    libc::IP_MULTICAST_IF,
                    (&addr as *const libc::in_addr).cast(),
                    size_of::<libc::in_addr>() as libc::socklen_t,
                )
            })?;
        }
        let addrs = config
            .dests
            .iter()
            .map(|d| match d {
                SocketAddr::V4(a) => sockaddr_v4(a),
                // SAFETY: plain old data; unused for IPv6 destinations.
                SocketAddr::V6(_) => unsafe { zeroed() },
            })
            .collect();
        Ok(Self {
            sock,
            dests: config.dests.clone(),
            addrs,
            iovs: Vec::new(),
            hdrs: Vec::new(),
        })
    }

    /// Number of destinations (substreams).
    pub fn substreams(&self) -> usize {
        self.dests.len()
    }

    /// Sends packets, each to the destination of its substream index. Retries when
    /// the socket buffer is full.
    ///
    /// # Errors
    /// Socket errors, and `InvalidInput` (nothing sent) when a substream index is not
    /// below the number of destinations: as spead2, an index is never wrapped.
    pub fn send_batch(&mut self, packets: &[(&[u8], usize)]) -> io::Result<()> {
        if self.dests.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "no destinations",
            ));
        }
        let nd = self.dests.len();
        if let Some((_, sub)) = packets.iter().find(|(_, s)| *s >= nd) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("substream index {sub} is out of range for {nd} destinations"),
            ));
        }
        if self.dests.iter().any(SocketAddr::is_ipv6) {
            for (p, sub) in packets {
                self.sock.send_to(p, self.dests[*sub])?;
            }
            return Ok(());
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
            h.msg_name = (&mut self.addrs[*sub] as *mut libc::sockaddr_in).cast();
            h.msg_namelen = size_of::<libc::sockaddr_in>() as libc::socklen_t;
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
        let mut cfg = UdpRecvConfig::new("127.0.0.1:0".parse().unwrap());
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
