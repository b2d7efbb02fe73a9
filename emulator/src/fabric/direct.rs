//! Direct pairs: the frames between two joined processes' hosts go from one process's
//! NIC straight into the other's shared ring, without crossing the fabric process, as
//! shared-memory transports do (UCX's posix transport, memif).
//!
//! The fabric keeps control. It makes a pair for two processes only when neither host's
//! link has faults and nothing is captured (the frames between them then cross the
//! fabric unchanged, and its link model only delays them); it makes the rings (a sealed
//! memfd of two rings, [`super::ring`]) and two eventfds, one to wake each process, and
//! hands them to both (`P`, see [`super::wire`]). Unicast frames to the peer's MAC go in
//! the pair's ring; everything else (multicast, broadcast, other hosts, ports to real
//! networks) still goes through the fabric.
//!
//! Order per link: a process that learns of a pair keeps sending the peer's frames
//! through the fabric until none of its frames waits for room, then tells the fabric it
//! has switched (`S`) and from then on writes them into the pair's ring. The fabric
//! transmits what the process had put in its ring before, and when those frames have
//! reached their rings it tells the peer to open the pair (`O`); the peer reads the
//! pair's ring only once it has read its ring from the fabric up to where it stood then.
//! So no frame overtakes an earlier one between the same two hosts. A connection
//! manager's message, or the news that a host has gone, is handed on only once the pair
//! rings are read up to where they stood when it came (the peer wrote its frames before
//! it sent the message).
//!
//! Teardown: when a process goes, the fabric tells its peers (`U`, after the `O`); each
//! stops sending to it (frames still waiting for the pair's ring go through the fabric,
//! which counts them as for no process), reads what the pair's ring holds, drops the pair
//! and says so (`U`). The rings stay mapped in the fabric, which reads the pair's counts
//! of frames written and read for its summary. The memfd is sealed against shrinking:
//! nothing a dead or hostile peer does to it can make an access fault.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

use backend_sim::frame::eth::Mac;

use super::ring::{Consumer, Producer, Region, Way};
use super::sys;

/// The writing half of a pair, kept by the sender.
#[derive(Debug)]
pub struct PeerTx {
    /// The pair's id.
    pub id: u32,
    /// The peer's port MAC.
    pub mac: Mac,
    /// The ring to the peer.
    pub tx: Producer,
    /// The peer's eventfd.
    wake: OwnedFd,
    /// True once the fabric was told the peer's frames go here ([`super::wire`]'s `S`).
    pub switched: bool,
}

impl PeerTx {
    /// Wakes the peer (its consumer said it sleeps).
    pub fn ring(&self) {
        sys::ring_event(self.wake.as_fd());
    }
}

/// The reading half of a pair, kept by the receiver.
#[derive(Debug)]
struct PeerRx {
    id: u32,
    rx: Consumer,
    /// This process's eventfd, rung by the peer.
    wake: OwnedFd,
    /// Where the ring from the fabric stood when the fabric opened the pair: the pair's
    /// ring is read once that ring is read so far. `None`: not open yet.
    gate: Option<u64>,
    /// The peer has gone: read what is left, then drop.
    closing: bool,
}

/// Maps the pair the fabric handed over (its memfd, this process's eventfd, the peer's).
///
/// # Errors
/// A one-line reason: not three descriptors, or the rings do not map.
pub fn accept(
    id: u32,
    mac: Mac,
    ring: u32,
    first: bool,
    fds: Vec<OwnedFd>,
) -> Result<(PeerTx, PeerRxHandle), String> {
    let [memfd, mine, theirs]: [OwnedFd; 3] = fds
        .try_into()
        .map_err(|v: Vec<OwnedFd>| format!("a pair with {} descriptors, not 3", v.len()))?;
    let region = Region::map(memfd.as_fd(), ring as usize)
        .map_err(|e| format!("cannot map the rings of pair {id}: {e}"))?;
    let region = Arc::new(region);
    let (send, recv) = ways(first);
    Ok((
        PeerTx {
            id,
            mac,
            tx: Producer::new(region.clone(), send),
            wake: theirs,
            switched: false,
        },
        PeerRxHandle(PeerRx {
            id,
            rx: Consumer::new(region, recv),
            wake: mine,
            gate: None,
            closing: false,
        }),
    ))
}

/// The ring a pair's `first` process writes and the one it reads.
#[must_use]
pub fn ways(first: bool) -> (Way, Way) {
    if first {
        (Way::ToFabric, Way::FromFabric)
    } else {
        (Way::FromFabric, Way::ToFabric)
    }
}

