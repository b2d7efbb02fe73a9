//! Queue pairs: `ibv_create_qp`, `ibv_modify_qp`, `ibv_query_qp`, `ibv_destroy_qp`,
//! `ibv_qp_to_qp_ex`, multicast attachment, and the context ops `ibv_post_send`,
//! `ibv_post_recv`.

use std::ffi::c_int;
use std::ptr::null_mut;
use std::ptr::NonNull;
use std::sync::Mutex;

use verbs_api::Context;
use verbs_api::Gid;
use verbs_api::QpInitAttr;
use verbs_api::QpType;
use verbs_api::QueuePair;
use verbs_api::QueuePairExt;
use verbs_api::SendFlags;
use verbs_api::SendOpcode;
use verbs_api::SendWr;
use verbs_api::WrDetail;

use crate::base::boundary::boundary;
use crate::base::boundary::Null;
use crate::base::boundary::ReturnsErrno;
use crate::base::errno::errno_of;
use crate::base::errno::set_errno;
use crate::base::ffi;
use crate::base::pointer::{try_mut_from_ptr, try_ref, try_ref_from_ptr};
use crate::objects::convert::cap_from_c;
use crate::objects::convert::cap_to_c;
use crate::objects::convert::gid_from_c;
use crate::objects::convert::qp_attr_from_c;
use crate::objects::convert::qp_attr_to_c;
use crate::objects::handles::context;
use crate::objects::handles::emu;
use crate::objects::handles::hand_out;
use crate::objects::handles::init_sync;
use crate::objects::handles::take_back;
use crate::objects::handles::EmuAh;
use crate::objects::handles::EmuCq;
use crate::objects::handles::EmuMw;
use crate::objects::handles::EmuPd;
use crate::objects::handles::EmuQp;
use crate::objects::pending::Pending;
use crate::objects::work::bind_info;
use crate::objects::work::post_chain;
use crate::objects::work::post_one_recv;
use crate::objects::work::sges;
use crate::runtime::delivery::Object;
use crate::verbs::ah::note_gid_not_carried;
use crate::verbs::srq::EmuSrq;

/// `ibv_create_qp`. The chosen queue sizes are written back to `init->cap`.
///
/// # Safety
/// `pd` is a live PD of ours; `init` is a valid `struct ibv_qp_init_attr` naming live
/// CQs of ours.
pub unsafe extern "C" fn ibv_create_qp(
    pd: *mut ffi::ibv_pd,
    init: *mut ffi::ibv_qp_init_attr,
) -> *mut ffi::ibv_qp {
    boundary(Null, move || {
        // SAFETY: the caller's contract.
        unsafe { create_qp(pd, init, None) }.cast()
    })
}

/// Creates a QP (its C struct an `ibv_qp_ex`, whose start is the `ibv_qp`); with
/// `send_ops`, the `ibv_qp_ex` send API is filled in too.
///
/// # Safety
/// `pd` is NULL or a live PD of ours; `init` is NULL or valid, naming live CQs (and SRQ).
pub(crate) unsafe fn create_qp(
    pd: *mut ffi::ibv_pd,
    init: *mut ffi::ibv_qp_init_attr,
    send_ops: Option<fn(&mut ffi::ibv_qp_ex)>,
) -> *mut ffi::ibv_qp_ex {
    let einval = || {
        set_errno(libc::EINVAL);
        null_mut()
    };
    // SAFETY: NULL or a live PD of ours; NULL or the caller's valid attributes, whose CQs
    // are NULL or live CQs of ours.
    let (p, a, send, recv): (&EmuPd, &mut ffi::ibv_qp_init_attr, &EmuCq, &EmuCq) = unsafe {
        let p = try_ref_from_ptr!(pd, einval());
        let a: &mut ffi::ibv_qp_init_attr = try_mut_from_ptr!(init, einval());
        let (send, recv) = (a.send_cq, a.recv_cq);
        (
            p,
            a,
            try_ref_from_ptr!(send, einval()),
            try_ref_from_ptr!(recv, einval()),
        )
    };
    let Some(qp_type) = QpType::from_raw(a.qp_type) else {
        set_errno(libc::EOPNOTSUPP);
        return null_mut();
    };
    // SAFETY: the PD's context is live.
    let c = unsafe { context(p.raw.context) };
    let srq: Option<&EmuSrq> = NonNull::new(a.srq).map(|s| {
        // SAFETY: a live SRQ of ours (the man page's contract).
        unsafe { emu(s.as_ptr()) }
    });
    let attr = QpInitAttr {
        send_cq: &send.cq,
        recv_cq: &recv.cq,
        srq: srq.map(|s| &s.srq),
        cap: cap_from_c(&a.cap),
        qp_type,
        sq_sig_all: a.sq_sig_all != 0,
    };
    let qp = match c.sim().create_qp(&p.pd, &attr) {
        Ok(q) => q,
        Err(e) => {
            set_errno(errno_of(&e));
            return null_mut();
        }
    };
    if let Ok((_, cap)) = qp.query(verbs_api::QpAttrMask::CAP) {
        a.cap = cap_to_c(&cap);
    }
    let mut raw = ffi::ibv_qp_ex {
        qp_base: ffi::ibv_qp {
            context: p.raw.context,
            qp_context: a.qp_context,
            pd,
            send_cq: a.send_cq,
            recv_cq: a.recv_cq,
            srq: a.srq,
            handle: qp.qp_num(),
            qp_num: qp.qp_num(),
            state: ffi::IBV_QPS_RESET,
            qp_type: a.qp_type,
            ..ffi::ibv_qp::default()
        },
        ..ffi::ibv_qp_ex::default()
    };
    if let Some(fill) = send_ops {
        fill(&mut raw);
    }
    for users in [&p.users, &send.users, &recv.users] {
        users.take();
    }
    if let Some(s) = srq {
        s.users.take();
    }
    let qp_num = qp.qp_num();
    let q: *mut ffi::ibv_qp_ex = hand_out(Box::new(EmuQp {
        raw,
        qp,
        extended: send_ops.is_some(),
        pending: Mutex::new(Pending::default()),
    }));
    c.state.add_object(Object::Qp, qp_num, q as usize);
    // SAFETY: `q` is the live box just leaked; its sync objects are uninitialised.
    unsafe {
        init_sync(
            std::ptr::addr_of_mut!((*q).qp_base.mutex).cast(),
            std::ptr::addr_of_mut!((*q).qp_base.cond).cast(),
        );
    }
    q
}

