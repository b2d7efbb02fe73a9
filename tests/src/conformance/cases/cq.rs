//! Completion queues: sizes, notification (next and solicited-only), overrun.

use super::prelude::*;
use crate::conformance::rig::CqPair;

/// An armed CQ raises one event on its channel; it is acked; unarmed, nothing comes.
pub fn cq_events_notify_and_ack<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let send = rig.cq(16);
    let recv = rig.cq(16);
    let (a, b) = rig.rc_pair_on(&send.cq, &recv.cq, AccessFlags::empty());
    let mr = rig.mr(256, AccessFlags::empty());
    post_recv(&b, 1, &[sge(&mr, 128, 64)]);
    recv.cq.req_notify(false).expect("req_notify");
    fill(&mr, 0, b"ping");
    post_send(&a, SendWr::send(2, &[sge(&mr, 0, 4)]).signaled());
    let cq = wait_event(&recv.channel).expect("an event for the armed CQ");
    assert_eq!(cq, recv.cq.handle());
    recv.cq.ack_events(1);
    let wcs = poll_n(&recv.cq, 1);
    expect_wc(&wcs[0], 1, WcStatus::Success, Some(WcOpcode::Recv));
    assert_eq!(wcs[0].byte_len, 4);
    assert_eq!(read(&mr, 128, 4), b"ping");
    let wcs = poll_n(&send.cq, 1);
    expect_wc(&wcs[0], 2, WcStatus::Success, Some(WcOpcode::Send));
    // Not re-armed: a second message raises no event.
    post_recv(&b, 3, &[sge(&mr, 128, 64)]);
    post_send(&a, SendWr::send(4, &[sge(&mr, 0, 4)]).signaled());
    poll_n(&recv.cq, 1);
    assert_eq!(
        recv.channel
            .get_cq_event(Some(Duration::from_millis(200)))
            .unwrap(),
        None
    );
}

/// Armed solicited-only, a CQ ignores unsolicited completions and wakes on SOLICITED.
pub fn solicited_only_notification<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let send = rig.cq(16);
    let recv = rig.cq(16);
    let (a, b) = rig.rc_pair_on(&send.cq, &recv.cq, AccessFlags::empty());
    let mr = rig.mr(256, AccessFlags::empty());
    post_recv(&b, 1, &[sge(&mr, 128, 64)]);
    post_recv(&b, 2, &[sge(&mr, 192, 64)]);
    recv.cq.req_notify(true).expect("req_notify solicited");
    post_send(&a, SendWr::send(10, &[sge(&mr, 0, 8)]).signaled());
    poll_n(&send.cq, 1);
    assert_eq!(
        recv.channel
            .get_cq_event(Some(Duration::from_millis(200)))
            .unwrap(),
        None,
        "unsolicited woke a solicited-only CQ"
    );
    post_send(
        &a,
        SendWr::send(11, &[sge(&mr, 0, 8)]).flags(SendFlags::SOLICITED | SendFlags::SIGNALED),
    );
    assert_eq!(wait_event(&recv.channel), Some(recv.cq.handle()));
    recv.cq.ack_events(1);
    let wcs = poll_n(&recv.cq, 2);
    expect_wc(&wcs[0], 1, WcStatus::Success, Some(WcOpcode::Recv));
    expect_wc(&wcs[1], 2, WcStatus::Success, Some(WcOpcode::Recv));
}

