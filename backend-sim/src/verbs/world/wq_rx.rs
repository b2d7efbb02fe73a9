//! Delivery into receive work queues: a frame steered to an RSS QP goes to the WQ of its
//! indirection table that the RX hash picks ([`crate::verbs::toeplitz`]); a striding WQ
//! places it by [`crate::verbs::striding`] (the rules and their sources are there).

use super::{completion, RecvWqe, World};
use crate::verbs::memory;
use crate::verbs::striding::{self, Placement};
use crate::verbs::toeplitz;
use verbs_api::{Sge, StridingRqAttr, WcFlags, WcOpcode, WcStatus, WqState};

impl World {
    /// A frame steered to the RSS QP `qpn`: into the WQ of its table that the hash
    /// picks (the hash's low bits index the table, as the RSS specification's
    /// indirection table is indexed). True when the QP is an RSS QP.
    pub(crate) fn rss_deliver(&mut self, qpn: u32, frame: &[u8], sealed: bool) -> bool {
        let Some(rss) = self.qps.get(&qpn).and_then(|q| q.rss.as_ref()) else {
            return false;
        };
        let Some(table) = self.ind_tables.get(&rss.table) else {
            return true;
        };
        let mut input = Vec::new();
        toeplitz::input(frame, rss.hash.fields, &mut input);
        let h = toeplitz::hash(&rss.hash.key, &input);
        let wq = table.wqs[h as usize & (table.wqs.len() - 1)];
        let flags = crate::verbs::raw::receive_flags(frame, sealed);
        self.wq_deliver(wq, frame, flags);
        true
    }

    fn wq_drop(&mut self, dev: usize) {
        if let Some(d) = self.devices.get_mut(dev) {
            d.stats.rx_no_wqe += 1;
        }
    }

    /// A frame into WQ `id`: dropped unless it is RDY and has a receive posted (the
    /// receive-buffer overrun counter, as an RQ counts it).
    pub(crate) fn wq_deliver(&mut self, id: u32, frame: &[u8], flags: WcFlags) {
        let Some(q) = self.wqs.get_mut(&id) else {
            return;
        };
        let dev = q.dev;
        if q.state != WqState::Rdy || q.queue.is_empty() {
            self.wq_drop(dev);
            return;
        }
        match q.striding {
            None => self.wq_deliver_plain(id, frame, flags),
            Some(g) => self.wq_deliver_striding(id, g, frame, flags),
        }
    }

    fn wq_deliver_plain(&mut self, id: u32, frame: &[u8], flags: WcFlags) {
        let q = self.wqs.get_mut(&id).expect("checked by the caller");
        let wqe = q.queue.pop_front().expect("checked by the caller");
        let (pd, cq, dev) = (q.pd, q.cq, q.dev);
        let personality = self.devices[dev].personality;
        let res = self
            .mrs
            .check_local(pd, wqe.sges.as_slice(), true)
            .map_err(|s| self.local_status(personality, s))
            // SAFETY: the SGEs passed the key table check with LOCAL_WRITE just above;
            // scatter checks that the frame fits.
            .and_then(|_| unsafe { memory::scatter(wqe.sges.as_slice(), &[frame]) });
        let mut wc = completion(wqe.wr_id, WcStatus::Success, WcOpcode::Recv, id);
        match res {
            Ok(n) => {
                wc.byte_len = n as u32;
                wc.wc_flags = flags;
                self.complete(cq, wc, false);
            }
            Err(status) => {
                wc.status = status;
                self.complete(cq, wc, false);
                self.wq_error(id);
            }
        }
    }

