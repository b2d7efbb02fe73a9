//! The send queue: how many WQEs it holds, when a post finds it full (ENOMEM, `bad_wr`
//! the first request that does not fit, the ones before it posted), and the order of
//! what completes.
//!
//! rxe completes a UD or UC send after the post returns (its completer task runs once the
//! packet is out) and an RC send when its ACK comes, so within one post list no slot is
//! given back: a list longer than the queue fails at the first request past its depth.
//! Between separate posts rxe may or may not have completed the earlier sends (that is a
//! race with its completer task), so every case here fills the queue within one list, or
//! polls every completion before it posts again.

use super::prelude::*;

/// The send-queue depth rxe gives for 4 asked: 7 (a ring of 8 with one slot kept free).
const ASKED: u32 = 4;

/// Logs a post's outcome with the errno the device gave.
fn post_errno(log: &mut Log, what: &str, r: &Result<()>) {
    log.result(what, r);
    if let Err(e) = r {
        log.line(format!("{what}: errno {:?}", e.errno()));
    }
}

/// A UD QP asking for [`ASKED`] send WRs, in RTS, on `cq`.
fn small_ud<C: Context>(rig: &Rig<C>, cq: &C::Cq, log: &mut Log) -> C::Qp {
    let qp = rig.qp_with(QpType::Ud, cq, cq, cap(ASKED, 8, 1, 1, 0));
    bring_up_ud(rig, &qp, QpState::Rts);
    log.qp("a", &qp);
    let (_, c) = qp.query(QpAttrMask::CAP).expect("query_qp");
    log.line(format!("a: max_send_wr {}", c.max_send_wr));
    qp
}

/// Posts `n` receives of 128 bytes on `qp`, wr_ids 100 on, one every 128 bytes of `mr`
/// from byte 1024.
fn post_receives<Q: QueuePair, M: MemoryRegion>(qp: &Q, mr: &M, n: u64) {
    for i in 0..n {
        post_recv(qp, 100 + i, &[sge(mr, 1024 + 128 * i as usize, 128)]);
    }
}

/// A [`small_ud`] `a` sending to a UD QP `b`, each on a CQ of its own, with an address
/// handle to the port and 4 KiB of memory starting with `payload`, one receive posted on
/// `b` per byte of it ([`post_receives`]).
fn small_ud_to_receiver<C: Context>(rig: &Rig<C>, payload: &[u8], log: &mut Log) -> UdPair<C> {
    let cq_a = rig.cq(32);
    let cq_b = rig.cq(32);
    let a = small_ud(rig, &cq_a.cq, log);
    let b = ud(rig, &cq_b.cq, "b", log);
    let mr = rig.mr(4096, AccessFlags::empty());
    fill(&mr, 0, payload);
    post_receives(&b, &mr, payload.len() as u64);
    UdPair {
        pair: Pair { cq_a, cq_b, a, b },
        ah: self_ah(rig),
        mr,
    }
}

/// `n` signaled UD sends of one byte each (byte `i` of `sges[i]`) to `dest`.
fn ud_list<'a, A>(sges: &'a [[Sge; 1]], ah: &'a A, dest: u32) -> Vec<SendWr<'a, A>> {
    sges.iter()
        .enumerate()
        .map(|(i, s)| ud_send(i as u64, s, ah, dest))
        .collect()
}

/// One-byte SGEs over the first `n` bytes of `mr`.
fn one_byte_sges<M: MemoryRegion>(mr: &M, n: usize) -> Vec<[Sge; 1]> {
    (0..n).map(|i| [sge(mr, i, 1)]).collect()
}

