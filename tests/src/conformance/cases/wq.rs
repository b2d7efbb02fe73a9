//! Receive work queues, indirection tables, RSS QPs and striding RQs: what mlx5 offers
//! (rdma-core providers/mlx5/verbs.c `mlx5_create_wq`, `mlx5_create_rwq_ind_table`; the
//! kernel's `create_rss_raw_qp_tir`) and spead2's multi-packet receive queue uses. Frames
//! come from a RAW_PACKET QP on the same device, to a multicast group whose flow rule
//! (naming the group's MAC) steers them to an RSS QP; mlx5 loops multicast back to its
//! own steering. A striding RQ completes with mlx5's packed byte-count word (bytes in
//! bits 0-15, strides consumed in bits 16-30, a filler flag in bit 31), which the cases
//! decode as spead2 does; its `wr_id` is not logged, since a striding RQ's entries carry
//! none on the device (libmlx5 reports `rq.wrid[wqe_counter]`, which only
//! `ibv_post_wq_recv` fills, and a striding RQ's entries are written into the ring).
//!
//! rxe has none of these: on rxe each case checks that the device refuses a WQ, a
//! striding WQ and an indirection table as unsupported (rdma-core providers/rxe/rxe.c has
//! no `create_wq` or `create_rwq_ind_table` op, so libibverbs answers EOPNOTSUPP, and
//! libmlx5's `mlx5dv_is_supported` is false for it), and stops there.

use netwire::eth::Mac;
use netwire::frame::UdpFrameSpec;
use verbs_api::{
    FlowAttr, RwqIndTable, RxHashConf, RxHashFields, StridingRqAttr, WorkQueue, WqInitAttr,
    WqState, RX_HASH_FUNC_TOEPLITZ,
};

use super::prelude::*;

/// The group the frames go to, its MAC, and the UDP port of the flow rule.
const GROUP: Ipv4Addr = Ipv4Addr::new(239, 77, 0, 1);
const GROUP_MAC: [u8; 6] = [0x01, 0x00, 0x5e, 0x4d, 0x00, 0x01];
const PORT: u16 = 7148;
/// The frames' source: fixed, so that the RX hash of each frame is the same everywhere.
const SRC: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const SRC_MAC: [u8; 6] = [0x02, 0x00, 0x0a, 0x00, 0x00, 0x01];

/// The Toeplitz key of Microsoft's RSS specification ("Verifying the RSS hash
/// calculation"), 40 bytes as mlx5 takes it.
const MS_KEY: [u8; 40] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
    0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
    0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
];

/// 64-byte strides, 512 per WQE (32 KiB): the smallest WQE a ConnectX-5 takes.
const STRIDES: StridingRqAttr = StridingRqAttr {
    single_stride_log_num_of_bytes: 6,
    single_wqe_log_num_of_strides: 9,
    two_byte_shift_en: false,
};
const WQE: usize = 32768;

/// A UDP frame from [`SRC`] port `sport` to the group, `payload` bytes of `fill`.
fn frame(sport: u16, payload: usize, fill: u8) -> Vec<u8> {
    UdpFrameSpec::new(Mac(SRC_MAC), Mac(GROUP_MAC), (SRC, sport), (GROUP, PORT))
        .build(&vec![fill; payload])
}

fn plain() -> WqInitAttr {
    WqInitAttr {
        max_wr: 8,
        max_sge: 1,
        striding: None,
    }
}

fn striding(g: StridingRqAttr) -> WqInitAttr {
    WqInitAttr {
        max_wr: 8,
        max_sge: 1,
        striding: Some(g),
    }
}

fn no_hash() -> RxHashConf {
    RxHashConf {
        function: RX_HASH_FUNC_TOEPLITZ,
        key: MS_KEY.to_vec(),
        fields: RxHashFields::empty(),
    }
}

/// On rxe, logs and checks its refusals and returns true: the case has nothing more to
/// check there.
fn refused_on_rxe<V: Verbs>(env: &Env<V>) -> bool {
    if !env.is_rxe() {
        return false;
    }
    let rig = open(env);
    let c = rig.cq(8);
    let mut log = Log::new();
    let mut refusal = |what: &str, r: Result<()>| {
        let e = r.expect_err(what);
        log.line(format!("{what}: {:?} errno {:?}", e.kind(), e.errno()));
    };
    refusal("WQ", rig.ctx.create_wq(&rig.pd, &c.cq, &plain()).map(drop));
    refusal(
        "striding WQ",
        rig.ctx
            .create_wq(&rig.pd, &c.cq, &striding(STRIDES))
            .map(drop),
    );
    refusal(
        "RWQ indirection table",
        rig.ctx.create_rwq_ind_table(&[]).map(drop),
    );
    log.check(&[
        "WQ: Unsupported errno Some(95)",
        "striding WQ: Unsupported errno Some(95)",
        "RWQ indirection table: Unsupported errno Some(95)",
    ]);
    true
}

