//! A receive loop driven by a callback: wait for completions, hand them (with their
//! bytes) to the callback, repost every slot that completed. The callback returns a
//! negative number to stop; on a timeout it is called with zero completions, so it can
//! keep time or give up.
//!
//! After setup the loop allocates nothing: completions go into one reused slice and the
//! tokens into one reused vector.

use std::time::Duration;

use super::builder::Endpoint;
use crate::pool::{SlotPool, SlotToken};
use crate::traits::Context;
use crate::{Completion, Result};

/// How the loop waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RepostOptions {
    /// Polls before waiting on the channel (spead2's `max_poll`, default 10).
    pub max_poll: u32,
    /// How long one wait may last; `None` waits indefinitely.
    pub timeout: Option<Duration>,
    /// Completions taken per poll (default 64).
    pub batch: usize,
}

impl Default for RepostOptions {
    fn default() -> Self {
        RepostOptions {
            max_poll: 10,
            timeout: Some(Duration::from_millis(100)),
            batch: 64,
        }
    }
}

/// What the loop did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RepostStats {
    /// Callback invocations.
    pub rounds: u64,
    /// Completions seen.
    pub completions: u64,
    /// Receives posted again.
    pub reposted: u64,
    /// Waits that ended with nothing.
    pub timeouts: u64,
    /// Completions with an error status (their slots go back to the free list).
    pub errors: u64,
}

/// One round's completions and the bytes of their slots.
#[derive(Debug)]
pub struct RecvBatch<'a, C: Context> {
    pool: &'a SlotPool<C>,
    wcs: &'a [Completion],
    tokens: &'a [Option<SlotToken>],
}

impl<'a, C: Context> RecvBatch<'a, C> {
    /// The completions (empty on a timeout).
    pub fn completions(&self) -> &'a [Completion] {
        self.wcs
    }

    /// Number of completions.
    pub fn len(&self) -> usize {
        self.wcs.len()
    }

    /// True on a timeout round.
    pub fn is_empty(&self) -> bool {
        self.wcs.is_empty()
    }

    /// Each completion with the received bytes of its slot (`None` for completions that
    /// are not this pool's receives).
    pub fn iter(&self) -> impl Iterator<Item = (&'a Completion, Option<&'a [u8]>)> + '_ {
        let pool = self.pool;
        self.wcs
            .iter()
            .zip(self.tokens.iter())
            .map(move |(wc, t)| (wc, t.as_ref().map(|t| pool.received(t, wc))))
    }
}

/// Runs the loop on `ep` with receive slots from `pool` until `callback` returns a
/// negative number. Slots the caller posted before are reposted as they complete;
/// slots of failed completions go back to the pool's free list.
///
/// # Errors
/// A backend error from polling or waiting, or a refused repost.
pub fn repost_loop<C: Context>(
    ep: &Endpoint<C>,
    pool: &SlotPool<C>,
    opts: &RepostOptions,
    mut callback: impl FnMut(&RecvBatch<'_, C>) -> i32,
) -> Result<RepostStats> {
    let mut wcs = vec![Completion::default(); opts.batch.max(1)];
    let mut tokens: Vec<Option<SlotToken>> = Vec::with_capacity(wcs.len());
    let mut stats = RepostStats::default();
    loop {
        let n = ep.wait(&mut wcs, opts.max_poll, opts.timeout)?;
        if n == 0 {
            stats.timeouts += 1;
        }
        stats.completions += n as u64;
        for wc in &wcs[..n] {
            let owned = wc.is_recv() || !wc.is_success();
            tokens.push(if owned && pool.owns(wc.wr_id) {
                Some(pool.complete(wc)?)
            } else {
                None
            });
        }
        stats.rounds += 1;
        let verdict = callback(&RecvBatch {
            pool,
            wcs: &wcs[..n],
            tokens: &tokens,
        });
        let mut good = 0u64;
        let reposts = tokens.drain(..).zip(&wcs[..n]).filter_map(|(t, wc)| {
            let t = t?;
            if wc.is_success() {
                good += 1;
                Some(t)
            } else {
                stats.errors += 1;
                pool.release(t);
                None
            }
        });
        let posted = pool
            .post_recv_batch(&ep.qp, reposts)
            .map_err(crate::Error::from)?;
        debug_assert_eq!(posted as u64, good);
        stats.reposted += posted as u64;
        if verdict < 0 {
            return Ok(stats);
        }
    }
}