/// `ibv_modify_qp`, checked against the kernel's state table (verbs-api) first.
///
/// # Safety
/// `qp` is a live QP of ours; `attr` is valid.
pub unsafe extern "C" fn ibv_modify_qp(
    qp: *mut ffi::ibv_qp,
    attr: *mut ffi::ibv_qp_attr,
    mask: c_int,
) -> c_int {
    boundary(ReturnsErrno, move || {
        // SAFETY: NULL or a live QP of ours; NULL or the caller's valid attributes.
        let (q, attr): (&EmuQp, &ffi::ibv_qp_attr) = unsafe {
            (
                try_ref_from_ptr!(qp, libc::EINVAL),
                try_ref_from_ptr!(attr, libc::EINVAL),
            )
        };
        let (a, m) = match qp_attr_from_c(attr, mask) {
            Ok(x) => x,
            Err(e) => return e,
        };
        match q.qp.modify(&a, m) {
            Ok(()) => {
                if let Ok(s) = q.qp.state() {
                    // SAFETY: the QP's own C struct; programs read `state` without locking.
                    unsafe { std::ptr::addr_of_mut!((*qp).state).write(s.as_raw()) };
                }
                0
            }
            Err(e) => {
                if m.contains(verbs_api::QpAttrMask::AV) {
                    note_gid_not_carried("ibv_modify_qp", &a.ah_attr);
                }
                errno_of(&e)
            }
        }
    })
}

/// `ibv_query_qp`.
///
/// # Safety
/// `qp` is a live QP of ours; `attr` and `init` are valid for writes.
pub unsafe extern "C" fn ibv_query_qp(
    qp: *mut ffi::ibv_qp,
    attr: *mut ffi::ibv_qp_attr,
    mask: c_int,
    init: *mut ffi::ibv_qp_init_attr,
) -> c_int {
    boundary(ReturnsErrno, move || {
        if attr.is_null() || init.is_null() {
            return libc::EINVAL;
        }
        // The mask only says which attributes the caller wants: the kernel passes it to the
        // driver unchecked (`ib_uverbs_query_qp`), and mlx5 and rxe answer every attribute
        // whatever it holds, so bits no attribute has are no error.
        let m = verbs_api::QpAttrMask::from_bits_truncate(mask as u32);
        // SAFETY: NULL or a live QP of ours.
        let q: &EmuQp = unsafe { try_ref_from_ptr!(qp, libc::EINVAL) };
        match q.qp.query(m) {
            Ok((a, cap)) => {
                // SAFETY: the caller's writable structs; the QP's C fields are ours to read.
                unsafe {
                    attr.write(qp_attr_to_c(&a));
                    init.write(ffi::ibv_qp_init_attr {
                        qp_context: (*qp).qp_context,
                        send_cq: (*qp).send_cq,
                        recv_cq: (*qp).recv_cq,
                        srq: (*qp).srq,
                        cap: cap_to_c(&cap),
                        qp_type: (*qp).qp_type,
                        sq_sig_all: 0,
                    });
                }
                0
            }
            Err(e) => errno_of(&e),
        }
    })
}

