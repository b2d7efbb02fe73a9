//! Packets lost on the wire between two devices (see [`crate::conformance::loss`]): what
//! RC's requester does with a PSN sequence error NAK, and how UC's responder
//! resynchronises after a gap.

use super::prelude::*;
use crate::conformance::loss::LossyLink;
use crate::conformance::rig::open_device;
use verbs_api::helpers::transition::RemoteQp;
use verbs_api::helpers::{bring_up, ConnectParams};

/// The env's lossy link.
///
/// # Panics
/// When the backend has none or cannot set it up: the case cannot run.
fn link<V: Verbs>(env: &Env<V>) -> Box<dyn LossyLink> {
    env.lossy
        .as_ref()
        .expect("the loss cases need a backend with a lossy link")
        .open()
        .unwrap_or_else(|e| panic!("setting up the lossy link: {e}"))
}

/// QP `a` on the env's device and `b` on the link's second device, connected, in RTS,
/// each with a CQ and 4 KiB of memory; `tweak` adjusts `a`'s parameters.
struct Across<C: Context> {
    cq_a: super::super::rig::CqPair<C>,
    cq_b: super::super::rig::CqPair<C>,
    a: C::Qp,
    b: C::Qp,
    mr_a: C::Mr,
    mr_b: C::Mr,
    // The contexts go last.
    _rig_b: Rig<C>,
    _rig_a: Rig<C>,
}

fn across<V: Verbs>(
    env: &Env<V>,
    link: &dyn LossyLink,
    qp_type: QpType,
    tweak: impl FnOnce(&mut ConnectParams),
    log: &mut Log,
) -> Across<V::Context> {
    let ra = open(env);
    let rb = open_device(env, link.peer_device());
    let cq_a = ra.cq(16);
    let cq_b = rb.cq(16);
    let a = ra.qp(qp_type, &cq_a.cq, 0);
    let b = rb.qp(qp_type, &cq_b.cq, 0);
    let params = |port: u8, qpn: u32, dgid: Gid, sgid_index: u8| ConnectParams {
        port,
        remote: Some(RemoteQp {
            qpn,
            psn: 0,
            av: verbs_api::AhAttr::roce(dgid, sgid_index, port),
        }),
        sq_psn: 0,
        ..ConnectParams::default()
    };
    let mut pa = params(ra.port, b.qp_num(), rb.gid, ra.gid_index);
    tweak(&mut pa);
    bring_up(&a, QpState::Rts, &pa).expect("bring up a");
    let pb = params(rb.port, a.qp_num(), ra.gid, rb.gid_index);
    bring_up(&b, QpState::Rts, &pb).expect("bring up b");
    log.qp("a", &a);
    log.qp("b", &b);
    let mr_a = ra.mr(4096, AccessFlags::empty());
    let mr_b = rb.mr(4096, AccessFlags::empty());
    Across {
        cq_a,
        cq_b,
        a,
        b,
        mr_a,
        mr_b,
        _rig_b: rb,
        _rig_a: ra,
    }
}

/// RC, retry_cnt 0 and no ACK timer (timeout 0): the first of two SENDs is lost, the
/// second reaches the responder out of sequence and draws a PSN sequence error NAK. rxe
/// counts that NAK as a retry (`rxe_comp.c`: AETH_NAK_PSN_SEQ_ERROR goes to
/// COMPST_ERROR_RETRY, which decrements `retry_cnt` unless it is 7), so with none left
/// the first SEND fails with RETRY_EXC_ERR and the second is flushed; the responder
/// stays in RTS with its receives. (Were the NAK free, both would be sent again and
/// succeed.)
pub fn rc_psn_nak_counts_as_a_retry<V: Verbs>(env: &Env<V>) {
    let link = link(env);
    let mut log = Log::new();
    let x = across(
        env,
        &*link,
        QpType::Rc,
        |p| {
            p.retry_cnt = 0;
            p.timeout = 0;
        },
        &mut log,
    );
    fill(&x.mr_a, 0, b"12");
    post_recv(&x.b, 10, &[sge(&x.mr_b, 0, 64)]);
    post_recv(&x.b, 11, &[sge(&x.mr_b, 64, 64)]);
    link.lose_next(x.b.qp_num(), 0)
        .expect("lose the first SEND");
    let (s1, s2) = ([sge(&x.mr_a, 0, 1)], [sge(&x.mr_a, 1, 1)]);
    let wrs = [
        SendWr::send(1, &s1).signaled(),
        SendWr::send(2, &s2).signaled(),
    ];
    log.result("post 2", &try_send(&x.a, &wrs));
    log.collect("cq_a", &x.cq_a.cq, 2);
    log.collect("cq_b", &x.cq_b.cq, 0);
    log.state("a", &x.a);
    log.state("b", &x.b);
    log.check(&[
        "post 2: ok",
        "cq_a: wr 1 RetryExcErr Send len 0 imm - flags - qp a src 0",
        "cq_a: wr 2 WrFlushErr Send len 0 imm - flags - qp a src 0",
        "state a: ERR",
        "state b: RTS",
    ]);
}

