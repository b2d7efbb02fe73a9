//! What a run reports: what was sent, and what each receiver made of it.

use std::collections::{BTreeMap, BTreeSet};

/// One heap a sender sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentHeap {
    /// Sender index.
    pub sender: usize,
    /// Heap counter.
    pub cnt: u64,
    /// Payload bytes.
    pub len: usize,
    /// Digest of the payload.
    pub digest: u64,
    /// Packets it took.
    pub packets: u32,
}

/// One heap a receiver's stream delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceivedHeap {
    /// Heap counter.
    pub cnt: u64,
    /// Whether every byte arrived.
    pub complete: bool,
    /// Digest of the payload (complete heaps only).
    pub digest: Option<u64>,
    /// Bytes received.
    pub received: u64,
    /// Heap length as the packets said.
    pub heap_len: u64,
    /// When it was delivered (simulated ns on the simulator; 0 on hardware).
    pub at_ns: u64,
}

/// One receiver's report.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ReceiverReport {
    /// Delivered heaps, in delivery order.
    pub heaps: Vec<ReceivedHeap>,
    /// Packets the transport received (frames that reached the receiver's queue).
    pub packets_received: u64,
    /// Packets accepted into heaps.
    pub packets_accepted: u64,
    /// Packets dropped, by cause (e.g. "checksum", "not_spead", "duplicate", "evicted").
    pub dropped: BTreeMap<String, u64>,
    /// The highest number of bytes held in live heaps and receive buffers at once.
    pub peak_memory: u64,
    /// The bound the configuration promises for `peak_memory`.
    pub memory_bound: u64,
}

/// The whole run.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Outcome {
    /// Every heap sent, by every sender.
    pub sent: Vec<SentHeap>,
    /// Packets put on the wire (after sender-side faults).
    pub packets_sent: u64,
    /// Per receiver, in the scenario's order.
    pub receivers: Vec<ReceiverReport>,
    /// The fabric's trace hash (simulator only).
    pub trace_hash: Option<u64>,
    /// Heaps corruption that nothing below the application can see touched (simulator
    /// only): for every packet a buggy sender corrupted, the heap counter it was sent with
    /// and the one it carries after the flip (a flip may move a packet to another heap);
    /// for every packet flipped in the switch that the receiving NIC's checks passed (the
    /// Internet checksum misses some pairs of flips), the heap counter it arrived with.
    /// Such a heap may legitimately complete with wrong bytes.
    pub tainted: BTreeSet<u64>,
}
