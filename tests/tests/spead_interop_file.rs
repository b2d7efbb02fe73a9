//! spead2 and we read each other's packet streams (files of back-to-back packets, the
//! format spead2's BytesStream writes), and assemble the same heaps from them.

use std::fs::File;
use std::io::BufReader;

use spead::json::heap_json;
use spead::recv::{Stream, StreamConfig};
use spead::transport::ByteStreamReader;
use workspace_tests::spead2::{
    run_tool, spead2_bytes, stream_specs, summarize, summarize_tool_output, temp_path, HeapSummary,
};

fn read_file_with_us(path: &std::path::Path) -> (Vec<HeapSummary>, spead::recv::Stats) {
    let mut stream = Stream::new(StreamConfig::default());
    let mut reader = ByteStreamReader::new(BufReader::new(File::open(path).unwrap()), 9200);
    reader.run(&mut stream).unwrap();
    stream.stop();
    let mut heaps = Vec::new();
    while let Some(h) = stream.pop_heap() {
        assert!(h.complete, "heap {} incomplete", h.cnt);
        heaps.push(heap_json(&h));
    }
    (summarize(&heaps), stream.stats())
}

#[test]
fn we_read_spead2_files_as_spead2_does() {
    for (seed, packet) in [(1u64, 1472usize), (2, 9000), (3, 200)] {
        let specs = stream_specs(seed, 40, packet);
        let bytes: Vec<u8> = spead2_bytes(&specs).concat();
        let path = temp_path(&format!("from-spead2-{seed}.spead"));
        std::fs::write(&path, &bytes).unwrap();
        let (ours, stats) = read_file_with_us(&path);
        let (theirs, their_stats) =
            summarize_tool_output(&run_tool(&["recv-bytes", "4", "0"], &bytes));
        std::fs::remove_file(&path).unwrap();
        assert_eq!(ours.len(), specs.len() - 1, "all but the stop heap");
        assert_same(&ours, &theirs, "spead2 file");
        let their_stats = their_stats.unwrap();
        assert_eq!(stats.packets, their_stats["packets"].as_u64().unwrap());
        assert_eq!(stats.heaps, their_stats["heaps"].as_u64().unwrap());
        assert_eq!(
            stats.single_packet_heaps,
            their_stats["single_packet_heaps"].as_u64().unwrap()
        );
        assert_eq!(
            stats.search_dist,
            their_stats["search_dist"].as_u64().unwrap()
        );
    }
}

#[test]
fn spead2_reads_our_files() {
    for (seed, packet) in [(4u64, 1472usize), (5, 4096), (6, 256)] {
        let specs = stream_specs(seed, 40, packet);
        let path = temp_path(&format!("from-us-{seed}.spead"));
        let bytes: Vec<u8> = specs.iter().flat_map(|s| s.our_bytes()).collect();
        std::fs::write(&path, &bytes).unwrap();
        let (ours, _) = read_file_with_us(&path);
        let file_bytes = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        let (theirs, _) = summarize_tool_output(&run_tool(&["recv-bytes", "4", "0"], &file_bytes));
        assert_eq!(theirs.len(), specs.len() - 1);
        assert_same(&ours, &theirs, "our file");
    }
}

#[test]
fn out_of_order_and_eviction_counters_match_spead2() {
    // Interleave packets of several heaps so that heaps get evicted, then compare
    // counters and delivered heaps with spead2 in both modes.
    let specs = stream_specs(7, 24, 512);
    let per_heap: Vec<Vec<Vec<u8>>> = specs[..specs.len() - 1]
        .iter()
        .map(|s| split_packets(&s.our_bytes()))
        .collect();
    let mut mixed = Vec::new();
    let longest = per_heap.iter().map(Vec::len).max().unwrap_or(0);
    for round in 0..longest {
        for (h, packets) in per_heap.iter().enumerate() {
            // Reverse every third heap's order to exercise out-of-order handling.
            let idx = if h % 3 == 0 {
                packets.len().wrapping_sub(round + 1)
            } else {
                round
            };
            if let Some(p) = packets.get(idx) {
                mixed.extend_from_slice(p);
            }
        }
    }
    mixed.extend(specs.last().unwrap().our_bytes());
    for (max_heaps, ooo) in [(4usize, false), (4, true), (2, true), (16, true)] {
        let cfg = StreamConfig {
            max_heaps,
            allow_out_of_order: ooo,
            ..StreamConfig::default()
        };
        let (ours, stats) = workspace_tests::spead2::our_receive(&mixed, cfg);
        let ours: Vec<HeapSummary> = summarize(&ours);
        let flag = if ooo { "1" } else { "0" };
        let (theirs, their_stats) = summarize_tool_output(&run_tool(
            &["recv-bytes", &max_heaps.to_string(), flag],
            &mixed,
        ));
        assert_same(&ours, &theirs, &format!("max_heaps {max_heaps} ooo {ooo}"));
        let t = their_stats.unwrap();
        for (name, value) in [
            ("heaps", stats.heaps),
            ("incomplete_heaps_evicted", stats.incomplete_heaps_evicted),
            ("incomplete_heaps_flushed", stats.incomplete_heaps_flushed),
            ("packets", stats.packets),
            ("single_packet_heaps", stats.single_packet_heaps),
        ] {
            assert_eq!(
                value,
                t[name].as_u64().unwrap(),
                "{name} (max_heaps {max_heaps} ooo {ooo})"
            );
        }
    }
}

fn split_packets(mut b: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    while !b.is_empty() {
        let n = spead::wire::decode_packet(b).unwrap().size();
        out.push(b[..n].to_vec());
        b = &b[n..];
    }
    out
}

fn assert_same(ours: &[HeapSummary], theirs: &[HeapSummary], what: &str) {
    let ours_cnts: Vec<u64> = ours.iter().map(|h| h.0).collect();
    let their_cnts: Vec<u64> = theirs.iter().map(|h| h.0).collect();
    assert_eq!(ours_cnts, their_cnts, "{what}: heap cnts");
    for (a, b) in ours.iter().zip(theirs) {
        assert!(
            a == b,
            "{what}: heap {} differs\nours:   {a:?}\nspead2: {b:?}",
            a.0
        );
    }
}
