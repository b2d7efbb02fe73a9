//! Receive work queues (`ibv_create_wq`, or `mlx5dv_create_wq` for a striding RQ), their
//! indirection tables (`ibv_create_rwq_ind_table`) and RSS QPs (`ibv_create_qp_ex` with an
//! RX hash, in [`super::qp`]). The device decides what it offers: rxe has none of them
//! (libibverbs answers EOPNOTSUPP, [`ErrorKind::Unsupported`]), and a striding RQ needs
//! libmlx5.so.1 and an mlx5 device whose striding RQ caps include RAW_PACKET QPs (the
//! shim, shim/wq.c, loads libmlx5 at run time).
//!
//! A striding RQ's receives are not `ibv_post_wq_recv` (libmlx5 writes its entries where a
//! striding RQ has its `mlx5_wqe_srq_next_seg`): [`HwWq::post_recv`] writes each one as an
//! `mlx5_mprq_wqe` into the ring `mlx5dv_init_obj` handed out and then stores the
//! doorbell record, as spead2 does. The device carries no `wr_id` for such an entry: what
//! a completion's `wr_id` holds is libmlx5's (`rq.wrid[wqe_counter]`, which only
//! `ibv_post_wq_recv` fills). Nor does the ring say what the device consumed, so a post
//! to a striding RQ never fails with a full queue: the caller keeps at most `wqe_cnt`
//! entries outstanding, as spead2 counts them from the completions.

use std::fmt;
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

use verbs_api::{Error, ErrorKind, RecvWr, Result, RwqIndTable, WorkQueue, WqInitAttr, WqState};

use super::ctx::{invalid, lock, null, os_error, Ctx};
use super::resources::{post_recv_chunks, Cq, HwCq, HwPd, Pd};
use crate::ffi;

pub(crate) struct Wq {
    ptr: NonNull<ffi::ibv_wq>,
    wq_num: u32,
    /// A striding RQ's ring and the count of entries posted to it since the WQ last left
    /// RESET (libmlx5's `mlx5_modify_wq` zeroes the ring's indices and doorbell then).
    ring: Option<(ffi::shim_wq_ring, Mutex<u32>)>,
    _cq: Arc<Cq>,
    pd: Arc<Pd>,
}

// SAFETY: libibverbs WQs may be posted to and modified from any thread; the ring's count
// is behind a Mutex, which also serialises the writes of its entries.
unsafe impl Send for Wq {}
// SAFETY: as for Send.
unsafe impl Sync for Wq {}

impl Drop for Wq {
    fn drop(&mut self) {
        // SAFETY: every table holding this WQ holds an Arc<Wq>, so none is left; the WQ is
        // destroyed once, before its CQ and PD (whose Arcs drop after this).
        let _ = unsafe { ffi::shim_destroy_wq(self.ptr.as_ptr()) };
    }
}

/// A receive work queue (`struct ibv_wq`); dropping it destroys it.
#[derive(Clone)]
pub struct HwWq(pub(crate) Arc<Wq>);

impl fmt::Debug for HwWq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HwWq")
            .field("wq_num", &self.0.wq_num)
            .field("striding", &self.0.ring.is_some())
            .finish_non_exhaustive()
    }
}

impl HwWq {
    pub(crate) fn create(pd: &HwPd, cq: &HwCq, attr: &WqInitAttr) -> Result<Self> {
        let op = if attr.striding.is_some() {
            "mlx5dv_create_wq"
        } else {
            "ibv_create_wq"
        };
        let striding = attr.striding.map(|s| ffi::shim_striding {
            log_stride_bytes: s.single_stride_log_num_of_bytes,
            log_num_strides: s.single_wqe_log_num_of_strides,
            two_byte_shift: u32::from(s.two_byte_shift_en),
        });
        let mut ptr = std::ptr::null_mut();
        let mut wq_num = 0;
        let mut ring = ffi::shim_wq_ring::default();
        // SAFETY: the context, PD and CQ are alive; the striding attributes (if any) and
        // the outputs are valid for the call.
        let ret = unsafe {
            ffi::shim_create_wq(
                pd.0.ctx.ptr.as_ptr(),
                pd.0.ptr.as_ptr(),
                cq.0.ptr.as_ptr(),
                attr.max_wr,
                attr.max_sge,
                striding
                    .as_ref()
                    .map_or(std::ptr::null(), std::ptr::from_ref),
                &mut ptr,
                &mut wq_num,
                &mut ring,
            )
        };
        if ret != 0 {
            return Err(os_error(
                op,
                ret,
                format!("{attr:?} on {}", pd.0.ctx.name()),
            ));
        }
        let ptr = NonNull::new(ptr).ok_or_else(|| null(op))?;
        Ok(HwWq(Arc::new(Wq {
            ptr,
            wq_num,
            ring: striding.map(|_| (ring, Mutex::new(0))),
            _cq: cq.0.clone(),
            pd: pd.0.clone(),
        })))
    }

    pub(crate) fn ctx(&self) -> &Arc<Ctx> {
        &self.0.pd.ctx
    }
}

impl WorkQueue for HwWq {
    fn wq_num(&self) -> u32 {
        self.0.wq_num
    }

    /// What libibverbs recorded at the last successful modify: libibverbs has no query of
    /// a WQ, so a move to ERR the device made by itself does not show.
    fn state(&self) -> Result<WqState> {
        // SAFETY: the WQ is alive.
        let raw = unsafe { ffi::shim_wq_state(self.0.ptr.as_ptr()) };
        Ok(WqState::from_raw(raw).unwrap_or(WqState::Unknown))
    }

