//! Criterion micro-benchmarks of the codec and heap assembly on in-cache inputs:
//! decoding one packet, packetizing a heap, and assembling a few heaps already in
//! cache, for the four shapes of the report benchmark (`benches/assembly.rs`, which
//! measures the same paths on an out-of-cache working set beside spead2 and the
//! memcpy bound).
//!
//! `cargo bench -p spead --bench codec`

mod common;

use std::hint::black_box;

use common::{feed_all, heap};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use spead::recv::{Stream, StreamConfig};
use spead::send::heap_to_bytes;
use spead::wire::decode_packet;

/// (name, heap bytes, payload bytes per packet); packets add 40 bytes.
const SHAPES: [(&str, usize, usize); 4] = [
    ("1MiB/8KiB", 1 << 20, 8192),
    ("1MiB/1472B", 1 << 20, 1472),
    ("16KiB/256B", 16 << 10, 256),
    ("4KiB/64B", 4 << 10, 64),
];

/// About 1 MiB of packets (at least one heap): in cache.
fn packets(size: usize, payload: usize) -> (Vec<u8>, u64) {
    let heaps = ((1 << 20) / size).max(1) as u64;
    let h = heap(size);
    let mut out = Vec::new();
    for cnt in 1..=heaps {
        out.extend(heap_to_bytes(&h, cnt, payload + 40).expect("packetize"));
    }
    let n = spead::wire::split_packets(&out).count() as u64;
    (out, n)
}

fn decode(c: &mut Criterion) {
    let mut g = c.benchmark_group("decode_packet");
    for (name, size, payload) in SHAPES {
        let (bytes, _) = packets(size, payload);
        // The second packet: only the four special pointers, as most are.
        let first = decode_packet(&bytes).expect("packet").size();
        let p = &bytes[first..];
        g.throughput(Throughput::Elements(1));
        g.bench_function(name, |b| {
            b.iter(|| black_box(decode_packet(black_box(p)).map(|p| p.payload.len())));
        });
    }
    g.finish();
}

fn packetize(c: &mut Criterion) {
    let mut g = c.benchmark_group("heap_to_bytes");
    for (name, size, payload) in SHAPES {
        let h = heap(size);
        g.throughput(Throughput::Bytes(size as u64));
        g.bench_function(name, |b| {
            b.iter(|| black_box(heap_to_bytes(&h, 1, payload + 40).map(|v| v.len())));
        });
    }
    g.finish();
}

fn assemble(c: &mut Criterion) {
    let mut g = c.benchmark_group("assemble_in_cache");
    for (name, size, payload) in SHAPES {
        let (bytes, n) = packets(size, payload);
        let mut stream = Stream::new(StreamConfig::default());
        g.throughput(Throughput::Elements(n));
        g.bench_function(name, |b| {
            b.iter(|| black_box(feed_all(&mut stream, &bytes)));
        });
    }
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(2))
}

criterion_group! {
    name = benches;
    config = config();
    targets = decode, packetize, assemble
}
criterion_main!(benches);
