//! The function tables of an open context: `ibv_context.ops` (the data path that the
//! static-inline `ibv_post_send`, `ibv_post_recv`, `ibv_poll_cq` and `ibv_req_notify_cq`
//! jump through) and `struct verbs_context` (the extended verbs such as
//! `ibv_query_device_ex` and `ibv_create_flow`). Ops the emulator lacks return
//! EOPNOTSUPP (or NULL with errno EOPNOTSUPP) and say so once on stderr.

use std::ffi::{c_int, c_void};
use std::ptr::null_mut;

use verbs_api::{
    Completion, CompletionQueue, Context, MemoryWindow, MwBind, MwType, QpType, QueuePair,
    SendFlags, SendOpcode, SendWr, WrDetail,
};

use crate::base::boundary::{boundary, Null, ReturnsErrno, Value};
use crate::base::errno::errno_of;
use crate::base::errno::set_errno;
use crate::base::ffi;
use crate::base::log::log_unsupported_once;
use crate::convert::wc_to_c;
use crate::device::{open_device, query_device_ex, query_port};
use crate::objects::{context, emu, hand_out, take_back, EmuAh, EmuCq, EmuMw, EmuPd, EmuQp};
use crate::work::{bind_info, post_chain, post_one_recv, sges};

/// `ibv_open_device`: a context whose tables are [`fill_ops`]'.
///
/// # Safety
/// `device` is a device of a list from this library.
pub unsafe extern "C" fn ibv_open_device(device: *mut ffi::ibv_device) -> *mut ffi::ibv_context {
    // SAFETY: the caller's device.
    boundary(Null, move || unsafe { open_device(device, fill_ops) })
}

/// Fills the tables of a new context: `abi_compat = UINTPTR_MAX` and `sz` make
/// `verbs_get_ctx` find the `verbs_context`; every op points at this library.
pub fn fill_ops(v: &mut ffi::verbs_context) {
    v.context.abi_compat = usize::MAX as *mut c_void;
    v.sz = std::mem::size_of::<ffi::verbs_context>();

    let ops = &mut v.context.ops;
    ops.poll_cq = Some(poll_cq);
    ops.req_notify_cq = Some(req_notify_cq);
    ops.post_send = Some(post_send);
    ops.post_recv = Some(post_recv);
    ops.post_srq_recv = Some(crate::srq::post_srq_recv);
    ops.alloc_mw = Some(alloc_mw);
    ops.bind_mw = Some(bind_mw);
    ops.dealloc_mw = Some(dealloc_mw);

    v.query_port = Some(query_port);
    v.query_device_ex = Some(query_device_ex);
    v.ibv_create_flow = Some(crate::flow::create_flow);
    v.ibv_destroy_flow = Some(crate::flow::destroy_flow);
    v.create_cq_ex = Some(crate::cq_ex::create_cq_ex);
    v.create_qp_ex = Some(crate::qp_ex::create_qp_ex);
    v.create_srq_ex = Some(create_srq_ex);
    v.open_xrcd = Some(open_xrcd);
    v.open_qp = Some(open_qp);
    v.create_wq = Some(crate::wq::create_wq);
    v.modify_wq = Some(crate::wq::modify_wq);
    v.destroy_wq = Some(crate::wq::destroy_wq);
    v.create_rwq_ind_table = Some(crate::wq::create_rwq_ind_table);
    v.destroy_rwq_ind_table = Some(crate::wq::destroy_rwq_ind_table);
    v.query_rt_values = Some(query_rt_values);
    v.alloc_td = Some(alloc_td);
    v.alloc_parent_domain = Some(crate::resources::alloc_parent_domain);
    v.modify_cq = Some(modify_cq);
    v.alloc_dm = Some(alloc_dm);
    v.create_counters = Some(create_counters);
    v.advise_mr = Some(advise_mr);
    v.alloc_null_mr = Some(alloc_null_mr);
}

/// How many completions one poll moves through the simulator at a time (a stack buffer).
const POLL_BATCH: usize = 16;

