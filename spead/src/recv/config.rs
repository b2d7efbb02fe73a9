//! The receive stream's configuration.

use super::pool::MemoryPool;
use super::stats::{DuplicateStat, StatMode, StatsConfig};

/// Receiver configuration (spead2's `stream_config` plus our safety limits).
///
/// The defaults accept every heap spead2 accepts: no limit on heap size (memory that
/// cannot be had is a counted rejection, not a crash), pointers or ranges.
#[derive(Debug, Clone)]
pub struct StreamConfig {
    /// Live (partial) heaps per substream (spead2 default 4).
    pub max_heaps: usize,
    /// Substreams: heap `cnt` goes to substream `cnt % substreams`.
    pub substreams: usize,
    /// Accept packets of a heap in any order (range map) instead of strictly in order.
    pub allow_out_of_order: bool,
    /// Accept heaps without HEAP_LENGTH.
    pub allow_unsized_heaps: bool,
    /// Stop when a STREAM_CTRL = stop item arrives.
    pub stop_on_stop_item: bool,
    /// Deliver a complete stop heap itself (spead2 never does).
    pub deliver_stop_heap: bool,
    /// Deliver heaps that are not contiguous (with their ranges) instead of dropping
    /// them: spead2's `ring_stream_config::contiguous_only = false`.
    pub deliver_incomplete: bool,
    /// Do not accept packets until [`Stream::start`](super::Stream::start) (spead2's
    /// `explicit_start`).
    pub explicit_start: bool,
    /// Largest heap accepted (HEAP_LENGTH, or bytes seen for unsized heaps).
    pub max_heap_size: u64,
    /// Most distinct item pointers kept per heap.
    pub max_pointers_per_heap: usize,
    /// Most disjoint payload ranges tracked per heap in out-of-order mode.
    pub max_ranges_per_heap: usize,
    /// Where heap payload buffers come from (plain streams).
    pub pool: MemoryPool,
    /// Custom statistics (see [`StreamConfig::add_stat`]).
    pub stats: StatsConfig,
    /// An identifier the stream gives its chunks (spead2's `stream_id`).
    pub stream_id: usize,
}

impl Default for StreamConfig {
    fn default() -> Self {
        Self {
            max_heaps: 4,
            substreams: 1,
            allow_out_of_order: false,
            allow_unsized_heaps: true,
            stop_on_stop_item: true,
            deliver_stop_heap: false,
            deliver_incomplete: false,
            explicit_start: false,
            max_heap_size: u64::MAX,
            max_pointers_per_heap: usize::MAX,
            max_ranges_per_heap: usize::MAX,
            pool: MemoryPool::default(),
            stats: StatsConfig::default(),
            stream_id: 0,
        }
    }
}

impl StreamConfig {
    /// Registers a custom statistic and returns its index (spead2's
    /// `stream_config::add_stat`; the first custom statistic has index 9).
    ///
    /// # Errors
    /// [`DuplicateStat`] if a statistic of that name exists.
    pub fn add_stat(&mut self, name: &str, mode: StatMode) -> Result<usize, DuplicateStat> {
        self.stats.add(name, mode)
    }

    /// The index of a statistic by name.
    pub fn stat_index(&self, name: &str) -> Option<usize> {
        self.stats.index(name)
    }
}
