//! The messages between an emulated process and the fabric process, one per
//! `SOCK_SEQPACKET` packet (message boundaries are the socket's), a tag byte first:
//!
//! | from    | tag | body                                             |
//! |---------|-----|--------------------------------------------------|
//! | process | `H` | version, port MAC (6), port IPv4 (4), host name  |
//! | process | `F` | a frame its NIC sent (Ethernet header first)     |
//! | process | `J` / `L` | IPv4 group joined / left (4)               |
//! | process | `j` / `l` | Ethernet group joined / left (6)           |
//! | fabric  | `W` | version: welcome, the process is its host now    |
//! | fabric  | `E` | a one-line reason, then the fabric hangs up      |
//! | fabric  | `F` | global index (8, little-endian), then a frame    |
//!
//! Decoding never trusts the peer: every length is checked and a bad message is an
//! error naming what was wrong.

use std::net::Ipv4Addr;

use backend_sim::frame::eth::Mac;

/// The protocol version both sides speak.
pub const VERSION: u8 = 1;
/// The longest frame either side sends (the ports' 9014-byte maximum).
pub const MAX_FRAME: usize = 9014;
/// The longest message: a fabric frame with its tag and index.
pub const MAX_MSG: usize = 1 + 8 + MAX_FRAME;
/// The shortest frame (an Ethernet header).
pub const MIN_FRAME: usize = 14;
/// The longest host name.
pub const MAX_NAME: usize = 64;

/// What an emulated process tells the fabric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToFabric<'a> {
    /// The first message: which host the process is.
    Hello {
        /// Its port's MAC (checked against the fabric's topology).
        mac: Mac,
        /// Its port's address (checked too).
        ip: Ipv4Addr,
        /// The host's name in the topology.
        host: &'a str,
    },
    /// A frame its NIC transmitted.
    Frame(&'a [u8]),
    /// One more membership of the IPv4 group.
    Join(Ipv4Addr),
    /// One membership fewer.
    Leave(Ipv4Addr),
    /// One more membership of the Ethernet group.
    JoinMac(Mac),
    /// One membership fewer.
    LeaveMac(Mac),
}

/// What the fabric tells a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FromFabric<'a> {
    /// The hello was accepted.
    Welcome,
    /// Refused, with the reason; the fabric hangs up.
    Error(&'a str),
    /// A frame for the process's port, with its global index in the fabric.
    Frame {
        /// The fabric's index of the frame (for traces).
        index: u64,
        /// The frame.
        frame: &'a [u8],
    },
}

fn ipv4(b: &[u8]) -> Ipv4Addr {
    Ipv4Addr::new(b[0], b[1], b[2], b[3])
}

fn mac(b: &[u8]) -> Mac {
    Mac([b[0], b[1], b[2], b[3], b[4], b[5]])
}

fn body_len(what: &str, body: &[u8], want: usize) -> Result<(), String> {
    if body.len() == want {
        Ok(())
    } else {
        Err(format!(
            "{what} message of {} bytes (expected {want})",
            body.len()
        ))
    }
}

fn frame_len(frame: &[u8]) -> Result<(), String> {
    if (MIN_FRAME..=MAX_FRAME).contains(&frame.len()) {
        Ok(())
    } else {
        Err(format!(
            "frame of {} bytes (expected {MIN_FRAME} ..= {MAX_FRAME})",
            frame.len()
        ))
    }
}

impl<'a> ToFabric<'a> {
    /// Writes the message into `out` (cleared first).
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.clear();
        match *self {
            ToFabric::Hello { mac, ip, host } => {
                out.extend_from_slice(&[b'H', VERSION]);
                out.extend_from_slice(&mac.0);
                out.extend_from_slice(&ip.octets());
                out.extend_from_slice(host.as_bytes());
            }
            ToFabric::Frame(f) => {
                out.push(b'F');
                out.extend_from_slice(f);
            }
            ToFabric::Join(g) => {
                out.push(b'J');
                out.extend_from_slice(&g.octets());
            }
            ToFabric::Leave(g) => {
                out.push(b'L');
                out.extend_from_slice(&g.octets());
            }
            ToFabric::JoinMac(m) => {
                out.push(b'j');
                out.extend_from_slice(&m.0);
            }
            ToFabric::LeaveMac(m) => {
                out.push(b'l');
                out.extend_from_slice(&m.0);
            }
        }
    }

    /// Reads one message.
    ///
    /// # Errors
    /// A one-line reason: empty, unknown tag, wrong length, bad version or host name.
    pub fn decode(msg: &'a [u8]) -> Result<Self, String> {
        let (&tag, body) = msg.split_first().ok_or("empty message")?;
        match tag {
            b'H' => {
                if body.len() < 11 {
                    return Err(format!("hello of {} bytes (at least 11)", body.len()));
                }
                if body[0] != VERSION {
                    return Err(format!(
                        "protocol version {} (this fabric speaks {VERSION})",
                        body[0]
                    ));
                }
                let name = &body[11..];
                let host = std::str::from_utf8(name)
                    .ok()
                    .filter(|n| !n.is_empty() && n.len() <= MAX_NAME)
                    .filter(|n| n.chars().all(|c| c.is_ascii_graphic()))
                    .ok_or("host name is not 1 to 64 printable ASCII characters")?;
                Ok(ToFabric::Hello {
                    mac: mac(&body[1..7]),
                    ip: ipv4(&body[7..11]),
                    host,
                })
            }
            b'F' => frame_len(body).map(|()| ToFabric::Frame(body)),
            b'J' | b'L' => {
                body_len("group", body, 4)?;
                let g = ipv4(body);
                Ok(if tag == b'J' {
                    ToFabric::Join(g)
                } else {
                    ToFabric::Leave(g)
                })
            }
            b'j' | b'l' => {
                body_len("MAC group", body, 6)?;
                let m = mac(body);
                Ok(if tag == b'j' {
                    ToFabric::JoinMac(m)
                } else {
                    ToFabric::LeaveMac(m)
                })
            }
            other => Err(format!("unknown message tag 0x{other:02x}")),
        }
    }
}

