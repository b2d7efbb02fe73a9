//! The [`HeapSink`] of chunk streams: each heap placed in a chunk of the group's window
//! and its packets written there.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::cell::{Claim, Marker, Placed};
use super::config::{ChunkError, ChunkStreamConfig, PlaceData, PlaceFn};
use super::window::{Cell, Group};
use crate::recv::config::StreamConfig;
use crate::recv::reject::Reject;
use crate::recv::sink::{sealed, Exit, HeapSink, LiveHeap};
use crate::recv::stats::{StatMode, Stats};
use crate::recv::stream::Stream;
use crate::wire::Packet;

pub(super) fn new_member<U: Send + 'static>(
    group: &Arc<Group<U>>,
    mut config: StreamConfig,
    chunk_config: ChunkStreamConfig<U>,
) -> Result<Stream<ChunkSink<U>>, ChunkError> {
    if chunk_config.max_chunks == 0 {
        return Err(ChunkError::ZeroMaxChunks);
    }
    if config.max_heaps == 0 || config.substreams == 0 {
        return Err(ChunkError::ZeroHeaps);
    }
    if chunk_config.packet_presence_payload_size == Some(0) {
        return Err(ChunkError::ZeroPresencePayload);
    }
    // spead2's chunk_stream_state::adjust_config.
    let too_old = config.add_stat("too_old_heaps", StatMode::Counter)?;
    let rejected = config.add_stat("rejected_heaps", StatMode::Counter)?;
    let (member, head, marker) = {
        let mut st = group.lock();
        let head = Arc::new(AtomicU64::new(st.head));
        st.heads.push(Arc::clone(&head));
        let (marker, mark) = Marker::new();
        st.marks.push(mark);
        (st.heads.len() - 1, head, marker)
    };
    let sink = ChunkSink {
        group: Arc::clone(group),
        member,
        head,
        max_chunks: chunk_config.max_chunks,
        item_values: vec![None; chunk_config.items.len()],
        item_ids: chunk_config.items,
        extra: vec![0; chunk_config.max_heap_extra],
        presence: chunk_config.packet_presence_payload_size,
        place: chunk_config.place,
        too_old,
        rejected,
        stopped: false,
        stream_id: config.stream_id,
        cells: Vec::with_capacity(chunk_config.max_chunks + 1),
        marker,
    };
    Ok(Stream::with_sink(config, sink))
}

/// Where a heap of a chunk stream is written: its claim on a chunk's bytes and flags.
#[derive(Debug, Default)]
pub struct ChunkHeap {
    claim: Option<Claim>,
    chunk_id: u64,
}

/// The [`HeapSink`] of chunk streams.
pub struct ChunkSink<U> {
    group: Arc<Group<U>>,
    member: usize,
    head: Arc<AtomicU64>,
    max_chunks: usize,
    item_ids: Vec<u64>,
    item_values: Vec<Option<u64>>,
    extra: Vec<u8>,
    presence: Option<usize>,
    place: PlaceFn,
    too_old: usize,
    rejected: usize,
    stopped: bool,
    stream_id: usize,
    /// The chunks this stream placed heaps in lately, by id (its own window: a heap
    /// finds its chunk here without the group's lock).
    cells: Vec<(u64, Cell<U>)>,
    /// This member's mark on the cell it writes.
    marker: Marker,
}

impl<U> fmt::Debug for ChunkSink<U> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChunkSink")
            .field("member", &self.member)
            .field("head", &self.head.load(Ordering::Relaxed))
            .field("max_chunks", &self.max_chunks)
            .finish_non_exhaustive()
    }
}

impl<U> ChunkSink<U> {
    fn too_old(&self, chunk_id: u64) -> bool {
        chunk_id < self.head.load(Ordering::Acquire)
    }

    /// The chunk `chunk_id` in this stream's own window.
    fn cell(&self, chunk_id: u64) -> Option<&Cell<U>> {
        self.cells
            .iter()
            .rev()
            .find(|(id, _)| *id == chunk_id)
            .map(|(_, cell)| cell)
    }

    fn discard(&self) -> ChunkHeap {
        ChunkHeap::default()
    }

    fn bump(stats: &mut Stats, index: usize) {
        if let Some(v) = stats.value_mut(index) {
            *v += 1;
        }
    }
}

impl<U> ChunkSink<U> {
    /// This stream holds back no chunk any more (it stopped or went away).
    fn leave(&mut self, stats: &mut Stats) {
        if !self.stopped {
            self.stopped = true;
            let mut st = self.group.lock();
            st.stopped_members += 1;
            self.group
                .advance_member(&mut st, self.member, u64::MAX, stats);
            if st.stopped_members == st.heads.len() {
                st.heads_moved(stats);
            }
            drop(st);
            self.cells.clear();
        }
    }
}

impl<U> Drop for ChunkSink<U> {
    /// As spead2's destructors stop their streams: a dropped member no longer holds
    /// the group back.
    fn drop(&mut self) {
        if !self.stopped {
            self.leave(&mut Stats::default());
        }
    }
}

impl<U> sealed::Sealed for ChunkSink<U> {}

