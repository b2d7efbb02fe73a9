//! Shared-memory frame rings between the fabric and a joined process: one memfd (made and
//! sealed by the fabric, passed in its welcome) holding two single-producer,
//! single-consumer rings of whole frames, one each way.
//!
//! A ring is a 128-byte header (the producer's `head` and count of frames written on one
//! cache line, the consumer's `tail`, `waiting` flag and count of frames read on another)
//! and a data area of `cap` bytes, a power of two.
//! A record is 16 bytes (frame length `u32`, flags `u32`, the fabric's index `u64`, all
//! little-endian), then the frame, padded to 8 bytes; the one flag, [`SEALED`], says the
//! sending NIC sealed the frame (see [`Producer::push_record`]); a record never wraps: when it does
//! not fit before the end, a length of `u32::MAX` there says "go on at the start".
//! Positions are byte counts that only grow.
//!
//! Each side keeps its own position (the producer its head, the consumer its tail) and
//! reads the other's from the header, checking it: a peer that writes garbage into the
//! shared memory gets [`RingError::Corrupt`], never a crash. The memfd is sealed against
//! shrinking, so no access past its end can fault.
//!
//! Wake-ups: a consumer about to sleep sets `waiting` and looks again; a producer that
//! finds `waiting` set after publishing clears it and rings the peer's doorbell (a message
//! on the socket). Both use sequentially consistent atomics, so a record published while
//! the consumer went to sleep is either seen by its second look or rung for.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use super::wire::{MAX_FRAME, MIN_FRAME};

/// Bytes of a ring's header.
const HEADER: usize = 128;
const HEAD_AT: usize = 0;
/// The producer's count of frames written (for the fabric's summary: the fabric keeps a
/// mapping of the rings it hands two processes, see `server::pairs`).
const WRITTEN_AT: usize = 8;
const TAIL_AT: usize = 64;
const WAITING_AT: usize = 72;
/// The consumer's count of frames read.
const READ_AT: usize = 80;
/// Bytes of a record's header.
const RECORD: usize = 16;
/// The length that marks "go on at the start of the data area".
const WRAP: u32 = u32::MAX;
/// A record's flag: the sending NIC sealed the frame (backend-sim's
/// `Output::Frame::sealed`: its checksums and ICRC are right by construction).
const SEALED: u32 = 1;

/// The data area of each ring by default: 4 MiB, some 460 jumbo frames.
pub const DEFAULT_CAP: usize = 4 << 20;

/// What a ring refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RingError {
    /// No room now (the consumer is behind).
    Full,
    /// The peer wrote something impossible into the shared memory.
    Corrupt(&'static str),
}

impl std::fmt::Display for RingError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RingError::Full => f.write_str("the ring is full"),
            RingError::Corrupt(why) => write!(f, "the shared ring is corrupt: {why}"),
        }
    }
}

impl std::error::Error for RingError {}

/// The mapped memfd: both rings.
#[derive(Debug)]
pub struct Region {
    base: NonNull<u8>,
    len: usize,
    cap: usize,
}

// SAFETY: the region is plain shared memory; every access goes through atomics (the
// header words) or raw byte copies of areas the SPSC protocol hands to one side at a time.
unsafe impl Send for Region {}
// SAFETY: as above.
unsafe impl Sync for Region {}

/// The memfd's size for rings of `cap` bytes.
#[must_use]
pub fn region_len(cap: usize) -> usize {
    2 * (HEADER + cap)
}

fn valid_cap(cap: usize) -> bool {
    cap.is_power_of_two() && (RECORD + MAX_FRAME + 8..=1 << 30).contains(&cap)
}

