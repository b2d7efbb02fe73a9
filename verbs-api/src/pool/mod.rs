//! The safe buffer layer: memory registered once as a pool of fixed-size slots.
//!
//! Posting a receive or a send consumes a [`SlotToken`]; the completion hands it back
//! ([`SlotPool::complete`]); reading or writing a slot's bytes needs the token. A token is
//! neither `Clone` nor `Copy`, so a slot can't be posted twice or read while the device
//! may write it: the soundness hole of raw scatter-gather posting is closed by
//! construction, and users of this layer write no `unsafe`. (spead2 and DPDK manage their
//! receive buffers the same way.)
//!
//! Each slot may have `padding` bytes in front of its data: receives land at the start of
//! the padding, so a UD receive's 40-byte GRH fills a 40-byte padding and the payload
//! starts at the slot's data; sends go from the data.
//!
//! ```
//! use verbs_api::pool::{SlotPool, SlotToken};
//! use verbs_api::Context;
//! fn fill_and_post<C: Context>(pool: &SlotPool<C>, qp: &C::Qp, mut token: SlotToken) {
//!     pool.slot_mut(&mut token)[0] = 1;
//!     if let Err(rejected) = pool.post_recv(qp, token) {
//!         pool.release(rejected.token);
//!     }
//! }
//! ```
//!
//! `wr_id`s are `(lkey << 32) | slot index`, so completions for other work requests are
//! told apart ([`SlotPool::owns`]) and a forged or repeated completion is rejected.

use std::cell::{Cell, RefCell};
use std::fmt;

mod config;

pub use config::{SendParams, SlotPoolConfig};

use crate::traits::{Context, MemoryRegion, QueuePair, SharedReceiveQueue};
use crate::wr::{RecvWr, SendFlags, SendWr, Sge};
use crate::{AccessFlags, Completion, Error, ErrorKind, Result};

/// How many work requests one post call carries at most (built on the stack).
const CHUNK: usize = 32;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SlotState {
    /// In the free list.
    Free,
    /// A token is out.
    Held,
    /// Posted to a queue: the device owns it.
    Posted,
}

/// The right to one slot. Not `Clone`, not `Copy`: whoever holds it alone may read or
/// write the slot or post it. Dropping a token without posting or releasing it leaves the
/// slot unusable until the pool is dropped.
#[must_use = "a dropped token loses its slot; post it or release it"]
#[derive(Debug, PartialEq, Eq)]
pub struct SlotToken {
    pool: u32,
    index: u32,
}

impl SlotToken {
    /// The slot's index in its pool.
    pub fn index(&self) -> usize {
        self.index as usize
    }
}

/// A post that was refused, with the token handed back so its slot is not lost.
#[derive(Debug)]
pub struct Rejected {
    /// Why.
    pub error: Error,
    /// The token that was not posted.
    pub token: SlotToken,
}

/// A batch post that was partly refused: the tokens not posted come back.
#[derive(Debug)]
pub struct BatchRejected {
    /// Why.
    pub error: Error,
    /// How many of the batch were posted before the refusal.
    pub posted: usize,
    /// The tokens that were not posted.
    pub tokens: Vec<SlotToken>,
}

impl fmt::Display for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "slot {} not posted: {}", self.token.index, self.error)
    }
}

impl std::error::Error for Rejected {}

impl From<Rejected> for Error {
    fn from(r: Rejected) -> Error {
        r.error
    }
}

impl From<BatchRejected> for Error {
    fn from(r: BatchRejected) -> Error {
        r.error
    }
}

/// Registered memory divided into slots; see the module docs.
pub struct SlotPool<C: Context> {
    mr: C::Mr,
    cfg: SlotPoolConfig,
    stride: usize,
    id: u32,
    states: Box<[Cell<SlotState>]>,
    /// For a slot posted in a send batch: the slot posted before it in the same batch
    /// ([`NO_SLOT`] for the first), so the batch's one signaled completion returns all.
    batch_prev: Box<[Cell<u32>]>,
    free: RefCell<Vec<u32>>,
}

const NO_SLOT: u32 = u32::MAX;

impl<C: Context> fmt::Debug for SlotPool<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SlotPool")
            .field("cfg", &self.cfg)
            .field("lkey", &self.id)
            .field("free", &self.free.borrow().len())
            .finish()
    }
}

fn invalid(msg: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidArgument, "SlotPool::new", msg)
}