impl<'a> FromFabric<'a> {
    /// Writes the message into `out` (cleared first).
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.clear();
        match *self {
            FromFabric::Welcome => out.extend_from_slice(&[b'W', VERSION]),
            FromFabric::Error(why) => {
                out.push(b'E');
                out.extend_from_slice(why.as_bytes());
            }
            FromFabric::Frame { index, frame } => {
                out.push(b'F');
                out.extend_from_slice(&index.to_le_bytes());
                out.extend_from_slice(frame);
            }
        }
    }

    /// Reads one message.
    ///
    /// # Errors
    /// A one-line reason, as [`ToFabric::decode`].
    pub fn decode(msg: &'a [u8]) -> Result<Self, String> {
        let (&tag, body) = msg.split_first().ok_or("empty message")?;
        match tag {
            b'W' => {
                body_len("welcome", body, 1)?;
                if body[0] == VERSION {
                    Ok(FromFabric::Welcome)
                } else {
                    Err(format!(
                        "the fabric speaks protocol version {} (this library {VERSION})",
                        body[0]
                    ))
                }
            }
            b'E' => Ok(FromFabric::Error(
                std::str::from_utf8(body).unwrap_or("(a reason that is not UTF-8)"),
            )),
            b'F' => {
                if body.len() < 8 {
                    return Err(format!("frame message of {} bytes", msg.len()));
                }
                let (index, frame) = body.split_at(8);
                frame_len(frame)?;
                let mut i = [0u8; 8];
                i.copy_from_slice(index);
                Ok(FromFabric::Frame {
                    index: u64::from_le_bytes(i),
                    frame,
                })
            }
            other => Err(format!("unknown message tag 0x{other:02x}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip_to(m: ToFabric<'_>) {
        let mut buf = Vec::new();
        m.encode(&mut buf);
        assert_eq!(ToFabric::decode(&buf), Ok(m));
    }

    #[test]
    fn every_message_round_trips() {
        let frame = [7u8; 60];
        round_trip_to(ToFabric::Hello {
            mac: Mac([2, 0, 10, 100, 0, 1]),
            ip: Ipv4Addr::new(10, 100, 0, 1),
            host: "h1",
        });
        round_trip_to(ToFabric::Frame(&frame));
        round_trip_to(ToFabric::Join(Ipv4Addr::new(239, 0, 0, 1)));
        round_trip_to(ToFabric::Leave(Ipv4Addr::new(239, 0, 0, 1)));
        round_trip_to(ToFabric::JoinMac(Mac([1, 0, 0x5e, 0, 0, 1])));
        round_trip_to(ToFabric::LeaveMac(Mac([1, 0, 0x5e, 0, 0, 1])));
        let mut buf = Vec::new();
        for m in [
            FromFabric::Welcome,
            FromFabric::Error("no host h9 in the fabric's topology"),
            FromFabric::Frame {
                index: 0x0102_0304_0506_0708,
                frame: &frame,
            },
        ] {
            m.encode(&mut buf);
            assert_eq!(FromFabric::decode(&buf), Ok(m));
        }
        FromFabric::Frame {
            index: 1,
            frame: &frame,
        }
        .encode(&mut buf);
        assert_eq!(&buf[..9], &[b'F', 1, 0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn bad_messages_are_named() {
        let d = |b: &[u8]| ToFabric::decode(b).unwrap_err();
        assert_eq!(d(b""), "empty message");
        assert_eq!(d(b"Z"), "unknown message tag 0x5a");
        assert_eq!(d(b"H\x01abc"), "hello of 4 bytes (at least 11)");
        assert_eq!(
            d(b"H\x07\x02\0\x0a\x64\0\x01\x0a\x64\0\x01h1"),
            "protocol version 7 (this fabric speaks 1)"
        );
        assert_eq!(
            d(b"H\x01\x02\0\x0a\x64\0\x01\x0a\x64\0\x01"),
            "host name is not 1 to 64 printable ASCII characters"
        );
        assert_eq!(
            d(b"H\x01\x02\0\x0a\x64\0\x01\x0a\x64\0\x01h 1"),
            "host name is not 1 to 64 printable ASCII characters"
        );
        assert_eq!(d(b"Fshort"), "frame of 5 bytes (expected 14 ..= 9014)");
        assert_eq!(
            d(&[b'F'; MAX_FRAME + 2]),
            "frame of 9015 bytes (expected 14 ..= 9014)"
        );
        assert_eq!(d(b"J\x01\x02\x03"), "group message of 3 bytes (expected 4)");
        assert_eq!(
            d(b"l\x01\x02\x03\x04\x05\x06\x07"),
            "MAC group message of 7 bytes (expected 6)"
        );
        let f = |b: &[u8]| FromFabric::decode(b).unwrap_err();
        assert_eq!(
            f(b"W\x02"),
            "the fabric speaks protocol version 2 (this library 1)"
        );
        assert_eq!(f(b"F\x01\x02"), "frame message of 3 bytes");
        assert_eq!(f(b"x"), "unknown message tag 0x78");
        assert_eq!(
            FromFabric::decode(b"E\xff"),
            Ok(FromFabric::Error("(a reason that is not UTF-8)"))
        );
    }
}
