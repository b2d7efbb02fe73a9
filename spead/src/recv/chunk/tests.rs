//! Chunk stream tests, re-expressing spead2's `tests/test_recv_chunk_stream.py` and
//! `tests/test_recv_chunk_stream_group.py` (same shapes: 1024-byte heaps, 10 heaps per
//! chunk, 4 chunks live); the expected chunks and counters are those tests'.

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

#[test]
fn basic_and_extra() {
    for (place, extra) in [
        (place_plain as fn(&mut PlaceData<'_>), false),
        (place_extra, true),
    ] {
        let (mut s, ready) = stream(place);
        let positions: Vec<u64> = (0..103).collect();
        send(&mut s, &positions);
        let chunks = ready.lock().unwrap();
        assert_eq!(chunks.len(), 11);
        for (i, c) in chunks.iter().enumerate() {
            let present = prefix_present(i, 103);
            check_chunk(c, i as i64, &present);
            if extra {
                for (j, _) in present.iter().enumerate().filter(|(_, p)| **p != 0) {
                    let v = u64::from_le_bytes(c.extra[j * 8..j * 8 + 8].try_into().unwrap());
                    assert_eq!(v, (i * HEAPS_PER_CHUNK + j) as u64 * 3);
                }
            }
        }
        let st = s.stats();
        // The descriptor heap and the stop heap have no position: rejected.
        assert_eq!(st.get("rejected_heaps"), Some(2));
        assert_eq!(st.get("too_old_heaps"), Some(0));
        // The descriptor heap counts (it completed); the complete stop heap does not.
        assert_eq!(st.heaps, 104);
    }
}

#[test]
fn out_of_order_within_the_window() {
    let (mut s, ready) = stream(place_plain);
    send(&mut s, &[37, 7, 27, 47, 17, 87, 57, 77, 67]);
    let chunks = ready.lock().unwrap();
    assert_eq!(chunks.len(), 9);
    for (i, c) in chunks.iter().enumerate() {
        check_chunk(c, i as i64, &[0, 0, 0, 0, 0, 0, 0, 1, 0, 0]);
    }
}

#[test]
fn jump_skips_whole_chunks() {
    let (mut s, ready) = stream(place_plain);
    send(&mut s, &[100, 200]);
    let chunks = ready.lock().unwrap();
    let ids: Vec<i64> = chunks.iter().map(|c| c.chunk_id).collect();
    assert_eq!(ids, vec![7, 8, 9, 10, 17, 18, 19, 20]);
    for c in chunks.iter() {
        let mut present = [0u8; HEAPS_PER_CHUNK];
        present[0] = u8::from(c.chunk_id == 10 || c.chunk_id == 20);
        check_chunk(c, c.chunk_id, &present);
    }
}

#[test]
fn heap_too_old() {
    let (mut s, ready) = stream(place_plain);
    let mut pos: Vec<u64> = (10..41).collect();
    pos.push(0); // just too late
    pos.extend(41..50);
    send(&mut s, &pos);
    let chunks = ready.lock().unwrap();
    assert_eq!(chunks.len(), 5);
    for (i, c) in chunks.iter().enumerate() {
        let present = [u8::from(i != 0); HEAPS_PER_CHUNK];
        check_chunk(c, i as i64, &present);
    }
    let st = s.stats();
    assert_eq!(st.get("too_old_heaps"), Some(1));
    assert_eq!(st.get("rejected_heaps"), Some(2));
}

#[test]
fn packet_too_old() {
    let (mut s, ready) = stream(place_plain);
    s.add_datagram(&packet(0, 0, 100)).unwrap();
    for pos in 40..50 {
        s.add_datagram(&packet(pos, 0, HEAP_PAYLOAD_SIZE)).unwrap();
    }
    // Finishes heap 0, whose chunk has been aged out: no write, counted too old.
    s.add_datagram(&packet(0, 100, HEAP_PAYLOAD_SIZE)).unwrap();
    for pos in 50..60 {
        s.add_datagram(&packet(pos, 0, HEAP_PAYLOAD_SIZE)).unwrap();
    }
    s.stop();
    let chunks = ready.lock().unwrap();
    assert_eq!(chunks.len(), 6);
    for (i, c) in chunks.iter().enumerate() {
        check_chunk(c, i as i64, &[u8::from(i >= 4); HEAPS_PER_CHUNK]);
    }
    assert!(
        chunks[0].data[100..].iter().all(|&b| b == 0),
        "nothing written late"
    );
    assert_eq!(s.stats().get("too_old_heaps"), Some(1));
}

#[test]
fn packet_presence() {
    const PACKET_SIZE: usize = HEAP_PAYLOAD_SIZE / 2;
    let ready: Ready = Arc::default();
    let r = Arc::clone(&ready);
    let mut config = StreamConfig {
        max_heaps: 128,
        allow_out_of_order: true,
        ..StreamConfig::default()
    };
    let placed = config.add_stat("placed_heaps", StatMode::Counter).unwrap();
    // spead2's place_bind with scale 2.
    let mut cc = ChunkStreamConfig::new(move |d: &mut PlaceData<'_>| {
        if let [Some(pos), Some(len), Some(plen)] = d.items {
            if *len == HEAP_PAYLOAD_SIZE as u64 && *plen == PACKET_SIZE as u64 {
                d.chunk_id = (pos / HEAPS_PER_CHUNK as u64) as i64;
                let index = (pos % HEAPS_PER_CHUNK as u64) as usize;
                d.heap_index = index * 2;
                d.heap_offset = index * HEAP_PAYLOAD_SIZE;
                *d.stats.value_mut(placed).unwrap() += 1;
            }
        }
    })
    .with_allocate(|_, _| Some(Chunk::new(CHUNK_PAYLOAD_SIZE, 2 * HEAPS_PER_CHUNK, 0)))
    .with_ready(move |c, _| r.lock().unwrap().push(c));
    cc.items = vec![0x1000, HEAP_LENGTH_ID, PAYLOAD_LENGTH_ID];
    cc.max_chunks = 4;
    cc.packet_presence_payload_size = Some(PACKET_SIZE);
    let mut s = ChunkStream::new_chunked(config, cc).unwrap();
    s.add_datagram(&packet(4, 0, PACKET_SIZE)).unwrap();
    s.add_datagram(&packet(4, PACKET_SIZE, 2 * PACKET_SIZE))
        .unwrap();
    s.add_datagram(&packet(17, PACKET_SIZE, 2 * PACKET_SIZE))
        .unwrap();
    s.stop();
    let chunks = ready.lock().unwrap();
    assert_eq!(chunks.len(), 2);
    let mut p0 = [0u8; 20];
    p0[8..10].fill(1);
    let mut p1 = [0u8; 20];
    p1[15] = 1;
    assert_eq!((chunks[0].chunk_id, &chunks[0].present[..]), (0, &p0[..]));
    assert_eq!((chunks[1].chunk_id, &chunks[1].present[..]), (1, &p1[..]));
    assert_eq!(
        &chunks[1].data[7 * 1024 + 512..8 * 1024],
        &heap_payload(17)[512..]
    );
    assert_eq!(s.stats().get("placed_heaps"), Some(2));
}

#[test]
fn placements_outside_the_chunk_are_rejected() {
    let ready: Ready = Arc::default();
    let r = Arc::clone(&ready);
    let mut cc = ChunkStreamConfig::new(|d: &mut PlaceData<'_>| {
        d.chunk_id = 0;
        d.heap_index = 3;
        d.heap_offset = CHUNK_PAYLOAD_SIZE - 100; // the heap would run off the end
    })
    .with_allocate(new_chunk)
    .with_ready(move |c, _| r.lock().unwrap().push(c));
    cc.items = vec![0x1000];
    let mut s = ChunkStream::new_chunked(StreamConfig::default(), cc).unwrap();
    s.add_datagram(&packet(1, 0, HEAP_PAYLOAD_SIZE)).unwrap();
    s.stop();
    assert_eq!(s.stats().get("rejected_heaps"), Some(1));
    assert_eq!(ready.lock().unwrap()[0].present, vec![0; HEAPS_PER_CHUNK]);
}

