//! Extended QPs (`verbs_context.create_qp_ex`, behind the inline `ibv_create_qp_ex`) and
//! their send API: `ibv_wr_start`, the `ibv_wr_*` opcodes and setters, and
//! `ibv_wr_complete` / `ibv_wr_abort`, reached through the `ibv_qp_ex` function pointers.
//! A session builds work requests here; `ibv_wr_complete` posts them in order.

use std::ffi::{c_int, c_void};
use std::ptr::null_mut;

use verbs_api::{QueuePair, SendFlags, SendOpcode, SendWr, Sge, WrDetail};

use crate::base::boundary::{boundary, Nothing, Null, ReturnsErrno};
use crate::base::errno::errno_of;
use crate::base::errno::set_errno;
use crate::base::ffi;
use crate::base::log::log_unsupported_once;
use crate::base::pointer::try_mut_from_ptr;
use crate::base::sync::lock;
use crate::objects::handles::{emu, EmuAh, EmuMw, EmuQp};
use crate::objects::pending::{Pending, PendingWr, Remote};
use crate::verbs::qp::create_qp;

/// The send opcodes an extended QP of the emulator can build.
const SUPPORTED_SEND_OPS: u64 = (ffi::IBV_QP_EX_WITH_RDMA_WRITE
    | ffi::IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM
    | ffi::IBV_QP_EX_WITH_SEND
    | ffi::IBV_QP_EX_WITH_SEND_WITH_IMM
    | ffi::IBV_QP_EX_WITH_RDMA_READ
    | ffi::IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP
    | ffi::IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD
    | ffi::IBV_QP_EX_WITH_LOCAL_INV
    | ffi::IBV_QP_EX_WITH_BIND_MW
    | ffi::IBV_QP_EX_WITH_SEND_WITH_INV) as u64;

/// `verbs_context.create_qp_ex`.
///
/// # Safety
/// `ctx` is a live context of ours; `attr` is valid and names live objects of ours.
pub unsafe extern "C" fn create_qp_ex(
    ctx: *mut ffi::ibv_context,
    attr: *mut ffi::ibv_qp_init_attr_ex,
) -> *mut ffi::ibv_qp {
    boundary(Null, move || {
        let einval = || {
            set_errno(libc::EINVAL);
            null_mut()
        };
        if ctx.is_null() {
            return einval();
        }
        // SAFETY: NULL or the caller's valid attributes.
        let a: &mut ffi::ibv_qp_init_attr_ex = unsafe { try_mut_from_ptr!(attr, einval()) };
        let mut known = ffi::IBV_QP_INIT_ATTR_PD | ffi::IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
        // No create flags at all is what a QP without the mask gets (rdma-core's test_qp
        // draws the mask at random, and a real rxe takes it).
        if a.create_flags == 0 {
            known |= ffi::IBV_QP_INIT_ATTR_CREATE_FLAGS;
        }
        if a.comp_mask & ffi::IBV_QP_INIT_ATTR_PD == 0 || a.pd.is_null() {
            set_errno(libc::EINVAL);
            return null_mut();
        }
        if a.comp_mask & !known != 0 {
            log_unsupported_once(
                "ibv_create_qp_ex",
                "XRC, create flags, TSO, RSS and source QPN",
            );
            set_errno(libc::EOPNOTSUPP);
            return null_mut();
        }
        let with_ops = a.comp_mask & ffi::IBV_QP_INIT_ATTR_SEND_OPS_FLAGS != 0;
        if with_ops && a.send_ops_flags & !SUPPORTED_SEND_OPS != 0 {
            log_unsupported_once(
                "ibv_create_qp_ex",
                "send ops other than RDMA write/read, send, immediates, atomics, window binds and \
             invalidations",
            );
            set_errno(libc::EOPNOTSUPP);
            return null_mut();
        }
        let mut init = ffi::ibv_qp_init_attr {
            qp_context: a.qp_context,
            send_cq: a.send_cq,
            recv_cq: a.recv_cq,
            srq: a.srq,
            cap: a.cap,
            qp_type: a.qp_type,
            sq_sig_all: a.sq_sig_all,
        };
        // SAFETY: the caller's live PD and objects, and a local attribute.
        let q = unsafe { create_qp(a.pd, &mut init, with_ops.then_some(fill_send_ops)) };
        a.cap = init.cap;
        q.cast()
    })
}