    fn wq_deliver_striding(&mut self, id: u32, g: StridingRqAttr, frame: &[u8], flags: WcFlags) {
        loop {
            let Some(q) = self.wqs.get_mut(&id) else {
                return;
            };
            let (pd, cq, dev, consumed) = (q.pd, q.cq, q.dev, q.consumed);
            let Some(wqe) = q.queue.front() else {
                self.wq_drop(dev);
                return;
            };
            let (wr_id, sges) = (wqe.wr_id, wqe.sges.clone());
            match striding::place(&g, consumed, frame.len()) {
                Placement::TooLarge => {
                    self.devices[dev].stats.rx_too_long += 1;
                    return;
                }
                Placement::Filler { strides } => {
                    for word in striding::fillers(strides) {
                        let mut wc = completion(wr_id, WcStatus::Success, WcOpcode::Recv, id);
                        wc.byte_len = word;
                        self.complete(cq, wc, false);
                    }
                    self.wq_finish_wqe(id);
                }
                Placement::Packet {
                    offset,
                    strides,
                    byte_cnt,
                } => {
                    let status = self.striding_write(dev, pd, sges.as_slice(), &g, offset, frame);
                    let mut wc = completion(wr_id, status, WcOpcode::Recv, id);
                    if status != WcStatus::Success {
                        self.complete(cq, wc, false);
                        self.wq_finish_wqe(id);
                        self.wq_error(id);
                        return;
                    }
                    wc.byte_len = byte_cnt;
                    wc.wc_flags = flags;
                    self.complete(cq, wc, false);
                    let q = self.wqs.get_mut(&id).expect("present above");
                    q.consumed += strides;
                    if q.consumed == g.num_strides() {
                        self.wq_finish_wqe(id);
                    }
                    return;
                }
            }
        }
    }

    /// Writes a packet at `offset` of a striding WQE's buffer: the WQE must be one
    /// SGE of exactly one WQE's bytes in memory the PD may write. A malformed entry
    /// (another length) completes with LOC_LEN_ERR and a bad key with the device's bad
    /// lkey status: mlx5 reports a local length error or protection error as an error
    /// CQE (rdma-core providers/mlx5/cq.c `mlx5_handle_error_cqe`), and its RQs are
    /// created with `flush_in_error_en` (the kernel's `create_rq`), so the WQ then
    /// enters ERR and flushes what was posted.
    fn striding_write(
        &self,
        dev: usize,
        pd: u32,
        sges: &[Sge],
        g: &StridingRqAttr,
        offset: u64,
        frame: &[u8],
    ) -> WcStatus {
        let personality = self.devices[dev].personality;
        let [sge] = sges else {
            return WcStatus::LocLenErr;
        };
        if u64::from(sge.length) != g.wqe_bytes() {
            return WcStatus::LocLenErr;
        }
        let target = Sge {
            addr: sge.addr + offset,
            length: frame.len() as u32,
            lkey: sge.lkey,
        };
        if let Err(s) = self.mrs.check_local(pd, &[target], true) {
            return self.local_status(personality, s);
        }
        // SAFETY: `target` passed the key table check with LOCAL_WRITE just above and
        // is exactly the frame's length.
        match unsafe { memory::scatter(&[target], &[frame]) } {
            Ok(_) => WcStatus::Success,
            Err(s) => s,
        }
    }

    /// The front WQE of a striding WQ is used up: the next one becomes current.
    fn wq_finish_wqe(&mut self, id: u32) {
        if let Some(q) = self.wqs.get_mut(&id) {
            q.queue.pop_front();
            q.consumed = 0;
        }
    }

    /// WQ `id` enters ERR: what was posted completes with WR_FLUSH_ERR.
    pub(crate) fn wq_error(&mut self, id: u32) {
        let Some(q) = self.wqs.get_mut(&id) else {
            return;
        };
        q.state = WqState::Err;
        q.consumed = 0;
        let cq = q.cq;
        let flushed: Vec<RecvWqe> = q.queue.drain(..).collect();
        for w in flushed {
            self.complete(
                cq,
                completion(w.wr_id, WcStatus::WrFlushErr, WcOpcode::Recv, id),
                true,
            );
        }
    }
}
