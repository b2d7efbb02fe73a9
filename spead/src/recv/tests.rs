//! Heap assembly tests; expected counters were observed from spead2 4.5.1.

use super::*;
use crate::send::{heap_to_bytes, Heap as SendHeap};
use crate::wire::Flavour;

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| c.is_ascii_hexdigit()).collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// Packets of a heap with one 200-byte (or `len`) item, split at 200-byte packets.
fn packets(len: usize, cnt: u64) -> Vec<Vec<u8>> {
    let mut h = SendHeap::new(Flavour::SPEAD_64_48);
    h.add_item(0x1000, vec![cnt as u8; len], false);
    split(&heap_to_bytes(&h, cnt, 200).unwrap())
}

fn split(b: &[u8]) -> Vec<Vec<u8>> {
    crate::wire::split_packets(b).map(<[u8]>::to_vec).collect()
}

fn run(pkts: &[&Vec<u8>], config: StreamConfig) -> (Vec<u64>, Stats) {
    let mut s = Stream::new(config);
    for p in pkts {
        let _ = s.add_datagram(p);
    }
    s.stop();
    let mut cnts = Vec::new();
    while let Some(h) = s.pop_heap() {
        cnts.push(h.cnt);
    }
    (cnts, s.stats())
}

fn mh(n: usize) -> StreamConfig {
    StreamConfig {
        max_heaps: n,
        ..StreamConfig::default()
    }
}

#[test]
fn ring_eviction_matches_spead2() {
    let (a, b, c) = (packets(200, 1), packets(200, 2), packets(200, 3));
    let (got, st) = run(&[&a[0], &b[0], &b[1], &c[0], &a[1], &c[1]], mh(2));
    assert_eq!(got, vec![2, 3]);
    assert_eq!(
        (
            st.heaps,
            st.incomplete_heaps_evicted,
            st.packets,
            st.search_dist
        ),
        (3, 1, 6, 6)
    );
    assert_eq!(st.packets_dropped_in_order, 1);
}

#[test]
fn single_packet_heap_takes_a_slot() {
    let (a, b, c) = (packets(200, 1), packets(20, 2), packets(200, 3));
    assert_eq!(b.len(), 1);
    let (got, st) = run(&[&a[0], &c[0], &b[0], &a[1], &c[1]], mh(2));
    assert_eq!(got, vec![2, 3]);
    assert_eq!(
        (
            st.heaps,
            st.incomplete_heaps_evicted,
            st.single_packet_heaps,
            st.search_dist
        ),
        (3, 1, 1, 4)
    );
    let (got, st) = run(&[&a[0], &b[0], &a[1]], mh(4));
    assert_eq!(got, vec![2, 1]);
    assert_eq!(st.search_dist, 2);
}

#[test]
fn in_order_drops_and_flushes() {
    let a = packets(200, 1);
    let (got, st) = run(&[&a[1], &a[0]], mh(4));
    assert!(got.is_empty());
    assert_eq!(
        (
            st.heaps,
            st.incomplete_heaps_flushed,
            st.packets,
            st.search_dist
        ),
        (1, 1, 2, 2)
    );
    assert_eq!(st.packets_dropped_in_order, 1);
    assert_eq!(st.incomplete_heaps_dropped, 1);
}

#[test]
fn out_of_order_vector_from_spead_md() {
    let second = hex(
        "5304020600000006 8001000000000001 8003000000000020 8004000000000020
         8002000000000040 9600000000003039 5000000000000000",
    );
    let first =
        hex("5304020600000004 8001000000000001 8003000000000000 8004000000000020 8002000000000040");
    let mut p2 = second.clone();
    p2.extend(0x20u8..0x40);
    let mut p1 = first.clone();
    p1.extend(0u8..0x20);
    let mut s = Stream::new(StreamConfig {
        allow_out_of_order: true,
        ..StreamConfig::default()
    });
    s.add_datagram(&p2).unwrap();
    assert_eq!(s.add_datagram(&p2), Err(Reject::Duplicate));
    s.add_datagram(&p1).unwrap();
    let h = s.pop_heap().unwrap();
    assert!(h.complete);
    let items = h.items();
    assert_eq!(items.len(), 2);
    assert_eq!(items[0].id, 0x5000);
    assert_eq!(items[0].bytes(), &(0u8..0x40).collect::<Vec<_>>()[..]);
    assert_eq!(items[1].id, 0x1600);
    assert_eq!(items[1].immediate, Some(12345));
    assert_eq!(items[1].bytes(), &[0, 0, 0, 0, 0x30, 0x39]);
    // In order, the same arrival loses the heap.
    let mut s = Stream::new(StreamConfig::default());
    assert_eq!(s.add_datagram(&p2), Err(Reject::OutOfOrder));
    s.add_datagram(&p1).unwrap();
    s.stop();
    assert!(s.pop_heap().is_none());
}

