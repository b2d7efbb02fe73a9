//! The bytes every sender sends, derived from the scenario alone: any receiver can
//! recompute what a complete heap must carry, on any backend, without a side channel.

/// The first user item id (spead2's convention).
pub const FIRST_ITEM_ID: u64 = 0x1000;

/// A 64-bit digest of heap payloads, eight bytes at a time (not cryptographic; it catches
/// corruption and misassembly, which is what the invariants need). Each little-endian
/// word is mixed with FxHash's rotate-xor-multiply step; the byte length is mixed in last
/// so that trailing zero bytes change the digest.
pub fn digest(bytes: &[u8]) -> u64 {
    digest_chunks([bytes])
}

/// [`digest`] of the concatenation of `chunks`, without concatenating them: a word that
/// straddles two chunks is carried over.
pub fn digest_chunks<'a>(chunks: impl IntoIterator<Item = &'a [u8]>) -> u64 {
    let mut d = Digest::default();
    for chunk in chunks {
        d.update(chunk);
    }
    d.finish()
}

/// The streaming state behind [`digest_chunks`].
#[derive(Debug, Default)]
struct Digest {
    hash: u64,
    /// Bytes of an unfinished word, and how many of them are valid.
    carry: [u8; 8],
    carried: usize,
    len: u64,
}

impl Digest {
    const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;

    fn mix(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(Self::K);
    }

    fn update(&mut self, mut bytes: &[u8]) {
        self.len += bytes.len() as u64;
        if self.carried > 0 {
            let take = (8 - self.carried).min(bytes.len());
            self.carry[self.carried..self.carried + take].copy_from_slice(&bytes[..take]);
            self.carried += take;
            bytes = &bytes[take..];
            if self.carried < 8 {
                return;
            }
            self.mix(u64::from_le_bytes(self.carry));
            self.carried = 0;
        }
        let mut words = bytes.chunks_exact(8);
        for w in &mut words {
            let mut word = [0; 8];
            word.copy_from_slice(w);
            self.mix(u64::from_le_bytes(word));
        }
        let rest = words.remainder();
        self.carry[..rest.len()].copy_from_slice(rest);
        self.carried = rest.len();
    }

    fn finish(mut self) -> u64 {
        if self.carried > 0 {
            self.carry[self.carried..].fill(0);
            self.mix(u64::from_le_bytes(self.carry));
        }
        let len = self.len;
        self.mix(len);
        self.hash
    }
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
    fn digest_does_not_depend_on_the_split() {
        let a = heap_payload(7, 3, 9, 1001);
        let whole = digest(&a);
        for cut in [0, 1, 3, 7, 8, 9, 15, 16, 500, 1000, 1001] {
            for cut2 in [cut, (cut + 5).min(1001), 1001] {
                let parts = [&a[..cut], &a[cut..cut2], &a[cut2..]];
                assert_eq!(digest_chunks(parts), whole, "cuts at {cut} and {cut2}");
            }
        }
    }

    #[test]
    fn digest_sees_every_byte_and_the_length() {
        let a = heap_payload(7, 3, 9, 1001);
        for i in [0, 7, 8, 500, 1000] {
            let mut b = a.clone();
            b[i] ^= 1;
            assert_ne!(digest(&b), digest(&a), "flip at byte {i}");
        }
        assert_ne!(digest(&[0; 3]), digest(&[0; 4]), "trailing zeros count");
        assert_ne!(digest(&[]), digest(&[0]));
    }

    #[test]
    fn layout_covers_the_payload() {
        let l = item_layout(10, 3);
        assert_eq!(l, vec![(0x1000, 0, 4), (0x1001, 4, 3), (0x1002, 7, 3)]);
        assert_eq!(item_layout(2, 4).len(), 2, "zero-length items are left out");
    }
}
