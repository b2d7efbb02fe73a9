//! Work queues, indirection tables and RSS QPs: not wrapped by this backend. The C shim
//! has no `ibv_create_wq`, `ibv_create_rwq_ind_table` or RX-hash `ibv_create_qp_ex`
//! (nor `mlx5dv_create_wq`), so [`verbs_api::Context::create_wq`],
//! [`verbs_api::Context::create_rwq_ind_table`] and [`verbs_api::Context::create_rss_qp`]
//! fail with [`ErrorKind::Unsupported`] (errno EOPNOTSUPP) on every device, whatever it
//! offers, and no value of [`HwWq`] or [`HwRwqIndTable`] can exist.

use verbs_api::{Error, ErrorKind, RecvWr, Result, RwqIndTable, WorkQueue, WqState};

/// A work queue of this backend: none can be made (the type has no values).
#[derive(Debug)]
pub enum HwWq {}

/// An indirection table of this backend: none can be made (the type has no values).
#[derive(Debug)]
pub enum HwRwqIndTable {}

impl WorkQueue for HwWq {
    fn wq_num(&self) -> u32 {
        match *self {}
    }
    fn state(&self) -> Result<WqState> {
        match *self {}
    }
    fn modify(&self, _state: WqState, _current: Option<WqState>) -> Result<()> {
        match *self {}
    }
    unsafe fn post_recv<'a>(&self, _wrs: &[RecvWr<'a>]) -> Result<()> {
        match *self {}
    }
}

impl RwqIndTable for HwRwqIndTable {
    fn ind_tbl_num(&self) -> u32 {
        match *self {}
    }
    fn wq_nums(&self) -> Vec<u32> {
        match *self {}
    }
}

/// The error of every work-queue call of this backend.
pub(crate) fn not_wrapped(op: &'static str) -> Error {
    Error::new(
        ErrorKind::Unsupported,
        op,
        "backend-hw does not wrap work queues, indirection tables or RSS QPs",
    )
    .with_errno(95) // EOPNOTSUPP
}
