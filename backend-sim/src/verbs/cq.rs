//! Completion queues and completion channels: polling that moves virtual time on an
//! empty queue, one-shot arming, waiting in virtual time.

use crate::verbs::objects::{err, lock, Res};
use crate::verbs::personality::Personality;
use crate::verbs::world::{Arm, World};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;
use verbs_api::{Completion, CompletionChannel, CompletionQueue, ErrorKind, Result};

/// A completion channel.
#[derive(Debug)]
pub struct SimChannel {
    pub(crate) res: Arc<Res>,
}

impl CompletionChannel for SimChannel {
    /// Waits in virtual time: runs the simulation until an event arrives on this channel,
    /// the timeout passes, or nothing is left that could ever produce one.
    fn get_cq_event(&self, timeout: Option<Duration>) -> Result<Option<u32>> {
        let mut w = lock(&self.res.world);
        let now = w.fabric.now();
        let deadline = timeout.map_or(u64::MAX, |d| {
            now.saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        });
        loop {
            if let Some(h) = w
                .channels
                .get_mut(&self.res.id)
                .and_then(|c| c.events.pop_front())
            {
                return Ok(Some(h));
            }
            if !w.advance(deadline) {
                return Ok(None);
            }
        }
    }
}

/// A completion queue.
#[derive(Debug)]
pub struct SimCq {
    pub(crate) res: Arc<Res>,
    pub(crate) cqe: AtomicU32,
    pub(crate) _channel: Option<Arc<Res>>,
}

impl SimCq {
    /// How many completions wait in the CQ now, without letting virtual time pass (a
    /// poll of an empty CQ takes the simulation's next event first).
    #[must_use]
    pub fn queued(&self) -> usize {
        lock(&self.res.world)
            .cqs
            .get(&self.res.id)
            .map_or(0, |c| c.entries.len())
    }
}

impl CompletionQueue for SimCq {
    fn handle(&self) -> u32 {
        self.res.id
    }

    fn cqe(&self) -> u32 {
        self.cqe.load(Ordering::Relaxed)
    }

    /// As rxe resizes (`rxe_resize_cq` in drivers/infiniband/sw/rxe/rxe_verbs.c): the
    /// size checked as at creation and against the completions waiting
    /// (`rxe_cq_chk_attr`, rxe_cq.c: EINVAL when `cqe` is below their count), then the
    /// ring rebuilt at the rounded size with them in order (`rxe_queue_resize`,
    /// rxe_queue.c). mlx5's driver does not compare with the completions waiting
    /// (`mlx5_ib_resize_cq`); what the device does with more than fit is not modelled:
    /// the mlx5 personality refuses as rxe does, as the man page requires.
    fn resize(&self, cqe: u32) -> Result<()> {
        const OP: &str = "ibv_resize_cq";
        let mut w = lock(&self.res.world);
        let Some(c) = w.cqs.get_mut(&self.res.id) else {
            return Err(err(ErrorKind::InvalidState, OP, "CQ destroyed"));
        };
        let max = c.personality.device_attr(0).max_cqe;
        // The device first finishes the work due by now (the completions of sends just
        // posted), so the count is of the completions the CQ holds at this instant.
        let now = w.fabric.now();
        while w.advance(now) {}
        let Some(c) = w.cqs.get_mut(&self.res.id) else {
            return Err(err(ErrorKind::InvalidState, OP, "CQ destroyed"));
        };
        let waiting = c.entries.len();
        if cqe == 0 || cqe > max {
            return Err(err(
                ErrorKind::InvalidArgument,
                OP,
                format!("cqe {cqe} outside 1..={max}"),
            ));
        }
        if (cqe as usize) < waiting {
            return Err(err(
                ErrorKind::InvalidArgument,
                OP,
                format!("cqe {cqe} is below the {waiting} completions in the CQ"),
            ));
        }
        c.cqe = Personality::queue_depth(cqe);
        self.cqe.store(c.cqe, Ordering::Relaxed);
        Ok(())
    }

    /// Moves completions out; when none is there, lets the simulation take its next event
    /// first (so a busy-poll loop makes progress in virtual time) and looks again.
    fn poll(&self, wc: &mut [Completion]) -> Result<usize> {
        let mut w = lock(&self.res.world);
        let id = self.res.id;
        let n = drain_cq(&mut w, id, wc)?;
        if n > 0 {
            return Ok(n);
        }
        // Found nothing (also when given no room, a common way to just let time pass):
        // take the next event, then look again.
        w.advance(u64::MAX);
        drain_cq(&mut w, id, wc)
    }

    /// Arms the CQ. A CQ without a channel may be armed too (the kernel accepts it; no
    /// event can be delivered). Arming solicited-only keeps an arm for the next completion
    /// in place (`rxe_req_notify_cq` changes the arm only when it is not already NEXT).
    fn req_notify(&self, solicited_only: bool) -> Result<()> {
        let mut w = lock(&self.res.world);
        if let Some(cq) = w.cqs.get_mut(&self.res.id) {
            cq.arm = match (cq.arm, solicited_only) {
                (Arm::Next, _) | (_, false) => Arm::Next,
                (_, true) => Arm::Solicited,
            };
        }
        Ok(())
    }

    fn ack_events(&self, n: u32) {
        let mut w = lock(&self.res.world);
        if let Some(cq) = w.cqs.get_mut(&self.res.id) {
            cq.unacked = cq.unacked.saturating_sub(n);
        }
    }
}

/// Moves up to `wc.len()` completions out of CQ `id`; a polled send CQE gives its QP the
/// send-queue slots it holds back (mlx5, see `send_queue`).
pub(crate) fn drain_cq(w: &mut World, id: u32, wc: &mut [Completion]) -> Result<usize> {
    let World { cqs, qps, .. } = w;
    let Some(cq) = cqs.get_mut(&id) else {
        return Err(err(ErrorKind::InvalidState, "ibv_poll_cq", "CQ destroyed"));
    };
    if cq.broken {
        return Err(err(
            ErrorKind::Io,
            "ibv_poll_cq",
            "CQ overrun: the CQ is in error",
        ));
    }
    let n = wc.len().min(cq.entries.len());
    for (slot, c) in wc.iter_mut().zip(cq.entries.drain(..n)) {
        *slot = c.wc;
        if c.frees > 0 {
            if let Some(qp) = qps.get_mut(&c.wc.qp_num) {
                qp.sq.reclaim(c.frees);
            }
        }
    }
    Ok(n)
}
