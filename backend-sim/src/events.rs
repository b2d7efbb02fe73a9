//! The single event queue, ordered by (time, sequence). The sequence number is the order
//! in which events were scheduled, so two events at the same instant are taken in a fixed
//! order and a run never depends on heap internals or on the host machine.

use crate::clock::Nanos;
use crate::ids::PortId;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// What happens when an event comes due.
#[derive(Debug)]
pub(crate) enum EventKind {
    /// A frame finished crossing a host's uplink and reaches the switch.
    AtSwitch {
        from: PortId,
        frame: Vec<u8>,
        index: u64,
    },
    /// A frame reaches a host port (over its downlink, or by NIC loopback).
    Arrive {
        to: PortId,
        frame: Vec<u8>,
        index: u64,
    },
    /// A timer set by the layer above (the verbs model) fires.
    Timer { token: u64 },
    /// The next record of a pcap replay is due.
    Replay { id: usize },
}

#[derive(Debug)]
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
#[derive(Debug, Default)]
pub(crate) struct EventQueue {
    heap: BinaryHeap<Event>,
    next_seq: u64,
}

impl EventQueue {
    pub fn push(&mut self, time: Nanos, kind: EventKind) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.heap.push(Event { time, seq, kind });
    }

    pub fn pop(&mut self) -> Option<Event> {
        self.heap.pop()
    }

    pub fn peek_time(&self) -> Option<Nanos> {
        self.heap.peek().map(|e| e.time)
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }
}
