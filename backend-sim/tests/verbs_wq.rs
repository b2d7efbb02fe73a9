//! Work queues and striding RQs (mlx5) at the simulator's level: its NIC counters, the
//! WQ state it keeps after a failure, and protection errors. What a program sees of work
//! queues, indirection tables, RSS QPs and striding RQs (completions, packed byte counts,
//! bytes, refusals, rxe's among them) is checked by the conformance suite
//! (tests/src/conformance/cases/wq.rs), on the simulator and through the emulated
//! libibverbs.

mod common;
use backend_sim::frame::eth::Mac;
use backend_sim::frame::UdpFrameSpec;
use backend_sim::verbs::{SimQp, SimRwqIndTable, SimWq};
use backend_sim::{Personality, Sim};
use common::*;
use verbs_api::{
    Context, ErrorKind, FlowAttr, MemoryRegion, QueuePair, RecvWr, RxHashConf, RxHashFields,
    SendWr, Sge, StridingRqAttr, WcStatus, WorkQueue, WqInitAttr, WqState, RX_HASH_FUNC_TOEPLITZ,
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

/// Once every posted WQE is used up, a frame finds no WQE and the NIC counts it (the
/// filler that ends each WQE is checked by the conformance suite).
#[test]
fn a_used_up_striding_rq_counts_the_frames_it_drops() {
    let r = rig(Some(geometry(false)));
    r.wq.modify(WqState::Rdy, None).unwrap();
    post(&r.b, &r.wq, 0, 32768);
    post(&r.b, &r.wq, 1, 32768);
    // 21 frames of 24 strides fill a WQE but 8 strides; the 22nd starts WQE 1, whose 21st
    // frame fills it as far; the 43rd finds no WQE.
    let frames: Vec<Vec<u8>> = (0..43).map(|i| frame(4000, 7148, 1472, i)).collect();
    send_frames(&r.sim, &r.a, &r.qa, &frames);
    let got = wait(&r.sim, &r.b.cq, 45);
    assert_eq!(got.len(), 44, "21 + 21 frames and two fillers");
    assert_eq!(got[21].byte_len, FILLER | 8 << 16);
    assert_eq!(got[43].byte_len, FILLER | 8 << 16);
    assert_eq!(
        r.sim.nic_stats(r.b.host).rx_no_wqe,
        1,
        "no third WQE posted"
    );
}

/// A WQ in RESET, or ready with nothing posted, drops what reaches it and the NIC counts
/// it; a WQ the device failed is in ERR, from which only RESET leads (completions and
/// bytes of the same steps are checked by the conformance suite).
#[test]
fn a_wq_counts_its_drops_and_stays_in_err_after_a_malformed_wqe() {
    let r = rig(Some(geometry(false)));
    post(&r.b, &r.wq, 0, 32768);
    send_frames(&r.sim, &r.a, &r.qa, &[frame(4000, 7148, 18, 1)]);
    assert!(wait(&r.sim, &r.b.cq, 1).is_empty(), "RESET drops");
    assert_eq!(r.sim.nic_stats(r.b.host).rx_no_wqe, 1);
    r.wq.modify(WqState::Rdy, None).unwrap();
    send_frames(&r.sim, &r.a, &r.qa, &[frame(4000, 7148, 18, 1)]);
    assert!(wait(&r.sim, &r.b.cq, 1).is_empty(), "nothing posted");
    assert_eq!(r.sim.nic_stats(r.b.host).rx_no_wqe, 2);
    post(&r.b, &r.wq, 0, 4096);
    send_frames(&r.sim, &r.a, &r.qa, &[frame(4000, 7148, 18, 1)]);
    let got = wait(&r.sim, &r.b.cq, 1);
    assert_eq!((got[0].wr_id, got[0].status), (0, WcStatus::LocLenErr));
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
    r.wq.modify(WqState::Reset, None).unwrap();
    r.wq.modify(WqState::Rdy, None).unwrap();
    assert_eq!(r.wq.state().unwrap(), WqState::Rdy);
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

/// An indirection table of up to `rss_caps.max_rwq_indirection_table_size` WQs (2048 on
/// the emulated mlx5); a larger one is EINVAL (the kernel's
/// `mlx5_ib_create_rwq_ind_table` against log_max_rqt_size).
#[test]
fn an_indirection_table_beyond_the_devices_size_is_einval() {
    let sim = Sim::new(3);
    let n = node(&sim, 2, Personality::Mlx5);
    let attr = n.ctx.query_device().unwrap();
    assert_eq!(attr.rss_caps.max_rwq_indirection_table_size, 2048);
    let q = wq(&n, None);
    let most = vec![&q; 2048];
    assert!(n.ctx.create_rwq_ind_table(&most).is_ok());
    let e = n.ctx.create_rwq_ind_table(&vec![&q; 4096]).unwrap_err();
    assert_eq!(
        (e.kind(), e.errno()),
        (ErrorKind::InvalidArgument, Some(22))
    );
}
