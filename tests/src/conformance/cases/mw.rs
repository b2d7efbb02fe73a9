//! Memory windows (`ibv_alloc_mw(3)`, `ibv_bind_mw(3)`, `ibv_post_send(3)`'s BIND_MW,
//! LOCAL_INV and SEND_WITH_INV), as rxe does them (drivers/infiniband/sw/rxe/rxe_mw.c):
//! type 1 and type 2B windows, bound by a work request on the send queue of the QP whose
//! peer then uses the window's rkey.
//!
//! The window's memory region is registered with LOCAL_WRITE and MW_BIND only: the window
//! grants remote access the region itself does not (rxe checks no region right but
//! MW_BIND, and LOCAL_WRITE for a writable window).

use super::prelude::*;
use verbs_api::{inc_rkey, MemoryWindow, MwBind, MwBindInfo, MwType};

const RW: AccessFlags = AccessFlags::REMOTE_READ.union(AccessFlags::REMOTE_WRITE);
const WIN_OFF: usize = 1024;
const WIN_LEN: u64 = 256;

/// Two connected RC QPs: `a` (the peer using the window, completing to `cq_a`) and `b`
/// (the window's owner, which binds it, completing to `cq_b`); `mr` is b's region
/// (LOCAL_WRITE | MW_BIND, 4 KiB), `local` a's buffer.
struct Setup<C: Context> {
    a: C::Qp,
    b: C::Qp,
    mr: C::Mr,
    local: C::Mr,
    cq_a: C::Cq,
    cq_b: C::Cq,
    rig: Rig<C>,
    log: Log,
}

fn setup<V: Verbs>(env: &Env<V>) -> Setup<V::Context> {
    setup_on(env, QpType::Rc)
}

fn setup_on<V: Verbs>(env: &Env<V>, qp_type: QpType) -> Setup<V::Context> {
    let rig = open(env);
    let cq_a = rig.ctx.create_cq(64, None, 0).expect("create_cq a");
    let cq_b = rig.ctx.create_cq(64, None, 0).expect("create_cq b");
    let (a, b) = rig.pair_with(qp_type, &cq_a, &cq_b, ALL_REMOTE, |_, _| {});
    let mr = rig
        .ctx
        .alloc_mr(
            &rig.pd,
            4096,
            AccessFlags::LOCAL_WRITE | AccessFlags::MW_BIND,
        )
        .expect("alloc_mr with MW_BIND");
    let local = rig.mr(4096, AccessFlags::empty());
    let mut log = Log::new();
    log.qp("a", &a);
    log.qp("b", &b);
    Setup {
        a,
        b,
        mr,
        local,
        cq_a,
        cq_b,
        rig,
        log,
    }
}

impl<C: Context> Setup<C> {
    /// A window of type `t` on the rig's PD.
    fn alloc(&self, t: MwType) -> C::Mw {
        self.rig.ctx.alloc_mw(&self.rig.pd, t).expect("alloc_mw")
    }

    fn window_info(&self, access: AccessFlags) -> MwBindInfo {
        MwBindInfo::new(&self.mr, self.mr.addr() + WIN_OFF as u64, WIN_LEN, access)
    }

    /// Binds a type 1 window through `ibv_bind_mw` on b and logs the post and the
    /// completion.
    fn bind1(&mut self, mw: &C::Mw, wr_id: u64, info: MwBindInfo) {
        let old = mw.rkey();
        let bind = MwBind {
            wr_id,
            send_flags: SendFlags::SIGNALED,
            bind_info: info,
        };
        let r = self.rig.ctx.bind_mw(&self.b, mw, &bind);
        self.log.result("bind_mw", &r);
        if let Ok(rkey) = r {
            self.log.line(format!(
                "rkey: returned = window's {}, = inc_rkey(old) {}",
                rkey == mw.rkey(),
                rkey == inc_rkey(old)
            ));
        }
        self.log.collect("cq_b", &self.cq_b, 1);
    }

    /// A type 1 window over the window's range with `access`, bound by `bind1` as work
    /// request 1.
    fn bound1(&mut self, access: AccessFlags) -> C::Mw {
        let mw = self.alloc(MwType::Type1);
        let info = self.window_info(access);
        self.bind1(&mw, 1, info);
        mw
    }