/// WQs on one CQ, a table of them, an RSS QP over it with a rule for the group, and a
/// RAW_PACKET QP to send frames; registered memory to send from and receive into.
struct Steered<C: Context> {
    _flow: C::Flow,
    rss: C::Qp,
    table: C::RwqIndTable,
    wqs: Vec<C::Wq>,
    sender: C::Qp,
    send_cq: crate::conformance::rig::CqPair<C>,
    cq: crate::conformance::rig::CqPair<C>,
    tx: C::Mr,
    rx: C::Mr,
}

fn steered<C: Context>(rig: &Rig<C>, attrs: &[WqInitAttr], hash: &RxHashConf) -> Steered<C> {
    let cq = rig.cq(256);
    let send_cq = rig.cq(64);
    let wqs: Vec<C::Wq> = attrs
        .iter()
        .map(|a| rig.ctx.create_wq(&rig.pd, &cq.cq, a).expect("create_wq"))
        .collect();
    let refs: Vec<&C::Wq> = wqs.iter().collect();
    let table = rig.ctx.create_rwq_ind_table(&refs).expect("table");
    let rss = rig
        .ctx
        .create_rss_qp(&rig.pd, &table, hash)
        .expect("RSS QP");
    let rule = FlowAttr::udp_endpoint(rig.port, GROUP_MAC, GROUP, PORT);
    let flow = rig.ctx.create_flow(&rss, &rule).expect("flow");
    let sender = rig.qp(QpType::RawPacket, &send_cq.cq, 0);
    for m in [
        verbs_api::QpModify::to(QpState::Init).port(rig.port),
        verbs_api::QpModify::to(QpState::Rtr),
        verbs_api::QpModify::to(QpState::Rts),
    ] {
        sender
            .modify_with(&m)
            .expect("bring up the RAW_PACKET sender");
    }
    Steered {
        _flow: flow,
        rss,
        table,
        wqs,
        sender,
        send_cq,
        cq,
        tx: rig.mr(16384, AccessFlags::empty()),
        rx: rig.mr(3 * WQE, AccessFlags::empty()),
    }
}

impl<C: Context> Steered<C> {
    /// Sends each frame and waits for its send completion.
    fn send(&self, frames: &[Vec<u8>]) {
        for (i, f) in frames.iter().enumerate() {
            fill(&self.tx, 0, f);
            let s = [sge(&self.tx, 0, f.len() as u32)];
            post_send(&self.sender, SendWr::send(i as u64, &s).signaled());
            let wc = poll_n(&self.send_cq.cq, 1);
            expect_wc(&wc[0], i as u64, WcStatus::Success, Some(WcOpcode::Send));
        }
    }

    /// Posts a receive of `len` bytes at `offset` of the receive memory to WQ `wq`.
    fn post(&self, wq: usize, wr_id: u64, offset: usize, len: usize) {
        let s = [sge(&self.rx, offset, len as u32)];
        // SAFETY: the SGE lies in `rx`, which lives as long as the WQ; the case reads
        // it only through MemoryRegion::read after the completions.
        unsafe { self.wqs[wq].post_recv(&[RecvWr::new(wr_id, &s)]) }.expect("post_wq_recv");
    }

    /// The index in the table of the WQ a completion came from.
    fn wq_of(&self, wc: &Completion) -> String {
        self.wqs
            .iter()
            .position(|q| q.wq_num() == wc.qp_num)
            .map_or_else(|| format!("qpn {:#x}", wc.qp_num), |i| format!("wq{i}"))
    }

    /// Logs `n` completions of an ordinary WQ: `wqI: wr W STATUS OPCODE len N`.
    fn collect_plain(&self, log: &mut Log, n: usize) {
        for w in poll_n(&self.cq.cq, n) {
            log.line(format!(
                "{}: wr {} {:?} {:?} len {}",
                self.wq_of(&w),
                w.wr_id,
                w.status,
                w.opcode,
                w.byte_len
            ));
        }
    }

