//! Chunk streams: heaps written in place into large chunks chosen by the user, as
//! spead2's `chunk_stream` and `chunk_stream_group` (`include/spead2/recv_chunk_stream.h`,
//! `src/recv_chunk_stream.cpp`, `src/recv_chunk_stream_group.cpp`).
//!
//! For each new heap a *place* callback sees the heap's first packet and the values of
//! the immediate items the user asked for, and chooses a chunk id, the heap's index in
//! the chunk and its byte offset in the chunk's payload (or discards the heap). Chunks
//! live in a window of `max_chunks` consecutive ids: asking for a chunk beyond the
//! window makes the oldest ones ready (handed to the *ready* callback, or pushed to a
//! data ring); heaps for chunks older than the window are counted as `too_old_heaps`,
//! heaps the place callback discards as `rejected_heaps`. A chunk records which heaps
//! arrived whole in `present` (one byte per heap, or per packet with packet presence).
//!
//! A [`ChunkStreamGroup`] shares one window among several streams (each fed by its own
//! reader, possibly on its own thread): a chunk is ready once every stream has moved
//! past it. When a stream needs a chunk beyond the group's window, `Lossy` eviction
//! pushes every stream past the old chunks at once; `Lossless` waits until the other
//! streams get there by themselves (so members must then run on their own threads).
//! A single [`ChunkStream`] is a group of one.
//!
//! Heap assembly itself is the plain stream's ([`super::Stream`]): a chunk stream is a
//! `Stream` whose [`HeapSink`] is a [`ChunkSink`], fed by the same `add_datagram`,
//! `add_buffer` and `add_decoded` calls, so every transport can drive it.
//!
//! ```
//! use std::sync::{Arc, Mutex};
//! use spead::recv::{Chunk, ChunkStream, ChunkStreamConfig, PlaceData, StreamConfig};
//! use spead::send::{heap_to_bytes, Heap};
//! use spead::wire::{Flavour, HEAP_CNT_ID};
//!
//! // Heaps of 64 bytes, four to a chunk, placed by their HEAP_CNT.
//! let ready = Arc::new(Mutex::new(Vec::new()));
//! let r = Arc::clone(&ready);
//! let mut chunk_config = ChunkStreamConfig::new(|d: &mut PlaceData<'_>| {
//!     if let [Some(cnt)] = d.items {
//!         d.chunk_id = (cnt / 4) as i64;
//!         d.heap_index = (cnt % 4) as usize;
//!         d.heap_offset = d.heap_index * 64;
//!     }
//! })
//! .with_allocate(|_, _| Some(Chunk::<()>::new(4 * 64, 4, 0)))
//! .with_ready(move |c, _| r.lock().unwrap().push(c));
//! chunk_config.items = vec![HEAP_CNT_ID];
//! let mut stream = ChunkStream::new_chunked(StreamConfig::default(), chunk_config).unwrap();
//! for cnt in [0u64, 1, 2, 3, 5] {
//!     let mut heap = Heap::new(Flavour::SPEAD_64_48);
//!     heap.add_item(0x1000, vec![cnt as u8; 64], false);
//!     stream.add_buffer(&heap_to_bytes(&heap, cnt, 1472).unwrap());
//! }
//! stream.stop();
//! let chunks = ready.lock().unwrap();
//! assert_eq!(chunks[0].present, vec![1, 1, 1, 1]);
//! assert_eq!(chunks[1].present, vec![0, 1, 0, 0]);
//! assert_eq!(chunks[1].data[64..128], [5u8; 64]);
//! assert_eq!(stream.stats().get("rejected_heaps"), Some(0));
//! ```

use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use super::chunk_cell::{ChunkCell, Claim, Marker, Placed, WriteMark};
use super::sink::{sealed, Exit, HeapSink, LiveHeap};
use super::stats::{StatMode, Stats};
use super::stream::{Reject, Stream, StreamConfig};
use crate::wire::Packet;

