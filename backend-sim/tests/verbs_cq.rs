//! Completion queues and channels: one-shot notification, solicited-only, get/ack events,
//! overrun with IBV_EVENT_CQ_ERR (rxe keeps the CQ usable), and waits in virtual time.

mod common;
use backend_sim::verbs::SimChannel;
use backend_sim::{Personality, Sim};
use common::*;
use std::time::Duration;
use verbs_api::{
    AccessFlags, Completion, CompletionChannel, CompletionQueue, Context, ErrorKind, EventElement,
    EventType, QpInitAttr, QpType, QueuePair, SendFlags, SendWr, WcStatus,
};

struct Rx {
    sim: Sim,
    a: Node,
    b: Node,
    ch: SimChannel,
    cq: backend_sim::verbs::SimCq,
    qa: backend_sim::verbs::SimQp,
    qb: backend_sim::verbs::SimQp,
}

fn setup(p: Personality, cqe: u32) -> Rx {
    let sim = Sim::new(1);
    let a = node(&sim, 1, p);
    let b = node(&sim, 2, p);
    let ch = b.ctx.create_comp_channel().unwrap();
    let cq = b.ctx.create_cq(cqe, Some(&ch), 0).unwrap();
    let qa = ud_qp(&a);
    let qb = b
        .ctx
        .create_qp(&b.pd, &QpInitAttr::new(QpType::Ud, &cq, cap()))
        .unwrap();
    use verbs_api::{QpModify, QpState, QueuePairExt};
    qb.modify_with(&QpModify::to(QpState::Init).port(1).pkey_index(0).qkey(QKEY))
        .unwrap();
    qb.modify_with(&QpModify::to(QpState::Rtr)).unwrap();
    qb.modify_with(&QpModify::to(QpState::Rts).sq_psn(0))
        .unwrap();
    post_recvs(&b, &qb, 0..16);
    Rx {
        sim,
        a,
        b,
        ch,
        cq,
        qa,
        qb,
    }
}

fn send(r: &Rx, slot: usize, solicited: bool) {
    let ah = ah(&r.a, ip(2));
    let sge = [slot_sge(&r.a, slot, 16)];
    let flags = if solicited {
        SendFlags::SOLICITED
    } else {
        SendFlags::empty()
    };
    // SAFETY: SGE in a.mr.
    unsafe {
        r.qa.post_send(&[SendWr::ud_send(slot as u64, &sge, &ah, r.qb.qp_num(), QKEY).flags(flags)])
            .unwrap()
    };
}

const T: Option<Duration> = Some(Duration::from_millis(1));

#[test]
fn notification_is_one_shot_and_events_are_acked() {
    let r = setup(Personality::Mlx5, 64);
    r.cq.req_notify(false).unwrap();
    send(&r, 0, false);
    assert_eq!(r.ch.get_cq_event(None).unwrap(), Some(r.cq.handle()));
    r.cq.ack_events(1);
    let mut wc = [Completion::default(); 4];
    assert_eq!(r.cq.poll(&mut wc).unwrap(), 1);
    // Not re-armed: the next completion raises no event.
    send(&r, 1, false);
    assert_eq!(r.ch.get_cq_event(T).unwrap(), None);
    assert_eq!(r.cq.poll(&mut wc).unwrap(), 1);
    // A wait with nothing left to happen returns instead of hanging.
    r.cq.req_notify(false).unwrap();
    assert_eq!(r.ch.get_cq_event(None).unwrap(), None);
    let t0 = r.sim.now();
    assert_eq!(r.ch.get_cq_event(T).unwrap(), None);
    assert_eq!(r.sim.now() - t0, 1_000_000, "the timeout is virtual time");
}

#[test]
fn solicited_only_skips_unsolicited_completions() {
    let r = setup(Personality::Mlx5, 64);
    r.cq.req_notify(true).unwrap();
    send(&r, 0, false);
    assert_eq!(r.ch.get_cq_event(T).unwrap(), None);
    send(&r, 1, true);
    assert_eq!(r.ch.get_cq_event(T).unwrap(), Some(r.cq.handle()));
    r.cq.ack_events(1);
}

/// Flushed receives wake a solicited-only CQ on both: rxe posts completions made without
/// a packet as solicited (`rxe_cq_post(.., 1)`), mlx5 wakes for every error completion.
/// (A receive that fails on an unsolicited packet does not wake rxe's: the conformance
/// case `solicited_only_ignores_unsolicited_error`.)
#[test]
fn solicited_only_cq_wakes_on_flushed_receives() {
    for (p, fires) in [(Personality::Mlx5, true), (Personality::Rxe, true)] {
        let r = setup(p, 64);
        r.cq.req_notify(true).unwrap();
        // Moving the QP to ERR flushes its receives with WR_FLUSH_ERR (error completions).
        use verbs_api::{QpModify, QpState, QueuePairExt};
        r.qb.modify_with(&QpModify::to(QpState::Err)).unwrap();
        assert_eq!(r.ch.get_cq_event(T).unwrap().is_some(), fires, "{p:?}");
        let mut wc = [Completion::default(); 32];
        let n = r.cq.poll(&mut wc).unwrap();
        assert_eq!(n, 16);
        assert!(wc[..n].iter().all(|c| c.status == WcStatus::WrFlushErr));
    }
}

#[test]
fn cq_overrun_raises_cq_err_rxe_keeps_the_cq_mlx5_breaks_it() {
    for p in [Personality::Rxe, Personality::Mlx5] {
        // A CQ asked for 2 entries holds 3 (2^k - 1).
        let r = setup(p, 2);
        assert_eq!(r.cq.cqe(), 3);
        for i in 0..4 {
            send(&r, i, false);
        }
        r.sim.run_until_idle();
        let ev = r.b.ctx.poll_async_event().unwrap().expect("CQ error event");
        assert_eq!(ev.event_type, EventType::CqErr);
        assert_eq!(ev.element, EventElement::Cq(r.cq.handle()));
        let mut wc = [Completion::default(); 4];
        match p {
            Personality::Rxe => assert_eq!(r.cq.poll(&mut wc).unwrap(), 3),
            Personality::Mlx5 => assert!(r.cq.poll(&mut wc).is_err()),
        }
    }
}

#[test]
fn req_notify_without_channel_and_bad_cq_arguments() {
    let sim = Sim::new(1);
    let a = node(&sim, 1, Personality::Mlx5);
    // The kernel accepts arming a CQ without a channel (no event can come).
    a.cq.req_notify(false).unwrap();
    assert_eq!(
        a.ctx.create_cq(0, None, 0).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        a.ctx.create_cq(u32::MAX, None, 0).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        a.ctx.create_cq(8, None, 99).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        a.ctx
            .alloc_mr(&a.pd, 0, AccessFlags::LOCAL_WRITE)
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        a.ctx
            .alloc_mr(&a.pd, 64, AccessFlags::REMOTE_WRITE)
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidArgument
    );
}

#[test]
fn empty_poll_advances_virtual_time_instead_of_spinning() {
    let r = setup(Personality::Mlx5, 64);
    send(&r, 0, false);
    let mut wc = [Completion::default(); 4];
    let mut polls = 0;
    while r.cq.poll(&mut wc).unwrap() == 0 {
        polls += 1;
        assert!(polls < 100, "a poll loop must make progress");
    }
    assert!(r.sim.now() > 0);
}