/// Posts the first 8 of the 9 sends `wrs` on `a` in one list (one more than its 7
/// slots), logs the 7 completions of `cq_a` and `cq_b`, then posts the 9th alone and logs
/// its completions.
fn overfill_then_post_one<Q: QueuePair, C: CompletionQueue>(
    log: &mut Log,
    a: &Q,
    wrs: &[SendWr<'_, Q::Ah>],
    cq_a: &C,
    cq_b: &C,
) {
    post_errno(log, "post 8", &try_send(a, &wrs[..8]));
    log.collect("cq_a", cq_a, 7);
    log.collect("cq_b", cq_b, 7);
    post_errno(log, "post wr 8", &try_send(a, &wrs[8..]));
    log.collect("cq_a", cq_a, 1);
    log.collect("cq_b", cq_b, 1);
}

/// Checks the log of [`overfill_then_post_one`] on 9 one-byte sends of `abcdefghi` after
/// the line [`small_ud`] or [`small_pair`] logs, and the 8 bytes received: every receive
/// completion ends in `recv` (its length and what follows).
fn check_overfilled(log: &Log, recv: &str) {
    let mut expected = vec![
        "a: max_send_wr 7".to_string(),
        "post 8: QueueFull bad_wr=7".into(),
        "post 8: errno Some(12)".into(),
    ];
    expected.extend(
        (0..7).map(|i| format!("cq_a: wr {i} Success Send len 1 imm - flags - qp a src 0")),
    );
    expected.extend((0..7).map(|i| format!("cq_b: wr {} Success Recv len {recv}", 100 + i)));
    expected.push("post wr 8: ok".into());
    expected.push("cq_a: wr 8 Success Send len 1 imm - flags - qp a src 0".into());
    expected.push(format!("cq_b: wr 107 Success Recv len {recv}"));
    expected.push("abcdefgi".into());
    log.check(&expected.iter().map(String::as_str).collect::<Vec<_>>());
}

/// A UD QP asked for 4 send WRs gets 7 (rxe rounds to 2^k - 1); a list of 8 sends fails
/// with ENOMEM at request 7, and the 7 before it are sent and complete in order. Once
/// they are polled the queue takes sends again.
pub fn ud_send_queue_full_enomem<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let u = small_ud_to_receiver(&rig, b"abcdefghi", &mut log);
    let sges = one_byte_sges(&u.mr, 9);
    let wrs = ud_list(&sges, &u.ah, u.b.qp_num());
    overfill_then_post_one(&mut log, &u.a, &wrs, &u.cq_a.cq, &u.cq_b.cq);
    let got: Vec<u8> = (0..8)
        .map(|i| read(&u.mr, 1024 + 128 * i + GRH_LEN, 1)[0])
        .collect();
    log.line(String::from_utf8_lossy(&got).into_owned());
    check_overfilled(&log, "41 imm - flags GRH qp b src a");
}

/// A UD QP in ERR: posts are accepted and flushed, in order, and the flushes hold their
/// slots until completed, so a list of 8 into 7 slots fails at request 7 as in RTS.
pub fn ud_send_queue_full_in_err<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let ca = rig.cq(32);
    let a = small_ud(&rig, &ca.cq, &mut log);
    a.modify_with(&QpModify::to(QpState::Err))
        .expect("modify to ERR");
    let ah = self_ah(&rig);
    let mr = rig.mr(4096, AccessFlags::empty());
    let sges = one_byte_sges(&mr, 9);
    let wrs = ud_list(&sges, &ah, 0x00ff_fff0);
    post_errno(&mut log, "post 8", &try_send(&a, &wrs[..8]));
    log.collect("cq_a", &ca.cq, 7);
    post_errno(&mut log, "post wr 8", &try_send(&a, &wrs[8..]));
    log.collect("cq_a", &ca.cq, 1);
    log.state("a", &a);
    let mut expected = vec![
        "a: max_send_wr 7".to_string(),
        "post 8: QueueFull bad_wr=7".into(),
        "post 8: errno Some(12)".into(),
    ];
    expected.extend(
        (0..7).map(|i| format!("cq_a: wr {i} WrFlushErr Send len 0 imm - flags - qp a src 0")),
    );
    expected.push("post wr 8: ok".into());
    expected.push("cq_a: wr 8 WrFlushErr Send len 0 imm - flags - qp a src 0".into());
    expected.push("state a: ERR".into());
    log.check(&expected.iter().map(String::as_str).collect::<Vec<_>>());
}

