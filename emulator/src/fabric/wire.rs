//! The control messages between an emulated process and the fabric process, one per
//! `SOCK_SEQPACKET` packet (message boundaries are the socket's), a tag byte first.
//! Frames do not travel here but in the shared-memory rings ([`super::ring`]) that come
//! with the welcome.
//!
//! | from    | tag       | body                                                      |
//! |---------|-----------|-----------------------------------------------------------|
//! | process | `H`       | version, port MAC (6), port IPv4 (4), host name           |
//! | process | `J` / `L` | IPv4 group joined / left (4)                              |
//! | process | `j` / `l` | Ethernet group joined / left (6)                          |
//! | both    | `D`       | nothing: a doorbell, the peer's ring has frames           |
//! | process | `C`       | a connection-manager message: destination host's IPv4 (4), |
//! |         |           | then the message (opaque to the fabric)                   |
//! | fabric  | `C`       | a connection-manager message: sending host's IPv4 (4),    |
//! |         |           | then the message                                          |
//! | fabric  | `B`       | a connection-manager message returned: no process is the  |
//! |         |           | destination host (its IPv4 (4), then the message)         |
//! | fabric  | `G`       | the process of host IPv4 (4) has gone                     |
//! | fabric  | `W`       | version, ring size (4, little-endian), with the rings'    |
//! |         |           | memfd attached (`SCM_RIGHTS`): the process is its host now |
//! | fabric  | `E`       | a one-line reason, then the fabric hangs up               |
//! | fabric  | `P`       | a direct pair with another host's process: pair id (4),   |
//! |         |           | the peer's port MAC (6), ring size (4), 1 if this process |
//! |         |           | is the pair's first else 0 (1); with the rings' memfd,    |
//! |         |           | this process's eventfd and the peer's attached            |
//! | process | `S`       | pair id (4): frames for the peer go in the pair's ring    |
//! |         |           | from now on, none more through the fabric                 |
//! | fabric  | `O`       | pair id (4): read the peer's ring once the ring from the  |
//! |         |           | fabric is read up to where it stands now                  |
//! | fabric  | `U`       | pair id (4): the peer has gone; send it nothing more, read |
//! |         |           | what its ring holds, then drop the pair                   |
//! | process | `U`       | pair id (4): this process has dropped the pair            |
//!
//! The direct pairs are [`super::direct`]'s.
//!
//! The connection manager's messages (librdmacm's REQ, REP, RTU, REJ, DREQ, DREP, SIDR;
//! [`crate::rdmacm::core::network`] encodes them) travel on the socket, not in the rings: the
//! fabric forwards each to the process of its destination host, unchanged and without
//! faults (the CM's own MADs would be retried over a lossy link; the emulated CM has no
//! retries), and returns it to its sender when no process is that host.
//!
//! Decoding never trusts the peer: every length is checked and a bad message is an
//! error naming what was wrong.

use std::net::Ipv4Addr;

use backend_sim::frame::eth::Mac;

/// The protocol version both sides speak.
pub const VERSION: u8 = 4;
/// The longest frame either side sends (the ports' 9014-byte maximum).
pub const MAX_FRAME: usize = 9014;
/// The shortest frame (an Ethernet header).
pub const MIN_FRAME: usize = 14;
/// The longest host name.
pub const MAX_NAME: usize = 64;
/// The longest message either side sends (an error's reason is cut to fit).
pub const MAX_MSG: usize = 1024;
/// The longest connection-manager message (what follows the tag and the address).
pub const MAX_CM: usize = MAX_MSG - 5;

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
    /// Its ring to the fabric has frames.
    Doorbell,
    /// One more membership of the IPv4 group.
    Join(Ipv4Addr),
    /// One membership fewer.
    Leave(Ipv4Addr),
    /// One more membership of the Ethernet group.
    JoinMac(Mac),
    /// One membership fewer.
    LeaveMac(Mac),
    /// A connection-manager message for the process of host `to` (at most [`MAX_CM`]
    /// bytes).
    Cm {
        /// The destination host's address.
        to: Ipv4Addr,
        /// The message.
        body: &'a [u8],
    },
    /// From now on frames for the peer of this pair go in the pair's ring.
    Switched(u32),
    /// This process has dropped the pair (after [`FromFabric::Unpeer`]).
    Unpeered(u32),
}