/// Overrunning a CQ raises IBV_EVENT_CQ_ERR for it.
pub fn cq_overrun_raises_async_event<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let small = rig.ctx.create_cq(2, None, 0).expect("small CQ");
    let cap = small.cqe() as usize;
    let send_cq = rig.cq(64);
    let r = rig.qp_with(
        QpType::Ud,
        &send_cq.cq,
        &small,
        super::prelude::cap(4, 64, 1, 1, 0),
    );
    let p = verbs_api::helpers::ConnectParams {
        port: rig.port,
        qkey: QKEY,
        ..Default::default()
    };
    verbs_api::helpers::bring_up(&r, QpState::Rts, &p).unwrap();
    let s = rig.ud_qp(&send_cq.cq, QKEY);
    let ah = rig.ctx.create_ah(&rig.pd, &rig.self_av()).unwrap();
    let mr = rig.mr(64 * 256, AccessFlags::empty());
    let n = cap + 3;
    for i in 0..n {
        post_recv(&r, i as u64, &[sge(&mr, i * 256, 256)]);
    }
    for i in 0..n {
        post_send(&s, ud_send(i as u64, &[sge(&mr, 0, 16)], &ah, r.qp_num()));
    }
    poll_n(&send_cq.cq, n);
    let ev = wait_async(&rig.ctx, Some(&send_cq.cq), |e| {
        e.event_type == EventType::CqErr
    });
    assert_eq!(ev.element, EventElement::Cq(small.handle()));
    // rxe keeps an overrun CQ usable: what it holds can still be polled.
    let mut buf = [Completion::default(); 64];
    let got = small.poll(&mut buf).expect("poll after overrun");
    assert!(
        got >= 1 && got <= cap,
        "{got} completions after overrun, capacity {cap}"
    );
    assert!(buf[..got]
        .iter()
        .all(|w| w.status == WcStatus::Success && w.opcode == WcOpcode::Recv));
}

/// rxe sizes a CQ's ring to the next power of two above the request and reports one
/// less (`rxe_queue_init`): asking for 1, 2, 3, 16 or 100 entries gives 1, 3, 3, 31, 127.
/// mlx5 rounds the same way (`mlx5_create_cq`: `align_queue_size(cqe + 1) - 1`).
pub fn cq_sizes_round_to_power_of_two_minus_one<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    for n in [1u32, 2, 3, 16, 100] {
        let cq = rig.ctx.create_cq(n, None, 0).expect("create_cq");
        log.line(format!("{n} -> {}", cq.cqe()));
    }
    log.check(&["1 -> 1", "2 -> 3", "3 -> 3", "16 -> 31", "100 -> 127"]);
}

/// A CQ of 0 entries, or more than the device's max_cqe, is refused by the device.
pub fn cq_size_refusals<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    log.result("0 entries", &rig.ctx.create_cq(0, None, 0));
    log.result(
        "max_cqe + 1",
        &rig.ctx.create_cq(rig.attr.max_cqe + 1, None, 0),
    );
    log.result("max_cqe", &rig.ctx.create_cq(rig.attr.max_cqe, None, 0));
    log.check(&[
        "0 entries: InvalidArgument",
        "max_cqe + 1: InvalidArgument",
        "max_cqe: ok",
    ]);
}

/// Arming a CQ that has no completion channel is accepted (the kernel records the arm;
/// no event can be delivered).
pub fn req_notify_without_channel<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let cq = rig.ctx.create_cq(4, None, 0).expect("create_cq");
    let mut log = Log::new();
    log.result("req_notify next", &cq.req_notify(false));
    log.result("req_notify solicited", &cq.req_notify(true));
    let mut none = [Completion::default(); 4];
    log.line(format!("poll: {}", cq.poll(&mut none).expect("poll")));
    log.check(&["req_notify next: ok", "req_notify solicited: ok", "poll: 0"]);
}

/// Armed solicited-only, a CQ still wakes for receive completions flushed when the QP
/// enters ERR: rxe posts flushed (and errored) completions as solicited
/// (`rxe_cq_post(..., solicited = 1)` for completions without a packet).
pub fn solicited_only_wakes_on_flush<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let p = pair(&rig, QpType::Rc, AccessFlags::empty(), &mut log);
    let mr = rig.mr(256, AccessFlags::empty());
    post_recv(&p.b, 1, &[sge(&mr, 0, 64)]);
    p.cq_b.cq.req_notify(true).expect("arm solicited");
    p.b.modify_with(&QpModify::to(QpState::Err))
        .expect("to ERR");
    log_event(&mut log, &p.cq_b, Duration::from_secs(5));
    log.collect("cq_b", &p.cq_b.cq, 1);
    log.check(&[
        "event: true",
        "cq_b: wr 1 WrFlushErr Send len 0 imm - flags - qp b src 0",
    ]);
}