/// Storage for a chunk with metadata (spead2's `chunk`), with user data `U`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Chunk<U = ()> {
    /// Chunk id (set by the stream when it takes the chunk).
    pub chunk_id: i64,
    /// `stream_id` of the stream that took the chunk ([`StreamConfig::stream_id`]).
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
    /// `batch_stats`; use the indices [`StreamConfig::add_stat`] returned).
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
    place: PlaceFn,
    allocate: Option<AllocateFn<U>>,
    ready: Option<ReadyFn<U>>,
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

impl<U: Send + 'static> ChunkStreamConfig<U> {
    /// Takes chunks from `rings`' free ring and puts ready ones on its data ring
    /// (spead2's `chunk_ring_stream`).
    #[must_use]
    pub fn with_rings(self, rings: ChunkRings<U>) -> Self {
        let ChunkRings { free, data } = rings;
        self.with_allocate(move |_, _| lock(&free).recv().ok())
            .with_ready(move |c, _| {
                // A consumer that went away leaves the chunk to be dropped.
                let _ = data.send(c);
            })
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
    Stat(#[from] super::stats::DuplicateStat),
}

/// The two rings of spead2's `chunk_ring_stream`: free chunks in, ready chunks out.
/// Clones share the rings, so several streams can use one pair (as spead2's
/// `test_shared_ringbuffer`); the data ring ends when all of them stopped.
#[derive(Debug)]
pub struct ChunkRings<U> {
    free: Arc<Mutex<Receiver<Chunk<U>>>>,
    data: SyncSender<Chunk<U>>,
}

impl<U> Clone for ChunkRings<U> {
    fn clone(&self) -> Self {
        Self {
            free: Arc::clone(&self.free),
            data: self.data.clone(),
        }
    }
}

/// The user's ends of [`ChunkRings`]: give back chunks with [`FreeRing::add_free_chunk`],
/// read ready chunks from `data` (it ends when every stream using the rings stopped).
#[derive(Debug)]
pub struct ChunkRingEnds<U> {
    /// Ready chunks, oldest first.
    pub data: Receiver<Chunk<U>>,
    /// Where free chunks go.
    pub free: FreeRing<U>,
}

/// The free ring's sending end.
#[derive(Debug, Clone)]
pub struct FreeRing<U> {
    tx: mpsc::Sender<Chunk<U>>,
}

impl<U> FreeRing<U> {
    /// Gives a chunk to the stream, marking all its heaps absent (spead2's
    /// `add_free_chunk`). Returns false if the stream is gone.
    pub fn add_free_chunk(&self, mut chunk: Chunk<U>) -> bool {
        chunk.present.fill(0);
        self.tx.send(chunk).is_ok()
    }
}

/// Makes a pair of rings: a data ring holding at most `capacity` ready chunks (the
/// stream blocks when it is full, as spead2's) and an unbounded free ring (the stream
/// blocks when it is empty and needs a chunk, as spead2's).
pub fn chunk_rings<U>(capacity: usize) -> (ChunkRings<U>, ChunkRingEnds<U>) {
    let (data_tx, data_rx) = mpsc::sync_channel(capacity);
    let (free_tx, free_rx) = mpsc::channel();
    (
        ChunkRings {
            free: Arc::new(Mutex::new(free_rx)),
            data: data_tx,
        },
        ChunkRingEnds {
            data: data_rx,
            free: FreeRing { tx: free_tx },
        },
    )
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
    allocate: AllocateFn<U>,
    ready: ReadyFn<U>,
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

impl<U: Send + 'static> ChunkStreamGroupConfig<U> {
    /// A group configuration using `rings` (spead2's `chunk_stream_ring_group`).
    pub fn with_rings(rings: ChunkRings<U>) -> Self {
        let ChunkRings { free, data } = rings;
        Self::new(
            move |_, _| lock(&free).recv().ok(),
            move |c, _| {
                let _ = data.send(c);
            },
        )
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A chunk shared by the streams of a group.
type Cell<U> = Arc<ChunkCell<U>>;

struct GroupState<U> {
    max_chunks: usize,
    eviction: EvictionMode,
    allocate: Option<AllocateFn<U>>,
    ready: Option<ReadyFn<U>>,
    /// Chunks `head .. head + window.len()`.
    window: VecDeque<Option<Cell<U>>>,
    head: u64,
    /// Each member's head chunk (the oldest chunk it may still write).
    heads: Vec<Arc<AtomicU64>>,
    /// Each member's write mark (see `chunk_cell`).
    marks: Vec<Arc<WriteMark>>,
    stopped_members: usize,
    /// Emptied cells, reused so that steady state allocates nothing.
    spare: Vec<Cell<U>>,
}

impl<U> GroupState<U> {
    fn tail(&self) -> u64 {
        self.head + self.window.len() as u64
    }

    /// Hands the oldest chunk to the ready callback.
    fn flush_head(&mut self, stats: &mut Stats) {
        if let Some(Some(cell)) = self.window.pop_front() {
            if let Some(c) = cell.take(&self.marks) {
                if let Some(ready) = &mut self.ready {
                    ready(c, stats);
                }
            }
            // Members may still hold the cell, and heaps their claims in it: neither
            // can reach the next chunk in it (`chunk_cell`'s generations).
            if self.spare.len() < self.max_chunks {
                self.spare.push(cell);
            }
        }
        self.head += 1;
    }

    /// Makes ready every chunk before `target` (spead2's `chunk_window::flush_until`).
    fn flush_until(&mut self, target: u64, stats: &mut Stats) {
        while self.head < target && !self.window.is_empty() {
            self.flush_head(stats);
        }
        if self.head < target {
            self.head = target;
        }
    }

    /// Moves the group head to the oldest member head.
    fn heads_moved(&mut self, stats: &mut Stats) {
        let min = self
            .heads
            .iter()
            .map(|h| h.load(Ordering::Acquire))
            .min()
            .unwrap_or(u64::MAX);
        self.flush_until(min, stats);
        if self.stopped_members == self.heads.len() {
            // Every stream stopped: let go of the callbacks (and so of the rings,
            // which tells a ring reader the data has ended).
            self.allocate = None;
            self.ready = None;
        }
    }
}

struct Group<U> {
    state: Mutex<GroupState<U>>,
    moved: Condvar,
    /// Read before every packet by every member: on a cache line of its own, apart
    /// from the lock's and the condition variable's.
    stopped: Stopped,
}

#[derive(Default)]
#[repr(align(128))]
struct Stopped(AtomicBool);

impl std::ops::Deref for Stopped {
    type Target = AtomicBool;
    fn deref(&self) -> &AtomicBool {
        &self.0
    }
}

impl<U> Group<U> {
    fn lock(&self) -> MutexGuard<'_, GroupState<U>> {
        lock(&self.state)
    }

    /// Sets member `m`'s head to at least `head` and lets the group follow.
    fn advance_member(&self, st: &mut GroupState<U>, m: usize, head: u64, stats: &mut Stats) {
        let h = &st.heads[m];
        if h.load(Ordering::Acquire) < head {
            h.store(head, Ordering::Release);
            st.heads_moved(stats);
            self.moved.notify_all();
        }
    }

    /// The chunk for `chunk_id` on behalf of member `m` (spead2's
    /// `chunk_stream_group::get_chunk` after the member's own window moved).
    fn get_chunk(
        &self,
        m: usize,
        member_max: usize,
        stream_id: usize,
        chunk_id: u64,
        stats: &mut Stats,
    ) -> Option<Cell<U>> {
        let mut st = self.lock();
        let own = st.heads[m].load(Ordering::Acquire);
        if chunk_id < own {
            // Lossy eviction by another stream moved us on since the caller looked.
            return None;
        }
        if chunk_id - own >= member_max as u64 {
            self.advance_member(&mut st, m, chunk_id - (member_max as u64 - 1), stats);
        }
        let max = st.max_chunks as u64;
        if chunk_id - st.head >= max {
            let target = chunk_id - (max - 1);
            match st.eviction {
                EvictionMode::Lossy => {
                    for i in 0..st.heads.len() {
                        let h = &st.heads[i];
                        if h.load(Ordering::Acquire) < target {
                            h.store(target, Ordering::Release);
                        }
                    }
                    st.heads_moved(stats);
                    self.moved.notify_all();
                }
                EvictionMode::Lossless => {
                    while st.head < target && !self.stopped.load(Ordering::Acquire) {
                        st = self.moved.wait(st).unwrap_or_else(PoisonError::into_inner);
                    }
                    if st.head < target {
                        return None;
                    }
                }
            }
        }
        // Another member may have moved the window on while we waited.
        if chunk_id < st.head {
            return None;
        }
        while st.tail() <= chunk_id {
            let id = st.tail();
            let chunk = st.allocate.as_mut().and_then(|a| a(id as i64, stats));
            let cell = chunk.map(|mut c| {
                c.chunk_id = id as i64;
                c.stream_id = stream_id;
                // A spare cell takes chunks with as many presence flags as its first.
                let c = match st.spare.pop() {
                    Some(cell) => match cell.fill(c) {
                        Ok(()) => return cell,
                        Err(c) => c,
                    },
                    None => c,
                };
                Arc::new(ChunkCell::new(c))
            });
            st.window.push_back(cell);
        }
        st.window[(chunk_id - st.head) as usize].clone()
    }
}

/// A group of chunk streams sharing chunks (spead2's `chunk_stream_group`).
pub struct ChunkStreamGroup<U = ()> {
    group: Arc<Group<U>>,
}

impl<U> fmt::Debug for ChunkStreamGroup<U> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.group.lock();
        f.debug_struct("ChunkStreamGroup")
            .field("head", &st.head)
            .field("live_chunks", &st.window.len())
            .field("streams", &st.heads.len())
            .finish_non_exhaustive()
    }
}