#[test]
fn impossible_configs_are_refused() {
    let cc = || ChunkStreamConfig::<()>::new(place_plain).with_allocate(new_chunk);
    assert_eq!(
        ChunkStream::new_chunked(StreamConfig::default(), cc()).unwrap_err(),
        ChunkError::NoReady
    );
    let mut zero = cc().with_ready(|_, _| {});
    zero.max_chunks = 0;
    assert_eq!(
        ChunkStream::new_chunked(StreamConfig::default(), zero).unwrap_err(),
        ChunkError::ZeroMaxChunks
    );
    let zero_heaps = StreamConfig {
        max_heaps: 0,
        ..StreamConfig::default()
    };
    assert_eq!(
        ChunkStream::new_chunked(zero_heaps, cc().with_ready(|_, _| {})).unwrap_err(),
        ChunkError::ZeroHeaps
    );
    let mut pp = cc().with_ready(|_, _| {});
    pp.packet_presence_payload_size = Some(0);
    assert_eq!(
        ChunkStream::new_chunked(StreamConfig::default(), pp).unwrap_err(),
        ChunkError::ZeroPresencePayload
    );
    let group = ChunkStreamGroup::new(ChunkStreamGroupConfig::new(new_chunk, |_, _| {})).unwrap();
    let mut big = ChunkStreamConfig::new(place_plain);
    big.max_chunks = 3;
    assert_eq!(
        group.add_stream(StreamConfig::default(), big).unwrap_err(),
        ChunkError::MemberWindowTooLarge {
            stream: 3,
            group: 2
        }
    );
}