/// Armed solicited-only, a CQ does not wake for a receive that fails on an unsolicited
/// message (a bad lkey): rxe takes the solicited bit from the packet when there is one.
/// mlx5 wakes a solicited-only CQ for every error completion (the man page of
/// ibv_req_notify_cq leaves it open).
pub fn solicited_only_ignores_unsolicited_error<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let p = pair(&rig, QpType::Rc, AccessFlags::empty(), &mut log);
    let mr = rig.mr(256, AccessFlags::empty());
    let bad = bad_lkey(&mr, 64);
    post_recv(&p.b, 1, &[bad]);
    p.cq_b.cq.req_notify(true).expect("arm solicited");
    post_send(&p.a, SendWr::send(2, &[sge(&mr, 128, 8)]).signaled());
    log_event(&mut log, &p.cq_b, Duration::from_millis(500));
    log.collect("cq_b", &p.cq_b.cq, 1);
    log.check(&[
        "event: false",
        "cq_b: wr 1 LocQpOpErr Send len 0 imm - flags - qp b src 0",
    ]);
}

/// Arming for the next completion and then for solicited only keeps the stronger arm
/// (`rxe_req_notify_cq` only downgrades from nothing): an unsolicited completion wakes.
pub fn rearm_keeps_next_completion<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let p = pair(&rig, QpType::Rc, AccessFlags::empty(), &mut log);
    let mr = rig.mr(256, AccessFlags::empty());
    post_recv(&p.b, 1, &[sge(&mr, 0, 64)]);
    p.cq_b.cq.req_notify(false).expect("arm next");
    p.cq_b.cq.req_notify(true).expect("arm solicited");
    post_send(&p.a, SendWr::send(2, &[sge(&mr, 128, 8)]).signaled());
    log_event(&mut log, &p.cq_b, Duration::from_secs(5));
    log.collect("cq_b", &p.cq_b.cq, 1);
    log.collect("cq_a", &p.cq_a.cq, 1);
    log.check(&[
        "event: true",
        "cq_b: wr 1 Success Recv len 8 imm - flags GRH qp b src 0",
        "cq_a: wr 2 Success Send len 8 imm - flags - qp a src 0",
    ]);
}

/// An overrun of the receive CQ (rxe): the completion that does not fit raises CQ_ERR
/// and moves the receiving QP to ERR, whose two remaining receives are flushed into the
/// full CQ, each raising CQ_ERR again; what the CQ holds stays pollable.
pub fn cq_overrun_moves_qp_to_err<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let small = rig.ctx.create_cq(2, None, 0).expect("small CQ");
    log.cq("small", &small);
    let send_cq = rig.cq(64);
    let cap = cap(8, 8, 1, 1, 0);
    let r = rig.qp_with(QpType::Ud, &send_cq.cq, &small, cap);
    bring_up_ud(&rig, &r, QpState::Rts);
    log.qp("r", &r);
    let s = ud(&rig, &send_cq.cq, "s", &mut log);
    let ah = self_ah(&rig);
    let mr = rig.mr(8 * 256, AccessFlags::empty());
    for i in 0..6u64 {
        post_recv(&r, 10 + i, &[sge(&mr, i as usize * 256, 256)]);
    }
    for i in 0..4u64 {
        post_send(&s, ud_send(i, &[sge(&mr, 0, 16)], &ah, r.qp_num()));
        poll_n(&send_cq.cq, 1);
    }
    log.events(&rig.ctx, &send_cq.cq);
    log.state("r", &r);
    log.collect("small", &small, 3);
    log.check(&[
        "event CQ error: small",
        "event CQ error: small",
        "event CQ error: small",
        "state r: ERR",
        "small: wr 10 Success Recv len 56 imm - flags GRH qp r src s",
        "small: wr 11 Success Recv len 56 imm - flags GRH qp r src s",
        "small: wr 12 Success Recv len 56 imm - flags GRH qp r src s",
    ]);
}

