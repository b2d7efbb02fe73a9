//! The event trace, folded into a 64-bit hash as the run goes so that determinism can be
//! checked without storing the trace (a 10^7-packet run must not grow memory).
//!
//! Each event is a tag byte and a few 64-bit words (time, ids, lengths, the first bytes
//! of a frame); they are folded FNV-1a style, one 64-bit word at a time, which is as
//! sensitive to order and content as the byte-wise variant and eight times cheaper.

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// A running hash of every event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceHash {
    state: u64,
    events: u64,
}

impl Default for TraceHash {
    fn default() -> Self {
        TraceHash {
            state: FNV_OFFSET,
            events: 0,
        }
    }
}

impl TraceHash {
    #[inline]
    fn word(&mut self, w: u64) {
        self.state ^= w;
        self.state = self.state.wrapping_mul(FNV_PRIME);
    }

    /// Folds one event: a tag and its words.
    #[inline]
    pub fn event(&mut self, tag: u8, words: &[u64]) {
        self.events += 1;
        self.word(u64::from(tag) | 0x5a00);
        for &w in words {
            self.word(w);
        }
    }

    /// Folds up to the first 64 bytes of a frame (its headers), padded with zeros.
    #[inline]
    pub fn bytes_head(&mut self, bytes: &[u8]) {
        let head = &bytes[..bytes.len().min(64)];
        let mut chunks = head.chunks_exact(8);
        for c in &mut chunks {
            self.word(u64::from_le_bytes([
                c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7],
            ]));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.word(u64::from_le_bytes(w));
        }
    }

    /// The hash so far.
    #[must_use]
    pub fn value(&self) -> u64 {
        self.state
    }

    /// The number of events folded.
    #[must_use]
    pub fn events(&self) -> u64 {
        self.events
    }
}

/// Event tags folded into the trace.
#[allow(missing_docs)]
pub mod tag {
    pub const TRANSMIT: u8 = 1;
    pub const AT_SWITCH: u8 = 2;
    pub const ARRIVE: u8 = 3;
    pub const DROP: u8 = 4;
    pub const TIMER: u8 = 5;
    pub const DUPLICATE: u8 = 6;
    pub const CORRUPT: u8 = 7;
    pub const REPLAY: u8 = 8;
    /// First tag free for the layers above the fabric.
    pub const USER: u8 = 64;
}
