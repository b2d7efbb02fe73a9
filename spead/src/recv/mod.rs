//! Heap assembly: packets in, heaps out (sans-IO), with spead2's semantics.

mod heap;
mod pool;
mod stream;

pub use heap::{Heap, Item};
pub use pool::{MemoryPool, PoolBuffer, PoolStats};
pub use stream::{Reject, Stats, Stream, StreamConfig};

#[cfg(test)]
mod tests;
