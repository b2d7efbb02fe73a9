//! Receive work queues (`ibv_create_wq`, `ibv_modify_wq`, `ibv_destroy_wq`,
//! `ibv_post_wq_recv`, and `mlx5dv_create_wq` for striding RQs), their indirection tables
//! (`ibv_create_rwq_ind_table`, `ibv_destroy_rwq_ind_table`) and RSS QPs
//! (`ibv_create_qp_ex` with `IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH`), over
//! the simulator's ([`backend_sim::verbs::SimWq`]).
//!
//! Each WQ also has the ring libmlx5 gives a program through `mlx5dv_init_obj`
//! (`MLX5DV_OBJ_RWQ`: `buf`, `dbrec`, `wqe_cnt`, `stride`, rdma-core providers/mlx5/mlx5.c
//! `mlx5dv_get_rwq`), sized as libmlx5's `mlx5_calc_rwq_size` (providers/mlx5/verbs.c)
//! sizes it: each entry one `mlx5_wqe_data_seg` per SGE, after a `mlx5_wqe_srq_next_seg`
//! for a striding RQ, rounded up to a power of two; `roundup_pow_of_two(max_wr)` entries,
//! at least 64 bytes in all. A program writes entries there and stores the big-endian
//! count of entries posted (mod 2^16) in `dbrec[0]`, as spead2's `ibv_wq_mprq_t::post_recv`
//! does; the progress thread reads the doorbell with acquire ordering (the program's
//! store is a release, so the entries before it are visible) and posts the new entries to
//! the simulator's WQ ([`crate::runtime::host::Doorbell`]). The simulator checks each entry as
//! the device does when it uses it: a bad lkey or a length that does not match the stride
//! geometry completes in error and moves the WQ to ERR
//! ([`backend_sim::verbs::SimWq`]'s delivery).

use std::alloc::Layout;
use std::ffi::c_int;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, Weak};

use backend_sim::verbs::{SimRwqIndTable, SimWq};
use verbs_api::{
    Context, RecvWr, RxHashConf, RxHashFields, Sge, StridingRqAttr, WorkQueue, WqInitAttr, WqState,
};

use crate::base::boundary::{boundary, Null, ReturnsErrno};
use crate::base::errno::{errno_of, set_errno};
use crate::base::ffi;
use crate::base::log::log_unsupported_once;
use crate::base::sync::lock;
use crate::objects::handles::{
    context, emu, hand_out, init_sync, take_back, EmuCq, EmuPd, EmuQp, Handed, Users,
};
use crate::objects::pending::Pending;
use crate::objects::work::{post_chain, post_one_recv};
use crate::runtime::delivery::Object;
use crate::runtime::host::Doorbell;
use crate::runtime::leaks::Kind;

/// `sizeof(struct mlx5_wqe_data_seg)` and `sizeof(struct mlx5_wqe_srq_next_seg)`.
const SEG: usize = 16;
/// libmlx5's `MLX5_SEND_WQE_BB`: the smallest ring.
const MIN_RING: usize = 64;
/// A ConnectX-5's largest receive WQE (the kernel reports `max_rq_desc_sz` from the
/// device's `max_wqe_sz_rq` capability, 512 bytes): more SGEs are EINVAL
/// (`mlx5_calc_rwq_size`).
const MAX_RQ_DESC: usize = 512;
/// `MLX5_INVALID_LKEY`: ends a receive WQE's list of data segments early.
const INVALID_LKEY: u32 = 0x100;

/// The ring of a WQ: entries and doorbell record the program may write.
#[derive(Debug)]
pub struct Ring {
    buf: *mut u8,
    layout: Layout,
    /// `dbrec[0]` is the receive doorbell (`MLX5_RCV_DBR`), big-endian.
    dbrec: [AtomicU32; 2],
    wqe_cnt: u32,
    stride: u32,
    striding: bool,
    max_sge: u32,
    /// Entries taken so far (mod 2^16 compares with the doorbell).
    taken: Mutex<u32>,
    /// The simulator's WQ the entries go to.
    wq: Weak<SimWq>,
}