    /// Logs `n` completions of a striding WQ, the packed word decoded as spead2 decodes
    /// it: `wqI: STATUS bytes B strides S filler F`.
    fn collect_strided(&self, log: &mut Log, n: usize) {
        for w in poll_n(&self.cq.cq, n) {
            let b = w.byte_len;
            log.line(format!(
                "{}: {:?} bytes {} strides {} filler {}",
                self.wq_of(&w),
                w.status,
                b & 0xffff,
                (b >> 16) & 0x7fff,
                b >> 31
            ));
        }
    }

    fn bytes_match(&self, offset: usize, f: &[u8]) -> bool {
        read(&self.rx, offset, f.len()) == f
    }
}

/// An ordinary WQ behind an RSS QP takes one frame per receive, only when ready: a WQ in
/// RESET takes nothing, and leaving RESET for RDY forgets what was posted in RESET
/// (libmlx5's `mlx5_modify_wq` zeroes the ring's indices and doorbell record). An RSS QP
/// has no state machine to move (the kernel's `mlx5_ib_modify_qp`: ENOSYS for a QP over
/// an indirection table).
pub fn wq_takes_frames_only_when_ready<V: Verbs>(env: &Env<V>) {
    if refused_on_rxe(env) {
        return;
    }
    let rig = open(env);
    let s = steered(&rig, &[plain()], &no_hash());
    let mut log = Log::new();
    log.line(format!(
        "table holds the WQ: {}",
        s.table.wq_nums() == vec![s.wqs[0].wq_num()]
    ));
    log.line(format!("state {:?}", s.wqs[0].state().expect("state")));
    s.post(0, 7, 0, 2048);
    s.send(&[frame(4000, 18, 1)]);
    log.line(format!(
        "in RESET: {} completions",
        poll_quiet(&s.cq.cq).len()
    ));
    log.result(
        "to RDY",
        &s.wqs[0].modify(WqState::Rdy, Some(WqState::Reset)),
    );
    log.line(format!("state {:?}", s.wqs[0].state().expect("state")));
    s.send(&[frame(4000, 18, 2)]);
    log.line(format!(
        "posted in RESET: {} completions",
        poll_quiet(&s.cq.cq).len()
    ));
    s.post(0, 0, 0, 2048);
    s.post(0, 1, 2048, 2048);
    let frames = [frame(4000, 18, 3), frame(4000, 1472, 4)];
    s.send(&frames);
    s.collect_plain(&mut log, 2);
    log.line(format!(
        "bytes: {} {}",
        s.bytes_match(0, &frames[0]),
        s.bytes_match(2048, &frames[1])
    ));
    let e = s
        .rss
        .apply_modify(&verbs_api::QpAttr::default(), QpAttrMask::STATE)
        .expect_err("an RSS QP has no states");
    log.line(format!("modify the RSS QP: errno {:?}", e.errno()));
    log.check(&[
        "table holds the WQ: true",
        "state Reset",
        "in RESET: 0 completions",
        "to RDY: ok",
        "state Rdy",
        "posted in RESET: 0 completions",
        "wq0: wr 0 Success Recv len 60",
        "wq0: wr 1 Success Recv len 1514",
        "bytes: true true",
        "modify the RSS QP: errno Some(38)",
    ]);
}

/// The RX hash (Toeplitz, Microsoft's key, over source and destination IPv4 address and
/// UDP port) picks entry `hash & (size - 1)` of a table of four WQs, and keeps each flow
/// on its WQ. The expected entries were computed apart from any backend: for source
/// ports 5000, 5100, 5200 and 5500 (10.0.0.1 to 239.77.0.1:7148) the hashes are
/// 0x3f2de78d, 0x8954c070, 0x1b87e837 and 0xa275ffd6 (the same function gives the
/// specification's 0x51ccc178 for 66.9.149.187:2794 to 161.142.100.80:1766).
pub fn rss_steers_by_toeplitz_hash<V: Verbs>(env: &Env<V>) {
    if refused_on_rxe(env) {
        return;
    }
    let rig = open(env);
    let hash = RxHashConf {
        fields: RxHashFields::SRC_IPV4
            | RxHashFields::DST_IPV4
            | RxHashFields::SRC_PORT_UDP
            | RxHashFields::DST_PORT_UDP,
        ..no_hash()
    };
    let s = steered(&rig, &[plain(), plain(), plain(), plain()], &hash);
    let mut log = Log::new();
    for (i, q) in s.wqs.iter().enumerate() {
        q.modify(WqState::Rdy, None).expect("to RDY");
        for k in 0..2 {
            s.post(i, (10 * i + k) as u64, (2 * i + k) * 2048, 2048);
        }
    }
    let ports = [5000u16, 5100, 5200, 5500];
    let frames: Vec<Vec<u8>> = (0..8)
        .map(|i| frame(ports[i % 4], 18 + i, i as u8))
        .collect();
    s.send(&frames);
    s.collect_plain(&mut log, 8);
    log.check(&[
        "wq1: wr 10 Success Recv len 60",
        "wq0: wr 0 Success Recv len 61",
        "wq3: wr 30 Success Recv len 62",
        "wq2: wr 20 Success Recv len 63",
        "wq1: wr 11 Success Recv len 64",
        "wq0: wr 1 Success Recv len 65",
        "wq3: wr 31 Success Recv len 66",
        "wq2: wr 21 Success Recv len 67",
    ]);
}