impl Region {
    /// A new sealed memfd holding two empty rings of `cap` bytes, mapped: the fabric's.
    ///
    /// # Errors
    /// `InvalidInput` for a `cap` that is not a power of two between 16 KiB and 1 GiB,
    /// or the failing call's error.
    pub fn create(cap: usize) -> io::Result<(OwnedFd, Region)> {
        if !valid_cap(cap) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("ring size {cap} is not a power of two in 16 KiB ..= 1 GiB"),
            ));
        }
        let len = region_len(cap);
        // SAFETY: the name is a NUL-terminated literal.
        let raw = unsafe {
            libc::memfd_create(
                c"verbs-emu-rings".as_ptr(),
                libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a new descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let size = libc::off_t::try_from(len).map_err(io::Error::other)?;
        // SAFETY: ftruncate and fcntl take no pointers.
        let sealed = unsafe {
            libc::ftruncate(fd.as_raw_fd(), size) == 0
                && libc::fcntl(
                    fd.as_raw_fd(),
                    libc::F_ADD_SEALS,
                    libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL,
                ) == 0
        };
        if !sealed {
            return Err(io::Error::last_os_error());
        }
        let region = Region::map_len(fd.as_fd(), len, cap)?;
        Ok((fd, region))
    }

    /// Maps a memfd the fabric passed, holding rings of `cap` bytes: the process's.
    ///
    /// # Errors
    /// `InvalidData` if `cap` is impossible or the file is smaller than the rings, or the
    /// failing call's error.
    pub fn map(fd: BorrowedFd<'_>, cap: usize) -> io::Result<Region> {
        let len = region_len(cap);
        let size = std::fs::File::from(fd.try_clone_to_owned()?)
            .metadata()?
            .len();
        if !valid_cap(cap) || size < len as u64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("rings of {cap} bytes do not fit a shared file of {size} bytes"),
            ));
        }
        Region::map_len(fd, len, cap)
    }

    fn map_len(fd: BorrowedFd<'_>, len: usize, cap: usize) -> io::Result<Region> {
        // SAFETY: a new shared mapping of `len` bytes of the file; no address is imposed.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base =
            NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap gave null"))?;
        Ok(Region { base, len, cap })
    }

    /// Each ring's data area in bytes.
    #[must_use]
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// The atomic at byte `at` of the region.
    fn u64_at(&self, at: usize) -> &AtomicU64 {
        debug_assert!(at.is_multiple_of(8) && at + 8 <= self.len);
        // SAFETY: `at` is 8-aligned inside the page-aligned mapping, which lives as long
        // as `self`; shared memory is only ever accessed atomically at these words.
        unsafe { &*self.base.as_ptr().add(at).cast::<AtomicU64>() }
    }

    fn u32_at(&self, at: usize) -> &AtomicU32 {
        debug_assert!(at.is_multiple_of(4) && at + 4 <= self.len);
        // SAFETY: as for `u64_at`, 4-aligned.
        unsafe { &*self.base.as_ptr().add(at).cast::<AtomicU32>() }
    }

    /// Copies `src` into the region at byte `at`.
    fn write(&self, at: usize, src: &[u8]) {
        assert!(at + src.len() <= self.len, "a ring write past its region");
        // SAFETY: the range is inside the mapping (checked); the SPSC protocol gives this
        // area to the producer until it publishes it.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), self.base.as_ptr().add(at), src.len())
        };
    }

    /// Replaces `out`'s contents with the `len` bytes of the region at `at`, in one copy
    /// (no zeroing first: a frame a round, the receive path's only copy out of the ring).
    fn read_into(&self, at: usize, len: usize, out: &mut Vec<u8>) {
        assert!(at + len <= self.len, "a ring read past its region");
        out.clear();
        out.reserve(len);
        // SAFETY: the range is inside the mapping (checked) and `out` has room for `len`
        // bytes (reserved), which the copy initialises before `set_len` claims them; a
        // peer writing the range meanwhile can only make the bytes garbage, which the
        // caller validates.
        unsafe {
            std::ptr::copy_nonoverlapping(self.base.as_ptr().add(at), out.as_mut_ptr(), len);
            out.set_len(len);
        }
    }

    /// The region's `len` bytes at `at`, where they lie.
    ///
    /// # Safety
    /// The caller owns the range by the ring's protocol while the slice lives, as a
    /// consumer owns a record from reading the producer's head until it publishes its
    /// tail past it (a producer that keeps to the protocol writes none of it meanwhile).
    unsafe fn slice(&self, at: usize, len: usize) -> &[u8] {
        assert!(at + len <= self.len, "a ring read past its region");
        // SAFETY: the range is inside the mapping (checked), which lives as long as
        // `self`; the caller owns it by the protocol (this function's contract). A peer
        // that breaks the protocol and writes it meanwhile can change the bytes under the
        // reader, never their length or place: the reader validates what it reads.
        unsafe { std::slice::from_raw_parts(self.base.as_ptr().add(at), len) }
    }

    /// Copies the region's bytes at `at` into `dst`.
    fn read(&self, at: usize, dst: &mut [u8]) {
        assert!(at + dst.len() <= self.len, "a ring read past its region");
        // SAFETY: the range is inside the mapping (checked); a peer writing it meanwhile
        // can only make the copy garbage, which the caller validates.
        unsafe {
            std::ptr::copy_nonoverlapping(self.base.as_ptr().add(at), dst.as_mut_ptr(), dst.len())
        };
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what `map_len` mapped; nothing refers to it any more
        // (the rings hold the region by `Arc`).
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

/// Which of the two rings. In the rings the fabric hands two processes for the frames
/// between their hosts ([`super::direct`]), `ToFabric` carries the frames of the process
/// told it is the pair's first, `FromFabric` those of the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Way {
    /// Frames a process sends to the fabric.
    ToFabric = 0,
    /// Frames the fabric sends to a process.
    FromFabric = 1,
}