// SAFETY: `buf` is a heap allocation owned by the ring (freed in Drop) that the progress
// thread only reads; everything else is atomic or behind a Mutex.
unsafe impl Send for Ring {}
// SAFETY: as above.
unsafe impl Sync for Ring {}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: allocated in `Ring::new` with this layout, freed once.
        unsafe { std::alloc::dealloc(self.buf, self.layout) };
    }
}

/// The sizes of a ring: bytes, bytes per entry, entries, SGEs per entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Geometry {
    size: usize,
    stride: usize,
    wqe_cnt: u32,
    max_sge: u32,
}

impl Geometry {
    /// The ring libmlx5 makes for `max_wr` receives of `max_sge` SGEs
    /// (`mlx5_calc_rwq_size`); None for sizes it refuses (EINVAL).
    fn of(max_wr: u32, max_sge: u32, striding: bool) -> Option<Geometry> {
        let next = if striding { SEG } else { 0 };
        let wqe = SEG * max_sge.max(1) as usize + next;
        if max_wr == 0 || wqe > MAX_RQ_DESC {
            return None;
        }
        let stride = wqe.next_power_of_two();
        let size = (max_wr.next_power_of_two() as usize)
            .checked_mul(stride)?
            .max(MIN_RING);
        Some(Geometry {
            size,
            stride,
            wqe_cnt: (size / stride) as u32,
            max_sge: ((stride - next) / SEG) as u32,
        })
    }
}

impl Ring {
    /// A zeroed ring of geometry `g` posting to `wq`; None when memory runs out.
    fn new(g: Geometry, striding: bool, wq: Weak<SimWq>) -> Option<Ring> {
        let layout = Layout::from_size_align(g.size, 4096).ok()?;
        // SAFETY: a non-zero size (at least MIN_RING).
        let buf = unsafe { std::alloc::alloc_zeroed(layout) };
        if buf.is_null() {
            return None;
        }
        Some(Ring {
            buf,
            layout,
            dbrec: [AtomicU32::new(0), AtomicU32::new(0)],
            wqe_cnt: g.wqe_cnt,
            stride: g.stride as u32,
            striding,
            max_sge: g.max_sge,
            taken: Mutex::new(0),
            wq,
        })
    }

    /// `struct mlx5dv_rwq`'s fields: `buf`, `dbrec`, `wqe_cnt`, `stride`.
    pub fn dv(&self) -> (*mut u8, *mut u32, u32, u32) {
        (self.buf, self.dbrec[0].as_ptr(), self.wqe_cnt, self.stride)
    }

    /// What libmlx5 does when the WQ leaves RESET (`mlx5_modify_wq`): indices and
    /// doorbell record back to 0.
    fn reset(&self) {
        self.dbrec[0].store(0, Ordering::Release);
        self.dbrec[1].store(0, Ordering::Release);
        *lock(&self.taken) = 0;
    }

    /// The data segments of entry `index` (big-endian in the ring).
    fn entry(&self, index: u32) -> Vec<Sge> {
        let mut out = Vec::new();
        let at = (index & (self.wqe_cnt - 1)) as usize * self.stride as usize;
        let first = if self.striding { SEG } else { 0 };
        for k in 0..self.max_sge as usize {
            let mut seg = [0u8; SEG];
            // SAFETY: the entry lies inside the ring (index masked, `max_sge` segments
            // fit in the stride); the program wrote it before its release store of the
            // doorbell, which `read_doorbell` acquired.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    self.buf.add(at + first + k * SEG),
                    seg.as_mut_ptr(),
                    SEG,
                );
            }
            let byte_count = u32::from_be_bytes([seg[0], seg[1], seg[2], seg[3]]);
            let lkey = u32::from_be_bytes([seg[4], seg[5], seg[6], seg[7]]);
            let mut addr = [0u8; 8];
            addr.copy_from_slice(&seg[8..16]);
            if !self.striding && (lkey == INVALID_LKEY || byte_count == 0) {
                break;
            }
            out.push(Sge {
                addr: u64::from_be_bytes(addr),
                length: byte_count,
                lkey,
            });
            if self.striding {
                break;
            }
        }
        out
    }
}