/// A failing UD send in the middle of a list: the sends before it go out and complete,
/// it completes with its error (LOC_QP_OP_ERR for a bad lkey on rxe), and the requester
/// sends nothing after it: the rest of the list is flushed, in order, and the QP is in
/// ERR (rxe; mlx5 moves a UD QP to SQE).
pub fn ud_send_error_in_a_list<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let u = small_ud_to_receiver(&rig, b"wxyz", &mut log);
    let mut sges = one_byte_sges(&u.mr, 4);
    sges[1] = [bad_lkey(&u.mr, 1)];
    let wrs = ud_list(&sges, &u.ah, u.b.qp_num());
    post_errno(&mut log, "post 4", &try_send(&u.a, &wrs));
    u.collect(&mut log, 4, 1);
    log.state("a", &u.a);
    let status = if env.is_rxe() {
        "LocQpOpErr"
    } else {
        "LocProtErr"
    };
    let error = format!("cq_a: wr 1 {status} Send len 0 imm - flags - qp a src 0");
    let state = if env.is_rxe() {
        "state a: ERR"
    } else {
        "state a: SQE"
    };
    log.check(&[
        "a: max_send_wr 7",
        "post 4: ok",
        "cq_a: wr 0 Success Send len 1 imm - flags - qp a src 0",
        &error,
        "cq_a: wr 2 WrFlushErr Send len 0 imm - flags - qp a src 0",
        "cq_a: wr 3 WrFlushErr Send len 0 imm - flags - qp a src 0",
        "cq_b: wr 100 Success Recv len 41 imm - flags GRH qp b src a",
        state,
    ]);
}

/// Two connected QPs of `qp_type`, `a` asking for [`ASKED`] send WRs, in RTS.
fn small_pair<C: Context>(
    rig: &Rig<C>,
    qp_type: QpType,
    ca: &C::Cq,
    cb: &C::Cq,
    log: &mut Log,
) -> (C::Qp, C::Qp) {
    let a = rig.qp_with(qp_type, ca, ca, cap(ASKED, 1, 1, 1, 0));
    let b = rig.qp_with(qp_type, cb, cb, cap(1, 16, 1, 1, 0));
    let access = AccessFlags::empty();
    rig.connect(&a, &b, access);
    log.qp("a", &a);
    log.qp("b", &b);
    let (_, c) = a.query(QpAttrMask::CAP).expect("query_qp");
    log.line(format!("a: max_send_wr {}", c.max_send_wr));
    (a, b)
}

/// The body of the RC and UC cases: a list of 8 SENDs into 7 slots.
fn connected_send_queue_full<V: Verbs>(env: &Env<V>, qp_type: QpType) {
    let rig = open(env);
    let mut log = Log::new();
    let ca = rig.cq(32);
    let cb = rig.cq(32);
    let (a, b) = small_pair(&rig, qp_type, &ca.cq, &cb.cq, &mut log);
    let mr = rig.mr(4096, AccessFlags::empty());
    fill(&mr, 0, b"abcdefghi");
    post_receives(&b, &mr, 9);
    let sges = one_byte_sges(&mr, 9);
    let wrs: Vec<SendWr<'_, _>> = sges
        .iter()
        .enumerate()
        .map(|(i, s)| SendWr::send(i as u64, s).signaled())
        .collect();
    overfill_then_post_one(&mut log, &a, &wrs, &ca.cq, &cb.cq);
    let got: Vec<u8> = (0..8).map(|i| read(&mr, 1024 + 128 * i, 1)[0]).collect();
    log.line(String::from_utf8_lossy(&got).into_owned());
    check_overfilled(&log, "1 imm - flags GRH qp b src 0");
}

/// RC: an RC send holds its slot until its ACK, so a list of 8 into 7 slots fails with
/// ENOMEM at request 7; the 7 complete in order.
pub fn rc_send_queue_full_enomem<V: Verbs>(env: &Env<V>) {
    connected_send_queue_full(env, QpType::Rc);
}

/// UC: as UD, a UC send completes after the post (rxe's completer), so a list of 8 into
/// 7 slots fails with ENOMEM at request 7; the 7 complete in order.
pub fn uc_send_queue_full_enomem<V: Verbs>(env: &Env<V>) {
    connected_send_queue_full(env, QpType::Uc);
}
