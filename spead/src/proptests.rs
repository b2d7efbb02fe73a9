//! Properties: any heap round-trips through packetizer and receiver, and no input
//! makes the receiver panic or grow without bound.

use proptest::prelude::*;

use crate::descriptor::Descriptor;
use crate::recv::{Chunk, ChunkStream, ChunkStreamConfig, PlaceData, Stream, StreamConfig};
use crate::send::{heap_to_bytes, Heap, ItemValue};
use crate::wire::{decode_packet, Flavour, DESCRIPTOR_ID, NULL_ID};

#[derive(Debug, Clone)]
enum Op {
    Bytes(u64, Vec<u8>, bool),
    Inline(u64, u64),
    Descriptor(u64, String),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0x1000u64..0x2000, proptest::collection::vec(any::<u8>(), 0..3000), any::<bool>())
            .prop_map(|(id, d, imm)| Op::Bytes(id, d, imm)),
        1 => (0x7u64..0x2000, any::<u64>()).prop_map(|(id, v)| Op::Inline(id, v)),
        1 => (0x1000u64..0x2000, "[a-z]{0,12}").prop_map(|(id, n)| Op::Descriptor(id, n)),
    ]
}

fn heap_strategy() -> impl Strategy<Value = (Heap, u64, usize, bool)> {
    (
        any::<bool>(),
        proptest::collection::vec(op(), 0..8),
        1u64..(1 << 39),
        prop_oneof![Just(64usize), Just(200), 56usize..9000],
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(wide, ops, cnt, packet, repeat, ooo)| {
            let flavour = if wide {
                Flavour::SPEAD_64_48
            } else {
                Flavour::SPEAD_64_40
            };
            let mut heap = Heap::new(flavour);
            // Distinct IDs, so items are identifiable after assembly.
            let mut used = std::collections::HashSet::new();
            for op in ops {
                match op {
                    Op::Bytes(id, d, imm) if used.insert(id) => heap.add_item(id, d, imm),
                    Op::Inline(id, v) if used.insert(id) => {
                        heap.add_immediate(id, v & flavour.value_mask())
                    }
                    Op::Descriptor(id, name) => heap.add_descriptor(&Descriptor {
                        id,
                        name: name.into_bytes(),
                        format: vec![(b'u', 8)],
                        shape: vec![Some(3), None],
                        ..Descriptor::default()
                    }),
                    _ => {}
                }
            }
            let max_pointers = ((packet & !7) - 48) / 8;
            heap.repeat_pointers = repeat && heap.items.len() < max_pointers;
            (heap, cnt, packet, ooo)
        })
}

/// What a receiver should report for a heap: (id, bytes) of its non-descriptor items,
/// and its descriptors. Only valid when spead2's padding never shares a packet with
/// item bytes (few items per packet); see the packetizer.
/// (id, bytes) of items, and raw descriptor bytes.
type Expected = (Vec<(u64, Vec<u8>)>, Vec<Vec<u8>>);

