//! Work queues, indirection tables, RSS QPs and striding RQs (mlx5), and rxe's refusal
//! of them: exact completions (the packed byte-count word of striding WQs) and bytes.

mod common;
use backend_sim::frame::eth::Mac;
use backend_sim::frame::UdpFrameSpec;
use backend_sim::verbs::{SimQp, SimRwqIndTable, SimWq};
use backend_sim::{Personality, Sim};
use common::*;
use verbs_api::{
    Completion, Context, ErrorKind, FlowAttr, MemoryRegion, QpAttr, QpAttrMask, QueuePair, RecvWr,
    RwqIndTable, RxHashConf, RxHashFields, SendWr, Sge, StridingRqAttr, WcStatus, WorkQueue,
    WqInitAttr, WqState, RX_HASH_FUNC_TOEPLITZ,
};

const FILLER: u32 = 1 << 31;

fn mac(n: u8) -> Mac {
    Mac([2, 0, 10, 0, 0, n])
}

/// A UDP frame from node 1 to node 2's port `dport`, `payload` bytes of `fill`.
fn frame(sport: u16, dport: u16, payload: usize, fill: u8) -> Vec<u8> {
    UdpFrameSpec::new(mac(1), mac(2), (ip(1), sport), (ip(2), dport)).build(&vec![fill; payload])
}

fn hash(fields: RxHashFields) -> RxHashConf {
    RxHashConf {
        function: RX_HASH_FUNC_TOEPLITZ,
        key: (0..40).collect(),
        fields,
    }
}

/// 64-byte strides, 512 per WQE (32 KiB): the smallest WQE a ConnectX-5 takes.
fn geometry(shift: bool) -> StridingRqAttr {
    StridingRqAttr {
        single_stride_log_num_of_bytes: 6,
        single_wqe_log_num_of_strides: 9,
        two_byte_shift_en: shift,
    }
}

fn wq(n: &Node, striding: Option<StridingRqAttr>) -> SimWq {
    n.ctx
        .create_wq(
            &n.pd,
            &n.cq,
            &WqInitAttr {
                max_wr: 8,
                max_sge: 1,
                striding,
            },
        )
        .unwrap()
}

/// An RSS QP over `wqs` with `fields`, receiving what goes to node 2's UDP port 7148.
fn rss(n: &Node, wqs: &[&SimWq], fields: RxHashFields) -> (SimRwqIndTable, SimQp) {
    let table = n.ctx.create_rwq_ind_table(wqs).unwrap();
    let qp = n.ctx.create_rss_qp(&n.pd, &table, &hash(fields)).unwrap();
    (table, qp)
}

/// Posts WQE `i` of `bytes` bytes at MR offset `i * bytes` (wr_id = i).
fn post(n: &Node, q: &SimWq, i: u64, bytes: u64) {
    let sge = [Sge {
        addr: n.mr.addr() + i * bytes,
        length: bytes as u32,
        lkey: n.mr.lkey(),
    }];
    // SAFETY: the SGE lies in n.mr, which outlives the WQ.
    unsafe { q.post_recv(&[RecvWr::new(i, &sge)]).unwrap() };
}

fn send_frames(sim: &Sim, a: &Node, qa: &SimQp, frames: &[Vec<u8>]) {
    for f in frames {
        write_slot(a, 0, f);
        let sge = [slot_sge(a, 0, f.len())];
        // SAFETY: the SGE lies in a.mr.
        unsafe { qa.post_send(&[SendWr::send(0, &sge)]).unwrap() };
        // Each frame is on the wire before the slot is written again.
        while sim.step() {}
    }
}

fn read(n: &Node, at: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    n.mr.read(at as usize, &mut v).unwrap();
    v
}

fn words(c: &[Completion]) -> Vec<(u64, u32)> {
    c.iter().map(|c| (c.wr_id, c.byte_len)).collect()
}

struct Rig {
    sim: Sim,
    a: Node,
    b: Node,
    qa: SimQp,
    wq: SimWq,
    _table: SimRwqIndTable,
    _qp: SimQp,
    _flow: backend_sim::verbs::SimFlow,
}