impl Doorbell for Ring {
    fn read_doorbell(&self) {
        let Some(wq) = self.wq.upgrade() else {
            return;
        };
        let head = u32::from_be(self.dbrec[0].load(Ordering::Acquire)) & 0xffff;
        let mut taken = lock(&self.taken);
        while *taken & 0xffff != head {
            let sges = self.entry(*taken);
            // The wr_id is the entry's index: an entry the program wrote itself carries
            // none (libmlx5 reports `rq.wrid[index]`, which only `ibv_post_wq_recv` fills).
            let wr = [RecvWr::new(u64::from(*taken & (self.wqe_cnt - 1)), &sges)];
            // SAFETY: the program posted this entry for the device to write; its buffer
            // is checked against the key table when the device uses it.
            if unsafe { wq.post_recv(&wr) }.is_err() {
                // More entries than the ring holds: the rest wait for room.
                break;
            }
            *taken = taken.wrapping_add(1);
        }
    }
}

/// A work queue: `struct ibv_wq` first.
#[repr(C)]
pub struct EmuWq {
    /// `struct ibv_wq`.
    pub raw: ffi::ibv_wq,
    /// The simulator's WQ (shared with the ring, which posts to it).
    pub wq: Arc<SimWq>,
    /// The ring `mlx5dv_init_obj` hands out.
    pub ring: Arc<Ring>,
    /// The striding geometry, for a striding RQ.
    pub striding: Option<StridingRqAttr>,
    /// The indirection tables that hold it.
    pub users: Users,
}

// SAFETY: `#[repr(C)]`, starting with its C struct (`raw`).
unsafe impl crate::base::pointer::Castable for EmuWq {
    type C = ffi::ibv_wq;
}

// SAFETY: `#[repr(C)]`, starting with its C struct (`raw`).
unsafe impl crate::base::pointer::Castable for EmuRwqIndTable {
    type C = ffi::ibv_rwq_ind_table;
}

/// An indirection table: `struct ibv_rwq_ind_table` first.
#[repr(C)]
#[derive(Debug)]
pub struct EmuRwqIndTable {
    /// `struct ibv_rwq_ind_table`.
    pub raw: ffi::ibv_rwq_ind_table,
    /// The simulator's table.
    pub table: SimRwqIndTable,
    /// Its WQs.
    pub wqs: Vec<*mut ffi::ibv_wq>,
    /// The RSS QPs over it.
    pub users: Users,
}

// The C struct holds pthread unions, which have no Debug: show the simulator's side.
impl std::fmt::Debug for EmuWq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmuWq")
            .field("wq", &self.wq)
            .field("ring", &self.ring)
            .finish_non_exhaustive()
    }
}

impl Handed for EmuWq {
    const KIND: Kind = Kind::Wq;
}
impl Handed for EmuRwqIndTable {
    const KIND: Kind = Kind::RwqIndTable;
}

/// `verbs_context.create_wq` (behind the inline `ibv_create_wq`).
///
/// # Safety
/// `ctx` is a live context of ours; `attr` is valid.
pub unsafe extern "C" fn create_wq(
    ctx: *mut ffi::ibv_context,
    attr: *mut ffi::ibv_wq_init_attr,
) -> *mut ffi::ibv_wq {
    // SAFETY: the caller's contract.
    boundary(Null, move || unsafe { create(ctx, attr, None) })
}

