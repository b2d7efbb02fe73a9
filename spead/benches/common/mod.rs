//! What the benchmarks share.

use spead::recv::Stream;
use spead::send::Heap;
use spead::wire::Flavour;

/// The benchmarks' heap: one item (0x1000) of `size` bytes of a fixed pattern,
/// SPEAD-64-48.
pub fn heap(size: usize) -> Heap {
    let mut h = Heap::new(Flavour::SPEAD_64_48);
    h.add_item(
        0x1000,
        (0..size).map(|i| (i * 7) as u8).collect::<Vec<_>>(),
        false,
    );
    h
}

/// Feeds `bytes` (packets back to back) to `stream` 64 packets at a time, taking the
/// heaps it assembles as they come; returns how many were complete.
pub fn feed_all(stream: &mut Stream, bytes: &[u8]) -> u64 {
    let mut heaps = 0;
    let mut rest = bytes;
    while !rest.is_empty() {
        let used = stream.add_packets(rest, 64);
        if used == 0 {
            break;
        }
        rest = &rest[used..];
        while let Some(h) = stream.pop_heap() {
            heaps += u64::from(h.complete);
        }
    }
    heaps
}
