//! Where a stream puts heap payload and what it does with heaps that leave it.
//!
//! spead2 splits this between a `memory_allocator` (called with the heap's first packet,
//! see `live_heap::payload_reserve` in `src/recv_live_heap.cpp`), the packet memcpy
//! function and the stream's virtual `heap_ready`. [`HeapSink`] is those three: the
//! plain [`super::Stream`] uses [`HeapQueue`] (pooled buffers, a queue of heaps), a
//! [`super::ChunkStream`] uses [`super::chunk::ChunkSink`] (heaps written in place into
//! chunks). The heap assembly rules live once, in [`super::Stream`].

use std::collections::VecDeque;

use super::heap::Heap;
use super::pool::{MemoryPool, PoolBuffer};
use super::reject::Reject;
use super::stats::Stats;
use crate::wire::{Flavour, Packet};

pub(crate) mod sealed {
    /// Keeps [`super::HeapSink`] implemented only here.
    pub trait Sealed {}
}

/// `dst.copy_from_slice(src)`, with payloads of 32 to 128 bytes copied inline as
/// fixed-size (possibly overlapping) 32-byte blocks: no call, no size dispatch. Public so
/// that the assembly benchmark's memcpy bound copies exactly as assembly does.
///
/// # Panics
/// When `dst` and `src` differ in length (as `copy_from_slice`).
#[inline]
pub fn copy_payload(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    if dst.len() == n && (32..=128).contains(&n) {
        dst[..32].copy_from_slice(&src[..32]);
        dst[n - 32..].copy_from_slice(&src[n - 32..]);
        if n > 64 {
            dst[32..64].copy_from_slice(&src[32..64]);
            dst[n - 64..n - 32].copy_from_slice(&src[n - 64..n - 32]);
        }
    } else {
        dst.copy_from_slice(src);
    }
}

/// A heap being assembled (what spead2 calls a `live_heap`).
#[derive(Debug)]
pub struct LiveHeap<S> {
    pub(crate) cnt: u64,
    pub(crate) flavour: Flavour,
    pub(crate) heap_length: Option<u64>,
    pub(crate) received: u64,
    /// spead2's `min_length`: the largest of HEAP_LENGTH, every addressed pointer's
    /// address, and (for unsized heaps) every payload end.
    pub(crate) min_length: u64,
    pub(crate) pointers: Vec<u64>,
    pub(crate) ranges: Vec<(u64, u64)>,
    pub(crate) end_of_stream: bool,
    pub(crate) storage: S,
}

impl<S> LiveHeap<S> {
    /// spead2's `live_heap::is_complete`: every byte of HEAP_LENGTH arrived and no item
    /// pointer addresses beyond it.
    pub(crate) fn is_complete(&self) -> bool {
        self.heap_length == Some(self.received) && self.received == self.min_length
    }

    /// spead2's `live_heap::is_contiguous`: the received bytes are exactly
    /// `[0, min_length)`, so every item can be read.
    pub(crate) fn is_contiguous(&self) -> bool {
        self.received == self.min_length
    }
}

/// How a heap left the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Every byte arrived.
    Complete,
    /// Evicted to make room for a newer heap.
    Evicted,
    /// Flushed (at stop or by [`super::Stream::flush`]).
    Flushed,
}

/// Heap memory and heap delivery for a stream; implemented by [`HeapQueue`] and
/// [`super::chunk::ChunkSink`] only.
pub trait HeapSink: sealed::Sealed {
    /// Per-heap storage (`Default`: none, what an empty slot holds).
    type Storage: std::fmt::Debug + Default;

    /// Whether heaps without HEAP_LENGTH can be stored (chunk streams cannot).
    fn allows_unsized(&self) -> bool {
        true
    }

    /// Storage for a new heap of at least `size` bytes, whose first packet is `p`.
    ///
    /// # Errors
    /// The [`Reject`] when no memory could be had.
    fn allocate(
        &mut self,
        size: u64,
        p: &Packet<'_>,
        stats: &mut Stats,
    ) -> Result<Self::Storage, Reject>;

    /// Grows `storage` to at least `size` bytes (heaps without HEAP_LENGTH).
    ///
    /// # Errors
    /// The [`Reject`] when no memory could be had.
    fn reserve(&mut self, storage: &mut Self::Storage, size: u64) -> Result<(), Reject>;