    /// A type 2 window over the window's range with `access`, bound by `bind2` as work
    /// request 1, and its rkey.
    fn bound2(&mut self, access: AccessFlags) -> (C::Mw, u32) {
        let mw = self.alloc(MwType::Type2);
        let info = self.window_info(access);
        let rkey = self.bind2(&mw, 1, info);
        (mw, rkey)
    }

    /// Binds a type 2 window with a BIND_MW request on b.
    fn bind2(&mut self, mw: &C::Mw, wr_id: u64, info: MwBindInfo) -> u32 {
        let rkey = inc_rkey(mw.rkey());
        let r = try_send(
            &self.b,
            &[SendWr::bind_mw(wr_id, mw.handle(), rkey, info).signaled()],
        );
        self.log.result("post BIND_MW", &r);
        self.log.line(format!(
            "window's rkey is the new one: {}",
            mw.rkey() == rkey
        ));
        self.log.collect("cq_b", &self.cq_b, 1);
        rkey
    }

    /// An RDMA WRITE of 16 bytes from a to b's region at `off` under `rkey`.
    fn write(&mut self, wr_id: u64, off: usize, rkey: u32) {
        fill(&self.local, 0, b"through a window");
        let s = [sge(&self.local, 0, 16)];
        let r = try_send(
            &self.a,
            &[SendWr::rdma_write(wr_id, &s, self.mr.addr() + off as u64, rkey).signaled()],
        );
        self.log.result("post WRITE", &r);
        self.log.collect("cq_a", &self.cq_a, 1);
    }

    /// An RDMA READ of 16 bytes from b's region at `off` under `rkey` into a's buffer.
    fn read(&mut self, wr_id: u64, off: usize, rkey: u32) {
        let s = [sge(&self.local, 2048, 16)];
        let r = try_send(
            &self.a,
            &[SendWr::rdma_read(wr_id, &s, self.mr.addr() + off as u64, rkey).signaled()],
        );
        self.log.result("post READ", &r);
        self.log.collect("cq_a", &self.cq_a, 1);
    }
}

/// rxe has type 1 and type 2B windows (`IBV_DEVICE_MEM_WINDOW`,
/// `IBV_DEVICE_MEM_WINDOW_TYPE_2B`, not 2A) and `max_mw` 524287; mlx5 has 2B too.
pub fn mw_device_caps<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let caps = rig.attr.device_cap_flags;
    let mut log = Log::new();
    log.line(format!(
        "MEM_WINDOW {} 2A {} 2B {}",
        caps.contains(verbs_api::DeviceCapFlags::MEM_WINDOW),
        caps.contains(verbs_api::DeviceCapFlags::MEM_WINDOW_TYPE_2A),
        caps.contains(verbs_api::DeviceCapFlags::MEM_WINDOW_TYPE_2B),
    ));
    if env.is_rxe() {
        log.line(format!("max_mw {}", rig.attr.max_mw));
    }
    let t1 = rig.ctx.alloc_mw(&rig.pd, MwType::Type1).expect("type 1");
    let t2 = rig.ctx.alloc_mw(&rig.pd, MwType::Type2).expect("type 2");
    log.line(format!(
        "types {} {}, rkeys distinct {}, handles distinct {}",
        t1.mw_type(),
        t2.mw_type(),
        t1.rkey() != t2.rkey(),
        t1.handle() != t2.handle()
    ));
    let mut expected = vec!["MEM_WINDOW true 2A false 2B true"];
    if env.is_rxe() {
        expected.push("max_mw 524287");
    }
    expected.push("types IBV_MW_TYPE_1 IBV_MW_TYPE_2, rkeys distinct true, handles distinct true");
    log.check(&expected);
}

/// A type 1 window bound by `ibv_bind_mw`: the bind completes on the binding QP's CQ
/// (BIND_MW, length 0), the window's rkey is `ibv_inc_rkey` of the old one, and the peer
/// writes and reads the region through it, though the region has no remote access.
pub fn mw_type1_bind_write_read<V: Verbs>(env: &Env<V>) {
    let mut s = setup(env);
    let mw = s.bound1(RW);
    s.write(2, WIN_OFF + 8, mw.rkey());
    fill(&s.mr, WIN_OFF + 100, b"read me through it");
    s.read(3, WIN_OFF + 100, mw.rkey());
    s.log.line(format!(
        "written {:?}, read {:?}",
        String::from_utf8_lossy(&read(&s.mr, WIN_OFF + 8, 16)),
        String::from_utf8_lossy(&read(&s.local, 2048, 16))
    ));
    s.log.check(&[
        "bind_mw: ok",
        "rkey: returned = window's true, = inc_rkey(old) true",
        "cq_b: wr 1 Success BindMw len 0 imm - flags - qp b src 0",
        "post WRITE: ok",
        "cq_a: wr 2 Success RdmaWrite len 16 imm - flags - qp a src 0",
        "post READ: ok",
        "cq_a: wr 3 Success RdmaRead len 16 imm - flags - qp a src 0",
        "written \"through a window\", read \"read me through \"",
    ]);
}