/// One completion channel serving two CQs: each armed CQ's event names that CQ.
pub fn one_channel_two_cqs<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let ch = rig.ctx.create_comp_channel().expect("channel");
    let c1 = rig.ctx.create_cq(8, Some(&ch), 0).expect("cq 1");
    let c2 = rig.ctx.create_cq(8, Some(&ch), 0).expect("cq 2");
    let s = ud(&rig, &c1, "s", &mut log);
    let r = ud(&rig, &c2, "r", &mut log);
    let ah = self_ah(&rig);
    let mr = rig.mr(4096, AccessFlags::empty());
    post_recv(&r, 5, &[sge(&mr, 1024, 256)]);
    c2.req_notify(false).expect("arm c2");
    post_send(
        &s,
        SendWr::ud_send(1, &[sge(&mr, 0, 4)], &ah, r.qp_num(), QKEY),
    );
    let first = ch.get_cq_event(Some(Duration::from_secs(5))).expect("wait");
    log.line(format!("first event is c2: {}", first == Some(c2.handle())));
    c2.ack_events(1);
    c1.req_notify(false).expect("arm c1");
    post_send(&s, ud_send(2, &[sge(&mr, 0, 4)], &ah, r.qp_num()));
    let second = ch.get_cq_event(Some(Duration::from_secs(5))).expect("wait");
    log.line(format!(
        "second event is c1: {}",
        second == Some(c1.handle())
    ));
    c1.ack_events(1);
    log.collect("c1", &c1, 1);
    log.collect("c2", &c2, 1);
    log.check(&[
        "first event is c2: true",
        "second event is c1: true",
        "c1: wr 2 Success Send len 4 imm - flags - qp s src 0",
        "c2: wr 5 Success Recv len 44 imm - flags GRH qp r src s",
    ]);
}

/// Polling one completion at a time returns them in order, then 0.
pub fn poll_one_at_a_time<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let c = rig.cq(16);
    let s = ud(&rig, &c.cq, "s", &mut log);
    let ah = self_ah(&rig);
    let mr = rig.mr(64, AccessFlags::empty());
    let one = [sge(&mr, 0, 1)];
    let wrs: Vec<_> = (0..4).map(|i| ud_send(i, &one, &ah, 0xff_fff0)).collect();
    try_send(&s, &wrs).expect("post");
    let mut wc = [Completion::default(); 1];
    let mut got = Vec::new();
    let start = std::time::Instant::now();
    while got.len() < 4 && start.elapsed() < Duration::from_secs(5) {
        if c.cq.poll(&mut wc).expect("poll") == 1 {
            got.push(wc[0].wr_id);
        }
    }
    log.line(format!("{got:?}"));
    log.line(format!("then: {}", c.cq.poll(&mut wc).expect("poll")));
    log.check(&["[0, 1, 2, 3]", "then: 0"]);
}

/// A poll with no room returns 0 and leaves the completions where they are.
pub fn poll_without_room_leaves_completions<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let c = rig.cq(16);
    let s = ud(&rig, &c.cq, "s", &mut log);
    let ah = self_ah(&rig);
    let mr = rig.mr(64, AccessFlags::empty());
    post_send(&s, ud_send(1, &[sge(&mr, 0, 1)], &ah, 0xff_fff0));
    poll_quiet_for(&c.cq);
    log.line(format!("no room: {}", c.cq.poll(&mut []).expect("poll")));
    log.collect("c", &c.cq, 1);
    log.check(&[
        "no room: 0",
        "c: wr 1 Success Send len 1 imm - flags - qp s src 0",
    ]);
}

/// Lets time pass (on the simulator, empty polls of no room move its clock) without
/// taking completions.
fn poll_quiet_for<Q: CompletionQueue>(cq: &Q) {
    let start = std::time::Instant::now();
    while start.elapsed() < Duration::from_millis(100) {
        let _ = cq.poll(&mut []);
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Waits up to `wait` for an event on `cq`'s channel, logs whether one came for that CQ
/// (`event: true` or `event: false`), and acks one event.
fn log_event<C: Context>(log: &mut Log, cq: &CqPair<C>, wait: Duration) {
    let ev = cq.channel.get_cq_event(Some(wait));
    log.line(format!(
        "event: {}",
        matches!(ev, Ok(Some(h)) if h == cq.cq.handle())
    ));
    cq.cq.ack_events(1);
}