fn rig(striding: Option<StridingRqAttr>) -> Rig {
    let sim = Sim::new(1);
    let a = node(&sim, 1, Personality::Mlx5);
    let b = node(&sim, 2, Personality::Mlx5);
    let qa = raw_qp(&a);
    let wq = wq(&b, striding);
    let (table, qp) = rss(&b, &[&wq], RxHashFields::empty());
    let flow = b
        .ctx
        .create_flow(&qp, &FlowAttr::udp_endpoint(1, mac(2).0, ip(2), 7148))
        .unwrap();
    Rig {
        sim,
        a,
        b,
        qa,
        wq,
        _table: table,
        _qp: qp,
        _flow: flow,
    }
}

#[test]
fn packets_land_in_consecutive_strides_with_packed_completions() {
    let r = rig(Some(geometry(false)));
    r.wq.modify(WqState::Rdy, Some(WqState::Reset)).unwrap();
    post(&r.b, &r.wq, 0, 32768);
    post(&r.b, &r.wq, 1, 32768);
    // 60 bytes (one stride), 1514 (24 strides), 8234 bytes of an 8 KiB payload (129).
    let frames = [
        frame(4000, 7148, 18, 1),
        frame(4000, 7148, 1472, 2),
        frame(4000, 7148, 8192, 3),
    ];
    send_frames(&r.sim, &r.a, &r.qa, &frames);
    let got = wait(&r.sim, &r.b.cq, 3);
    assert!(got.iter().all(|c| c.status == WcStatus::Success));
    assert_eq!(
        words(&got),
        vec![
            (0, 60 | 1 << 16),
            (0, 1514 | 24 << 16),
            (0, 8234 | 129 << 16)
        ]
    );
    assert_eq!(read(&r.b, 0, 60), frames[0]);
    assert_eq!(read(&r.b, 64, 1514), frames[1]);
    assert_eq!(read(&r.b, 25 * 64, 8234), frames[2]);
    assert_eq!(r.wq.wq_num(), got[0].qp_num);
}

#[test]
fn a_packet_that_does_not_fit_completes_the_wqe_with_a_filler() {
    let r = rig(Some(geometry(false)));
    r.wq.modify(WqState::Rdy, None).unwrap();
    post(&r.b, &r.wq, 0, 32768);
    post(&r.b, &r.wq, 1, 32768);
    // 21 frames of 24 strides use 504 of the 512; the 22nd does not fit the 8 left.
    let frames: Vec<Vec<u8>> = (0..22).map(|i| frame(4000, 7148, 1472, i)).collect();
    send_frames(&r.sim, &r.a, &r.qa, &frames);
    let got = wait(&r.sim, &r.b.cq, 23);
    let mut expect: Vec<(u64, u32)> = vec![(0, 1514 | 24 << 16); 21];
    expect.push((0, FILLER | 8 << 16));
    expect.push((1, 1514 | 24 << 16));
    assert_eq!(words(&got), expect);
    assert_eq!(read(&r.b, 20 * 24 * 64, 1514), frames[20]);
    assert_eq!(
        read(&r.b, 32768, 1514),
        frames[21],
        "the next WQE's first stride"
    );
    // WQE 0 is used up: with WQE 1 nearly full too, a third WQE is needed next.
    let more: Vec<Vec<u8>> = (0..21).map(|i| frame(4000, 7148, 1472, 100 + i)).collect();
    send_frames(&r.sim, &r.a, &r.qa, &more);
    let got = wait(&r.sim, &r.b.cq, 21);
    assert_eq!(got.len(), 21);
    assert_eq!(got[20].byte_len, FILLER | 8 << 16, "WQE 1 filled up");
    assert_eq!(
        r.sim.nic_stats(r.b.host).rx_no_wqe,
        1,
        "no third WQE posted"
    );
}

#[test]
fn the_two_byte_shift_places_each_packet_two_bytes_in() {
    let r = rig(Some(geometry(true)));
    r.wq.modify(WqState::Rdy, None).unwrap();
    post(&r.b, &r.wq, 0, 32768);
    let frames = [frame(4000, 7148, 20, 7), frame(4000, 7148, 1472, 8)];
    send_frames(&r.sim, &r.a, &r.qa, &frames);
    let got = wait(&r.sim, &r.b.cq, 2);
    // 62 + 2 bytes fill one stride exactly; 1514 + 2 need 24.
    assert_eq!(words(&got), vec![(0, 64 | 1 << 16), (0, 1516 | 24 << 16)]);
    assert_eq!(read(&r.b, 2, 62), frames[0]);
    assert_eq!(read(&r.b, 64 + 2, 1514), frames[1]);
}

