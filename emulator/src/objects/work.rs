//! Work requests from programs' C structs: scatter-gather lists used in place, memory
//! window binds, and chains of requests posted one at a time.

use std::ffi::c_int;

use verbs_api::{AccessFlags, MwBindInfo, RecvWr, Sge};

use crate::base::errno::errno_of;
use crate::base::ffi;
use crate::base::pointer::try_ref;
use crate::objects::handles::EmuMr;

// `struct ibv_sge` and verbs-api's `Sge` are the same three fields in the same places, so a
// program's scatter-gather array is used in place (no copy per post).
const _: () = {
    assert!(std::mem::size_of::<ffi::ibv_sge>() == std::mem::size_of::<Sge>());
    assert!(std::mem::offset_of!(ffi::ibv_sge, addr) == std::mem::offset_of!(Sge, addr));
    assert!(std::mem::offset_of!(ffi::ibv_sge, length) == std::mem::offset_of!(Sge, length));
    assert!(std::mem::offset_of!(ffi::ibv_sge, lkey) == std::mem::offset_of!(Sge, lkey));
};

/// A work request's scatter-gather list, in place.
///
/// # Safety
/// `sg_list` points at `num_sge` valid entries (or `num_sge` is 0).
pub(crate) unsafe fn sges<'a>(
    sg_list: *mut ffi::ibv_sge,
    num_sge: c_int,
) -> Result<&'a [Sge], c_int> {
    let n = usize::try_from(num_sge).map_err(|_| libc::EINVAL)?;
    if n == 0 {
        return Ok(&[]);
    }
    if sg_list.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: the caller's `n` entries; ibv_sge and Sge have one layout (checked above).
    Ok(unsafe { std::slice::from_raw_parts(sg_list.cast::<Sge>(), n) })
}

/// A program's `ibv_mw_bind_info` as verbs-api's (a NULL region: lkey 0, for an unbind
/// of length 0).
///
/// # Safety
/// `b.mr` is NULL or a live MR of ours.
pub(crate) unsafe fn bind_info(b: &ffi::ibv_mw_bind_info) -> MwBindInfo {
    // SAFETY: the caller's contract.
    let mr_lkey = unsafe { try_ref::<EmuMr>(b.mr) }.map_or(0, |m| m.raw.lkey);
    MwBindInfo {
        mr_lkey,
        addr: b.addr,
        length: b.length,
        mw_access_flags: AccessFlags::from_bits_retain(b.mw_access_flags),
    }
}

/// A work request of a program's chain (`ibv_send_wr`, `ibv_recv_wr`).
pub(crate) trait Chained {
    /// The next request, NULL at the end.
    fn next(&self) -> *mut Self;
}

impl Chained for ffi::ibv_send_wr {
    fn next(&self) -> *mut Self {
        self.next
    }
}

impl Chained for ffi::ibv_recv_wr {
    fn next(&self) -> *mut Self {
        self.next
    }
}

/// Posts a program's chain one request at a time with `post`; on failure `*bad_wr` is
/// the first request not posted and the errno is returned.
///
/// # Safety
/// `wr` is NULL or a chain of valid requests; `bad_wr` is NULL or valid for a write.
pub(crate) unsafe fn post_chain<W: Chained>(
    wr: *mut W,
    bad_wr: *mut *mut W,
    mut post: impl FnMut(&W) -> Result<(), c_int>,
) -> c_int {
    let mut cur = wr;
    while !cur.is_null() {
        // SAFETY: the program's chain of valid requests.
        let w = unsafe { &*cur };
        if let Err(e) = post(w) {
            if !bad_wr.is_null() {
                // SAFETY: the caller's out-pointer.
                unsafe { *bad_wr = cur };
            }
            return e;
        }
        cur = w.next();
    }
    0
}

/// Posts one receive request to `post_recv` (a QP's or an SRQ's).
///
/// # Safety
/// `w`'s buffers lie in the program's registered memory, valid until the completion.
pub(crate) unsafe fn post_one_recv(
    w: &ffi::ibv_recv_wr,
    post_recv: impl FnOnce(&[RecvWr<'_>]) -> verbs_api::Result<()>,
) -> Result<(), c_int> {
    // SAFETY: the program's SGE array.
    let sg = unsafe { sges(w.sg_list, w.num_sge) }?;
    post_recv(&[RecvWr::new(w.wr_id, sg)]).map_err(|e| errno_of(&e))
}
