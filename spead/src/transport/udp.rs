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

/// `linux/udp.h`: segment size for GSO sends (socket option and control message).
const UDP_SEGMENT: libc::c_int = 103;
/// `linux/udp.h`: receive coalesced datagrams (socket option; control message with
/// the segment size).
const UDP_GRO: libc::c_int = 104;
/// Most datagrams the kernel segments from one GSO send (`UDP_MAX_SEGMENTS`).
const GSO_MAX_SEGMENTS: usize = 64;
/// Most bytes in one GSO send or GRO buffer (an IPv4 datagram's largest payload).
const GSO_MAX_BYTES: usize = 65507;
/// Room for the control messages of one datagram buffer: UDP_GRO's segment size and
/// SO_RXQ_OVFL's drop counter (an int and a u32, each `CMSG_SPACE(4)` = 24 bytes).
const CONTROL_SPACE: usize = 64;
/// Datagram buffers per batch when GRO is on (each holds up to 64 KiB).
const GRO_BATCH: usize = 16;

/// Sets an int socket option; true if the kernel took it.
fn set_int_option(
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

/// Receives UDP datagrams in batches and feeds them to a [`Stream`].
#[derive(Debug)]
pub struct UdpReceiver {
    sock: UdpSocket,
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
    /// Hand the kernel runs of equal-sized packets for one destination as one buffer
    /// to segment (UDP_SEGMENT, Linux 4.18+): one trip through the stack per run
    /// instead of per packet. Dropped for good when the kernel or route refuses it.
    pub gso: bool,
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
            gso: true,
        }
    }
}