fn fill_send_ops(q: &mut ffi::ibv_qp_ex) {
    q.wr_start = Some(wr_start);
    q.wr_complete = Some(wr_complete);
    q.wr_abort = Some(wr_abort);
    q.wr_send = Some(wr_send);
    q.wr_send_imm = Some(wr_send_imm);
    q.wr_rdma_write = Some(wr_rdma_write);
    q.wr_rdma_write_imm = Some(wr_rdma_write_imm);
    q.wr_rdma_read = Some(wr_rdma_read);
    q.wr_atomic_cmp_swp = Some(wr_atomic_cmp_swp);
    q.wr_atomic_fetch_add = Some(wr_atomic_fetch_add);
    q.wr_bind_mw = Some(wr_bind_mw);
    q.wr_local_inv = Some(wr_local_inv);
    q.wr_send_inv = Some(wr_send_inv);
    q.wr_set_ud_addr = Some(wr_set_ud_addr);
    q.wr_set_sge = Some(wr_set_sge);
    q.wr_set_sge_list = Some(wr_set_sge_list);
    q.wr_set_inline_data = Some(wr_set_inline_data);
    q.wr_set_inline_data_list = Some(wr_set_inline_data_list);
}

/// Runs `f` on the session of the live extended QP `qp`.
///
/// # Safety
/// `qp` is a live extended QP of ours.
unsafe fn with_session<R>(qp: *mut ffi::ibv_qp_ex, f: impl FnOnce(&EmuQp, &mut Pending) -> R) -> R {
    // SAFETY: the inline caller passes a live QP of ours.
    let q: &EmuQp = unsafe { emu::<EmuQp>(qp.cast()) };
    let mut p = lock(&q.pending);
    f(q, &mut p)
}

/// Starts a work request with the QP's current `wr_id` and `wr_flags`.
///
/// # Safety
/// `qp` is a live extended QP of ours.
unsafe fn begin(qp: *mut ffi::ibv_qp_ex, opcode: SendOpcode, imm: u32, remote: Remote) {
    // SAFETY: the program set wr_id and wr_flags in its own QP struct before this call.
    let (wr_id, flags) = unsafe { ((*qp).wr_id, (*qp).wr_flags) };
    // SAFETY: the caller's contract.
    unsafe {
        with_session(qp, |_, p| {
            p.wrs.push(PendingWr {
                wr_id,
                flags,
                opcode,
                imm,
                remote,
                ud: None,
                sges: Vec::new(),
                inline: None,
            });
        });
    }
}

/// Applies `f` to the request being built; a setter with no request is EINVAL at complete.
///
/// # Safety
/// `qp` is a live extended QP of ours.
unsafe fn set(qp: *mut ffi::ibv_qp_ex, f: impl FnOnce(&mut PendingWr)) {
    // SAFETY: the caller's contract.
    unsafe {
        with_session(qp, |_, p| match p.wrs.last_mut() {
            Some(w) => f(w),
            None => {
                p.error.get_or_insert(libc::EINVAL);
            }
        });
    }
}

unsafe extern "C" fn wr_start(qp: *mut ffi::ibv_qp_ex) {
    boundary(Nothing, move || {
        // SAFETY: the inline caller passes a live QP of ours.
        unsafe { with_session(qp, |_, p| *p = Pending::default()) };
    })
}

unsafe extern "C" fn wr_abort(qp: *mut ffi::ibv_qp_ex) {
    boundary(Nothing, move || {
        // SAFETY: the inline caller passes a live QP of ours.
        unsafe { with_session(qp, |_, p| *p = Pending::default()) };
    })
}

unsafe extern "C" fn wr_send(qp: *mut ffi::ibv_qp_ex) {
    boundary(Nothing, move || {
        // SAFETY: the inline caller passes a live QP of ours.
        unsafe { begin(qp, SendOpcode::Send, 0, Remote::None) };
    })
}

unsafe extern "C" fn wr_send_imm(qp: *mut ffi::ibv_qp_ex, imm: u32) {
    boundary(Nothing, move || {
        // SAFETY: the inline caller passes a live QP of ours.
        unsafe { begin(qp, SendOpcode::SendWithImm, u32::from_be(imm), Remote::None) };
    })
}

unsafe extern "C" fn wr_rdma_write(qp: *mut ffi::ibv_qp_ex, rkey: u32, addr: u64) {
    boundary(Nothing, move || {
        // SAFETY: the inline caller passes a live QP of ours.
        unsafe { begin(qp, SendOpcode::RdmaWrite, 0, Remote::Rdma { addr, rkey }) };
    })
}

unsafe extern "C" fn wr_rdma_write_imm(qp: *mut ffi::ibv_qp_ex, rkey: u32, addr: u64, imm: u32) {
    boundary(Nothing, move || {
        let remote = Remote::Rdma { addr, rkey };
        // SAFETY: the inline caller passes a live QP of ours.
        unsafe { begin(qp, SendOpcode::RdmaWriteWithImm, u32::from_be(imm), remote) };
    })
}