impl<C: Context> SlotPool<C> {
    /// Allocates and registers the pool's memory on `ctx` in `pd`. Every slot starts free.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`] for a zero slot size or slot count, or an alignment
    /// that is not a power of two; [`ErrorKind::LimitExceeded`] when the pool is larger
    /// than the device's `max_mr_size` (or than `usize`/`u32` indexing allows); the
    /// backend's registration errors.
    pub fn new(ctx: &C, pd: &C::Pd, cfg: &SlotPoolConfig) -> Result<Self> {
        if cfg.slot_size == 0 {
            return Err(invalid("slot size must be at least 1 byte"));
        }
        if cfg.slots == 0 {
            return Err(invalid("a pool needs at least one slot"));
        }
        if !cfg.align.is_power_of_two() {
            return Err(invalid(format!(
                "alignment {} is not a power of two",
                cfg.align
            )));
        }
        let too_big = || {
            Error::new(
                ErrorKind::LimitExceeded,
                "SlotPool::new",
                format!(
                    "{} slots of {}+{} bytes do not fit",
                    cfg.slots, cfg.padding, cfg.slot_size
                ),
            )
        };
        let raw = cfg.padding.checked_add(cfg.slot_size).ok_or_else(too_big)?;
        let stride = raw
            .checked_next_multiple_of(cfg.align)
            .ok_or_else(too_big)?;
        let total = stride.checked_mul(cfg.slots).ok_or_else(too_big)?;
        if u32::try_from(cfg.slots).is_err() || u32::try_from(raw).is_err() {
            return Err(too_big());
        }
        let max = ctx.query_device()?.max_mr_size;
        if total as u64 > max {
            return Err(Error::new(
                ErrorKind::LimitExceeded,
                "SlotPool::new",
                format!("a pool of {total} bytes exceeds the device's max_mr_size of {max}"),
            ));
        }
        let mr = ctx.alloc_mr(pd, total, cfg.access | AccessFlags::LOCAL_WRITE)?;
        let id = mr.lkey();
        Ok(SlotPool {
            mr,
            cfg: *cfg,
            stride,
            id,
            states: (0..cfg.slots).map(|_| Cell::new(SlotState::Free)).collect(),
            batch_prev: (0..cfg.slots).map(|_| Cell::new(NO_SLOT)).collect(),
            free: RefCell::new((0..cfg.slots as u32).rev().collect()),
        })
    }

    /// The pool's shape.
    pub fn config(&self) -> &SlotPoolConfig {
        &self.cfg
    }

    /// The memory region behind the pool.
    pub fn mr(&self) -> &C::Mr {
        &self.mr
    }

    /// Number of slots.
    pub fn len(&self) -> usize {
        self.cfg.slots
    }

    /// Whether the pool has no slots (never: `new` refuses that).
    pub fn is_empty(&self) -> bool {
        self.cfg.slots == 0
    }

    /// Slots in the free list.
    pub fn available(&self) -> usize {
        self.free.borrow().len()
    }

    /// Slots posted to a queue.
    pub fn posted(&self) -> usize {
        self.states
            .iter()
            .filter(|s| s.get() == SlotState::Posted)
            .count()
    }

    /// Takes a free slot.
    pub fn take(&self) -> Option<SlotToken> {
        let index = self.free.borrow_mut().pop()?;
        self.states[index as usize].set(SlotState::Held);
        Some(SlotToken {
            pool: self.id,
            index,
        })
    }

    /// Takes up to `n` free slots.
    pub fn take_n(&self, n: usize) -> Vec<SlotToken> {
        std::iter::from_fn(|| self.take()).take(n).collect()
    }

    /// Returns a slot to the free list.
    ///
    /// # Panics
    /// Never for a token of this pool; a token of another pool is ignored with a debug
    /// assertion.
    pub fn release(&self, token: SlotToken) {
        if self.is_mine(&token) {
            self.states[token.index as usize].set(SlotState::Free);
            self.free.borrow_mut().push(token.index);
        } else {
            debug_assert!(false, "token of another pool released");
        }
    }

    fn is_mine(&self, t: &SlotToken) -> bool {
        t.pool == self.id && (t.index as usize) < self.cfg.slots
    }

    fn check(&self, t: &SlotToken) {
        assert!(
            self.is_mine(t),
            "slot token used with a pool it does not belong to"
        );
    }

    fn start(&self, index: u32) -> usize {
        index as usize * self.stride
    }

    /// The `wr_id` the pool posts slot `t` with.
    pub fn wr_id(&self, t: &SlotToken) -> u64 {
        (u64::from(self.id) << 32) | u64::from(t.index)
    }