impl<U: Send + 'static> HeapSink for ChunkSink<U> {
    type Storage = ChunkHeap;

    fn allows_unsized(&self) -> bool {
        // spead2's adjust_config: unsized heaps cannot be placed.
        false
    }

    fn allocate(
        &mut self,
        size: u64,
        p: &Packet<'_>,
        stats: &mut Stats,
    ) -> Result<ChunkHeap, Reject> {
        // spead2's chunk_stream_state::allocate: the requested items come from every
        // immediate pointer of the first packet, specials included.
        self.item_values.fill(None);
        for ptr in p.item_pointers().filter(|ptr| ptr.immediate) {
            for (id, v) in self.item_ids.iter().zip(&mut self.item_values) {
                if *id == ptr.id {
                    *v = Some(ptr.value);
                }
            }
        }
        let mut data = PlaceData {
            packet: p,
            items: &self.item_values,
            chunk_id: -1,
            heap_index: 0,
            heap_offset: 0,
            stats,
            extra: &mut self.extra,
            extra_offset: 0,
            extra_size: 0,
        };
        (self.place)(&mut data);
        let PlaceData {
            chunk_id,
            heap_index,
            heap_offset,
            extra_offset,
            extra_size,
            ..
        } = data;
        let Ok(chunk_id) = u64::try_from(chunk_id) else {
            Self::bump(stats, self.rejected);
            return Ok(self.discard());
        };
        if self.too_old(chunk_id) {
            Self::bump(stats, self.too_old);
            return Ok(self.discard());
        }
        // spead2 trusts the callback; we refuse placements outside the chunk, and
        // placements overlapping a live heap's (see `chunk_cell`): several streams
        // write one chunk at once, each heap its own bytes.
        let flags = match self.presence {
            Some(n) => (size as usize).div_ceil(n).max(1),
            None => 1,
        };
        let ranges = heap_offset
            .checked_add(size as usize)
            .zip(heap_index.checked_add(flags))
            .filter(|_| extra_size <= self.extra.len());
        let Some((data_end, present_end)) = ranges else {
            Self::bump(stats, self.rejected);
            return Ok(self.discard());
        };
        // The chunk is most often one this stream placed a heap in before: then
        // placing needs no lock of the group's (its window was settled then).
        if self.cell(chunk_id).is_none() {
            let Some(cell) = self.group.get_chunk(
                self.member,
                self.max_chunks,
                self.stream_id,
                chunk_id,
                stats,
            ) else {
                if self.too_old(chunk_id) {
                    Self::bump(stats, self.too_old);
                }
                return Ok(self.discard());
            };
            let head = self.head.load(Ordering::Acquire);
            self.cells.retain(|(id, _)| *id >= head);
            self.cells.push((chunk_id, cell));
        }
        // Borrowed, not cloned: the cell's count is shared with the other streams.
        let Some(cell) = self.cell(chunk_id) else {
            return Ok(self.discard());
        };
        let placed = cell.place(
            chunk_id,
            heap_offset..data_end,
            heap_index..present_end,
            &self.extra[..extra_size],
            extra_offset,
        );
        match placed {
            Placed::Claimed(claim) => Ok(ChunkHeap {
                claim: Some(claim),
                chunk_id,
            }),
            Placed::Refused => {
                Self::bump(stats, self.rejected);
                Ok(self.discard())
            }
            Placed::Gone => {
                // Made ready since this stream got it: every stream moved past it.
                if self.too_old(chunk_id) {
                    Self::bump(stats, self.too_old);
                }
                Ok(self.discard())
            }
        }
    }

    fn reserve(&mut self, _storage: &mut ChunkHeap, _size: u64) -> Result<(), Reject> {
        // Only sized heaps reach a chunk sink, and their place was checked.
        Ok(())
    }

    fn write(&mut self, h: &mut ChunkHeap, p: &Packet<'_>) {
        self.write_run(h, std::iter::once((p.payload_offset, p.payload)));
    }

    fn write_run<'p>(&self, h: &mut ChunkHeap, run: impl Iterator<Item = (u64, &'p [u8])>) {
        // One writer for the run, and no lock: the heap's claim is its own, and the
        // chunk cannot leave the window while the writer lives (`chunk_cell`). As in
        // spead2, whose readers hold their stream's lock for a batch of packets, an
        // eviction by another member takes effect between runs.
        let cell = match &h.claim {
            Some(_) if !self.too_old(h.chunk_id) => self.cell(h.chunk_id),
            _ => None,
        };
        let mut writer = cell
            .zip(h.claim.as_ref())
            .and_then(|(cell, claim)| cell.writer(claim, &self.marker));
        match writer.as_mut() {
            Some(w) => {
                for (offset, payload) in run {
                    // The stream passes only payloads inside the heap's length.
                    let Ok(offset) = usize::try_from(offset) else {
                        continue;
                    };
                    w.copy(offset, payload);
                    if let Some(n) = self.presence {
                        w.set_present(offset / n);
                    }
                }
            }
            None => run.for_each(drop),
        }
    }

    fn heap_ready(&mut self, h: &mut LiveHeap<ChunkHeap>, exit: Exit, stats: &mut Stats) {
        // spead2's do_heap_ready: only complete heaps count.
        if exit != Exit::Complete {
            return;
        }
        let Some(claim) = &h.storage.claim else {
            return;
        };
        if self.too_old(h.storage.chunk_id) {
            Self::bump(stats, self.too_old);
        } else if self.presence.is_none() {
            if let Some(cell) = self.cell(h.storage.chunk_id) {
                if let Some(mut w) = cell.writer(claim, &self.marker) {
                    w.set_present(0);
                }
            }
        }
    }

    fn release(&mut self, h: &mut ChunkHeap) {
        if let Some(claim) = h.claim.take() {
            if let Some(cell) = self.cell(h.chunk_id) {
                cell.release(claim);
            }
        }
    }

    fn stopped(&mut self, stats: &mut Stats) {
        self.leave(stats);
    }

    fn poll(&self) -> bool {
        self.group.stopped.load(Ordering::Acquire)
    }
}