/// rxe checks an access through a window against the window's region, not the window
/// (`check_rkey` calls `mr_check_range` on the MR): a read outside the window but inside
/// the region succeeds. mlx5 checks the window's bounds (REM_ACCESS_ERR).
pub fn mw_access_outside_the_window<V: Verbs>(env: &Env<V>) {
    let mut s = setup(env);
    let mw = s.bound1(RW);
    s.read(2, 0, mw.rkey());
    s.read(3, 4096 - 8, mw.rkey());
    s.log.state("a", &s.a);
    let outside = if env.is_rxe() {
        "cq_a: wr 2 Success RdmaRead len 16 imm - flags - qp a src 0"
    } else {
        "cq_a: wr 2 RemAccessErr Send len 0 imm - flags - qp a src 0"
    };
    let mut expected = vec![
        "bind_mw: ok",
        "rkey: returned = window's true, = inc_rkey(old) true",
        "cq_b: wr 1 Success BindMw len 0 imm - flags - qp b src 0",
        "post READ: ok",
        outside,
        "post READ: ok",
    ];
    if env.is_rxe() {
        expected.push("cq_a: wr 3 RemAccessErr Send len 0 imm - flags - qp a src 0");
    } else {
        expected.push("cq_a: wr 3 WrFlushErr Send len 0 imm - flags - qp a src 0");
    }
    expected.push("state a: ERR");
    s.log.check(&expected);
}

/// A window grants only the rights it was bound with: a WRITE through a read-only window
/// fails with REM_ACCESS_ERR.
pub fn mw_write_through_read_only_window<V: Verbs>(env: &Env<V>) {
    let mut s = setup(env);
    let mw = s.bound1(AccessFlags::REMOTE_READ);
    s.read(2, WIN_OFF, mw.rkey());
    s.write(3, WIN_OFF, mw.rkey());
    s.log.state("a", &s.a);
    s.log.check(&[
        "bind_mw: ok",
        "rkey: returned = window's true, = inc_rkey(old) true",
        "cq_b: wr 1 Success BindMw len 0 imm - flags - qp b src 0",
        "post READ: ok",
        "cq_a: wr 2 Success RdmaRead len 16 imm - flags - qp a src 0",
        "post WRITE: ok",
        "cq_a: wr 3 RemAccessErr Send len 0 imm - flags - qp a src 0",
        "state a: ERR",
    ]);
}

/// Rebinding a type 1 window changes its rkey: the old rkey is refused afterwards. A bind
/// of length 0 unbinds it: its rkey is refused too.
pub fn mw_type1_rebind_and_unbind<V: Verbs>(env: &Env<V>) {
    let mut s = setup(env);
    let mw = s.bound1(RW);
    let first = mw.rkey();
    s.bind1(&mw, 2, s.window_info(RW));
    s.log.line(format!(
        "rkey changed {}, same index {}",
        first != mw.rkey(),
        first >> 8 == mw.rkey() >> 8
    ));
    s.write(3, WIN_OFF, mw.rkey());
    let unbind = MwBindInfo {
        length: 0,
        addr: 0,
        ..s.window_info(RW)
    };
    s.bind1(&mw, 4, unbind);
    s.write(5, WIN_OFF, mw.rkey());
    s.log.state("a", &s.a);
    s.log.check(&[
        "bind_mw: ok",
        "rkey: returned = window's true, = inc_rkey(old) true",
        "cq_b: wr 1 Success BindMw len 0 imm - flags - qp b src 0",
        "bind_mw: ok",
        "rkey: returned = window's true, = inc_rkey(old) true",
        "cq_b: wr 2 Success BindMw len 0 imm - flags - qp b src 0",
        "rkey changed true, same index true",
        "post WRITE: ok",
        "cq_a: wr 3 Success RdmaWrite len 16 imm - flags - qp a src 0",
        "bind_mw: ok",
        "rkey: returned = window's true, = inc_rkey(old) true",
        "cq_b: wr 4 Success BindMw len 0 imm - flags - qp b src 0",
        "post WRITE: ok",
        "cq_a: wr 5 RemAccessErr Send len 0 imm - flags - qp a src 0",
        "state a: ERR",
    ]);
}