/// Sends packets to one or more UDP destinations with `sendmmsg`.
#[derive(Debug)]
pub struct UdpSender {
    sock: UdpSocket,
    /// The destinations as the kernel takes them (IPv4 or IPv6).
    addrs: Vec<SockAddr>,
    /// UDP_SEGMENT sends are in use (until the kernel refuses one).
    gso: bool,
    /// Per message: the packets it carries, `(first, count, segment size)`.
    runs: Vec<(usize, usize, usize)>,
    control: Vec<[u64; CONTROL_SPACE / 8]>,
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
        // Setting the socket's default segment size to 0 (none) succeeds exactly when
        // the kernel knows UDP_SEGMENT.
        let gso = config.gso && set_int_option(&sock, libc::SOL_UDP, UDP_SEGMENT, 0);
        Ok(Self {
            sock,
            addrs: config.dests.iter().map(|&d| SockAddr::from(d)).collect(),
            gso,
            runs: Vec::new(),
            control: Vec::new(),
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
        let mut first = 0;
        while first < packets.len() {
            match self.send_from(packets, first) {
                Ok(()) => return Ok(()),
                // The kernel or the route refused a segmented send (no GSO support,
                // segment larger than the path's MTU): send each packet alone from the
                // first unsent one, now and from now on.
                Err((sent_to, e)) if self.gso && gso_refused(&e) => {
                    self.gso = false;
                    first = sent_to;
                }
                Err((_, e)) => return Err(e),
            }
        }
        Ok(())
    }

    /// Groups `packets[first..]` into messages (runs of equal-sized packets adjacent in
    /// memory, for one destination, become one segmented message when GSO is on) and
    /// sends them. On failure, the index of the first packet not sent and the error.
    fn send_from(
        &mut self,
        packets: &[(&[u8], usize)],
        first: usize,
    ) -> Result<(), (usize, io::Error)> {
        self.runs.clear();
        let mut i = first;
        while i < packets.len() {
            let (p, sub) = packets[i];
            let segment = p.len();
            let (mut count, mut bytes) = (1, segment);
            if self.gso {
                while i + count < packets.len() && count < GSO_MAX_SEGMENTS {
                    let (q, qsub) = packets[i + count];
                    let adjacent = q.as_ptr() as usize == p.as_ptr() as usize + bytes;
                    // Only the last segment may be shorter.
                    let last_full = packets[i + count - 1].0.len() == segment;
                    if qsub != sub
                        || !adjacent
                        || !last_full
                        || q.len() > segment
                        || q.is_empty()
                        || bytes + q.len() > GSO_MAX_BYTES
                    {
                        break;
                    }
                    bytes += q.len();
                    count += 1;
                }
            }
            self.runs.push((i, count, segment));
            i += count;
        }
        let n = self.runs.len();
        // SAFETY: plain old data; every pointer is set below before use.
        self.iovs.resize_with(n, || unsafe { zeroed() });
        // SAFETY: as above.
        self.hdrs.resize_with(n, || unsafe { zeroed() });
        self.control.resize(n, [0; CONTROL_SPACE / 8]);
        for (m, &(start, count, segment)) in self.runs.iter().enumerate() {
            let (p, sub) = packets[start];
            let bytes: usize = packets[start..start + count]
                .iter()
                .map(|q| q.0.len())
                .sum();
            // The run's packets lie back to back from `p` (checked above).
            self.iovs[m].iov_base = p.as_ptr() as *mut libc::c_void;
            self.iovs[m].iov_len = bytes;
            let h = &mut self.hdrs[m].msg_hdr;
            let to = &self.addrs[sub];
            // sendmmsg only reads the name; the pointer is mutable in the C type only.
            h.msg_name = to.as_ptr().cast_mut().cast();
            h.msg_namelen = to.len();
            h.msg_iov = &mut self.iovs[m];
            h.msg_iovlen = 1;
            h.msg_flags = 0;
            if count > 1 {
                h.msg_control = self.control[m].as_mut_ptr().cast();
                h.msg_controllen = CONTROL_SPACE as _;
                let size = u16::try_from(segment).unwrap_or(u16::MAX);
                // SAFETY: the control buffer is CONTROL_SPACE (64) bytes, aligned for
                // cmsghdr, and msg_controllen says so, so CMSG_FIRSTHDR is non-null
                // and CMSG_SPACE(2) = 24 bytes fit; the u16 is written unaligned.
                unsafe {
                    let c = libc::CMSG_FIRSTHDR(h);
                    (*c).cmsg_level = libc::SOL_UDP;
                    (*c).cmsg_type = UDP_SEGMENT;
                    (*c).cmsg_len = libc::CMSG_LEN(size_of::<u16>() as u32) as _;
                    std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<u16>(), size);
                    h.msg_controllen = libc::CMSG_SPACE(size_of::<u16>() as u32) as _;
                }
            } else {
                h.msg_control = std::ptr::null_mut();
                h.msg_controllen = 0;
            }
        }
        let mut done = 0;
        while done < n {
            // SAFETY: hdrs[done..n] are initialised; their iovecs point into the
            // packets (each run's bytes back to back), their names into `addrs` and
            // their control messages into `control`, all alive for the call.
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
                    _ => return Err((self.runs[done].0, e)),
                }
            }
            done += r as usize;
        }
        Ok(())
    }
}

