//! Single chunk streams (spead2's `tests/test_recv_chunk_stream.py`).

use super::*;

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