    /// Copies the payload of `p` (already checked to fit) into `storage`.
    fn write(&mut self, storage: &mut Self::Storage, p: &Packet<'_>);

    /// Copies a run of payloads of one heap into `storage`, each `(payload offset,
    /// payload)` as [`HeapSink::write`] would for its packet (each already checked to
    /// fit), but taking whatever lock the sink needs once for the run. `run` is
    /// always consumed to its end: taking each item is what records its packet.
    fn write_run<'p>(
        &self,
        storage: &mut Self::Storage,
        run: impl Iterator<Item = (u64, &'p [u8])>,
    );

    /// A heap leaves the stream. The sink takes what it needs (the stream recycles
    /// the rest).
    fn heap_ready(&mut self, heap: &mut LiveHeap<Self::Storage>, exit: Exit, stats: &mut Stats);

    /// A heap's storage is about to be dropped (after `heap_ready`, or instead of it
    /// for a stop heap that is not delivered): what it holds of the sink's goes back.
    fn release(&mut self, _storage: &mut Self::Storage) {}

    /// The stream stopped, after its live heaps were flushed.
    fn stopped(&mut self, _stats: &mut Stats) {}

    /// Called before each packet: true when the stream must stop (a chunk group was
    /// stopped).
    fn poll(&self) -> bool {
        false
    }
}

/// The plain stream's sink: payload in pooled buffers, finished heaps in a queue.
///
/// As spead2's `ring_stream` with `contiguous_only` (`include/spead2/recv_ring_stream.h`,
/// `heap_ready`): heaps that are not contiguous are dropped unless
/// `deliver_incomplete` is set.
#[derive(Debug)]
pub struct HeapQueue {
    pool: MemoryPool,
    deliver_incomplete: bool,
    max_heap_size: u64,
    pub(crate) ready: VecDeque<Heap>,
}

impl HeapQueue {
    pub(crate) fn new(pool: MemoryPool, deliver_incomplete: bool, max_heap_size: u64) -> Self {
        Self {
            pool,
            deliver_incomplete,
            max_heap_size,
            ready: VecDeque::with_capacity(64),
        }
    }

    pub(crate) fn pool(&self) -> &MemoryPool {
        &self.pool
    }
}

impl sealed::Sealed for HeapQueue {}

impl HeapSink for HeapQueue {
    type Storage = PoolBuffer;

    fn allocate(
        &mut self,
        size: u64,
        _p: &Packet<'_>,
        stats: &mut Stats,
    ) -> Result<PoolBuffer, Reject> {
        let buf = usize::try_from(size)
            .ok()
            .and_then(|n| self.pool.try_acquire(n));
        buf.ok_or_else(|| {
            stats.heaps_alloc_failed += 1;
            Reject::OutOfMemory
        })
    }

    fn reserve(&mut self, storage: &mut PoolBuffer, size: u64) -> Result<(), Reject> {
        if size as usize <= storage.len() {
            return Ok(());
        }
        // As spead2's payload_reserve for unsized heaps: at least double.
        let want = size
            .max(storage.len() as u64 * 2)
            .max(4096)
            .min(self.max_heap_size)
            .max(size);
        let ok = usize::try_from(want).is_ok_and(|w| storage.try_grow(w));
        if ok {
            Ok(())
        } else {
            Err(Reject::OutOfMemory)
        }
    }

    #[inline(always)]
    fn write(&mut self, storage: &mut PoolBuffer, p: &Packet<'_>) {
        let start = p.payload_offset as usize;
        copy_payload(
            &mut storage.as_mut_slice()[start..start + p.payload.len()],
            p.payload,
        );
    }

    #[inline(always)]
    fn write_run<'p>(&self, storage: &mut PoolBuffer, run: impl Iterator<Item = (u64, &'p [u8])>) {
        let buf = storage.as_mut_slice();
        for (offset, payload) in run {
            let start = offset as usize;
            copy_payload(&mut buf[start..start + payload.len()], payload);
        }
    }

    fn heap_ready(&mut self, h: &mut LiveHeap<PoolBuffer>, exit: Exit, stats: &mut Stats) {
        let contiguous = h.is_contiguous();
        if !contiguous && !self.deliver_incomplete {
            stats.incomplete_heaps_dropped += 1;
            return;
        }
        let complete = exit == Exit::Complete;
        let payload_ranges = if complete {
            Vec::new()
        } else if !h.ranges.is_empty() {
            h.ranges.clone()
        } else if h.received > 0 {
            // In-order mode keeps no ranges; spead2's incomplete_heap synthesises one.
            vec![(0, h.received)]
        } else {
            Vec::new()
        };
        let mut payload = std::mem::take(&mut h.storage);
        // The pointer list travels with the buffer (and back to the pool with it);
        // the live heap keeps the buffer's spare list for its next use.
        std::mem::swap(payload.pointers_mut(), &mut h.pointers);
        self.ready.push_back(Heap {
            cnt: h.cnt,
            flavour: h.flavour,
            complete,
            contiguous,
            heap_length: h.heap_length,
            received_length: h.received,
            min_length: h.min_length,
            payload_ranges,
            end_of_stream: h.end_of_stream,
            payload,
        });
    }
}
