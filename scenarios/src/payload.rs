//! The bytes every sender sends, derived from the scenario alone: any receiver can
//! recompute what a complete heap must carry, on any backend, without a side channel.

/// The first user item id (spead2's convention).
pub const FIRST_ITEM_ID: u64 = 0x1000;

/// FNV-1a, 64-bit: a digest of heap payloads (not cryptographic; it catches corruption
/// and misassembly, which is what the invariants need).
pub fn digest(bytes: &[u8]) -> u64 {
    digest_chunks([bytes])
}

/// [`digest`] of the concatenation of `chunks`, without concatenating them.
pub fn digest_chunks<'a>(chunks: impl IntoIterator<Item = &'a [u8]>) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for chunk in chunks {
        for &b in chunk {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// splitmix64: a tiny deterministic generator for payload bytes.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The payload of sender `sender`'s heap `k` under scenario seed `seed`.
pub fn heap_payload(seed: u64, sender: usize, k: u32, len: usize) -> Vec<u8> {
    let mut state = seed ^ ((sender as u64) << 40) ^ u64::from(k).wrapping_mul(0x9e37_79b9);
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        out.extend_from_slice(&splitmix(&mut state).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// How a heap's payload is split into `items` addressed items: (id, offset, length),
/// back to back, the first items one byte longer when the split is uneven. Items of
/// zero length are left out (SPEAD drops them).
pub fn item_layout(heap_size: usize, items: u32) -> Vec<(u64, usize, usize)> {
    let n = items.max(1) as usize;
    let base = heap_size / n;
    let extra = heap_size % n;
    let mut off = 0;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let len = base + usize::from(i < extra);
        if len > 0 {
            out.push((FIRST_ITEM_ID + i as u64, off, len));
        }
        off += len;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_are_deterministic_and_distinct() {
        let a = heap_payload(1, 0, 0, 1000);
        assert_eq!(a, heap_payload(1, 0, 0, 1000));
        assert_ne!(a, heap_payload(1, 0, 1, 1000));
        assert_ne!(a, heap_payload(1, 1, 0, 1000));
        assert_ne!(a, heap_payload(2, 0, 0, 1000));
        assert_eq!(heap_payload(1, 0, 0, 7), a[..7]);
        assert_ne!(digest(&a), digest(&heap_payload(1, 0, 1, 1000)));
        assert_eq!(digest_chunks([&a[..10], &a[10..], &[]]), digest(&a));
    }

    #[test]
    fn layout_covers_the_payload() {
        let l = item_layout(10, 3);
        assert_eq!(l, vec![(0x1000, 0, 4), (0x1001, 4, 3), (0x1002, 7, 3)]);
        assert_eq!(item_layout(2, 4).len(), 2, "zero-length items are left out");
    }
}
