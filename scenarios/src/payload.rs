//! The bytes every sender sends, derived from the scenario alone: any receiver can
//! recompute what a complete heap must carry, on any backend, without a side channel.

/// The first user item id (spead2's convention).
pub const FIRST_ITEM_ID: u64 = 0x1000;

/// A 64-bit digest of heap payloads, eight bytes at a time (not cryptographic; it catches
/// corruption and misassembly, which is what the invariants need). The little-endian
/// words are dealt round-robin to eight lanes, each mixing its words with FxHash's
/// rotate-xor-multiply step (independent chains, so the multiplies overlap); the
/// lanes are then folded in order and the byte length is mixed in last, so that trailing
/// zero bytes change the digest.
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

/// The lanes of [`Digest`]: enough independent multiply chains to keep the multiplier
/// busy (its latency is a few cycles, its throughput one a cycle).
const LANES: usize = 8;
const _: () = assert!(LANES.is_power_of_two());

/// FxHash's multiplier.
const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;

fn mix(hash: u64, word: u64) -> u64 {
    (hash.rotate_left(5) ^ word).wrapping_mul(K)
}

/// The little-endian word at `bytes[i..i + 8]`.
fn word_at(bytes: &[u8], i: usize) -> u64 {
    let mut w = [0; 8];
    w.copy_from_slice(&bytes[i..i + 8]);
    u64::from_le_bytes(w)
}

/// The streaming state behind [`digest_chunks`]: [`Digest::update`] with the bytes in
/// order, in pieces of any size, then [`Digest::finish`].
#[derive(Debug, Default)]
pub struct Digest {
    lanes: [u64; LANES],
    /// Whole words mixed so far (the next one goes to lane `words % LANES`).
    words: u64,
    /// Bytes of an unfinished word, and how many of them are valid.
    carry: [u8; 8],
    carried: usize,
    len: u64,
}

impl Digest {
    fn mix_word(&mut self, word: u64) {
        let lane = (self.words % LANES as u64) as usize;
        self.lanes[lane] = mix(self.lanes[lane], word);
        self.words += 1;
    }

    /// Takes the next `bytes`.
    pub fn update(&mut self, mut bytes: &[u8]) {
        self.len += bytes.len() as u64;
        if self.carried > 0 {
            let take = (8 - self.carried).min(bytes.len());
            self.carry[self.carried..self.carried + take].copy_from_slice(&bytes[..take]);
            self.carried += take;
            bytes = &bytes[take..];
            if self.carried < 8 {
                return;
            }
            self.mix_word(u64::from_le_bytes(self.carry));
            self.carried = 0;
        }
        // Single words up to lane 0, then one word per lane at a time.
        while self.words & (LANES as u64 - 1) != 0 && bytes.len() >= 8 {
            self.mix_word(word_at(bytes, 0));
            bytes = &bytes[8..];
        }
        let mut blocks = bytes.chunks_exact(8 * LANES);
        let mut lanes = self.lanes;
        let mut n = 0u64;
        for blk in &mut blocks {
            for (i, lane) in lanes.iter_mut().enumerate() {
                *lane = mix(*lane, word_at(blk, 8 * i));
            }
            n += 1;
        }
        self.lanes = lanes;
        self.words += n * LANES as u64;
        let mut words = blocks.remainder().chunks_exact(8);
        for w in &mut words {
            self.mix_word(word_at(w, 0));
        }
        let rest = words.remainder();
        self.carry[..rest.len()].copy_from_slice(rest);
        self.carried = rest.len();
    }

