//! Heap assembly: packets in, heaps (or chunks) out (sans-IO), with spead2's semantics.

pub mod chunk;
mod chunk_cell;
mod heap;
mod pool;
pub mod sink;
mod stats;
mod stream;

pub use chunk::{
    Chunk, ChunkStream, ChunkStreamConfig, ChunkStreamGroup, ChunkStreamGroupConfig, EvictionMode,
    PlaceData,
};
pub use heap::{Heap, Item};
pub use pool::{MemoryPool, PoolBuffer, PoolStats};
pub use stats::{DuplicateStat, StatMode, Stats, StatsConfig, StatsMismatch, BUILTIN_STATS};
pub use stream::{Reject, Stream, StreamConfig};

#[cfg(test)]
mod tests;
