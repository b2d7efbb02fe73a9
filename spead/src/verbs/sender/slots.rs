//! The ring of send slots: taking a free one, recording its packet, and the
//! completions that free them.

use std::time::Duration;

use verbs_api::{CompletionQueue, Context};

use super::state::{Mode, Sender, COMPLETION_WAIT, NO_HEAP, WR_TAG};
use crate::verbs::error::VerbsError;

impl<C: Context> Sender<C> {
    /// The ring position of a free slot, now counted as pending (waits for completions
    /// when every slot is out).
    pub(super) fn take_slot(&mut self) -> Result<usize, VerbsError> {
        while self.posted + self.pending == self.tokens.len() {
            if self.pending > 0 {
                self.post_pending()?;
            }
            if self.reap(Some(COMPLETION_WAIT))? == 0 {
                return Err(VerbsError::Config(
                    "no send slot came back: completions stopped".into(),
                ));
            }
        }
        let pos = (self.head + self.posted + self.pending) % self.tokens.len();
        self.pending += 1;
        Ok(pos)
    }

    /// Returns the slot [`Sender::take_slot`] just gave out.
    pub(super) fn give_back_slot(&mut self) {
        self.pending -= 1;
    }

    /// Writes the frame headers of slot `pos` for `substream` and records the packet.
    pub(super) fn finish_slot(&mut self, pos: usize, len: usize, substream: usize, heap: u64) {
        if let Mode::Raw { templates, offload } = &mut self.mode {
            let slot = self.pool.slot_mut(&mut self.tokens[pos]);
            templates[substream].write(slot, len, *offload);
        }
        let m = &mut self.meta[pos];
        m.substream = substream;
        m.heap = heap;
        self.stats.packets += 1;
        self.stats.bytes += len as u64;
    }

    /// Takes send completions (waiting up to `timeout`; `None`: one poll of the CQ, no
    /// wait), frees their batches' slots and retires the heaps whose packets are all
    /// done. Returns the completions taken.
    pub(super) fn reap(&mut self, timeout: Option<Duration>) -> Result<usize, VerbsError> {
        let got = match timeout {
            Some(t) => self.ep.wait(&mut self.wcs, 10, Some(t))?,
            None => self.ep.cq.poll(&mut self.wcs)?,
        };
        let n = self.tokens.len();
        let mut lowest = None::<u64>;
        for i in 0..got {
            let wc = self.wcs[i];
            if wc.wr_id & !0xffff_ffff != WR_TAG {
                continue;
            }
            let ok = wc.is_success();
            if !ok {
                self.stats.completion_errors += 1;
            }
            let count = (wc.wr_id & 0xffff_ffff) as usize;
            for _ in 0..count.min(self.posted) {
                let m = self.meta[self.head];
                if m.heap != NO_HEAP {
                    let f = &mut self.in_flight[(m.heap - self.first_seq) as usize];
                    f.outstanding -= 1;
                    if ok {
                        f.sent.bytes += m.bytes as u64;
                    } else {
                        f.sent.ok = false;
                    }
                    lowest = Some(lowest.map_or(m.heap, |l| l.min(m.heap)));
                }
                self.head = (self.head + 1) % n;
                self.posted -= 1;
            }
        }
        if let Some(from) = lowest {
            let span = (self.first_seq + self.in_flight.len() as u64 - from) as usize;
            self.retire(from, span);
        }
        Ok(got)
    }
}
