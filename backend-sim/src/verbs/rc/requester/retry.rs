//! The requester's timers and retries: the ACK timer and RNR waits, go-back-N
//! retransmission from the first unacknowledged packet, and the acknowledged PSN that
//! says where that is (see the parent module's docs).

use super::super::nic::{Nic, Timer};
use super::super::psn::psn_cmp;
use super::{Requester, SendWqe};
use crate::verbs::personality::Personality;
use verbs_api::{QpState, SendOpcode, WcStatus};

impl Requester {
    pub fn on_timer(&mut self, nic: &mut impl Nic, kind: u64, gen: u32) {
        if !matches!(nic.qp().state, QpState::Rts | QpState::Sqd) {
            return;
        }
        let now = nic.now();
        if kind == Timer::Ack as u64 {
            self.ack_timer_pending = false;
            if self.ack_deadline == 0 {
                return;
            }
            if now < self.ack_deadline {
                // Re-armed since this event was set: wait for the new deadline.
                self.ack_timer_pending = true;
                nic.set_timer(self.ack_deadline, Timer::Ack, 0);
                return;
            }
            self.ack_deadline = 0;
            let Some(i) = self.sq.iter().position(SendWqe::outstanding) else {
                return;
            };
            if !self.take_retry(nic) {
                self.fail(nic, i, WcStatus::RetryExcErr);
                return;
            }
            self.retrying = true;
        } else if self.timer_gen != gen {
            return;
        }
        self.retransmit(nic);
    }

    /// Takes one retry from `retry_cnt` (none from 7 where that means for ever); false
    /// when none is left.
    pub(super) fn take_retry(&mut self, nic: &impl Nic) -> bool {
        let qp = nic.qp();
        if qp.attr.retry_cnt == 7 && qp.personality.retry_cnt_7_is_infinite() {
            return true;
        }
        if self.retry_left == 0 {
            return false;
        }
        self.retry_left -= 1;
        true
    }

    /// Go-back-N: sends again every WQE that was sent and is not done, the oldest from
    /// its first packet not acknowledged (see the module docs).
    pub(super) fn retransmit(&mut self, nic: &mut impl Nic) {
        let (mtu, uc) = (nic.path_mtu(), nic.qp().uc);
        let mut first = true;
        for i in 0..self.sq.len() {
            if self.sq[i].outstanding() {
                let from = if first { self.resume_at(i) } else { 0 };
                first = false;
                self.transmit_wqe(nic, i, mtu, uc, from);
            }
        }
        self.arm_timer(nic);
    }

    /// The packet of WQE `i` a retry resumes at: a READ's responses received so far, else
    /// the first PSN not acknowledged when it lies inside the WQE; 0 otherwise.
    fn resume_at(&self, i: usize) -> u32 {
        let w = &self.sq[i];
        if w.wr.opcode == SendOpcode::RdmaRead {
            return w.read_next;
        }
        if w.wr.opcode.is_atomic() {
            return 0;
        }
        let d = psn_cmp(self.comp_psn, w.first_psn);
        if d > 0 && psn_cmp(self.comp_psn, w.last_psn()) <= 0 {
            d as u32
        } else {
            0
        }
    }

    /// A response acknowledged everything before `psn` (rxe_comp.c moves `comp.psn`
    /// forward only). A `positive` one (an ACK, READ response or atomic ACK, not a NAK)
    /// that moves it resets the retry counts and ends the retry under way (rxe_comp.c
    /// `check_ack` calls `reset_retry_counters` for each).
    pub(super) fn acked_before(&mut self, nic: &impl Nic, psn: u32, positive: bool) {
        if psn_cmp(psn, self.comp_psn) > 0 {
            self.comp_psn = psn;
            if positive {
                let attr = nic.qp().attr;
                self.retry_left = attr.retry_cnt;
                self.rnr_left = attr.rnr_retry;
                self.retrying = false;
            }
        }
    }

    /// Marks everything up to `psn` acknowledged (sends and writes; reads and atomics
    /// complete only with their responses).
    pub(super) fn ack_through(&mut self, nic: &impl Nic, psn: u32) {
        let attr = nic.qp().attr;
        let mut progress = false;
        for w in self.sq.iter_mut().filter(|w| w.outstanding()) {
            if psn_cmp(w.last_psn(), psn) > 0 {
                break;
            }
            if w.wr.opcode != SendOpcode::RdmaRead && !w.wr.opcode.is_atomic() {
                w.done = true;
                progress = true;
            }
        }
        if progress {
            self.retry_left = attr.retry_cnt;
            self.rnr_left = attr.rnr_retry;
        }
    }

    /// Whether a READ or atomic sent before the outstanding WQE that `is_it` picks is
    /// still waiting for its response: then this response comes past a lost one.
    pub(super) fn earlier_response_missing(&self, is_it: impl Fn(&SendWqe) -> bool) -> bool {
        let Some(i) = self.sq.iter().position(|w| w.outstanding() && is_it(w)) else {
            return false;
        };
        self.sq.iter().take(i).any(|w| {
            w.outstanding() && (w.wr.opcode == SendOpcode::RdmaRead || w.wr.opcode.is_atomic())
        })
    }

    /// A READ or atomic response past one that has not come: it is not taken (rxe
    /// completes in order: `check_psn` in rxe_comp.c finds the oldest WQE, a READ or
    /// atomic, not answered, and goes to COMPST_ERROR_RETRY), and it counts as a retry
    /// unless one is under way (rxe), as a sequence-error NAK does. Taking it would
    /// free a slot of max_rd_atomic the responder still holds for the lost one.
    pub(super) fn response_past_a_missing_one(&mut self, nic: &mut impl Nic) {
        let rxe = nic.qp().personality == Personality::Rxe;
        if rxe && self.retrying {
            self.arm_timer(nic);
            return;
        }
        let Some(i) = self.sq.iter().position(SendWqe::outstanding) else {
            return;
        };
        if !self.take_retry(nic) {
            self.fail(nic, i, WcStatus::RetryExcErr);
            return;
        }
        self.retrying = true;
        self.retransmit(nic);
    }
}