#[test]
fn incomplete_heaps_delivered_with_ranges() {
    let a = packets(400, 1);
    assert_eq!(a.len(), 3);
    let (mut s, cfg) = (
        None,
        StreamConfig {
            allow_out_of_order: true,
            deliver_incomplete: true,
            ..StreamConfig::default()
        },
    );
    let stream = s.get_or_insert_with(|| Stream::new(cfg));
    stream.add_datagram(&a[0]).unwrap();
    stream.add_datagram(&a[2]).unwrap();
    stream.stop();
    let h = stream.pop_heap().unwrap();
    assert!(!h.complete);
    assert_eq!(h.heap_length, Some(400));
    assert_eq!(h.received_length, 152 + 88);
    assert_eq!(h.payload_ranges, vec![(0, 152), (312, 400)]);
    assert!(h.items().is_empty());
    assert_eq!(stream.stats().incomplete_heaps_flushed, 1);
}

#[test]
fn unsized_heaps_delivered_when_contiguous() {
    let a = packets(300, 5);
    let strip = |p: &Vec<u8>| {
        // Turn HEAP_LENGTH (third pointer) into a NULL immediate the receiver ignores.
        let mut q = p.clone();
        q[16] = 0x80;
        q[17] = 0x00;
        q
    };
    let (p0, p1) = (strip(&a[0]), strip(&a[1]));
    let (got, st) = run(&[&p0, &p1], mh(4));
    assert_eq!(got, vec![5]);
    assert_eq!(st.incomplete_heaps_flushed, 1);
    let (got, _) = run(
        &[&p1],
        StreamConfig {
            allow_out_of_order: true,
            ..mh(4)
        },
    );
    assert!(got.is_empty());
}

#[test]
fn stop_flushes_and_is_not_delivered() {
    let a = packets(400, 1);
    let mut stop = SendHeap::new(Flavour::SPEAD_64_48);
    stop.add_end();
    let stop = heap_to_bytes(&stop, 2, 1472).unwrap();
    let b = packets(20, 3);
    let mut s = Stream::new(StreamConfig {
        deliver_incomplete: true,
        ..StreamConfig::default()
    });
    s.add_datagram(&a[0]).unwrap();
    s.add_datagram(&stop).unwrap();
    assert!(s.is_stopped());
    assert_eq!(s.add_datagram(&b[0]), Err(Reject::Stopped));
    let h = s.pop_heap().unwrap();
    assert_eq!(h.cnt, 1);
    assert!(!h.complete);
    assert!(s.pop_heap().is_none());
    let st = s.stats();
    assert_eq!((st.incomplete_heaps_flushed, st.packets_after_stop), (1, 1));
}

#[test]
fn inconsistent_and_oversized_packets_are_counted() {
    let a = packets(400, 1);
    let mut s = Stream::new(StreamConfig {
        max_heap_size: 300,
        ..StreamConfig::default()
    });
    assert_eq!(s.add_datagram(&a[0]), Err(Reject::TooLarge));
    let mut s = Stream::new(StreamConfig::default());
    s.add_datagram(&a[0]).unwrap();
    let mut bad = a[1].clone();
    bad[23] = 0xff; // HEAP_LENGTH differs
    assert_eq!(s.add_datagram(&bad), Err(Reject::HeapLengthMismatch));
    let mut other = a[1].clone();
    other[2] = 3;
    other[3] = 5; // 64-40 now
    assert!(s.add_datagram(&other).is_err());
    assert_eq!(
        s.add_datagram(&[1, 2, 3]),
        Err(Reject::Malformed(crate::wire::WireError::Truncated {
            needed: 8,
            available: 3
        }))
    );
    let st = s.stats();
    // Re-read as 64-40 the pointers no longer hold a HEAP_CNT, so it is malformed.
    assert_eq!(st.packets_inconsistent, 1);
    assert_eq!(st.packets_malformed, 2);
}

