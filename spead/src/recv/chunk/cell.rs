//! A chunk in a group's window, written by several streams at once, as spead2's readers
//! write the disjoint heaps of one chunk concurrently (`src/recv_chunk_stream.cpp`
//! copies into `chunk->data` with no lock of the chunk's).
//!
//! Each heap first *claims* its byte range of `data` and its flags of `present` under
//! the cell's lock ([`ChunkCell::place`], once per heap); no two live claims overlap.
//! Its packets are then copied through a [`Writer`] without any lock: writes of
//! different heaps touch disjoint bytes. A chunk leaves the cell ([`ChunkCell::take`])
//! only after it is closed to new writers and every write under way has ended, so the
//! user never sees a chunk that is still being written.
//!
//! The close is a Dekker handshake on sequentially consistent atomics: a writer marks
//! the cell in its member's [`WriteMark`] and then reads `closed`; the taker sets
//! `closed` and then reads every member's mark. In their single total order one of
//! the two sees the other: either the writer sees `closed` and backs out, or the taker
//! sees the mark and waits until it is cleared. Each member's mark is on a cache line
//! of its own, so that members writing one chunk at once do not share a line.
//!
//! A cell is refilled with a later chunk once taken ([`ChunkCell::fill`]); each fill
//! has a new generation, and a claim writes only in the generation it was made in, so
//! a claim that outlived its chunk never writes into the next one.
//!
//! A claim is given back without the lock: its first presence flag's *owner* word
//! holds the generation while it lives, and release swaps that for 0 (a compare, so a
//! claim of an older generation frees nothing of the current one). `place` counts a
//! listed claim as live only while its owner word holds the current generation, and
//! reads that word with acquire ordering, so the released heap's writes happen before
//! any overlapping heap's.

use std::cell::Cell;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use super::config::Chunk;
use crate::recv::sink::copy_payload;

/// The cell a group member is writing (its address; 0: none), on a cache line of its
/// own.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(super) struct WriteMark(AtomicUsize);

/// A member's hold on its [`WriteMark`]: the only one, and on one thread, so that
/// the mark names at most one cell at a time ([`ChunkCell::writer`] refuses a second
/// writer while one lives).
#[derive(Debug)]
pub(super) struct Marker {
    mark: std::sync::Arc<WriteMark>,
    busy: Cell<bool>,
}

impl Marker {
    /// A new mark: the member's `Marker`, and the mark for [`ChunkCell::take`].
    pub(super) fn new() -> (Self, std::sync::Arc<WriteMark>) {
        let mark = std::sync::Arc::new(WriteMark::default());
        let marker = Self {
            mark: std::sync::Arc::clone(&mark),
            busy: Cell::new(false),
        };
        (marker, mark)
    }
}

/// A chunk shared by the streams of a group (empty once handed to the user).
pub(super) struct ChunkCell<U> {
    /// What every write reads, apart from the lock's line.
    open: Open,
    state: Mutex<CellState<U>>,
    /// Per presence flag: the generation of the live claim whose range starts there,
    /// or another value (0, or an older generation) when none does. As long as the
    /// chunks' `present`.
    owners: Box<[AtomicU64]>,
}

#[repr(align(128))]
struct Open {
    /// The buffer of the chunk's `data` while the chunk is in the cell.
    data: AtomicPtr<u8>,
    /// The buffer of the chunk's `present` while the chunk is in the cell.
    present: AtomicPtr<u8>,
    /// Set before the chunk is taken out: no writer may start after it.
    closed: AtomicBool,
    /// Which fill of the cell this is.
    generation: AtomicU64,
}

struct CellState<U> {
    chunk: Option<Chunk<U>>,
    /// Claims of this generation, live while their owner word says so: ranges of
    /// `data` and of `present`.
    claims: Vec<(Range<usize>, Range<usize>)>,
}

