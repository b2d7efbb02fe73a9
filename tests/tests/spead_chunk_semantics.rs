//! Chunk streams against spead2 4.5.1: the same packets through spead2's
//! `ChunkRingStream` (with the place function of spead2's own chunk stream tests) and
//! through ours give the same chunks, byte for byte, and the same counters. The packet
//! sequences are those of spead2's `tests/test_recv_chunk_stream.py`.

use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use spead::recv::{
    Chunk, ChunkStream, ChunkStreamConfig, ChunkStreamGroup, ChunkStreamGroupConfig, EvictionMode,
    PlaceData, StreamConfig,
};
use spead::wire::HEAP_LENGTH_ID;
use workspace_tests::spead2::run_json_script;

const HEAP_PAYLOAD_SIZE: usize = 1024;
const HEAPS_PER_CHUNK: usize = 10;

fn heap(cnt: u64, position: u64) -> Vec<u8> {
    spead::test_support::spead2_chunk_heap(cnt, position, HEAP_PAYLOAD_SIZE, false)
}

/// Heaps at these positions, then a stop heap.
fn heaps(positions: &[u64]) -> Vec<u8> {
    let mut out: Vec<u8> = positions
        .iter()
        .enumerate()
        .flat_map(|(i, &p)| heap(i as u64 + 1, p))
        .collect();
    out.extend(spead::test_support::stop_heap(positions.len() as u64 + 1));
    out
}

/// spead2's `make_packet`.
fn packet(position: u64, start: usize, end: usize) -> Vec<u8> {
    spead::test_support::spead2_chunk_packet(position, start, end, HEAP_PAYLOAD_SIZE)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn spead2(data: &[u8], max_chunks: usize, group: bool) -> Vec<Value> {
    let max_chunks = max_chunks.to_string();
    let mut args = vec![max_chunks.as_str()];
    args.extend(group.then_some("group"));
    run_json_script("spead2_chunk_stream.py", &args, data)
}

fn new_chunk() -> Option<Chunk> {
    Some(Chunk::new(
        HEAPS_PER_CHUNK * HEAP_PAYLOAD_SIZE,
        HEAPS_PER_CHUNK,
        0,
    ))
}

fn chunk_json(c: &Chunk) -> Value {
    json!({"chunk_id": c.chunk_id, "present": c.present, "data": hex(&c.data)})
}

/// spead2's test `place_plain`, requesting items 0x1000 and HEAP_LENGTH.
fn place_plain(max_chunks: usize) -> ChunkStreamConfig {
    let mut cc = ChunkStreamConfig::new(|d: &mut PlaceData<'_>| {
        if let [Some(pos), Some(len)] = d.items {
            if *len == HEAP_PAYLOAD_SIZE as u64 {
                d.chunk_id = (pos / HEAPS_PER_CHUNK as u64) as i64;
                d.heap_index = (pos % HEAPS_PER_CHUNK as u64) as usize;
                d.heap_offset = d.heap_index * HEAP_PAYLOAD_SIZE;
            }
        }
    });
    cc.items = vec![0x1000, HEAP_LENGTH_ID];
    cc.max_chunks = max_chunks;
    cc
}

fn ours(data: &[u8], max_chunks: usize) -> Vec<Value> {
    let ready = Arc::new(Mutex::new(Vec::new()));
    let r = Arc::clone(&ready);
    let cc = place_plain(max_chunks)
        .with_allocate(|_, _| new_chunk())
        .with_ready(move |c, _| r.lock().unwrap().push(c));
    let config = StreamConfig {
        max_heaps: 128,
        ..StreamConfig::default()
    };
    let mut s = ChunkStream::new_chunked(config, cc).unwrap();
    s.add_buffer(data);
    s.stop();
    let mut out: Vec<Value> = ready.lock().unwrap().iter().map(chunk_json).collect();
    let st = s.stats();
    let get = |n: &str| st.get(n).unwrap();
    out.push(json!({"stats": {
        "heaps": get("heaps"),
        "incomplete_heaps_evicted": get("incomplete_heaps_evicted"),
        "incomplete_heaps_flushed": get("incomplete_heaps_flushed"),
        "packets": get("packets"),
        "too_old_heaps": get("too_old_heaps"),
        "rejected_heaps": get("rejected_heaps"),
    }}));
    out
}