#[test]
fn substreams_have_their_own_rings() {
    let (a, b) = (packets(200, 1), packets(200, 2));
    let cfg = StreamConfig {
        max_heaps: 1,
        substreams: 2,
        ..StreamConfig::default()
    };
    let (got, st) = run(&[&a[0], &b[0], &a[1], &b[1]], cfg);
    assert_eq!(got, vec![1, 2]);
    assert_eq!(st.incomplete_heaps_evicted, 0);
}

#[test]
fn pool_buffers_are_reused() {
    let mut s = Stream::new(StreamConfig::default());
    for cnt in 1..=10 {
        for p in packets(1000, cnt) {
            s.add_datagram(&p).unwrap();
        }
        drop(s.pop_heap().unwrap());
    }
    let pool = s.stats().pool;
    assert_eq!(pool.allocated, 1);
    assert_eq!(pool.reused, 9);
}

/// A SPEAD-64-48 packet with the given specials, extra pointers and payload.
fn raw(cnt: u64, heap_len: Option<u64>, offset: u64, extra: &[u64], payload: &[u8]) -> Vec<u8> {
    let f = Flavour::SPEAD_64_48;
    let mut ptrs = vec![f.immediate(1, cnt)];
    ptrs.extend(heap_len.map(|l| f.immediate(2, l)));
    ptrs.push(f.immediate(3, offset));
    ptrs.push(f.immediate(4, payload.len() as u64));
    ptrs.extend_from_slice(extra);
    crate::wire::encode_packet(f, &ptrs, payload).unwrap()
}

const F: Flavour = Flavour::SPEAD_64_48;

#[test]
fn an_item_past_heap_length_keeps_the_heap_incomplete() {
    // spead2 live_heap::is_complete: received == heap_length == min_length.
    let p = raw(
        7,
        Some(8),
        0,
        &[F.address(0x1000, 0), F.address(0x1001, 16)],
        &[1; 8],
    );
    let mut s = Stream::new(StreamConfig::default());
    s.add_datagram(&p).unwrap();
    assert!(
        s.pop_heap().is_none(),
        "all 8 bytes arrived, yet not complete"
    );
    s.stop();
    assert!(s.pop_heap().is_none(), "not contiguous: dropped");
    let st = s.stats();
    assert_eq!((st.heaps, st.incomplete_heaps_flushed), (1, 1));
    assert_eq!(st.incomplete_heaps_dropped, 1);
    // With incomplete heaps delivered it comes out incomplete, with no addressed items.
    let mut s = Stream::new(StreamConfig {
        deliver_incomplete: true,
        ..StreamConfig::default()
    });
    s.add_datagram(&p).unwrap();
    s.stop();
    let h = s.pop_heap().unwrap();
    assert_eq!((h.complete, h.contiguous), (false, false));
    assert_eq!((h.received_length, h.items_end()), (8, 16));
    assert!(h.items().is_empty());
}

#[test]
fn heap_length_smaller_than_an_item_address_is_rejected() {
    let first = raw(3, None, 0, &[F.address(0x1000, 40)], &[0; 8]);
    let second = raw(3, Some(16), 8, &[], &[0; 8]);
    let mut s = Stream::new(StreamConfig::default());
    s.add_datagram(&first).unwrap();
    assert_eq!(s.add_datagram(&second), Err(Reject::HeapLengthMismatch));
    assert_eq!(s.stats().packets_inconsistent, 1);
}

#[test]
fn items_1_to_4_are_never_items_but_null_ends_an_item() {
    // An addressed PAYLOAD_OFFSET (3) pointer is dropped by spead2's add_pointers, so
    // it neither appears nor ends the item before it; a NULL pointer does end it.
    let p = raw(
        9,
        Some(24),
        0,
        &[
            F.address(0x1000, 0),
            F.address(3, 8),
            F.address(0x1001, 16),
            F.address(0, 20),
        ],
        &(0u8..24).collect::<Vec<_>>(),
    );
    let mut s = Stream::new(StreamConfig::default());
    s.add_datagram(&p).unwrap();
    let h = s.pop_heap().unwrap();
    let items: Vec<(u64, Vec<u8>)> = h
        .items()
        .iter()
        .map(|i| (i.id, i.bytes().to_vec()))
        .collect();
    assert_eq!(
        items,
        vec![
            (0x1000, (0u8..16).collect()),
            (0x1001, vec![16, 17, 18, 19])
        ]
    );
}