/// What [`ChunkCell::place`] made of a heap's placement.
pub(super) enum Placed {
    /// The heap may write its ranges.
    Claimed(Claim),
    /// The ranges do not fit the chunk, or overlap those of a live heap.
    Refused,
    /// The cell no longer holds that chunk.
    Gone,
}

fn overlap(a: &Range<usize>, b: &Range<usize>) -> bool {
    !a.is_empty() && !b.is_empty() && a.start < b.end && b.start < a.end
}

impl<U> ChunkCell<U> {
    /// A cell holding `chunk` (and, once refilled, chunks with as many presence flags).
    pub(super) fn new(chunk: Chunk<U>) -> Self {
        let cell = Self {
            open: Open {
                data: AtomicPtr::new(std::ptr::null_mut()),
                present: AtomicPtr::new(std::ptr::null_mut()),
                closed: AtomicBool::new(true),
                generation: AtomicU64::new(0),
            },
            state: Mutex::new(CellState {
                chunk: None,
                claims: Vec::new(),
            }),
            owners: (0..chunk.present.len())
                .map(|_| AtomicU64::new(0))
                .collect(),
        };
        if cell.fill(chunk).is_err() {
            unreachable!("the owners are as many as the chunk's flags");
        }
        cell
    }

    fn lock(&self) -> MutexGuard<'_, CellState<U>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn address(&self) -> usize {
        std::ptr::from_ref(self) as usize
    }

    /// Puts `chunk` into this (emptied) cell, as a new generation, and opens it to
    /// writers; gives it back when its presence flags are not as many as the cell's
    /// first chunk's.
    ///
    /// # Errors
    /// The chunk, when it does not fit the cell.
    pub(super) fn fill(&self, mut chunk: Chunk<U>) -> Result<(), Chunk<U>> {
        if chunk.present.len() != self.owners.len() {
            return Err(chunk);
        }
        let mut st = self.lock();
        // `as_mut_ptr` makes no reference to the buffers, and moving a `Vec` moves
        // only its header: the pointers stay valid while the chunk is in the cell.
        self.open
            .data
            .store(chunk.data.as_mut_ptr(), Ordering::Release);
        self.open
            .present
            .store(chunk.present.as_mut_ptr(), Ordering::Release);
        self.open.generation.fetch_add(1, Ordering::SeqCst);
        st.claims.clear();
        st.chunk = Some(chunk);
        self.open.closed.store(false, Ordering::SeqCst);
        Ok(())
    }

    /// Takes the chunk out once every write under way has ended (`None` if it was
    /// taken already). No write starts afterwards. `marks` are those of every member
    /// that may hold a claim here.
    pub(super) fn take(&self, marks: &[std::sync::Arc<WriteMark>]) -> Option<Chunk<U>> {
        self.open.closed.store(true, Ordering::SeqCst);
        for mark in marks {
            while mark.0.load(Ordering::SeqCst) == self.address() {
                // A writer copies one run of packets of one heap: it ends soon, and
                // it holds no lock that this thread holds.
                std::thread::yield_now();
            }
        }
        let mut st = self.lock();
        self.open
            .data
            .store(std::ptr::null_mut(), Ordering::Release);
        self.open
            .present
            .store(std::ptr::null_mut(), Ordering::Release);
        st.claims.clear();
        st.chunk.take()
    }

    /// Claims `data` bytes and `present` flags of chunk `chunk_id` for one heap, and
    /// copies `extra` to `extra_offset` of the chunk's `extra`.
    pub(super) fn place(
        &self,
        chunk_id: u64,
        data: Range<usize>,
        present: Range<usize>,
        extra: &[u8],
        extra_offset: usize,
    ) -> Placed {
        let mut st = self.lock();
        let CellState { chunk, claims } = &mut *st;
        let Some(c) = chunk
            .as_mut()
            .filter(|c| u64::try_from(c.chunk_id) == Ok(chunk_id))
        else {
            return Placed::Gone;
        };
        let extra_end = extra_offset.checked_add(extra.len());
        let fits = data.end <= c.data.len()
            && present.end <= c.present.len()
            && !present.is_empty()
            && extra_end.is_some_and(|e| e <= c.extra.len());
        if !fits {
            return Placed::Refused;
        }
        let generation = self.open.generation.load(Ordering::Relaxed);
        // Claims given back since are dropped from the list; acquiring their owner
        // words orders their writes before this heap's.
        claims.retain(|(_, p)| self.owners[p.start].load(Ordering::Acquire) == generation);
        if claims
            .iter()
            .any(|(d, p)| overlap(d, &data) || overlap(p, &present))
        {
            return Placed::Refused;
        }
        if !extra.is_empty() {
            c.extra[extra_offset..extra_offset + extra.len()].copy_from_slice(extra);
        }
        claims.push((data.clone(), present.clone()));
        self.owners[present.start].store(generation, Ordering::Relaxed);
        Placed::Claimed(Claim {
            cell: self.address(),
            generation,
            data,
            present,
        })
    }

    /// Frees `claim`'s ranges (nothing when its chunk has left the cell), without the
    /// lock.
    pub(super) fn release(&self, claim: Claim) {
        if claim.cell == self.address() {
            // Live present ranges do not overlap, and none is empty: the start names
            // the claim. Release: the claim's writes (ended, as no writer borrows it
            // now) happen before a `place` that sees the word cleared.
            let _ = self.owners[claim.present.start].compare_exchange(
                claim.generation,
                0,
                Ordering::Release,
                Ordering::Relaxed,
            );
        }
    }

    /// Starts writing `claim`'s ranges, marking the cell with `marker` (the claiming
    /// member's); `None` when the claim is not of this cell's current chunk, once the
    /// chunk is closed, or while another writer of `marker` lives.
    pub(super) fn writer<'a>(&'a self, claim: &'a Claim, marker: &'a Marker) -> Option<Writer<'a>> {
        if claim.cell != self.address() || marker.busy.replace(true) {
            return None;
        }
        let mark = &marker.mark.0;
        mark.store(self.address(), Ordering::SeqCst);
        // Once the chunk is seen open here, `take` waits for the mark to clear; the
        // generation read after it is that of the fill that opened it (or a later
        // one, which the claim's does not match).
        let open = !self.open.closed.load(Ordering::SeqCst)
            && self.open.generation.load(Ordering::SeqCst) == claim.generation;
        if !open {
            mark.store(0, Ordering::Release);
            marker.busy.set(false);
            return None;
        }
        Some(Writer {
            claim,
            marker,
            data: self.open.data.load(Ordering::Acquire),
            present: self.open.present.load(Ordering::Acquire),
        })
    }
}

