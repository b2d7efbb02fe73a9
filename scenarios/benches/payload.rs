//! Micro-benchmarks of the per-byte work of the scenario harness: a heap payload
//! generated and digested as it is made (as senders do), and a received heap digested.
//! Run: `cargo bench -p scenarios --bench
//! payload` (criterion; `cargo xtask bench` runs it too).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use scenarios::payload::{digest, Digest, SenderPayloads};
use std::hint::black_box;

const HEAP: usize = 64 * 1024;

fn payload(c: &mut Criterion) {
    let mut g = c.benchmark_group("payload");
    g.throughput(Throughput::Bytes(HEAP as u64));
    let p = SenderPayloads::new(64, 3, HEAP);
    let mut out = vec![0u8; HEAP];
    let mut k = 0u32;
    g.bench_function("fill+digest 64 KiB heap", |b| {
        b.iter(|| {
            k = k.wrapping_add(1);
            let mut d = Digest::default();
            p.fill_digest(k, 0, &mut out, &mut d);
            black_box(d.finish())
        });
    });
    let heap = p.heap(1);
    g.bench_function("digest 64 KiB heap", |b| {
        b.iter(|| black_box(digest(black_box(&heap))));
    });
    g.finish();
}

criterion_group!(benches, payload);
criterion_main!(benches);
