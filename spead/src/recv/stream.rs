//! The sans-IO receive core: packets in, heaps out, with spead2's semantics.
//!
//! [`Stream::add_packet`] takes one packet's bytes, updates the live heaps and queues
//! finished heaps for [`Stream::pop_heap`]. It does no I/O, so UDP, TCP, memory and
//! (later) verbs transports all drive the same code. The per-packet path copies the
//! payload once into a pooled heap buffer and allocates nothing in steady state.
//!
//! Live heaps sit in a ring of `max_heaps` slots per substream, exactly as spead2 4.5.1:
//! a new heap takes the slot after the last one used (evicting whatever is there, even
//! when another slot is free), and a single-packet heap takes a slot too.

use std::collections::VecDeque;

use super::heap::Heap;
use super::pool::{MemoryPool, PoolBuffer, PoolStats};
use crate::wire::{
    decode_datagram, decode_packet, Flavour, Packet, WireError, HEAP_CNT_ID, PAYLOAD_LENGTH_ID,
};

/// Receiver configuration (spead2's `StreamConfig` plus our safety limits).
#[derive(Debug, Clone)]
pub struct StreamConfig {
    /// Live (partial) heaps per substream (spead2 default 4).
    pub max_heaps: usize,
    /// Substreams: heap `cnt` goes to substream `cnt % substreams`.
    pub substreams: usize,
    /// Accept packets of a heap in any order (range map) instead of strictly in order.
    pub allow_out_of_order: bool,
    /// Accept heaps without HEAP_LENGTH.
    pub allow_unsized_heaps: bool,
    /// Stop when a STREAM_CTRL = stop item arrives.
    pub stop_on_stop_item: bool,
    /// Deliver the stop heap itself.
    pub deliver_stop_heap: bool,
    /// Deliver incomplete heaps (with their ranges) instead of dropping them.
    pub deliver_incomplete: bool,
    /// Largest heap accepted (HEAP_LENGTH, or bytes seen for unsized heaps).
    pub max_heap_size: u64,
    /// Most distinct item pointers kept per heap.
    pub max_pointers_per_heap: usize,
    /// Most disjoint payload ranges tracked per heap in out-of-order mode.
    pub max_ranges_per_heap: usize,
    /// Where heap payload buffers come from.
    pub pool: MemoryPool,
}

impl Default for StreamConfig {
    fn default() -> Self {
        Self {
            max_heaps: 4,
            substreams: 1,
            allow_out_of_order: false,
            allow_unsized_heaps: true,
            stop_on_stop_item: true,
            deliver_stop_heap: false,
            deliver_incomplete: false,
            max_heap_size: 256 << 20,
            max_pointers_per_heap: 4096,
            max_ranges_per_heap: 65536,
            pool: MemoryPool::default(),
        }
    }
}

/// Counters. The first nine are spead2's, with spead2's meaning; the rest are ours.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Heaps that left the stream (complete, evicted or flushed).
    pub heaps: u64,
    /// Incomplete heaps evicted to make room for a new heap.
    pub incomplete_heaps_evicted: u64,
    /// Incomplete heaps flushed at stop.
    pub incomplete_heaps_flushed: u64,
    /// Packets decoded and offered to heap assembly.
    pub packets: u64,
    /// Batches of packets (one per `recvmmsg`, buffer, ...).
    pub batches: u64,
    /// Largest batch.
    pub max_batch: u64,
    /// Heaps that arrived in a single packet.
    pub single_packet_heaps: u64,
    /// Heap look-ups (one probe each: spead2 counts hash-table probes).
    pub search_dist: u64,
    /// Times a worker blocked on a full queue of heaps.
    pub worker_blocked: u64,
    /// Packets dropped by in-order mode (gaps, duplicates, new heaps not at offset 0).
    pub packets_dropped_in_order: u64,
    /// Packets dropped by out-of-order mode as duplicates or overlaps.
    pub packets_duplicate: u64,
    /// Packets that failed to decode (every [`WireError`]).
    pub packets_malformed: u64,
    /// Packets whose HEAP_LENGTH or flavour disagreed with their heap's.
    pub packets_inconsistent: u64,
    /// Packets of heaps longer than `max_heap_size` (or unsized when not allowed).
    pub packets_too_large: u64,
    /// Packets arriving after the stream stopped.
    pub packets_after_stop: u64,
    /// Incomplete heaps dropped rather than delivered.
    pub incomplete_heaps_dropped: u64,
    /// Item pointers dropped because a heap had too many.
    pub pointers_dropped: u64,
    /// Heap payload buffer pool statistics.
    pub pool: PoolStats,
}

