//! The free and data rings of spead2's `chunk_ring_stream` and `chunk_stream_ring_group`.

use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Mutex, PoisonError};

use super::config::{Chunk, ChunkStreamConfig, ChunkStreamGroupConfig};

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

impl<U: Send + 'static> ChunkStreamConfig<U> {
    /// Takes chunks from `rings`' free ring and puts ready ones on its data ring
    /// (spead2's `chunk_ring_stream`).
    #[must_use]
    pub fn with_rings(self, rings: ChunkRings<U>) -> Self {
        let ChunkRings { free, data } = rings;
        self.with_allocate(move |_, _| {
            free.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .recv()
                .ok()
        })
        .with_ready(move |c, _| {
            // A consumer that went away leaves the chunk to be dropped.
            let _ = data.send(c);
        })
    }
}

impl<U: Send + 'static> ChunkStreamGroupConfig<U> {
    /// A group configuration using `rings` (spead2's `chunk_stream_ring_group`).
    pub fn with_rings(rings: ChunkRings<U>) -> Self {
        let ChunkRings { free, data } = rings;
        Self::new(
            move |_, _| {
                free.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .recv()
                    .ok()
            },
            move |c, _| {
                let _ = data.send(c);
            },
        )
    }
}
