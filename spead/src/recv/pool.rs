//! A pool of heap payload buffers, so steady-state reception allocates nothing.
//!
//! Buffers are handed out as [`PoolBuffer`]s that return themselves on drop. Returned
//! buffers keep their initialised length, so reuse costs no memset. The pool keeps at
//! most `max_free` idle buffers and `max_idle_bytes` idle bytes; extra ones are
//! released to the allocator, so a peer announcing huge heaps cannot make it hoard.

use std::sync::{Arc, Mutex, PoisonError};

/// Memory pool statistics (a counter set spead2 users have asked for).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Buffers freshly allocated because no idle buffer was big enough.
    pub allocated: u64,
    /// Requests served from an idle buffer.
    pub reused: u64,
    /// Buffers grown in place (heaps without HEAP_LENGTH).
    pub grown: u64,
    /// Buffers returned to the idle list.
    pub returned: u64,
    /// Buffers released to the allocator because the idle list was full.
    pub released: u64,
    /// Idle buffers held now.
    pub idle_buffers: u64,
    /// Bytes held by idle buffers now.
    pub idle_bytes: u64,
}

/// Above this size, a buffer request is first tried without committing to it.
const PROBE_ABOVE: usize = 64 << 20;

/// `len` zero bytes, or `None` when the allocator cannot provide them.
///
/// `vec![0; len]` takes zeroed pages from the system without touching them (a heap
/// announced as huge costs nothing until its bytes arrive) but aborts the process when
/// the memory cannot be had; a large request is therefore first tried with a fallible
/// reservation, which fails cleanly for sizes the system will not give.
fn zeroed(len: usize) -> Option<Vec<u8>> {
    if len > PROBE_ABOVE {
        let mut probe: Vec<u8> = Vec::new();
        probe.try_reserve_exact(len).ok()?;
    }
    Some(vec![0u8; len])
}

/// An idle payload buffer and the pointer list that travels with it.
type Idle = (Vec<u8>, Vec<u64>);

#[derive(Debug)]
struct Inner {
    free: Vec<Idle>,
    max_free: usize,
    max_idle_bytes: u64,
    stats: PoolStats,
}

/// A shared pool of payload buffers.
#[derive(Debug, Clone)]
pub struct MemoryPool {
    inner: Arc<Mutex<Inner>>,
}

impl Default for MemoryPool {
    fn default() -> Self {
        Self::new(16)
    }
}

impl MemoryPool {
    /// A pool keeping at most `max_free` idle buffers (and at most 256 MiB idle).
    pub fn new(max_free: usize) -> Self {
        Self::with_limits(max_free, 256 << 20)
    }

    /// A pool keeping at most `max_free` idle buffers and `max_idle_bytes` idle bytes.
    pub fn with_limits(max_free: usize, max_idle_bytes: u64) -> Self {
        Self {
            inner: Arc::new(Mutex::new(Inner {
                free: Vec::with_capacity(max_free),
                max_free,
                max_idle_bytes,
                stats: PoolStats::default(),
            })),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A buffer of at least `len` initialised bytes (contents unspecified).
    ///
    /// # Panics
    /// When the allocator cannot provide `len` bytes (see [`MemoryPool::try_acquire`]).
    pub fn acquire(&self, len: usize) -> PoolBuffer {
        self.try_acquire(len)
            .unwrap_or_else(|| panic!("cannot allocate a {len}-byte heap buffer"))
    }

    /// A buffer of at least `len` initialised bytes (contents unspecified), or `None`
    /// when the allocator cannot provide that much.
    pub fn try_acquire(&self, len: usize) -> Option<PoolBuffer> {
        let mut inner = self.lock();
        let pos = inner.free.iter().rposition(|(b, _)| b.len() >= len);
        let (buf, mut pointers) = match pos {
            Some(i) => {
                let (b, p) = inner.free.swap_remove(i);
                inner.stats.reused += 1;
                inner.stats.idle_buffers -= 1;
                inner.stats.idle_bytes -= b.len() as u64;
                (b, p)
            }
            None => {
                drop(inner);
                let b = zeroed(len)?;
                self.lock().stats.allocated += 1;
                (b, Vec::with_capacity(16))
            }
        };
        pointers.clear();
        Some(PoolBuffer {
            buf,
            pointers,
            pool: Some(self.clone()),
        })
    }

    /// Current statistics.
    pub fn stats(&self) -> PoolStats {
        self.lock().stats
    }

    fn give_back(&self, buf: Vec<u8>, pointers: Vec<u64>) {
        let mut inner = self.lock();
        let fits = inner.stats.idle_bytes + buf.len() as u64 <= inner.max_idle_bytes;
        if inner.free.len() < inner.max_free && !buf.is_empty() && fits {
            inner.stats.returned += 1;
            inner.stats.idle_buffers += 1;
            inner.stats.idle_bytes += buf.len() as u64;
            inner.free.push((buf, pointers));
        } else {
            inner.stats.released += 1;
        }
    }

    fn note_grow(&self) {
        self.lock().stats.grown += 1;
    }
}

/// A payload buffer that goes back to its pool when dropped, together with the heap's
/// item-pointer list (so that list is recycled too).
#[derive(Debug, Default)]
pub struct PoolBuffer {
    buf: Vec<u8>,
    pointers: Vec<u64>,
    pool: Option<MemoryPool>,
}

impl PoolBuffer {
    /// Grows the buffer to at least `len` bytes, keeping its contents. Returns false
    /// (and leaves the buffer alone) when the allocator cannot provide that much.
    pub fn try_grow(&mut self, len: usize) -> bool {
        if len > self.buf.len() {
            if self.buf.try_reserve_exact(len - self.buf.len()).is_err() {
                return false;
            }
            self.buf.resize(len, 0);
            if let Some(p) = &self.pool {
                p.note_grow();
            }
        }
        true
    }

    /// The whole buffer (may be longer than the heap).
    pub fn as_slice(&self) -> &[u8] {
        &self.buf
    }

    /// The whole buffer, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.buf
    }

    /// The heap's item pointers.
    pub fn pointers(&self) -> &[u64] {
        &self.pointers
    }

    /// The heap's item pointers, mutably.
    pub(crate) fn pointers_mut(&mut self) -> &mut Vec<u64> {
        &mut self.pointers
    }

    /// Buffer length.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// True for an empty buffer.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
}

impl Drop for PoolBuffer {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.take() {
            pool.give_back(
                std::mem::take(&mut self.buf),
                std::mem::take(&mut self.pointers),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reuses_returned_buffers() {
        let pool = MemoryPool::new(2);
        let a = pool.acquire(100);
        drop(a);
        let b = pool.acquire(50);
        assert!(b.len() >= 100);
        let c = pool.acquire(100);
        let d = pool.acquire(10);
        drop((b, c, d));
        let s = pool.stats();
        assert_eq!(s.allocated, 3);
        assert_eq!(s.reused, 1);
        assert_eq!(s.returned, 3);
        assert_eq!(s.released, 1);
        assert_eq!(s.idle_buffers, 2);
    }
}