impl<U: Send + 'static> ChunkStreamGroup<U> {
    /// A group with no streams yet.
    ///
    /// # Errors
    /// [`ChunkError::ZeroMaxChunks`].
    pub fn new(config: ChunkStreamGroupConfig<U>) -> Result<Self, ChunkError> {
        if config.max_chunks == 0 {
            return Err(ChunkError::ZeroMaxChunks);
        }
        Ok(Self {
            group: Arc::new(Group {
                state: Mutex::new(GroupState {
                    max_chunks: config.max_chunks,
                    eviction: config.eviction_mode,
                    allocate: Some(config.allocate),
                    ready: Some(config.ready),
                    window: VecDeque::with_capacity(config.max_chunks),
                    head: 0,
                    heads: Vec::new(),
                    marks: Vec::new(),
                    stopped_members: 0,
                    spare: Vec::with_capacity(config.max_chunks),
                }),
                moved: Condvar::new(),
                stopped: Stopped::default(),
            }),
        })
    }

    /// Adds a stream (spead2's `emplace_back`). The chunk config's allocate and ready
    /// callbacks are not used: the group's are. Add every stream before feeding any (as
    /// spead2 requires): a stream added later starts at the group's current head.
    ///
    /// # Errors
    /// A [`ChunkError`] for an impossible configuration.
    pub fn add_stream(
        &self,
        config: StreamConfig,
        chunk_config: ChunkStreamConfig<U>,
    ) -> Result<ChunkStream<U>, ChunkError> {
        let group_max = self.group.lock().max_chunks;
        if chunk_config.max_chunks > group_max {
            return Err(ChunkError::MemberWindowTooLarge {
                stream: chunk_config.max_chunks,
                group: group_max,
            });
        }
        new_member(&self.group, config, chunk_config)
    }

    /// Stops every stream (spead2's `chunk_stream_group::stop`): each refuses further
    /// packets and every chunk is made ready.
    pub fn stop(&self) {
        self.group.stopped.store(true, Ordering::Release);
        let mut st = self.group.lock();
        for i in 0..st.heads.len() {
            st.heads[i].store(u64::MAX, Ordering::Release);
        }
        st.heads_moved(&mut Stats::default());
        self.group.moved.notify_all();
    }
}

