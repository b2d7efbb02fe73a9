//! Chunk stream tests, re-expressing spead2's `tests/test_recv_chunk_stream.py` and
//! `tests/test_recv_chunk_stream_group.py` (same shapes: 1024-byte heaps, 10 heaps per
//! chunk, 4 chunks live); the expected chunks and counters are those tests'. This file has
//! the shared fixtures; the single streams' tests are in `stream`, the groups' in `group`,
//! chunk streams fed by each transport in `transports`.

use std::sync::{Arc, Mutex};

use super::*;
use crate::descriptor::Descriptor;
use crate::recv::config::StreamConfig;
use crate::recv::stats::{StatMode, Stats};
use crate::send::{heap_to_bytes, Heap as SendHeap};
use crate::test_support::stop_heap;
use crate::wire::{Flavour, HEAP_LENGTH_ID, PAYLOAD_LENGTH_ID};

const HEAP_PAYLOAD_SIZE: usize = 1024;
const HEAPS_PER_CHUNK: usize = 10;
const CHUNK_PAYLOAD_SIZE: usize = HEAP_PAYLOAD_SIZE * HEAPS_PER_CHUNK;
const F: Flavour = Flavour::SPEAD_64_48;

/// spead2's `make_heap_payload` for a heap of this test's size.
fn heap_payload(position: u64) -> Vec<u8> {
    crate::test_support::spead2_heap_payload(position, HEAP_PAYLOAD_SIZE)
}

/// One heap of the test item group: position 0x1000 (immediate), payload 0x1001,
/// extra 0x1002 (immediate).
fn heap_bytes(cnt: u64, position: u64) -> Vec<u8> {
    crate::test_support::spead2_chunk_heap(cnt, position, HEAP_PAYLOAD_SIZE, true)
}

fn descriptor_heap() -> Vec<u8> {
    let mut h = SendHeap::new(F);
    h.add_descriptor(&Descriptor {
        id: 0x1000,
        name: b"position".to_vec(),
        format: vec![(b'u', 32)],
        ..Descriptor::default()
    });
    heap_to_bytes(&h, 1, 9000).unwrap()
}

/// spead2's `make_packet`: one packet of heap `position` with bytes `[start, end)`.
fn packet(position: u64, start: usize, end: usize) -> Vec<u8> {
    crate::test_support::spead2_chunk_packet(position, start, end, HEAP_PAYLOAD_SIZE)
}

/// spead2's `place_plain`: items are [0x1000, HEAP_LENGTH, 0x1002].
fn place_plain(d: &mut PlaceData<'_>) {
    if let [Some(pos), Some(len), ..] = d.items {
        if *len == HEAP_PAYLOAD_SIZE as u64 {
            d.chunk_id = (pos / HEAPS_PER_CHUNK as u64) as i64;
            d.heap_index = (pos % HEAPS_PER_CHUNK as u64) as usize;
            d.heap_offset = d.heap_index * HEAP_PAYLOAD_SIZE;
        }
    }
}

/// spead2's `place_extra`: as `place_plain`, and item 0x1002 into `extra`.
fn place_extra(d: &mut PlaceData<'_>) {
    place_plain(d);
    if d.chunk_id >= 0 {
        let v = d.items[2].unwrap_or(0);
        d.extra[..8].copy_from_slice(&v.to_le_bytes());
        d.extra_size = 8;
        d.extra_offset = d.heap_index * 8;
    }
}

type Ready = Arc<Mutex<Vec<Chunk>>>;

fn new_chunk(_: i64, _: &mut Stats) -> Option<Chunk> {
    Some(Chunk::new(
        CHUNK_PAYLOAD_SIZE,
        HEAPS_PER_CHUNK,
        HEAPS_PER_CHUNK * 8,
    ))
}

fn stream(place: fn(&mut PlaceData<'_>)) -> (ChunkStream, Ready) {
    let ready: Ready = Arc::default();
    let r = Arc::clone(&ready);
    let mut cc = ChunkStreamConfig::new(place)
        .with_allocate(new_chunk)
        .with_ready(move |c, _| r.lock().unwrap().push(c));
    cc.items = vec![0x1000, HEAP_LENGTH_ID, 0x1002];
    cc.max_chunks = 4;
    cc.max_heap_extra = 8;
    let config = StreamConfig {
        max_heaps: 128,
        ..StreamConfig::default()
    };
    (ChunkStream::new_chunked(config, cc).unwrap(), ready)
}

fn send(s: &mut ChunkStream, positions: &[u64]) {
    let mut buf = descriptor_heap();
    for (i, &p) in positions.iter().enumerate() {
        buf.extend(heap_bytes(i as u64 + 2, p));
    }
    buf.extend(stop_heap(positions.len() as u64 + 2));
    assert_eq!(s.add_buffer(&buf), buf.len());
    assert!(s.is_stopped());
}

/// spead2's `check_chunk`: id, presence, and the payload of every present heap.
fn check_chunk(c: &Chunk, id: i64, present: &[u8]) {
    assert_eq!(c.chunk_id, id);
    assert_eq!(c.present, present, "chunk {id}");
    for (i, &p) in present.iter().enumerate() {
        if p != 0 {
            let pos = id as u64 * HEAPS_PER_CHUNK as u64 + i as u64;
            let at = i * HEAP_PAYLOAD_SIZE;
            assert_eq!(
                &c.data[at..at + HEAP_PAYLOAD_SIZE],
                &heap_payload(pos)[..],
                "chunk {id} heap {i}"
            );
        }
    }
}

/// Presence flags of chunk `i` when heaps `0..n_heaps` were all sent.
fn prefix_present(i: usize, n_heaps: usize) -> [u8; HEAPS_PER_CHUNK] {
    let mut present = [0u8; HEAPS_PER_CHUNK];
    let full = n_heaps
        .saturating_sub(i * HEAPS_PER_CHUNK)
        .min(HEAPS_PER_CHUNK);
    present[..full].fill(1);
    present
}

mod group;
mod stream;
mod transports;