#[test]
fn default_limits_accept_many_pointers() {
    let mut h = SendHeap::new(Flavour::SPEAD_64_48);
    for i in 0..5000 {
        h.add_immediate(0x1000 + i, i);
    }
    let mut s = Stream::new(StreamConfig::default());
    s.add_buffer(&heap_to_bytes(&h, 1, 1472).unwrap());
    let got = s.pop_heap().unwrap();
    assert!(got.complete);
    assert_eq!(got.items().len(), 5000);
    assert_eq!(s.stats().pointers_dropped, 0);
}

#[test]
fn unallocatable_heap_is_refused_and_counted() {
    let p = raw(1, Some((1 << 48) - 1), 0, &[], &[0; 8]);
    let mut s = Stream::new(StreamConfig::default());
    assert_eq!(s.add_datagram(&p), Err(Reject::OutOfMemory));
    assert_eq!(s.stats().heaps_alloc_failed, 1);
}

#[test]
fn too_fragmented_is_counted_as_such() {
    let a = packets(600, 1);
    assert_eq!(a.len(), 4);
    let mut s = Stream::new(StreamConfig {
        allow_out_of_order: true,
        max_ranges_per_heap: 1,
        ..StreamConfig::default()
    });
    s.add_datagram(&a[0]).unwrap();
    assert_eq!(s.add_datagram(&a[2]), Err(Reject::TooFragmented));
    assert_eq!(s.add_datagram(&a[0]), Err(Reject::Duplicate));
    let st = s.stats();
    assert_eq!((st.packets_too_fragmented, st.packets_duplicate), (1, 1));
}

#[test]
fn incomplete_stop_heap_counts_as_flushed() {
    let mut h = SendHeap::new(Flavour::SPEAD_64_48);
    h.add_end();
    h.add_item(0x1000, vec![5u8; 400], false);
    let p = split(&heap_to_bytes(&h, 4, 200).unwrap());
    assert!(p.len() > 1);
    let mut s = Stream::new(StreamConfig::default());
    s.add_datagram(&p[0]).unwrap();
    assert!(s.is_stopped());
    let st = s.stats();
    assert_eq!((st.heaps, st.incomplete_heaps_flushed), (1, 1));
    // A complete stop heap is not counted at all (spead2's add_packet destroys it).
    let mut stop = SendHeap::new(Flavour::SPEAD_64_48);
    stop.add_end();
    let mut s = Stream::new(StreamConfig::default());
    s.add_datagram(&heap_to_bytes(&stop, 5, 1472).unwrap())
        .unwrap();
    assert!(s.is_stopped());
    assert_eq!(
        (s.stats().heaps, s.stats().incomplete_heaps_flushed),
        (0, 0)
    );
}

#[test]
fn contiguous_means_all_bytes_up_to_the_end() {
    // A sized heap with its first packet only is not contiguous (spead2:
    // received_length == min_length), even though what arrived starts at 0.
    let a = packets(400, 2);
    let mut s = Stream::new(StreamConfig {
        deliver_incomplete: true,
        ..StreamConfig::default()
    });
    s.add_datagram(&a[0]).unwrap();
    s.stop();
    let h = s.pop_heap().unwrap();
    assert_eq!((h.complete, h.contiguous), (false, false));
    assert!(h.items().is_empty());
    // An unsized heap is contiguous only if no item lies beyond its data.
    let short = raw(
        5,
        None,
        0,
        &[F.address(0x1000, 0), F.address(0x1001, 64)],
        &[1; 32],
    );
    let whole = raw(
        6,
        None,
        0,
        &[F.address(0x1000, 0), F.address(0x1001, 16)],
        &[1; 32],
    );
    let mut s = Stream::new(StreamConfig::default());
    s.add_datagram(&short).unwrap();
    s.add_datagram(&whole).unwrap();
    s.stop();
    let h = s.pop_heap().unwrap();
    assert_eq!((h.cnt, h.complete, h.contiguous), (6, false, true));
    assert_eq!(h.items().len(), 2);
    assert!(s.pop_heap().is_none());
}

#[test]
fn explicit_start_refuses_packets_until_started() {
    let a = packets(20, 1);
    let mut s = Stream::new(StreamConfig {
        explicit_start: true,
        ..StreamConfig::default()
    });
    assert_eq!(s.add_datagram(&a[0]), Err(Reject::NotStarted));
    assert_eq!(s.add_buffer(&a[0]), 0);
    assert_eq!(s.stats().packets_before_start, 1);
    assert_eq!(s.stats().packets, 0);
    s.start();
    s.add_datagram(&a[0]).unwrap();
    assert_eq!(s.pop_heap().unwrap().cnt, 1);
}

