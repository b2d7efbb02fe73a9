//! The in-order path of [`super::Stream::add_packets`]: prefetching the packets ahead,
//! and the next packet of the head heap predicted so that it is taken with a few word
//! compares.

use crate::wire::HEADER_SIZE;

/// Packets up to this size have the next ones prefetched in [`Stream::add_packets`].
const PREFETCH_MAX: usize = 4096;

/// How far ahead [`Stream::add_packets`] prefetches, in bytes.
const PREFETCH_AHEAD: usize = 4096;

/// After a packet of `size` bytes that ended at `pos` in `data`: prefetches up to
/// [`PREFETCH_AHEAD`] bytes past `pos` (small packets only), skipping what `fetched` says
/// was prefetched already, and moves `fetched` on.
#[inline]
pub(super) fn prefetch_ahead(data: &[u8], pos: usize, size: usize, fetched: &mut usize) {
    if size <= PREFETCH_MAX {
        let to = (pos + PREFETCH_AHEAD).min(data.len());
        if *fetched < to {
            prefetch(&data[(*fetched).max(pos)..to]);
            *fetched = to;
        }
    }
}

/// Asks the CPU to start loading `data` into cache (a hint; nothing on other
/// architectures).
#[inline]
fn prefetch(data: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    {
        let mut line = 0;
        while line < data.len() {
            // SAFETY: PREFETCHT0 is a hint that never faults and changes no memory, and
            // the address is inside `data` (x86-64 always has SSE, which it needs).
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                    data.as_ptr().add(line).cast(),
                );
            }
            line += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = data;
}

/// Bytes of a plain packet before its payload: the header and the four special
/// pointers.
pub(super) const PLAIN_HEADER: usize = HEADER_SIZE + 4 * 8;

/// The next in-order packet of the head heap as [`Stream::add_packets`] expects it:
/// a plain packet (the header for four pointers, then immediate HEAP_CNT,
/// HEAP_LENGTH, PAYLOAD_OFFSET and PAYLOAD_LENGTH, as spead2's packetizer writes
/// them) of the same heap, at the offset where the heap's bytes end. A packet whose
/// first 32 bytes are these words, with a PAYLOAD_LENGTH that fits, is one that
/// `decode_plain` accepts and [`Stream::add_next_in_order`] takes; it is taken with
/// four word compares instead of decoding and matching each field.
#[derive(Debug, Clone, Copy)]
pub(super) struct Next {
    /// The header, HEAP_CNT, HEAP_LENGTH and PAYLOAD_OFFSET words, as their wire
    /// bytes read little-endian.
    pub(super) words: [u64; 4],
    /// An immediate PAYLOAD_OFFSET pointer with value 0.
    pub(super) offset_tag: u64,
    /// An immediate PAYLOAD_LENGTH pointer with value 0.
    pub(super) length_tag: u64,
    /// The flavour's value mask.
    pub(super) mask: u64,
    pub(super) heap_length: u64,
    /// Bytes of the heap received (the expected PAYLOAD_OFFSET).
    pub(super) received: u64,
    /// The head heap's slot.
    pub(super) slot: usize,
}

impl Next {
    /// The payload length of the packet at the start of `data` if it is the expected
    /// one, its payload is not empty, lies within HEAP_LENGTH and within `data`.
    #[inline(always)]
    pub(super) fn matches(&self, data: &[u8]) -> Option<u64> {
        let head: &[u8; PLAIN_HEADER] = data.get(..PLAIN_HEADER)?.try_into().ok()?;
        let word = |k: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&head[8 * k..8 * k + 8]);
            b
        };
        let differ = (u64::from_le_bytes(word(0)) ^ self.words[0])
            | (u64::from_le_bytes(word(1)) ^ self.words[1])
            | (u64::from_le_bytes(word(2)) ^ self.words[2])
            | (u64::from_le_bytes(word(3)) ^ self.words[3]);
        let d = u64::from_be_bytes(word(4));
        let len = d & self.mask;
        if differ != 0
            || d & !self.mask != self.length_tag
            || len == 0
            || len > self.heap_length - self.received
            || len > (data.len() - PLAIN_HEADER) as u64
        {
            return None;
        }
        Some(len)
    }

    /// The heap received `len` more bytes.
    #[inline(always)]
    pub(super) fn advance(&mut self, len: u64) {
        self.received += len;
        self.words[3] = u64::from_le_bytes((self.offset_tag | self.received).to_be_bytes());
    }
}