fn expected(heap: &Heap) -> Expected {
    let f = heap.flavour;
    let mut items = Vec::new();
    let mut descriptors = Vec::new();
    for item in &heap.items {
        match &item.value {
            ItemValue::Inline(v) => {
                items.push((item.id, v.to_be_bytes()[8 - f.immediate_bytes()..].to_vec()))
            }
            ItemValue::Bytes { data, .. } if item.is_immediate(f) => {
                let mut b = vec![0u8; f.immediate_bytes() - data.len()];
                b.extend_from_slice(data);
                items.push((item.id, b));
            }
            ItemValue::Bytes { data, .. } if item.id == DESCRIPTOR_ID => {
                descriptors.push(data.clone())
            }
            ItemValue::Bytes { data, .. } if !data.is_empty() => {
                items.push((item.id, data.clone()))
            }
            ItemValue::Bytes { .. } => {}
        }
    }
    items.sort();
    (items, descriptors)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn any_heap_round_trips((heap, cnt, packet, ooo) in heap_strategy()) {
        let bytes = heap_to_bytes(&heap, cnt, packet).unwrap();
        // Every packet is well formed and within the size limit.
        let mut rest = &bytes[..];
        let mut packets = Vec::new();
        while !rest.is_empty() {
            let p = decode_packet(rest).unwrap();
            prop_assert!(p.size() <= packet & !7);
            prop_assert!(!p.payload.is_empty());
            packets.push(&rest[..p.size()]);
            rest = &rest[p.size()..];
        }
        if ooo {
            packets.reverse();
        }
        let mut stream = Stream::new(StreamConfig { allow_out_of_order: ooo, ..StreamConfig::default() });
        for p in &packets {
            prop_assert!(stream.add_datagram(p).is_ok());
        }
        let max_pointers = ((packet & !7) - 48) / 8;
        let got = stream.pop_heap().unwrap();
        prop_assert!(got.complete);
        prop_assert_eq!(got.cnt, cnt);
        if heap.items.len() < max_pointers {
            let (want_items, want_desc) = expected(&heap);
            let mut items: Vec<(u64, Vec<u8>)> = got
                .items()
                .iter()
                .filter(|i| i.id != NULL_ID)
                .map(|i| (i.id, i.bytes().to_vec()))
                .collect();
            items.sort();
            prop_assert_eq!(items, want_items);
            let desc: Vec<Vec<u8>> = got
                .raw_items()
                .iter()
                .filter(|i| i.id == DESCRIPTOR_ID)
                .map(|i| i.bytes().to_vec())
                .collect();
            prop_assert_eq!(&desc, &want_desc);
            for (raw, decoded) in desc.iter().zip(got.descriptors()) {
                let d = decoded.unwrap();
                prop_assert_eq!(&d.encode(heap.flavour), raw);
            }
        }
    }

    #[test]
    fn garbage_never_panics(data in proptest::collection::vec(any::<u8>(), 0..2000), ooo in any::<bool>()) {
        let mut stream = Stream::new(StreamConfig {
            allow_out_of_order: ooo,
            max_heap_size: 1 << 20,
            ..StreamConfig::default()
        });
        let _ = stream.add_datagram(&data);
        stream.add_buffer(&data);
        stream.stop();
        while let Some(h) = stream.pop_heap() {
            let _ = h.items();
            let _ = h.descriptors();
        }
    }

    #[test]
    fn mutated_packets_never_panic(
        (heap, cnt, packet, ooo) in heap_strategy(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
    ) {
        let mut bytes = heap_to_bytes(&heap, cnt, packet).unwrap();
        for (i, v) in flips {
            let i = i.index(bytes.len());
            bytes[i] = v;
        }
        let mut stream = Stream::new(StreamConfig {
            allow_out_of_order: ooo,
            deliver_incomplete: true,
            max_heap_size: 1 << 20,
            max_heaps: 2,
            ..StreamConfig::default()
        });
        stream.add_buffer(&bytes);
        stream.stop();
        let stats = stream.stats();
        prop_assert!(stats.heaps >= stats.incomplete_heaps_evicted + stats.incomplete_heaps_flushed);
        while let Some(h) = stream.pop_heap() {
            for item in h.items() {
                prop_assert!(item.bytes().len() as u64 <= h.payload_end().max(8));
            }
            let _ = h.descriptors();
        }
    }

    #[test]
    fn chunk_streams_survive_any_placement(
        (heap, cnt, packet, ooo) in heap_strategy(),
        place in proptest::collection::vec((-2i64..6, 0usize..12, 0usize..40_000, 0usize..16), 1..6),
        presence in proptest::option::of(1usize..5000),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
    ) {
        // Whatever the place callback answers (negative ids, indices and offsets off
        // the chunk, extra beyond its limit) and whatever the packets hold, nothing
        // panics and every heap is accounted for.
        let mut bytes = heap_to_bytes(&heap, cnt, packet).unwrap();
        for (i, v) in flips {
            let i = i.index(bytes.len());
            bytes[i] = v;
        }
        let mut k = 0;
        let mut cc = ChunkStreamConfig::new(move |d: &mut PlaceData<'_>| {
            let (id, index, offset, extra) = place[k % place.len()];
            k += 1;
            d.chunk_id = id;
            d.heap_index = index;
            d.heap_offset = offset;
            d.extra_size = extra;
        })
        .with_allocate(|_, _| Some(Chunk::<()>::new(32_768, 10, 8)))
        .with_ready(|_, _| {});
        cc.max_heap_extra = 8;
        cc.packet_presence_payload_size = presence;
        let mut s = ChunkStream::new_chunked(
            StreamConfig { allow_out_of_order: ooo, max_heaps: 2, ..StreamConfig::default() },
            cc,
        ).unwrap();
        s.add_buffer(&bytes);
        s.stop();
        let st = s.stats();
        prop_assert!(st.heaps >= st.incomplete_heaps_evicted + st.incomplete_heaps_flushed);
    }
}