/// What the fabric tells a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FromFabric<'a> {
    /// The hello was accepted; the rings' memfd is attached.
    Welcome {
        /// The data area of each ring, in bytes.
        ring: u32,
    },
    /// Refused, with the reason; the fabric hangs up.
    Error(&'a str),
    /// The process's ring from the fabric has frames.
    Doorbell,
    /// A connection-manager message from the process of host `from`.
    Cm {
        /// The sending host's address.
        from: Ipv4Addr,
        /// The message.
        body: &'a [u8],
    },
    /// A connection-manager message this process sent to host `to`, returned: no
    /// process is that host.
    CmReturned {
        /// The destination it had.
        to: Ipv4Addr,
        /// The message.
        body: &'a [u8],
    },
    /// The process that was host `.0` has gone (exited, or was hung up on).
    Gone(Ipv4Addr),
    /// A direct pair with the process of another host (the rings' memfd and two
    /// eventfds are attached).
    Peer {
        /// The pair's id.
        id: u32,
        /// The peer's port MAC: frames for it go in the pair's ring.
        mac: Mac,
        /// The data area of each ring, in bytes.
        ring: u32,
        /// True if this process is the pair's first (it writes ring `ToFabric`).
        first: bool,
    },
    /// The peer's ring may be read once the ring from the fabric is read up to where it
    /// stands now.
    Open(u32),
    /// The peer has gone.
    Unpeer(u32),
}

fn pair_id(what: &str, body: &[u8]) -> Result<u32, String> {
    body_len(what, body, 4)?;
    Ok(u32::from_le_bytes([body[0], body[1], body[2], body[3]]))
}

fn put_id(out: &mut Vec<u8>, tag: u8, id: u32) {
    out.push(tag);
    out.extend_from_slice(&id.to_le_bytes());
}

/// A connection-manager message's address and body, after its tag.
fn cm_parts(body: &[u8]) -> Result<(Ipv4Addr, &[u8]), String> {
    if body.len() < 5 || body.len() > 4 + MAX_CM {
        return Err(format!(
            "connection-manager message of {} bytes (5 to {})",
            body.len(),
            4 + MAX_CM
        ));
    }
    Ok((ipv4(&body[..4]), &body[4..]))
}

fn put_cm(out: &mut Vec<u8>, tag: u8, ip: Ipv4Addr, body: &[u8]) {
    out.push(tag);
    out.extend_from_slice(&ip.octets());
    out.extend_from_slice(&body[..body.len().min(MAX_CM)]);
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
            ToFabric::Doorbell => out.push(b'D'),
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
            ToFabric::Cm { to, body } => put_cm(out, b'C', to, body),
            ToFabric::Switched(id) => put_id(out, b'S', id),
            ToFabric::Unpeered(id) => put_id(out, b'U', id),
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
            b'D' => body_len("doorbell", body, 0).map(|()| ToFabric::Doorbell),
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
            b'C' => cm_parts(body).map(|(to, body)| ToFabric::Cm { to, body }),
            b'S' => pair_id("switched", body).map(ToFabric::Switched),
            b'U' => pair_id("unpeered", body).map(ToFabric::Unpeered),
            other => Err(format!("unknown message tag 0x{other:02x}")),
        }
    }
}