#[test]
fn rings_recycle_chunks_between_threads() {
    let (rings, ends) = chunk_rings(4);
    for _ in 0..4 {
        ends.free
            .add_free_chunk(new_chunk(0, &mut Stats::default()).unwrap());
    }
    let mut cc = ChunkStreamConfig::new(place_plain).with_rings(rings);
    cc.items = vec![0x1000, HEAP_LENGTH_ID];
    cc.max_chunks = 4;
    let mut s = ChunkStream::new_chunked(StreamConfig::default(), cc).unwrap();
    let feeder = std::thread::spawn(move || {
        let positions: Vec<u64> = (0..103).collect();
        send(&mut s, &positions);
        s.stats()
    });
    let mut seen = 0;
    for c in &ends.data {
        check_chunk(&c, seen, &prefix_present(seen as usize, 103));
        seen += 1;
        ends.free.add_free_chunk(c);
    }
    assert_eq!(seen, 11);
    assert_eq!(feeder.join().unwrap().heaps, 104);
}

#[test]
fn two_streams_share_rings() {
    // spead2's test_shared_ringbuffer: chunks tell which stream filled them.
    let (rings, ends) = chunk_rings(4);
    for _ in 0..4 {
        ends.free
            .add_free_chunk(new_chunk(0, &mut Stats::default()).unwrap());
    }
    let n_heaps = [17usize, 23];
    let feeders: Vec<_> = n_heaps
        .iter()
        .enumerate()
        .map(|(k, &n)| {
            let mut cc = ChunkStreamConfig::new(place_plain).with_rings(rings.clone());
            cc.items = vec![0x1000, HEAP_LENGTH_ID];
            cc.max_chunks = 4;
            let config = StreamConfig {
                stream_id: k,
                ..StreamConfig::default()
            };
            let mut s = ChunkStream::new_chunked(config, cc).unwrap();
            std::thread::spawn(move || send(&mut s, &(0..n as u64).collect::<Vec<_>>()))
        })
        .collect();
    drop(rings);
    let mut seen = [0usize; 2];
    for c in &ends.data {
        let k = c.stream_id;
        check_chunk(&c, seen[k] as i64, &prefix_present(seen[k], n_heaps[k]));
        seen[k] += 1;
        ends.free.add_free_chunk(c);
    }
    assert_eq!(seen, [2, 3]);
    for f in feeders {
        f.join().unwrap();
    }
}

const STREAMS: usize = 4;

fn place_bias(bias: i64) -> impl FnMut(&mut PlaceData<'_>) + Send {
    move |d: &mut PlaceData<'_>| {
        place_plain(d);
        if d.chunk_id >= 0 {
            d.chunk_id += bias;
        }
    }
}

fn group_streams(mode: EvictionMode, bias: i64) -> (ChunkStreamGroup, Vec<ChunkStream>, Ready) {
    let ready: Ready = Arc::default();
    let r = Arc::clone(&ready);
    let mut gc = ChunkStreamGroupConfig::new(new_chunk, move |c, _| r.lock().unwrap().push(c));
    gc.max_chunks = 4;
    gc.eviction_mode = mode;
    let group = ChunkStreamGroup::new(gc).unwrap();
    let streams = (0..STREAMS)
        .map(|k| {
            let mut cc = ChunkStreamConfig::new(place_bias(bias));
            cc.items = vec![0x1000, HEAP_LENGTH_ID];
            cc.max_chunks = 4;
            let config = StreamConfig {
                max_heaps: 128,
                stream_id: 10 + k,
                ..StreamConfig::default()
            };
            group.add_stream(config, cc).unwrap()
        })
        .collect();
    (group, streams, ready)
}