/// Why a packet was not used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reject {
    /// It failed to decode.
    Malformed(WireError),
    /// In-order mode: not at the heap's next offset.
    OutOfOrder,
    /// Out-of-order mode: it overlaps bytes already received.
    Duplicate,
    /// HEAP_LENGTH differs from the heap's.
    HeapLengthMismatch,
    /// Flavour differs from the heap's.
    FlavourMismatch,
    /// The heap would exceed `max_heap_size`, or is unsized when not allowed.
    TooLarge,
    /// Too many disjoint ranges in one heap.
    TooFragmented,
    /// The stream has stopped.
    Stopped,
}

/// A heap being assembled.
#[derive(Debug)]
struct LiveHeap {
    cnt: u64,
    flavour: Flavour,
    heap_length: Option<u64>,
    received: u64,
    /// Payload, and the heap's item pointers with it.
    payload: PoolBuffer,
    ranges: Vec<(u64, u64)>,
    end_of_stream: bool,
}

#[derive(Debug)]
struct Substream {
    slots: Vec<Option<LiveHeap>>,
    head: usize,
}

/// Why a heap leaves the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Exit {
    Complete,
    Evicted,
    Flushed,
}

/// A SPEAD receive stream (sans-IO).
#[derive(Debug)]
pub struct Stream {
    config: StreamConfig,
    subs: Vec<Substream>,
    ready: VecDeque<Heap>,
    stats: Stats,
    stopped: bool,
    spare_ranges: Vec<Vec<(u64, u64)>>,
}