/// `ibv_poll_cq`: up to `num` completions into `wc`; a negative value on error.
unsafe extern "C" fn poll_cq(cq: *mut ffi::ibv_cq, num: c_int, wc: *mut ffi::ibv_wc) -> c_int {
    boundary(Value(-libc::EIO), move || {
        let Ok(num) = usize::try_from(num) else {
            return -libc::EINVAL;
        };
        if num > 0 && wc.is_null() {
            return -libc::EINVAL;
        }
        // SAFETY: the inline caller passes a live CQ of ours.
        let c: &EmuCq = unsafe { emu(cq) };
        if let Ok(e) = crate::state::emu() {
            e.read_doorbells();
        }
        let mut buf = [Completion::default(); POLL_BATCH];
        let mut done = 0usize;
        while done < num {
            let want = (num - done).min(POLL_BATCH);
            let got = match c.cq.poll(&mut buf[..want]) {
                Ok(n) => n,
                Err(e) if done == 0 => return -errno_of(&e),
                Err(_) => break,
            };
            for (i, w) in buf[..got].iter().enumerate() {
                // SAFETY: done + i < num, inside the caller's array of `num` entries.
                unsafe { wc.add(done + i).write(wc_to_c(w)) };
            }
            done += got;
            if got < want {
                break;
            }
        }
        c_int::try_from(done).unwrap_or(c_int::MAX)
    })
}

/// `ibv_req_notify_cq`.
unsafe extern "C" fn req_notify_cq(cq: *mut ffi::ibv_cq, solicited_only: c_int) -> c_int {
    boundary(ReturnsErrno, move || {
        // SAFETY: the inline caller passes a live CQ of ours.
        let c: &EmuCq = unsafe { emu(cq) };
        c.cq.req_notify(solicited_only != 0)
            .map_or_else(|e| errno_of(&e), |()| 0)
    })
}