#[test]
fn a_wq_takes_packets_only_when_ready_and_a_malformed_wqe_fails_it() {
    let r = rig(Some(geometry(false)));
    post(&r.b, &r.wq, 0, 32768);
    send_frames(&r.sim, &r.a, &r.qa, &[frame(4000, 7148, 18, 1)]);
    assert!(wait(&r.sim, &r.b.cq, 1).is_empty(), "RESET drops");
    assert_eq!(r.sim.nic_stats(r.b.host).rx_no_wqe, 1);
    // Leaving RESET for RDY forgets what was posted in RESET (libmlx5 resets the ring).
    r.wq.modify(WqState::Rdy, None).unwrap();
    send_frames(&r.sim, &r.a, &r.qa, &[frame(4000, 7148, 18, 1)]);
    assert!(wait(&r.sim, &r.b.cq, 1).is_empty(), "nothing posted");
    assert_eq!(r.sim.nic_stats(r.b.host).rx_no_wqe, 2);
    // Back to RESET and RDY again, with a WQE of the wrong length.
    r.wq.modify(WqState::Reset, None).unwrap();
    r.wq.modify(WqState::Rdy, None).unwrap();
    post(&r.b, &r.wq, 0, 4096);
    post(&r.b, &r.wq, 1, 32768);
    send_frames(&r.sim, &r.a, &r.qa, &[frame(4000, 7148, 18, 1)]);
    let got = wait(&r.sim, &r.b.cq, 2);
    let st: Vec<(u64, WcStatus)> = got.iter().map(|c| (c.wr_id, c.status)).collect();
    assert_eq!(
        st,
        vec![(0, WcStatus::LocLenErr), (1, WcStatus::WrFlushErr)]
    );
    assert_eq!(r.wq.state().unwrap(), WqState::Err);
    assert_eq!(
        r.wq.modify(WqState::Rdy, None).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        r.wq.modify(WqState::Rdy, Some(WqState::Rdy))
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidArgument,
        "a wrong current state"
    );
}

#[test]
fn a_bad_lkey_fails_with_a_protection_error() {
    let r = rig(Some(geometry(false)));
    r.wq.modify(WqState::Rdy, None).unwrap();
    let sge = [Sge {
        addr: r.b.mr.addr(),
        length: 32768,
        lkey: r.b.mr.lkey() ^ 0x100,
    }];
    // SAFETY: the address lies in b.mr; the key is wrong on purpose.
    unsafe { r.wq.post_recv(&[RecvWr::new(5, &sge)]).unwrap() };
    send_frames(&r.sim, &r.a, &r.qa, &[frame(4000, 7148, 18, 1)]);
    let got = wait(&r.sim, &r.b.cq, 1);
    assert_eq!((got[0].wr_id, got[0].status), (5, WcStatus::LocProtErr));
    assert_eq!(r.wq.state().unwrap(), WqState::Err);
}

#[test]
fn an_ordinary_wq_takes_one_packet_per_receive() {
    let r = rig(None);
    r.wq.modify(WqState::Rdy, None).unwrap();
    post(&r.b, &r.wq, 0, 2048);
    post(&r.b, &r.wq, 1, 2048);
    let frames = [frame(4000, 7148, 18, 1), frame(4000, 7148, 1472, 2)];
    send_frames(&r.sim, &r.a, &r.qa, &frames);
    let got = wait(&r.sim, &r.b.cq, 2);
    assert_eq!(words(&got), vec![(0, 60), (1, 1514)]);
    assert_eq!(read(&r.b, 2048, 1514), frames[1]);
}