/// Creates a WQ, striding when `striding` is given (`mlx5dv_create_wq`).
///
/// # Safety
/// `ctx` is NULL or a live context of ours; `attr` is NULL or valid, naming a live PD
/// and CQ of ours.
pub(crate) unsafe fn create(
    ctx: *mut ffi::ibv_context,
    attr: *mut ffi::ibv_wq_init_attr,
    striding: Option<StridingRqAttr>,
) -> *mut ffi::ibv_wq {
    if ctx.is_null() || attr.is_null() {
        set_errno(libc::EINVAL);
        return null_mut();
    }
    // SAFETY: the caller's valid attributes.
    let a = unsafe { &*attr };
    if a.wq_type != ffi::IBV_WQT_RQ || a.pd.is_null() || a.cq.is_null() {
        set_errno(libc::EINVAL);
        return null_mut();
    }
    if a.comp_mask & !ffi::IBV_WQ_INIT_ATTR_FLAGS != 0 {
        set_errno(libc::EINVAL);
        return null_mut();
    }
    if a.comp_mask & ffi::IBV_WQ_INIT_ATTR_FLAGS != 0 && a.create_flags != 0 {
        log_unsupported_once(
            "ibv_create_wq",
            "WQ create flags (VLAN stripping, FCS, delay drop, end padding)",
        );
        set_errno(libc::EOPNOTSUPP);
        return null_mut();
    }
    // SAFETY: the caller's live context, PD and CQ.
    let (c, p, cq): (_, &EmuPd, &EmuCq) = unsafe { (context(ctx), emu(a.pd), emu(a.cq)) };
    // The ring's sizes first: libmlx5 checks them before the kernel sees the WQ.
    let Some(g) = Geometry::of(a.max_wr, a.max_sge, striding.is_some()) else {
        set_errno(libc::EINVAL);
        return null_mut();
    };
    let init = WqInitAttr {
        max_wr: g.wqe_cnt,
        max_sge: a.max_sge.max(1),
        striding,
    };
    let wq = match c.sim().create_wq(&p.pd, &cq.cq, &init) {
        Ok(w) => Arc::new(w),
        Err(e) => {
            set_errno(errno_of(&e));
            return null_mut();
        }
    };
    let Some(ring) = Ring::new(g, striding.is_some(), Arc::downgrade(&wq)) else {
        set_errno(libc::ENOMEM);
        return null_mut();
    };
    let ring = Arc::new(ring);
    let raw = ffi::ibv_wq {
        context: ctx,
        wq_context: a.wq_context,
        pd: a.pd,
        cq: a.cq,
        wq_num: wq.wq_num(),
        handle: wq.wq_num(),
        state: ffi::IBV_WQS_RESET,
        wq_type: a.wq_type,
        post_recv: Some(post_wq_recv),
        ..ffi::ibv_wq::default()
    };
    p.users.take();
    cq.users.take();
    if let Ok(e) = crate::runtime::host::emu() {
        let weak: Weak<dyn Doorbell> = Arc::downgrade(&(ring.clone() as Arc<dyn Doorbell>));
        e.register_doorbell(weak);
    }
    let q: *mut ffi::ibv_wq = hand_out(Box::new(EmuWq {
        raw,
        wq,
        ring,
        striding,
        users: Users::default(),
    }));
    // SAFETY: `q` is the live box just leaked; its sync objects are uninitialised (the
    // inline `ibv_create_wq` initialises them again, as libibverbs does).
    unsafe {
        init_sync(
            std::ptr::addr_of_mut!((*q).mutex).cast(),
            std::ptr::addr_of_mut!((*q).cond).cast(),
        );
    }
    q
}

/// `ibv_wq.post_recv` (behind the inline `ibv_post_wq_recv`).
unsafe extern "C" fn post_wq_recv(
    wq: *mut ffi::ibv_wq,
    wr: *mut ffi::ibv_recv_wr,
    bad_wr: *mut *mut ffi::ibv_recv_wr,
) -> c_int {
    boundary(ReturnsErrno, move || {
        // SAFETY: the inline caller passes a live WQ of ours.
        let q: &EmuWq = unsafe { emu(wq) };
        // SAFETY: the program's chain and out-pointer; its buffers lie in registered
        // memory valid until the completions.
        unsafe { post_chain(wr, bad_wr, |w| post_one_recv(w, |r| q.wq.post_recv(r))) }
    })
}

