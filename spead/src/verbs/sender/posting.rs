//! Single packets through the sender, and posting the filled slots in signaled batches.

use verbs_api::{Context, QueuePair, SendFlags, SendOpcode, SendWr, WrDetail, MULTICAST_QPN};

use super::state::{Mode, Sender, COMPLETION_WAIT, MAX_CHUNK, NO_HEAP, WR_TAG};
use super::types::SendWithError;
use crate::send::Part;
use crate::verbs::error::VerbsError;

impl<C: Context> Sender<C> {
    /// Sends one packet that `fill` writes into a buffer of [`Sender::max_size`] bytes
    /// and whose length it returns (`None` or 0: nothing to send), to substream 0.
    /// Packets are posted in batches; call [`Sender::flush`] to post a partial batch.
    ///
    /// # Errors
    /// [`VerbsError::Config`] when `fill` claims more than the buffer; verbs errors.
    pub fn send_with<E>(
        &mut self,
        fill: impl FnOnce(&mut [u8]) -> Result<Option<usize>, E>,
    ) -> Result<Option<usize>, SendWithError<E>> {
        self.send_parts_with(&mut Vec::new(), |buf, _| fill(buf))
    }

    /// Sends one packet cut as [`Packetizer::next_packet_parts`] cuts it, to substream 0:
    /// `cut` writes the packet's first bytes (SPEAD header, item pointers) into a buffer
    /// of [`Sender::max_size`] bytes, returns their length (`None`: nothing to send),
    /// and appends the item bytes that follow to `parts` (cleared first). Parts lying
    /// in a region given to [`Sender::add_memory_region`] are gathered by the NIC from
    /// there, without a copy (when the packet needs at most [`MAX_SGE`](super::MAX_SGE) SGEs); the
    /// others are copied into the slot. The caller keeps `parts` to reuse its memory.
    /// Packets are posted in batches; call [`Sender::flush`] to post a partial batch,
    /// and [`Sender::drain`] before writing registered bytes a packet gathers from.
    ///
    /// # Errors
    /// [`VerbsError::Config`] when the packet exceeds [`Sender::max_size`]; verbs errors.
    ///
    /// [`Packetizer::next_packet_parts`]: crate::send::Packetizer::next_packet_parts
    pub fn send_parts_with<'h, E>(
        &mut self,
        parts: &mut Vec<Part<'h>>,
        cut: impl FnOnce(&mut [u8], &mut Vec<Part<'h>>) -> Result<Option<usize>, E>,
    ) -> Result<Option<usize>, SendWithError<E>> {
        let pos = self.take_slot().map_err(SendWithError::Verbs)?;
        let (headers, max_size) = (self.headers, self.max_size);
        let slot = self.pool.slot_mut(&mut self.tokens[pos]);
        parts.clear();
        let prefix = match cut(&mut slot[headers..headers + max_size], parts) {
            Ok(Some(len)) => len,
            Ok(None) => {
                self.give_back_slot();
                return Ok(None);
            }
            Err(e) => {
                self.give_back_slot();
                return Err(SendWithError::Fill(e));
            }
        };
        let total = prefix + parts.iter().map(Part::len).sum::<usize>();
        if total == 0 {
            self.give_back_slot();
            return Ok(None);
        }
        if total > self.max_size {
            self.give_back_slot();
            return Err(SendWithError::Verbs(VerbsError::Config(format!(
                "a packet of {total} bytes exceeds max_size {}",
                self.max_size
            ))));
        }
        let (len, gathered) = self.gather(pos, prefix, parts);
        self.finish_slot(pos, len, 0, NO_HEAP);
        self.stats.gathered_bytes += gathered as u64;
        if self.pending >= self.target_batch {
            self.post_pending().map_err(SendWithError::Verbs)?;
        }
        Ok(Some(len))
    }

    /// Sends a packet by copying `packet` (for callers that already have the bytes).
    ///
    /// # Errors
    /// As [`Sender::send_with`].
    pub fn send(&mut self, packet: &[u8]) -> Result<(), VerbsError> {
        self.send_with(|buf| {
            if packet.len() > buf.len() {
                return Err(VerbsError::Config(format!(
                    "a packet of {} bytes exceeds max_size {}",
                    packet.len(),
                    buf.len()
                )));
            }
            buf[..packet.len()].copy_from_slice(packet);
            Ok(Some(packet.len()))
        })
        .map(|_| ())
        .map_err(|e| match e {
            SendWithError::Fill(e) | SendWithError::Verbs(e) => e,
        })
    }