#[test]
fn chunk_streams_fill_chunks_as_spead2() {
    let mut too_old: Vec<u64> = (10..41).collect();
    too_old.push(0);
    too_old.extend(41..50);
    let mut packet_too_old = packet(0, 0, 100);
    for pos in 40..50 {
        packet_too_old.extend(packet(pos, 0, HEAP_PAYLOAD_SIZE));
    }
    packet_too_old.extend(packet(0, 100, HEAP_PAYLOAD_SIZE));
    for pos in 50..60 {
        packet_too_old.extend(packet(pos, 0, HEAP_PAYLOAD_SIZE));
    }
    let cases: Vec<(&str, Vec<u8>, usize)> = vec![
        ("basic", heaps(&(0..103).collect::<Vec<_>>()), 4),
        (
            "out of order within the window",
            heaps(&[37, 7, 27, 47, 17, 87, 57, 77, 67]),
            4,
        ),
        ("jump", heaps(&[100, 200]), 4),
        ("heap too old", heaps(&too_old), 4),
        ("packet too old", packet_too_old, 4),
        ("one chunk live", heaps(&[3, 14, 5, 25, 36, 30]), 1),
    ];
    for (name, data, max_chunks) in &cases {
        let theirs = spead2(data, *max_chunks, false);
        let mine = ours(data, *max_chunks);
        assert!(theirs.len() > 1, "{name}: spead2 made no chunks");
        assert_eq!(mine, theirs, "{name}");
    }
    // Spot checks that the cases exercise what their names say.
    let stats = |i: usize| ours(&cases[i].1, cases[i].2).pop().unwrap()["stats"].clone();
    assert_eq!(stats(0)["rejected_heaps"], json!(1), "the stop heap");
    assert_eq!(stats(3)["too_old_heaps"], json!(1));
    assert_eq!(stats(4)["too_old_heaps"], json!(1));
}

/// A lossless group of one stream per buffer, each on its own thread; the chunks
/// holding any heap.
fn ours_group(buffers: &[Vec<u8>], max_chunks: usize) -> Vec<Value> {
    let ready = Arc::new(Mutex::new(Vec::new()));
    let r = Arc::clone(&ready);
    let mut gc = ChunkStreamGroupConfig::new(
        |_, _| new_chunk(),
        move |c: Chunk, _| r.lock().unwrap().push(c),
    );
    gc.max_chunks = max_chunks;
    gc.eviction_mode = EvictionMode::Lossless;
    let group = ChunkStreamGroup::new(gc).unwrap();
    // Every stream joins before any is fed, as spead2 requires.
    let streams: Vec<ChunkStream> = buffers
        .iter()
        .map(|_| {
            let config = StreamConfig {
                max_heaps: 128,
                ..StreamConfig::default()
            };
            group.add_stream(config, place_plain(max_chunks)).unwrap()
        })
        .collect();
    let threads: Vec<_> = streams
        .into_iter()
        .zip(buffers.to_vec())
        .map(|(mut s, b)| {
            std::thread::spawn(move || {
                s.add_buffer(&b);
                s.stop();
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let chunks = ready.lock().unwrap();
    chunks
        .iter()
        .filter(|c| c.present.contains(&1))
        .map(chunk_json)
        .collect()
}

#[test]
fn lossless_groups_fill_chunks_as_spead2() {
    // spead2's tests/test_recv_chunk_stream_group.py shapes: four streams, heap i to
    // stream i % 4, 20 chunks; every heap, one stream silent, one stream stopping
    // half way, whole chunks missing.
    const STREAMS: u64 = 4;
    let all: Vec<u64> = (0..200).collect();
    let cases: Vec<(&str, Vec<u64>)> = vec![
        ("full in order", all.clone()),
        (
            "missing stream",
            all.iter().copied().filter(|i| i % STREAMS != 2).collect(),
        ),
        (
            "half missing stream",
            all.iter()
                .copied()
                .filter(|i| *i < 70 || i % STREAMS != 2)
                .collect(),
        ),
        (
            "missing chunks",
            all.iter()
                .copied()
                .filter(|i| ![1, 6, 7, 13, 14, 15, 16, 17, 18].contains(&(i / 10)))
                .collect(),
        ),
    ];
    for (name, positions) in &cases {
        let buffers: Vec<Vec<u8>> = (0..STREAMS)
            .map(|k| {
                let mine: Vec<u64> = positions
                    .iter()
                    .copied()
                    .filter(|p| p % STREAMS == k)
                    .collect();
                heaps(&mine)
            })
            .collect();
        let input =
            serde_json::to_vec(&buffers.iter().map(|b| hex(b)).collect::<Vec<_>>()).unwrap();
        let theirs = spead2(&input, 4, true);
        let mine = ours_group(&buffers, 4);
        assert!(!theirs.is_empty(), "{name}: spead2 made no chunks");
        let brief = |v: &[Value]| -> Vec<(Value, Value)> {
            v.iter()
                .map(|c| (c["chunk_id"].clone(), c["present"].clone()))
                .collect()
        };
        assert_eq!(brief(&mine), brief(&theirs), "{name}");
        assert_eq!(mine, theirs, "{name}");
    }
}