/// Errors with which the kernel refuses a segmented send it cannot do.
fn gso_refused(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EINVAL | libc::EIO | libc::EOPNOTSUPP | libc::EMSGSIZE | libc::ENOPROTOOPT)
    )
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

    /// A heap packetized into one buffer at a fixed stride, as `Sender` does: full
    /// packets back to back (a GSO run), the last one shorter.
    fn strided_heap(cnt: u64, len: usize, packet: usize) -> (Vec<u8>, Vec<usize>) {
        let mut h = Heap::new(Flavour::SPEAD_64_48);
        h.add_item(
            0x1000,
            (0..len).map(|i| (i * 3) as u8).collect::<Vec<_>>(),
            false,
        );
        let refs = [HeapReference {
            heap: &h,
            cnt,
            substream: 0,
        }];
        let mut g = HeapGroup::new(&refs, packet, GroupMode::Serial).unwrap();
        let mut buf = vec![0u8; packet * 256];
        let mut lens = Vec::new();
        while let Some((n, _)) = g
            .next_packet(&mut buf[lens.len() * packet..(lens.len() + 1) * packet])
            .unwrap()
        {
            lens.push(n);
        }
        (buf, lens)
    }

    fn receive_all(rx: &mut UdpReceiver, stream: &mut Stream, want: u64) {
        while stream.raw_stats().packets + stream.raw_stats().packets_malformed < want {
            let n = rx.pump(stream).unwrap();
            assert!(n > 0, "timed out");
        }
    }

    /// Runs of equal packets go out as segmented sends and may come back coalesced:
    /// the stream must see each datagram exactly once, whole, whether or not the
    /// kernel offers GSO and GRO, with the options on and off.
    #[test]
    fn segmented_sends_and_coalesced_receives_keep_every_datagram() {
        for (gso, gro) in [(true, true), (true, false), (false, true)] {
            let mut cfg = UdpRecvConfig::new("127.0.0.1:0".parse().unwrap());
            cfg.buffer_size = 4 << 20;
            cfg.gro = gro;
            let mut rx = UdpReceiver::bind(&cfg).unwrap();
            let mut send = UdpSendConfig::new(vec![rx.local_addr().unwrap()]);
            send.gso = gso;
            let mut tx = UdpSender::new(&send).unwrap();
            let (buf, lens) = strided_heap(3, 100_000, 1472);
            assert_eq!(lens.len(), 70);
            assert!(lens[..69].iter().all(|&n| n == 1472) && lens[69] < 1472);
            let batch: Vec<(&[u8], usize)> = lens
                .iter()
                .enumerate()
                .map(|(i, &n)| (&buf[i * 1472..i * 1472 + n], 0))
                .collect();
            tx.send_batch(&batch).unwrap();
            let mut stream = Stream::new(StreamConfig::default());
            receive_all(&mut rx, &mut stream, 70);
            let heap = stream.pop_heap().unwrap();
            assert!(heap.complete, "gso {gso} gro {gro}");
            assert_eq!(heap.cnt, 3);
            let want: Vec<u8> = (0..100_000).map(|i| (i * 3) as u8).collect();
            assert_eq!(heap.items()[0].bytes(), &want[..]);
            let st = stream.raw_stats();
            assert_eq!((st.packets, st.packets_malformed), (70, 0));
        }
    }

    /// With GRO the receive buffers are 64 KiB, but a datagram longer than
    /// `max_packet_size` is still refused (as a truncated one was), each one counted.
    #[test]
    fn datagrams_longer_than_the_maximum_are_malformed_with_gro() {
        let mut cfg = UdpRecvConfig::new("127.0.0.1:0".parse().unwrap());
        cfg.max_packet_size = 1000;
        let mut rx = UdpReceiver::bind(&cfg).unwrap();
        let mut tx = UdpSender::new(&UdpSendConfig::new(vec![rx.local_addr().unwrap()])).unwrap();
        // Four whole single-packet heaps of 1200 bytes on the wire, back to back.
        let f = Flavour::SPEAD_64_48;
        let payload = vec![7u8; 1160];
        let mut big = Vec::new();
        for cnt in 1..=4u64 {
            let pointers = [
                f.immediate(crate::wire::HEAP_CNT_ID, cnt),
                f.immediate(crate::wire::HEAP_LENGTH_ID, 1160),
                f.immediate(crate::wire::PAYLOAD_OFFSET_ID, 0),
                f.immediate(crate::wire::PAYLOAD_LENGTH_ID, 1160),
            ];
            big.extend(crate::wire::encode_packet(f, &pointers, &payload).unwrap());
        }
        assert_eq!(big.len(), 4 * 1200);
        let batch: Vec<(&[u8], usize)> = big.chunks(1200).map(|c| (c, 0)).collect();
        tx.send_batch(&batch).unwrap();
        let mut stream = Stream::new(StreamConfig::default());
        receive_all(&mut rx, &mut stream, 4);
        assert_eq!(stream.raw_stats().packets_malformed, 4);
        assert_eq!(stream.raw_stats().packets, 0);
        // The same datagrams within the maximum are four whole heaps.
        let mut cfg = UdpRecvConfig::new("127.0.0.1:0".parse().unwrap());
        cfg.max_packet_size = 1200;
        let mut rx = UdpReceiver::bind(&cfg).unwrap();
        let mut tx = UdpSender::new(&UdpSendConfig::new(vec![rx.local_addr().unwrap()])).unwrap();
        tx.send_batch(&batch).unwrap();
        let mut stream = Stream::new(StreamConfig::default());
        receive_all(&mut rx, &mut stream, 4);
        assert_eq!(stream.raw_stats().packets, 4);
        assert_eq!(stream.ready_len(), 4);
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