/// A striding RQ places frames in consecutive strides of one WQE and completes each
/// with the packed word: 60 bytes take one 64-byte stride, 1514 take 24, and 8234 (an
/// 8 KiB payload) take 129, at stride offsets 0, 1 and 25. An entry posted while the WQ
/// was in RESET is forgotten when it becomes ready (libmlx5's `mlx5_modify_wq` zeroes the
/// ring's indices and doorbell record), so the frames land in the entries posted after.
pub fn striding_rq_packs_frames_into_strides<V: Verbs>(env: &Env<V>) {
    if refused_on_rxe(env) {
        return;
    }
    let rig = open(env);
    let s = steered(&rig, &[striding(STRIDES)], &no_hash());
    s.post(0, 9, 2 * WQE, WQE);
    s.wqs[0].modify(WqState::Rdy, None).expect("to RDY");
    s.post(0, 0, 0, WQE);
    s.post(0, 1, WQE, WQE);
    let frames = [
        frame(4000, 18, 1),
        frame(4000, 1472, 2),
        frame(4000, 8192, 3),
    ];
    s.send(&frames);
    let mut log = Log::new();
    s.collect_strided(&mut log, 3);
    log.line(format!(
        "bytes: {} {} {}",
        s.bytes_match(0, &frames[0]),
        s.bytes_match(64, &frames[1]),
        s.bytes_match(25 * 64, &frames[2])
    ));
    log.check(&[
        "wq0: Success bytes 60 strides 1 filler 0",
        "wq0: Success bytes 1514 strides 24 filler 0",
        "wq0: Success bytes 8234 strides 129 filler 0",
        "bytes: true true true",
    ]);
}

/// A frame that does not fit the strides a WQE has left completes that WQE with a
/// filler (the strides left, no bytes) and lands at the start of the next WQE: 21 frames
/// of 24 strides use 504 of 512, the 22nd goes to WQE 1.
pub fn striding_rq_filler_ends_a_full_wqe<V: Verbs>(env: &Env<V>) {
    if refused_on_rxe(env) {
        return;
    }
    let rig = open(env);
    let s = steered(&rig, &[striding(STRIDES)], &no_hash());
    s.wqs[0].modify(WqState::Rdy, None).expect("to RDY");
    s.post(0, 0, 0, WQE);
    s.post(0, 1, WQE, WQE);
    let frames: Vec<Vec<u8>> = (0..22).map(|i| frame(4000, 1472, i)).collect();
    s.send(&frames);
    let mut log = Log::new();
    s.collect_strided(&mut log, 23);
    log.line(format!(
        "bytes: {} {}",
        s.bytes_match(20 * 24 * 64, &frames[20]),
        s.bytes_match(WQE, &frames[21])
    ));
    let mut expect = vec!["wq0: Success bytes 1514 strides 24 filler 0"; 21];
    expect.push("wq0: Success bytes 0 strides 8 filler 1");
    expect.push("wq0: Success bytes 1514 strides 24 filler 0");
    expect.push("bytes: true true");
    log.check(&expect);
}

/// With the two-byte shift each frame starts two bytes into its first stride, and the
/// two bytes count: 62 bytes fill one stride, 1514 take 24 strides and report 1516.
pub fn striding_rq_two_byte_shift<V: Verbs>(env: &Env<V>) {
    if refused_on_rxe(env) {
        return;
    }
    let rig = open(env);
    let g = StridingRqAttr {
        two_byte_shift_en: true,
        ..STRIDES
    };
    let s = steered(&rig, &[striding(g)], &no_hash());
    s.wqs[0].modify(WqState::Rdy, None).expect("to RDY");
    s.post(0, 0, 0, WQE);
    let frames = [frame(4000, 20, 7), frame(4000, 1472, 8)];
    s.send(&frames);
    let mut log = Log::new();
    s.collect_strided(&mut log, 2);
    log.line(format!(
        "bytes: {} {}",
        s.bytes_match(2, &frames[0]),
        s.bytes_match(64 + 2, &frames[1])
    ));
    log.check(&[
        "wq0: Success bytes 64 strides 1 filler 0",
        "wq0: Success bytes 1516 strides 24 filler 0",
        "bytes: true true",
    ]);
}

