//! The batched sender: `sendmmsg`, and runs of equal-sized packets as one GSO send.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;

use socket2::{SockAddr, SockRef};

use super::socket::{
    set_buffer, set_int_option, udp_socket, CONTROL_SPACE, GSO_MAX_BYTES, GSO_MAX_SEGMENTS,
    UDP_SEGMENT,
};

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
    pub(super) sock: UdpSocket,
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
