//! The control connection of the split cases: one TCP connection between the two sides,
//! carrying one JSON value per line (what each side's QP is, barriers, the passive side's
//! outcome lines). The side that listens and the side that connects are chosen by where
//! the programs run (the host listens, the VM connects), not by their roles in a case.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// How long a side waits for its peer's next message: longer than any case takes on TCG.
const READ_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a connecting side keeps trying while its peer is not yet listening.
const CONNECT_DEADLINE: Duration = Duration::from_secs(120);

/// What one side tells the other about its QP and its memory: everything the peer needs
/// to connect to it and to address it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Info {
    /// The QP's number.
    pub qpn: u32,
    /// Its first send PSN (the peer's expected receive PSN).
    pub psn: u32,
    /// The GID of its port (the IPv4-mapped one).
    pub gid: [u8; 16],
    /// The address of its memory region.
    pub addr: u64,
    /// That region's rkey.
    pub rkey: u32,
}

/// One TCP connection to the peer.
#[derive(Debug)]
pub struct Ctl {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Ctl {
    fn new(stream: TcpStream) -> Result<Self, String> {
        stream
            .set_read_timeout(Some(READ_TIMEOUT))
            .map_err(|e| format!("set_read_timeout: {e}"))?;
        stream
            .set_nodelay(true)
            .map_err(|e| format!("set_nodelay: {e}"))?;
        let writer = stream.try_clone().map_err(|e| format!("clone: {e}"))?;
        Ok(Ctl {
            reader: BufReader::new(stream),
            writer,
        })
    }

    /// Accepts the next connection on `listener`.
    ///
    /// # Errors
    /// Accepting failed.
    pub fn accept(listener: &TcpListener) -> Result<Self, String> {
        let (stream, _) = listener.accept().map_err(|e| format!("accept: {e}"))?;
        Self::new(stream)
    }

    /// Connects to `addr`, trying again while nothing listens there (the peer may start
    /// later), and waits for the peer's greeting: behind QEMU's user-mode network a
    /// connection is accepted by QEMU first and closed when nothing listens in the guest.
    ///
    /// # Errors
    /// No peer answered within two minutes.
    pub fn connect(addr: SocketAddr) -> Result<Self, String> {
        let start = Instant::now();
        loop {
            let tried = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
                .map_err(|e| e.to_string())
                .and_then(|s| {
                    let mut c = Self::new(s)?;
                    c.hello()?;
                    Ok(c)
                });
            match tried {
                Ok(c) => return Ok(c),
                Err(e) if start.elapsed() > CONNECT_DEADLINE => {
                    return Err(format!("no peer at {addr}: {e}"))
                }
                Err(_) => std::thread::sleep(Duration::from_millis(200)),
            }
        }
    }

    /// The greeting both sides send first and expect.
    fn hello(&mut self) -> Result<(), String> {
        self.send(&"split-peer 1")?;
        let got: String = self.recv()?;
        if got == "split-peer 1" {
            Ok(())
        } else {
            Err(format!("the peer greeted with {got:?}"))
        }
    }

    /// Greets the peer that connected (see [`Ctl::connect`]).
    ///
    /// # Errors
    /// The peer's greeting was not ours.
    pub fn greet(&mut self) -> Result<(), String> {
        self.hello()
    }

    /// Sends one value.
    ///
    /// # Errors
    /// The connection failed.
    pub fn send<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), String> {
        let mut line = serde_json::to_string(v).map_err(|e| format!("encode: {e}"))?;
        line.push('\n');
        self.writer
            .write_all(line.as_bytes())
            .map_err(|e| format!("send to the peer: {e}"))
    }

    /// Receives one value.
    ///
    /// # Errors
    /// The connection failed or closed, or the peer sent something else.
    pub fn recv<T: DeserializeOwned>(&mut self) -> Result<T, String> {
        let mut line = String::new();
        let n = self
            .reader
            .read_line(&mut line)
            .map_err(|e| format!("receive from the peer: {e}"))?;
        if n == 0 {
            return Err("the peer closed the connection".into());
        }
        serde_json::from_str(&line).map_err(|e| format!("decode {line:?}: {e}"))
    }

    /// Both sides reach the point named `tag` before either goes on.
    ///
    /// # Errors
    /// The connection failed, or the peer was at another point (the sides disagree on
    /// the case's steps).
    pub fn barrier(&mut self, tag: &str) -> Result<(), String> {
        self.send(tag)?;
        let got: String = self.recv()?;
        if got == tag {
            Ok(())
        } else {
            Err(format!("the peer is at {got:?}, this side at {tag:?}"))
        }
    }

    /// Sends `mine` and returns the peer's.
    ///
    /// # Errors
    /// As [`Ctl::send`] and [`Ctl::recv`].
    pub fn exchange<T: Serialize + DeserializeOwned>(&mut self, mine: &T) -> Result<T, String> {
        self.send(mine)?;
        self.recv()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_sides_greet_exchange_and_meet_at_barriers() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let other = std::thread::spawn(move || {
            let mut c = Ctl::connect(addr).unwrap();
            let info = Info {
                qpn: 17,
                psn: 5,
                gid: [1; 16],
                addr: 0x1000,
                rkey: 9,
            };
            let got = c.exchange(&info).unwrap();
            c.barrier("x").unwrap();
            let err = c.barrier("y").unwrap_err();
            (got, err)
        });
        let mut c = Ctl::accept(&listener).unwrap();
        c.greet().unwrap();
        let info = Info {
            qpn: 18,
            psn: 6,
            gid: [2; 16],
            addr: 0x2000,
            rkey: 10,
        };
        let got = c.exchange(&info).unwrap();
        assert_eq!(got.qpn, 17);
        assert_eq!(got.gid, [1; 16]);
        c.barrier("x").unwrap();
        assert!(c.barrier("z").is_err());
        let (theirs, err) = other.join().unwrap();
        assert_eq!(theirs, info);
        assert_eq!(err, "the peer is at \"z\", this side at \"y\"");
    }
}