impl Stream {
    /// A stream with `config` (zero `max_heaps`/`substreams` are raised to 1).
    pub fn new(mut config: StreamConfig) -> Self {
        config.max_heaps = config.max_heaps.max(1);
        config.substreams = config.substreams.max(1);
        let subs = (0..config.substreams)
            .map(|_| Substream {
                slots: (0..config.max_heaps).map(|_| None).collect(),
                head: config.max_heaps - 1,
            })
            .collect();
        Self {
            config,
            subs,
            ready: VecDeque::with_capacity(64),
            stats: Stats::default(),
            stopped: false,
            spare_ranges: Vec::new(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &StreamConfig {
        &self.config
    }

    /// Counters, with a fresh snapshot of the pool statistics.
    pub fn stats(&self) -> Stats {
        let mut s = self.stats;
        s.pool = self.config.pool.stats();
        if s.packets > 0 && s.max_batch == 0 {
            s.max_batch = 1;
        }
        s
    }

    /// Mutable access to counters (for transports: `worker_blocked`).
    pub fn stats_mut(&mut self) -> &mut Stats {
        &mut self.stats
    }

    /// True once a stop item arrived (or [`Stream::stop`] was called).
    pub fn is_stopped(&self) -> bool {
        self.stopped
    }

    /// Records that a transport handed over `n` packets at once.
    pub fn note_batch(&mut self, n: usize) {
        if n > 0 {
            self.stats.batches += 1;
            self.stats.max_batch = self.stats.max_batch.max(n as u64);
        }
    }

    /// The next finished heap, oldest first.
    pub fn pop_heap(&mut self) -> Option<Heap> {
        self.ready.pop_front()
    }

    /// Number of finished heaps waiting.
    pub fn ready_len(&self) -> usize {
        self.ready.len()
    }

    /// Stops the stream, flushing live heaps.
    pub fn stop(&mut self) {
        if !self.stopped {
            self.stopped = true;
            self.flush();
        }
    }

    /// Flushes every live heap (counted as `incomplete_heaps_flushed`).
    pub fn flush(&mut self) {
        for s in 0..self.subs.len() {
            let n = self.config.max_heaps;
            for _ in 0..n {
                let sub = &mut self.subs[s];
                sub.head = (sub.head + 1) % n;
                let head = sub.head;
                if let Some(h) = sub.slots[head].take() {
                    self.finish(h, Exit::Flushed);
                }
            }
        }
    }

    /// Adds one datagram (exactly one packet, as for UDP).
    ///
    /// # Errors
    /// The [`Reject`] reason when the packet was dropped (it is also counted).
    pub fn add_datagram(&mut self, data: &[u8]) -> Result<(), Reject> {
        if self.stopped {
            self.stats.packets_after_stop += 1;
            return Err(Reject::Stopped);
        }
        match decode_datagram(data) {
            Ok(p) => self.add_decoded(&p),
            Err(e) => {
                self.stats.packets_malformed += 1;
                Err(Reject::Malformed(e))
            }
        }
    }

    /// Adds the packets found back to back in `data` (memory, files), stopping at the
    /// first one that does not decode (its boundary is then unknown) or at a stop.
    /// Returns the number of bytes consumed.
    pub fn add_buffer(&mut self, data: &[u8]) -> usize {
        let mut pos = 0;
        let mut n = 0;
        while pos < data.len() && !self.stopped {
            match decode_packet(&data[pos..]) {
                Ok(p) => {
                    pos += p.size();
                    n += 1;
                    let _ = self.add_decoded(&p);
                }
                Err(_) => {
                    self.stats.packets_malformed += 1;
                    break;
                }
            }
        }
        self.note_batch(n);
        pos
    }

    /// Adds a packet that has already been decoded.
    ///
    /// # Errors
    /// The [`Reject`] reason when the packet was dropped (it is also counted).
    pub fn add_decoded(&mut self, p: &Packet<'_>) -> Result<(), Reject> {
        if self.stopped {
            self.stats.packets_after_stop += 1;
            return Err(Reject::Stopped);
        }
        self.stats.packets += 1;
        let end = p.payload_offset + p.payload.len() as u64;
        let too_large = match p.heap_length {
            Some(hl) => hl > self.config.max_heap_size,
            None => !self.config.allow_unsized_heaps || end > self.config.max_heap_size,
        };
        if too_large {
            self.stats.packets_too_large += 1;
            return Err(Reject::TooLarge);
        }
        let s = (p.heap_cnt % self.subs.len() as u64) as usize;
        if p.heap_length == Some(p.payload.len() as u64) && p.payload_offset == 0 {
            self.stats.single_packet_heaps += 1;
            self.evict_next(s);
            let mut heap = self.new_live(p);
            Self::add_payload_unchecked(&self.config, &mut heap, p);
            Self::add_pointers(&self.config, &mut self.stats, &mut heap, p);
            self.after_add(s, None, heap);
            return Ok(());
        }
        self.stats.search_dist += 1;
        let sub = &self.subs[s];
        let matches = |slot: &Option<LiveHeap>| slot.as_ref().is_some_and(|h| h.cnt == p.heap_cnt);
        let found = if matches(&sub.slots[sub.head]) {
            Some(sub.head)
        } else {
            sub.slots.iter().position(matches)
        };
        match found {
            Some(idx) => {
                // Work on the heap in place: the common path moves nothing.
                let Self {
                    subs,
                    config,
                    stats,
                    ..
                } = self;
                let Some(heap) = subs[s].slots[idx].as_mut() else {
                    return Ok(());
                };
                Self::add_to_existing(config, stats, heap, p)?;
                Self::add_pointers(config, stats, heap, p);
                let done = heap.heap_length == Some(heap.received)
                    || (heap.end_of_stream && config.stop_on_stop_item);
                if done {
                    if let Some(heap) = subs[s].slots[idx].take() {
                        self.after_add(s, Some(idx), heap);
                    }
                }
                Ok(())
            }
            None => {
                if !self.config.allow_out_of_order && p.payload_offset != 0 {
                    self.stats.packets_dropped_in_order += 1;
                    return Err(Reject::OutOfOrder);
                }
                let idx = self.evict_next(s);
                let mut heap = self.new_live(p);
                Self::add_payload_unchecked(&self.config, &mut heap, p);
                Self::add_pointers(&self.config, &mut self.stats, &mut heap, p);
                self.after_add(s, Some(idx), heap);
                Ok(())
            }
        }
    }

    /// Advances the ring head of substream `s`, evicting its occupant. Returns the slot.
    fn evict_next(&mut self, s: usize) -> usize {
        let n = self.config.max_heaps;
        let sub = &mut self.subs[s];
        sub.head = (sub.head + 1) % n;
        let idx = sub.head;
        if let Some(old) = sub.slots[idx].take() {
            self.finish(old, Exit::Evicted);
        }
        idx
    }

    fn new_live(&mut self, p: &Packet<'_>) -> LiveHeap {
        let end = p.payload_offset + p.payload.len() as u64;
        let size = match p.heap_length {
            Some(hl) => hl as usize,
            None => (end as usize)
                .max(4096)
                .min(self.config.max_heap_size as usize),
        };
        let mut ranges = self.spare_ranges.pop().unwrap_or_default();
        ranges.clear();
        LiveHeap {
            cnt: p.heap_cnt,
            flavour: p.flavour,
            heap_length: p.heap_length,
            received: 0,
            payload: self.config.pool.acquire(size),
            ranges,
            end_of_stream: false,
        }
    }

    /// Checks and adds a packet to a heap that already exists.
    fn add_to_existing(
        config: &StreamConfig,
        stats: &mut Stats,
        h: &mut LiveHeap,
        p: &Packet<'_>,
    ) -> Result<(), Reject> {
        if p.flavour != h.flavour {
            stats.packets_inconsistent += 1;
            return Err(Reject::FlavourMismatch);
        }
        let start = p.payload_offset;
        let end = start + p.payload.len() as u64;
        match (h.heap_length, p.heap_length) {
            (Some(a), Some(b)) if a != b => {
                stats.packets_inconsistent += 1;
                return Err(Reject::HeapLengthMismatch);
            }
            (None, Some(b)) => {
                let seen = h.ranges.last().map_or(h.received, |r| r.1.max(h.received));
                if b < seen {
                    stats.packets_inconsistent += 1;
                    return Err(Reject::HeapLengthMismatch);
                }
            }
            _ => {}
        }
        if h.heap_length.or(p.heap_length).is_some_and(|hl| end > hl) {
            stats.packets_inconsistent += 1;
            return Err(Reject::HeapLengthMismatch);
        }
        if config.allow_out_of_order {
            let pos = h.ranges.partition_point(|r| r.0 < start);
            let overlaps_prev = pos > 0 && h.ranges[pos - 1].1 > start;
            let overlaps_next = pos < h.ranges.len() && h.ranges[pos].0 < end;
            if start < end && (overlaps_prev || overlaps_next) {
                stats.packets_duplicate += 1;
                return Err(Reject::Duplicate);
            }
            let merge_prev = pos > 0 && h.ranges[pos - 1].1 == start;
            let merge_next = pos < h.ranges.len() && h.ranges[pos].0 == end;
            if !merge_prev && !merge_next && h.ranges.len() >= config.max_ranges_per_heap {
                stats.packets_duplicate += 1;
                return Err(Reject::TooFragmented);
            }
        } else if start != h.received {
            stats.packets_dropped_in_order += 1;
            return Err(Reject::OutOfOrder);
        }
        if h.heap_length.is_none() {
            if let Some(b) = p.heap_length {
                h.heap_length = Some(b);
            }
        }
        Self::add_payload_unchecked(config, h, p);
        Ok(())
    }

    /// Copies the payload in and records its range (checks already done).
    fn add_payload_unchecked(config: &StreamConfig, h: &mut LiveHeap, p: &Packet<'_>) {
        let start = p.payload_offset;
        let len = p.payload.len();
        let end = start + len as u64;
        let need = h.heap_length.unwrap_or(end).max(end) as usize;
        if need > h.payload.len() {
            let grown = (h.payload.len() * 2)
                .max(need)
                .min(config.max_heap_size as usize)
                .max(need);
            h.payload.grow(grown);
        }
        h.payload.as_mut_slice()[start as usize..end as usize].copy_from_slice(p.payload);
        h.received += len as u64;
        if config.allow_out_of_order && len > 0 {
            let pos = h.ranges.partition_point(|r| r.0 < start);
            let merge_prev = pos > 0 && h.ranges[pos - 1].1 == start;
            let merge_next = pos < h.ranges.len() && h.ranges[pos].0 == end;
            match (merge_prev, merge_next) {
                (true, true) => {
                    h.ranges[pos - 1].1 = h.ranges[pos].1;
                    h.ranges.remove(pos);
                }
                (true, false) => h.ranges[pos - 1].1 = end,
                (false, true) => h.ranges[pos].0 = start,
                (false, false) => h.ranges.insert(pos, (start, end)),
            }
        }
    }

    fn add_pointers(config: &StreamConfig, stats: &mut Stats, h: &mut LiveHeap, p: &Packet<'_>) {
        let hab = p.flavour.heap_address_bits();
        let max_id = p.flavour.max_id();
        for raw in p.raw_pointers() {
            let id = (raw >> hab) & max_id;
            if raw >> 63 != 0 && (HEAP_CNT_ID..=PAYLOAD_LENGTH_ID).contains(&id) {
                continue;
            }
            let pointers = h.payload.pointers_mut();
            if pointers.contains(&raw) {
                continue;
            }
            if pointers.len() >= config.max_pointers_per_heap {
                stats.pointers_dropped += 1;
                continue;
            }
            pointers.push(raw);
        }
        h.end_of_stream |= p.stop;
    }

    /// After a packet was added: deliver the heap if complete, handle stop, or put it
    /// back in its slot.
    fn after_add(&mut self, s: usize, slot: Option<usize>, heap: LiveHeap) {
        let complete = heap.heap_length == Some(heap.received);
        let stopping = heap.end_of_stream && self.config.stop_on_stop_item;
        if stopping {
            if self.config.deliver_stop_heap {
                let exit = if complete {
                    Exit::Complete
                } else {
                    Exit::Flushed
                };
                self.finish(heap, exit);
            } else {
                self.recycle(heap);
            }
            self.stop();
            return;
        }
        if complete {
            self.finish(heap, Exit::Complete);
        } else if let Some(idx) = slot {
            self.subs[s].slots[idx] = Some(heap);
        } else {
            // A single-packet heap is always complete; nothing else reaches here.
            self.recycle(heap);
        }
    }

    fn recycle(&mut self, mut heap: LiveHeap) {
        heap.ranges.clear();
        self.spare_ranges.push(std::mem::take(&mut heap.ranges));
    }

    fn finish(&mut self, mut h: LiveHeap, exit: Exit) {
        self.stats.heaps += 1;
        match exit {
            Exit::Complete => {}
            Exit::Evicted => self.stats.incomplete_heaps_evicted += 1,
            Exit::Flushed => self.stats.incomplete_heaps_flushed += 1,
        }
        let complete = exit == Exit::Complete;
        let contiguous = complete
            || if self.config.allow_out_of_order {
                h.ranges.len() == 1 && h.ranges[0].0 == 0
            } else {
                h.received > 0
            };
        let unsized_ok = h.heap_length.is_none() && contiguous;
        if !complete && !unsized_ok && !self.config.deliver_incomplete {
            self.stats.incomplete_heaps_dropped += 1;
            self.recycle(h);
            return;
        }
        let payload_ranges = if complete {
            Vec::new()
        } else if self.config.allow_out_of_order {
            h.ranges.clone()
        } else if h.received > 0 {
            vec![(0, h.received)]
        } else {
            Vec::new()
        };
        let heap = Heap {
            cnt: h.cnt,
            flavour: h.flavour,
            complete,
            contiguous,
            heap_length: h.heap_length,
            received_length: h.received,
            payload_ranges,
            end_of_stream: h.end_of_stream,
            payload: std::mem::take(&mut h.payload),
        };
        self.recycle(h);
        self.ready.push_back(heap);
    }
}