#[test]
fn the_rx_hash_spreads_flows_over_the_table_and_keeps_each_on_one_wq() {
    let sim = Sim::new(1);
    let a = node(&sim, 1, Personality::Mlx5);
    let b = node(&sim, 2, Personality::Mlx5);
    let qa = raw_qp(&a);
    let wqs = [wq(&b, None), wq(&b, None)];
    for (i, q) in wqs.iter().enumerate() {
        q.modify(WqState::Rdy, None).unwrap();
        for k in 0..8 {
            post(&b, q, (i * 8 + k) as u64, 2048);
        }
    }
    let fields = RxHashFields::SRC_IPV4
        | RxHashFields::DST_IPV4
        | RxHashFields::SRC_PORT_UDP
        | RxHashFields::DST_PORT_UDP;
    let (table, qp) = rss(&b, &[&wqs[0], &wqs[1]], fields);
    assert_eq!(table.wq_nums(), vec![wqs[0].wq_num(), wqs[1].wq_num()]);
    let _flow = b
        .ctx
        .create_flow(&qp, &FlowAttr::udp_endpoint(1, mac(2).0, ip(2), 7148))
        .unwrap();
    // Four source ports, each twice.
    let frames: Vec<Vec<u8>> = (0..8)
        .map(|i| frame(5000 + i % 4, 7148, 18, i as u8))
        .collect();
    send_frames(&sim, &a, &qa, &frames);
    let got = wait(&sim, &b.cq, 8);
    assert_eq!(got.len(), 8);
    let wq_of = |i: usize| got[i].qp_num;
    for i in 0..4 {
        assert_eq!(wq_of(i), wq_of(i + 4), "one flow, one WQ");
    }
    let used: std::collections::BTreeSet<u32> = got.iter().map(|c| c.qp_num).collect();
    assert_eq!(used.len(), 2, "four flows over two WQs use both");
    // An RSS QP has no state machine to move.
    let e = qp
        .apply_modify(&QpAttr::default(), QpAttrMask::STATE)
        .unwrap_err();
    assert_eq!(e.errno(), Some(38));
}

#[test]
fn stride_geometries_outside_the_connectx5_limits_are_refused() {
    let sim = Sim::new(1);
    let b = node(&sim, 2, Personality::Mlx5);
    let try_geometry = |s, n| {
        b.ctx.create_wq(
            &b.pd,
            &b.cq,
            &WqInitAttr {
                max_wr: 2,
                max_sge: 1,
                striding: Some(StridingRqAttr {
                    single_stride_log_num_of_bytes: s,
                    single_wqe_log_num_of_strides: n,
                    two_byte_shift_en: false,
                }),
            },
        )
    };
    for (s, n) in [(5, 9), (14, 9), (6, 8), (6, 17)] {
        assert_eq!(
            try_geometry(s, n).unwrap_err().kind(),
            ErrorKind::InvalidArgument
        );
    }
    for (s, n) in [(6, 9), (13, 16), (6, 14)] {
        assert!(try_geometry(s, n).is_ok());
    }
    let zero = WqInitAttr {
        max_wr: 0,
        max_sge: 1,
        striding: None,
    };
    assert_eq!(
        b.ctx.create_wq(&b.pd, &b.cq, &zero).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    let q = wq(&b, None);
    let bad_key = RxHashConf {
        key: vec![0; 16],
        ..hash(RxHashFields::empty())
    };
    let table = b.ctx.create_rwq_ind_table(&[&q]).unwrap();
    assert_eq!(
        b.ctx
            .create_rss_qp(&b.pd, &table, &bad_key)
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        b.ctx
            .create_rwq_ind_table(&[&q, &q, &q])
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidArgument
    );
}

#[test]
fn rxe_has_no_work_queues() {
    let sim = Sim::new(1);
    let b = node(&sim, 2, Personality::Rxe);
    let e = b
        .ctx
        .create_wq(
            &b.pd,
            &b.cq,
            &WqInitAttr {
                max_wr: 2,
                max_sge: 1,
                striding: None,
            },
        )
        .unwrap_err();
    assert_eq!((e.kind(), e.errno()), (ErrorKind::Unsupported, Some(95)));
    let e = b.ctx.create_rwq_ind_table(&[]).unwrap_err();
    assert_eq!((e.kind(), e.errno()), (ErrorKind::Unsupported, Some(95)));
}