/// One C send request as verbs-api's.
///
/// # Safety
/// `w` is a valid request of a program posting to `q`.
unsafe fn send_wr<'a>(
    q: &EmuQp,
    w: &'a ffi::ibv_send_wr,
) -> Result<SendWr<'a, backend_sim::verbs::SimAh>, c_int> {
    let opcode = SendOpcode::from_raw(w.opcode).ok_or(libc::EINVAL)?;
    let send_flags = SendFlags::from_bits(w.send_flags).ok_or(libc::EINVAL)?;
    // SAFETY: the program's valid request.
    let sg_list = unsafe { sges(w.sg_list, w.num_sge) }?;
    let imm_data = if opcode.has_imm() {
        // SAFETY: with an immediate opcode the union holds imm_data (network order).
        u32::from_be(unsafe { w.__bindgen_anon_1.imm_data })
    } else {
        0
    };
    let ud = q.qp.qp_type() == QpType::Ud;
    if ud && !matches!(opcode, SendOpcode::Send | SendOpcode::SendWithImm) {
        // UD QPs take SEND and SEND_WITH_IMM only (the providers' EINVAL); the union is
        // not read for anything else.
        return Err(libc::EINVAL);
    }
    let detail = if ud {
        // SAFETY: a UD request's union holds `ud`.
        let ud = unsafe { w.wr.ud };
        if ud.ah.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: a live AH of ours (the man page's contract for UD sends).
        let ah: &EmuAh = unsafe { emu(ud.ah) };
        WrDetail::Ud {
            ah: &ah.ah,
            remote_qpn: ud.remote_qpn,
            remote_qkey: ud.remote_qkey,
        }
    } else if opcode.is_atomic() {
        // SAFETY: an atomic request's union holds `atomic`.
        let a = unsafe { w.wr.atomic };
        WrDetail::Atomic {
            remote_addr: a.remote_addr,
            compare_add: a.compare_add,
            swap: a.swap,
            rkey: a.rkey,
        }
    } else if opcode == SendOpcode::BindMw {
        // SAFETY: a BIND_MW request's union holds `bind_mw`.
        let b = unsafe { w.__bindgen_anon_2.bind_mw };
        if b.mw.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: a live window of ours (the man page's contract).
        let m: &EmuMw = unsafe { emu(b.mw) };
        // The provider names the window by the rkey its struct holds now.
        m.mw.set_rkey(m.raw.rkey);
        WrDetail::BindMw {
            mw: m.raw.handle,
            rkey: b.rkey,
            // SAFETY: the request's region is NULL or a live MR of ours.
            bind_info: unsafe { bind_info(&b.bind_info) },
        }
    } else if matches!(opcode, SendOpcode::LocalInv | SendOpcode::SendWithInv) {
        WrDetail::Invalidate {
            // SAFETY: with an invalidating opcode the union holds invalidate_rkey.
            rkey: unsafe { w.__bindgen_anon_1.invalidate_rkey },
        }
    } else if opcode.is_rdma() {
        // SAFETY: an RDMA request's union holds `rdma`.
        let r = unsafe { w.wr.rdma };
        WrDetail::Rdma {
            remote_addr: r.remote_addr,
            rkey: r.rkey,
        }
    } else {
        WrDetail::None
    };
    Ok(SendWr {
        wr_id: w.wr_id,
        sg_list,
        opcode,
        send_flags,
        imm_data,
        detail,
    })
}

/// `ibv_alloc_mw` (the context op behind the inline).
unsafe extern "C" fn alloc_mw(pd: *mut ffi::ibv_pd, mw_type: ffi::ibv_mw_type) -> *mut ffi::ibv_mw {
    boundary(Null, move || {
        let Some(t) = MwType::from_raw(mw_type) else {
            set_errno(libc::EINVAL);
            return null_mut();
        };
        if pd.is_null() {
            set_errno(libc::EINVAL);
            return null_mut();
        }
        // SAFETY: the inline caller passes a live PD of ours.
        let p: &EmuPd = unsafe { emu(pd) };
        // SAFETY: a live context of ours (the PD's).
        let c = unsafe { context(p.raw.context) };
        match c.sim().alloc_mw(&p.pd, t) {
            Ok(mw) => {
                let raw = ffi::ibv_mw {
                    context: p.raw.context,
                    pd,
                    rkey: mw.rkey(),
                    handle: mw.handle(),
                    type_: mw_type,
                };
                p.users.take();
                hand_out(Box::new(EmuMw { raw, mw }))
            }
            Err(e) => {
                set_errno(errno_of(&e));
                null_mut()
            }
        }
    })
}

/// `ibv_bind_mw` (the context op behind the inline, which checked the type and PDs): posts
/// the bind and gives the window its new rkey, as rdma-core's providers do.
unsafe extern "C" fn bind_mw(
    qp: *mut ffi::ibv_qp,
    mw: *mut ffi::ibv_mw,
    mw_bind: *mut ffi::ibv_mw_bind,
) -> c_int {
    boundary(ReturnsErrno, move || {
        if qp.is_null() || mw.is_null() || mw_bind.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: the inline caller passes a live QP and window of ours and a valid bind.
        let (q, m, b): (&EmuQp, &mut EmuMw, &ffi::ibv_mw_bind) =
            unsafe { (emu(qp), &mut *mw.cast::<EmuMw>(), &*mw_bind) };
        let Some(send_flags) = SendFlags::from_bits(b.send_flags) else {
            return libc::EINVAL;
        };
        m.mw.set_rkey(m.raw.rkey);
        let bind = MwBind {
            wr_id: b.wr_id,
            send_flags,
            // SAFETY: the bind's region is NULL or a live MR of ours.
            bind_info: unsafe { bind_info(&b.bind_info) },
        };
        // SAFETY: a live context of ours (the QP's).
        let c = unsafe { context(q.raw.qp_base.context) };
        match c.sim().bind_mw(&q.qp, &m.mw, &bind) {
            Ok(rkey) => {
                m.raw.rkey = rkey;
                0
            }
            Err(e) => errno_of(&e),
        }
    })
}

/// `ibv_dealloc_mw`: unbinds and frees the window.
unsafe extern "C" fn dealloc_mw(mw: *mut ffi::ibv_mw) -> c_int {
    boundary(ReturnsErrno, move || {
        if mw.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: the program frees a live window of ours once.
        let b = unsafe { take_back::<EmuMw, _>(mw) };
        // SAFETY: the PD outlives its windows (it cannot be freed while they exist).
        unsafe { emu::<_, EmuPd>(b.raw.pd) }.users.release();
        0
    })
}

/// `ibv_post_send`: posts the whole chain in one call to the QP, as a provider queues a
/// list before it rings the doorbell once (rdma-core's rxe and mlx5 providers), so no
/// request of the list can complete while later ones are being queued (a list longer
/// than the free slots fails at the first that does not fit, whatever the progress
/// thread does meanwhile). On failure `*bad_wr` is the first request not posted.
unsafe extern "C" fn post_send(
    qp: *mut ffi::ibv_qp,
    wr: *mut ffi::ibv_send_wr,
    bad_wr: *mut *mut ffi::ibv_send_wr,
) -> c_int {
    boundary(ReturnsErrno, move || {
        // SAFETY: the inline caller passes a live QP of ours.
        let q: &EmuQp = unsafe { emu(qp) };
        let mut chain: Vec<*mut ffi::ibv_send_wr> = Vec::new();
        let mut wrs = Vec::new();
        let mut cur = wr;
        let mut failed = None;
        while !cur.is_null() {
            // SAFETY: the program's chain of valid requests.
            let w = unsafe { &*cur };
            // SAFETY: a valid request of the program's.
            match unsafe { send_wr(q, w) } {
                Ok(s) => wrs.push(s),
                Err(e) => {
                    failed = Some((chain.len(), e));
                    break;
                }
            }
            chain.push(cur);
            cur = w.next;
        }
        // What converted is posted first: a request the emulator cannot read fails where it
        // stands in the list, after the ones before it, as a provider would fail it.
        let posted = if wrs.is_empty() {
            Ok(())
        } else {
            // SAFETY: each request's SGEs lie in the program's registered memory, valid until
            // its completion (the verbs contract the program keeps).
            unsafe { q.qp.post_send(&wrs) }
        };
        let (index, errno) = match (posted, failed) {
            (Ok(()), None) => return 0,
            (Err(e), _) => (e.bad_wr().unwrap_or(0), errno_of(&e)),
            (Ok(()), Some((index, errno))) => (index, errno),
        };
        if !bad_wr.is_null() {
            // SAFETY: the caller's out-pointer; `index` is a request of the chain (the one that
            // failed to convert is `cur`).
            unsafe { *bad_wr = chain.get(index).copied().unwrap_or(cur) };
        }
        errno
    })
}

/// `ibv_post_recv`, one request at a time as [`post_send`].
unsafe extern "C" fn post_recv(
    qp: *mut ffi::ibv_qp,
    wr: *mut ffi::ibv_recv_wr,
    bad_wr: *mut *mut ffi::ibv_recv_wr,
) -> c_int {
    boundary(ReturnsErrno, move || {
        // SAFETY: the inline caller passes a live QP of ours.
        let q: &EmuQp = unsafe { emu(qp) };
        // SAFETY: the program's chain and out-pointer; its buffers lie in registered memory
        // valid until the completions.
        unsafe { post_chain(wr, bad_wr, |w| post_one_recv(w, |r| q.qp.post_recv(r))) }
    })
}

/// Defines an op the emulator does not have yet: it logs once and fails with
/// EOPNOTSUPP, as an int (`-> int`) or as NULL with errno (`-> ptr T`).
macro_rules! refuse {
    ($name:ident, $verb:literal, ($($t:ty),*) -> int) => {
        extern "C" fn $name($(_: $t),*) -> c_int {
            boundary(ReturnsErrno, || {
            log_unsupported_once($verb, "EOPNOTSUPP");
            libc::EOPNOTSUPP
            })
        }
    };
    ($name:ident, $verb:literal, ($($t:ty),*) -> ptr $r:ty) => {
        extern "C" fn $name($(_: $t),*) -> *mut $r {
            boundary(Null, || {
            log_unsupported_once($verb, "EOPNOTSUPP");
            set_errno(libc::EOPNOTSUPP);
            null_mut()
            })
        }
    };
}

type Ctx = *mut ffi::ibv_context;
refuse!(create_srq_ex, "ibv_create_srq_ex", (Ctx, *mut ffi::ibv_srq_init_attr_ex) -> ptr ffi::ibv_srq);
refuse!(open_xrcd, "ibv_open_xrcd", (Ctx, *mut ffi::ibv_xrcd_init_attr) -> ptr ffi::ibv_xrcd);
refuse!(open_qp, "ibv_open_qp", (Ctx, *mut ffi::ibv_qp_open_attr) -> ptr ffi::ibv_qp);
refuse!(query_rt_values, "ibv_query_rt_values_ex", (Ctx, *mut ffi::ibv_values_ex) -> int);
refuse!(alloc_td, "ibv_alloc_td", (Ctx, *mut ffi::ibv_td_init_attr) -> ptr ffi::ibv_td);
refuse!(modify_cq, "ibv_modify_cq", (*mut ffi::ibv_cq, *mut ffi::ibv_modify_cq_attr) -> int);
refuse!(alloc_dm, "ibv_alloc_dm", (Ctx, *mut ffi::ibv_alloc_dm_attr) -> ptr ffi::ibv_dm);
refuse!(create_counters, "ibv_create_counters", (Ctx, *mut ffi::ibv_counters_init_attr) -> ptr ffi::ibv_counters);
refuse!(advise_mr, "ibv_advise_mr", (*mut ffi::ibv_pd, ffi::ib_uverbs_advise_mr_advice, u32, *mut ffi::ibv_sge, u32) -> int);
refuse!(alloc_null_mr, "ibv_alloc_null_mr", (*mut ffi::ibv_pd) -> ptr ffi::ibv_mr);