/// An rkey of a window that was rebound is refused: the old rkey no longer matches.
pub fn mw_old_rkey_refused_after_rebind<V: Verbs>(env: &Env<V>) {
    let mut s = setup(env);
    let mw = s.bound1(RW);
    let old = mw.rkey();
    s.bind1(&mw, 2, s.window_info(RW));
    s.write(3, WIN_OFF, old);
    s.log.check(&[
        "bind_mw: ok",
        "rkey: returned = window's true, = inc_rkey(old) true",
        "cq_b: wr 1 Success BindMw len 0 imm - flags - qp b src 0",
        "bind_mw: ok",
        "rkey: returned = window's true, = inc_rkey(old) true",
        "cq_b: wr 2 Success BindMw len 0 imm - flags - qp b src 0",
        "post WRITE: ok",
        "cq_a: wr 3 RemAccessErr Send len 0 imm - flags - qp a src 0",
    ]);
}

/// What `ibv_bind_mw` refuses when it is called, before anything is posted: a type 2
/// window (EINVAL, libibverbs), ZERO_BASED access (EINVAL, rxe's provider), a region of
/// another PD (EPERM, libibverbs), a UD QP (EINVAL, rxe's provider). The window keeps its
/// rkey.
pub fn mw_bind_refusals<V: Verbs>(env: &Env<V>) {
    let mut s = setup(env);
    let t1 = s.alloc(MwType::Type1);
    let t2 = s.alloc(MwType::Type2);
    let before = t1.rkey();
    let bind = |info: MwBindInfo| MwBind {
        wr_id: 9,
        send_flags: SendFlags::SIGNALED,
        bind_info: info,
    };
    let r = s.rig.ctx.bind_mw(&s.b, &t2, &bind(s.window_info(RW)));
    s.log.result("type 2", &r);
    let zb = s.window_info(RW | AccessFlags::ZERO_BASED);
    let r = s.rig.ctx.bind_mw(&s.b, &t1, &bind(zb));
    s.log.result("zero based", &r);
    let pd2 = s.rig.ctx.alloc_pd().expect("alloc_pd");
    let other = s
        .rig
        .ctx
        .alloc_mr(&pd2, 4096, AccessFlags::LOCAL_WRITE | AccessFlags::MW_BIND)
        .expect("alloc_mr on pd2");
    let r = s.rig.ctx.bind_mw(
        &s.b,
        &t1,
        &bind(MwBindInfo::new(&other, other.addr(), 64, RW)),
    );
    s.log.result("other PD", &r);
    let ud = s.rig.ud_qp(&s.cq_b, QKEY);
    let r = s.rig.ctx.bind_mw(&ud, &t1, &bind(s.window_info(RW)));
    s.log.result("UD QP", &r);
    s.log
        .line(format!("rkey unchanged {}", t1.rkey() == before));
    s.log.collect("cq_b", &s.cq_b, 0);
    s.log.check(&[
        "type 2: InvalidArgument bad_wr=0",
        "zero based: InvalidArgument bad_wr=0",
        "other PD: PermissionDenied bad_wr=0",
        "UD QP: InvalidArgument bad_wr=0",
        "rkey unchanged true",
    ]);
}

/// Binding to a region registered without MW_BIND is accepted by the post and refused by
/// the device: the bind completes with MW_BIND_ERR (opcode 0, as rxe's error completions)
/// and the QP moves to ERR, flushing what follows.
pub fn mw_bind_to_region_without_mw_bind<V: Verbs>(env: &Env<V>) {
    let mut s = setup(env);
    let plain = s.rig.mr(4096, ALL_REMOTE);
    let mw = s.alloc(MwType::Type1);
    s.bind1(&mw, 1, MwBindInfo::new(&plain, plain.addr(), 64, RW));
    let buf = [sge(&plain, 0, 8)];
    let r = try_send(&s.b, &[SendWr::send(2, &buf).signaled()]);
    s.log.result("post SEND", &r);
    s.log.collect("cq_b", &s.cq_b, 1);
    s.log.state("b", &s.b);
    s.log.check(&[
        "bind_mw: ok",
        "rkey: returned = window's true, = inc_rkey(old) true",
        "cq_b: wr 1 MwBindErr Send len 0 imm - flags - qp b src 0",
        "post SEND: ok",
        "cq_b: wr 2 WrFlushErr Send len 0 imm - flags - qp b src 0",
        "state b: ERR",
    ]);
}

