//! What a launcher and the holder of its fabric say on the holder's control socket: one
//! JSON line each way. The holder's answer carries descriptors (`SCM_RIGHTS`): the user
//! namespace (when the holder made one) and the host's network namespace.

use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::sys;

/// A launcher asks to join the fabric as `host`; the rest must match the running fabric
/// when given.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub struct Request {
    /// The host the command runs as.
    pub host: String,
    /// The text of the topology file the launcher was given (`--topology`).
    pub topology: Option<String>,
    /// The launcher's `--seed`.
    pub seed: Option<u64>,
    /// The launcher's `--pcap` (absolute).
    pub pcap: Option<PathBuf>,
}

/// The holder's answer.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
pub enum Response {
    /// Joined: descriptors follow (user namespace first when `userns`, then the host's
    /// network namespace).
    Joined {
        /// The fabric process's socket (`VERBS_EMU_FABRIC`).
        fabric: PathBuf,
        /// The topology file the fabric read (`VERBS_EMU_TOPOLOGY`); `None`: the default.
        topology: Option<PathBuf>,
        /// The fabric's seed (`VERBS_EMU_SEED`).
        seed: u64,
        /// Whether a user namespace descriptor comes first.
        userns: bool,
        /// The host's interface (in its network namespace).
        interface: String,
    },
    /// Refused, with a one-line reason.
    Refused(String),
    /// The fabric had no launcher and the request wants other settings: the holder stops
    /// it and closes this connection once it has; the launcher then starts a new one.
    Stopping,
}

/// Sends `value` as one JSON line with `fds` attached.
pub fn send<T: Serialize>(sock: &UnixStream, value: &T, fds: &[&OwnedFd]) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(value).map_err(std::io::Error::other)?;
    line.push(b'\n');
    let raw: Vec<_> = fds.iter().map(|f| f.as_raw_fd()).collect();
    sys::send_with_fds(sock, &line, &raw)
}

/// Reads one JSON line and the descriptors that came with it (`None` at end of stream).
pub fn recv<T: for<'de> Deserialize<'de>>(
    sock: &UnixStream,
) -> std::io::Result<Option<(T, Vec<OwnedFd>)>> {
    let mut buf = vec![0u8; 64 * 1024];
    let (mut n, fds) = sys::recv_with_fds(sock, &mut buf)?;
    if n == 0 {
        return Ok(None);
    }
    // A stream socket may split the line: read on until its newline.
    let mut reader = sock;
    while buf[..n].last() != Some(&b'\n') {
        if n == buf.len() {
            return Err(std::io::Error::other("message too long"));
        }
        let m = reader.read(&mut buf[n..])?;
        if m == 0 {
            return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
        }
        n += m;
    }
    let value = serde_json::from_slice(&buf[..n]).map_err(std::io::Error::other)?;
    Ok(Some((value, fds)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_and_an_answer_with_a_descriptor_cross_a_socket_pair() {
        let (a, b) = UnixStream::pair().unwrap();
        let req = Request {
            host: "h2".into(),
            topology: None,
            seed: Some(7),
            pcap: None,
        };
        send(&a, &req, &[]).unwrap();
        let (got, fds) = recv::<Request>(&b).unwrap().unwrap();
        assert_eq!(got, req);
        assert!(fds.is_empty());
        let file: OwnedFd = std::fs::File::open("/proc/self/ns/net").unwrap().into();
        let resp = Response::Joined {
            fabric: "/x/fabric.sock".into(),
            topology: None,
            seed: 7,
            userns: false,
            interface: "eth0".into(),
        };
        send(&b, &resp, &[&file]).unwrap();
        let (got, fds) = recv::<Response>(&a).unwrap().unwrap();
        assert_eq!(got, resp);
        assert_eq!(fds.len(), 1);
        drop(b);
        assert!(recv::<Response>(&a).unwrap().is_none());
    }
}
