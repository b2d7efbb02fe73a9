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

    /// Folds up to the first 64 bytes of a frame (its headers), padded with zeros. The
    /// virtual address in a RoCE RETH or AtomicETH is left out: it is where the
    /// application's memory happens to be mapped, which differs from run to run, and the
    /// trace must not.
    #[inline]
    pub fn bytes_head(&mut self, bytes: &[u8]) {
        let mut head = [0u8; 64];
        let n = bytes.len().min(64);
        head[..n].copy_from_slice(&bytes[..n]);
        if n >= 62 && carries_va(&head) {
            head[54..62].fill(0);
        }
        for c in head.chunks_exact(8) {
            self.word(u64::from_le_bytes([
                c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7],
            ]));
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

/// True for an untagged IPv4 RoCEv2 frame (no IP options) whose opcode puts a virtual
/// address right after the BTH: RDMA WRITE first/only, READ request, CAS and FAA.
fn carries_va(h: &[u8; 64]) -> bool {
    let roce = h[12] == 0x08
        && h[13] == 0x00
        && h[14] == 0x45
        && h[23] == 17
        && u16::from_be_bytes([h[36], h[37]]) == crate::frame::roce::ROCEV2_UDP_PORT;
    roce && matches!(h[42] & 0x1f, 0x06 | 0x0a | 0x0b | 0x0c | 0x13 | 0x14) && h[42] & 0xe0 != 0x60
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
