//! The window of chunks a group's streams share: which chunks are live, each member's
//! head, and how the window moves on (eviction, the ready callback).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use super::cell::{ChunkCell, WriteMark};
use super::config::{AllocateFn, EvictionMode, ReadyFn};
use crate::recv::stats::Stats;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A chunk shared by the streams of a group.
pub(super) type Cell<U> = Arc<ChunkCell<U>>;

pub(super) struct GroupState<U> {
    pub(super) max_chunks: usize,
    pub(super) eviction: EvictionMode,
    pub(super) allocate: Option<AllocateFn<U>>,
    pub(super) ready: Option<ReadyFn<U>>,
    /// Chunks `head .. head + window.len()`.
    pub(super) window: VecDeque<Option<Cell<U>>>,
    pub(super) head: u64,
    /// Each member's head chunk (the oldest chunk it may still write).
    pub(super) heads: Vec<Arc<AtomicU64>>,
    /// Each member's write mark (see `chunk_cell`).
    pub(super) marks: Vec<Arc<WriteMark>>,
    pub(super) stopped_members: usize,
    /// Emptied cells, reused so that steady state allocates nothing.
    pub(super) spare: Vec<Cell<U>>,
}

impl<U> GroupState<U> {
    pub(super) fn tail(&self) -> u64 {
        self.head + self.window.len() as u64
    }

    /// Hands the oldest chunk to the ready callback.
    pub(super) fn flush_head(&mut self, stats: &mut Stats) {
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
    pub(super) fn flush_until(&mut self, target: u64, stats: &mut Stats) {
        while self.head < target && !self.window.is_empty() {
            self.flush_head(stats);
        }
        if self.head < target {
            self.head = target;
        }
    }

    /// Moves the group head to the oldest member head.
    pub(super) fn heads_moved(&mut self, stats: &mut Stats) {
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

pub(super) struct Group<U> {
    pub(super) state: Mutex<GroupState<U>>,
    pub(super) moved: Condvar,
    /// Read before every packet by every member: on a cache line of its own, apart
    /// from the lock's and the condition variable's.
    pub(super) stopped: Stopped,
}

#[derive(Default)]
#[repr(align(128))]
pub(super) struct Stopped(AtomicBool);

impl std::ops::Deref for Stopped {
    type Target = AtomicBool;
    fn deref(&self) -> &AtomicBool {
        &self.0
    }
}

impl<U> Group<U> {
    pub(super) fn lock(&self) -> MutexGuard<'_, GroupState<U>> {
        lock(&self.state)
    }

    /// Sets member `m`'s head to at least `head` and lets the group follow.
    pub(super) fn advance_member(
        &self,
        st: &mut GroupState<U>,
        m: usize,
        head: u64,
        stats: &mut Stats,
    ) {
        let h = &st.heads[m];
        if h.load(Ordering::Acquire) < head {
            h.store(head, Ordering::Release);
            st.heads_moved(stats);
            self.moved.notify_all();
        }
    }

    /// The chunk for `chunk_id` on behalf of member `m` (spead2's
    /// `chunk_stream_group::get_chunk` after the member's own window moved).
    pub(super) fn get_chunk(
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