fn new_member<U: Send + 'static>(
    group: &Arc<Group<U>>,
    mut config: StreamConfig,
    chunk_config: ChunkStreamConfig<U>,
) -> Result<ChunkStream<U>, ChunkError> {
    if chunk_config.max_chunks == 0 {
        return Err(ChunkError::ZeroMaxChunks);
    }
    if config.max_heaps == 0 || config.substreams == 0 {
        return Err(ChunkError::ZeroHeaps);
    }
    if chunk_config.packet_presence_payload_size == Some(0) {
        return Err(ChunkError::ZeroPresencePayload);
    }
    // spead2's chunk_stream_state::adjust_config.
    let too_old = config.add_stat("too_old_heaps", StatMode::Counter)?;
    let rejected = config.add_stat("rejected_heaps", StatMode::Counter)?;
    let (member, head, marker) = {
        let mut st = group.lock();
        let head = Arc::new(AtomicU64::new(st.head));
        st.heads.push(Arc::clone(&head));
        let (marker, mark) = Marker::new();
        st.marks.push(mark);
        (st.heads.len() - 1, head, marker)
    };
    let sink = ChunkSink {
        group: Arc::clone(group),
        member,
        head,
        max_chunks: chunk_config.max_chunks,
        item_values: vec![None; chunk_config.items.len()],
        item_ids: chunk_config.items,
        extra: vec![0; chunk_config.max_heap_extra],
        presence: chunk_config.packet_presence_payload_size,
        place: chunk_config.place,
        too_old,
        rejected,
        stopped: false,
        stream_id: config.stream_id,
        cells: Vec::with_capacity(chunk_config.max_chunks + 1),
        marker,
    };
    Ok(Stream::with_sink(config, sink))
}

