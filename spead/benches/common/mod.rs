//! What the benchmarks share.

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
