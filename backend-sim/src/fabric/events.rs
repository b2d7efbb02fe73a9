//! The single event queue, ordered by (time, sequence). The sequence number is the order
//! in which events were scheduled, so two events at the same instant are taken in a fixed
//! order and a run never depends on heap internals or on the host machine.

use crate::clock::Nanos;
use crate::ids::PortId;
use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

/// What happens when an event comes due.
#[derive(Debug, Clone)]
pub(crate) enum EventKind {
    /// A frame finished crossing a host's uplink and reaches the switch.
    AtSwitch {
        from: PortId,
        frame: Vec<u8>,
        index: u64,
        sealed: bool,
    },
    /// A frame reaches a host port (over its downlink, or by NIC loopback).
    Arrive {
        to: PortId,
        frame: Vec<u8>,
        index: u64,
        sealed: bool,
    },
    /// A timer set by the layer above (the verbs model) fires.
    Timer { token: u64 },
    /// The next record of a pcap replay is due.
    Replay { id: usize },
}

#[derive(Debug, Clone)]
pub(crate) struct Event {
    pub time: Nanos,
    pub seq: u64,
    pub kind: EventKind,
}

impl PartialEq for Event {
    fn eq(&self, other: &Self) -> bool {
        self.time == other.time && self.seq == other.seq
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Event {
    // Reversed so that std's max-heap yields the earliest (time, seq) first.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.time, other.seq).cmp(&(self.time, self.seq))
    }
}

/// A min-queue of events by (time, sequence).
///
/// Most events are scheduled in time order (a link is a FIFO with a fixed latency), so
/// an event that sorts after everything in `tail` is appended there in O(1); the rest go
/// to the heap. Popping takes the smaller head of the two. The order is exactly the
/// (time, sequence) order either way, so the split is invisible to the trace.
#[derive(Debug, Default, Clone)]
pub(crate) struct EventQueue {
    heap: BinaryHeap<Event>,
    tail: VecDeque<Event>,
    next_seq: u64,
}

impl EventQueue {
    pub fn push(&mut self, time: Nanos, kind: EventKind) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let e = Event { time, seq, kind };
        // seq grows, so "after the tail's last" only needs the time.
        if self.tail.back().is_none_or(|b| b.time <= time) {
            self.tail.push_back(e);
        } else {
            self.heap.push(e);
        }
    }

    fn tail_first(&self) -> bool {
        match (self.tail.front(), self.heap.peek()) {
            (Some(t), Some(h)) => (t.time, t.seq) < (h.time, h.seq),
            (Some(_), None) => true,
            _ => false,
        }
    }

    pub fn pop(&mut self) -> Option<Event> {
        if self.tail_first() {
            self.tail.pop_front()
        } else {
            self.heap.pop()
        }
    }

    pub fn peek_time(&self) -> Option<Nanos> {
        if self.tail_first() {
            self.tail.front().map(|e| e.time)
        } else {
            self.heap.peek().map(|e| e.time)
        }
    }

    pub fn len(&self) -> usize {
        self.heap.len() + self.tail.len()
    }

    /// True while a frame whose global index is below `index` is still on its way.
    pub fn holds_frame_below(&self, index: u64) -> bool {
        self.heap.iter().chain(&self.tail).any(|e| match e.kind {
            EventKind::AtSwitch { index: i, .. } | EventKind::Arrive { index: i, .. } => i < index,
            EventKind::Timer { .. } | EventKind::Replay { .. } => false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_below_an_index_are_found_wherever_they_wait() {
        let mut q = EventQueue::default();
        q.push(5, EventKind::Timer { token: 0 });
        let frame = |index| EventKind::Arrive {
            to: PortId(1),
            frame: vec![0; 14],
            index,
            sealed: false,
        };
        q.push(9, frame(7));
        // Earlier than the tail's last: it goes to the heap.
        q.push(2, frame(3));
        assert!(!q.holds_frame_below(3));
        assert!(q.holds_frame_below(4));
        assert!(q.holds_frame_below(8));
        while q.pop().is_some_and(|e| e.time < 9) {}
        assert!(!q.holds_frame_below(u64::MAX), "all popped");
    }

    #[test]
    fn pops_in_time_then_sequence_order_whatever_the_push_order() {
        let mut q = EventQueue::default();
        let times = [5u64, 5, 3, 9, 9, 1, 7, 5, 2, 8, 8, 0, 6];
        for (i, &t) in times.iter().enumerate() {
            q.push(t, EventKind::Timer { token: i as u64 });
        }
        let mut expect: Vec<(u64, u64)> = times
            .iter()
            .enumerate()
            .map(|(i, &t)| (t, i as u64))
            .collect();
        expect.sort_unstable();
        let mut got = Vec::new();
        while let Some(e) = q.pop() {
            assert_eq!(q.len(), times.len() - got.len() - 1);
            got.push((e.time, e.seq));
        }
        assert_eq!(got, expect);
    }
}