/// A bind that reaches past the end of its region fails with MW_BIND_ERR.
pub fn mw_bind_past_the_region<V: Verbs>(env: &Env<V>) {
    let mut s = setup(env);
    let mw = s.alloc(MwType::Type1);
    let info = MwBindInfo::new(&s.mr, s.mr.addr() + 4000, 200, RW);
    s.bind1(&mw, 1, info);
    s.log.state("b", &s.b);
    s.log.check(&[
        "bind_mw: ok",
        "rkey: returned = window's true, = inc_rkey(old) true",
        "cq_b: wr 1 MwBindErr Send len 0 imm - flags - qp b src 0",
        "state b: ERR",
    ]);
}

/// A type 2 window bound with a BIND_MW work request, used, then invalidated by a
/// LOCAL_INV (completion LOCAL_INV, length 0): its rkey is refused afterwards.
pub fn mw_type2_bind_and_local_inv<V: Verbs>(env: &Env<V>) {
    let mut s = setup(env);
    let (_mw, rkey) = s.bound2(RW);
    s.write(2, WIN_OFF, rkey);
    let r = try_send(&s.b, &[SendWr::local_inv(3, rkey).signaled()]);
    s.log.result("post LOCAL_INV", &r);
    s.log.collect("cq_b", &s.cq_b, 1);
    s.write(4, WIN_OFF, rkey);
    s.log.check(&[
        "post BIND_MW: ok",
        "window's rkey is the new one: true",
        "cq_b: wr 1 Success BindMw len 0 imm - flags - qp b src 0",
        "post WRITE: ok",
        "cq_a: wr 2 Success RdmaWrite len 16 imm - flags - qp a src 0",
        "post LOCAL_INV: ok",
        "cq_b: wr 3 Success LocalInv len 0 imm - flags - qp b src 0",
        "post WRITE: ok",
        "cq_a: wr 4 RemAccessErr Send len 0 imm - flags - qp a src 0",
    ]);
}

/// A type 2 window invalidated by the peer's SEND_WITH_INV: the sender's completion is a
/// SEND; the receive carries the invalidated rkey where libibverbs' union puts it
/// (`imm_data`), but rxe flags it with the kernel's `IB_WC_WITH_INVALIDATE` (1 << 2), which
/// user space reads as `IBV_WC_IP_CSUM_OK`, not `IBV_WC_WITH_INV` (1 << 3; mlx5 sets
/// that, `handle_responder`). An invalidated type 2 window can be bound again, with a new rkey; the old one is
/// refused afterwards.
pub fn mw_type2_send_with_inv<V: Verbs>(env: &Env<V>) {
    let mut s = setup(env);
    let (mw, rkey) = s.bound2(RW);
    let recv = s.rig.mr(64, AccessFlags::LOCAL_WRITE);
    post_recv(&s.b, 10, &[sge(&recv, 0, 64)]);
    fill(&s.local, 0, b"invalidate");
    let buf = [sge(&s.local, 0, 10)];
    let r = try_send(&s.a, &[SendWr::send_with_inv(2, &buf, rkey).signaled()]);
    s.log.result("post SEND_WITH_INV", &r);
    s.log.collect("cq_a", &s.cq_a, 1);
    let got = poll_n(&s.cq_b, 1)[0];
    s.log.wc("cq_b", &got);
    s.log.line(format!(
        "imm_data holds the window's rkey: {}",
        got.imm_data == rkey
    ));
    let rkey2 = s.bind2(&mw, 3, s.window_info(RW));
    s.log.line(format!("new rkey differs: {}", rkey2 != rkey));
    s.write(4, WIN_OFF, rkey);
    // mlx5 (the simulator's personality): no GRH flag on RC, the peer's QPN as src_qp.
    let (flags, src) = if env.is_rxe() {
        ("GRH|CSUM", "0")
    } else {
        ("INV", "a")
    };
    let recv_line = format!("cq_b: wr 10 Success Recv len 10 imm - flags {flags} qp b src {src}");
    s.log.check(&[
        "post BIND_MW: ok",
        "window's rkey is the new one: true",
        "cq_b: wr 1 Success BindMw len 0 imm - flags - qp b src 0",
        "post SEND_WITH_INV: ok",
        "cq_a: wr 2 Success Send len 10 imm - flags - qp a src 0",
        &recv_line,
        "imm_data holds the window's rkey: true",
        "post BIND_MW: ok",
        "window's rkey is the new one: true",
        "cq_b: wr 3 Success BindMw len 0 imm - flags - qp b src 0",
        "new rkey differs: true",
        "post WRITE: ok",
        "cq_a: wr 4 RemAccessErr Send len 0 imm - flags - qp a src 0",
    ]);
}

