//! `ibv_resize_cq`: the new size rounded as at creation (rxe's `rxe_queue_init`: the
//! smallest 2^k - 1 at or above what was asked), the completions waiting kept in order,
//! and EINVAL for 0, above max_cqe, or fewer entries than completions wait
//! (`rxe_cq_chk_attr`; the man page asks for at least that many).

use super::prelude::*;

/// Logs a resize's outcome (with the errno on failure) and the size the CQ reports then.
fn resize<Q: CompletionQueue>(log: &mut Log, what: &str, cq: &Q, cqe: u32) {
    let r = cq.resize(cqe);
    log.result(what, &r);
    if let Err(e) = &r {
        log.line(format!("{what}: errno {:?}", e.errno()));
    }
    log.line(format!("{what}: cqe {}", cq.cqe()));
}

/// A resize rounds like creation, growing or shrinking an empty CQ to 2^k - 1.
pub fn cq_resize_rounds_like_create<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let cq = rig.ctx.create_cq(4, None, 0).expect("create_cq");
    log.line(format!("created: cqe {}", cq.cqe()));
    for n in [16u32, 1, 2, 3, 100, 7] {
        resize(&mut log, &format!("to {n}"), &cq, n);
    }
    resize(&mut log, "to max_cqe", &cq, rig.attr.max_cqe);
    log.check(&[
        "created: cqe 7",
        "to 16: ok",
        "to 16: cqe 31",
        "to 1: ok",
        "to 1: cqe 1",
        "to 2: ok",
        "to 2: cqe 3",
        "to 3: ok",
        "to 3: cqe 3",
        "to 100: ok",
        "to 100: cqe 127",
        "to 7: ok",
        "to 7: cqe 7",
        "to max_cqe: ok",
        "to max_cqe: cqe 32767",
    ]);
}

/// With three receive completions waiting: growing keeps them (in order, every field);
/// shrinking below three fails with EINVAL and changes nothing; shrinking to exactly
/// three works; 0 and max_cqe + 1 fail with EINVAL. Once they are polled the CQ shrinks
/// to one entry and still takes a completion.
pub fn cq_resize_keeps_completions_and_refuses_below_them<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let cq_a = rig.cq(16);
    let cq_b = rig.cq(4);
    let (a, b) = rig.rc_pair_on(&cq_a.cq, &cq_b.cq, AccessFlags::empty());
    log.qp("a", &a);
    log.qp("b", &b);
    let mr = rig.mr(4096, AccessFlags::empty());
    fill(&mr, 0, b"abcd");
    for i in 0..4 {
        post_recv(&b, 10 + i, &[sge(&mr, 1024 + 64 * i as usize, 64)]);
    }
    for i in 0..3 {
        post_send(&a, SendWr::send(i, &[sge(&mr, i as usize, 1)]).signaled());
    }
    // rxe's responder completes a receive before it acknowledges it, so once the three
    // sends have completed the three receives wait in cq_b.
    let _ = poll_n(&cq_a.cq, 3);
    log.line(format!("cq_b: cqe {}", cq_b.cq.cqe()));
    resize(&mut log, "to 20", &cq_b.cq, 20);
    resize(&mut log, "to 2", &cq_b.cq, 2);
    resize(&mut log, "to 3", &cq_b.cq, 3);
    resize(&mut log, "to 0", &cq_b.cq, 0);
    resize(&mut log, "to max_cqe + 1", &cq_b.cq, rig.attr.max_cqe + 1);
    log.collect("cq_b", &cq_b.cq, 3);
    resize(&mut log, "to 1", &cq_b.cq, 1);
    post_send(&a, SendWr::send(3, &[sge(&mr, 3, 1)]).signaled());
    let _ = poll_n(&cq_a.cq, 1);
    log.collect("cq_b", &cq_b.cq, 1);
    let got: Vec<u8> = (0..4).map(|i| read(&mr, 1024 + 64 * i, 1)[0]).collect();
    log.line(String::from_utf8_lossy(&got).into_owned());
    log.check(&[
        "cq_b: cqe 7",
        "to 20: ok",
        "to 20: cqe 31",
        "to 2: InvalidArgument",
        "to 2: errno Some(22)",
        "to 2: cqe 31",
        "to 3: ok",
        "to 3: cqe 3",
        "to 0: InvalidArgument",
        "to 0: errno Some(22)",
        "to 0: cqe 3",
        "to max_cqe + 1: InvalidArgument",
        "to max_cqe + 1: errno Some(22)",
        "to max_cqe + 1: cqe 3",
        "cq_b: wr 10 Success Recv len 1 imm - flags GRH qp b src 0",
        "cq_b: wr 11 Success Recv len 1 imm - flags GRH qp b src 0",
        "cq_b: wr 12 Success Recv len 1 imm - flags GRH qp b src 0",
        "to 1: ok",
        "to 1: cqe 1",
        "cq_b: wr 13 Success Recv len 1 imm - flags GRH qp b src 0",
        "abcd",
    ]);
}