impl Region {
    /// How many frames ring `way`'s producer has written and its consumer has read, as
    /// each says (peers' words: a count only, never trusted for anything else).
    #[must_use]
    pub fn counts(&self, way: Way) -> (u64, u64) {
        let base = ring_base(self, way);
        (
            self.u64_at(base + WRITTEN_AT).load(Ordering::SeqCst),
            self.u64_at(base + READ_AT).load(Ordering::SeqCst),
        )
    }
}

fn ring_base(region: &Region, way: Way) -> usize {
    way as usize * (HEADER + region.cap)
}

fn padded(len: usize) -> usize {
    RECORD + len.next_multiple_of(8)
}

/// The writing end of one ring.
#[derive(Debug)]
pub struct Producer {
    region: Arc<Region>,
    base: usize,
    head: u64,
    frames: u64,
}

impl Producer {
    /// The producer of ring `way` of a fresh `region` (an empty ring).
    #[must_use]
    pub fn new(region: Arc<Region>, way: Way) -> Self {
        let base = ring_base(&region, way);
        Producer {
            region,
            base,
            head: 0,
            frames: 0,
        }
    }

    /// Appends a frame with the fabric's `index`; returns whether the consumer sleeps
    /// and must be rung for (its `waiting` flag, now cleared).
    ///
    /// # Errors
    /// [`RingError::Full`], or [`RingError::Corrupt`] when the consumer's tail is
    /// impossible. A frame of a bad length is the caller's bug: it is refused as corrupt.
    pub fn push(&mut self, frame: &[u8], index: u64) -> Result<bool, RingError> {
        self.push_record(frame, index, false)
    }

