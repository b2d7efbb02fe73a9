//! QP state changes the NIC makes: modify, ERR with its flushes, SQ drained, destroy.

use super::World;
use super::{completion, vtag, RecvWqe};
use crate::verbs::roce_addr;
use verbs_api::{EventElement, EventType, QpAttr, QpState, WcOpcode, WcStatus};

impl World {
    /// Moves a QP to ERR and flushes every outstanding WR (signaled or not) with
    /// WR_FLUSH_ERR, as the verbs man pages specify. (While an RC machine runs, it is out
    /// of its QP and flushes its own send queue.) False if the QP was already in ERR.
    pub fn enter_error(&mut self, qpn: u32) -> bool {
        let Some(qp) = self.qps.get_mut(&qpn) else {
            return false;
        };
        if qp.state == QpState::Err {
            return false;
        }
        qp.state = QpState::Err;
        if qp.srq.is_some() && self.devices[qp.dev].personality.raises_qp_error_events() {
            let ctx = qp.ctx;
            self.async_event(ctx, EventType::QpLastWqeReached, EventElement::Qp(qpn));
        }
        let Some(qp) = self.qps.get_mut(&qpn) else {
            return true;
        };
        let rq: Vec<RecvWqe> = qp.rq.drain(..).collect();
        let recv_cq = qp.recv_cq;
        let pending = qp
            .rc
            .as_mut()
            .map(|rc| rc.take_outstanding())
            .unwrap_or_default();
        // Flushed receives count as solicited (rxe posts completions made without a
        // packet so; mlx5 wakes a solicited-only CQ for every error completion anyway).
        for w in rq {
            self.complete(
                recv_cq,
                completion(w.wr_id, WcStatus::WrFlushErr, WcOpcode::Recv, qpn),
                true,
            );
        }
        for (wr_id, op) in pending {
            self.retire_send(qpn, completion(wr_id, WcStatus::WrFlushErr, op, qpn), true);
        }
        true
    }