/// Edits to a packet sequence: swap two neighbours, repeat one, drop one, or change
/// one byte.
#[derive(Debug, Clone)]
enum Edit {
    Swap(prop::sample::Index),
    Repeat(prop::sample::Index),
    Drop(prop::sample::Index),
    Flip(prop::sample::Index, prop::sample::Index, u8),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        any::<prop::sample::Index>().prop_map(Edit::Swap),
        any::<prop::sample::Index>().prop_map(Edit::Repeat),
        any::<prop::sample::Index>().prop_map(Edit::Drop),
        (
            any::<prop::sample::Index>(),
            any::<prop::sample::Index>(),
            any::<u8>()
        )
            .prop_map(|(p, b, v)| Edit::Flip(p, b, v)),
    ]
}

/// The packets of `heaps` (with HEAP_CNTs `cnts`), one heap after another or
/// interleaved, then edited.
fn edited(
    heaps: &[(Heap, u64, usize, bool)],
    cnts: &[u64],
    edits: Vec<Edit>,
    interleave: bool,
) -> Vec<u8> {
    let mut per_heap: Vec<Vec<Vec<u8>>> = heaps
        .iter()
        .zip(cnts)
        .map(|((heap, _, packet, _), &cnt)| {
            let bytes = heap_to_bytes(heap, cnt, *packet).unwrap();
            crate::wire::split_packets(&bytes)
                .map(<[u8]>::to_vec)
                .collect()
        })
        .collect();
    let mut packets: Vec<Vec<u8>> = Vec::new();
    if interleave {
        while per_heap.iter().any(|h| !h.is_empty()) {
            for h in per_heap.iter_mut().filter(|h| !h.is_empty()) {
                packets.push(h.remove(0));
            }
        }
    } else {
        packets = per_heap.concat();
    }
    for e in edits {
        if packets.is_empty() {
            break;
        }
        match e {
            Edit::Swap(i) => {
                let i = i.index(packets.len());
                if i + 1 < packets.len() {
                    packets.swap(i, i + 1);
                }
            }
            Edit::Repeat(i) => {
                let i = i.index(packets.len());
                packets.insert(i, packets[i].clone());
            }
            Edit::Drop(i) => {
                packets.remove(i.index(packets.len()));
            }
            Edit::Flip(i, b, v) => {
                let n = packets.len();
                let p = &mut packets[i.index(n)];
                let b = b.index(p.len());
                p[b] = v;
            }
        }
    }
    packets.concat()
}

