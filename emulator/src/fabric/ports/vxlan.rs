//! A VXLAN port (RFC 7348): each Ethernet frame (no FCS) travels in one UDP datagram
//! after an 8-byte header: a flags byte with the I bit (0x08) set, 24 reserved bits, the
//! 24-bit VXLAN network identifier (VNI) and 8 reserved bits. The fabric binds `local`
//! and sends every frame to `remote`; it takes datagrams from any source (as Linux's
//! `vxlan` does), keeps those with the I bit and its VNI and counts the rest as
//! malformed. Reserved bits are sent as zero and ignored on receipt (RFC 7348 section
//! 5).

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};

/// Length of the VXLAN header.
pub const HEADER_LEN: usize = 8;
/// The flags byte: the I bit (a valid VNI follows).
pub const FLAG_I: u8 = 0x08;
/// The IANA-assigned UDP port of VXLAN.
pub const UDP_PORT: u16 = 4789;
/// The socket's send and receive buffers (as far as the system allows): what a burst
/// from the peer may fill while the fabric is busy before the kernel drops datagrams.
pub const SOCKET_BUFFER: libc::c_int = 16 << 20;
/// Shortest inner frame taken: an Ethernet header.
const MIN_INNER: usize = 14;

/// Why a datagram is not a frame of this port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Malformed {
    /// Shorter than the header and an Ethernet header.
    Short(usize),
    /// The I flag is clear.
    NoVni,
    /// Another network's VNI.
    OtherVni(u32),
    /// The inner frame is longer than the port accepts.
    TooLong(usize),
}

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Malformed::Short(n) => write!(f, "a datagram of {n} bytes is too short"),
            Malformed::NoVni => write!(f, "the I flag is clear"),
            Malformed::OtherVni(v) => write!(f, "VNI {v} is another network's"),
            Malformed::TooLong(n) => write!(f, "an inner frame of {n} bytes is too long"),
        }
    }
}

/// Writes the datagram carrying `frame` in network `vni` into `out` (cleared first).
pub fn encapsulate(vni: u32, frame: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let v = vni.to_be_bytes();
    out.extend_from_slice(&[FLAG_I, 0, 0, 0, v[1], v[2], v[3], 0]);
    out.extend_from_slice(frame);
}

/// The inner frame of `datagram` if it is one of network `vni` of at most `max_frame`
/// bytes.
///
/// # Errors
/// What is wrong with it.
pub fn decapsulate(vni: u32, max_frame: usize, datagram: &[u8]) -> Result<&[u8], Malformed> {
    if datagram.len() < HEADER_LEN + MIN_INNER {
        return Err(Malformed::Short(datagram.len()));
    }
    if datagram[0] & FLAG_I == 0 {
        return Err(Malformed::NoVni);
    }
    let got = u32::from_be_bytes([0, datagram[4], datagram[5], datagram[6]]);
    if got != vni {
        return Err(Malformed::OtherVni(got));
    }
    let inner = &datagram[HEADER_LEN..];
    if inner.len() > max_frame {
        return Err(Malformed::TooLong(inner.len()));
    }
    Ok(inner)
}

/// The socket of a VXLAN port.
#[derive(Debug)]
pub struct Vxlan {
    socket: UdpSocket,
    remote: SocketAddr,
    vni: u32,
    out: Vec<u8>,
}