/// What a type 2 window refuses on the device: a second bind while bound (MW_BIND_ERR), a
/// LOCAL_INV of a type 1 window's rkey (LOC_QP_OP_ERR; o10-37.2.26), each moving its QP
/// to ERR.
pub fn mw_type2_errors<V: Verbs>(env: &Env<V>) {
    let mut s = setup(env);
    let (mw, _) = s.bound2(RW);
    s.bind2(&mw, 2, s.window_info(RW));
    s.log.state("b", &s.b);
    // a's QP is still fine: a LOCAL_INV there of a type 1 window's rkey.
    let t1 = s.alloc(MwType::Type1);
    let r = try_send(&s.a, &[SendWr::local_inv(3, t1.rkey()).signaled()]);
    s.log.result("post LOCAL_INV", &r);
    s.log.collect("cq_a", &s.cq_a, 1);
    s.log.state("a", &s.a);
    s.log.check(&[
        "post BIND_MW: ok",
        "window's rkey is the new one: true",
        "cq_b: wr 1 Success BindMw len 0 imm - flags - qp b src 0",
        "post BIND_MW: ok",
        "window's rkey is the new one: true",
        "cq_b: wr 2 MwBindErr Send len 0 imm - flags - qp b src 0",
        "state b: ERR",
        "post LOCAL_INV: ok",
        "cq_a: wr 3 LocQpOpErr Send len 0 imm - flags - qp a src 0",
        "state a: ERR",
    ]);
}

/// A type 2 window is usable only through the QP that bound it: a request arriving at
/// another QP of the same PD with its rkey fails with REM_ACCESS_ERR.
pub fn mw_type2_only_through_its_qp<V: Verbs>(env: &Env<V>) {
    let mut s = setup(env);
    let mw = s.alloc(MwType::Type2);
    let info = s.window_info(RW);
    // Bound by a, so a request arriving at b (from a) does not match.
    let rkey = inc_rkey(mw.rkey());
    let r = try_send(
        &s.a,
        &[SendWr::bind_mw(1, mw.handle(), rkey, info).signaled()],
    );
    s.log.result("post BIND_MW on a", &r);
    s.log.collect("cq_a", &s.cq_a, 1);
    s.write(2, WIN_OFF, rkey);
    s.log.check(&[
        "post BIND_MW on a: ok",
        "cq_a: wr 1 Success BindMw len 0 imm - flags - qp a src 0",
        "post WRITE: ok",
        "cq_a: wr 2 RemAccessErr Send len 0 imm - flags - qp a src 0",
    ]);
}

/// A SEND_WITH_INV naming an rkey the responder cannot invalidate (a type 1 window's):
/// the receive completes with REM_INV_REQ_ERR and the responder moves to ERR, while the
/// sender's SEND, acknowledged, completes successfully (rxe's class J handling).
pub fn mw_send_with_inv_bad_rkey<V: Verbs>(env: &Env<V>) {
    let mut s = setup(env);
    let t1 = s.alloc(MwType::Type1);
    let recv = s.rig.mr(64, AccessFlags::LOCAL_WRITE);
    post_recv(&s.b, 10, &[sge(&recv, 0, 64)]);
    let buf = [sge(&s.local, 0, 8)];
    let r = try_send(
        &s.a,
        &[SendWr::send_with_inv(1, &buf, t1.rkey()).signaled()],
    );
    s.log.result("post SEND_WITH_INV", &r);
    s.log.collect("cq_a", &s.cq_a, 1);
    s.log.collect("cq_b", &s.cq_b, 1);
    s.log.state("a", &s.a);
    s.log.state("b", &s.b);
    s.log.check(&[
        "post SEND_WITH_INV: ok",
        "cq_a: wr 1 Success Send len 8 imm - flags - qp a src 0",
        "cq_b: wr 10 RemInvReqErr Send len 0 imm - flags - qp b src 0",
        "state a: RTS",
        "state b: ERR",
    ]);
}

