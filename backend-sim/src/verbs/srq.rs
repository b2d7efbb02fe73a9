//! Shared receive queues.

use crate::verbs::objects::{err, lock, Res};
use crate::verbs::personality::Personality;
use crate::verbs::world::{RecvWqe, SgeList};
use std::sync::Arc;
use verbs_api::{ErrorKind, RecvWr, Result, SharedReceiveQueue, SrqAttr, SrqAttrMask};

/// A shared receive queue.
#[derive(Debug)]
pub struct SimSrq {
    pub(crate) res: Arc<Res>,
    pub(crate) _pd: Arc<Res>,
}

impl SharedReceiveQueue for SimSrq {
    fn handle(&self) -> u32 {
        self.res.id
    }

    unsafe fn post_recv<'a>(&self, wrs: &[RecvWr<'a>]) -> Result<()> {
        const OP: &str = "ibv_post_srq_recv";
        let mut w = lock(&self.res.world);
        let Some(srq) = w.srqs.get_mut(&self.res.id) else {
            return Err(err(ErrorKind::InvalidState, OP, "SRQ destroyed"));
        };
        for (i, wr) in wrs.iter().enumerate() {
            if wr.sg_list.len() > srq.attr.max_sge as usize {
                return Err(err(ErrorKind::InvalidArgument, OP, "too many SGEs").with_bad_wr(i));
            }
            if srq.queue.len() >= srq.attr.max_wr as usize {
                return Err(err(ErrorKind::QueueFull, OP, "the SRQ is full").with_bad_wr(i));
            }
            srq.queue.push_back(RecvWqe {
                wr_id: wr.wr_id,
                sges: SgeList::new(wr.sg_list),
            });
        }
        Ok(())
    }

    fn modify(&self, attr: &SrqAttr, mask: SrqAttrMask) -> Result<()> {
        const OP: &str = "ibv_modify_srq";
        let mut w = lock(&self.res.world);
        let Some(srq) = w.srqs.get_mut(&self.res.id) else {
            return Err(err(ErrorKind::InvalidState, OP, "SRQ destroyed"));
        };
        // A resize rounds like creation; the kernel refuses a size of 0 or one that
        // cannot hold the receives already posted (`rxe_srq_chk_attr`, `rxe_queue_resize`).
        let max_wr = if mask.contains(SrqAttrMask::MAX_WR) {
            let depth = Personality::queue_depth(attr.max_wr);
            if attr.max_wr == 0 || (depth as usize) < srq.queue.len() {
                return Err(err(
                    ErrorKind::InvalidArgument,
                    OP,
                    format!(
                        "max_wr {} cannot hold the {} receives posted",
                        attr.max_wr,
                        srq.queue.len()
                    ),
                ));
            }
            depth
        } else {
            srq.attr.max_wr
        };
        if mask.contains(SrqAttrMask::LIMIT) && attr.srq_limit > max_wr {
            return Err(err(ErrorKind::InvalidArgument, OP, "limit above max_wr"));
        }
        srq.attr.max_wr = max_wr;
        if mask.contains(SrqAttrMask::LIMIT) {
            srq.attr.srq_limit = attr.srq_limit;
        }
        Ok(())
    }

    fn query(&self) -> Result<SrqAttr> {
        let w = lock(&self.res.world);
        w.srqs
            .get(&self.res.id)
            .map(|s| s.attr)
            .ok_or_else(|| err(ErrorKind::InvalidState, "ibv_query_srq", "SRQ destroyed"))
    }
}