/// A heap's ranges of one generation of a cell: no other live claim overlaps them.
/// Made only by [`ChunkCell::place`]; give it back with [`ChunkCell::release`].
#[derive(Debug)]
pub(super) struct Claim {
    cell: usize,
    generation: u64,
    data: Range<usize>,
    present: Range<usize>,
}

/// Writes of one claim while the chunk cannot leave its cell.
pub(super) struct Writer<'a> {
    claim: &'a Claim,
    marker: &'a Marker,
    data: *mut u8,
    present: *mut u8,
}

impl Writer<'_> {
    /// Copies `payload` to `offset` bytes into the claimed range of `data`. Returns
    /// false, writing nothing, when it would pass the range's end.
    pub(super) fn copy(&mut self, offset: usize, payload: &[u8]) -> bool {
        let range = &self.claim.data;
        if !offset
            .checked_add(payload.len())
            .is_some_and(|end| end <= range.len())
        {
            return false;
        }
        // SAFETY: `data` is the buffer of the chunk's `data` of the claim's generation
        // (`writer` checked it), which stays where it is, unreferenced by anyone else,
        // until `take`, and `take` waits for this writer (the module's handshake).
        // `place` checked that the claimed range lies in the buffer and overlaps no
        // other live claim of the generation, and the bytes written lie in the range
        // (checked above), so no other reference or write touches them meanwhile.
        let dst = unsafe {
            std::slice::from_raw_parts_mut(self.data.add(range.start + offset), payload.len())
        };
        copy_payload(dst, payload);
        true
    }

    /// Sets flag `index` of the claimed range of `present` to 1. Returns false,
    /// writing nothing, when `index` is past the range.
    pub(super) fn set_present(&mut self, index: usize) -> bool {
        let range = &self.claim.present;
        if index >= range.len() {
            return false;
        }
        // SAFETY: as in `copy`: the flag lies in this writer's claimed range of the
        // chunk's `present` buffer, which stays valid until `take` waits for us.
        unsafe { self.present.add(range.start + index).write(1) };
        true
    }
}

