//! The fabric's side of the direct pairs ([`crate::fabric::direct`]): it makes a pair
//! for each two joined processes whose hosts' links have no faults when nothing is
//! captured, opens each way once the frames sent before the switch have arrived, tells a
//! process when its peer has gone, and counts the pairs' frames from the counts in their
//! rings.

use std::os::fd::AsFd;

use super::{transmit_ring, Server};
use crate::fabric::direct::{self, pair_counts, DirectCounts, Pair, PairNews};
use crate::fabric::ring::DEFAULT_CAP;
use crate::fabric::sys;
use crate::fabric::wire::FromFabric;

impl Server {
    /// True if host slot `s` may have pairs: pairs are on, nothing is captured and its
    /// link has no faults.
    fn pairs_allowed(&self, s: usize) -> bool {
        self.direct && !self.capturing && self.slots[s].clean
    }

    /// Makes a pair of connection `i` (just joined) with each other joined process that
    /// may have one.
    pub(super) fn pair_up(&mut self, i: usize) {
        let Some(s) = self.conns[i].as_ref().and_then(|c| c.host) else {
            return;
        };
        if !self.pairs_allowed(s) {
            return;
        }
        let others: Vec<(usize, usize)> = self
            .conns
            .iter()
            .enumerate()
            .filter(|&(j, _)| j != i)
            .filter_map(|(j, c)| Some((j, c.as_ref()?.host?)))
            .filter(|&(_, t)| self.pairs_allowed(t))
            .collect();
        for (j, t) in others {
            if let Err(e) = self.make_pair([i, j], [s, t]) {
                eprintln!(
                    "verbs-emu-fabric: no direct pair for {} and {}: {e}",
                    self.slots[s].name, self.slots[t].name
                );
            }
        }
    }

    fn make_pair(&mut self, conns: [usize; 2], slots: [usize; 2]) -> std::io::Result<()> {
        let made = direct::make(DEFAULT_CAP)?;
        let id = self.next_pair;
        self.next_pair = self.next_pair.wrapping_add(1);
        let ring = u32::try_from(made.region.cap()).map_err(std::io::Error::other)?;
        for side in 0..2 {
            let msg = FromFabric::Peer {
                id,
                mac: self.slots[slots[1 - side]].mac,
                ring,
                first: side == 0,
            };
            msg.encode(&mut self.out);
            let Some(c) = self.conns[conns[side]].as_ref() else {
                continue;
            };
            let fds = [
                made.memfd.as_fd(),
                made.wakes[side].as_fd(),
                made.wakes[1 - side].as_fd(),
            ];
            if let Err(e) = sys::send_with_fds(c.fd.as_fd(), &self.out, &fds) {
                if side == 1 {
                    // The first has it: it drops it once told its peer has gone.
                    self.tell(conns[0], FromFabric::Unpeer(id));
                }
                return Err(e);
            }
        }
        self.pairs.push(Pair {
            id,
            conns,
            region: made.region,
            done: [false; 2],
        });
        Ok(())
    }

    fn tell(&mut self, conn: usize, m: FromFabric<'_>) {
        m.encode(&mut self.out);
        if let Some(c) = self.conns[conn].as_ref() {
            // A full socket holds messages enough to wake the process; a gone one is
            // found by the round's read.
            let _ = sys::send(c.fd.as_fd(), &self.out, true);
        }
    }

    /// Connection `i` says it sends pair `id`'s peer its frames directly from now on:
    /// what it put in its ring before goes on the wire now, and the peer opens the pair
    /// once those frames have reached their rings. An unknown pair (gone meanwhile) is
    /// no error.
    pub(super) fn switched(&mut self, i: usize, id: u32) {
        let Some(p) = self.pairs.iter().find(|p| p.id == id) else {
            return;
        };
        let Some(side) = p.conns.iter().position(|&c| c == i) else {
            return;
        };
        let c = self.conns[i].as_mut();
        if let Some((port, (rx, _))) =
            c.and_then(|c| Some((self.slots[c.host?].port, c.rings.as_mut()?)))
        {
            // A corrupt ring is found, and hung up on, by the round's own read.
            let _ = transmit_ring(&mut self.fabric, &mut self.spare, port, rx, usize::MAX);
        }
        let sent = self.fabric.stats().transmitted;
        self.held_pairs.push_back(PairNews {
            id,
            side: 1 - side,
            open: true,
            sent,
        });
        self.release_pairs();
    }

    /// Tells the pairs' sides what waits for no frame any more, in order.
    pub(super) fn release_pairs(&mut self) {
        while let Some(&n) = self.held_pairs.front() {
            if !self.arrived_before(n.sent) {
                return;
            }
            self.held_pairs.pop_front();
            let Some(p) = self.pairs.iter().find(|p| p.id == n.id) else {
                continue;
            };
            if p.done[n.side] {
                continue;
            }
            let conn = p.conns[n.side];
            let m = if n.open {
                FromFabric::Open(n.id)
            } else {
                FromFabric::Unpeer(n.id)
            };
            self.tell(conn, m);
        }
    }

    /// Connection `i` has dropped pair `id` (its peer went).
    pub(super) fn unpeered(&mut self, i: usize, id: u32) {
        if let Some(p) = self.pairs.iter_mut().find(|p| p.id == id) {
            if let Some(side) = p.conns.iter().position(|&c| c == i) {
                p.done[side] = true;
            }
        }
        self.finish_pairs();
    }

    /// Connection `i` has gone: its peers are told (after any opening of theirs), and
    /// pairs both of whose sides are done are counted and forgotten.
    pub(super) fn pairs_gone(&mut self, i: usize) {
        let mut news = Vec::new();
        for p in &mut self.pairs {
            if let Some(side) = p.conns.iter().position(|&c| c == i) {
                p.done[side] = true;
                if !p.done[1 - side] {
                    news.push(PairNews {
                        id: p.id,
                        side: 1 - side,
                        open: false,
                        sent: 0,
                    });
                }
            }
        }
        self.held_pairs.extend(news);
        self.finish_pairs();
        self.release_pairs();
    }

    /// Counts and forgets the pairs both of whose sides are done: frames written and not
    /// read were for a process that had gone (delivered to its port, for no process).
    fn finish_pairs(&mut self) {
        let mut k = 0;
        while k < self.pairs.len() {
            if self.pairs[k].done != [true; 2] {
                k += 1;
                continue;
            }
            let p = self.pairs.swap_remove(k);
            let c = pair_counts(&p.region);
            // As for a frame the switch delivers to a port whose process has gone: it
            // counts as delivered, and as for no process.
            self.finished_direct.sent += c.sent;
            self.finished_direct.delivered += c.sent;
            self.stats.no_process += c.sent - c.delivered;
        }
    }

    /// The frames the pairs carried, those alive and those forgotten.
    #[must_use]
    pub fn direct_counts(&self) -> DirectCounts {
        let mut all = self.finished_direct;
        for p in &self.pairs {
            let c = pair_counts(&p.region);
            all.sent += c.sent;
            all.delivered += c.delivered;
        }
        all
    }
}