    fn modify(&self, state: WqState, current: Option<WqState>) -> Result<()> {
        const OP: &str = "ibv_modify_wq";
        let before = self.state()?;
        let cur = current.map_or(-1, |c| i32::try_from(c.as_raw()).unwrap_or(i32::MAX));
        // SAFETY: the WQ is alive.
        let ret = unsafe { ffi::shim_modify_wq(self.0.ptr.as_ptr(), state.as_raw(), cur) };
        if ret != 0 {
            return Err(os_error(
                OP,
                ret,
                format!("WQ {} from {before:?} to {state:?}", self.0.wq_num),
            ));
        }
        if let Some((_, head)) = &self.0.ring {
            if before == WqState::Reset && state == WqState::Rdy {
                *lock(head) = 0;
            }
        }
        Ok(())
    }

    unsafe fn post_recv(&self, wrs: &[RecvWr<'_>]) -> Result<()> {
        const OP: &str = "ibv_post_wq_recv";
        let Some((ring, head)) = &self.0.ring else {
            let wq = self.0.ptr.as_ptr();
            return post_recv_chunks(OP, wrs, |chunk, bad| {
                // SAFETY: the WQ is alive; `chunk` is valid for its length; the SGE lists
                // it points to live in `wrs` for this call, and the caller vouches for the
                // memory they name (the trait's contract).
                unsafe { ffi::shim_post_wq_recv(wq, chunk.as_ptr(), chunk.len(), bad) }
            });
        };
        let mut head = lock(head);
        for (i, wr) in wrs.iter().enumerate() {
            let [sge] = wr.sg_list else {
                return Err(invalid(
                    "mlx5_mprq_wqe",
                    format!(
                        "a striding RQ's receive is one SGE over one WQE's buffer, not {}",
                        wr.sg_list.len()
                    ),
                )
                .with_bad_wr(i));
            };
            // SAFETY: the ring is the WQ's own (alive as long as the WQ) and `head` is
            // masked to one of its `wqe_cnt` entries by the shim; the Mutex keeps other
            // posts out; the buffer the entry names is the caller's to vouch for.
            unsafe { ffi::shim_mprq_post(ring, *head, sge.addr, sge.length, sge.lkey) };
            *head = head.wrapping_add(1);
        }
        Ok(())
    }
}

pub(crate) struct IndTable {
    pub(crate) ptr: NonNull<ffi::ibv_rwq_ind_table>,
    num: u32,
    wqs: Vec<Arc<Wq>>,
    pub(crate) ctx: Arc<Ctx>,
}

// SAFETY: a table is only destroyed (in Drop), which libibverbs allows from any thread.
unsafe impl Send for IndTable {}
// SAFETY: as for Send; IndTable has no interior mutability.
unsafe impl Sync for IndTable {}

impl Drop for IndTable {
    fn drop(&mut self) {
        // SAFETY: every RSS QP over this table holds an Arc<IndTable>, so none is left;
        // the table is destroyed once, before its WQs (whose Arcs drop after this).
        let _ = unsafe { ffi::shim_destroy_rwq_ind_table(self.ptr.as_ptr()) };
    }
}

/// A receive work queue indirection table (`struct ibv_rwq_ind_table`).
#[derive(Clone)]
pub struct HwRwqIndTable(pub(crate) Arc<IndTable>);

impl fmt::Debug for HwRwqIndTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HwRwqIndTable")
            .field("ind_tbl_num", &self.0.num)
            .field("wqs", &self.wq_nums())
            .finish()
    }
}

impl HwRwqIndTable {
    /// A table of `wqs`, a power of two of them (the size libibverbs takes is a log2).
    /// With none, no table can be asked for: a device without work queues (no raw packet
    /// support, as backend-hw tells it for RAW_PACKET QPs) answers Unsupported, as
    /// libibverbs would; another InvalidArgument.
    pub(crate) fn create(ctx: &Arc<Ctx>, wqs: &[&HwWq], has_wqs: bool) -> Result<Self> {
        const OP: &str = "ibv_create_rwq_ind_table";
        if wqs.is_empty() && !has_wqs {
            return Err(Error::new(
                ErrorKind::Unsupported,
                OP,
                format!("{} has no work queues", ctx.name()),
            )
            .with_errno(crate::diagnose::errno::EOPNOTSUPP));
        }
        if wqs.is_empty() || !wqs.len().is_power_of_two() {
            return Err(invalid(
                OP,
                format!("{} WQs: a table holds a power of two of them", wqs.len()),
            ));
        }
        for q in wqs {
            ctx.same(q.ctx(), OP)?;
        }
        let mut raw: Vec<*mut ffi::ibv_wq> = wqs.iter().map(|q| q.0.ptr.as_ptr()).collect();
        let mut ptr = std::ptr::null_mut();
        let mut num = 0;
        // SAFETY: the context and every WQ are alive; `raw` holds `1 << log` of them.
        let ret = unsafe {
            ffi::shim_create_rwq_ind_table(
                ctx.ptr.as_ptr(),
                raw.as_mut_ptr(),
                wqs.len().trailing_zeros(),
                &mut ptr,
                &mut num,
            )
        };
        if ret != 0 {
            return Err(os_error(OP, ret, format!("{} WQs", wqs.len())));
        }
        let ptr = NonNull::new(ptr).ok_or_else(|| null(OP))?;
        Ok(HwRwqIndTable(Arc::new(IndTable {
            ptr,
            num,
            wqs: wqs.iter().map(|q| q.0.clone()).collect(),
            ctx: ctx.clone(),
        })))
    }
}

impl RwqIndTable for HwRwqIndTable {
    fn ind_tbl_num(&self) -> u32 {
        self.0.num
    }

    fn wq_nums(&self) -> Vec<u32> {
        self.0.wqs.iter().map(|q| q.wq_num).collect()
    }
}
