//! A QEMU `-netdev stream` port: QEMU (7.2 and later) connects to the fabric's Unix
//! socket (`-netdev stream,id=n0,server=off,addr.type=unix,addr.path=PATH`) and each
//! Ethernet frame crosses it preceded by its length, 4 bytes big-endian, both ways (QEMU's
//! `net/stream.c` writes `htonl(size)` then the frame; `net_fill_rstate` in `net/net.c`
//! reads them back and drops the connection on a length over `NET_BUFSIZE`, 69632).
//! The fabric serves one peer at a time; while one is connected, others are turned away.

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};

/// Length of the length prefix.
pub const PREFIX_LEN: usize = 4;
/// QEMU's largest frame on a stream (`NET_BUFSIZE`): a longer length breaks the stream.
pub const MAX_STREAM_FRAME: usize = 4096 + 65536;
/// Shortest frame taken: an Ethernet header.
const MIN_FRAME: usize = 14;
/// Most bytes waiting to be written to a slow peer; frames beyond are dropped.
pub const MAX_PENDING: usize = 4 << 20;

/// What the stream holds next.
#[derive(Debug, PartialEq, Eq)]
pub enum Next {
    /// A whole frame.
    Frame(Vec<u8>),
    /// A frame the port does not take (shorter than an Ethernet header, or longer than
    /// the port's largest frame): skipped, the stream goes on.
    Skipped(usize),
    /// Nothing whole yet.
    Partial,
}

/// Reassembles length-prefixed frames from the bytes of a stream, however they are cut.
#[derive(Debug, Default)]
pub struct Decoder {
    buf: Vec<u8>,
    at: usize,
}

impl Decoder {
    /// Adds bytes read from the stream.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.at > 0 && self.at == self.buf.len() {
            self.buf.clear();
            self.at = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The next frame (of at most `max_frame` bytes).
    ///
    /// # Errors
    /// A length over [`MAX_STREAM_FRAME`]: the stream cannot be followed further.
    pub fn next(&mut self, max_frame: usize) -> Result<Next, String> {
        let rest = &self.buf[self.at..];
        if rest.len() < PREFIX_LEN {
            return Ok(Next::Partial);
        }
        let len = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
        if len > MAX_STREAM_FRAME {
            return Err(format!(
                "a frame length of {len} (QEMU's largest is {MAX_STREAM_FRAME})"
            ));
        }
        if rest.len() < PREFIX_LEN + len {
            return Ok(Next::Partial);
        }
        let frame = &rest[PREFIX_LEN..PREFIX_LEN + len];
        let next = if (MIN_FRAME..=max_frame).contains(&len) {
            Next::Frame(frame.to_vec())
        } else {
            Next::Skipped(len)
        };
        self.at += PREFIX_LEN + len;
        if self.at > 1 << 16 {
            self.buf.drain(..self.at);
            self.at = 0;
        }
        Ok(next)
    }
}

/// Appends `frame` with its length prefix to `out`.
pub fn encode(frame: &[u8], out: &mut Vec<u8>) {
    let len = u32::try_from(frame.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(frame);
}

/// Counters of the stream's connections.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamStats {
    /// Peers that connected.
    pub connected: u64,
    /// Peers turned away (one was connected already).
    pub turned_away: u64,
    /// Peers hung up on for a broken stream.
    pub broken: u64,
}

/// The listening socket of a QEMU stream port and its peer.
#[derive(Debug)]
pub struct QemuStream {
    listener: UnixListener,
    path: PathBuf,
    peer: Option<UnixStream>,
    decoder: Decoder,
    pending: Vec<u8>,
    /// Counters.
    pub stats: StreamStats,
}

/// What one round of reading gave.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Received {
    /// Whole frames, in order.
    pub frames: Vec<Vec<u8>>,
    /// Frames skipped (too short or too long).
    pub skipped: u64,
}