/// `verbs_context.modify_wq` (behind the inline `ibv_modify_wq`): the state, as
/// libmlx5's `mlx5_modify_wq` and the kernel take it; flags are not modelled.
///
/// # Safety
/// `wq` is a live WQ of ours; `attr` is valid.
pub unsafe extern "C" fn modify_wq(wq: *mut ffi::ibv_wq, attr: *mut ffi::ibv_wq_attr) -> c_int {
    boundary(ReturnsErrno, move || {
        if wq.is_null() || attr.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: the caller's valid attributes and live WQ.
        let (a, q): (&ffi::ibv_wq_attr, &EmuWq) = unsafe { (&*attr, emu(wq)) };
        let known = ffi::IBV_WQ_ATTR_STATE | ffi::IBV_WQ_ATTR_CURR_STATE | ffi::IBV_WQ_ATTR_FLAGS;
        if a.attr_mask & !known != 0 {
            return libc::EINVAL;
        }
        if a.attr_mask & ffi::IBV_WQ_ATTR_FLAGS != 0 {
            log_unsupported_once("ibv_modify_wq", "WQ flags");
            return libc::EOPNOTSUPP;
        }
        if a.attr_mask & ffi::IBV_WQ_ATTR_STATE == 0 {
            return 0;
        }
        let Some(to) = WqState::from_raw(a.wq_state) else {
            return libc::EINVAL;
        };
        let current = if a.attr_mask & ffi::IBV_WQ_ATTR_CURR_STATE != 0 {
            match WqState::from_raw(a.curr_wq_state) {
                Some(s) => Some(s),
                None => return libc::EINVAL,
            }
        } else {
            None
        };
        let was = q.wq.state().unwrap_or(WqState::Unknown);
        if let Err(e) = q.wq.modify(to, current) {
            return errno_of(&e);
        }
        if was == WqState::Reset && to == WqState::Rdy {
            q.ring.reset();
        }
        // SAFETY: the WQ's own C struct; programs read `state` after the call.
        unsafe { std::ptr::addr_of_mut!((*wq).state).write(to.as_raw()) };
        0
    })
}

/// `verbs_context.destroy_wq` (behind the inline `ibv_destroy_wq`): EBUSY while a table
/// holds it.
///
/// # Safety
/// `wq` is a live WQ of ours, not used afterwards when destroyed.
pub unsafe extern "C" fn destroy_wq(wq: *mut ffi::ibv_wq) -> c_int {
    boundary(ReturnsErrno, move || {
        if wq.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: a live WQ of ours.
        let q: &EmuWq = unsafe { emu(wq) };
        if q.users.busy() {
            return libc::EBUSY;
        }
        // SAFETY: the caller's contract.
        let b = unsafe { take_back::<EmuWq, _>(wq) };
        // SAFETY: the PD and CQ outlive their WQs (they cannot be freed while used).
        unsafe {
            emu::<EmuPd>(b.raw.pd).users.release();
            emu::<EmuCq>(b.raw.cq).users.release();
        }
        drop(b);
        0
    })
}

