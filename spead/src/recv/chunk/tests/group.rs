//! Chunk stream groups (spead2's `tests/test_recv_chunk_stream_group.py`).

use super::*;

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