unsafe extern "C" fn wr_rdma_read(qp: *mut ffi::ibv_qp_ex, rkey: u32, addr: u64) {
    boundary(Nothing, move || {
        // SAFETY: the inline caller passes a live QP of ours.
        unsafe { begin(qp, SendOpcode::RdmaRead, 0, Remote::Rdma { addr, rkey }) };
    })
}

unsafe extern "C" fn wr_atomic_cmp_swp(
    qp: *mut ffi::ibv_qp_ex,
    rkey: u32,
    addr: u64,
    compare: u64,
    swap: u64,
) {
    boundary(Nothing, move || {
        let remote = Remote::Atomic {
            addr,
            rkey,
            compare_add: compare,
            swap,
        };
        // SAFETY: the inline caller passes a live QP of ours.
        unsafe { begin(qp, SendOpcode::AtomicCmpAndSwp, 0, remote) };
    })
}

unsafe extern "C" fn wr_atomic_fetch_add(qp: *mut ffi::ibv_qp_ex, rkey: u32, addr: u64, add: u64) {
    boundary(Nothing, move || {
        let remote = Remote::Atomic {
            addr,
            rkey,
            compare_add: add,
            swap: 0,
        };
        // SAFETY: the inline caller passes a live QP of ours.
        unsafe { begin(qp, SendOpcode::AtomicFetchAndAdd, 0, remote) };
    })
}

unsafe extern "C" fn wr_bind_mw(
    qp: *mut ffi::ibv_qp_ex,
    mw: *mut ffi::ibv_mw,
    rkey: u32,
    info: *const ffi::ibv_mw_bind_info,
) {
    boundary(Nothing, move || {
        if mw.is_null() || info.is_null() {
            // SAFETY: the inline caller passes a live QP of ours.
            unsafe {
                with_session(qp, |_, p| {
                    p.error.get_or_insert(libc::EINVAL);
                });
            }
            return;
        }
        // SAFETY: a live window of ours and a valid bind (the verb's contract).
        let (m, info): (&EmuMw, &ffi::ibv_mw_bind_info) = unsafe { (emu(mw), &*info) };
        // As rxe's `wr_bind_mw`: the window is named by the rkey its struct holds now.
        m.mw.set_rkey(m.raw.rkey);
        let remote = Remote::Bind {
            mw: m.raw.handle,
            rkey,
            // SAFETY: the bind's region is NULL or a live MR of ours.
            info: unsafe { crate::objects::work::bind_info(info) },
        };
        // SAFETY: the inline caller passes a live QP of ours.
        unsafe { begin(qp, SendOpcode::BindMw, 0, remote) };
    })
}

unsafe extern "C" fn wr_local_inv(qp: *mut ffi::ibv_qp_ex, rkey: u32) {
    boundary(Nothing, move || {
        // SAFETY: the inline caller passes a live QP of ours.
        unsafe { begin(qp, SendOpcode::LocalInv, 0, Remote::Invalidate { rkey }) };
    })
}

unsafe extern "C" fn wr_send_inv(qp: *mut ffi::ibv_qp_ex, rkey: u32) {
    boundary(Nothing, move || {
        // SAFETY: the inline caller passes a live QP of ours.
        unsafe { begin(qp, SendOpcode::SendWithInv, 0, Remote::Invalidate { rkey }) };
    })
}

unsafe extern "C" fn wr_set_ud_addr(
    qp: *mut ffi::ibv_qp_ex,
    ah: *mut ffi::ibv_ah,
    remote_qpn: u32,
    remote_qkey: u32,
) {
    boundary(Nothing, move || {
        // SAFETY: the inline caller passes a live QP of ours.
        unsafe { set(qp, |w| w.ud = Some((ah as usize, remote_qpn, remote_qkey))) };
    })
}

unsafe extern "C" fn wr_set_sge(qp: *mut ffi::ibv_qp_ex, lkey: u32, addr: u64, length: u32) {
    boundary(Nothing, move || {
        // SAFETY: the inline caller passes a live QP of ours.
        unsafe { set(qp, |w| w.sges = vec![Sge { addr, length, lkey }]) };
    })
}

unsafe extern "C" fn wr_set_sge_list(
    qp: *mut ffi::ibv_qp_ex,
    num: usize,
    list: *const ffi::ibv_sge,
) {
    boundary(Nothing, move || {
        let sges = if num == 0 || list.is_null() {
            Vec::new()
        } else {
            // SAFETY: the program's array of `num` SGEs; ibv_sge and Sge share one layout
            // (checked in objects/work.rs).
            unsafe { std::slice::from_raw_parts(list.cast::<Sge>(), num) }.to_vec()
        };
        // SAFETY: the inline caller passes a live QP of ours.
        unsafe { set(qp, |w| w.sges = sges) };
    })
}