/// The reading half of a new pair, for [`Inbound::add`].
#[derive(Debug)]
pub struct PeerRxHandle(PeerRx);

/// Where each pair's ring stood when a control message came: the message is handed on
/// once every one of them is read so far.
pub type Barrier = Vec<(u32, u64)>;

/// The pairs a process reads.
#[derive(Debug, Default)]
pub struct Inbound {
    peers: Vec<PeerRx>,
    /// The pair to look at first next time (so that none starves the others).
    next: usize,
}

impl Inbound {
    /// True if there is no pair.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.peers.is_empty()
    }

    /// Adds a new pair (closed until [`Inbound::open`]).
    pub fn add(&mut self, p: PeerRxHandle) {
        self.peers.push(p.0);
    }

    /// Opens pair `id` once the ring from the fabric is read up to `fabric_head`.
    pub fn open(&mut self, id: u32, fabric_head: u64) {
        if let Some(p) = self.peers.iter_mut().find(|p| p.id == id) {
            p.gate.get_or_insert(fabric_head);
        }
    }

    /// The peer of pair `id` has gone: what its ring holds is read (opening it now, after
    /// what the ring from the fabric holds, if the fabric never opened it), then it is
    /// dropped ([`Inbound::finished`]). False if there is no such pair.
    pub fn close(&mut self, id: u32, fabric_head: u64) -> bool {
        let Some(p) = self.peers.iter_mut().find(|p| p.id == id) else {
            return false;
        };
        p.gate.get_or_insert(fabric_head);
        p.closing = true;
        true
    }

    /// Takes the next frame from an open pair into `buf` (pairs in turn); `fabric_tail` is
    /// how far the ring from the fabric is read. Its index for the trace (the pair's
    /// count of frames) and whether the sender marked it sealed; `Ok(None)` when none has
    /// one.
    ///
    /// # Errors
    /// The id of a pair whose ring is corrupt (the caller drops it, [`Inbound::drop_pair`]).
    pub fn pop(&mut self, fabric_tail: u64, buf: &mut Vec<u8>) -> Result<Option<(u64, bool)>, u32> {
        self.take(fabric_tail, |frame, index, sealed| {
            buf.clear();
            buf.extend_from_slice(frame);
            (index, sealed)
        })
    }

    /// [`Inbound::pop`] that hands the frame to `f` where it lies in the pair's ring
    /// (with its index and seal) instead of copying it out.
    ///
    /// # Errors
    /// As [`Inbound::pop`].
    pub fn take<R>(
        &mut self,
        fabric_tail: u64,
        f: impl FnOnce(&[u8], u64, bool) -> R,
    ) -> Result<Option<R>, u32> {
        let n = self.peers.len();
        let mut f = Some(f);
        for k in 0..n {
            let i = (self.next + k) % n;
            let p = &mut self.peers[i];
            if p.gate.is_none_or(|g| fabric_tail < g) {
                continue;
            }
            // The trace's index: the pair's count of frames, this one included.
            let index = p.rx.taken() + 1;
            let got =
                p.rx.take(|frame, _, sealed| f.take().map(|f| f(frame, index, sealed)));
            match got {
                Ok(Some(r)) => {
                    self.next = (i + 1) % n;
                    return Ok(r);
                }
                Ok(None) => {}
                Err(_) => return Err(p.id),
            }
        }
        Ok(None)
    }

    /// Drops pair `id` at once (its ring is corrupt).
    pub fn drop_pair(&mut self, id: u32) {
        self.peers.retain(|p| p.id != id);
        self.next = 0;
    }

    /// Drops the pairs whose peer has gone and whose ring is read to its end; their ids.
    pub fn finished(&mut self) -> Vec<u32> {
        let mut done = Vec::new();
        self.peers.retain(|p| {
            let end = p.closing && p.rx.published() == p.rx.tail();
            if end {
                done.push(p.id);
            }
            !end
        });
        if !done.is_empty() {
            self.next = 0;
        }
        done
    }

    /// Before sleeping: asks every pair's peer to ring when it writes. True if a ring has
    /// frames already (then do not sleep).
    #[must_use]
    pub fn sleep_or_not(&self) -> bool {
        let mut any = false;
        for p in &self.peers {
            any |= p.rx.sleep_or_not();
        }
        any
    }

    /// Adds the pairs' eventfds to `fds`, for polling.
    pub fn poll_fds(&self, fds: &mut Vec<libc::pollfd>) {
        use std::os::fd::AsRawFd;
        fds.extend(self.peers.iter().map(|p| sys::pollin(p.wake.as_raw_fd())));
    }

    /// Clears the eventfds that rang.
    pub fn clear_events(&self) {
        for p in &self.peers {
            sys::clear_event(p.wake.as_fd());
        }
    }

    /// Where each pair's ring stands now.
    #[must_use]
    pub fn barrier(&self) -> Barrier {
        self.peers
            .iter()
            .map(|p| (p.id, p.rx.published()))
            .collect()
    }

    /// True when every pair of `b` still here is read up to where it stood.
    #[must_use]
    pub fn passed(&self, b: &Barrier) -> bool {
        b.iter().all(|&(id, at)| {
            self.peers
                .iter()
                .find(|p| p.id == id)
                .is_none_or(|p| p.rx.tail() >= at)
        })
    }
}

