//! Why a packet was not used: the stream's refusals, and the sinks' (no memory).

use crate::wire::WireError;

/// Why a packet was not used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reject {
    /// It failed to decode.
    Malformed(WireError),
    /// In-order mode: not at the heap's next offset.
    OutOfOrder,
    /// Out-of-order mode: it overlaps bytes already received.
    Duplicate,
    /// HEAP_LENGTH differs from the heap's, or is smaller than the heap's items need.
    HeapLengthMismatch,
    /// Flavour differs from the heap's.
    FlavourMismatch,
    /// The heap would exceed `max_heap_size`, or is unsized when not allowed.
    TooLarge,
    /// The heap already has `max_ranges_per_heap` disjoint ranges.
    TooFragmented,
    /// Memory for the heap could not be had.
    OutOfMemory,
    /// An `explicit_start` stream has not been started.
    NotStarted,
    /// The stream has stopped.
    Stopped,
}
