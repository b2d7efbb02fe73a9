//! What keeps the spacing between a host's frames and its connection manager's messages,
//! as one wire keeps it: the sender notes when its NIC last put a frame on the way
//! ([`LastFrame`]), the receiver when it last took a frame of each host from the fabric
//! ([`TakenFrom`]) and how many of its program's CQ polls returned completions ([`polls`]).
//!
//! A frame and a connection-manager message that one host sent 3 ms apart arrive 3 ms
//! apart on a real network. Between emulated processes both wait for the fabric
//! process (and the receiver's threads) to be scheduled: on a loaded machine they can
//! arrive at once, and a program that reacts to the frame (a send's completion, then
//! `rdma_listen`) finds the message handled before it could react: perftest's `-R`
//! server had its client's REQ rejected for want of a listener (see the connection
//! manager's network, which holds a request back by what this measures).

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Nanoseconds since the process's first look at this clock (never 0 once read).
fn mono_ns() -> u64 {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    let origin = ORIGIN.get_or_init(Instant::now);
    u64::try_from(origin.elapsed().as_nanos())
        .unwrap_or(u64::MAX)
        .max(1)
}

/// When this process's NIC last sent a frame to the fabric.
#[derive(Debug, Default)]
pub struct LastFrame(AtomicU64);

impl LastFrame {
    /// A frame leaves now.
    pub fn sent(&self) {
        self.0.store(mono_ns(), Ordering::Relaxed);
    }

    /// How long ago the last frame left; `None` if none has.
    #[must_use]
    pub fn since(&self) -> Option<Duration> {
        match self.0.load(Ordering::Relaxed) {
            0 => None,
            t => Some(Duration::from_nanos(mono_ns().saturating_sub(t))),
        }
    }
}

/// How many CQ polls of the program have returned completions (its way of seeing what
/// the NIC did): see [`program_polled`].
static POLLS: AtomicU64 = AtomicU64::new(0);

/// A CQ poll of the program returns completions: `ibv_poll_cq` counts such a call as it
/// returns (after it took the fabric's frames itself, when it did). An empty poll does
/// not count: one that began before the progress thread took the frames may end after.
pub fn program_polled() {
    POLLS.fetch_add(1, Ordering::Relaxed);
}

/// How many CQ polls of the program have returned completions so far.
#[must_use]
pub fn polls() -> u64 {
    POLLS.load(Ordering::Relaxed)
}

/// The MAC of the port of host `ip`: `02:00` and the address's four bytes, as the
/// simulator makes it (backend-sim's `PortConfig::with_ip`).
#[must_use]
pub fn mac_of(ip: Ipv4Addr) -> [u8; 6] {
    let o = ip.octets();
    [0x02, 0x00, o[0], o[1], o[2], o[3]]
}

/// When a host's frames were last taken, and how many CQ polls the program had made by
/// then.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Taken {
    /// When.
    pub at: Instant,
    /// [`polls`] then.
    pub polls: u64,
}

/// When the receiver last took a frame from each source MAC. The frames of one round
/// are taken at one time: [`TakenFrom::frame`] only notes a source that differs from the
/// frame before it (one comparison a frame), [`TakenFrom::round_done`] stamps the round's
/// sources.
#[derive(Debug, Default)]
pub struct TakenFrom {
    /// Source MACs and when a frame of theirs was last taken (a few hosts: a list).
    at: Vec<([u8; 6], Taken)>,
    /// Sources seen in the current round.
    round: Vec<[u8; 6]>,
}

impl TakenFrom {
    /// A frame (Ethernet, its source MAC at bytes 6..12) was taken.
    pub fn frame(&mut self, frame: &[u8]) {
        let Some(src) = frame.get(6..12) else {
            return;
        };
        if self.round.last().is_some_and(|l| l[..] == *src) {
            return;
        }
        let mut mac = [0u8; 6];
        mac.copy_from_slice(src);
        if !self.round.contains(&mac) {
            self.round.push(mac);
        }
    }

    /// The round's frames have all been taken (now).
    pub fn round_done(&mut self) {
        if self.round.is_empty() {
            return;
        }
        let now = Taken {
            at: Instant::now(),
            polls: polls(),
        };
        for mac in self.round.drain(..) {
            match self.at.iter_mut().find(|(m, _)| *m == mac) {
                Some(e) => e.1 = now,
                None => self.at.push((mac, now)),
            }
        }
    }

    /// When a frame of host `ip` was last taken, if one was.
    #[must_use]
    pub fn last_from(&self, ip: Ipv4Addr) -> Option<Taken> {
        let mac = mac_of(ip);
        self.at.iter().find(|(m, _)| *m == mac).map(|e| e.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame_from(ip: Ipv4Addr) -> Vec<u8> {
        let mut f = vec![0u8; 60];
        f[6..12].copy_from_slice(&mac_of(ip));
        f
    }

    #[test]
    fn the_last_frame_of_each_source_is_stamped_when_its_round_ends() {
        let (a, b) = (Ipv4Addr::new(10, 100, 0, 1), Ipv4Addr::new(10, 100, 0, 2));
        let mut t = TakenFrom::default();
        t.frame(&frame_from(a));
        assert_eq!(t.last_from(a), None, "not before the round ends");
        t.round_done();
        let first = t.last_from(a).expect("a's frame");
        assert_eq!(t.last_from(b), None);
        t.frame(&frame_from(b));
        t.frame(&frame_from(b));
        t.frame(&[0u8; 4]); // too short to have a source: ignored
        t.round_done();
        assert_eq!(t.last_from(a), Some(first), "a sent nothing in this round");
        assert!(t.last_from(b).expect("b's frame").at >= first.at);
    }

    #[test]
    fn no_frame_sent_means_no_time() {
        let l = LastFrame::default();
        assert_eq!(l.since(), None);
        l.sent();
        assert!(l.since().is_some());
    }
}
