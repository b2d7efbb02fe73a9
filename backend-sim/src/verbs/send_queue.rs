//! Send-queue slots, and the completions the NIC makes after a post returns.
//!
//! rxe executes a send when it is posted: rdma-core's provider writes the WQEs into the
//! ring and rings the doorbell, and the kernel's requester runs in the calling process
//! (`rxe_post_send`, drivers/infiniband/sw/rxe/rxe_verbs.c). The completion of a UD or UC
//! WQE is made later, by the completer task the requester schedules once the packet is
//! out (`rxe_xmit_packet`, rxe_net.c: a non-RC WQE is marked done and
//! `rxe_run_task(&qp->comp.task, 1)`). Until the completer has taken a WQE it holds its
//! slot, so a post list longer than the free slots fails at the first request that finds
//! the ring full (`post_one_send`, providers/rxe/rxe.c: ENOMEM, `bad_wr` that request;
//! the ones before it stay posted). Here that completer runs at the simulation's next
//! step, before any event of the fabric and at the post's virtual time: a post never
//! returns with its completion made, and the first empty poll after it finds it. A QP in
//! ERR is flushed the same way (the requester flushes, the completer completes), so its
//! flushes hold slots too. Sends the NIC executed complete as executed, also when the QP
//! enters ERR before the completer runs.
//!
//! mlx5 frees a slot later still: its send queue's tail moves when the CQE of a WQE at or
//! after it is polled (rdma-core providers/mlx5/cq.c, `mlx5_poll_one`: `wq->tail =
//! wq->wqe_head[idx] + 1`; a post that finds no room fails ENOMEM in qp.c,
//! `mlx5_wq_overflow`). So an unsignaled WQE keeps its slot until a later signaled
//! WQE's CQE has been polled. The mlx5 personality keeps that count.

use std::collections::VecDeque;
use verbs_api::Completion;

use super::personality::Personality;

/// A send the NIC has executed (or flushed) and will complete.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Executed {
    /// The completion it ends in.
    pub wc: Completion,
    /// Whether it makes a CQE (signaled, or not a success).
    pub reported: bool,
}

/// The part of a QP's send queue the NIC keeps outside the RC engine: UD and RAW sends
/// (and flushes of any QP) waiting for the completer, and the mlx5 slots that wait for a
/// poll.
#[derive(Debug, Default, Clone)]
pub(crate) struct SendQueue {
    pending: VecDeque<Executed>,
    /// The QP is on the world's list of completer work for the next step.
    due: bool,
    /// A send failed: the requester executes nothing after it (what follows is flushed).
    stopped: bool,
    /// mlx5: completed WQEs whose slots wait for the poll of a CQE at or after them.
    held: u32,
    /// mlx5: WQEs completed without a CQE since the last one with.
    unreported: u32,
}

impl SendQueue {
    /// Slots taken: WQEs waiting for their completion, and (mlx5) completed ones not yet
    /// reclaimed by a poll.
    pub fn in_use(&self) -> usize {
        self.pending.len() + self.held as usize
    }

    /// Whether an earlier send failed and the requester stopped.
    pub fn stopped(&self) -> bool {
        self.stopped
    }

    /// The requester stops: what is posted from now on is flushed.
    pub fn stop(&mut self) {
        self.stopped = true;
    }

    /// Queues an executed send. True when the QP is to be put on the completer's list
    /// (it was not on it).
    pub fn push(&mut self, e: Executed) -> bool {
        self.pending.push_back(e);
        !std::mem::replace(&mut self.due, true)
    }

    /// The completer takes the QP off its list; [`SendQueue::pop`] then gives what it
    /// completes.
    pub fn take_due(&mut self) {
        self.due = false;
    }

    /// The next send to complete.
    pub fn pop(&mut self) -> Option<Executed> {
        self.pending.pop_front()
    }

    /// A WQE leaves the NIC's queue, with a CQE (`reported`) or without. Returns how many
    /// slots polling that CQE gives back (mlx5; rxe's slot is free at once: 0).
    pub fn retire(&mut self, personality: Personality, reported: bool) -> u32 {
        if personality != Personality::Mlx5 {
            return 0;
        }
        self.held += 1;
        if reported {
            let frees = self.unreported + 1;
            self.unreported = 0;
            frees
        } else {
            self.unreported += 1;
            0
        }
    }

    /// A CQE that frees `n` slots was polled (mlx5).
    pub fn reclaim(&mut self, n: u32) {
        self.held = self.held.saturating_sub(n);
    }

    /// RESET: the ring starts empty (mlx5's `mlx5_init_qp_indices`; rxe's
    /// `rxe_qp_reset`); nothing is left to complete.
    pub fn reset(&mut self) {
        *self = SendQueue::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use verbs_api::WcStatus;

    fn sent(wr_id: u64, reported: bool) -> Executed {
        Executed {
            wc: Completion {
                wr_id,
                status: WcStatus::Success,
                ..Completion::default()
            },
            reported,
        }
    }

    #[test]
    fn the_completer_takes_everything_queued_before_it_in_order() {
        let mut q = SendQueue::default();
        assert!(q.push(sent(1, true)));
        assert!(!q.push(sent(2, true)), "already on the completer's list");
        assert_eq!(q.in_use(), 2);
        q.take_due();
        assert_eq!(q.pop().map(|e| e.wc.wr_id), Some(1));
        assert_eq!(q.pop().map(|e| e.wc.wr_id), Some(2));
        assert!(q.pop().is_none());
        assert!(
            q.push(sent(3, true)),
            "the next send goes on the list again"
        );
    }

    #[test]
    fn reset_empties_the_ring() {
        let mut q = SendQueue::default();
        assert!(q.push(sent(1, true)));
        q.stop();
        q.reset();
        assert!(!q.stopped());
        assert_eq!(q.in_use(), 0);
        assert!(q.pop().is_none());
        assert!(q.push(sent(2, true)));
    }

    #[test]
    fn rxe_frees_a_slot_at_completion_mlx5_when_a_later_cqe_is_polled() {
        let mut q = SendQueue::default();
        assert_eq!(q.retire(Personality::Rxe, false), 0);
        assert_eq!(q.retire(Personality::Rxe, true), 0);
        assert_eq!(q.in_use(), 0);
        // mlx5: two unsignaled WQEs, then a signaled one whose CQE frees all three.
        assert_eq!(q.retire(Personality::Mlx5, false), 0);
        assert_eq!(q.retire(Personality::Mlx5, false), 0);
        assert_eq!(q.in_use(), 2);
        assert_eq!(q.retire(Personality::Mlx5, true), 3);
        assert_eq!(q.in_use(), 3);
        q.reclaim(3);
        assert_eq!(q.in_use(), 0);
    }
}
