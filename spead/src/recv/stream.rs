//! The sans-IO receive core: packets in, heaps out, with spead2's semantics.
//!
//! [`Stream::add_datagram`], [`Stream::add_buffer`] and [`Stream::add_decoded`] take
//! packets, update the live heaps and hand finished heaps to the stream's [`HeapSink`]:
//! for a plain [`Stream`] a queue read with [`Stream::pop_heap`], for a
//! [`super::ChunkStream`] chunks. No I/O happens here,
//! so UDP, TCP, memory, pcap and verbs transports all drive the same code. The
//! per-packet path copies the payload once and allocates nothing in steady state.
//!
//! The rules follow spead2 4.5.1 `src/recv_stream.cpp` (`stream_base::add_packet`) and
//! `src/recv_live_heap.cpp` (`live_heap::add_packet`):
//! - live heaps sit in a ring of `max_heaps` slots per substream: a new heap takes the
//!   slot after the last one used (evicting whatever is there, even when another slot
//!   is free), and a single-packet heap takes a slot too;
//! - a heap is complete when the bytes received equal HEAP_LENGTH *and* no item pointer
//!   addresses beyond it (`min_length`); it is contiguous when the bytes received equal
//!   `min_length`;
//! - a stop item stops the stream; a complete stop heap is not delivered, an incomplete
//!   one is flushed with the rest.

use super::config::StreamConfig;
use super::heap::Heap;
use super::next::{prefetch_ahead, Next, PLAIN_HEADER};
use super::reject::Reject;
use super::sink::{Exit, HeapQueue, HeapSink, LiveHeap};
use super::slot::{Slot, Substream};
use super::stats::Stats;
use crate::wire::{
    decode_datagram, decode_packet, Packet, HEAP_CNT_ID, HEAP_LENGTH_ID, PAYLOAD_LENGTH_ID,
    PAYLOAD_OFFSET_ID,
};

/// A SPEAD receive stream (sans-IO). `Stream` (the default sink) queues heaps for
/// [`Stream::pop_heap`]; [`super::ChunkStream`] writes them into chunks.
///
/// Aligned to 128 bytes (two cache lines, the unit adjacent-line prefetchers fetch), so
/// that streams fed by different threads never share a cache line: two streams of a
/// chunk group made one after the other, whose fields are written for every packet,
/// otherwise could (seen: two readers of 64-byte packets at 77 Mpkt/s instead of 140).
#[derive(Debug)]
#[repr(align(128))]
pub struct Stream<H: HeapSink = HeapQueue> {
    config: StreamConfig,
    subs: Vec<Substream<H::Storage>>,
    pub(crate) sink: H,
    stats: Stats,
    stopped: bool,
    started: bool,
    /// The address up to which [`Stream::add_packets`] last prefetched (a hint only:
    /// compared with the next call's buffer, never dereferenced).
    prefetched: usize,
    /// The prediction [`Stream::add_packets`] ended with, for its next call: valid
    /// while nothing else touches the stream (every other way in clears it).
    next: Option<Next>,
}

impl Stream<HeapQueue> {
    /// A stream with `config` (zero `max_heaps`/`substreams` are raised to 1).
    pub fn new(config: StreamConfig) -> Self {
        let sink = HeapQueue::new(
            config.pool.clone(),
            config.deliver_incomplete,
            config.max_heap_size,
        );
        Self::with_sink(config, sink)
    }

    /// The next finished heap, oldest first.
    pub fn pop_heap(&mut self) -> Option<Heap> {
        self.sink.ready.pop_front()
    }

    /// Number of finished heaps waiting.
    pub fn ready_len(&self) -> usize {
        self.sink.ready.len()
    }

    /// Counters, with a fresh snapshot of the pool statistics.
    pub fn stats(&self) -> Stats {
        let mut s = self.stats.clone();
        s.pool = self.sink.pool().stats();
        s
    }
}