    /// The digest of everything taken.
    pub fn finish(mut self) -> u64 {
        if self.carried > 0 {
            self.carry[self.carried..].fill(0);
            self.mix_word(u64::from_le_bytes(self.carry));
        }
        let folded = self.lanes.iter().fold(0, |h, &lane| mix(h, lane));
        mix(folded, self.len)
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

/// The payloads of one sender's heaps, all `len` bytes long: a base block drawn once per
/// sender from splitmix64, and heap `k`'s payload that block with every little-endian
/// word XORed with a word drawn for `k`. Every byte of every heap thus differs from the
/// same byte of the sender's other heaps (and of other senders' heaps, with their own
/// base), so a misassembled heap shows in its digest, and a heap costs one XOR-copy
/// instead of a generator call per word.
#[derive(Debug, Clone)]
pub struct SenderPayloads {
    /// The base block, zero-padded to whole words.
    base: Vec<u8>,
    len: usize,
    seed: u64,
    sender: u64,
}

impl SenderPayloads {
    /// The payloads of sender `sender` under scenario seed `seed`.
    pub fn new(seed: u64, sender: usize, len: usize) -> Self {
        let mut state = seed ^ ((sender as u64) << 40);
        let mut base = Vec::with_capacity(len.next_multiple_of(8));
        while base.len() < len {
            base.extend_from_slice(&splitmix(&mut state).to_le_bytes());
        }
        Self {
            base,
            len,
            seed,
            sender: sender as u64,
        }
    }

    /// Payload length, bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for empty payloads.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The word heap `k`'s bytes are XORed with.
    fn heap_word(&self, k: u32) -> u64 {
        let mut state =
            self.seed ^ (self.sender << 40) ^ (u64::from(k) + 1).wrapping_mul(0x9e37_79b9);
        splitmix(&mut state)
    }

    /// Writes bytes `offset..offset + out.len()` of heap `k`'s payload into `out`.
    ///
    /// # Panics
    /// When the range exceeds the payload length.
    pub fn fill(&self, k: u32, offset: usize, out: &mut [u8]) {
        assert!(
            offset + out.len() <= self.len,
            "payload range out of bounds"
        );
        // Byte j of `out` is payload byte offset + j: XOR with byte (offset + j) % 8 of
        // the heap's word, so rotate the word to start at byte offset % 8.
        let word = self.heap_word(k).rotate_right(8 * (offset % 8) as u32);
        let src = &self.base[offset..offset + out.len()];
        let mut dst = out.chunks_exact_mut(8);
        let mut from = src.chunks_exact(8);
        for (d, s) in (&mut dst).zip(&mut from) {
            d.copy_from_slice(&(word_at(s, 0) ^ word).to_le_bytes());
        }
        let pattern = word.to_le_bytes();
        for ((d, s), p) in dst
            .into_remainder()
            .iter_mut()
            .zip(from.remainder())
            .zip(pattern)
        {
            *d = s ^ p;
        }
    }

    /// As [`SenderPayloads::fill`], also feeding the bytes to `digest` a few KiB at a
    /// time, while they are still in the cache.
    pub fn fill_digest(&self, k: u32, offset: usize, out: &mut [u8], digest: &mut Digest) {
        const BLOCK: usize = 4096;
        for (i, block) in out.chunks_mut(BLOCK).enumerate() {
            self.fill(k, offset + i * BLOCK, block);
            digest.update(block);
        }
    }

    /// Heap `k`'s whole payload.
    pub fn heap(&self, k: u32) -> Vec<u8> {
        let mut out = vec![0; self.len];
        self.fill(k, 0, &mut out);
        out
    }
}

/// The payload of sender `sender`'s heap `k` under scenario seed `seed` (see
/// [`SenderPayloads`], which a sender of many heaps keeps instead).
pub fn heap_payload(seed: u64, sender: usize, k: u32, len: usize) -> Vec<u8> {
    SenderPayloads::new(seed, sender, len).heap(k)
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
    fn digest_sees_every_bit_of_zeros_and_packets_swapped_in_a_heap() {
        let zeros = [0u8; 512];
        let base = digest(&zeros);
        for bit in 0..zeros.len() * 8 {
            let mut b = zeros;
            b[bit / 8] ^= 1 << (bit % 8);
            assert_ne!(digest(&b), base, "flip of bit {bit} in zeros");
        }
        // A 64 KiB heap whose 8 KiB packets land in the wrong order.
        let heap = heap_payload(3, 1, 0, 65536);
        let mut swapped = heap.clone();
        swapped[..8192].copy_from_slice(&heap[8192..16384]);
        swapped[8192..16384].copy_from_slice(&heap[..8192]);
        assert_ne!(digest(&swapped), digest(&heap));
    }

    #[test]
    fn a_heap_filled_piecewise_equals_the_whole_and_every_word_differs_between_heaps() {
        let p = SenderPayloads::new(5, 2, 1003);
        let whole = p.heap(7);
        assert_eq!(whole.len(), 1003);
        for (off, len) in [(0, 1003), (1, 9), (3, 1000), (8, 16), (13, 0), (1000, 3)] {
            let mut part = vec![0; len];
            p.fill(7, off, &mut part);
            assert_eq!(part, whole[off..off + len], "bytes {off}..{}", off + len);
        }
        let other = p.heap(8);
        for (i, (a, b)) in whole.chunks(8).zip(other.chunks(8)).enumerate() {
            assert_ne!(a, b, "word {i} is the same in heaps 7 and 8");
        }
        let other_sender = SenderPayloads::new(5, 3, 1003).heap(7);
        assert_ne!(whole, other_sender);
        assert_eq!(heap_payload(5, 2, 7, 1003), whole);
    }

    #[test]
    fn digest_sees_the_order_of_words_in_one_lane_and_across_lanes() {
        let a: Vec<u8> = (0..64u8).collect();
        let mut same_lane = a.clone();
        same_lane[..8].copy_from_slice(&a[32..40]);
        same_lane[32..40].copy_from_slice(&a[..8]);
        let mut across = a.clone();
        across[..8].copy_from_slice(&a[8..16]);
        across[8..16].copy_from_slice(&a[..8]);
        assert_ne!(digest(&same_lane), digest(&a));
        assert_ne!(digest(&across), digest(&a));
    }

    #[test]
    fn a_fill_with_its_digest_gives_the_bytes_and_their_digest() {
        let p = SenderPayloads::new(9, 1, 10_000);
        let mut out = vec![0; 9_000];
        let mut d = Digest::default();
        p.fill_digest(3, 1_000, &mut out, &mut d);
        assert_eq!(out, p.heap(3)[1_000..]);
        assert_eq!(d.finish(), digest(&out));
    }

    #[test]
    #[should_panic(expected = "payload range out of bounds")]
    fn a_fill_past_the_payload_is_refused() {
        SenderPayloads::new(1, 0, 10).fill(0, 8, &mut [0; 3]);
    }

    #[test]
    fn layout_covers_the_payload() {
        let l = item_layout(10, 3);
        assert_eq!(l, vec![(0x1000, 0, 4), (0x1001, 4, 3), (0x1002, 7, 3)]);
        assert_eq!(item_layout(2, 4).len(), 2, "zero-length items are left out");
    }
}