/// What the fabric makes for a pair: the sealed memfd of its rings (mapped, for its
/// counts) and each process's eventfd.
#[derive(Debug)]
pub struct Made {
    /// The rings' memfd.
    pub memfd: OwnedFd,
    /// The fabric's mapping of them.
    pub region: Arc<Region>,
    /// The eventfd of the pair's first process and of its second.
    pub wakes: [OwnedFd; 2],
}

/// Makes a pair's rings of `cap` bytes and eventfds.
///
/// # Errors
/// The failing call's error.
pub fn make(cap: usize) -> std::io::Result<Made> {
    let (memfd, region) = Region::create(cap)?;
    Ok(Made {
        memfd,
        region: Arc::new(region),
        wakes: [sys::eventfd()?, sys::eventfd()?],
    })
}

/// Two joined processes sending each other their frames directly: the fabric's record
/// (`server::pairs`).
#[derive(Debug)]
pub struct Pair {
    /// The pair's id.
    pub id: u32,
    /// The connections of the pair's first process and of its second.
    pub conns: [usize; 2],
    /// The fabric's mapping of the rings, for their counts.
    pub region: Arc<Region>,
    /// Each side has gone, or has dropped the pair after its peer went.
    pub done: [bool; 2],
}

/// What the fabric tells a side of a pair, once the frames transmitted before (global
/// index below `sent`) have reached their rings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PairNews {
    pub id: u32,
    /// The side told (0: the pair's first process).
    pub side: usize,
    /// True: open the pair; false: the peer has gone.
    pub open: bool,
    /// The global index the frames before it are below.
    pub sent: u64,
}

/// Frames the pairs carried: written into their rings, and read from them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DirectCounts {
    /// Frames the processes wrote into the pairs' rings.
    pub sent: u64,
    /// Frames the processes read from them, and, of the pairs forgotten, the frames
    /// written for a process that had gone (also counted as for no process, as a frame
    /// the switch delivers to a port without a process is).
    pub delivered: u64,
}