unsafe extern "C" fn wr_set_inline_data(qp: *mut ffi::ibv_qp_ex, addr: *mut c_void, len: usize) {
    boundary(Nothing, move || {
        let data = if len == 0 || addr.is_null() {
            Vec::new()
        } else {
            // SAFETY: the program's `len` readable bytes, valid for this call.
            unsafe { std::slice::from_raw_parts(addr.cast::<u8>(), len) }.to_vec()
        };
        // SAFETY: the inline caller passes a live QP of ours.
        unsafe { set(qp, |w| w.inline = Some(data)) };
    })
}

unsafe extern "C" fn wr_set_inline_data_list(
    qp: *mut ffi::ibv_qp_ex,
    num: usize,
    list: *const ffi::ibv_data_buf,
) {
    boundary(Nothing, move || {
        let mut data = Vec::new();
        if num > 0 && !list.is_null() {
            // SAFETY: the program's array of `num` buffers, each `length` readable bytes.
            for b in unsafe { std::slice::from_raw_parts(list, num) } {
                if b.length > 0 && !b.addr.is_null() {
                    // SAFETY: as above.
                    data.extend_from_slice(unsafe {
                        std::slice::from_raw_parts(b.addr.cast::<u8>(), b.length)
                    });
                }
            }
        }
        // SAFETY: the inline caller passes a live QP of ours.
        unsafe { set(qp, |w| w.inline = Some(data)) };
    })
}

/// Posts one built request.
///
/// # Safety
/// Its SGEs lie in the program's registered memory valid until the completion; its AH
/// is a live AH of ours.
unsafe fn post(q: &EmuQp, w: &PendingWr) -> Result<(), c_int> {
    let mut flags = SendFlags::from_bits(w.flags).ok_or(libc::EINVAL)?;
    let inline_sge;
    let sg_list: &[Sge] = match &w.inline {
        Some(data) => {
            flags |= SendFlags::INLINE;
            let length = u32::try_from(data.len()).map_err(|_| libc::EINVAL)?;
            inline_sge = [Sge {
                addr: data.as_ptr() as u64,
                length,
                lkey: 0,
            }];
            if length == 0 {
                &[]
            } else {
                &inline_sge
            }
        }
        None => &w.sges,
    };
    let detail = match (w.ud, w.remote) {
        (Some((ah, remote_qpn, remote_qkey)), _) => {
            if ah == 0 {
                return Err(libc::EINVAL);
            }
            // SAFETY: the program's live AH (its contract for UD sends).
            let ah: &EmuAh = unsafe { emu(ah as *mut ffi::ibv_ah) };
            WrDetail::Ud {
                ah: &ah.ah,
                remote_qpn,
                remote_qkey,
            }
        }
        (None, Remote::Rdma { addr, rkey }) => WrDetail::Rdma {
            remote_addr: addr,
            rkey,
        },
        (
            None,
            Remote::Atomic {
                addr,
                rkey,
                compare_add,
                swap,
            },
        ) => WrDetail::Atomic {
            remote_addr: addr,
            compare_add,
            swap,
            rkey,
        },
        (None, Remote::None) => WrDetail::None,
        (None, Remote::Invalidate { rkey }) => WrDetail::Invalidate { rkey },
        (None, Remote::Bind { mw, rkey, info }) => WrDetail::BindMw {
            mw,
            rkey,
            bind_info: info,
        },
    };
    let wr = SendWr {
        wr_id: w.wr_id,
        sg_list,
        opcode: w.opcode,
        send_flags: flags,
        imm_data: w.imm,
        detail,
    };
    // SAFETY: the caller's contract; inline data is read by the post itself.
    unsafe { q.qp.post_send(&[wr]) }.map_err(|e| errno_of(&e))
}

unsafe extern "C" fn wr_complete(qp: *mut ffi::ibv_qp_ex) -> c_int {
    boundary(ReturnsErrno, move || {
        // SAFETY: the inline caller passes a live QP of ours; the requests' memory is the
        // program's registered memory (its contract, as for ibv_post_send).
        unsafe {
            with_session(qp, |q, p| {
                let session = std::mem::take(p);
                if let Some(e) = session.error {
                    return e;
                }
                for w in &session.wrs {
                    if let Err(e) = post(q, w) {
                        return e;
                    }
                }
                0
            })
        }
    })
}