/// A stream writing heaps into chunks (spead2's `chunk_stream`, or a member of a
/// [`ChunkStreamGroup`]).
pub type ChunkStream<U = ()> = Stream<ChunkSink<U>>;

impl<U: Send + 'static> Stream<ChunkSink<U>> {
    /// A stand-alone chunk stream (a group of one). `chunk_config` needs allocate and
    /// ready callbacks (or rings).
    ///
    /// # Errors
    /// A [`ChunkError`] for an impossible configuration.
    pub fn new_chunked(
        config: StreamConfig,
        mut chunk_config: ChunkStreamConfig<U>,
    ) -> Result<Self, ChunkError> {
        let allocate = chunk_config.allocate.take().ok_or(ChunkError::NoAllocate)?;
        let ready = chunk_config.ready.take().ok_or(ChunkError::NoReady)?;
        let mut gc = ChunkStreamGroupConfig::new(allocate, ready);
        gc.max_chunks = chunk_config.max_chunks;
        let group = ChunkStreamGroup::new(gc)?;
        new_member(&group.group, config, chunk_config)
    }

    /// Counters (`too_old_heaps` and `rejected_heaps` are custom ones).
    pub fn stats(&self) -> Stats {
        self.raw_stats().clone()
    }
}

/// Where a heap of a chunk stream is written: its claim on a chunk's bytes and flags.
#[derive(Debug, Default)]
pub struct ChunkHeap {
    claim: Option<Claim>,
    chunk_id: u64,
}

/// The [`HeapSink`] of chunk streams.
pub struct ChunkSink<U> {
    group: Arc<Group<U>>,
    member: usize,
    head: Arc<AtomicU64>,
    max_chunks: usize,
    item_ids: Vec<u64>,
    item_values: Vec<Option<u64>>,
    extra: Vec<u8>,
    presence: Option<usize>,
    place: PlaceFn,
    too_old: usize,
    rejected: usize,
    stopped: bool,
    stream_id: usize,
    /// The chunks this stream placed heaps in lately, by id (its own window: a heap
    /// finds its chunk here without the group's lock).
    cells: Vec<(u64, Cell<U>)>,
    /// This member's mark on the cell it writes.
    marker: Marker,
}