/// Both ways of a pair's rings, as their counts say (a count read is at most what was
/// written).
#[must_use]
pub fn pair_counts(region: &Region) -> DirectCounts {
    let mut c = DirectCounts::default();
    for first in [true, false] {
        let (written, read) = region.counts(ways(first).0);
        c.sent += written;
        c.delivered += read.min(written);
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    fn pair() -> (Made, [(PeerTx, PeerRxHandle); 2]) {
        let made = make(32 << 10).unwrap();
        let side = |first: bool, mine: usize| {
            let fds = vec![
                made.memfd.try_clone().unwrap(),
                made.wakes[mine].try_clone().unwrap(),
                made.wakes[1 - mine].try_clone().unwrap(),
            ];
            accept(9, Mac([2, 0, 0, 0, 0, 9]), 32 << 10, first, fds).unwrap()
        };
        let a = side(true, 0);
        let b = side(false, 1);
        (made, [a, b])
    }

    #[test]
    fn a_pair_carries_frames_both_ways_and_counts_them() {
        let (made, [(mut atx, arx), (mut btx, brx)]) = pair();
        let (mut ain, mut bin) = (Inbound::default(), Inbound::default());
        ain.add(arx);
        bin.add(brx);
        let mut buf = Vec::new();
        atx.tx.push(&[1; 60], 0).unwrap();
        // Closed until the fabric opens it.
        assert_eq!(bin.pop(0, &mut buf), Ok(None));
        bin.open(9, 100);
        assert_eq!(
            bin.pop(99, &mut buf),
            Ok(None),
            "gated on the fabric's ring"
        );
        assert_eq!(bin.pop(100, &mut buf), Ok(Some((1, false))));
        assert_eq!(buf, [1; 60]);
        // A frame its NIC sealed comes out sealed.
        btx.tx.push_record(&[2; 70], 0, true).unwrap();
        ain.open(9, 0);
        assert_eq!(ain.pop(0, &mut buf), Ok(Some((1, true))));
        assert_eq!(buf, [2; 70]);
        assert_eq!(made.region.counts(ways(true).0), (1, 1));
        assert_eq!(made.region.counts(ways(false).0), (1, 1));
    }

    #[test]
    fn a_sleeping_reader_is_woken_through_its_eventfd() {
        let (_made, [(mut atx, _), (_, brx)]) = pair();
        let mut bin = Inbound::default();
        bin.add(brx);
        bin.open(9, 0);
        assert!(!bin.sleep_or_not());
        let mut fds = Vec::new();
        bin.poll_fds(&mut fds);
        assert_eq!(
            sys::poll(&mut fds, Some(std::time::Duration::ZERO)).unwrap(),
            0
        );
        assert_eq!(atx.tx.push(&[3; 64], 0), Ok(true), "the reader sleeps");
        atx.ring();
        assert_eq!(
            sys::poll(&mut fds, Some(std::time::Duration::ZERO)).unwrap(),
            1
        );
        bin.clear_events();
        fds[0].revents = 0;
        assert_eq!(
            sys::poll(&mut fds, Some(std::time::Duration::ZERO)).unwrap(),
            0
        );
    }

    #[test]
    fn a_closing_pair_is_read_to_its_end_then_dropped() {
        let (made, [(mut atx, _), (_, brx)]) = pair();
        let mut bin = Inbound::default();
        bin.add(brx);
        for i in 0..3u8 {
            atx.tx.push(&[i; 64], 0).unwrap();
        }
        let barrier = bin.barrier();
        assert!(!bin.passed(&barrier));
        // The writer goes; its memory stays mapped here and in the fabric.
        drop(atx);
        assert!(bin.close(9, 0));
        assert!(!bin.close(8, 0));
        assert_eq!(bin.finished(), Vec::<u32>::new());
        let mut buf = Vec::new();
        for i in 0..3u8 {
            assert_eq!(bin.pop(0, &mut buf), Ok(Some((u64::from(i) + 1, false))));
            assert_eq!(buf, [i; 64]);
        }
        assert!(bin.passed(&barrier));
        assert_eq!(bin.finished(), vec![9]);
        assert!(bin.is_empty());
        assert_eq!(made.region.counts(ways(true).0), (3, 3));
        drop(made);
    }

    #[test]
    fn pairs_take_turns() {
        let made = make(32 << 10).unwrap();
        let other = make(32 << 10).unwrap();
        let mut bin = Inbound::default();
        let mut writers = Vec::new();
        for (id, m) in [(1, &made), (2, &other)] {
            let fds = |x: &Made| {
                vec![
                    x.memfd.try_clone().unwrap(),
                    x.wakes[0].try_clone().unwrap(),
                    x.wakes[1].try_clone().unwrap(),
                ]
            };
            let (w, _) = accept(id, Mac([2, 0, 0, 0, 0, 1]), 32 << 10, true, fds(m)).unwrap();
            let (_, r) = accept(id, Mac([2, 0, 0, 0, 0, 2]), 32 << 10, false, fds(m)).unwrap();
            bin.add(r);
            bin.open(id, 0);
            writers.push(w);
        }
        for w in &mut writers {
            for _ in 0..2 {
                w.tx.push(&[w.id as u8; 60], 0).unwrap();
            }
        }
        let mut buf = Vec::new();
        let mut order = Vec::new();
        while bin.pop(0, &mut buf).unwrap().is_some() {
            order.push(buf[0]);
        }
        assert_eq!(order, [1, 2, 1, 2]);
        let _ = made.memfd.as_fd();
    }

    #[test]
    fn a_pair_of_two_descriptors_is_refused() {
        let made = make(32 << 10).unwrap();
        let fds = vec![
            made.memfd.try_clone().unwrap(),
            made.wakes[0].try_clone().unwrap(),
        ];
        let e = accept(1, Mac([0; 6]), 32 << 10, true, fds).unwrap_err();
        assert_eq!(e, "a pair with 2 descriptors, not 3");
    }
}
