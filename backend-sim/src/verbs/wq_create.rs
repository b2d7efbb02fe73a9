//! Creating receive work queues, indirection tables and RSS QPs on a simulated device:
//! the checks each device makes and the records it keeps (the handles are in
//! [`super::wq`], which says what mlx5 and rxe offer and where that is read).

use super::context::SimContext;
use super::cq::SimCq;
use super::objects::{err, Kind};
use super::pd::SimPd;
use super::qp::SimQp;
use super::records::{IndTable, Rss, Wq};
use super::toeplitz;
use super::wq::{SimRwqIndTable, SimWq, STRIDING_RQ_LIMITS};
use std::collections::VecDeque;
use verbs_api::{
    ErrorKind, QpAttr, QpCap, QpState, QpType, Result, RxHashConf, WqInitAttr, WqState,
};

impl SimContext {
    fn wq_refusal(&self, op: &'static str) -> Option<verbs_api::Error> {
        let w = self.world();
        let d = &w.devices[self.dev];
        (!d.personality.raw_packet()).then(|| {
            err(
                ErrorKind::Unsupported,
                op,
                format!("{} has no work queues", d.name),
            )
        })
    }

    pub(crate) fn create_wq_impl(&self, pd: &SimPd, cq: &SimCq, a: &WqInitAttr) -> Result<SimWq> {
        const OP: &str = "ibv_create_wq";
        if let Some(e) = self.wq_refusal(OP) {
            return Err(e);
        }
        let mut w = self.world();
        let d = &w.devices[self.dev];
        let attr = d.personality.device_attr(d.guid);
        // libmlx5's `mlx5_calc_rwq_size`: max_wr 0 is EINVAL; the kernel's
        // `set_user_rq_size` refuses more than the device's queue size.
        if a.max_wr == 0 || a.max_wr > attr.max_qp_wr || a.max_sge > attr.max_sge {
            return Err(err(
                ErrorKind::InvalidArgument,
                OP,
                "WQ sizes beyond the device's",
            ));
        }
        if let Some(s) = &a.striding {
            if !STRIDING_RQ_LIMITS.admit(s) {
                return Err(err(
                    ErrorKind::InvalidArgument,
                    OP,
                    format!("stride geometry {s:?} beyond the device's"),
                ));
            }
        }
        let id = w.qpn();
        w.wqs.insert(
            id,
            Wq {
                dev: self.dev,
                pd: pd.res.id,
                cq: cq.res.id,
                // `mlx5_calc_rwq_size` rounds the ring up to a power of two.
                max_wr: a.max_wr.next_power_of_two(),
                max_sge: a.max_sge.max(1),
                state: WqState::Reset,
                striding: a.striding,
                queue: VecDeque::new(),
                consumed: 0,
            },
        );
        drop(w);
        Ok(SimWq {
            res: self.new_res(id, Kind::Wq),
            _keep: [pd.res.clone(), cq.res.clone()],
        })
    }

    pub(crate) fn create_ind_table_impl(&self, wqs: &[&SimWq]) -> Result<SimRwqIndTable> {
        const OP: &str = "ibv_create_rwq_ind_table";
        if let Some(e) = self.wq_refusal(OP) {
            return Err(e);
        }
        // The size is `1 << log_ind_tbl_size` entries (struct ibv_rwq_ind_table_init_attr).
        if wqs.is_empty() || !wqs.len().is_power_of_two() {
            return Err(err(
                ErrorKind::InvalidArgument,
                OP,
                "a table of a power of two of WQs",
            ));
        }
        let mut w = self.world();
        let d = &w.devices[self.dev];
        // The kernel's mlx5_ib_create_rwq_ind_table: a log_ind_tbl_size above
        // log_max_rqt_size is EINVAL.
        let most = d
            .personality
            .device_attr(d.guid)
            .rss_caps
            .max_rwq_indirection_table_size;
        if wqs.len() > most as usize {
            return Err(err(
                ErrorKind::InvalidArgument,
                OP,
                format!("at most {most} WQs in a table (max_rwq_indirection_table_size)"),
            ));
        }
        let nums: Vec<u32> = wqs.iter().map(|q| q.res.id).collect();
        let id = w.handle();
        w.ind_tables.insert(id, IndTable { wqs: nums.clone() });
        drop(w);
        Ok(SimRwqIndTable {
            res: self.new_res(id, Kind::IndTable),
            wqs: nums,
            _keep: wqs.iter().map(|q| q.res.clone()).collect(),
        })
    }

    pub(crate) fn create_rss_qp_impl(
        &self,
        pd: &SimPd,
        table: &SimRwqIndTable,
        hash: &RxHashConf,
    ) -> Result<SimQp> {
        const OP: &str = "ibv_create_qp_ex";
        if let Some(e) = self.wq_refusal(OP) {
            return Err(e);
        }
        toeplitz::check(hash).map_err(|(kind, msg)| err(kind, OP, msg))?;
        let mut w = self.world();
        let qpn = w.qpn();
        let qp = super::world::Qp {
            ctx: self.res.id,
            dev: self.dev,
            qp_type: QpType::RawPacket,
            pd: pd.res.id,
            send_cq: 0,
            recv_cq: 0,
            srq: None,
            cap: QpCap::default(),
            sq_sig_all: false,
            state: QpState::Reset,
            attr: QpAttr {
                port_num: 1,
                ..QpAttr::default()
            },
            rq: VecDeque::new(),
            groups: Vec::new(),
            ud_psn: 0,
            rc: None,
            sq: Default::default(),
            rss: Some(Box::new(Rss {
                table: table.res.id,
                hash: hash.clone(),
            })),
        };
        w.qps.insert(qpn, qp);
        drop(w);
        Ok(SimQp {
            res: self.new_res(qpn, Kind::Qp),
            qpn,
            qp_type: QpType::RawPacket,
            // The QP keeps its table and the table's WQs (a table keeps its WQs only while
            // its own handle lives).
            _keep: [pd.res.clone(), table.res.clone()]
                .into_iter()
                .chain(table._keep.iter().cloned())
                .collect(),
        })
    }
}