#[test]
fn custom_stats_are_named_and_kept() {
    let mut cfg = StreamConfig::default();
    let idx = cfg
        .add_stat("my_counter", crate::recv::StatMode::Counter)
        .unwrap();
    assert_eq!(idx, 9);
    assert!(cfg
        .add_stat("heaps", crate::recv::StatMode::Counter)
        .is_err());
    let mut s = Stream::new(cfg);
    s.add_datagram(&packets(20, 1)[0]).unwrap();
    *s.stats_mut().value_mut(idx).unwrap() += 3;
    let st = s.stats();
    assert_eq!(st.get("my_counter"), Some(3));
    assert_eq!(st.get("heaps"), Some(1));
    assert_eq!(st.get("single_packet_heaps"), Some(1));
    assert_eq!(st.iter()[9], ("my_counter", 3));
}

#[test]
fn a_heap_announced_larger_than_the_old_limit_is_accepted() {
    // 512 MiB: beyond the 256 MiB we used to refuse by default, and taken lazily from
    // the system, so only what arrives costs memory.
    let len = 512 << 20;
    let first = raw(1, Some(len), 0, &[F.address(0x1000, 0)], &[7; 64]);
    let last = raw(1, Some(len), len - 64, &[], &[9; 64]);
    let mut s = Stream::new(StreamConfig {
        allow_out_of_order: true,
        deliver_incomplete: true,
        ..StreamConfig::default()
    });
    s.add_datagram(&first).unwrap();
    s.add_datagram(&last).unwrap();
    s.stop();
    let h = s.pop_heap().unwrap();
    assert_eq!(h.heap_length, Some(len));
    assert_eq!(h.payload_ranges, vec![(0, 64), (len - 64, len)]);
    assert_eq!(&h.payload()[len as usize - 64..], &[9; 64]);
}

#[test]
fn a_later_packet_is_checked_against_item_addresses_past_heap_length() {
    // The first packet has HEAP_LENGTH 16 and an item addressed at 40; the second,
    // otherwise the next in order, must be refused as the general path refuses it.
    let first = raw(3, Some(16), 0, &[F.address(0x1000, 40)], &[0; 8]);
    let second = raw(3, Some(16), 8, &[], &[0; 8]);
    let mut s = Stream::new(StreamConfig::default());
    s.add_datagram(&first).unwrap();
    assert_eq!(s.add_datagram(&second), Err(Reject::HeapLengthMismatch));
    assert_eq!(s.stats().packets_inconsistent, 1);
    assert_eq!(s.stats().packets, 2);
}

#[test]
fn add_packets_takes_at_most_the_batch_and_resumes() {
    let mut bytes = Vec::new();
    for cnt in 1..=3 {
        for p in packets(1000, cnt) {
            bytes.extend(p);
        }
    }
    let total = crate::wire::split_packets(&bytes).count();
    assert_eq!(total, 21);
    let mut s = Stream::new(StreamConfig::default());
    let mut rest = &bytes[..];
    let mut calls = 0;
    while !rest.is_empty() {
        let used = s.add_packets(rest, 4);
        assert!(used > 0);
        rest = &rest[used..];
        calls += 1;
    }
    assert_eq!(calls, 6);
    let st = s.stats();
    assert_eq!((st.packets, st.batches, st.max_batch), (21, 6, 4));
    let mut got = Vec::new();
    while let Some(h) = s.pop_heap() {
        assert!(h.complete);
        assert_eq!(h.items()[0].bytes(), &vec![h.cnt as u8; 1000][..]);
        got.push(h.cnt);
    }
    assert_eq!(got, [1, 2, 3]);
}

#[test]
fn small_payload_copies_are_exact() {
    let src: Vec<u8> = (0..=255).collect();
    for n in 0..=200 {
        let mut dst = vec![0xAA; n + 2];
        sink::copy_payload(&mut dst[1..n + 1], &src[..n]);
        assert_eq!(&dst[1..n + 1], &src[..n], "{n} bytes");
        assert_eq!(
            (dst[0], dst[n + 1]),
            (0xAA, 0xAA),
            "{n} bytes stayed inside"
        );
    }
}