impl<H: HeapSink> Stream<H> {
    pub(crate) fn with_sink(mut config: StreamConfig, sink: H) -> Self {
        config.max_heaps = config.max_heaps.max(1);
        config.substreams = config.substreams.max(1);
        if !sink.allows_unsized() {
            config.allow_unsized_heaps = false;
        }
        let subs = (0..config.substreams)
            .map(|_| Substream {
                slots: (0..config.max_heaps).map(|_| Slot::new()).collect(),
                head: config.max_heaps - 1,
            })
            .collect();
        let stats = Stats::new(&config.stats);
        let started = !config.explicit_start;
        Self {
            config,
            subs,
            sink,
            stats,
            stopped: false,
            started,
            prefetched: 0,
            next: None,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &StreamConfig {
        &self.config
    }

    /// Counters as they stand (pool statistics are filled by [`Stream::stats`]).
    pub fn raw_stats(&self) -> &Stats {
        &self.stats
    }

    /// Mutable access to counters (for transports: `worker_blocked`,
    /// `packets_malformed`; for users: custom counters).
    pub fn stats_mut(&mut self) -> &mut Stats {
        &mut self.stats
    }

    /// True once a stop item arrived (or [`Stream::stop`] was called).
    pub fn is_stopped(&self) -> bool {
        self.stopped
    }

    /// True unless this is an `explicit_start` stream not yet started.
    pub fn is_started(&self) -> bool {
        self.started
    }

    /// Starts an `explicit_start` stream (spead2's `stream::start`); no effect otherwise.
    pub fn start(&mut self) {
        self.next = None;
        self.started = true;
    }

    /// Records that a transport handed over `n` packets at once.
    pub fn note_batch(&mut self, n: usize) {
        if n > 0 {
            self.stats.batches += 1;
            self.stats.max_batch = self.stats.max_batch.max(n as u64);
        }
    }

    /// Stops the stream, flushing live heaps.
    pub fn stop(&mut self) {
        self.next = None;
        if !self.stopped {
            self.stopped = true;
            self.flush();
            self.sink.stopped(&mut self.stats);
        }
    }

    /// Flushes every live heap (counted as `incomplete_heaps_flushed`), oldest slot
    /// first in each substream, as spead2's `flush_unlocked`.
    pub fn flush(&mut self) {
        self.next = None;
        let n = self.config.max_heaps;
        for s in 0..self.subs.len() {
            for _ in 0..n {
                let sub = &mut self.subs[s];
                sub.head = (sub.head + 1) % n;
                let head = sub.head;
                if sub.slots[head].is_some() {
                    self.finish_slot(s, head, Exit::Flushed);
                }
            }
        }
    }

    /// Adds one datagram (exactly one packet, as for UDP).
    ///
    /// # Errors
    /// The [`Reject`] reason when the packet was dropped (it is also counted).
    pub fn add_datagram(&mut self, data: &[u8]) -> Result<(), Reject> {
        if let Some(r) = self.refuse() {
            return Err(r);
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
        self.add_packets(data, usize::MAX)
    }

    /// As [`Stream::add_buffer`], but adds at most `max_packets` packets (so a memory
    /// reader can take finished heaps out between batches, as spead2's reader hands
    /// its ring a batch at a time). Returns the number of bytes consumed; less than
    /// `data.len()` when `max_packets` were added, the stream stopped, or the packet
    /// at the returned offset does not decode (counted as malformed).
    pub fn add_packets(&mut self, data: &[u8], max_packets: usize) -> usize {
        let mut pos = 0;
        let mut n = 0;
        // Bytes from here on are being fetched: the packets ahead (up to
        // PREFETCH_AHEAD bytes) load while this one is assembled, so memory latency
        // overlaps the work instead of adding to it. Large packets stream well by
        // themselves (`rep movsb`), so only small ones are prefetched. When this call
        // continues where the last one stopped (a reader walking one buffer in
        // batches), what that call already prefetched is not asked for again.
        let base = data.as_ptr() as usize;
        let mut fetched = self
            .prefetched
            .checked_sub(base)
            .filter(|&f| f <= data.len())
            .unwrap_or(0);
        // The next packet of the head heap, as it will look if it is the plain
        // in-order packet most are (see `Next`), and the packets taken that way not
        // yet counted in the stats.
        let mut next = match self.next.take() {
            Some(e) => Some(e),
            None => self.predict(),
        };
        let mut quick = 0;
        while pos < data.len() && n < max_packets && !self.stopped && self.started {
            if let Some(mut e) = next.take() {
                // The run of expected packets, with the head heap and the expectation
                // held in registers, copied under one lock of the sink's.
                let run_start = n;
                let Self { subs, sink, .. } = self;
                if let Some(h) = subs[0].slots[e.slot].as_mut() {
                    let LiveHeap {
                        storage, received, ..
                    } = h;
                    let sink = &*sink;
                    let run = std::iter::from_fn(|| {
                        if n >= max_packets || e.received == e.heap_length {
                            return None;
                        }
                        let rest = &data[pos..];
                        let len = e.matches(rest)?;
                        if sink.poll() {
                            return None;
                        }
                        let size = PLAIN_HEADER + len as usize;
                        let offset = e.received;
                        pos += size;
                        n += 1;
                        prefetch_ahead(data, pos, size, &mut fetched);
                        e.advance(len);
                        Some((offset, &rest[PLAIN_HEADER..size]))
                    });
                    sink.write_run(storage, run);
                    // `e` followed the heap's bytes from what the heap had received.
                    *received = e.received;
                }
                quick += (n - run_start) as u64;
                let done = e.received == e.heap_length;
                if done {
                    self.count_quick(&mut quick);
                    self.head_done(e.slot, false);
                    continue;
                }
                // The packet at `pos` (if any) was not the expected one: the general
                // path takes it, then predicts again.
                if pos >= data.len() || n >= max_packets {
                    next = Some(e);
                    break;
                }
            }
            self.count_quick(&mut quick);
            let p = match decode_packet(&data[pos..]) {
                Ok(p) => p,
                Err(_) => {
                    self.stats.packets_malformed += 1;
                    break;
                }
            };
            let size = p.size();
            pos += size;
            n += 1;
            prefetch_ahead(data, pos, size, &mut fetched);
            let _ = self.add_decoded(&p);
            next = self.predict();
        }
        self.count_quick(&mut quick);
        self.note_batch(n);
        self.prefetched = base + fetched;
        self.next = next;
        pos
    }

    /// Counts the packets [`Stream::add_packets`] took by its predicted path (each
    /// counted as [`Stream::add_next_in_order`] counts it).
    #[inline]
    fn count_quick(&mut self, quick: &mut u64) {
        self.stats.packets += *quick;
        self.stats.search_dist += *quick;
        *quick = 0;
    }

    /// What the next packet of the head heap looks like when it is the next in-order
    /// plain packet, in the cases where [`Stream::add_next_in_order`] would take it
    /// (and finish nothing but, perhaps, the heap itself): one substream, in-order,
    /// running, the head heap sized, not yet complete, with nothing addressed beyond
    /// HEAP_LENGTH and no stop.
    fn predict(&self) -> Option<Next> {
        if self.stopped || !self.started || self.config.allow_out_of_order || self.subs.len() != 1 {
            return None;
        }
        let sub = &self.subs[0];
        let h = sub.slots[sub.head].as_ref()?;
        let hl = h.heap_length?;
        // received > 0: a packet of the heap arrived, so the next one cannot be a
        // single-packet heap (its offset is past 0).
        if h.min_length != hl
            || h.received == 0
            || h.received >= hl
            || (self.config.stop_on_stop_item && h.end_of_stream)
        {
            return None;
        }
        let f = h.flavour;
        let wire = |v: u64| u64::from_le_bytes(v.to_be_bytes());
        let offset_tag = f.immediate(PAYLOAD_OFFSET_ID, 0);
        Some(Next {
            words: [
                u64::from_le_bytes(f.header(4)),
                wire(f.immediate(HEAP_CNT_ID, h.cnt)),
                wire(f.immediate(HEAP_LENGTH_ID, hl)),
                wire(offset_tag | h.received),
            ],
            offset_tag,
            length_tag: f.immediate(PAYLOAD_LENGTH_ID, 0),
            mask: f.value_mask(),
            heap_length: hl,
            received: h.received,
            slot: sub.head,
        })
    }

    fn refuse(&mut self) -> Option<Reject> {
        if self.stopped {
            self.stats.packets_after_stop += 1;
            Some(Reject::Stopped)
        } else if !self.started {
            self.stats.packets_before_start += 1;
            Some(Reject::NotStarted)
        } else {
            None
        }
    }

    /// Adds a packet that has already been decoded.
    ///
    /// # Errors
    /// The [`Reject`] reason when the packet was dropped (it is also counted).
    #[inline(always)]
    pub fn add_decoded(&mut self, p: &Packet<'_>) -> Result<(), Reject> {
        self.next = None;
        if let Some(r) = self.refuse() {
            return Err(r);
        }
        if self.sink.poll() {
            self.stop();
            self.stats.packets_after_stop += 1;
            return Err(Reject::Stopped);
        }
        self.stats.packets += 1;
        match self.add_next_in_order(p) {
            Some(r) => r,
            None => self.add_counted(p),
        }
    }

    /// [`Stream::add_decoded`] for a packet already counted, in the general case.
    #[inline(never)]
    fn add_counted(&mut self, p: &Packet<'_>) -> Result<(), Reject> {
        let end = p.payload_offset + p.payload.len() as u64;
        let too_large = match p.heap_length {
            Some(hl) => hl > self.config.max_heap_size,
            None => !self.config.allow_unsized_heaps || end > self.config.max_heap_size,
        };
        if too_large {
            self.stats.packets_too_large += 1;
            return Err(Reject::TooLarge);
        }
        let s = match self.subs.len() {
            1 => 0,
            n => (p.heap_cnt % n as u64) as usize,
        };
        // spead2: a packet holding a whole heap matches no partial heap.
        let found = if p.heap_length == Some(p.payload.len() as u64) {
            self.stats.single_packet_heaps += 1;
            None
        } else {
            self.stats.search_dist += 1;
            let sub = &self.subs[s];
            let matches = |slot: &Slot<_>| slot.as_ref().is_some_and(|h| h.cnt == p.heap_cnt);
            if matches(&sub.slots[sub.head]) {
                Some(sub.head)
            } else {
                sub.slots.iter().position(matches)
            }
        };
        let idx = match found {
            Some(idx) => idx,
            None => {
                if !self.config.allow_out_of_order && p.payload_offset != 0 {
                    self.stats.packets_dropped_in_order += 1;
                    return Err(Reject::OutOfOrder);
                }
                let idx = self.evict_next(s);
                let size = p.heap_length.unwrap_or(end);
                let storage = self.sink.allocate(size, p, &mut self.stats)?;
                self.subs[s].slots[idx].begin(p.heap_cnt, p.flavour, storage);
                idx
            }
        };
        let Self {
            subs,
            config,
            stats,
            sink,
            ..
        } = self;
        let Some(heap) = subs[s].slots[idx].as_mut() else {
            return Ok(());
        };
        Self::add_to_heap(config, stats, sink, heap, p)?;
        let stop = config.stop_on_stop_item && heap.end_of_stream;
        if heap.is_complete() {
            if stop && !config.deliver_stop_heap {
                self.recycle_slot(s, idx);
            } else {
                self.finish_slot(s, idx, Exit::Complete);
            }
        }
        if stop {
            self.stop();
        }
        Ok(())
    }

    /// The common case with few branches: in a one-substream, in-order stream, the
    /// next packet of the newest live heap, carrying only the special items. Does what
    /// the general path of [`Stream::add_decoded`] would (the checks it skips cannot
    /// fail here: the heap's HEAP_LENGTH passed them when the heap began); `None`, with
    /// nothing changed, when the packet needs the general path.
    #[inline(always)]
    fn add_next_in_order(&mut self, p: &Packet<'_>) -> Option<Result<(), Reject>> {
        if self.config.allow_out_of_order
            || !p.specials_only
            || self.subs.len() != 1
            || p.payload.is_empty()
        {
            return None;
        }
        let hl = p.heap_length?;
        if hl == p.payload.len() as u64 {
            // A single-packet heap matches no live heap.
            return None;
        }
        let Self {
            subs,
            config,
            stats,
            sink,
            ..
        } = self;
        let sub = &mut subs[0];
        let head = sub.head;
        let h = sub.slots[head].as_mut()?;
        if h.cnt != p.heap_cnt
            || h.heap_length != Some(hl)
            || hl < h.min_length
            || h.flavour != p.flavour
            || h.received != p.payload_offset
        {
            return None;
        }
        stats.search_dist += 1;
        sink.write(&mut h.storage, p);
        h.received += p.payload.len() as u64;
        let stop = config.stop_on_stop_item && h.end_of_stream;
        if stop || h.is_complete() {
            self.head_done(head, stop);
        }
        Some(Ok(()))
    }

    /// The rest of [`Stream::add_next_in_order`] when the head heap of the single
    /// substream completed or holds a stop (once per heap, so kept out of line).
    #[inline(never)]
    fn head_done(&mut self, head: usize, stop: bool) {
        let complete = self.subs[0].slots[head]
            .as_ref()
            .is_some_and(LiveHeap::is_complete);
        if complete {
            if stop && !self.config.deliver_stop_heap {
                self.recycle_slot(0, head);
            } else {
                self.finish_slot(0, head, Exit::Complete);
            }
        }
        if stop {
            self.stop();
        }
    }

    /// Advances the ring head of substream `s`, evicting its occupant. Returns the slot.
    fn evict_next(&mut self, s: usize) -> usize {
        let n = self.config.max_heaps;
        let sub = &mut self.subs[s];
        sub.head = if sub.head + 1 == n { 0 } else { sub.head + 1 };
        let idx = sub.head;
        if sub.slots[idx].is_some() {
            self.finish_slot(s, idx, Exit::Evicted);
        }
        idx
    }

    /// spead2's `live_heap::add_packet`: checks, then records the packet.
    fn add_to_heap(
        config: &StreamConfig,
        stats: &mut Stats,
        sink: &mut H,
        h: &mut LiveHeap<H::Storage>,
        p: &Packet<'_>,
    ) -> Result<(), Reject> {
        if let (Some(a), Some(b)) = (h.heap_length, p.heap_length) {
            if a != b {
                stats.packets_inconsistent += 1;
                return Err(Reject::HeapLengthMismatch);
            }
        }
        if p.heap_length.is_some_and(|b| b < h.min_length) {
            stats.packets_inconsistent += 1;
            return Err(Reject::HeapLengthMismatch);
        }
        if p.flavour != h.flavour {
            stats.packets_inconsistent += 1;
            return Err(Reject::FlavourMismatch);
        }
        let start = p.payload_offset;
        let end = start + p.payload.len() as u64;
        let mut range_pos = None;
        if config.allow_out_of_order {
            // spead2's add_payload_range: reject any overlap with what arrived.
            let pos = h.ranges.partition_point(|r| r.0 < start);
            let overlaps_prev = pos > 0 && h.ranges[pos - 1].1 > start;
            let overlaps_next = pos < h.ranges.len() && h.ranges[pos].0 < end;
            if overlaps_prev || overlaps_next {
                stats.packets_duplicate += 1;
                return Err(Reject::Duplicate);
            }
            let merge_prev = pos > 0 && h.ranges[pos - 1].1 == start;
            let merge_next = pos < h.ranges.len() && h.ranges[pos].0 == end;
            if !merge_prev && !merge_next && h.ranges.len() >= config.max_ranges_per_heap {
                stats.packets_too_fragmented += 1;
                return Err(Reject::TooFragmented);
            }
            range_pos = Some((pos, merge_prev, merge_next));
        } else if start != h.received {
            stats.packets_dropped_in_order += 1;
            return Err(Reject::OutOfOrder);
        }
        match p.heap_length {
            Some(hl) => {
                if h.heap_length.is_none() {
                    h.min_length = h.min_length.max(hl);
                    if let Err(e) = sink.reserve(&mut h.storage, h.min_length) {
                        stats.heaps_alloc_failed += 1;
                        return Err(e);
                    }
                    h.heap_length = Some(hl);
                }
            }
            None => {
                // The memory need not cover pointer addresses beyond the data: such a
                // heap is never contiguous, so those items are never read.
                if let Err(e) = sink.reserve(&mut h.storage, end) {
                    stats.heaps_alloc_failed += 1;
                    return Err(e);
                }
                h.min_length = h.min_length.max(end);
            }
        }
        if let Some((pos, merge_prev, merge_next)) = range_pos.filter(|_| start < end) {
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
        Self::add_pointers(config, stats, h, p);
        if !p.payload.is_empty() {
            sink.write(&mut h.storage, p);
            h.received += p.payload.len() as u64;
        }
        Ok(())
    }

    /// spead2's `live_heap::add_pointers`: every addressed pointer raises `min_length`;
    /// items 1-4 (HEAP_CNT .. PAYLOAD_LENGTH) are never items, immediate or not;
    /// duplicates collapse; NULL pointers are kept (they end the previous item).
    fn add_pointers(
        config: &StreamConfig,
        stats: &mut Stats,
        h: &mut LiveHeap<H::Storage>,
        p: &Packet<'_>,
    ) {
        if p.specials_only {
            // Nothing but HEAP_CNT, HEAP_LENGTH and the payload's offset and length,
            // all immediate: no address, no item, no stop.
            return;
        }
        let hab = p.flavour.heap_address_bits();
        let max_id = p.flavour.max_id();
        let mask = p.flavour.value_mask();
        for raw in p.raw_pointers() {
            let immediate = raw >> 63 != 0;
            if !immediate {
                h.min_length = h.min_length.max(raw & mask);
            }
            let id = (raw >> hab) & max_id;
            if (HEAP_CNT_ID..=PAYLOAD_LENGTH_ID).contains(&id) || h.pointers.contains(&raw) {
                continue;
            }
            if h.pointers.len() >= config.max_pointers_per_heap {
                stats.pointers_dropped += 1;
                continue;
            }
            h.pointers.push(raw);
        }
        h.end_of_stream |= p.stop;
    }

    /// Empties slot `idx` of substream `s` without delivering its heap.
    fn recycle_slot(&mut self, s: usize, idx: usize) {
        let slot = &mut self.subs[s].slots[idx];
        if let Some(h) = slot.as_mut() {
            self.sink.release(&mut h.storage);
        }
        slot.clear();
    }

    /// Hands the heap in slot `idx` of substream `s` to the sink and empties the slot.
    /// The heap is handled where it lies, not moved out first.
    fn finish_slot(&mut self, s: usize, idx: usize, exit: Exit) {
        let Self {
            subs, stats, sink, ..
        } = self;
        let slot = &mut subs[s].slots[idx];
        if let Some(h) = slot.as_mut() {
            stats.heaps += 1;
            match exit {
                Exit::Complete => {}
                Exit::Evicted => stats.incomplete_heaps_evicted += 1,
                Exit::Flushed => stats.incomplete_heaps_flushed += 1,
            }
            sink.heap_ready(h, exit, stats);
            sink.release(&mut h.storage);
        }
        slot.clear();
    }
}
