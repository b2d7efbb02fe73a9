//! The sender's state: the slot ring, what each slot holds, the heaps in flight, the
//! user's regions; and its plain accessors.

use std::collections::VecDeque;
use std::time::Duration;

use verbs_api::helpers::Endpoint;
use verbs_api::pool::{SlotPool, SlotToken};
use verbs_api::{Completion, Context, Sge};

use super::types::{HeapSent, SendStreamConfig, SenderStats, MAX_SGE};
use crate::send::RateLimiter;
use crate::verbs::frame::HeaderTemplate;

/// Most requests in one post call.
pub(super) const MAX_CHUNK: usize = 64;
/// Tag in the high half of a signaled request's `wr_id` (the low half counts the batch).
pub(super) const WR_TAG: u64 = 0x5350_4541 << 32;
/// A slot not holding a packet of a heap of [`Sender::send_heaps`].
pub(super) const NO_HEAP: u64 = u64::MAX;
/// How long a wait for send completions may last before the sender gives up.
pub(super) const COMPLETION_WAIT: Duration = Duration::from_secs(10);

pub(super) enum Mode<A> {
    /// One header template per endpoint (substream).
    Raw {
        templates: Vec<HeaderTemplate>,
        offload: bool,
    },
    /// One address handle and Q_Key per endpoint.
    Ud { dests: Vec<(A, u32)> },
}

/// What a slot holds while it is queued or posted.
#[derive(Debug, Clone, Copy)]
pub(super) struct SlotMeta {
    pub(super) sge: [Sge; MAX_SGE],
    pub(super) nsge: usize,
    pub(super) substream: usize,
    /// SPEAD bytes of the packet.
    pub(super) bytes: usize,
    /// Sequence number of its heap, or [`NO_HEAP`].
    pub(super) heap: u64,
}

/// A heap of [`Sender::send_heaps`] not yet completed.
#[derive(Debug, Clone, Copy)]
pub(super) struct InFlight {
    pub(super) sent: HeapSent,
    /// Packets posted or queued and not completed.
    pub(super) outstanding: usize,
    /// Every packet of the heap has been cut.
    pub(super) cut: bool,
    pub(super) done: bool,
}

/// A memory region the user registered for zero-copy sends.
pub(super) struct Region<M> {
    pub(super) start: usize,
    pub(super) len: usize,
    pub(super) mr: M,
}

/// A verbs send transport to one or more multicast endpoints (one substream each); see
/// the module docs.
pub struct Sender<C: Context> {
    pub(super) mode: Mode<C::Ah>,
    pub(super) pool: SlotPool<C>,
    /// The pool's slots, by ring position.
    pub(super) tokens: Vec<SlotToken>,
    pub(super) meta: Vec<SlotMeta>,
    /// Oldest posted slot.
    pub(super) head: usize,
    /// Slots posted and not completed.
    pub(super) posted: usize,
    /// Slots filled and not posted yet (they follow the posted ones).
    pub(super) pending: usize,
    /// User regions; dropped (deregistered) before the endpoint's PD, like the pool.
    pub(super) regions: Vec<Region<C::Mr>>,
    pub(super) ep: Endpoint<C>,
    pub(super) wcs: Box<[Completion]>,
    pub(super) headers: usize,
    pub(super) max_size: usize,
    /// Packets per signaled request.
    pub(super) target_batch: usize,
    pub(super) config: SendStreamConfig,
    pub(super) limiter: RateLimiter,
    pub(super) in_flight: VecDeque<InFlight>,
    /// Sequence number of `in_flight[0]`.
    pub(super) first_seq: u64,
    pub(super) heaps_in_flight: usize,
    pub(super) completed: Vec<HeapSent>,
    pub(super) stats: SenderStats,
}

impl<C: Context> std::fmt::Debug for Sender<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sender")
            .field("stats", &self.stats)
            .field("slots", &self.tokens.len())
            .field("regions", &self.regions.len())
            .finish()
    }
}

impl<C: Context> Sender<C> {
    /// Counters.
    pub fn stats(&self) -> SenderStats {
        self.stats
    }

    /// Largest SPEAD packet this sender takes.
    pub fn max_size(&self) -> usize {
        self.max_size
    }

    /// Send slots.
    pub fn slots(&self) -> usize {
        self.tokens.len()
    }

    /// Substreams (endpoints).
    pub fn substreams(&self) -> usize {
        match &self.mode {
            Mode::Raw { templates, .. } => templates.len(),
            Mode::Ud { dests } => dests.len(),
        }
    }

    /// The stream settings in use.
    pub fn stream_config(&self) -> SendStreamConfig {
        self.config
    }
}