/// Deallocating a bound window revokes its rkey.
pub fn mw_dealloc_bound_window<V: Verbs>(env: &Env<V>) {
    let mut s = setup(env);
    let mw = s.bound1(RW);
    let rkey = mw.rkey();
    drop(mw);
    s.write(2, WIN_OFF, rkey);
    s.log.check(&[
        "bind_mw: ok",
        "rkey: returned = window's true, = inc_rkey(old) true",
        "cq_b: wr 1 Success BindMw len 0 imm - flags - qp b src 0",
        "post WRITE: ok",
        "cq_a: wr 2 RemAccessErr Send len 0 imm - flags - qp a src 0",
    ]);
}

/// A type 2 window bound ZERO_BASED (rxe refuses that only for type 1): the peer's
/// remote address is an offset from the window's start.
pub fn mw_type2_zero_based<V: Verbs>(env: &Env<V>) {
    let mut s = setup(env);
    let (_mw, rkey) = s.bound2(RW | AccessFlags::ZERO_BASED);
    fill(&s.local, 0, b"zero-based write");
    let buf = [sge(&s.local, 0, 16)];
    let r = try_send(&s.a, &[SendWr::rdma_write(2, &buf, 8, rkey).signaled()]);
    s.log.result("post WRITE at offset 8", &r);
    s.log.collect("cq_a", &s.cq_a, 1);
    s.log.line(format!(
        "landed {:?}",
        String::from_utf8_lossy(&read(&s.mr, WIN_OFF + 8, 16))
    ));
    s.log.check(&[
        "post BIND_MW: ok",
        "window's rkey is the new one: true",
        "cq_b: wr 1 Success BindMw len 0 imm - flags - qp b src 0",
        "post WRITE at offset 8: ok",
        "cq_a: wr 2 Success RdmaWrite len 16 imm - flags - qp a src 0",
        "landed \"zero-based write\"",
    ]);
}

/// Atomics through a window bound with REMOTE_ATOMIC (its region has LOCAL_WRITE, as
/// C10-74 requires): a fetch-and-add returns the old value and adds.
pub fn mw_atomic_through_window<V: Verbs>(env: &Env<V>) {
    let mut s = setup(env);
    let mw = s.bound1(AccessFlags::REMOTE_ATOMIC);
    s.mr.write(WIN_OFF + 16, &40u64.to_ne_bytes())
        .expect("write MR");
    let buf = [sge(&s.local, 64, 8)];
    let r = try_send(
        &s.a,
        &[SendWr::fetch_add(2, &buf, s.mr.addr() + WIN_OFF as u64 + 16, mw.rkey(), 2).signaled()],
    );
    s.log.result("post FETCH_ADD", &r);
    s.log.collect("cq_a", &s.cq_a, 1);
    s.log.line(format!(
        "old {} new {}",
        read_u64(&s.local, 64),
        read_u64(&s.mr, WIN_OFF + 16)
    ));
    s.log.check(&[
        "bind_mw: ok",
        "rkey: returned = window's true, = inc_rkey(old) true",
        "cq_b: wr 1 Success BindMw len 0 imm - flags - qp b src 0",
        "post FETCH_ADD: ok",
        "cq_a: wr 2 Success FetchAdd len 8 imm - flags - qp a src 0",
        "old 40 new 42",
    ]);
}

/// Windows on UC QPs: a type 1 bind on a UC QP completes as on RC, and the peer's UC RDMA
/// WRITE goes through the window.
pub fn mw_uc_bind_and_write<V: Verbs>(env: &Env<V>) {
    let mut s = setup_on(env, QpType::Uc);
    let mw = s.bound1(AccessFlags::REMOTE_WRITE);
    s.write(2, WIN_OFF + 32, mw.rkey());
    s.log.line(format!(
        "landed {:?}",
        String::from_utf8_lossy(&read(&s.mr, WIN_OFF + 32, 16))
    ));
    s.log.check(&[
        "bind_mw: ok",
        "rkey: returned = window's true, = inc_rkey(old) true",
        "cq_b: wr 1 Success BindMw len 0 imm - flags - qp b src 0",
        "post WRITE: ok",
        "cq_a: wr 2 Success RdmaWrite len 16 imm - flags - qp a src 0",
        "landed \"through a window\"",
    ]);
}