/// `verbs_context.create_rwq_ind_table` (behind the inline `ibv_create_rwq_ind_table`).
///
/// # Safety
/// `ctx` is a live context of ours; `init` is valid, its table naming live WQs of ours.
pub unsafe extern "C" fn create_rwq_ind_table(
    ctx: *mut ffi::ibv_context,
    init: *mut ffi::ibv_rwq_ind_table_init_attr,
) -> *mut ffi::ibv_rwq_ind_table {
    boundary(Null, move || {
        if ctx.is_null() || init.is_null() {
            set_errno(libc::EINVAL);
            return null_mut();
        }
        // SAFETY: the caller's valid attributes.
        let a = unsafe { &*init };
        if a.comp_mask != 0 || a.ind_tbl.is_null() || a.log_ind_tbl_size > 16 {
            set_errno(libc::EINVAL);
            return null_mut();
        }
        let n = 1usize << a.log_ind_tbl_size;
        // SAFETY: the table holds `1 << log_ind_tbl_size` WQ pointers (verbs.h).
        let ptrs: Vec<*mut ffi::ibv_wq> =
            unsafe { std::slice::from_raw_parts(a.ind_tbl, n) }.to_vec();
        if ptrs.iter().any(|p| p.is_null()) {
            set_errno(libc::EINVAL);
            return null_mut();
        }
        // SAFETY: live WQs of ours (the caller's contract).
        let wqs: Vec<&EmuWq> = ptrs.iter().map(|&p| unsafe { emu(p) }).collect();
        let sims: Vec<&SimWq> = wqs.iter().map(|q| &*q.wq).collect();
        // SAFETY: the caller's live context.
        let c = unsafe { context(ctx) };
        let table = match c.sim().create_rwq_ind_table(&sims) {
            Ok(t) => t,
            Err(e) => {
                set_errno(errno_of(&e));
                return null_mut();
            }
        };
        for q in &wqs {
            q.users.take();
        }
        let num = verbs_api::RwqIndTable::ind_tbl_num(&table);
        let raw = ffi::ibv_rwq_ind_table {
            context: ctx,
            ind_tbl_handle: num as c_int,
            ind_tbl_num: num as c_int,
            comp_mask: 0,
        };
        hand_out(Box::new(EmuRwqIndTable {
            raw,
            table,
            wqs: ptrs,
            users: Users::default(),
        }))
    })
}

/// `verbs_context.destroy_rwq_ind_table`: EBUSY while an RSS QP uses it.
///
/// # Safety
/// `table` is a live table of ours, not used afterwards when destroyed.
pub unsafe extern "C" fn destroy_rwq_ind_table(table: *mut ffi::ibv_rwq_ind_table) -> c_int {
    boundary(ReturnsErrno, move || {
        if table.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: a live table of ours.
        let t: &EmuRwqIndTable = unsafe { emu(table) };
        if t.users.busy() {
            return libc::EBUSY;
        }
        // SAFETY: the caller's contract.
        let b = unsafe { take_back::<EmuRwqIndTable, _>(table) };
        for &p in &b.wqs {
            // SAFETY: a WQ outlives the tables that hold it (it cannot be destroyed
            // while they do).
            unsafe { emu::<EmuWq>(p) }.users.release();
        }
        drop(b);
        0
    })
}

/// The RX hash of an `ibv_qp_init_attr_ex`.
///
/// # Safety
/// A non-NULL `rx_hash_key` points at `rx_hash_key_len` bytes.
pub(crate) unsafe fn rx_hash_from_c(h: &ffi::ibv_rx_hash_conf) -> RxHashConf {
    let key = if h.rx_hash_key.is_null() {
        Vec::new()
    } else {
        // SAFETY: the caller's contract.
        unsafe { std::slice::from_raw_parts(h.rx_hash_key, usize::from(h.rx_hash_key_len)) }
            .to_vec()
    };
    RxHashConf {
        function: h.rx_hash_function,
        key,
        fields: RxHashFields::from_bits_retain(h.rx_hash_fields_mask),
    }
}

