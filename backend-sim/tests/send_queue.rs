//! The send queue of UD and RAW_PACKET QPs: a send goes out when it is posted but
//! completes in a NIC event after the post, holding its slot until then (rxe) or until a
//! CQE at or after it is polled (mlx5), so a post finds the queue full with ENOMEM.

mod common;
use backend_sim::verbs::SimQp;
use backend_sim::{Personality, Sim};
use common::*;
use verbs_api::{
    Completion, CompletionQueue, Context, ErrorKind, QpAttrMask, QpCap, QpInitAttr, QpModify,
    QpState, QpType, QueuePair, QueuePairExt, SendWr, Sge, WcStatus,
};

/// A QP of `qp_type` on `n`'s CQ asking for `send_wr` send WRs, in RTS.
fn small_qp(n: &Node, qp_type: QpType, send_wr: u32) -> SimQp {
    let cap = QpCap {
        max_send_wr: send_wr,
        ..cap()
    };
    let qp = n
        .ctx
        .create_qp(&n.pd, &QpInitAttr::new(qp_type, &n.cq, cap))
        .unwrap();
    let init = QpModify::to(QpState::Init).port(1);
    let init = if qp_type == QpType::Ud {
        init.pkey_index(0).qkey(QKEY)
    } else {
        init
    };
    qp.modify_with(&init).unwrap();
    qp.modify_with(&QpModify::to(QpState::Rtr)).unwrap();
    let rts = QpModify::to(QpState::Rts);
    let rts = if qp_type == QpType::Ud {
        rts.sq_psn(0)
    } else {
        rts
    };
    qp.modify_with(&rts).unwrap();
    qp
}

/// Posts `sges.len()` sends (wr_id = index, signaled where `signaled` says) as one list.
fn post(
    qp: &SimQp,
    sges: &[[Sge; 1]],
    ah: Option<&backend_sim::verbs::SimAh>,
    signaled: impl Fn(usize) -> bool,
) -> verbs_api::Result<()> {
    let wrs: Vec<_> = sges
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let wr = match ah {
                Some(ah) => SendWr::ud_send(i as u64, s, ah, 0x00ff_fff0, QKEY),
                None => SendWr::send(i as u64, s),
            };
            if signaled(i) {
                wr.signaled()
            } else {
                wr
            }
        })
        .collect();
    // SAFETY: every SGE lies in the node's MR, which outlives the QP.
    unsafe { qp.post_send(&wrs) }
}

fn sges(n: &Node, k: usize) -> Vec<[Sge; 1]> {
    (0..k).map(|i| [slot_sge(n, i, 60)]).collect()
}

fn full(r: verbs_api::Result<()>, bad_wr: usize) {
    let e = r.expect_err("the send queue is full");
    assert_eq!(e.kind(), ErrorKind::QueueFull);
    assert_eq!(e.errno(), Some(12), "ENOMEM");
    assert_eq!(e.bad_wr(), Some(bad_wr));
}

#[test]
fn a_ud_send_is_sent_at_post_and_completes_in_the_next_event() {
    let sim = Sim::new(1);
    let a = node(&sim, 1, Personality::Rxe);
    let _b = node(&sim, 2, Personality::Rxe);
    let qp = small_qp(&a, QpType::Ud, 4);
    let ah = ah(&a, ip(2));
    let port = sim.port_of(a.host).unwrap();
    let before = sim.now();
    post(&qp, &sges(&a, 2), Some(&ah), |_| true).unwrap();
    let tx = sim.with_fabric(|f| f.port_stats(port).unwrap().tx_frames);
    assert_eq!(tx, 2, "both frames left at post");
    assert_eq!(
        a.cq.queued(),
        0,
        "no completion before the simulation moves"
    );
    assert!(sim.step());
    assert_eq!(
        sim.now(),
        before,
        "the completer runs at the post's virtual time"
    );
    let mut wc = [Completion::default(); 4];
    assert_eq!(a.cq.queued(), 2);
    assert_eq!(a.cq.poll(&mut wc).unwrap(), 2);
    assert_eq!((wc[0].wr_id, wc[0].status), (0, WcStatus::Success));
    assert_eq!((wc[1].wr_id, wc[1].status), (1, WcStatus::Success));
}

#[test]
fn rxe_frees_a_slot_when_the_send_completes_polled_or_not() {
    let sim = Sim::new(1);
    let a = node(&sim, 1, Personality::Rxe);
    let _b = node(&sim, 2, Personality::Rxe);
    let qp = small_qp(&a, QpType::Ud, 4);
    let ah = ah(&a, ip(2));
    assert_eq!(qp.query(QpAttrMask::CAP).unwrap().1.max_send_wr, 7);
    full(post(&qp, &sges(&a, 8), Some(&ah), |_| false), 7);
    // Seven posted, none completed yet: the queue is full across posts too.
    full(post(&qp, &sges(&a, 1), Some(&ah), |_| false), 0);
    sim.run_until_idle();
    // Completed (unsignaled: nothing to poll): the slots are free.
    post(&qp, &sges(&a, 7), Some(&ah), |_| false).unwrap();
    assert_eq!(wait(&sim, &a.cq, 1), vec![]);
}

#[test]
fn mlx5_frees_slots_when_a_cqe_at_or_after_them_is_polled() {
    let sim = Sim::new(1);
    let a = node(&sim, 1, Personality::Mlx5);
    let qp = small_qp(&a, QpType::RawPacket, 4);
    assert_eq!(qp.query(QpAttrMask::CAP).unwrap().1.max_send_wr, 4);
    // Three unsignaled frames and a signaled one fill the queue.
    post(&qp, &sges(&a, 4), None, |i| i == 3).unwrap();
    sim.run_until_idle();
    assert_eq!(a.cq.queued(), 1);
    // Completed, but the CQE that covers them is not polled: still full.
    full(post(&qp, &sges(&a, 1), None, |_| true), 0);
    let got = wait(&sim, &a.cq, 1);
    assert_eq!((got[0].wr_id, got[0].status), (3, WcStatus::Success));
    // Polled: all four slots are back.
    post(&qp, &sges(&a, 4), None, |_| true).unwrap();
    let got = wait(&sim, &a.cq, 4);
    let ids: Vec<u64> = got.iter().map(|w| w.wr_id).collect();
    assert_eq!(ids, vec![0, 1, 2, 3]);
}

#[test]
fn mlx5_ud_send_error_moves_the_qp_to_sqe_when_it_completes() {
    let sim = Sim::new(1);
    let a = node(&sim, 1, Personality::Mlx5);
    let _b = node(&sim, 2, Personality::Mlx5);
    let qp = small_qp(&a, QpType::Ud, 4);
    let ah = ah(&a, ip(2));
    let mut s = sges(&a, 3);
    s[1][0].lkey ^= 0x00ff_ff00;
    post(&qp, &s, Some(&ah), |_| true).unwrap();
    assert_eq!(qp.state().unwrap(), QpState::Rts, "not yet completed");
    let got = wait(&sim, &a.cq, 3);
    let st: Vec<(u64, WcStatus)> = got.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(
        st,
        vec![
            (0, WcStatus::Success),
            (1, WcStatus::LocProtErr),
            (2, WcStatus::WrFlushErr)
        ]
    );
    assert_eq!(qp.state().unwrap(), QpState::Sqe);
}