    /// Whether a completion's `wr_id` names one of this pool's slots.
    pub fn owns(&self, wr_id: u64) -> bool {
        (wr_id >> 32) as u32 == self.id && ((wr_id & 0xffff_ffff) as usize) < self.cfg.slots
    }

    /// A slot's data bytes (`slot_size` of them, after the padding).
    ///
    /// # Panics
    /// When the token belongs to another pool.
    pub fn slot(&self, t: &SlotToken) -> &[u8] {
        self.check(t);
        let off = self.start(t.index) + self.cfg.padding;
        // SAFETY: the range lies inside the region (offset + slot_size <= stride * slots)
        // and the region's memory lives as long as `self`. The token is unique and not
        // posted (posting consumes it), so the device does not write this range while the
        // returned borrow (tied to the token) lives; other slots' ranges are disjoint.
        unsafe { std::slice::from_raw_parts(self.mr.as_ptr().add(off), self.cfg.slot_size) }
    }

    /// A slot's data bytes, writable (to fill a send).
    ///
    /// # Panics
    /// When the token belongs to another pool.
    #[allow(clippy::mut_from_ref)] // exclusivity comes from `&mut SlotToken`, not `&self`
    pub fn slot_mut(&self, t: &mut SlotToken) -> &mut [u8] {
        self.check(t);
        let off = self.start(t.index) + self.cfg.padding;
        // SAFETY: as in `slot`; the `&mut` borrow of the unique token makes this the only
        // reference to the slot's range for the borrow's lifetime.
        unsafe { std::slice::from_raw_parts_mut(self.mr.as_ptr().add(off), self.cfg.slot_size) }
    }

    /// A slot's padding bytes (e.g. the GRH of a UD receive).
    ///
    /// # Panics
    /// When the token belongs to another pool.
    pub fn padding(&self, t: &SlotToken) -> &[u8] {
        self.check(t);
        let off = self.start(t.index);
        // SAFETY: as in `slot`, for the padding range in front of the data.
        unsafe { std::slice::from_raw_parts(self.mr.as_ptr().add(off), self.cfg.padding) }
    }

    /// The data a receive completion delivered into slot `t`: `byte_len` minus the
    /// padding, clipped to the slot.
    pub fn received<'a>(&'a self, t: &'a SlotToken, wc: &Completion) -> &'a [u8] {
        let n = (wc.byte_len as usize)
            .saturating_sub(self.cfg.padding)
            .min(self.cfg.slot_size);
        &self.slot(t)[..n]
    }

    /// The SGE a receive into slot `t` uses (padding and data).
    pub fn recv_sge(&self, t: &SlotToken) -> Sge {
        self.check(t);
        Sge {
            addr: self.mr.addr() + self.start(t.index) as u64,
            length: (self.cfg.padding + self.cfg.slot_size) as u32,
            lkey: self.mr.lkey(),
        }
    }

    /// The SGE a send of the first `len` data bytes of slot `t` uses.
    pub fn send_sge(&self, t: &SlotToken, len: usize) -> Sge {
        self.check(t);
        Sge {
            addr: self.mr.addr() + (self.start(t.index) + self.cfg.padding) as u64,
            length: len.min(self.cfg.slot_size) as u32,
            lkey: self.mr.lkey(),
        }
    }

    /// Posts one receive into slot `token` on `qp`.
    ///
    /// # Errors
    /// The QP's refusal ([`ErrorKind::InvalidState`] in RESET, [`ErrorKind::QueueFull`]),
    /// with the token handed back.
    pub fn post_recv(&self, qp: &C::Qp, token: SlotToken) -> Result<(), Rejected> {
        self.post_recv_batch(qp, std::iter::once(token))
            .map(|_| ())
            .map_err(|mut b| Rejected {
                error: b.error,
                token: b.tokens.pop().expect("the refused token comes back"),
            })
    }

    /// Posts receives into every slot of `tokens`, up to 32 per post call, allocating
    /// nothing unless a post is refused.
    ///
    /// # Errors
    /// The first refusal, with every token not posted handed back.
    pub fn post_recv_batch(
        &self,
        qp: &C::Qp,
        tokens: impl IntoIterator<Item = SlotToken>,
    ) -> Result<usize, BatchRejected> {
        // SAFETY: the SGEs come from `recv_sge` and lie in `self.mr`, which lives as long
        // as the pool; by the MemoryRegion contract the device stops writing it when it
        // is dropped. The slots' tokens are consumed, so no Rust reference to their bytes
        // exists until `complete` hands a token back.
        self.post_recv_with(tokens, |wrs| unsafe { qp.post_recv(wrs) })
    }

