//! Heap assembly: packets in, heaps (or chunks) out (sans-IO), with spead2's semantics.

pub mod chunk;
mod config;
mod heap;
mod next;
mod pool;
mod reject;
pub mod sink;
mod slot;
mod stats;
mod stream;

pub use chunk::{
    Chunk, ChunkStream, ChunkStreamConfig, ChunkStreamGroup, ChunkStreamGroupConfig, EvictionMode,
    PlaceData,
};
pub use config::StreamConfig;
pub use heap::{Heap, Item};
pub use pool::{MemoryPool, PoolBuffer, PoolStats};
pub use reject::Reject;
pub use stats::{DuplicateStat, StatMode, Stats, StatsConfig, StatsMismatch, BUILTIN_STATS};
pub use stream::Stream;

#[cfg(test)]
mod tests;
