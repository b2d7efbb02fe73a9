//! Chunk streams: heaps written in place into large chunks chosen by the user, as
//! spead2's `chunk_stream` and `chunk_stream_group` (`include/spead2/recv_chunk_stream.h`,
//! `src/recv_chunk_stream.cpp`, `src/recv_chunk_stream_group.cpp`).
//!
//! For each new heap a *place* callback sees the heap's first packet and the values of
//! the immediate items the user asked for, and chooses a chunk id, the heap's index in
//! the chunk and its byte offset in the chunk's payload (or discards the heap). Chunks
//! live in a window of `max_chunks` consecutive ids: asking for a chunk beyond the
//! window makes the oldest ones ready (handed to the *ready* callback, or pushed to a
//! data ring); heaps for chunks older than the window are counted as `too_old_heaps`,
//! heaps the place callback discards as `rejected_heaps`. A chunk records which heaps
//! arrived whole in `present` (one byte per heap, or per packet with packet presence).
//!
//! A [`ChunkStreamGroup`] shares one window among several streams (each fed by its own
//! reader, possibly on its own thread): a chunk is ready once every stream has moved
//! past it. When a stream needs a chunk beyond the group's window, `Lossy` eviction
//! pushes every stream past the old chunks at once; `Lossless` waits until the other
//! streams get there by themselves (so members must then run on their own threads).
//! A single [`ChunkStream`] is a group of one.
//!
//! Heap assembly itself is the plain stream's ([`super::Stream`]): a chunk stream is a
//! `Stream` whose [`HeapSink`](crate::recv::sink::HeapSink) is a [`ChunkSink`], fed by the same
//! `add_datagram`,
//! `add_buffer` and `add_decoded` calls, so every transport can drive it.
//!
//! ```
//! use std::sync::{Arc, Mutex};
//! use spead::recv::{Chunk, ChunkStream, ChunkStreamConfig, PlaceData, StreamConfig};
//! use spead::send::{heap_to_bytes, Heap};
//! use spead::wire::{Flavour, HEAP_CNT_ID};
//!
//! // Heaps of 64 bytes, four to a chunk, placed by their HEAP_CNT.
//! let ready = Arc::new(Mutex::new(Vec::new()));
//! let r = Arc::clone(&ready);
//! let mut chunk_config = ChunkStreamConfig::new(|d: &mut PlaceData<'_>| {
//!     if let [Some(cnt)] = d.items {
//!         d.chunk_id = (cnt / 4) as i64;
//!         d.heap_index = (cnt % 4) as usize;
//!         d.heap_offset = d.heap_index * 64;
//!     }
//! })
//! .with_allocate(|_, _| Some(Chunk::<()>::new(4 * 64, 4, 0)))
//! .with_ready(move |c, _| r.lock().unwrap().push(c));
//! chunk_config.items = vec![HEAP_CNT_ID];
//! let mut stream = ChunkStream::new_chunked(StreamConfig::default(), chunk_config).unwrap();
//! for cnt in [0u64, 1, 2, 3, 5] {
//!     let mut heap = Heap::new(Flavour::SPEAD_64_48);
//!     heap.add_item(0x1000, vec![cnt as u8; 64], false);
//!     stream.add_buffer(&heap_to_bytes(&heap, cnt, 1472).unwrap());
//! }
//! stream.stop();
//! let chunks = ready.lock().unwrap();
//! assert_eq!(chunks[0].present, vec![1, 1, 1, 1]);
//! assert_eq!(chunks[1].present, vec![0, 1, 0, 0]);
//! assert_eq!(chunks[1].data[64..128], [5u8; 64]);
//! assert_eq!(stream.stats().get("rejected_heaps"), Some(0));
//! ```

mod cell;
mod config;
mod group;
mod rings;
mod sink;
mod window;

pub use config::{
    AllocateFn, Chunk, ChunkError, ChunkStreamConfig, ChunkStreamGroupConfig, EvictionMode,
    PlaceData, PlaceFn, ReadyFn,
};
pub use group::{ChunkStream, ChunkStreamGroup};
pub use rings::{chunk_rings, ChunkRingEnds, ChunkRings, FreeRing};
pub use sink::{ChunkHeap, ChunkSink};

#[cfg(test)]
mod tests;
