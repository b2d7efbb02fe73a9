//! Shared receive queues (`struct ibv_srq`), and posting receives in chunks (also the QPs').

use std::fmt;
use std::os::raw::c_int;
use std::ptr::NonNull;
use std::sync::Arc;

use verbs_api::{
    Error, ErrorKind, RecvWr, Result, SharedReceiveQueue, SrqAttr, SrqAttrMask, SrqInitAttr,
};

use super::pd::{HwPd, Pd};
use crate::diagnose::errno;
use crate::ffi;
use crate::hw::ctx::{null, os_error, Ctx, CHUNK};

pub(crate) struct Srq {
    pub(crate) ptr: NonNull<ffi::ibv_srq>,
    handle: u32,
    max_sge: u32,
    pd: Arc<Pd>,
}

// SAFETY: libibverbs SRQs may be used from any thread; Srq only destroys in Drop.
unsafe impl Send for Srq {}
// SAFETY: as for Send.
unsafe impl Sync for Srq {}

impl Drop for Srq {
    fn drop(&mut self) {
        // SAFETY: every QP using this SRQ holds an Arc<Srq>, so none is left.
        let _ = unsafe { ffi::shim_destroy_srq(self.ptr.as_ptr()) };
    }
}

/// A shared receive queue (`struct ibv_srq`).
#[derive(Clone)]
pub struct HwSrq(pub(crate) Arc<Srq>);

impl fmt::Debug for HwSrq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HwSrq")
            .field("handle", &self.0.handle)
            .field("max_sge", &self.0.max_sge)
            .finish()
    }
}

impl HwSrq {
    pub(crate) fn create(pd: &HwPd, init: &SrqInitAttr) -> Result<Self> {
        const OP: &str = "ibv_create_srq";
        let mut attr = ffi::shim_srq_attr {
            max_wr: init.attr.max_wr,
            max_sge: init.attr.max_sge,
            srq_limit: init.attr.srq_limit,
        };
        let mut ptr = std::ptr::null_mut();
        let mut handle = 0;
        // SAFETY: the PD is alive; outputs are valid.
        let ret =
            unsafe { ffi::shim_create_srq(pd.0.ptr.as_ptr(), &mut attr, &mut ptr, &mut handle) };
        if ret != 0 {
            return Err(os_error(OP, ret, format!("{:?}", init.attr)));
        }
        let ptr = NonNull::new(ptr).ok_or_else(|| null(OP))?;
        Ok(HwSrq(Arc::new(Srq {
            ptr,
            handle,
            max_sge: attr.max_sge.max(init.attr.max_sge),
            pd: pd.0.clone(),
        })))
    }

    pub(crate) fn ctx(&self) -> &Arc<Ctx> {
        &self.0.pd.ctx
    }
}

/// Builds the shim's receive requests for `wrs`, `CHUNK` at a time, and posts each chunk
/// with `post`; the error names the absolute index of the first request not posted.
pub(crate) fn post_recv_chunks(
    op: &'static str,
    wrs: &[RecvWr<'_>],
    mut post: impl FnMut(&[ffi::shim_recv_wr], &mut usize) -> c_int,
) -> Result<()> {
    // The SGE count is the device's to check (rdma-core's rxe provider refuses a request
    // with too many, after posting the ones before it).
    let mut buf = [ffi::shim_recv_wr::default(); CHUNK];
    for (c, chunk) in wrs.chunks(CHUNK).enumerate() {
        for (dst, wr) in buf.iter_mut().zip(chunk) {
            *dst = ffi::shim_recv_wr {
                wr_id: wr.wr_id,
                sg_list: wr.sg_list.as_ptr(),
                num_sge: u32::try_from(wr.sg_list.len()).unwrap_or(u32::MAX),
                pad: 0,
            };
        }
        let mut bad = 0usize;
        let ret = post(&buf[..chunk.len()], &mut bad);
        if ret != 0 {
            let index = c * CHUNK + bad.min(chunk.len());
            return Err(post_error(op, ret).with_bad_wr(index));
        }
    }
    Ok(())
}

/// The error of a post that failed with `ret`: ENOMEM means the queue is full.
pub(crate) fn post_error(op: &'static str, ret: c_int) -> Error {
    match ret {
        errno::ENOMEM => {
            Error::new(ErrorKind::QueueFull, op, "the work queue is full").with_errno(ret)
        }
        errno::EINVAL => Error::from_errno(
            op,
            ret,
            "the device rejected the work request (SGE count, inline size, opcode or state)",
        ),
        _ => os_error(op, ret, "post failed"),
    }
}

impl SharedReceiveQueue for HwSrq {
    fn handle(&self) -> u32 {
        self.0.handle
    }

    unsafe fn post_recv(&self, wrs: &[RecvWr<'_>]) -> Result<()> {
        let srq = self.0.ptr.as_ptr();
        post_recv_chunks("ibv_post_srq_recv", wrs, |chunk, bad| {
            // SAFETY: the SRQ is alive; `chunk` is valid for its length; the SGE lists
            // it points to live in `wrs` for this call, and the caller vouches for the
            // memory they name (the trait's contract).
            unsafe { ffi::shim_post_srq_recv(srq, chunk.as_ptr(), chunk.len(), bad) }
        })
    }

    fn modify(&self, attr: &SrqAttr, mask: SrqAttrMask) -> Result<()> {
        let raw = ffi::shim_srq_attr {
            max_wr: attr.max_wr,
            max_sge: attr.max_sge,
            srq_limit: attr.srq_limit,
        };
        let mask_c = c_int::try_from(mask.bits()).unwrap_or(0);
        // SAFETY: the SRQ is alive; `raw` is valid for the call.
        let ret = unsafe { ffi::shim_modify_srq(self.0.ptr.as_ptr(), &raw, mask_c) };
        if ret != 0 {
            return Err(os_error(
                "ibv_modify_srq",
                ret,
                format!("SRQ {} with {attr:?} ({mask:?})", self.0.handle),
            ));
        }
        Ok(())
    }

    fn query(&self) -> Result<SrqAttr> {
        let mut raw = ffi::shim_srq_attr::default();
        // SAFETY: the SRQ is alive; `raw` is a valid output.
        let ret = unsafe { ffi::shim_query_srq(self.0.ptr.as_ptr(), &mut raw) };
        if ret != 0 {
            return Err(os_error(
                "ibv_query_srq",
                ret,
                format!("SRQ {}", self.0.handle),
            ));
        }
        Ok(SrqAttr {
            max_wr: raw.max_wr,
            max_sge: raw.max_sge,
            srq_limit: raw.srq_limit,
        })
    }
}