/// An RSS QP (`ibv_create_qp_ex` with an indirection table and an RX hash): a RAW_PACKET
/// QP without queues of its own, as the kernel's `create_rss_raw_qp_tir` makes it
/// (another QP type is EOPNOTSUPP, a send CQ or create flags EINVAL); libmlx5 needs both
/// the table and the hash.
///
/// # Safety
/// `ctx` is a live context of ours; `a` names a live PD and table of ours and a valid key.
pub(crate) unsafe fn create_rss_qp(
    ctx: *mut ffi::ibv_context,
    a: &ffi::ibv_qp_init_attr_ex,
) -> *mut ffi::ibv_qp {
    let both = ffi::IBV_QP_INIT_ATTR_IND_TABLE | ffi::IBV_QP_INIT_ATTR_RX_HASH;
    if a.comp_mask & both != both || a.rwq_ind_tbl.is_null() {
        set_errno(libc::EINVAL);
        return null_mut();
    }
    if a.qp_type != ffi::IBV_QPT_RAW_PACKET {
        set_errno(libc::EOPNOTSUPP);
        return null_mut();
    }
    let flags = a.comp_mask & ffi::IBV_QP_INIT_ATTR_CREATE_FLAGS != 0 && a.create_flags != 0;
    if flags || !a.send_cq.is_null() {
        set_errno(libc::EINVAL);
        return null_mut();
    }
    // SAFETY: the caller's live PD and table, and its key.
    let (p, t, hash): (&EmuPd, &EmuRwqIndTable, RxHashConf) = unsafe {
        (
            emu(a.pd),
            emu(a.rwq_ind_tbl),
            rx_hash_from_c(&a.rx_hash_conf),
        )
    };
    // SAFETY: the caller's live context.
    let c = unsafe { context(ctx) };
    let qp = match c.sim().create_rss_qp(&p.pd, &t.table, &hash) {
        Ok(q) => q,
        Err(e) => {
            set_errno(errno_of(&e));
            return null_mut();
        }
    };
    p.users.take();
    t.users.take();
    let qp_num = verbs_api::QueuePair::qp_num(&qp);
    let raw = ffi::ibv_qp_ex {
        qp_base: ffi::ibv_qp {
            context: ctx,
            qp_context: a.qp_context,
            pd: a.pd,
            handle: qp_num,
            qp_num,
            state: ffi::IBV_QPS_RESET,
            qp_type: a.qp_type,
            ..ffi::ibv_qp::default()
        },
        ..ffi::ibv_qp_ex::default()
    };
    let q: *mut ffi::ibv_qp_ex = hand_out(Box::new(EmuQp {
        raw,
        qp,
        extended: false,
        pending: Mutex::new(Pending::default()),
        rss_table: a.rwq_ind_tbl,
    }));
    c.state.add_object(Object::Qp, qp_num, q as usize);
    // SAFETY: `q` is the live box just leaked; its sync objects are uninitialised.
    unsafe {
        init_sync(
            std::ptr::addr_of_mut!((*q).qp_base.mutex).cast(),
            std::ptr::addr_of_mut!((*q).qp_base.cond).cast(),
        );
    }
    q.cast()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rings_are_sized_as_libmlx5_sizes_them() {
        // A striding WQ of spead2's kind: one 16-byte next segment and one data segment,
        // 32 bytes (sizeof(struct mlx5_mprq_wqe)); two of them fill the 64-byte minimum.
        let g = Geometry::of(2, 1, true).unwrap();
        assert_eq!((g.size, g.stride, g.wqe_cnt, g.max_sge), (64, 32, 2, 1));
        // A plain WQ: data segments only, the ring rounded up to a power of two.
        let g = Geometry::of(100, 1, false).unwrap();
        assert_eq!((g.size, g.stride, g.wqe_cnt, g.max_sge), (2048, 16, 128, 1));
        // Three SGEs take a 64-byte entry, which holds four.
        let g = Geometry::of(1, 3, false).unwrap();
        assert_eq!((g.size, g.stride, g.wqe_cnt, g.max_sge), (64, 64, 1, 4));
        // 30 SGEs (480 bytes) fit a ConnectX-5's 512-byte receive WQE; 33 do not.
        assert_eq!(Geometry::of(4, 30, false).unwrap().stride, 512);
        assert_eq!(Geometry::of(4, 33, false), None);
        assert_eq!(Geometry::of(4, 32, true), None);
        // No receives at all is EINVAL (`mlx5_calc_rwq_size`).
        assert_eq!(Geometry::of(0, 1, true), None);
    }
}