    /// Posts the packets queued so far.
    ///
    /// # Errors
    /// Verbs errors from the post.
    pub fn flush(&mut self) -> Result<(), VerbsError> {
        self.post_pending()
    }

    /// Flushes and waits until every posted packet (and so every heap) has completed.
    ///
    /// # Errors
    /// Verbs errors; [`VerbsError::Config`] when completions stop arriving.
    pub fn drain(&mut self) -> Result<(), VerbsError> {
        self.post_pending()?;
        while self.posted > 0 {
            if self.reap(Some(COMPLETION_WAIT))? == 0 {
                return Err(VerbsError::Config(
                    "send completions stopped arriving".into(),
                ));
            }
        }
        Ok(())
    }

    /// Waits until at most `heaps` heaps are in flight (what spead2_send does before
    /// queueing more when `max_heaps` are out).
    ///
    /// # Errors
    /// As [`Sender::drain`].
    pub fn wait_heaps(&mut self, heaps: usize) -> Result<(), VerbsError> {
        self.post_pending()?;
        while self.heaps_in_flight > heaps {
            if self.reap(Some(COMPLETION_WAIT))? == 0 {
                return Err(VerbsError::Config(
                    "send completions stopped arriving".into(),
                ));
            }
        }
        Ok(())
    }

    /// Posts the pending slots, in requests of at most `target_batch` packets, the
    /// last of each signaled with the request's packet count as its `wr_id`.
    pub(super) fn post_pending(&mut self) -> Result<(), VerbsError> {
        let n = self.tokens.len();
        let mut flags = SendFlags::empty();
        if let Mode::Raw { offload: true, .. } = self.mode {
            flags |= SendFlags::IP_CSUM;
        }
        while self.pending > 0 {
            let count = self.pending.min(self.target_batch);
            let first = (self.head + self.posted) % n;
            // Requests are built on the stack, in an array no longer than the batch needs
            // (a paced sender posts one packet at a time).
            match count {
                1 => self.post_chunk::<1>(first, count, flags),
                2..=8 => self.post_chunk::<8>(first, count, flags),
                _ => self.post_chunk::<MAX_CHUNK>(first, count, flags),
            }?;
            self.stats.batches += 1;
            self.pending -= count;
            self.posted += count;
        }
        Ok(())
    }

    /// Posts the `count` (at most `N`) packets from ring position `first`, only the last
    /// signaled, its `wr_id` the count.
    fn post_chunk<const N: usize>(
        &self,
        first: usize,
        count: usize,
        flags: SendFlags,
    ) -> Result<(), VerbsError> {
        let n = self.tokens.len();
        let wrs: [SendWr<'_, C::Ah>; N] = std::array::from_fn(|k| {
            let m = &self.meta[(first + k.min(count - 1)) % n];
            let detail = match &self.mode {
                Mode::Raw { .. } => WrDetail::None,
                Mode::Ud { dests } => WrDetail::Ud {
                    ah: &dests[m.substream].0,
                    remote_qpn: MULTICAST_QPN,
                    remote_qkey: dests[m.substream].1,
                },
            };
            let last = k + 1 == count;
            SendWr {
                wr_id: if last { WR_TAG | count as u64 } else { 0 },
                sg_list: &m.sge[..m.nsge],
                opcode: SendOpcode::Send,
                send_flags: if last {
                    flags | SendFlags::SIGNALED
                } else {
                    flags
                },
                imm_data: 0,
                detail,
            }
        });
        // SAFETY: every SGE lies in the slot pool's registered memory (the slots
        // `first..first + count`, which nothing writes until their completion frees
        // them) or in a region the user registered, whose bytes `add_memory_region`'s
        // contract keeps allocated and unwritten until then.
        unsafe { self.ep.qp.post_send(&wrs[..count]) }?;
        Ok(())
    }
}