    /// Applies a modify the state table accepted.
    pub fn modify(
        &mut self,
        qpn: u32,
        attr: &QpAttr,
        mask: verbs_api::QpAttrMask,
    ) -> Result<(), verbs_api::Error> {
        use verbs_api::QpAttrMask as M;
        const OP: &str = "ibv_modify_qp";
        let inval = |m: &str| {
            Err(
                verbs_api::Error::new(verbs_api::ErrorKind::InvalidArgument, OP, m.to_string())
                    .with_errno(22),
            )
        };
        if mask.contains(M::PORT) && attr.port_num != 1 {
            return inval("the simulated device has one port, number 1");
        }
        if mask.contains(M::AV) {
            if let Some(d) = self.qps.get(&qpn).map(|q| &self.devices[q.dev]) {
                let grh = &attr.ah_attr.grh;
                if roce_addr::roce_ips(d.mac, d.ip, d.personality, grh).is_none() {
                    return inval(&roce_addr::not_carried(grh));
                }
            }
        }
        if mask.contains(M::TIMEOUT) && attr.timeout > 31 {
            return inval("the ACK timeout is a 5-bit value (at most 31)");
        }
        if let Some(p) = self.qps.get(&qpn).map(|q| self.devices[q.dev].personality) {
            let most = p.max_rd_atom();
            if (mask.contains(M::MAX_QP_RD_ATOMIC) && attr.max_rd_atomic > most)
                || (mask.contains(M::MAX_DEST_RD_ATOMIC) && attr.max_dest_rd_atomic > most)
            {
                return inval(&format!(
                    "at most {most} outstanding RDMA READs and atomics (max_qp_rd_atom)"
                ));
            }
        }
        let now = self.fabric.now();
        let Some(qp) = self.qps.get_mut(&qpn) else {
            return inval("no such QP");
        };
        let a = &mut qp.attr;
        macro_rules! take {
            ($flag:ident, $($f:ident),+) => { if mask.contains(M::$flag) { $(a.$f = attr.$f;)+ } };
        }
        take!(PKEY_INDEX, pkey_index);
        take!(PORT, port_num);
        take!(QKEY, qkey);
        take!(ACCESS_FLAGS, qp_access_flags);
        take!(AV, ah_attr);
        take!(PATH_MTU, path_mtu);
        take!(TIMEOUT, timeout);
        take!(RETRY_CNT, retry_cnt);
        take!(RNR_RETRY, rnr_retry);
        take!(RQ_PSN, rq_psn);
        take!(SQ_PSN, sq_psn);
        take!(MAX_QP_RD_ATOMIC, max_rd_atomic);
        take!(MAX_DEST_RD_ATOMIC, max_dest_rd_atomic);
        take!(MIN_RNR_TIMER, min_rnr_timer);
        take!(DEST_QPN, dest_qp_num);
        let p = self.devices[qp.dev].personality;
        a.max_rd_atomic = p.rd_atomic(a.max_rd_atomic);
        a.max_dest_rd_atomic = p.rd_atomic(a.max_dest_rd_atomic);
        take!(EN_SQD_ASYNC_NOTIFY, en_sqd_async_notify);
        let old = qp.state;
        let new = if mask.contains(M::STATE) {
            attr.qp_state
        } else {
            old
        };
        self.fabric.trace_event(
            vtag::MODIFY,
            &[
                now,
                u64::from(qpn),
                u64::from(old.as_raw()),
                u64::from(new.as_raw()),
                u64::from(mask.bits()),
            ],
        );
        if new == QpState::Err {
            self.enter_error(qpn);
            return Ok(());
        }
        let qp = self.qps.get_mut(&qpn).expect("checked above");
        qp.state = new;
        match new {
            QpState::Reset => {
                qp.rq.clear();
                qp.sq.reset();
                qp.ud_psn = 0;
                if let Some(rc) = qp.rc.as_mut() {
                    rc.reset();
                }
                // libmlx5 takes the QP's completions out of its CQs when it resets it
                // (`mlx5_cq_clean` in `mlx5_modify_qp`); rxe leaves them to be polled.
                let (dev, cqs) = (qp.dev, [qp.send_cq, qp.recv_cq]);
                if self.devices[dev].personality == crate::verbs::Personality::Mlx5 {
                    for id in cqs {
                        if let Some(cq) = self.cqs.get_mut(&id) {
                            cq.entries.retain(|e| e.wc.qp_num != qpn);
                        }
                    }
                }
            }
            QpState::Rtr if old != QpState::Rtr => {
                let rq_psn = qp.attr.rq_psn;
                if let Some(rc) = qp.rc.as_mut() {
                    rc.set_rq_psn(rq_psn);
                }
            }
            QpState::Rts if old == QpState::Rtr => {
                let sq_psn = qp.attr.sq_psn;
                let (retry, rnr) = (qp.attr.retry_cnt, qp.attr.rnr_retry);
                qp.ud_psn = sq_psn;
                if let Some(rc) = qp.rc.as_mut() {
                    rc.set_sq_psn(sq_psn);
                    rc.set_retries(retry, rnr);
                }
            }
            // Work queued while drained goes out now.
            QpState::Rts if old == QpState::Sqd && qp.rc.is_some() => {
                self.run_rc(qpn, |rc, nic| rc.resume(nic));
            }
            QpState::Sqd if old == QpState::Rts => {
                let notify = qp.attr.en_sqd_async_notify && mask.contains(M::EN_SQD_ASYNC_NOTIFY);
                if notify {
                    self.sqd_notify(qpn);
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Raises IBV_EVENT_SQ_DRAINED once nothing sent is outstanding (now, or when the last
    /// outstanding WQE completes).
    pub(crate) fn sqd_notify(&mut self, qpn: u32) {
        let Some(qp) = self.qps.get_mut(&qpn) else {
            return;
        };
        let ctx = qp.ctx;
        let drained = match qp.rc.as_deref_mut() {
            Some(rc) => rc.arm_drain_notify(),
            None => true,
        };
        if drained {
            self.async_event(ctx, EventType::SqDrained, EventElement::Qp(qpn));
        }
    }

    pub fn destroy_qp(&mut self, qpn: u32) {
        let groups = self
            .qps
            .get(&qpn)
            .map(|q| q.groups.clone())
            .unwrap_or_default();
        for g in groups {
            self.detach(qpn, g);
        }
        let flows: Vec<u32> = self
            .flows
            .iter()
            .filter(|(_, r)| r.qpn == qpn)
            .map(|(id, _)| *id)
            .collect();
        let mut flows = flows;
        flows.sort_unstable();
        for f in flows {
            self.remove_flow(f);
        }
        self.qps.remove(&qpn);
    }
}