/// What a stream reported: its counters (but for the batch counts, which depend on
/// how packets were handed over) and what it delivered, heap by heap.
fn outcome(mut s: Stream) -> String {
    s.stop();
    let mut st = s.stats();
    st.batches = 0;
    st.max_batch = 0;
    let mut out = format!("{st:?}\n");
    while let Some(h) = s.pop_heap() {
        let items: Vec<(u64, Vec<u8>)> = h
            .wire_items()
            .iter()
            .map(|i| (i.id, i.bytes().to_vec()))
            .collect();
        out += &format!(
            "{} {} {} {:?} {} {:?} {} {:?}\n",
            h.cnt,
            h.complete,
            h.contiguous,
            h.heap_length,
            h.received_length,
            h.payload_ranges,
            h.end_of_stream,
            items
        );
        if h.complete {
            out += &format!("{:?}\n", h.payload());
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// `add_packets` (whose common case is a predicted, fused decode and lookup) does
    /// exactly what decoding each packet and `add_decoded` do, whatever the packet
    /// sequence (heaps interleaved, repeated, reordered, dropped, corrupted) and
    /// batching.
    #[test]
    fn add_packets_agrees_with_add_decoded(
        heaps in proptest::collection::vec(heap_strategy(), 1..4),
        cnts in proptest::collection::vec(1u64..6, 4),
        edits in proptest::collection::vec(edit(), 0..6),
        batches in proptest::collection::vec((1usize..40, 0u8..4), 1..8),
        (max_heaps, substreams, ooo, stop_on_stop) in (1usize..4, 1usize..3, any::<bool>(), any::<bool>()),
        interleave in any::<bool>(),
    ) {
        let bytes = edited(&heaps, &cnts, edits, interleave);
        let config = || StreamConfig {
            max_heaps,
            substreams,
            allow_out_of_order: ooo,
            stop_on_stop_item: stop_on_stop,
            deliver_incomplete: true,
            max_heap_size: 1 << 20,
            ..StreamConfig::default()
        };
        // Batches of add_packets, now and then one packet by add_decoded or a flush
        // in between (which the prediction add_packets keeps between calls must
        // survive); the other stream flushes at the same places.
        let mut a = Stream::new(config());
        let mut rest = &bytes[..];
        let mut k = 0;
        let mut flushed_at = Vec::new();
        while !rest.is_empty() && !a.is_stopped() {
            let (batch, kind) = batches[k % batches.len()];
            k += 1;
            if kind == 3 {
                flushed_at.push(bytes.len() - rest.len());
                a.flush();
            }
            if kind == 2 {
                if let Ok(p) = decode_packet(rest) {
                    rest = &rest[p.size()..];
                    let _ = a.add_decoded(&p);
                    continue;
                }
            }
            let used = a.add_packets(rest, batch);
            if used == 0 || a.raw_stats().packets_malformed > 0 {
                break;
            }
            rest = &rest[used..];
        }
        let mut b = Stream::new(config());
        let mut rest = &bytes[..];
        while !rest.is_empty() && !b.is_stopped() {
            if flushed_at.contains(&(bytes.len() - rest.len())) {
                b.flush();
            }
            match decode_packet(rest) {
                Ok(p) => {
                    rest = &rest[p.size()..];
                    let _ = b.add_decoded(&p);
                }
                Err(_) => {
                    b.stats_mut().packets_malformed += 1;
                    break;
                }
            }
        }
        prop_assert_eq!(outcome(a), outcome(b));
    }
}

/// What a chunk stream reported: its counters (but for the batch counts) and every
/// chunk it made ready.
fn chunk_outcome(mut s: ChunkStream, ready: &std::sync::Mutex<Vec<Chunk>>) -> String {
    s.stop();
    let mut st = s.stats();
    st.batches = 0;
    st.max_batch = 0;
    let mut out = format!("{st:?}\n");
    for c in ready.lock().unwrap().iter() {
        out += &format!(
            "{} {:?} {:?} {:?}\n",
            c.chunk_id, c.present, c.extra, c.data
        );
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// The same for chunk streams, whose runs of packets are copied under one lock of
    /// their chunk: chunks, presence flags and counters as with `add_decoded`.
    #[test]
    fn chunk_add_packets_agrees_with_add_decoded(
        heaps in proptest::collection::vec(heap_strategy(), 1..4),
        cnts in proptest::collection::vec(0u64..8, 4),
        edits in proptest::collection::vec(edit(), 0..6),
        batches in proptest::collection::vec(1usize..40, 1..8),
        (max_heaps, presence, interleave) in (1usize..4, proptest::option::of(1usize..3000), any::<bool>()),
    ) {
        let bytes = edited(&heaps, &cnts, edits, interleave);
        let make = || {
            let ready = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
            let r = std::sync::Arc::clone(&ready);
            let mut cc = ChunkStreamConfig::new(|d: &mut PlaceData<'_>| {
                let cnt = d.packet.heap_cnt;
                d.chunk_id = (cnt / 2) as i64;
                d.heap_index = (cnt % 2) as usize * 40;
                d.heap_offset = (cnt % 2) as usize * 40_000;
            })
            .with_allocate(|_, _| Some(Chunk::<()>::new(80_000, 80, 0)))
            .with_ready(move |c, _| r.lock().unwrap().push(c));
            cc.max_chunks = 2;
            cc.packet_presence_payload_size = presence;
            let s = ChunkStream::new_chunked(
                StreamConfig { max_heaps, ..StreamConfig::default() },
                cc,
            ).unwrap();
            (s, ready)
        };
        let (mut a, ready_a) = make();
        let mut rest = &bytes[..];
        let mut k = 0;
        while !rest.is_empty() && !a.is_stopped() {
            let used = a.add_packets(rest, batches[k % batches.len()]);
            k += 1;
            if used == 0 || a.raw_stats().packets_malformed > 0 {
                break;
            }
            rest = &rest[used..];
        }
        let (mut b, ready_b) = make();
        let mut rest = &bytes[..];
        while !rest.is_empty() && !b.is_stopped() {
            match decode_packet(rest) {
                Ok(p) => {
                    rest = &rest[p.size()..];
                    let _ = b.add_decoded(&p);
                }
                Err(_) => {
                    b.stats_mut().packets_malformed += 1;
                    break;
                }
            }
        }
        prop_assert_eq!(chunk_outcome(a, &ready_a), chunk_outcome(b, &ready_b));
    }
}