impl<U> fmt::Debug for ChunkSink<U> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChunkSink")
            .field("member", &self.member)
            .field("head", &self.head.load(Ordering::Relaxed))
            .field("max_chunks", &self.max_chunks)
            .finish_non_exhaustive()
    }
}

impl<U> ChunkSink<U> {
    fn too_old(&self, chunk_id: u64) -> bool {
        chunk_id < self.head.load(Ordering::Acquire)
    }

    /// The chunk `chunk_id` in this stream's own window.
    fn cell(&self, chunk_id: u64) -> Option<&Cell<U>> {
        self.cells
            .iter()
            .rev()
            .find(|(id, _)| *id == chunk_id)
            .map(|(_, cell)| cell)
    }

    fn discard(&self) -> ChunkHeap {
        ChunkHeap::default()
    }

    fn bump(stats: &mut Stats, index: usize) {
        if let Some(v) = stats.value_mut(index) {
            *v += 1;
        }
    }
}

impl<U> ChunkSink<U> {
    /// This stream holds back no chunk any more (it stopped or went away).
    fn leave(&mut self, stats: &mut Stats) {
        if !self.stopped {
            self.stopped = true;
            let mut st = self.group.lock();
            st.stopped_members += 1;
            self.group
                .advance_member(&mut st, self.member, u64::MAX, stats);
            if st.stopped_members == st.heads.len() {
                st.heads_moved(stats);
            }
            drop(st);
            self.cells.clear();
        }
    }
}

impl<U> Drop for ChunkSink<U> {
    /// As spead2's destructors stop their streams: a dropped member no longer holds
    /// the group back.
    fn drop(&mut self) {
        if !self.stopped {
            self.leave(&mut Stats::default());
        }
    }
}

impl<U> sealed::Sealed for ChunkSink<U> {}

