//! What chunk streams and groups are configured with: the chunks themselves, the place,
//! allocate and ready callbacks, and the refusals of impossible configurations.

use std::fmt;

use crate::recv::stats::Stats;
use crate::wire::Packet;

/// Storage for a chunk with metadata (spead2's `chunk`), with user data `U`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Chunk<U = ()> {
    /// Chunk id (set by the stream when it takes the chunk).
    pub chunk_id: i64,
    /// `stream_id` of the stream that took the chunk
    /// ([`StreamConfig::stream_id`](crate::recv::StreamConfig::stream_id)).
    pub stream_id: usize,
    /// One flag per heap (or per packet with packet presence): 1 once it arrived.
    pub present: Vec<u8>,
    /// The payload: heaps are written at the offsets the place callback chose.
    pub data: Vec<u8>,
    /// Per-heap metadata the place callback chose to keep.
    pub extra: Vec<u8>,
    /// The user's own data.
    pub user: U,
}

impl<U: Default> Chunk<U> {
    /// A zeroed chunk with `data_size` payload bytes, `present_size` presence flags
    /// and `extra_size` extra bytes.
    pub fn new(data_size: usize, present_size: usize, extra_size: usize) -> Self {
        Self {
            chunk_id: -1,
            stream_id: 0,
            present: vec![0; present_size],
            data: vec![0; data_size],
            extra: vec![0; extra_size],
            user: U::default(),
        }
    }
}

/// What the place callback sees and decides (spead2's `chunk_place_data`).
#[derive(Debug)]
pub struct PlaceData<'a> {
    /// The heap's first packet.
    pub packet: &'a Packet<'a>,
    /// Values of the immediate items requested in [`ChunkStreamConfig::items`], in that
    /// order, taken from this packet (`None` when absent, spead2's -1). HEAP_CNT (1)
    /// and HEAP_LENGTH (2) may be requested too.
    pub items: &'a [Option<u64>],
    /// Output: the chunk id; leave negative to discard the heap (`rejected_heaps`).
    pub chunk_id: i64,
    /// Output: the heap's index in the chunk (its `present` flag).
    pub heap_index: usize,
    /// Output: the heap's byte offset in the chunk's `data`.
    pub heap_offset: usize,
    /// The stream's statistics, for the callback's custom counters (spead2's
    /// `batch_stats`; use the indices
    /// [`StreamConfig::add_stat`](crate::recv::StreamConfig::add_stat) returned).
    pub stats: &'a mut Stats,
    /// Output: bytes to copy into the chunk's `extra` (at most `max_heap_extra`).
    pub extra: &'a mut [u8],
    /// Output: where in `extra` of the chunk to copy them.
    pub extra_offset: usize,
    /// Output: how many bytes of `extra` to copy.
    pub extra_size: usize,
}

/// The place callback.
pub type PlaceFn = Box<dyn FnMut(&mut PlaceData<'_>) + Send>;
/// Gives a chunk for a chunk id (`None`: heaps for that chunk are dropped). The
/// statistics are those of the stream that asked (spead2's `batch_stats`).
pub type AllocateFn<U> = Box<dyn FnMut(i64, &mut Stats) -> Option<Chunk<U>> + Send>;
/// Takes a chunk that is ready, with the statistics of the stream that made it ready
/// (spead2's `batch_stats`; scratch statistics when the group itself was stopped).
pub type ReadyFn<U> = Box<dyn FnMut(Chunk<U>, &mut Stats) + Send>;

/// Chunk stream configuration (spead2's `chunk_stream_config`).
pub struct ChunkStreamConfig<U = ()> {
    /// Immediate items whose values the place callback receives.
    pub items: Vec<u64>,
    /// Chunks live at once (spead2 default 2).
    pub max_chunks: usize,
    /// Most bytes the place callback may write to `extra`.
    pub max_heap_extra: usize,
    /// With `Some(n)`, presence is per packet: flag `heap_index + offset / n` is set
    /// for each packet (spead2's `enable_packet_presence`); otherwise per whole heap.
    pub packet_presence_payload_size: Option<usize>,
    pub(super) place: PlaceFn,
    pub(super) allocate: Option<AllocateFn<U>>,
    pub(super) ready: Option<ReadyFn<U>>,
}

impl<U> fmt::Debug for ChunkStreamConfig<U> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChunkStreamConfig")
            .field("items", &self.items)
            .field("max_chunks", &self.max_chunks)
            .field("max_heap_extra", &self.max_heap_extra)
            .field(
                "packet_presence_payload_size",
                &self.packet_presence_payload_size,
            )
            .finish_non_exhaustive()
    }
}

