//! A work-request set: a fixed group of pooled buffers that are posted together and come
//! back together, as InfinibandVerbs.jl's sets over registered buffers. The per-slot
//! padding comes from the pool ([`crate::pool::SlotPoolConfig::padding`]).

use crate::pool::{BatchRejected, SlotPool, SlotToken};
use crate::traits::Context;
use crate::{Completion, Result};

/// Tokens of a set of slots that are currently held (not posted).
#[derive(Debug, Default)]
pub struct WrSet {
    held: Vec<SlotToken>,
}

impl WrSet {
    /// Takes `n` slots from `pool` (fewer if the pool has fewer free).
    pub fn take<C: Context>(pool: &SlotPool<C>, n: usize) -> Self {
        WrSet {
            held: pool.take_n(n),
        }
    }

    /// Slots held (not posted).
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// The held tokens, e.g. to fill sends.
    pub fn tokens_mut(&mut self) -> &mut [SlotToken] {
        &mut self.held
    }

    /// Posts every held slot as a receive on `qp`, in batches of up to 32 per call.
    ///
    /// # Errors
    /// The post's refusal; the tokens not posted stay in the set.
    pub fn post_recv<C: Context>(&mut self, pool: &SlotPool<C>, qp: &C::Qp) -> Result<usize> {
        match pool.post_recv_batch(qp, self.held.drain(..)) {
            Ok(n) => Ok(n),
            Err(BatchRejected { error, tokens, .. }) => {
                self.held = tokens;
                Err(error)
            }
        }
    }

    /// Takes back the slot of a completion into the set.
    ///
    /// # Errors
    /// As [`SlotPool::complete`].
    pub fn complete<C: Context>(&mut self, pool: &SlotPool<C>, wc: &Completion) -> Result<()> {
        self.held.push(pool.complete(wc)?);
        Ok(())
    }

    /// Returns every held slot to the pool's free list.
    pub fn release<C: Context>(self, pool: &SlotPool<C>) {
        for t in self.held {
            pool.release(t);
        }
    }
}