impl Drop for Writer<'_> {
    fn drop(&mut self) {
        self.marker.mark.0.store(0, Ordering::Release);
        self.marker.busy.set(false);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    const ID: u64 = 5;

    fn chunk(id: u64) -> Chunk<()> {
        let mut chunk = Chunk::new(64, 4, 8);
        chunk.chunk_id = id as i64;
        chunk
    }

    fn claim(placed: Placed) -> Claim {
        match placed {
            Placed::Claimed(c) => c,
            Placed::Refused => panic!("refused"),
            Placed::Gone => panic!("gone"),
        }
    }

    #[test]
    fn claims_write_their_ranges_and_the_taken_chunk_holds_them() {
        let cell = ChunkCell::new(chunk(ID));
        let (marker, mark) = Marker::new();
        let a = claim(cell.place(ID, 0..16, 0..1, &[7, 7], 2));
        let b = claim(cell.place(ID, 16..32, 1..2, &[], 0));
        let mut w = cell.writer(&a, &marker).expect("open");
        assert!(cell.writer(&b, &marker).is_none(), "one writer per marker");
        assert!(w.copy(4, &[1; 12]));
        assert!(!w.copy(5, &[1; 12]), "past the claim's end");
        assert!(w.set_present(0));
        assert!(!w.set_present(1), "past the claim's flags");
        drop(w);
        assert!(cell.writer(&b, &marker).expect("open").copy(0, &[2; 16]));
        let c = cell.take(&[mark]).expect("chunk");
        assert_eq!(c.data[..4], [0; 4]);
        assert_eq!(c.data[4..16], [1; 12]);
        assert_eq!(c.data[16..32], [2; 16]);
        assert_eq!(c.present, [1, 0, 0, 0]);
        assert_eq!(c.extra[..4], [0, 0, 7, 7]);
        assert!(cell.writer(&a, &marker).is_none(), "closed after take");
        assert!(matches!(cell.place(ID, 32..48, 2..3, &[], 0), Placed::Gone));
    }

    #[test]
    fn a_claim_never_writes_into_the_next_chunk_of_its_cell() {
        let cell = ChunkCell::new(chunk(ID));
        let other = ChunkCell::new(chunk(ID));
        let (marker, mark) = Marker::new();
        let a = claim(cell.place(ID, 0..16, 0..1, &[], 0));
        assert!(other.writer(&a, &marker).is_none(), "another cell's claim");
        cell.take(&[Arc::clone(&mark)]);
        assert!(cell.fill(Chunk::new(64, 5, 8)).is_err(), "other flags");
        assert!(cell.fill(chunk(ID + 1)).is_ok());
        assert!(
            cell.writer(&a, &marker).is_none(),
            "an older generation's claim"
        );
        cell.release(a);
        let _b = claim(cell.place(ID + 1, 0..16, 0..1, &[], 0));
        assert!(matches!(
            cell.place(ID + 1, 8..9, 1..2, &[], 0),
            Placed::Refused
        ));
    }

    #[test]
    fn overlapping_or_outside_placements_are_refused_until_the_claim_goes() {
        let cell = ChunkCell::new(chunk(ID));
        let a = claim(cell.place(ID, 0..16, 0..1, &[], 0));
        assert!(matches!(
            cell.place(ID, 8..24, 1..2, &[], 0),
            Placed::Refused
        ));
        assert!(matches!(
            cell.place(ID, 16..32, 0..1, &[], 0),
            Placed::Refused
        ));
        assert!(matches!(
            cell.place(ID, 60..68, 1..2, &[], 0),
            Placed::Refused
        ));
        assert!(matches!(
            cell.place(ID, 16..32, 1..5, &[], 0),
            Placed::Refused
        ));
        assert!(matches!(
            cell.place(ID, 16..32, 1..1, &[], 0),
            Placed::Refused
        ));
        assert!(matches!(
            cell.place(ID, 16..32, 1..2, &[1], 8),
            Placed::Refused
        ));
        assert!(matches!(
            cell.place(ID + 1, 16..32, 1..2, &[], 0),
            Placed::Gone
        ));
        // An empty data range overlaps nothing.
        let _empty = claim(cell.place(ID, 4..4, 1..2, &[], 0));
        cell.release(a);
        let _b = claim(cell.place(ID, 8..24, 0..1, &[], 0));
    }

    #[test]
    fn a_heap_placed_over_a_released_claim_writes_after_it() {
        // Under Miri this checks that a release without the lock orders the released
        // heap's writes before those of a heap placed over its bytes on another thread.
        let cell = ChunkCell::new(chunk(ID));
        let first = claim(cell.place(ID, 0..16, 0..1, &[], 0));
        let (m1, mark1) = Marker::new();
        let (m2, mark2) = Marker::new();
        std::thread::scope(|s| {
            let cell = &cell;
            s.spawn(move || {
                assert!(cell.writer(&first, &m1).expect("open").copy(0, &[1; 16]));
                cell.release(first);
            });
            s.spawn(move || {
                let second = loop {
                    match cell.place(ID, 8..24, 1..2, &[], 0) {
                        Placed::Claimed(c) => break c,
                        Placed::Refused => std::thread::yield_now(),
                        Placed::Gone => panic!("gone"),
                    }
                };
                assert!(cell.writer(&second, &m2).expect("open").copy(0, &[2; 16]));
                cell.release(second);
            });
        });
        let c = cell.take(&[mark1, mark2]).expect("chunk");
        assert_eq!(c.data[..8], [1; 8]);
        assert_eq!(c.data[8..24], [2; 16]);
    }

    #[test]
    fn concurrent_writers_of_disjoint_claims_and_a_taker() {
        // Under Miri this checks the handshake and the disjoint raw writes.
        let cell = ChunkCell::new(chunk(ID));
        let claims: Vec<_> = (0..4)
            .map(|i| claim(cell.place(ID, i * 16..i * 16 + 16, i..i + 1, &[], 0)))
            .collect();
        let (markers, marks): (Vec<_>, Vec<_>) = (0..4).map(|_| Marker::new()).unzip();
        std::thread::scope(|s| {
            for ((i, c), marker) in claims.iter().enumerate().zip(markers) {
                let cell = &cell;
                s.spawn(move || {
                    for k in 0..4 {
                        if let Some(mut w) = cell.writer(c, &marker) {
                            assert!(w.copy(k * 4, &[i as u8 + 1; 4]));
                            w.set_present(0);
                        }
                    }
                });
            }
            s.spawn(|| {
                let c = cell.take(&marks).expect("chunk");
                // Whatever was written before the take is whole per write.
                for (i, quad) in c.data.chunks(4).enumerate() {
                    let v = quad[0];
                    assert!(quad.iter().all(|&b| b == v));
                    assert!(v == 0 || usize::from(v) == i / 4 + 1);
                }
            });
        });
    }
}
