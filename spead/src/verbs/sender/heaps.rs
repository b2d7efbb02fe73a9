//! Heaps through the sender with spead2's stream semantics: the `max_heaps` queue, the
//! rate limit, and each heap reported once all its packets completed.

use verbs_api::Context;

use super::state::{InFlight, Sender};
use super::types::{limiter_of, HeapSent, SendHeapsError, SendStreamConfig, MAX_SGE};
use crate::send::{Clock, GroupMode, HeapGroup, HeapReference, Part, SendError};
use crate::verbs::error::VerbsError;

impl<C: Context> Sender<C> {
    /// Sets `max_heaps` and the rate (spead2's `stream_config`), with a fresh rate
    /// limiter.
    ///
    /// # Errors
    /// [`VerbsError::Config`] for `max_heaps` 0 ("max_heaps must be at least 1", as
    /// spead2), a negative or non-finite rate, a burst of 0 or a ratio below 1; or when
    /// heaps are in flight.
    pub fn set_stream_config(&mut self, config: SendStreamConfig) -> Result<(), VerbsError> {
        let bad = |m: String| Err(VerbsError::Config(m));
        if config.max_heaps == 0 {
            return bad("max_heaps must be at least 1".into());
        }
        if !config.rate.is_finite() || config.rate < 0.0 {
            return bad(format!(
                "rate {} is not a finite non-negative number",
                config.rate
            ));
        }
        if config.burst_size == 0 {
            return bad("burst_size must be at least 1".into());
        }
        if !config.burst_rate_ratio.is_finite() || config.burst_rate_ratio < 1.0 {
            return bad(format!(
                "burst_rate_ratio {} is below 1",
                config.burst_rate_ratio
            ));
        }
        if self.heaps_in_flight > 0 {
            return bad("the stream settings cannot change while heaps are in flight".into());
        }
        self.config = config;
        self.limiter = limiter_of(&config);
        Ok(())
    }

    /// Heaps queued by [`Sender::send_heaps`] whose packets have not all completed.
    pub fn heaps_in_flight(&self) -> usize {
        self.heaps_in_flight
    }

    /// The heaps completed since the last call, in the order they completed.
    pub fn take_completed(&mut self) -> std::vec::Drain<'_, HeapSent> {
        self.completed.drain(..)
    }

    /// Queues a group of heaps as spead2's `async_send_heaps` does and posts all their
    /// packets (interleaved per `mode`), paced by the rate limiter on `clock`. Returns
    /// once every packet is posted; the heaps stay in flight until their completions
    /// come back (see [`Sender::take_completed`], [`Sender::drain`]).
    ///
    /// # Errors
    /// [`SendHeapsError::QueueFull`] when the group does not fit beside the heaps in
    /// flight (nothing is sent); [`SendError::SubstreamOutOfRange`] and other
    /// packetizing errors (nothing is sent); verbs errors.
    pub fn send_heaps(
        &mut self,
        heaps: &[HeapReference<'_>],
        mode: GroupMode,
        clock: &mut dyn Clock,
    ) -> Result<(), SendHeapsError> {
        if heaps.is_empty() {
            return Ok(());
        }
        let substreams = self.substreams();
        if let Some(h) = heaps.iter().find(|h| h.substream >= substreams) {
            return Err(SendError::SubstreamOutOfRange {
                substream: h.substream,
                substreams,
            }
            .into());
        }
        let mut group = HeapGroup::new(heaps, self.max_size, mode)?;
        // What the CQ holds now frees its place in the queue (one poll, no wait).
        if self.posted > 0 {
            self.reap(None)?;
        }
        if self.heaps_in_flight + heaps.len() > self.config.max_heaps {
            return Err(SendHeapsError::QueueFull {
                in_flight: self.heaps_in_flight,
                asked: heaps.len(),
                max_heaps: self.config.max_heaps,
            });
        }
        if self.posted == 0 && self.pending == 0 {
            // As spead2 when its queue ran empty: idle time is not caught up.
            self.limiter.resume(clock.now_ns());
        }
        let seq0 = self.first_seq + self.in_flight.len() as u64;
        for h in heaps {
            self.in_flight.push_back(InFlight {
                sent: HeapSent {
                    cnt: h.cnt,
                    substream: h.substream,
                    bytes: 0,
                    ok: true,
                },
                outstanding: 0,
                cut: false,
                done: false,
            });
        }
        self.heaps_in_flight += heaps.len();
        self.stats.heaps += heaps.len() as u64;
        let cut = self.cut_group(&mut group, heaps, seq0, clock);
        // Heaps of the group already retired are gone from the front of the queue.
        for seq in seq0.max(self.first_seq)..seq0 + heaps.len() as u64 {
            let f = &mut self.in_flight[(seq - self.first_seq) as usize];
            f.cut = true;
            // A group cut short: its heaps are reported failed once what was posted
            // has completed.
            f.sent.ok &= cut.is_ok();
        }
        let posted = self.post_pending();
        // A heap whose completions all came back while it was being cut.
        self.retire(seq0, heaps.len());
        cut?;
        posted?;
        Ok(())
    }

    /// Cuts every packet of `group` into slots and posts them in batches, paced by the
    /// rate limiter.
    fn cut_group(
        &mut self,
        group: &mut HeapGroup<'_>,
        heaps: &[HeapReference<'_>],
        seq0: u64,
        clock: &mut dyn Clock,
    ) -> Result<(), SendHeapsError> {
        let mut parts: Vec<Part<'_>> = Vec::with_capacity(MAX_SGE);
        let group_len = heaps.len();
        loop {
            if (0..group_len).all(|i| group.is_done(i)) {
                break;
            }
            if let Some(at) = self.limiter.wait_until(clock.now_ns()) {
                self.stats.rate_waits += 1;
                self.post_pending()?;
                clock.sleep_until(at);
                continue;
            }
            let pos = self.take_slot()?;
            let (headers, max_size) = (self.headers, self.max_size);
            let slot = self.pool.slot_mut(&mut self.tokens[pos]);
            let Some((prefix, index)) =
                group.next_packet_parts(&mut slot[headers..headers + max_size], &mut parts)?
            else {
                self.give_back_slot();
                break;
            };
            let seq = seq0 + index as u64;
            let substream = heaps[index].substream;
            let (len, gathered) = self.gather(pos, prefix, &parts);
            self.finish_slot(pos, len, substream, seq);
            self.stats.gathered_bytes += gathered as u64;
            self.limiter.sent(len);
            let f = &mut self.in_flight[(seq - self.first_seq) as usize];
            f.outstanding += 1;
            f.cut = group.is_done(index);
            if self.pending >= self.target_batch {
                self.post_pending()?;
            }
        }
        Ok(())
    }

    /// Reports the heaps `from..from + count` (sequence numbers) that are cut and have
    /// nothing outstanding, and drops finished heaps from the front of the queue.
    pub(super) fn retire(&mut self, from: u64, count: usize) {
        for seq in from.max(self.first_seq)..from + count as u64 {
            let Some(f) = self.in_flight.get_mut((seq - self.first_seq) as usize) else {
                break;
            };
            if !f.done && f.cut && f.outstanding == 0 {
                f.done = true;
                self.completed.push(f.sent);
                self.heaps_in_flight -= 1;
                self.stats.heaps_completed += 1;
            }
        }
        while self.in_flight.front().is_some_and(|f| f.done) {
            self.in_flight.pop_front();
            self.first_seq += 1;
        }
    }
}
