//! Whether the reader of a ring this host writes has stopped reading: the peer's NIC (in
//! its process, a direct pair's peer) or the fabric process was not scheduled, or was
//! stopped (SIGSTOP, a debugger), while frames this host sent wait in the ring unread.
//!
//! A real NIC keeps taking frames and answering while its host's CPU is busy; an
//! emulated one runs in its program's process and stops with it. While it does, the
//! frames this host sent it are not answered, and this host's RC requester would count
//! the time against its ACK timer and give up with `IBV_WC_RETRY_EXC_ERR` (a READ
//! responder stopped for longer than 8 ACK timeouts: 0.54 s at perftest's `timeout`
//! 14). [`Member`](super::member::Member) holds this host's virtual time still while a
//! reader stalls, as it does while the fabric pauses it: the NIC sends nothing new and
//! its timers wait for the reader.

use backend_sim::Nanos;

/// How long (wall clock) the frames a ring holds may wait unread before its reader counts
/// as stalled. A reader that runs takes them within a round of its progress thread (which
/// sleeps 1 ms at a time while a program polls) or of a polling program: several times
/// that is a reader that did not run, not one that is busy.
pub const STALL: Nanos = 5_000_000;

/// A ring's reading position as its writer sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mark {
    /// The ring: `None` the fabric's, else a direct pair's id.
    pub way: Option<u32>,
    /// How far its reader has read (bytes, only grows).
    pub consumed: u64,
    /// Bytes written and not read yet.
    pub queued: u64,
}

/// Watches the rings this host writes: when each reader last moved, or its ring was last
/// empty.
#[derive(Debug, Default)]
pub struct StallWatch {
    /// Per ring: its mark when last seen, and the wall-clock time since which its reader
    /// has not moved while frames waited.
    seen: Vec<(Mark, Nanos)>,
    /// The next round's `seen` while it is made (kept, so that a round, which runs at
    /// every poll of a CQ, allocates nothing once the rings are known).
    next: Vec<(Mark, Nanos)>,
}

impl StallWatch {
    /// Takes the rings' marks at wall-clock time `now` (nanoseconds); true if a reader
    /// has left frames unread for [`STALL`] or longer (it has not read since, and its
    /// ring was not empty).
    pub fn stalled(&mut self, now: Nanos, marks: impl IntoIterator<Item = Mark>) -> bool {
        let mut next = std::mem::take(&mut self.next);
        next.clear();
        let mut stalled = false;
        for m in marks {
            let before = self.seen.iter().find(|(b, _)| b.way == m.way);
            let since = match before {
                // Frames waited when last seen and the reader has not moved since.
                Some(&(b, since)) if b.queued > 0 && b.consumed == m.consumed => since,
                _ => now,
            };
            if m.queued > 0 && now.saturating_sub(since) >= STALL {
                stalled = true;
            }
            next.push((m, since));
        }
        self.next = std::mem::replace(&mut self.seen, next);
        stalled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark(way: Option<u32>, consumed: u64, queued: u64) -> Mark {
        Mark {
            way,
            consumed,
            queued,
        }
    }

    #[test]
    fn an_empty_ring_never_stalls() {
        let mut w = StallWatch::default();
        assert!(!w.stalled(0, [mark(None, 0, 0)]));
        assert!(!w.stalled(10 * STALL, [mark(None, 0, 0)]));
    }

    #[test]
    fn frames_unread_for_the_stall_time_stall_until_the_reader_moves() {
        let mut w = StallWatch::default();
        assert!(!w.stalled(1_000, [mark(Some(3), 100, 64)]));
        assert!(!w.stalled(1_000 + STALL - 1, [mark(Some(3), 100, 64)]));
        assert!(w.stalled(1_000 + STALL, [mark(Some(3), 100, 64)]));
        // More frames written, none read: still stalled.
        assert!(w.stalled(1_000 + 2 * STALL, [mark(Some(3), 100, 128)]));
        // The reader took some: it runs again, counted from now.
        let t = 1_000 + 3 * STALL;
        assert!(!w.stalled(t, [mark(Some(3), 164, 64)]));
        assert!(!w.stalled(t + STALL - 1, [mark(Some(3), 164, 64)]));
        assert!(w.stalled(t + STALL, [mark(Some(3), 164, 64)]));
    }

    #[test]
    fn a_ring_that_was_empty_counts_from_when_frames_were_first_seen_in_it() {
        let mut w = StallWatch::default();
        assert!(!w.stalled(0, [mark(None, 0, 0)]));
        // Frames came long after the ring was last seen empty: they wait from now.
        assert!(!w.stalled(100 * STALL, [mark(None, 0, 64)]));
        assert!(w.stalled(101 * STALL, [mark(None, 0, 64)]));
    }

    #[test]
    fn one_stalled_reader_among_running_ones_stalls_and_a_ring_gone_is_forgotten() {
        let mut w = StallWatch::default();
        let fabric = |c| mark(None, c, 64);
        assert!(!w.stalled(0, [fabric(0), mark(Some(1), 0, 64)]));
        assert!(w.stalled(STALL, [fabric(64), mark(Some(1), 0, 64)]));
        // The pair is gone: only the fabric's ring is left, and its reader runs.
        assert!(!w.stalled(2 * STALL, [fabric(128)]));
        // A new pair with the same id starts afresh.
        assert!(!w.stalled(2 * STALL + 1, [fabric(192), mark(Some(1), 0, 64)]));
    }
}
