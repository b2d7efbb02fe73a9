//! Chunk stream groups and stand-alone chunk streams (a group of one).

use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};

use super::config::{ChunkError, ChunkStreamConfig, ChunkStreamGroupConfig};
use super::sink::{new_member, ChunkSink};
use super::window::{Group, GroupState, Stopped};
use crate::recv::config::StreamConfig;
use crate::recv::stats::Stats;
use crate::recv::stream::Stream;

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
