//! Receive work queues (`ibv_create_wq`, `mlx5dv_create_wq`), their indirection tables
//! (`ibv_create_rwq_ind_table`) and RSS QPs (`ibv_create_qp_ex` with an RX hash): the
//! objects the application holds (their creation is in [`super::wq_create`]); the NIC's records are in
//! [`super::records`], delivery of a steered frame into the WQ the hash picks in
//! `world/wq_rx.rs` (a striding WQ places it by [`super::striding`]).
//!
//! What each device offers: mlx5 has all of them (rdma-core providers/mlx5/verbs.c
//! `create_wq`, `mlx5_create_rwq_ind_table`, `create_rss_raw_qp_tir` in the kernel);
//! rxe has none: its `verbs_context_ops` (rdma-core providers/rxe/rxe.c) define no
//! `create_wq` or `create_rwq_ind_table`, so libibverbs' inline `ibv_create_wq` and
//! `ibv_create_rwq_ind_table` fail with EOPNOTSUPP, and `rxe_create_qp_ex` refuses the
//! IND_TABLE / RX_HASH create mask with EOPNOTSUPP (`check_qp_init_attr`).

use super::objects::{err, lock, Res};
use super::world::{RecvWqe, SgeList};
use std::sync::Arc;
use verbs_api::{ErrorKind, RecvWr, Result, RwqIndTable, StridingRqAttr, WorkQueue, WqState};

/// The striding RQ limits of a ConnectX-5, as the kernel reports and checks them
/// (drivers/infiniband/hw/mlx5/mlx5_ib.h: `MLX5_MIN_SINGLE_STRIDE_LOG_NUM_BYTES` 6,
/// `MLX5_MAX_SINGLE_STRIDE_LOG_NUM_BYTES` 13, `MLX5_MIN_SINGLE_WQE_LOG_NUM_STRIDES` 9,
/// `MLX5_MAX_SINGLE_WQE_LOG_NUM_STRIDES` 16; the lower bound of 3 strides
/// `MLX5_EXT_MIN_SINGLE_WQE_LOG_NUM_STRIDES` needs the `ext_stride_num_range` capability,
/// which the model's device does not have).
pub const STRIDING_RQ_LIMITS: StridingRqLimits = StridingRqLimits {
    min_single_stride_log_num_of_bytes: 6,
    max_single_stride_log_num_of_bytes: 13,
    min_single_wqe_log_num_of_strides: 9,
    max_single_wqe_log_num_of_strides: 16,
};

/// The ranges `mlx5dv_query_device` reports in `striding_rq_caps`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StridingRqLimits {
    /// Smallest log2 stride size.
    pub min_single_stride_log_num_of_bytes: u32,
    /// Largest log2 stride size.
    pub max_single_stride_log_num_of_bytes: u32,
    /// Fewest log2 strides per WQE.
    pub min_single_wqe_log_num_of_strides: u32,
    /// Most log2 strides per WQE.
    pub max_single_wqe_log_num_of_strides: u32,
}

impl StridingRqLimits {
    /// Whether `a` is within the limits (the kernel's `prepare_user_rq` and libmlx5's
    /// `create_wq` refuse anything else with EINVAL).
    #[must_use]
    pub fn admit(&self, a: &StridingRqAttr) -> bool {
        (self.min_single_stride_log_num_of_bytes..=self.max_single_stride_log_num_of_bytes)
            .contains(&a.single_stride_log_num_of_bytes)
            && (self.min_single_wqe_log_num_of_strides..=self.max_single_wqe_log_num_of_strides)
                .contains(&a.single_wqe_log_num_of_strides)
    }
}

/// A receive work queue; dropping it destroys it.
#[derive(Debug)]
pub struct SimWq {
    pub(super) res: Arc<Res>,
    pub(super) _keep: [Arc<Res>; 2],
}

/// A receive work queue indirection table; dropping it destroys it.
#[derive(Debug)]
pub struct SimRwqIndTable {
    pub(super) res: Arc<Res>,
    pub(super) wqs: Vec<u32>,
    pub(super) _keep: Vec<Arc<Res>>,
}

impl RwqIndTable for SimRwqIndTable {
    fn ind_tbl_num(&self) -> u32 {
        self.res.id
    }
    fn wq_nums(&self) -> Vec<u32> {
        self.wqs.clone()
    }
}

impl WorkQueue for SimWq {
    fn wq_num(&self) -> u32 {
        self.res.id
    }

    fn state(&self) -> Result<WqState> {
        let w = lock(&self.res.world);
        w.wqs
            .get(&self.res.id)
            .map(|q| q.state)
            .ok_or_else(|| err(ErrorKind::InvalidState, "ibv_query_wq", "WQ destroyed"))
    }

    fn modify(&self, state: WqState, current: Option<WqState>) -> Result<()> {
        const OP: &str = "ibv_modify_wq";
        let mut w = lock(&self.res.world);
        let Some(q) = w.wqs.get_mut(&self.res.id) else {
            return Err(err(ErrorKind::InvalidState, OP, "WQ destroyed"));
        };
        // libmlx5's `mlx5_modify_wq` refuses a wrong current state (EINVAL).
        if current.is_some_and(|c| c != q.state) || !q.state.can_move_to(state) {
            return Err(err(
                ErrorKind::InvalidArgument,
                OP,
                format!("{:?} -> {state:?}", q.state),
            ));
        }
        if state == WqState::Reset || (q.state == WqState::Reset && state == WqState::Rdy) {
            // Entering RESET forgets the posted receives, and so does leaving it for RDY:
            // libmlx5's `mlx5_modify_wq` then resets the ring's indices and doorbell
            // record, so what was posted in RESET is never used.
            q.queue.clear();
            q.consumed = 0;
        }
        q.state = state;
        Ok(())
    }

    unsafe fn post_recv<'a>(&self, wrs: &[RecvWr<'a>]) -> Result<()> {
        const OP: &str = "ibv_post_wq_recv";
        let mut w = lock(&self.res.world);
        let Some(q) = w.wqs.get_mut(&self.res.id) else {
            return Err(err(ErrorKind::InvalidState, OP, "WQ destroyed"));
        };
        for (i, wr) in wrs.iter().enumerate() {
            if wr.sg_list.len() > q.max_sge as usize {
                return Err(err(ErrorKind::InvalidArgument, OP, "too many SGEs").with_bad_wr(i));
            }
            if q.queue.len() >= q.max_wr as usize {
                return Err(err(ErrorKind::QueueFull, OP, "the WQ is full").with_bad_wr(i));
            }
            q.queue.push_back(RecvWqe {
                wr_id: wr.wr_id,
                sges: SgeList::new(wr.sg_list),
            });
        }
        Ok(())
    }
}