impl QemuStream {
    /// Listens on `path` (which must not exist; the socket is removed when the port is
    /// dropped).
    ///
    /// # Errors
    /// The bind fails.
    pub fn listen(path: &Path) -> io::Result<Self> {
        let listener = UnixListener::bind(path)?;
        listener.set_nonblocking(true)?;
        Ok(QemuStream {
            listener,
            path: path.to_path_buf(),
            peer: None,
            decoder: Decoder::default(),
            pending: Vec::new(),
            stats: StreamStats::default(),
        })
    }

    /// The descriptors to poll, with their events: the listener, and the peer (for
    /// writing too while bytes wait for it).
    pub fn poll_fds(&self, out: &mut Vec<libc::pollfd>) {
        out.push(pollfd(self.listener.as_raw_fd(), libc::POLLIN));
        if let Some(p) = &self.peer {
            let mut events = libc::POLLIN;
            if !self.pending.is_empty() {
                events |= libc::POLLOUT;
            }
            out.push(pollfd(p.as_raw_fd(), events));
        }
    }

    /// How many descriptors [`QemuStream::poll_fds`] pushes.
    #[must_use]
    pub fn fd_count(&self) -> usize {
        1 + usize::from(self.peer.is_some())
    }

    /// Whether a peer is connected.
    #[must_use]
    pub fn connected(&self) -> bool {
        self.peer.is_some()
    }

