//! Receive queues (a QP's own or its SRQ) and delivery into a receive's buffers.

use super::World;
use super::{completion, vtag, RecvWqe};
use crate::verbs::memory;
use crate::verbs::personality::Personality;
use verbs_api::{EventElement, EventType, QpType, WcFlags, WcOpcode, WcStatus};

impl World {
    /// Takes the next receive WQE for `qpn` (its RQ or its SRQ, raising the SRQ limit
    /// event when the SRQ drops below its armed limit).
    pub fn take_recv(&mut self, qpn: u32) -> Option<(RecvWqe, u32)> {
        let qp = self.qps.get_mut(&qpn)?;
        let pd = qp.pd;
        match qp.srq {
            None => qp.rq.pop_front().map(|w| (w, pd)),
            Some(h) => {
                let srq = self.srqs.get_mut(&h)?;
                let w = srq.queue.pop_front()?;
                let pd = srq.pd;
                if srq.attr.srq_limit > 0 && (srq.queue.len() as u32) < srq.attr.srq_limit {
                    srq.attr.srq_limit = 0; // one shot: the consumer re-arms
                    let ctx = srq.ctx;
                    self.async_event(ctx, EventType::SrqLimitReached, EventElement::Srq(h));
                }
                Some((w, pd))
            }
        }
    }

    /// Puts a WQE back at the head (a receive that could not be used).
    pub fn untake_recv(&mut self, qpn: u32, w: RecvWqe) {
        let Some(qp) = self.qps.get_mut(&qpn) else {
            return;
        };
        match qp.srq {
            None => qp.rq.push_front(w),
            Some(h) => {
                if let Some(s) = self.srqs.get_mut(&h) {
                    s.queue.push_front(w);
                }
            }
        }
    }

    /// Delivers `pieces` into the next receive of `qpn` and completes it. False when no
    /// receive was posted (the frame is dropped, as hardware drops it). `from` is the
    /// completion's `src_qp` and `sl`.
    #[allow(clippy::too_many_arguments)]
    pub fn deliver(
        &mut self,
        qpn: u32,
        pieces: &[&[u8]],
        opcode: WcOpcode,
        from: (u32, u8),
        imm: Option<u32>,
        flags: WcFlags,
        solicited: bool,
    ) -> bool {
        let Some((w, pd)) = self.take_recv(qpn) else {
            let dev = self.qps.get(&qpn).map_or(0, |q| q.dev);
            if let Some(d) = self.devices.get_mut(dev) {
                d.stats.rx_no_wqe += 1;
            }
            self.fabric
                .trace_event(vtag::RX_DROP, &[self.fabric.now(), u64::from(qpn), 1]);
            return false;
        };
        let qp = &self.qps[&qpn];
        let (recv_cq, qp_type) = (qp.recv_cq, qp.qp_type);
        let need: usize = pieces.iter().map(|p| p.len()).sum();
        let personality = self.devices[qp.dev].personality;
        let room: u64 = w.sges.as_slice().iter().map(|s| u64::from(s.length)).sum();
        let res = self
            .mrs
            .check_local(pd, w.sges.as_slice(), true)
            .map_err(|s| self.local_status(personality, s))
            .and_then(|_| {
                if need as u64 > room {
                    // A message larger than the buffer: what the driver reports differs.
                    Err(match qp_type {
                        QpType::Ud => personality.ud_too_long_status(),
                        _ => WcStatus::LocLenErr,
                    })
                } else {
                    // SAFETY: the SGEs passed the key table check with LOCAL_WRITE just
                    // above, and the pieces fit.
                    unsafe { memory::scatter(w.sges.as_slice(), pieces) }
                }
            });
        let mut wc = completion(w.wr_id, WcStatus::Success, opcode, qpn);
        match res {
            Ok(n) => {
                wc.byte_len = n as u32;
                (wc.src_qp, wc.sl) = from;
                wc.wc_flags = flags;
                if let Some(i) = imm {
                    wc.imm_data = i;
                    wc.wc_flags |= WcFlags::WITH_IMM;
                }
                self.complete(recv_cq, wc, solicited);
            }
            Err(status) => {
                wc.status = status;
                // An error completion carries opcode 0 (IBV_WC_SEND): rxe's responder sets
                // the opcode on success only (`do_complete` in rxe_resp.c), and mlx5's
                // error CQEs carry none (divergences.md row 10).
                wc.opcode = WcOpcode::Send;
                self.complete(recv_cq, wc, false);
                self.enter_error(qpn);
            }
        }
        true
    }

    /// Maps the key table's verdict to what `personality` reports (a bad lkey differs).
    pub(crate) fn local_status(&self, personality: Personality, s: WcStatus) -> WcStatus {
        if s == WcStatus::LocQpOpErr {
            personality.bad_lkey_status()
        } else {
            s
        }
    }
}
