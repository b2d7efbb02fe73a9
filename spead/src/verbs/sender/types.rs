//! The sender's public types: its counters, stream settings, completed heaps and errors.

use crate::send::{RateLimiter, SendError, DEFAULT_BURST_RATE_RATIO, DEFAULT_BURST_SIZE};
use crate::verbs::error::VerbsError;

/// SGEs per packet (spead2's `max_sge`): the slot (headers, SPEAD header, pointers and
/// copied bytes) and up to three pieces of registered memory.
pub const MAX_SGE: usize = 4;

/// What a sender did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SenderStats {
    /// Packets posted.
    pub packets: u64,
    /// SPEAD bytes posted (without Ethernet/IP/UDP headers).
    pub bytes: u64,
    /// Of those, bytes the NIC gathered from registered memory regions (not copied).
    pub gathered_bytes: u64,
    /// Post calls.
    pub batches: u64,
    /// Send completions with an error status.
    pub completion_errors: u64,
    /// Heaps queued by [`Sender::send_heaps`](super::Sender::send_heaps).
    pub heaps: u64,
    /// Heaps whose every packet completed.
    pub heaps_completed: u64,
    /// Times the rate limiter made the sender wait.
    pub rate_waits: u64,
}

/// spead2's `send::stream_config` as far as the verbs writer uses it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SendStreamConfig {
    /// Heaps in flight: queued by [`Sender::send_heaps`](super::Sender::send_heaps) and not yet
    /// completed.
    pub max_heaps: usize,
    /// Bytes per second (SPEAD packet bytes); 0 is unlimited.
    pub rate: f64,
    /// Bytes sent back to back before the rate limiter is asked.
    pub burst_size: usize,
    /// How much faster than `rate` the sender may catch up after falling behind.
    pub burst_rate_ratio: f64,
}

impl Default for SendStreamConfig {
    /// spead2's defaults: 4 heaps, unlimited rate, 64 KiB bursts, ratio 1.05.
    fn default() -> Self {
        SendStreamConfig {
            max_heaps: 4,
            rate: 0.0,
            burst_size: DEFAULT_BURST_SIZE,
            burst_rate_ratio: DEFAULT_BURST_RATE_RATIO,
        }
    }
}

/// A heap whose packets all completed, as [`Sender::take_completed`](super::Sender::take_completed)
/// reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeapSent {
    /// Its HEAP_CNT.
    pub cnt: u64,
    /// Its substream.
    pub substream: usize,
    /// SPEAD bytes of its packets that completed successfully (spead2's `bytes_sent`).
    pub bytes: u64,
    /// False when a packet's completion had an error status.
    pub ok: bool,
}

/// The error of [`Sender::send_heaps`](super::Sender::send_heaps).
#[derive(Debug, thiserror::Error)]
pub enum SendHeapsError {
    /// The queue had no room for the group: `max_heaps` heaps are in flight (spead2's
    /// `would_block`). Nothing of the group was sent.
    #[error(
        "the send queue is full: {in_flight} heaps in flight, {asked} more asked, max_heaps {max_heaps}"
    )]
    QueueFull {
        /// Heaps in flight.
        in_flight: usize,
        /// Heaps in the refused group.
        asked: usize,
        /// The limit.
        max_heaps: usize,
    },
    /// A heap cannot be packetized, or names a substream the sender does not have.
    #[error(transparent)]
    Packetize(#[from] SendError),
    /// The transport failed.
    #[error(transparent)]
    Verbs(#[from] VerbsError),
}

/// The error of [`Sender::send_with`](super::Sender::send_with) and
/// [`Sender::send_parts_with`](super::Sender::send_parts_with): the fill (or cut)
/// function's, or the transport's.
#[derive(Debug, thiserror::Error)]
pub enum SendWithError<E> {
    /// The fill function failed.
    #[error("filling the packet failed: {0}")]
    Fill(E),
    /// The transport failed.
    #[error(transparent)]
    Verbs(VerbsError),
}

pub(super) fn limiter_of(c: &SendStreamConfig) -> RateLimiter {
    RateLimiter::new(c.rate, c.burst_size, c.burst_rate_ratio)
}