    /// [`Producer::push`] of a frame its sending NIC `sealed` (the flag goes with it: the
    /// consumer may hand it on sealed, unsummed, as shared memory changes no bit of it).
    ///
    /// # Errors
    /// As [`Producer::push`].
    pub fn push_record(
        &mut self,
        frame: &[u8],
        index: u64,
        sealed: bool,
    ) -> Result<bool, RingError> {
        if !(MIN_FRAME..=MAX_FRAME).contains(&frame.len()) {
            return Err(RingError::Corrupt("a frame of an impossible length"));
        }
        let r = &*self.region;
        let cap = r.cap as u64;
        let tail = r.u64_at(self.base + TAIL_AT).load(Ordering::SeqCst);
        if tail > self.head || self.head - tail > cap {
            return Err(RingError::Corrupt("the consumer's tail is out of range"));
        }
        let need = padded(frame.len()) as u64;
        let pos = self.head % cap;
        let to_end = cap - pos;
        let skip = if to_end < need { to_end } else { 0 };
        if self.head + skip + need - tail > cap {
            return Err(RingError::Full);
        }
        let data = self.base + HEADER;
        if skip > 0 {
            r.write(data + pos as usize, &WRAP.to_le_bytes());
            self.head += skip;
        }
        let at = data + (self.head % cap) as usize;
        let mut hdr = [0u8; RECORD];
        hdr[..4].copy_from_slice(&(frame.len() as u32).to_le_bytes());
        if sealed {
            hdr[4..8].copy_from_slice(&SEALED.to_le_bytes());
        }
        hdr[8..].copy_from_slice(&index.to_le_bytes());
        r.write(at, &hdr);
        r.write(at + RECORD, frame);
        self.head += need;
        self.frames += 1;
        r.u64_at(self.base + WRITTEN_AT)
            .store(self.frames, Ordering::Relaxed);
        r.u64_at(self.base + HEAD_AT)
            .store(self.head, Ordering::SeqCst);
        // Read before clearing: a swap would take the consumer's cache line for writing
        // on every frame; a load shares it. Only this side clears the flag.
        let waiting = r.u32_at(self.base + WAITING_AT);
        Ok(waiting.load(Ordering::SeqCst) != 0 && waiting.swap(0, Ordering::SeqCst) != 0)
    }

    /// How far the consumer has read (its tail, a byte count that only grows; clamped to
    /// what was written, as the consumer's word is the peer's to write).
    #[must_use]
    pub fn consumed(&self) -> u64 {
        let tail = self
            .region
            .u64_at(self.base + TAIL_AT)
            .load(Ordering::SeqCst);
        tail.min(self.head)
    }

    /// Bytes written and not read yet (records and padding).
    #[must_use]
    pub fn queued(&self) -> u64 {
        self.head - self.consumed()
    }
}

/// A record a consumer found: where its frame lies in the region, its length, the bytes
/// it takes in the ring, its index and seal.
#[derive(Debug, Clone, Copy)]
struct Record {
    at: usize,
    len: usize,
    need: u64,
    index: u64,
    sealed: bool,
}

/// The reading end of one ring.
#[derive(Debug)]
pub struct Consumer {
    region: Arc<Region>,
    base: usize,
    tail: u64,
    frames: u64,
}

impl Consumer {
    /// The consumer of ring `way` of a fresh `region` (an empty ring).
    #[must_use]
    pub fn new(region: Arc<Region>, way: Way) -> Self {
        let base = ring_base(&region, way);
        Consumer {
            region,
            base,
            tail: 0,
            frames: 0,
        }
    }

    /// How far this consumer has read (a byte count that only grows).
    #[must_use]
    pub fn tail(&self) -> u64 {
        self.tail
    }

    /// How far the producer has written, as it says now (compare with [`Consumer::tail`]).
    #[must_use]
    pub fn published(&self) -> u64 {
        self.region
            .u64_at(self.base + HEAD_AT)
            .load(Ordering::SeqCst)
    }

    /// How many frames this consumer has taken.
    #[must_use]
    pub fn taken(&self) -> u64 {
        self.frames
    }

    /// Takes the next frame into `out` (replacing its contents: the one copy out of the
    /// shared memory) and returns its index; `None` when the ring is empty.
    ///
    /// # Errors
    /// [`RingError::Corrupt`] when the producer wrote something impossible; the ring is
    /// unusable then.
    pub fn pop(&mut self, out: &mut Vec<u8>) -> Result<Option<u64>, RingError> {
        Ok(self.pop_record(out)?.map(|(index, _)| index))
    }