    /// Posts receives into every slot of `tokens` on a shared receive queue.
    ///
    /// # Errors
    /// As [`SlotPool::post_recv_batch`].
    pub fn post_srq_recv_batch(
        &self,
        srq: &C::Srq,
        tokens: impl IntoIterator<Item = SlotToken>,
    ) -> Result<usize, BatchRejected> {
        // SAFETY: as in `post_recv_batch`.
        self.post_recv_with(tokens, |wrs| unsafe { srq.post_recv(wrs) })
    }

    fn post_recv_with(
        &self,
        tokens: impl IntoIterator<Item = SlotToken>,
        mut post: impl FnMut(&[RecvWr<'_>]) -> Result<()>,
    ) -> Result<usize, BatchRejected> {
        let mut tokens = tokens.into_iter();
        let mut posted = 0;
        loop {
            let mut sges = [Sge::default(); CHUNK];
            let mut ids = [0u32; CHUNK];
            let mut n = 0;
            for t in tokens.by_ref() {
                self.check(&t);
                sges[n] = self.recv_sge(&t);
                ids[n] = t.index;
                n += 1;
                if n == CHUNK {
                    break;
                }
            }
            if n == 0 {
                return Ok(posted);
            }
            let wrs: [RecvWr<'_>; CHUNK] = std::array::from_fn(|i| RecvWr {
                wr_id: (u64::from(self.id) << 32) | u64::from(ids[i]),
                sg_list: std::slice::from_ref(&sges[i]),
            });
            for &i in &ids[..n] {
                self.states[i as usize].set(SlotState::Posted);
            }
            if let Err(error) = post(&wrs[..n]) {
                let ok = error.bad_wr().unwrap_or(0).min(n);
                posted += ok;
                let mut back = Vec::new();
                for &i in &ids[ok..n] {
                    self.states[i as usize].set(SlotState::Held);
                    back.push(SlotToken {
                        pool: self.id,
                        index: i,
                    });
                }
                back.extend(tokens);
                return Err(BatchRejected {
                    error,
                    posted,
                    tokens: back,
                });
            }
            posted += n;
        }
    }

    /// Posts a send of the first `len` bytes of slot `token`.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`] when `len` exceeds the slot; the QP's refusal; the
    /// token comes back either way.
    pub fn post_send(
        &self,
        qp: &C::Qp,
        token: SlotToken,
        len: usize,
        params: SendParams<'_, C::Ah>,
    ) -> Result<(), Rejected> {
        let SendParams {
            opcode,
            flags,
            imm_data,
            detail,
        } = params;
        self.check(&token);
        if len > self.cfg.slot_size {
            let error = Error::new(
                ErrorKind::InvalidArgument,
                "SlotPool::post_send",
                format!(
                    "send of {len} bytes from a {}-byte slot",
                    self.cfg.slot_size
                ),
            );
            return Err(Rejected { error, token });
        }
        let sge = [self.send_sge(&token, len)];
        let wr = SendWr {
            wr_id: self.wr_id(&token),
            sg_list: &sge,
            opcode,
            send_flags: flags,
            imm_data,
            detail,
        };
        self.states[token.index as usize].set(SlotState::Posted);
        self.batch_prev[token.index as usize].set(NO_SLOT);
        // SAFETY: the SGE lies in `self.mr` (see `post_recv_batch`); the token is
        // consumed, so nothing references the slot until its completion comes back.
        match unsafe { qp.post_send(&[wr]) } {
            Ok(()) => Ok(()),
            Err(error) => {
                self.states[token.index as usize].set(SlotState::Held);
                Err(Rejected { error, token })
            }
        }
    }

    /// Posts a batch of sends, one work request per `(token, len)`, with only the last
    /// one signaled: the device then writes one completion per batch, and
    /// [`SlotPool::complete_batch`] hands back every slot of the batch from it (a send
    /// queue completes in order, so the earlier requests are done too). Up to 32 requests
    /// go in one post call; allocation-free unless a post is refused.
    ///
    /// `params.flags` applies to every request (SIGNALED is managed here).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`] when a length exceeds the slot (nothing of that
    /// chunk is posted); the QP's refusal. The tokens not posted come back. When the
    /// device refuses part of a chunk, the part it took has no signaled request: move
    /// the QP to ERR, and its flush completions hand those slots back.
    pub fn post_send_batch(
        &self,
        qp: &C::Qp,
        items: impl IntoIterator<Item = (SlotToken, usize)>,
        params: SendParams<'_, C::Ah>,
    ) -> Result<usize, BatchRejected> {
        let mut items = items.into_iter().peekable();
        let mut posted = 0;
        let flags = params.flags - SendFlags::SIGNALED;
        while items.peek().is_some() {
            let mut sges = [Sge::default(); CHUNK];
            let mut ids = [0u32; CHUNK];
            let mut n = 0;
            while n < CHUNK {
                let Some((t, len)) = items.next() else { break };
                self.check(&t);
                if len > self.cfg.slot_size {
                    let error = Error::new(
                        ErrorKind::InvalidArgument,
                        "SlotPool::post_send_batch",
                        format!(
                            "send of {len} bytes from a {}-byte slot",
                            self.cfg.slot_size
                        ),
                    );
                    let mut tokens: Vec<SlotToken> = ids[..n]
                        .iter()
                        .map(|&index| SlotToken {
                            pool: self.id,
                            index,
                        })
                        .collect();
                    tokens.push(t);
                    tokens.extend(items.map(|(t, _)| t));
                    return Err(BatchRejected {
                        error,
                        posted,
                        tokens,
                    });
                }
                sges[n] = self.send_sge(&t, len);
                ids[n] = t.index;
                n += 1;
            }
            let wrs: [SendWr<'_, C::Ah>; CHUNK] = std::array::from_fn(|i| SendWr {
                wr_id: (u64::from(self.id) << 32) | u64::from(ids[i]),
                sg_list: std::slice::from_ref(&sges[i]),
                opcode: params.opcode,
                send_flags: if i + 1 == n {
                    flags | SendFlags::SIGNALED
                } else {
                    flags
                },
                imm_data: params.imm_data,
                detail: params.detail,
            });
            for (k, &i) in ids[..n].iter().enumerate() {
                self.states[i as usize].set(SlotState::Posted);
                self.batch_prev[i as usize].set(if k == 0 { NO_SLOT } else { ids[k - 1] });
            }
            // SAFETY: as in `post_send`: every SGE lies in `self.mr`, and the tokens are
            // consumed until `complete_batch` hands them back.
            if let Err(error) = unsafe { qp.post_send(&wrs[..n]) } {
                let ok = error.bad_wr().unwrap_or(0).min(n);
                posted += ok;
                let mut back = Vec::new();
                for &i in &ids[ok..n] {
                    self.states[i as usize].set(SlotState::Held);
                    back.push(SlotToken {
                        pool: self.id,
                        index: i,
                    });
                }
                back.extend(items.map(|(t, _)| t));
                return Err(BatchRejected {
                    error,
                    posted,
                    tokens: back,
                });
            }
            posted += n;
        }
        Ok(posted)
    }