/// UC: the first of three single-packet SENDs is lost. The responder takes the next
/// message's first packet although its PSN is ahead and carries on from there (rxe's
/// `check_psn`: a UC packet out of sequence that starts a message is accepted), so the
/// second and third messages fill the first two receives; the sender completes all three.
pub fn uc_resynchronises_after_a_lost_message<V: Verbs>(env: &Env<V>) {
    let link = link(env);
    let mut log = Log::new();
    let x = across(env, &*link, QpType::Uc, |_| {}, &mut log);
    fill(&x.mr_a, 0, b"onetwothree");
    for i in 0..3 {
        post_recv(&x.b, 10 + i, &[sge(&x.mr_b, 64 * i as usize, 64)]);
    }
    link.lose_next(x.b.qp_num(), 0)
        .expect("lose the first SEND");
    let (s1, s2, s3) = (
        [sge(&x.mr_a, 0, 3)],
        [sge(&x.mr_a, 3, 3)],
        [sge(&x.mr_a, 6, 5)],
    );
    let wrs = [
        SendWr::send(1, &s1).signaled(),
        SendWr::send(2, &s2).signaled(),
        SendWr::send(3, &s3).signaled(),
    ];
    log.result("post 3", &try_send(&x.a, &wrs));
    log.collect("cq_a", &x.cq_a.cq, 3);
    log.collect("cq_b", &x.cq_b.cq, 2);
    log.line(String::from_utf8_lossy(&read(&x.mr_b, 0, 3)).into_owned());
    log.line(String::from_utf8_lossy(&read(&x.mr_b, 64, 5)).into_owned());
    log.state("b", &x.b);
    log.check(&[
        "post 3: ok",
        "cq_a: wr 1 Success Send len 3 imm - flags - qp a src 0",
        "cq_a: wr 2 Success Send len 3 imm - flags - qp a src 0",
        "cq_a: wr 3 Success Send len 5 imm - flags - qp a src 0",
        "cq_b: wr 10 Success Recv len 3 imm - flags GRH qp b src 0",
        "cq_b: wr 11 Success Recv len 5 imm - flags GRH qp b src 0",
        "two",
        "three",
        "state b: RTS",
    ]);
}

/// UC: the first packet of a two-packet SEND (path MTU 1024) is lost. Its last packet
/// arrives out of sequence without starting a message and is dropped with the rest of
/// the message (rxe's `check_psn`: `drop_msg`); the next message starts afresh and fills
/// the first receive.
pub fn uc_drops_the_rest_of_a_message_after_a_lost_packet<V: Verbs>(env: &Env<V>) {
    let link = link(env);
    let mut log = Log::new();
    let x = across(env, &*link, QpType::Uc, |_| {}, &mut log);
    fill(&x.mr_a, 2000, b"next");
    post_recv(&x.b, 10, &[sge(&x.mr_b, 0, 2048)]);
    post_recv(&x.b, 11, &[sge(&x.mr_b, 2048, 2048)]);
    link.lose_next(x.b.qp_num(), 0)
        .expect("lose the first packet");
    let (s1, s2) = ([sge(&x.mr_a, 0, 2000)], [sge(&x.mr_a, 2000, 4)]);
    let wrs = [
        SendWr::send(1, &s1).signaled(),
        SendWr::send(2, &s2).signaled(),
    ];
    log.result("post 2", &try_send(&x.a, &wrs));
    log.collect("cq_a", &x.cq_a.cq, 2);
    log.collect("cq_b", &x.cq_b.cq, 1);
    log.line(String::from_utf8_lossy(&read(&x.mr_b, 0, 4)).into_owned());
    log.state("b", &x.b);
    log.check(&[
        "post 2: ok",
        "cq_a: wr 1 Success Send len 2000 imm - flags - qp a src 0",
        "cq_a: wr 2 Success Send len 4 imm - flags - qp a src 0",
        "cq_b: wr 10 Success Recv len 4 imm - flags GRH qp b src 0",
        "next",
        "state b: RTS",
    ]);
}