impl<U> ChunkStreamConfig<U> {
    /// A configuration with a place callback and spead2's defaults.
    pub fn new(place: impl FnMut(&mut PlaceData<'_>) + Send + 'static) -> Self {
        Self {
            items: Vec::new(),
            max_chunks: 2,
            max_heap_extra: 0,
            packet_presence_payload_size: None,
            place: Box::new(place),
            allocate: None,
            ready: None,
        }
    }

    /// Sets the allocate callback (not used for group members: the group's is).
    #[must_use]
    pub fn with_allocate(
        mut self,
        allocate: impl FnMut(i64, &mut Stats) -> Option<Chunk<U>> + Send + 'static,
    ) -> Self {
        self.allocate = Some(Box::new(allocate));
        self
    }

    /// Sets the ready callback (not used for group members: the group's is).
    #[must_use]
    pub fn with_ready(mut self, ready: impl FnMut(Chunk<U>, &mut Stats) + Send + 'static) -> Self {
        self.ready = Some(Box::new(ready));
        self
    }
}

/// Refusals of impossible chunk configurations.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChunkError {
    /// `max_chunks` is zero.
    #[error("max_chunks cannot be 0")]
    ZeroMaxChunks,
    /// `max_heaps` or `substreams` of the stream config is zero.
    #[error("max_heaps and substreams cannot be 0")]
    ZeroHeaps,
    /// Packet presence with a payload size of zero.
    #[error("packet presence payload size cannot be 0")]
    ZeroPresencePayload,
    /// A stand-alone chunk stream needs an allocate callback (or rings).
    #[error("chunk stream config has no allocate callback")]
    NoAllocate,
    /// A stand-alone chunk stream needs a ready callback (or rings).
    #[error("chunk stream config has no ready callback")]
    NoReady,
    /// A group member's `max_chunks` exceeds the group's.
    #[error("stream max_chunks {stream} is larger than the group's {group}")]
    MemberWindowTooLarge {
        /// The stream's `max_chunks`.
        stream: usize,
        /// The group's `max_chunks`.
        group: usize,
    },
    /// `too_old_heaps` or `rejected_heaps` is already a custom statistic.
    #[error(transparent)]
    Stat(#[from] crate::recv::stats::DuplicateStat),
}

/// How a group makes room when a stream needs a chunk beyond its window (spead2's
/// `chunk_stream_group_config::eviction_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EvictionMode {
    /// Force every stream past the old chunks (their late heaps become too old).
    #[default]
    Lossy,
    /// Wait until every stream has moved past them by itself.
    Lossless,
}

/// Group configuration (spead2's `chunk_stream_group_config`).
pub struct ChunkStreamGroupConfig<U = ()> {
    /// Chunks live at once in the group (spead2 default 2).
    pub max_chunks: usize,
    /// See [`EvictionMode`].
    pub eviction_mode: EvictionMode,
    pub(super) allocate: AllocateFn<U>,
    pub(super) ready: ReadyFn<U>,
}

impl<U> fmt::Debug for ChunkStreamGroupConfig<U> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChunkStreamGroupConfig")
            .field("max_chunks", &self.max_chunks)
            .field("eviction_mode", &self.eviction_mode)
            .finish_non_exhaustive()
    }
}

impl<U> ChunkStreamGroupConfig<U> {
    /// A group configuration with its allocate and ready callbacks.
    pub fn new(
        allocate: impl FnMut(i64, &mut Stats) -> Option<Chunk<U>> + Send + 'static,
        ready: impl FnMut(Chunk<U>, &mut Stats) + Send + 'static,
    ) -> Self {
        Self {
            max_chunks: 2,
            eviction_mode: EvictionMode::Lossy,
            allocate: Box::new(allocate),
            ready: Box::new(ready),
        }
    }
}