    /// Hands back every slot of the send batch whose signaled completion is `wc` (see
    /// [`SlotPool::post_send_batch`]), appending the tokens to `out` in posting order. For
    /// a completion of a single send it hands back that one slot.
    ///
    /// # Errors
    /// As [`SlotPool::complete`].
    pub fn complete_batch(&self, wc: &Completion, out: &mut Vec<SlotToken>) -> Result<usize> {
        let last = self.complete(wc)?;
        let start = out.len();
        let mut prev = self.batch_prev[last.index as usize].replace(NO_SLOT);
        out.push(last);
        while prev != NO_SLOT {
            let state = &self.states[prev as usize];
            if state.get() != SlotState::Posted {
                break;
            }
            state.set(SlotState::Held);
            out.push(SlotToken {
                pool: self.id,
                index: prev,
            });
            prev = self.batch_prev[prev as usize].replace(NO_SLOT);
        }
        out[start..].reverse();
        Ok(out.len() - start)
    }

    /// Hands back the token of the slot a completion names (whatever its status: a
    /// flushed receive gives its slot back too).
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`] when the completion is not for this pool;
    /// [`ErrorKind::InvalidState`] when that slot is not posted (a repeated or forged
    /// completion), so a slot can't be handed out twice.
    pub fn complete(&self, wc: &Completion) -> Result<SlotToken> {
        if !self.owns(wc.wr_id) {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                "SlotPool::complete",
                format!("wr_id {:#x} is not a slot of this pool", wc.wr_id),
            ));
        }
        let index = (wc.wr_id & 0xffff_ffff) as u32;
        let state = &self.states[index as usize];
        if state.get() != SlotState::Posted {
            return Err(Error::new(
                ErrorKind::InvalidState,
                "SlotPool::complete",
                format!("slot {index} is not posted"),
            ));
        }
        state.set(SlotState::Held);
        Ok(SlotToken {
            pool: self.id,
            index,
        })
    }
}
