//! Completions and async events: CQEs with overrun and notification handling, and the
//! send-queue completer that retires what the NIC executed at post time.

use super::World;
use super::{vtag, Arm, Cqe};
use crate::verbs::personality::Personality;
use crate::verbs::send_queue::Executed;
use verbs_api::{AsyncEvent, Completion, EventElement, EventType, QpState, WcStatus};

impl World {
    pub fn async_event(&mut self, ctx: u32, event_type: EventType, element: EventElement) {
        let el = match element {
            EventElement::Cq(h) | EventElement::Qp(h) | EventElement::Srq(h) => u64::from(h),
            EventElement::Port(p) => u64::from(p),
            EventElement::Device => 0,
        };
        self.fabric.trace_event(
            vtag::ASYNC,
            &[self.fabric.now(), u64::from(event_type.as_raw()), el],
        );
        if let Some(c) = self.ctxs.get_mut(&ctx) {
            c.events.push_back(AsyncEvent {
                event_type,
                element,
            });
        }
    }

    /// Adds a completion to `cq`, with overrun and notification handling.
    pub fn complete(&mut self, cq: u32, wc: Completion, solicited: bool) {
        self.push_cqe(cq, wc, solicited, 0);
    }

    /// [`World::complete`] of a CQE whose poll gives `frees` send-queue slots back to its
    /// QP (mlx5).
    pub(super) fn push_cqe(&mut self, cq: u32, wc: Completion, solicited: bool, frees: u32) {
        self.fabric.trace_event(
            vtag::COMPLETION,
            &[
                self.fabric.now(),
                u64::from(cq),
                wc.wr_id,
                u64::from(wc.status.as_raw()),
                u64::from(wc.byte_len),
                u64::from(wc.qp_num),
            ],
        );
        let Some(c) = self.cqs.get_mut(&cq) else {
            return;
        };
        if c.broken {
            return;
        }
        if c.entries.len() >= c.cqe as usize {
            // Overrun: the completion is lost and the consumer told. mlx5 breaks the CQ;
            // rxe keeps it usable.
            if c.personality == Personality::Mlx5 {
                c.broken = true;
            }
            let (ctx, personality) = (c.ctx, c.personality);
            self.async_event(ctx, EventType::CqErr, EventElement::Cq(cq));
            if personality == Personality::Rxe && wc.is_recv() {
                // rxe's responder moves the QP whose receive completion was lost to ERR;
                // flushing its other receives into the full CQ raises CQ_ERR again each.
                self.enter_error(wc.qp_num);
            }
            return;
        }
        let error_solicits = !wc.status.is_success() && c.personality == Personality::Mlx5;
        c.entries.push_back(Cqe { wc, frees });
        let fire = match c.arm {
            Arm::None => false,
            Arm::Next => true,
            Arm::Solicited => solicited || error_solicits,
        };
        if fire {
            c.arm = Arm::None;
            c.unacked += 1;
            if let Some(ch) = c.channel.and_then(|h| self.channels.get_mut(&h)) {
                ch.events.push_back(cq);
            }
        }
    }

    /// A send WQE of `qpn` leaves the NIC's queue: with a CQE on the QP's send CQ when
    /// `reported`, else silently (an unsignaled success). Keeps mlx5's slot count.
    pub fn retire_send(&mut self, qpn: u32, wc: Completion, reported: bool) {
        let Some(qp) = self.qps.get_mut(&qpn) else {
            return;
        };
        let personality = self.devices[qp.dev].personality;
        let frees = qp.sq.retire(personality, reported);
        if reported {
            let cq = qp.send_cq;
            self.push_cqe(cq, wc, false, frees);
        }
    }

    /// Queues the completion of a send the NIC executed (or flushes) at post time; the
    /// completer makes it at the next step (see [`super::send_queue`]).
    pub fn queue_send(&mut self, qpn: u32, e: Executed) {
        let Some(qp) = self.qps.get_mut(&qpn) else {
            return;
        };
        if qp.sq.push(e) {
            self.due.push(qpn);
        }
    }

    /// The completers of the QPs with work left by posts, in the order it was left: the
    /// queued sends of each, then its RC/UC machine's.
    pub(super) fn run_completers(&mut self) {
        let mut due = std::mem::replace(&mut self.due, std::mem::take(&mut self.due_scratch));
        for &qpn in &due {
            if let Some(qp) = self.qps.get_mut(&qpn) {
                qp.sq.take_due();
            }
            self.complete_queued_sends(qpn);
            self.run_rc(qpn, |rc, nic| rc.on_completer(nic));
        }
        due.clear();
        self.due_scratch = due;
    }

    /// Completes `qpn`'s queued sends in order. A failed send moves the QP to ERR on rxe
    /// (its receives flushed), to SQE on mlx5, once its completion is made.
    pub(super) fn complete_queued_sends(&mut self, qpn: u32) {
        while let Some(e) = self.qps.get_mut(&qpn).and_then(|q| q.sq.pop()) {
            self.retire_send(qpn, e.wc, e.reported);
            let failed = !e.wc.status.is_success() && e.wc.status != WcStatus::WrFlushErr;
            if failed {
                let Some(qp) = self.qps.get_mut(&qpn) else {
                    return;
                };
                if self.devices[qp.dev].personality == Personality::Rxe {
                    self.enter_error(qpn);
                } else if matches!(qp.state, QpState::Rts | QpState::Sqd) {
                    qp.state = QpState::Sqe;
                }
            }
        }
    }
}