impl<'a> FromFabric<'a> {
    /// Writes the message into `out` (cleared first).
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.clear();
        match *self {
            FromFabric::Welcome { ring } => {
                out.extend_from_slice(&[b'W', VERSION]);
                out.extend_from_slice(&ring.to_le_bytes());
            }
            FromFabric::Error(why) => {
                out.push(b'E');
                let mut end = why.len().min(MAX_MSG - 1);
                while !why.is_char_boundary(end) {
                    end -= 1;
                }
                out.extend_from_slice(&why.as_bytes()[..end]);
            }
            FromFabric::Doorbell => out.push(b'D'),
            FromFabric::Cm { from, body } => put_cm(out, b'C', from, body),
            FromFabric::CmReturned { to, body } => put_cm(out, b'B', to, body),
            FromFabric::Gone(ip) => {
                out.push(b'G');
                out.extend_from_slice(&ip.octets());
            }
            FromFabric::Peer {
                id,
                mac,
                ring,
                first,
            } => {
                put_id(out, b'P', id);
                out.extend_from_slice(&mac.0);
                out.extend_from_slice(&ring.to_le_bytes());
                out.push(u8::from(first));
            }
            FromFabric::Open(id) => put_id(out, b'O', id),
            FromFabric::Unpeer(id) => put_id(out, b'U', id),
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
                if let Some(&v) = body.first().filter(|&&v| v != VERSION) {
                    return Err(format!(
                        "the fabric speaks protocol version {v} (this library {VERSION})"
                    ));
                }
                body_len("welcome", body, 5)?;
                let mut ring = [0u8; 4];
                ring.copy_from_slice(&body[1..]);
                Ok(FromFabric::Welcome {
                    ring: u32::from_le_bytes(ring),
                })
            }
            b'E' => Ok(FromFabric::Error(
                std::str::from_utf8(body).unwrap_or("(a reason that is not UTF-8)"),
            )),
            b'D' => body_len("doorbell", body, 0).map(|()| FromFabric::Doorbell),
            b'C' => cm_parts(body).map(|(from, body)| FromFabric::Cm { from, body }),
            b'B' => cm_parts(body).map(|(to, body)| FromFabric::CmReturned { to, body }),
            b'G' => body_len("gone", body, 4).map(|()| FromFabric::Gone(ipv4(body))),
            b'P' => {
                body_len("peer", body, 15)?;
                if body[14] > 1 {
                    return Err(format!("peer message with first = {}", body[14]));
                }
                Ok(FromFabric::Peer {
                    id: u32::from_le_bytes([body[0], body[1], body[2], body[3]]),
                    mac: mac(&body[4..10]),
                    ring: u32::from_le_bytes([body[10], body[11], body[12], body[13]]),
                    first: body[14] == 1,
                })
            }
            b'O' => pair_id("open", body).map(FromFabric::Open),
            b'U' => pair_id("unpeer", body).map(FromFabric::Unpeer),
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
        round_trip_to(ToFabric::Hello {
            mac: Mac([2, 0, 10, 100, 0, 1]),
            ip: Ipv4Addr::new(10, 100, 0, 1),
            host: "h1",
        });
        round_trip_to(ToFabric::Doorbell);
        round_trip_to(ToFabric::Join(Ipv4Addr::new(239, 0, 0, 1)));
        round_trip_to(ToFabric::Leave(Ipv4Addr::new(239, 0, 0, 1)));
        round_trip_to(ToFabric::JoinMac(Mac([1, 0, 0x5e, 0, 0, 1])));
        round_trip_to(ToFabric::LeaveMac(Mac([1, 0, 0x5e, 0, 0, 1])));
        let h2 = Ipv4Addr::new(10, 100, 0, 2);
        round_trip_to(ToFabric::Cm {
            to: h2,
            body: b"a REQ",
        });
        round_trip_to(ToFabric::Switched(7));
        round_trip_to(ToFabric::Unpeered(u32::MAX));
        let mut buf = Vec::new();
        ToFabric::Cm {
            to: h2,
            body: &[7; MAX_CM],
        }
        .encode(&mut buf);
        assert_eq!(buf.len(), MAX_MSG);
        for m in [
            FromFabric::Welcome { ring: 4 << 20 },
            FromFabric::Error("no host h9 in the fabric's topology"),
            FromFabric::Doorbell,
            FromFabric::Cm {
                from: h2,
                body: b"a REP",
            },
            FromFabric::CmReturned {
                to: h2,
                body: b"a DREQ",
            },
            FromFabric::Gone(h2),
            FromFabric::Peer {
                id: 3,
                mac: Mac([2, 0, 10, 100, 0, 2]),
                ring: 4 << 20,
                first: true,
            },
            FromFabric::Open(3),
            FromFabric::Unpeer(3),
        ] {
            m.encode(&mut buf);
            assert_eq!(FromFabric::decode(&buf), Ok(m));
        }
        FromFabric::Welcome { ring: 1 }.encode(&mut buf);
        assert_eq!(buf, [b'W', VERSION, 1, 0, 0, 0]);
        let long = "é".repeat(600);
        FromFabric::Error(&long).encode(&mut buf);
        assert_eq!(buf.len(), MAX_MSG - 1);
        assert_eq!(
            FromFabric::decode(&buf),
            Ok(FromFabric::Error(&long[..1022]))
        );
    }

    #[test]
    fn bad_messages_are_named() {
        let d = |b: &[u8]| ToFabric::decode(b).unwrap_err();
        assert_eq!(d(b""), "empty message");
        assert_eq!(d(b"Z"), "unknown message tag 0x5a");
        assert_eq!(d(b"H\x04abc"), "hello of 4 bytes (at least 11)");
        assert_eq!(
            d(b"H\x07\x02\0\x0a\x64\0\x01\x0a\x64\0\x01h1"),
            "protocol version 7 (this fabric speaks 4)"
        );
        assert_eq!(
            d(b"H\x04\x02\0\x0a\x64\0\x01\x0a\x64\0\x01"),
            "host name is not 1 to 64 printable ASCII characters"
        );
        assert_eq!(
            d(b"H\x04\x02\0\x0a\x64\0\x01\x0a\x64\0\x01h 1"),
            "host name is not 1 to 64 printable ASCII characters"
        );
        assert_eq!(d(b"Dx"), "doorbell message of 1 bytes (expected 0)");
        assert_eq!(d(b"J\x01\x02\x03"), "group message of 3 bytes (expected 4)");
        assert_eq!(
            d(b"l\x01\x02\x03\x04\x05\x06\x07"),
            "MAC group message of 7 bytes (expected 6)"
        );
        assert_eq!(
            d(b"C\x0a\x64\0\x02"),
            "connection-manager message of 4 bytes (5 to 1023)"
        );
        let mut long = vec![b'C'; MAX_MSG + 1];
        long[1..5].copy_from_slice(&[10, 100, 0, 2]);
        assert_eq!(
            d(&long),
            "connection-manager message of 1024 bytes (5 to 1023)"
        );
        let f = |b: &[u8]| FromFabric::decode(b).unwrap_err();
        assert_eq!(
            f(b"W\x01"),
            "the fabric speaks protocol version 1 (this library 4)"
        );
        assert_eq!(f(b"W\x04\x01"), "welcome message of 2 bytes (expected 5)");
        assert_eq!(
            f(b"B\x0a"),
            "connection-manager message of 1 bytes (5 to 1023)"
        );
        assert_eq!(f(b"x"), "unknown message tag 0x78");
        assert_eq!(f(b"O\x01"), "open message of 1 bytes (expected 4)");
        assert_eq!(d(b"S\x01\x02"), "switched message of 2 bytes (expected 4)");
        let mut peer = vec![b'P'; 16];
        peer[15] = 2;
        assert_eq!(f(&peer), "peer message with first = 2");
        assert_eq!(
            FromFabric::decode(b"E\xff"),
            Ok(FromFabric::Error("(a reason that is not UTF-8)"))
        );
    }
}