/// An entry whose length is not one WQE's fails when the device uses it (a local length
/// error), and the entries after it are flushed.
pub fn striding_rq_malformed_entry_fails<V: Verbs>(env: &Env<V>) {
    if refused_on_rxe(env) {
        return;
    }
    let rig = open(env);
    let s = steered(&rig, &[striding(STRIDES)], &no_hash());
    s.wqs[0].modify(WqState::Rdy, None).expect("to RDY");
    s.post(0, 0, 0, 4096);
    s.post(0, 1, WQE, WQE);
    s.send(&[frame(4000, 18, 1)]);
    let mut log = Log::new();
    for w in poll_n(&s.cq.cq, 2) {
        log.line(format!("{}: {:?}", s.wq_of(&w), w.status));
    }
    log.check(&["wq0: LocLenErr", "wq0: WrFlushErr"]);
}

/// What mlx5 refuses: stride geometries outside a ConnectX-5's ranges (the kernel's
/// `MLX5_{MIN,MAX}_SINGLE_STRIDE_LOG_NUM_BYTES` 6..13 and
/// `MLX5_{MIN,MAX}_SINGLE_WQE_LOG_NUM_STRIDES` 9..16, which `mlx5dv_query_device`
/// reports and libmlx5 checks), a WQ of no receives (`mlx5_calc_rwq_size`), a table of a
/// size that is not a power of two, a hash key that is not 40 bytes and a hash function
/// other than Toeplitz (`create_rss_raw_qp_tir`: EINVAL and EOPNOTSUPP).
pub fn wq_and_rss_refusals<V: Verbs>(env: &Env<V>) {
    if refused_on_rxe(env) {
        return;
    }
    let rig = open(env);
    let c = rig.cq(8);
    let mut log = Log::new();
    for (b, n) in [(5, 9), (14, 9), (6, 8), (6, 17), (6, 9), (13, 16), (6, 14)] {
        let g = StridingRqAttr {
            single_stride_log_num_of_bytes: b,
            single_wqe_log_num_of_strides: n,
            two_byte_shift_en: false,
        };
        let a = WqInitAttr {
            max_wr: 2,
            ..striding(g)
        };
        log.result(
            &format!("strides of 2^{b} bytes, 2^{n} per WQE"),
            &rig.ctx.create_wq(&rig.pd, &c.cq, &a),
        );
    }
    let zero = WqInitAttr {
        max_wr: 0,
        ..plain()
    };
    log.result("max_wr 0", &rig.ctx.create_wq(&rig.pd, &c.cq, &zero));
    let q = rig.ctx.create_wq(&rig.pd, &c.cq, &plain()).expect("WQ");
    log.result("table of 3", &rig.ctx.create_rwq_ind_table(&[&q, &q, &q]));
    let table = rig.ctx.create_rwq_ind_table(&[&q]).expect("table");
    let short = RxHashConf {
        key: MS_KEY[..16].to_vec(),
        ..no_hash()
    };
    log.result(
        "16-byte key",
        &rig.ctx.create_rss_qp(&rig.pd, &table, &short),
    );
    let xor = RxHashConf {
        function: 2,
        ..no_hash()
    };
    log.result(
        "hash function 2",
        &rig.ctx.create_rss_qp(&rig.pd, &table, &xor),
    );
    log.check(&[
        "strides of 2^5 bytes, 2^9 per WQE: InvalidArgument",
        "strides of 2^14 bytes, 2^9 per WQE: InvalidArgument",
        "strides of 2^6 bytes, 2^8 per WQE: InvalidArgument",
        "strides of 2^6 bytes, 2^17 per WQE: InvalidArgument",
        "strides of 2^6 bytes, 2^9 per WQE: ok",
        "strides of 2^13 bytes, 2^16 per WQE: ok",
        "strides of 2^6 bytes, 2^14 per WQE: ok",
        "max_wr 0: InvalidArgument",
        "table of 3: InvalidArgument",
        "16-byte key: InvalidArgument",
        "hash function 2: Unsupported",
    ]);
}