    /// Accepts peers, reads what the peer sent (frames of at most `max_frame` bytes)
    /// and writes what waits for it.
    pub fn serve(&mut self, max_frame: usize) -> Received {
        loop {
            match self.listener.accept() {
                Ok((s, _)) if self.peer.is_none() => {
                    if s.set_nonblocking(true).is_ok() {
                        self.stats.connected += 1;
                        self.peer = Some(s);
                        self.decoder = Decoder::default();
                        self.pending.clear();
                    }
                }
                Ok(_) => self.stats.turned_away += 1,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        let mut got = Received::default();
        let mut buf = [0u8; 65536];
        let mut closed = false;
        if let Some(p) = self.peer.as_mut() {
            for _ in 0..64 {
                match p.read(&mut buf) {
                    Ok(0) => {
                        closed = true;
                        break;
                    }
                    Ok(n) => self.decoder.push(&buf[..n]),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(_) => {
                        closed = true;
                        break;
                    }
                }
            }
        }
        loop {
            match self.decoder.next(max_frame) {
                Ok(Next::Frame(f)) => got.frames.push(f),
                Ok(Next::Skipped(_)) => got.skipped += 1,
                Ok(Next::Partial) => break,
                Err(_) => {
                    self.stats.broken += 1;
                    closed = true;
                    break;
                }
            }
        }
        if closed {
            self.peer = None;
            self.pending.clear();
        } else {
            self.flush();
        }
        got
    }

    /// Queues `frame` for the peer and writes what it can. False when it was dropped:
    /// no peer, or [`MAX_PENDING`] bytes wait already.
    pub fn send(&mut self, frame: &[u8]) -> bool {
        if self.peer.is_none() || self.pending.len() + frame.len() > MAX_PENDING {
            return false;
        }
        encode(frame, &mut self.pending);
        self.flush();
        true
    }

    /// Writes what waits, as far as the socket takes it.
    fn flush(&mut self) {
        let Some(p) = self.peer.as_mut() else {
            return;
        };
        let mut done = 0;
        while done < self.pending.len() {
            match p.write(&self.pending[done..]) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        self.pending.drain(..done);
    }
}

impl Drop for QemuStream {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn pollfd(fd: RawFd, events: libc::c_short) -> libc::pollfd {
    libc::pollfd {
        fd,
        events,
        revents: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn frame(len: usize, seed: u8) -> Vec<u8> {
        (0..len).map(|i| (i as u8).wrapping_add(seed)).collect()
    }

    #[test]
    fn frames_cut_anywhere_come_back_whole() {
        let mut wire = Vec::new();
        let frames = [frame(60, 1), frame(1514, 2), frame(14, 3), frame(9014, 4)];
        for f in &frames {
            encode(f, &mut wire);
        }
        assert_eq!(wire[..4], [0, 0, 0, 60]);
        for cut in [1, 3, 4, 5, 61, 64, 1000, wire.len()] {
            let mut d = Decoder::default();
            let mut got = Vec::new();
            for chunk in wire.chunks(cut) {
                d.push(chunk);
                while let Next::Frame(f) = d.next(9014).unwrap() {
                    got.push(f);
                }
            }
            assert_eq!(got, frames, "cut every {cut} bytes");
            assert_eq!(d.next(9014), Ok(Next::Partial));
        }
    }

    #[test]
    fn frames_the_port_does_not_take_are_skipped_and_a_broken_length_ends_the_stream() {
        let mut wire = Vec::new();
        encode(&frame(13, 0), &mut wire);
        encode(&frame(9015, 0), &mut wire);
        encode(&frame(60, 0), &mut wire);
        let mut d = Decoder::default();
        d.push(&wire);
        assert_eq!(d.next(9014), Ok(Next::Skipped(13)));
        assert_eq!(d.next(9014), Ok(Next::Skipped(9015)));
        assert_eq!(d.next(9014), Ok(Next::Frame(frame(60, 0))));
        d.push(&0x0001_1001u32.to_be_bytes());
        assert_eq!(
            d.next(9014),
            Err("a frame length of 69633 (QEMU's largest is 69632)".into())
        );
    }

    /// Serves until `done` says so (at most 10 s).
    fn serve_until(port: &mut QemuStream, mut done: impl FnMut(&mut QemuStream, Received) -> bool) {
        let begin = Instant::now();
        loop {
            let got = port.serve(9014);
            if done(port, got) {
                return;
            }
            assert!(begin.elapsed() < Duration::from_secs(10), "timed out");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn a_peer_on_the_socket_exchanges_frames_both_ways_and_may_go() {
        let dir = std::env::temp_dir().join(format!("qemu-stream-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("vm.sock");
        let mut port = QemuStream::listen(&path).unwrap();
        assert!(!port.send(&frame(60, 0)), "no peer yet: dropped");
        let mut peer = UnixStream::connect(&path).unwrap();
        // A second peer is turned away while the first is connected.
        let _other = UnixStream::connect(&path).unwrap();
        // The peer writes a frame in two pieces, the second after the port has read the
        // first.
        let mut wire = Vec::new();
        encode(&frame(100, 7), &mut wire);
        peer.write_all(&wire[..6]).unwrap();
        serve_until(&mut port, |p, got| {
            assert!(got.frames.is_empty());
            p.connected()
        });
        assert_eq!(port.stats.turned_away, 1);
        peer.write_all(&wire[6..]).unwrap();
        let mut frames = Vec::new();
        serve_until(&mut port, |_, got| {
            frames.extend(got.frames);
            !frames.is_empty()
        });
        assert_eq!(frames, [frame(100, 7)]);
        // The port writes a frame with its length.
        assert!(port.send(&frame(1514, 9)));
        let mut back = vec![0; 4 + 1514];
        peer.read_exact(&mut back).unwrap();
        assert_eq!(back[..4], 1514u32.to_be_bytes());
        assert_eq!(back[4..], frame(1514, 9)[..]);
        // The peer goes: the port takes the next one.
        drop(peer);
        serve_until(&mut port, |p, _| !p.connected());
        let mut again = UnixStream::connect(&path).unwrap();
        serve_until(&mut port, |p, _| p.connected());
        assert_eq!(port.stats.connected, 2);
        // A broken length hangs up on it.
        again.write_all(&u32::MAX.to_be_bytes()).unwrap();
        serve_until(&mut port, |p, _| !p.connected());
        assert_eq!(port.stats.broken, 1);
        drop(port);
        assert!(!path.exists(), "the socket is removed with the port");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