/// `ibv_destroy_qp`.
///
/// # Safety
/// `qp` came from `ibv_create_qp` and is destroyed once.
pub unsafe extern "C" fn ibv_destroy_qp(qp: *mut ffi::ibv_qp) -> c_int {
    boundary(ReturnsErrno, move || {
        if qp.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: the caller's contract.
        let b = unsafe { take_back::<EmuQp, _>(qp) };
        // SAFETY: the PD, CQs and SRQ outlive their QPs (they cannot be freed while used).
        unsafe {
            let base = &b.raw.qp_base;
            emu::<EmuPd>(base.pd).users.release();
            emu::<EmuCq>(base.send_cq).users.release();
            emu::<EmuCq>(base.recv_cq).users.release();
            if let Some(srq) = try_ref::<EmuSrq>(base.srq) {
                srq.users.release();
            }
        }
        // SAFETY: the QP's context outlives it.
        unsafe { context(b.raw.qp_base.context) }
            .state
            .remove_object(Object::Qp, b.raw.qp_base.qp_num);
        drop(b);
        0
    })
}

/// `ibv_qp_to_qp_ex`: the extended QP of a QP created by `ibv_create_qp_ex` with send
/// ops, else NULL (as libibverbs answers).
///
/// # Safety
/// `qp` is a live QP of ours.
pub unsafe extern "C" fn ibv_qp_to_qp_ex(qp: *mut ffi::ibv_qp) -> *mut ffi::ibv_qp_ex {
    boundary(Null, move || {
        // SAFETY: NULL or a live QP of ours.
        let q: &EmuQp = unsafe { try_ref_from_ptr!(qp, null_mut()) };
        if q.extended {
            qp.cast()
        } else {
            null_mut()
        }
    })
}

/// Runs a multicast attach or detach of `qp` to `gid`.
///
/// # Safety
/// `qp` is NULL or a live QP of ours; `gid` is NULL or valid.
unsafe fn mcast(
    qp: *mut ffi::ibv_qp,
    gid: *const ffi::ibv_gid,
    op: impl FnOnce(&EmuQp, Gid) -> verbs_api::Result<()>,
) -> c_int {
    // SAFETY: NULL or a live QP of ours; NULL or the caller's GID.
    let (q, g): (&EmuQp, &ffi::ibv_gid) = unsafe {
        (
            try_ref_from_ptr!(qp, libc::EINVAL),
            try_ref_from_ptr!(gid, libc::EINVAL),
        )
    };
    op(q, gid_from_c(g)).map_or_else(|e| errno_of(&e), |()| 0)
}

/// `ibv_attach_mcast`.
///
/// # Safety
/// `qp` is a live QP of ours; `gid` is valid.
pub unsafe extern "C" fn ibv_attach_mcast(
    qp: *mut ffi::ibv_qp,
    gid: *const ffi::ibv_gid,
    lid: u16,
) -> c_int {
    boundary(ReturnsErrno, move || {
        // SAFETY: the caller's contract.
        unsafe { mcast(qp, gid, |q, g| q.qp.attach_mcast(&g, lid)) }
    })
}

/// `ibv_detach_mcast`.
///
/// # Safety
/// `qp` is a live QP of ours; `gid` is valid.
pub unsafe extern "C" fn ibv_detach_mcast(
    qp: *mut ffi::ibv_qp,
    gid: *const ffi::ibv_gid,
    lid: u16,
) -> c_int {
    boundary(ReturnsErrno, move || {
        // SAFETY: the caller's contract.
        unsafe { mcast(qp, gid, |q, g| q.qp.detach_mcast(&g, lid)) }
    })
}
/// One C send request as verbs-api's.
///
/// # Safety
/// `w` is a valid request of a program posting to `q`.
pub(crate) unsafe fn send_wr<'a>(
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
        // SAFETY: NULL or a live AH of ours (the man page's contract for UD sends).
        let ah: &EmuAh = unsafe { try_ref_from_ptr!(ud.ah, Err(libc::EINVAL)) };
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
        // SAFETY: NULL or a live window of ours (the man page's contract).
        let m: &EmuMw = unsafe { try_ref_from_ptr!(b.mw, Err(libc::EINVAL)) };
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

/// `ibv_post_send`: posts the whole chain in one call to the QP, as a provider queues a
/// list before it rings the doorbell once (rdma-core's rxe and mlx5 providers), so no
/// request of the list can complete while later ones are being queued (a list longer
/// than the free slots fails at the first that does not fit, whatever the progress
/// thread does meanwhile). On failure `*bad_wr` is the first request not posted.
pub(crate) unsafe extern "C" fn post_send(
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
pub(crate) unsafe extern "C" fn post_recv(
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