impl<U: Send + 'static> HeapSink for ChunkSink<U> {
    type Storage = ChunkHeap;

    fn allows_unsized(&self) -> bool {
        // spead2's adjust_config: unsized heaps cannot be placed.
        false
    }

    fn allocate(
        &mut self,
        size: u64,
        p: &Packet<'_>,
        stats: &mut Stats,
    ) -> Result<ChunkHeap, Reject> {
        // spead2's chunk_stream_state::allocate: the requested items come from every
        // immediate pointer of the first packet, specials included.
        self.item_values.fill(None);
        for ptr in p.item_pointers().filter(|ptr| ptr.immediate) {
            for (id, v) in self.item_ids.iter().zip(&mut self.item_values) {
                if *id == ptr.id {
                    *v = Some(ptr.value);
                }
            }
        }
        let mut data = PlaceData {
            packet: p,
            items: &self.item_values,
            chunk_id: -1,
            heap_index: 0,
            heap_offset: 0,
            stats,
            extra: &mut self.extra,
            extra_offset: 0,
            extra_size: 0,
        };
        (self.place)(&mut data);
        let PlaceData {
            chunk_id,
            heap_index,
            heap_offset,
            extra_offset,
            extra_size,
            ..
        } = data;
        let Ok(chunk_id) = u64::try_from(chunk_id) else {
            Self::bump(stats, self.rejected);
            return Ok(self.discard());
        };
        if self.too_old(chunk_id) {
            Self::bump(stats, self.too_old);
            return Ok(self.discard());
        }
        // spead2 trusts the callback; we refuse placements outside the chunk, and
        // placements overlapping a live heap's (see `chunk_cell`): several streams
        // write one chunk at once, each heap its own bytes.
        let flags = match self.presence {
            Some(n) => (size as usize).div_ceil(n).max(1),
            None => 1,
        };
        let ranges = heap_offset
            .checked_add(size as usize)
            .zip(heap_index.checked_add(flags))
            .filter(|_| extra_size <= self.extra.len());
        let Some((data_end, present_end)) = ranges else {
            Self::bump(stats, self.rejected);
            return Ok(self.discard());
        };
        // The chunk is most often one this stream placed a heap in before: then
        // placing needs no lock of the group's (its window was settled then).
        if self.cell(chunk_id).is_none() {
            let Some(cell) = self.group.get_chunk(
                self.member,
                self.max_chunks,
                self.stream_id,
                chunk_id,
                stats,
            ) else {
                if self.too_old(chunk_id) {
                    Self::bump(stats, self.too_old);
                }
                return Ok(self.discard());
            };
            let head = self.head.load(Ordering::Acquire);
            self.cells.retain(|(id, _)| *id >= head);
            self.cells.push((chunk_id, cell));
        }
        // Borrowed, not cloned: the cell's count is shared with the other streams.
        let Some(cell) = self.cell(chunk_id) else {
            return Ok(self.discard());
        };
        let placed = cell.place(
            chunk_id,
            heap_offset..data_end,
            heap_index..present_end,
            &self.extra[..extra_size],
            extra_offset,
        );
        match placed {
            Placed::Claimed(claim) => Ok(ChunkHeap {
                claim: Some(claim),
                chunk_id,
            }),
            Placed::Refused => {
                Self::bump(stats, self.rejected);
                Ok(self.discard())
            }
            Placed::Gone => {
                // Made ready since this stream got it: every stream moved past it.
                if self.too_old(chunk_id) {
                    Self::bump(stats, self.too_old);
                }
                Ok(self.discard())
            }
        }
    }

    fn reserve(&mut self, _storage: &mut ChunkHeap, _size: u64) -> Result<(), Reject> {
        // Only sized heaps reach a chunk sink, and their place was checked.
        Ok(())
    }

    fn write(&mut self, h: &mut ChunkHeap, p: &Packet<'_>) {
        self.write_run(h, std::iter::once((p.payload_offset, p.payload)));
    }

    fn write_run<'p>(&self, h: &mut ChunkHeap, run: impl Iterator<Item = (u64, &'p [u8])>) {
        // One writer for the run, and no lock: the heap's claim is its own, and the
        // chunk cannot leave the window while the writer lives (`chunk_cell`). As in
        // spead2, whose readers hold their stream's lock for a batch of packets, an
        // eviction by another member takes effect between runs.
        let cell = match &h.claim {
            Some(_) if !self.too_old(h.chunk_id) => self.cell(h.chunk_id),
            _ => None,
        };
        let mut writer = cell
            .zip(h.claim.as_ref())
            .and_then(|(cell, claim)| cell.writer(claim, &self.marker));
        match writer.as_mut() {
            Some(w) => {
                for (offset, payload) in run {
                    // The stream passes only payloads inside the heap's length.
                    let Ok(offset) = usize::try_from(offset) else {
                        continue;
                    };
                    w.copy(offset, payload);
                    if let Some(n) = self.presence {
                        w.set_present(offset / n);
                    }
                }
            }
            None => run.for_each(drop),
        }
    }

    fn heap_ready(&mut self, h: &mut LiveHeap<ChunkHeap>, exit: Exit, stats: &mut Stats) {
        // spead2's do_heap_ready: only complete heaps count.
        if exit != Exit::Complete {
            return;
        }
        let Some(claim) = &h.storage.claim else {
            return;
        };
        if self.too_old(h.storage.chunk_id) {
            Self::bump(stats, self.too_old);
        } else if self.presence.is_none() {
            if let Some(cell) = self.cell(h.storage.chunk_id) {
                if let Some(mut w) = cell.writer(claim, &self.marker) {
                    w.set_present(0);
                }
            }
        }
    }

    fn release(&mut self, h: &mut ChunkHeap) {
        if let Some(claim) = h.claim.take() {
            if let Some(cell) = self.cell(h.chunk_id) {
                cell.release(claim);
            }
        }
    }

    fn stopped(&mut self, stats: &mut Stats) {
        self.leave(stats);
    }

    fn poll(&self) -> bool {
        self.group.stopped.load(Ordering::Acquire)
    }
}

#[cfg(test)]
#[path = "chunk_tests.rs"]
mod tests;