impl Vxlan {
    /// Binds `local` (non-blocking, with buffers of [`SOCKET_BUFFER`] bytes; IPv4 datagrams may be
    /// fragmented, as Linux's `vxlan` sends them without DF by default).
    ///
    /// # Errors
    /// The bind fails.
    pub fn bind(local: SocketAddr, remote: SocketAddr, vni: u32) -> io::Result<Self> {
        let socket = UdpSocket::bind(local)?;
        socket.set_nonblocking(true)?;
        let fd = socket.as_raw_fd();
        for (force, opt) in [
            (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
            (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
        ] {
            // Beyond the system's maximum with CAP_NET_ADMIN; else up to it.
            if !set_int(fd, libc::SOL_SOCKET, force, SOCKET_BUFFER) {
                set_int(fd, libc::SOL_SOCKET, opt, SOCKET_BUFFER);
            }
        }
        if local.is_ipv4() {
            set_int(
                fd,
                libc::IPPROTO_IP,
                libc::IP_MTU_DISCOVER,
                libc::IP_PMTUDISC_DONT,
            );
        }
        Ok(Vxlan {
            socket,
            remote,
            vni,
            out: Vec::with_capacity(9100),
        })
    }

    /// The socket, for polling.
    #[must_use]
    pub fn fd(&self) -> RawFd {
        self.socket.as_raw_fd()
    }

    /// The address bound.
    ///
    /// # Errors
    /// As `getsockname`.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    /// The network identifier.
    #[must_use]
    pub fn vni(&self) -> u32 {
        self.vni
    }

    /// Sends `frame` to the remote.
    ///
    /// # Errors
    /// The send fails (a full socket buffer: `WouldBlock`; no peer listening yet:
    /// `ConnectionRefused` from an earlier datagram's ICMP error).
    pub fn send(&mut self, frame: &[u8]) -> io::Result<()> {
        encapsulate(self.vni, frame, &mut self.out);
        self.socket.send_to(&self.out, self.remote).map(|_| ())
    }

    /// Receives one datagram into `buf`; `None` when none waits.
    ///
    /// # Errors
    /// The receive fails otherwise.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Option<usize>> {
        loop {
            match self.socket.recv_from(buf) {
                Ok((n, _)) => return Ok(Some(n)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(None),
                // An ICMP error for an earlier send (the peer not up yet): not ours to
                // stop on.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

/// Sets an integer socket option; false if refused.
fn set_int(fd: RawFd, level: libc::c_int, opt: libc::c_int, value: libc::c_int) -> bool {
    // SAFETY: `value` lives across the call and its size is passed; `fd` is an open socket.
    unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            std::ptr::addr_of!(value).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        ) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(len: usize) -> Vec<u8> {
        (0..len).map(|i| i as u8).collect()
    }

    #[test]
    fn the_header_is_rfc_7348s() {
        let mut out = Vec::new();
        encapsulate(0x12_3456, &frame(60), &mut out);
        assert_eq!(out[..8], [0x08, 0, 0, 0, 0x12, 0x34, 0x56, 0]);
        assert_eq!(out[8..], frame(60)[..]);
        assert_eq!(decapsulate(0x12_3456, 9014, &out), Ok(&frame(60)[..]));
    }

    #[test]
    fn malformed_datagrams_are_named() {
        let mut out = Vec::new();
        encapsulate(42, &frame(14), &mut out);
        assert_eq!(decapsulate(42, 9014, &out).map(<[u8]>::len), Ok(14));
        assert_eq!(decapsulate(42, 9014, &out[..21]), Err(Malformed::Short(21)));
        assert_eq!(decapsulate(43, 9014, &out), Err(Malformed::OtherVni(42)));
        let mut no_i = out.clone();
        no_i[0] = 0;
        assert_eq!(decapsulate(42, 9014, &no_i), Err(Malformed::NoVni));
        // Reserved bits are ignored on receipt.
        let mut reserved = out.clone();
        reserved[0] = 0xff;
        reserved[1..4].copy_from_slice(&[1, 2, 3]);
        reserved[7] = 9;
        assert_eq!(decapsulate(42, 9014, &reserved).map(<[u8]>::len), Ok(14));
        encapsulate(42, &frame(9015), &mut out);
        assert_eq!(decapsulate(42, 9014, &out), Err(Malformed::TooLong(9015)));
        assert_eq!(
            Malformed::OtherVni(7).to_string(),
            "VNI 7 is another network's"
        );
    }

    #[test]
    fn two_ports_carry_frames_over_loopback() {
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let pb = Vxlan::bind(any, "127.0.0.1:9".parse().unwrap(), 5).unwrap();
        let mut pa = Vxlan::bind(any, pb.local_addr().unwrap(), 5).unwrap();
        pa.send(&frame(1500)).unwrap();
        let mut buf = vec![0; 65536];
        let n = loop {
            if let Some(n) = pb.recv(&mut buf).unwrap() {
                break n;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        };
        assert_eq!(decapsulate(pb.vni(), 9014, &buf[..n]), Ok(&frame(1500)[..]));
        assert_eq!(pb.recv(&mut buf).unwrap(), None);
    }
}