/// Each stream gets heap `i` when `i % STREAMS` is its index; each stops at the end of
/// its input. Lossless groups need a thread per stream; lossy ones are fed from one
/// thread in order (with threads, what lossy eviction catches depends on timing,
/// which spead2's tests paper over with sleeps).
fn run_group(mode: EvictionMode, mut streams: Vec<ChunkStream>, heaps: &[u64]) {
    if mode == EvictionMode::Lossy {
        for (i, &h) in heaps.iter().enumerate() {
            streams[h as usize % STREAMS].add_buffer(&heap_bytes(i as u64 + 1, h));
        }
        for s in &mut streams {
            s.stop();
        }
        return;
    }
    feed_on_threads(streams, heaps);
}

/// Each stream on a thread of its own gets heap `i` when `i % STREAMS` is its index,
/// and stops at the end of its input.
fn feed_on_threads(streams: Vec<ChunkStream>, heaps: &[u64]) {
    let threads: Vec<_> = streams
        .into_iter()
        .enumerate()
        .map(|(k, mut s)| {
            let mine: Vec<u64> = heaps
                .iter()
                .copied()
                .filter(|h| *h as usize % STREAMS == k)
                .collect();
            std::thread::spawn(move || {
                for (i, &h) in mine.iter().enumerate() {
                    s.add_buffer(&heap_bytes(i as u64 + 1, h));
                }
                s.stop();
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

/// spead2's `_verify`: the chunks holding any heap, in order, with the heaps sent.
fn verify_group(ready: &Ready, chunks: usize, heaps: &[u64], bias: i64) {
    let got = ready.lock().unwrap();
    let real: Vec<&Chunk> = got.iter().filter(|c| c.present.contains(&1)).collect();
    let mut expected = vec![0u8; chunks * HEAPS_PER_CHUNK];
    for &h in heaps {
        expected[h as usize] = 1;
    }
    let ids: Vec<usize> = (0..chunks)
        .filter(|i| expected[i * HEAPS_PER_CHUNK..(i + 1) * HEAPS_PER_CHUNK].contains(&1))
        .collect();
    assert_eq!(real.len(), ids.len());
    for (c, i) in real.iter().zip(ids) {
        assert_eq!(c.chunk_id, i as i64 + bias);
        let want = &expected[i * HEAPS_PER_CHUNK..(i + 1) * HEAPS_PER_CHUNK];
        let mut unbiased = (*c).clone();
        unbiased.chunk_id = i as i64;
        check_chunk(&unbiased, i as i64, want);
    }
    // The stream that first asked for a chunk names it (its stream_id).
    assert!(got
        .iter()
        .all(|c| (10..10 + STREAMS).contains(&c.stream_id)));
    let all_ids: Vec<i64> = got.iter().map(|c| c.chunk_id).collect();
    assert!(all_ids.windows(2).all(|w| w[0] < w[1]), "ready in order");
}

#[test]
fn group_full_in_order_and_missing_streams() {
    let chunks = 20;
    let all: Vec<u64> = (0..(chunks * HEAPS_PER_CHUNK) as u64).collect();
    let cases: [Vec<u64>; 4] = [
        all.clone(),
        // One stream gets nothing.
        all.iter()
            .copied()
            .filter(|i| i % STREAMS as u64 != 2)
            .collect(),
        // One stream stops getting data after chunk 7.
        all.iter()
            .copied()
            .filter(|i| *i < 70 || i % STREAMS as u64 != 2)
            .collect(),
        // Whole chunks missing.
        all.iter()
            .copied()
            .filter(|i| ![1, 6, 7, 13, 14, 15, 16, 17, 18].contains(&(i / 10)))
            .collect(),
    ];
    for mode in [EvictionMode::Lossy, EvictionMode::Lossless] {
        for heaps in &cases {
            let (_group, streams, ready) = group_streams(mode, 0);
            run_group(mode, streams, heaps);
            verify_group(&ready, chunks, heaps, 0);
        }
    }
}

#[test]
fn group_large_chunk_ids() {
    let chunks = 20;
    let heaps: Vec<u64> = (0..(chunks * HEAPS_PER_CHUNK) as u64).collect();
    let bias = i64::MAX - chunks as i64 + 1;
    for mode in [EvictionMode::Lossy, EvictionMode::Lossless] {
        let (_group, streams, ready) = group_streams(mode, bias);
        run_group(mode, streams, &heaps);
        verify_group(&ready, chunks, &heaps, bias);
    }
}

#[test]
fn lossy_group_evicts_for_a_silent_stream_on_one_thread() {
    // Single-threaded: stream 0 races ahead while the others are silent; lossy
    // eviction makes its chunks ready without them.
    let (_group, mut streams, ready) = group_streams(EvictionMode::Lossy, 0);
    for (i, h) in (0..60u64).filter(|h| h % STREAMS as u64 == 0).enumerate() {
        streams[0].add_buffer(&heap_bytes(i as u64 + 1, h));
    }
    let ids: Vec<i64> = ready.lock().unwrap().iter().map(|c| c.chunk_id).collect();
    assert_eq!(ids, vec![0, 1]);
    // A late heap for chunk 1 on another stream is now too old there.
    streams[1].add_buffer(&heap_bytes(1, 13));
    assert_eq!(streams[1].stats().get("too_old_heaps"), Some(1));
    for s in &mut streams {
        s.stop();
    }
    let ids: Vec<i64> = ready.lock().unwrap().iter().map(|c| c.chunk_id).collect();
    assert_eq!(ids, vec![0, 1, 2, 3, 4, 5]);
}

#[test]
fn group_stop_unblocks_a_lossless_wait() {
    // Stream 2 never gets its second half: in lossless mode the others wait for it
    // until the group is stopped.
    let chunks = 20;
    let n = (chunks * HEAPS_PER_CHUNK) as u64;
    let heaps: Vec<u64> = (0..n)
        .filter(|i| *i < n / 2 || i % STREAMS as u64 != 2)
        .collect();
    let (group, streams, ready) = group_streams(EvictionMode::Lossless, 0);
    let feeder = std::thread::spawn(move || run_group(EvictionMode::Lossless, streams, &heaps));
    group.stop();
    feeder.join().unwrap();
    let got = ready.lock().unwrap();
    for (i, c) in got.iter().enumerate() {
        assert_eq!(c.chunk_id, i as i64);
    }
}

/// The streams write the chunks at once, without a lock of the chunk's, while lossy
/// eviction by whichever stream runs ahead takes chunks away from the others: what a
/// chunk marks present must be exactly that heap's bytes.
fn lossy_group_on_threads(chunks: usize) {
    let heaps: Vec<u64> = (0..(chunks * HEAPS_PER_CHUNK) as u64).collect();
    let (_group, streams, ready) = group_streams(EvictionMode::Lossy, 0);
    feed_on_threads(streams, &heaps);
    let got = ready.lock().unwrap();
    assert!(got.windows(2).all(|w| w[0].chunk_id < w[1].chunk_id));
    for c in got.iter() {
        let present = c.present.clone();
        check_chunk(c, c.chunk_id, &present);
    }
}

#[test]
fn a_lossy_group_on_threads_marks_present_only_heaps_written_whole() {
    lossy_group_on_threads(60);
}

/// The same, small enough for Miri (`cargo xtask miri`), which checks the group's
/// whole path across threads: placing, lock-free writes, claims given back, chunks
/// taken after the handshake.
#[test]
fn a_small_lossy_group_on_threads() {
    lossy_group_on_threads(6);
}

#[test]
fn heaps_placed_over_a_live_heaps_bytes_are_rejected() {
    // Every heap goes to the same bytes. A heap whose bytes another stream is still
    // writing is refused (streams write a chunk without a lock of the chunk's, each
    // heap its own bytes); once that heap is done, its bytes are free again.
    let ready: Ready = Arc::default();
    let r = Arc::clone(&ready);
    let mut gc = ChunkStreamGroupConfig::new(new_chunk, move |c, _| r.lock().unwrap().push(c));
    gc.max_chunks = 4;
    let group = ChunkStreamGroup::new(gc).unwrap();
    let mut streams: Vec<ChunkStream> = (0..2)
        .map(|_| {
            let mut cc = ChunkStreamConfig::new(|d: &mut PlaceData<'_>| {
                d.chunk_id = 0;
                d.heap_index = 0;
                d.heap_offset = 0;
            });
            cc.items = vec![0x1000];
            group.add_stream(StreamConfig::default(), cc).unwrap()
        })
        .collect();
    let half = HEAP_PAYLOAD_SIZE / 2;
    streams[0].add_datagram(&packet(0, 0, half)).unwrap();
    streams[1].add_datagram(&packet(1, 0, half)).unwrap();
    assert_eq!(streams[1].stats().get("rejected_heaps"), Some(1));
    // The same stream cannot overlap its own live heap either.
    streams[0].add_datagram(&packet(2, 0, half)).unwrap();
    assert_eq!(streams[0].stats().get("rejected_heaps"), Some(1));
    streams[0]
        .add_datagram(&packet(0, half, HEAP_PAYLOAD_SIZE))
        .unwrap();
    streams[1].add_buffer(&heap_bytes(3, 1));
    assert_eq!(streams[1].stats().get("rejected_heaps"), Some(1));
    for s in &mut streams {
        s.stop();
    }
    let got = ready.lock().unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].present[0], 1);
    assert_eq!(&got[0].data[..HEAP_PAYLOAD_SIZE], &heap_payload(1)[..]);
}

#[test]
fn transports_feed_chunk_streams() {
    use crate::pcap::{Filter, PcapSource};
    use crate::transport::ByteStreamReader;
    use crate::transport::{UdpReceiver, UdpRecvConfig, UdpSendConfig, UdpSender};
    use netwire::pcap::{PcapWriter, WriteFormat};
    use std::net::{Ipv4Addr, SocketAddrV4};
    let positions: Vec<u64> = (0..25).collect();
    let mut heaps: Vec<Vec<u8>> = positions.iter().map(|&p| heap_bytes(p + 1, p)).collect();
    heaps.push(stop_heap(100));
    let expect = |ready: &Ready| {
        let chunks = ready.lock().unwrap();
        assert_eq!(chunks.len(), 3);
        for (i, c) in chunks.iter().enumerate() {
            check_chunk(c, i as i64, &prefix_present(i, 25));
        }
    };
    // Memory / file: packets back to back.
    let (mut s, ready) = stream(place_plain);
    let mut reader = ByteStreamReader::new(std::io::Cursor::new(heaps.concat()), 9000);
    reader.run(&mut s).unwrap();
    assert!(s.is_stopped());
    expect(&ready);
    // A pcap capture of the same datagrams.
    let (mut s, ready) = stream(place_plain);
    let frame = |payload: &[u8]| {
        netwire::raw::udp_frame(
            [2, 0, 0, 0, 0, 1],
            SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 9000),
            [1, 0, 0x5e, 10, 0, 1],
            SocketAddrV4::new(Ipv4Addr::new(239, 10, 0, 1), 7148),
            64,
            payload,
        )
    };
    let mut w = PcapWriter::with_format(Vec::new(), WriteFormat::SIMULATOR).unwrap();
    for (i, h) in heaps.iter().enumerate() {
        w.write(i as u64 * 1000, &frame(h)).unwrap();
    }
    let file = w.finish().unwrap();
    PcapSource::new(&file[..], Filter::ANY)
        .unwrap()
        .run(&mut s)
        .unwrap();
    assert!(s.is_stopped());
    expect(&ready);
    // UDP over loopback: one heap per datagram.
    let (mut s, ready) = stream(place_plain);
    let mut cfg = UdpRecvConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.buffer_size = 4 << 20;
    let mut rx = UdpReceiver::bind(&cfg).unwrap();
    let mut tx = UdpSender::new(&UdpSendConfig::new(vec![rx.local_addr().unwrap()])).unwrap();
    let batch: Vec<(&[u8], usize)> = heaps.iter().map(|h| (&h[..], 0)).collect();
    tx.send_batch(&batch).unwrap();
    while !s.is_stopped() {
        assert!(rx.pump(&mut s).unwrap() > 0, "timed out");
    }
    expect(&ready);
}

#[test]
fn allocate_and_ready_see_the_stream_stats() {
    let mut config = StreamConfig::default();
    let made = config.add_stat("chunks_made", StatMode::Counter).unwrap();
    let done = config.add_stat("chunks_done", StatMode::Counter).unwrap();
    let mut cc = ChunkStreamConfig::new(place_plain)
        .with_allocate(move |id, stats: &mut Stats| {
            *stats.value_mut(made).unwrap() += 1;
            new_chunk(id, stats)
        })
        .with_ready(move |_, stats: &mut Stats| *stats.value_mut(done).unwrap() += 1);
    cc.items = vec![0x1000, HEAP_LENGTH_ID];
    let mut s = ChunkStream::new_chunked(config, cc).unwrap();
    send(&mut s, &(0..35).collect::<Vec<_>>());
    let st = s.stats();
    assert_eq!(
        (st.get("chunks_made"), st.get("chunks_done")),
        (Some(4), Some(4))
    );
}