    /// [`Consumer::pop`] that also says whether the producer marked the frame sealed
    /// ([`Producer::push_record`]; the producer's word, as every byte of the ring is).
    ///
    /// # Errors
    /// As [`Consumer::pop`].
    pub fn pop_record(&mut self, out: &mut Vec<u8>) -> Result<Option<(u64, bool)>, RingError> {
        let Some(rec) = self.next_record()? else {
            return Ok(None);
        };
        self.region.read_into(rec.at, rec.len, out);
        self.consume(rec.need);
        Ok(Some((rec.index, rec.sealed)))
    }

    /// Hands the next frame to `f` where it lies in the shared memory, with its index and
    /// seal, and takes it off the ring once `f` returns: no copy. `None` when the ring is
    /// empty.
    ///
    /// # Errors
    /// As [`Consumer::pop`].
    pub fn take<R>(
        &mut self,
        f: impl FnOnce(&[u8], u64, bool) -> R,
    ) -> Result<Option<R>, RingError> {
        let Some(rec) = self.next_record()? else {
            return Ok(None);
        };
        // SAFETY: the record is this consumer's until `consume` publishes the tail past
        // it, which happens after `f` has returned and the slice is gone.
        let frame = unsafe { self.region.slice(rec.at, rec.len) };
        let r = f(frame, rec.index, rec.sealed);
        self.consume(rec.need);
        Ok(Some(r))
    }

    /// The next record, checked (passing a wrap mark), not taken yet.
    fn next_record(&mut self) -> Result<Option<Record>, RingError> {
        let r = &*self.region;
        let cap = r.cap as u64;
        let data = self.base + HEADER;
        loop {
            let head = r.u64_at(self.base + HEAD_AT).load(Ordering::SeqCst);
            if head == self.tail {
                return Ok(None);
            }
            if head < self.tail || head - self.tail > cap {
                return Err(RingError::Corrupt("the producer's head is out of range"));
            }
            let pos = self.tail % cap;
            let mut hdr = [0u8; RECORD];
            let to_end = cap - pos;
            r.read(data + pos as usize, &mut hdr[..4]);
            let len = u32::from_le_bytes([hdr[0], hdr[1], hdr[2], hdr[3]]);
            if len == WRAP {
                if head - self.tail < to_end {
                    return Err(RingError::Corrupt("a wrap mark past the head"));
                }
                self.tail += to_end;
                continue;
            }
            let len = len as usize;
            let need = padded(len) as u64;
            if !(MIN_FRAME..=MAX_FRAME).contains(&len) {
                return Err(RingError::Corrupt("a frame of an impossible length"));
            }
            if need > to_end || need > head - self.tail {
                return Err(RingError::Corrupt(
                    "a record past the head or the ring's end",
                ));
            }
            r.read(data + pos as usize, &mut hdr);
            let mut index = [0u8; 8];
            index.copy_from_slice(&hdr[8..]);
            return Ok(Some(Record {
                at: data + pos as usize + RECORD,
                len,
                need,
                index: u64::from_le_bytes(index),
                sealed: u32::from_le_bytes([hdr[4], hdr[5], hdr[6], hdr[7]]) & SEALED != 0,
            }));
        }
    }

    /// Takes the record of `need` bytes at the tail off the ring (the producer may write
    /// there again).
    fn consume(&mut self, need: u64) {
        let r = &*self.region;
        self.tail += need;
        self.frames += 1;
        r.u64_at(self.base + READ_AT)
            .store(self.frames, Ordering::Relaxed);
        r.u64_at(self.base + TAIL_AT)
            .store(self.tail, Ordering::SeqCst);
    }

    /// Before sleeping: says so, then looks again. True if something is there after all
    /// (then do not sleep; the flag stays set, which costs the producer one doorbell).
    #[must_use]
    pub fn sleep_or_not(&self) -> bool {
        let r = &*self.region;
        r.u32_at(self.base + WAITING_AT).store(1, Ordering::SeqCst);
        r.u64_at(self.base + HEAD_AT).load(Ordering::SeqCst) != self.tail
    }
}

#[cfg(test)]
mod tests;
