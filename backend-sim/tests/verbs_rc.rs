//! RC and UC: in-order delivery with PSNs, RDMA WRITE/READ, atomics, immediates, inline,
//! retransmission over a lossy link, duplicates, and every error completion.

mod common;
use backend_sim::verbs::SimQp;
use backend_sim::{Direction, FaultPlan, LinkFaults, Personality, Sim};
use common::*;
use verbs_api::{
    AccessFlags, AhAttr, Context, ErrorKind, Gid, MemoryRegion, Mtu, QpInitAttr, QpModify, QpState,
    QpType, QueuePair, QueuePairExt, SendFlags, SendWr, Sge, WcFlags, WcOpcode, WcStatus,
};

struct Link {
    retry_cnt: u8,
    rnr_retry: u8,
    timeout: u8,
    min_rnr_timer: u8,
}

const DEFAULT: Link = Link {
    retry_cnt: 7,
    rnr_retry: 7,
    timeout: 14,
    min_rnr_timer: 1,
};

fn qp(n: &Node, t: QpType) -> SimQp {
    n.ctx
        .create_qp(&n.pd, &QpInitAttr::new(t, &n.cq, cap()))
        .unwrap()
}

fn connect(q: &SimQp, local: &Node, remote_ip: std::net::Ipv4Addr, remote_qpn: u32, l: &Link) {
    let access = AccessFlags::LOCAL_WRITE
        | AccessFlags::REMOTE_WRITE
        | AccessFlags::REMOTE_READ
        | AccessFlags::REMOTE_ATOMIC;
    let rc = q.qp_type() == QpType::Rc;
    let mut init = QpModify::to(QpState::Init)
        .port(1)
        .pkey_index(0)
        .access(access);
    if !rc {
        init = QpModify::to(QpState::Init)
            .port(1)
            .pkey_index(0)
            .access(AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE);
    }
    q.modify_with(&init).unwrap();
    let mut rtr = QpModify::to(QpState::Rtr)
        .av(AhAttr::roce(Gid::from_ipv4(remote_ip), 1, 1))
        .path_mtu(Mtu::Mtu1024)
        .dest_qpn(remote_qpn)
        .rq_psn(100);
    if rc {
        rtr = rtr.max_dest_rd_atomic(16).min_rnr_timer(l.min_rnr_timer);
    }
    q.modify_with(&rtr).unwrap();
    let mut rts = QpModify::to(QpState::Rts).sq_psn(100);
    if rc {
        rts = rts
            .timeout(l.timeout)
            .retry_cnt(l.retry_cnt)
            .rnr_retry(l.rnr_retry)
            .max_rd_atomic(16);
    }
    q.modify_with(&rts).unwrap();
    let _ = local;
}

fn pair(sim: &Sim, t: QpType, l: &Link) -> (Node, Node, SimQp, SimQp) {
    let a = node(sim, 1, Personality::Rxe);
    let b = node(sim, 2, Personality::Mlx5);
    let (qa, qb) = (qp(&a, t), qp(&b, t));
    connect(&qa, &a, ip(2), qb.qp_num(), l);
    connect(&qb, &b, ip(1), qa.qp_num(), l);
    (a, b, qa, qb)
}

fn post(q: &SimQp, wr: SendWr<'_, backend_sim::verbs::SimAh>) {
    // SAFETY: every SGE used by these tests lies in a node's MR, alive for the test.
    unsafe { q.post_send(&[wr]).unwrap() };
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

#[test]
fn rc_send_recv_multi_packet_in_order_with_imm_and_solicited() {
    let sim = Sim::new(1);
    let (a, b, qa, qb) = pair(&sim, QpType::Rc, &DEFAULT);
    post_recvs(&b, &qb, 0..8);
    let mut sent = Vec::new();
    for i in 0..5usize {
        let data = pattern(3000 + i * 100, i as u8); // three 1024-byte packets
        write_slot(&a, i, &data);
        let sge = [slot_sge(&a, i, data.len())];
        post(
            &qa,
            SendWr::send_with_imm(i as u64, &sge, 0xabc0 + i as u32)
                .flags(SendFlags::SIGNALED | SendFlags::SOLICITED),
        );
        sent.push(data);
    }
    let rx = wait(&sim, &b.cq, 5);
    assert_eq!(rx.len(), 5);
    for (i, c) in rx.iter().enumerate() {
        assert_eq!(c.status, WcStatus::Success);
        assert_eq!(c.wr_id, i as u64, "in order");
        assert_eq!(c.opcode, WcOpcode::Recv);
        assert_eq!(c.byte_len as usize, sent[i].len());
        assert_eq!(c.imm(), Some(0xabc0 + i as u32));
        assert_eq!(c.src_qp, qa.qp_num());
        assert_eq!(read_slot(&b, i, sent[i].len()), sent[i]);
    }
    let tx = wait(&sim, &a.cq, 5);
    assert!(tx
        .iter()
        .all(|c| c.status == WcStatus::Success && c.opcode == WcOpcode::Send));
    assert_eq!(
        tx.iter().map(|c| c.wr_id).collect::<Vec<_>>(),
        vec![0, 1, 2, 3, 4]
    );
}

#[test]
fn rdma_write_read_and_write_with_imm() {
    let sim = Sim::new(2);
    let (a, b, qa, qb) = pair(&sim, QpType::Rc, &DEFAULT);
    let data = pattern(5000, 7);
    write_slot(&a, 0, &data);
    let sge = [slot_sge(&a, 0, data.len())];
    post(
        &qa,
        SendWr::rdma_write(1, &sge, b.mr.addr() + 10 * SLOT as u64, b.mr.rkey()).signaled(),
    );
    let c = wait(&sim, &a.cq, 1);
    assert_eq!(
        (c[0].status, c[0].opcode),
        (WcStatus::Success, WcOpcode::RdmaWrite)
    );
    assert_eq!(read_slot(&b, 10, data.len()), data);
    assert!(
        wait(&sim, &b.cq, 1).is_empty(),
        "a plain write completes nothing at the target"
    );
    // Read it back into another slot.
    let sge = [slot_sge(&a, 5, data.len())];
    post(
        &qa,
        SendWr::rdma_read(2, &sge, b.mr.addr() + 10 * SLOT as u64, b.mr.rkey()).signaled(),
    );
    let c = wait(&sim, &a.cq, 1);
    assert_eq!(
        (c[0].status, c[0].opcode, c[0].byte_len),
        (WcStatus::Success, WcOpcode::RdmaRead, 5000)
    );
    assert_eq!(read_slot(&a, 5, data.len()), data);
    // WRITE_WITH_IMM consumes a receive at the target.
    post_recvs(&b, &qb, 0..1);
    let sge = [slot_sge(&a, 0, 100)];
    post(
        &qa,
        SendWr::rdma_write_with_imm(3, &sge, b.mr.addr() + 20 * SLOT as u64, b.mr.rkey(), 77)
            .signaled(),
    );
    let r = wait(&sim, &b.cq, 1);
    assert_eq!(
        (r[0].status, r[0].opcode, r[0].imm()),
        (WcStatus::Success, WcOpcode::RecvRdmaWithImm, Some(77))
    );
    assert_eq!(r[0].byte_len, 100, "the length of the write");
    assert_eq!(read_slot(&b, 20, 100), data[..100].to_vec());
}

#[test]
fn atomics_compare_swap_and_fetch_add() {
    let sim = Sim::new(3);
    let (a, b, qa, _qb) = pair(&sim, QpType::Rc, &DEFAULT);
    let target = b.mr.addr() + 64;
    b.mr.write(64, &40u64.to_ne_bytes()).unwrap();
    let sge = [slot_sge(&a, 1, 8)];
    post(
        &qa,
        SendWr::fetch_add(1, &sge, target, b.mr.rkey(), 2).signaled(),
    );
    let c = wait(&sim, &a.cq, 1);
    assert_eq!(
        (c[0].status, c[0].opcode, c[0].byte_len),
        (WcStatus::Success, WcOpcode::FetchAdd, 8)
    );
    assert_eq!(read_slot(&a, 1, 8), 40u64.to_ne_bytes());
    post(
        &qa,
        SendWr::compare_swap(2, &sge, target, b.mr.rkey(), 42, 1000).signaled(),
    );
    wait(&sim, &a.cq, 1);
    assert_eq!(
        read_slot(&a, 1, 8),
        42u64.to_ne_bytes(),
        "original value returned"
    );
    post(
        &qa,
        SendWr::compare_swap(3, &sge, target, b.mr.rkey(), 42, 5).signaled(),
    );
    wait(&sim, &a.cq, 1);
    let mut v = [0u8; 8];
    b.mr.read(64, &mut v).unwrap();
    assert_eq!(u64::from_ne_bytes(v), 1000, "second CAS did not match");
}

#[test]
fn inline_send_copies_at_post_time() {
    let sim = Sim::new(4);
    let (a, b, qa, qb) = pair(&sim, QpType::Rc, &DEFAULT);
    post_recvs(&b, &qb, 0..1);
    let buf = b"inline payload".to_vec();
    let sge = [Sge {
        addr: buf.as_ptr() as u64,
        length: buf.len() as u32,
        lkey: 0,
    }];
    post(
        &qa,
        SendWr::send(1, &sge).flags(SendFlags::INLINE | SendFlags::SIGNALED),
    );
    drop(buf); // the NIC copied it at post time
    let r = wait(&sim, &b.cq, 1);
    assert_eq!(r[0].status, WcStatus::Success);
    assert_eq!(read_slot(&b, 0, 14), b"inline payload");
    let sge = [Sge {
        addr: 0,
        length: 10_000,
        lkey: 0,
    }];
    // SAFETY: rejected before anything is read (inline above max_inline_data).
    let e = unsafe { qa.post_send(&[SendWr::send(2, &sge).flags(SendFlags::INLINE)]) }.unwrap_err();
    assert_eq!(e.kind(), verbs_api::ErrorKind::InvalidArgument);
    let _ = a;
}

#[test]
fn lossy_link_retransmits_in_order_and_duplicates_are_dropped() {
    let sim = Sim::new(5);
    let (a, b, qa, qb) = pair(&sim, QpType::Rc, &DEFAULT);
    sim.with_fabric(|f| {
        f.set_faults(FaultPlan {
            default_link: LinkFaults {
                loss: 0.1,
                duplicate: 0.1,
                reorder: 0.1,
                reorder_window_ns: 3000,
                ..LinkFaults::default()
            },
            ..FaultPlan::default()
        })
    })
    .unwrap();
    post_recvs(&b, &qb, 0..40);
    let mut sent = Vec::new();
    for i in 0..40usize {
        let data = pattern(1500 + i, i as u8);
        write_slot(&a, i, &data);
        let sge = [slot_sge(&a, i, data.len())];
        post(&qa, SendWr::send(i as u64, &sge).signaled());
        sent.push(data);
    }
    let rx = wait(&sim, &b.cq, 40);
    assert_eq!(rx.len(), 40, "every message arrives exactly once");
    for (i, c) in rx.iter().enumerate() {
        assert_eq!((c.wr_id, c.status), (i as u64, WcStatus::Success));
        assert_eq!(read_slot(&b, i, sent[i].len()), sent[i]);
    }
    let tx = wait(&sim, &a.cq, 40);
    assert_eq!(tx.len(), 40);
    assert!(tx.iter().all(|c| c.is_success()));
    assert!(
        sim.nic_stats(b.host).rx_out_of_sequence > 0,
        "duplicates and gaps were seen"
    );
    assert!(
        wait(&sim, &b.cq, 1).is_empty(),
        "no extra completion from duplicates"
    );
}

#[test]
fn retry_exceeded_when_the_peer_is_unreachable() {
    let sim = Sim::new(6);
    let (a, _b, qa, _qb) = pair(
        &sim,
        QpType::Rc,
        &Link {
            retry_cnt: 2,
            timeout: 10,
            ..DEFAULT
        },
    );
    sim.with_fabric(|f| {
        f.set_link_faults(
            backend_sim::PortId(0),
            Direction::ToSwitch,
            LinkFaults::loss(1.0),
        )
    })
    .unwrap();
    let sge = [slot_sge(&a, 0, 64)];
    post(&qa, SendWr::send(1, &sge)); // unsignaled: errors are reported anyway
    post(&qa, SendWr::send(2, &sge));
    let c = wait(&sim, &a.cq, 2);
    assert_eq!(c[0].wr_id, 1);
    assert_eq!(c[0].status, WcStatus::RetryExcErr);
    assert_eq!((c[1].wr_id, c[1].status), (2, WcStatus::WrFlushErr));
    assert_eq!(qa.state().unwrap(), QpState::Err);
    // 1 + retry_cnt transmissions of each of the two messages.
    assert_eq!(sim.with_fabric(|f| f.stats().dropped_loss), 6);
}

#[test]
fn rnr_retry_exceeded_and_rnr_retry_seven_waits_for_a_receive() {
    let sim = Sim::new(7);
    let (a, b, qa, qb) = pair(
        &sim,
        QpType::Rc,
        &Link {
            rnr_retry: 2,
            ..DEFAULT
        },
    );
    let sge = [slot_sge(&a, 0, 64)];
    post(&qa, SendWr::send(1, &sge).signaled());
    let c = wait(&sim, &a.cq, 1);
    assert_eq!(c[0].status, WcStatus::RnrRetryExcErr);
    assert_eq!(sim.nic_stats(b.host).rx_no_wqe, 3);
    let _ = qb;

    let sim = Sim::new(8);
    let (a, b, qa, qb) = pair(&sim, QpType::Rc, &DEFAULT); // rnr_retry 7: infinite
    post(&qa, SendWr::send(1, &[slot_sge(&a, 0, 64)]).signaled());
    sim.run_for(5_000_000); // 5 ms of RNR NAKs
    assert!(sim.nic_stats(b.host).rx_no_wqe > 50);
    post_recvs(&b, &qb, 0..1);
    assert_eq!(wait(&sim, &b.cq, 1)[0].status, WcStatus::Success);
    assert_eq!(wait(&sim, &a.cq, 1)[0].status, WcStatus::Success);
}

#[test]
fn remote_access_errors() {
    let sim = Sim::new(9);
    let (a, b, qa, _qb) = pair(&sim, QpType::Rc, &DEFAULT);
    let sge = [slot_sge(&a, 0, 64)];
    post(
        &qa,
        SendWr::rdma_write(1, &sge, b.mr.addr(), 0xbad).signaled(),
    );
    let c = wait(&sim, &a.cq, 1);
    assert_eq!(c[0].status, WcStatus::RemAccessErr);
    assert_eq!(qa.state().unwrap(), QpState::Err);
    // The responder goes to ERR too, and says why.
    assert_eq!(_qb.state().unwrap(), QpState::Err);
    let ev = b.ctx.poll_async_event().unwrap().unwrap();
    assert_eq!(ev.event_type, verbs_api::EventType::QpAccessErr);
    // Out of bounds of the remote MR.
    let sim = Sim::new(10);
    let (a, b, qa, _qb) = pair(&sim, QpType::Rc, &DEFAULT);
    post(
        &qa,
        SendWr::rdma_read(
            1,
            &[slot_sge(&a, 0, 64)],
            b.mr.addr() + b.mr.len() as u64 - 8,
            b.mr.rkey(),
        )
        .signaled(),
    );
    assert_eq!(wait(&sim, &a.cq, 1)[0].status, WcStatus::RemAccessErr);
    // A region registered without remote write.
    let sim = Sim::new(11);
    let (a, b, qa, _qb) = pair(&sim, QpType::Rc, &DEFAULT);
    let ro = b
        .ctx
        .alloc_mr(
            &b.pd,
            4096,
            AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ,
        )
        .unwrap();
    post(
        &qa,
        SendWr::rdma_write(1, &[slot_sge(&a, 0, 64)], ro.addr(), ro.rkey()).signaled(),
    );
    assert_eq!(wait(&sim, &a.cq, 1)[0].status, WcStatus::RemAccessErr);
}

#[test]
fn remote_invalid_request_and_local_length_error() {
    let sim = Sim::new(12);
    let (a, b, qa, qb) = pair(&sim, QpType::Rc, &DEFAULT);
    // The receiver posted 100 bytes; the message is 2000.
    let sge = [slot_sge(&b, 0, 100)];
    // SAFETY: the SGE lies in b.mr.
    unsafe { qb.post_recv(&[verbs_api::RecvWr::new(9, &sge)]).unwrap() };
    post(&qa, SendWr::send(1, &[slot_sge(&a, 0, 2000)]).signaled());
    let c = wait(&sim, &a.cq, 1);
    assert_eq!(c[0].status, WcStatus::RemInvReqErr);
    let r = wait(&sim, &b.cq, 1);
    assert_eq!((r[0].wr_id, r[0].status), (9, WcStatus::LocLenErr));
    assert_eq!(qb.state().unwrap(), QpState::Err);
    // Misaligned atomic: an mlx5 requester sends it and the responder answers with an
    // invalid request; rxe's provider refuses the post (`validate_send_wr`).
    let sim = Sim::new(13);
    let (a, b, qa, qb) = pair(&sim, QpType::Rc, &DEFAULT);
    post(
        &qb,
        SendWr::fetch_add(1, &[slot_sge(&b, 0, 8)], a.mr.addr() + 4, a.mr.rkey(), 1).signaled(),
    );
    assert_eq!(wait(&sim, &b.cq, 1)[0].status, WcStatus::RemInvReqErr);
    let sge = [slot_sge(&a, 0, 8)];
    // SAFETY: the SGE lies in a.mr; the post is refused.
    let e = unsafe { qa.post_send(&[SendWr::fetch_add(1, &sge, b.mr.addr() + 4, b.mr.rkey(), 1)]) }
        .unwrap_err();
    assert_eq!(
        (e.kind(), e.bad_wr()),
        (verbs_api::ErrorKind::InvalidArgument, Some(0))
    );
}

#[test]
fn local_protection_error_on_bad_lkey() {
    let sim = Sim::new(14);
    let (a, _b, qa, _qb) = pair(&sim, QpType::Rc, &DEFAULT);
    post(
        &qa,
        SendWr::send(
            1,
            &[Sge {
                addr: a.mr.addr(),
                length: 10,
                lkey: 77,
            }],
        ),
    );
    post(&qa, SendWr::send(2, &[slot_sge(&a, 0, 10)]));
    let c = wait(&sim, &a.cq, 2);
    // rxe (the requester here) reports a bad lkey as LOC_QP_OP_ERR, as Linux 6.1 does.
    assert_eq!((c[0].wr_id, c[0].status), (1, WcStatus::LocQpOpErr));
    assert_eq!((c[1].wr_id, c[1].status), (2, WcStatus::WrFlushErr));
}

#[test]
fn uc_delivers_without_acks_and_loses_on_loss() {
    let sim = Sim::new(15);
    let (a, b, qa, qb) = pair(&sim, QpType::Uc, &DEFAULT);
    post_recvs(&b, &qb, 0..4);
    let data = pattern(2500, 3);
    write_slot(&a, 0, &data);
    post(
        &qa,
        SendWr::send(1, &[slot_sge(&a, 0, data.len())]).signaled(),
    );
    assert_eq!(wait(&sim, &a.cq, 1)[0].status, WcStatus::Success);
    let r = wait(&sim, &b.cq, 1);
    assert_eq!((r[0].status, r[0].byte_len), (WcStatus::Success, 2500));
    assert_eq!(read_slot(&b, r[0].wr_id as usize, 2500), data);
    // Lose the middle packet of the next message: UC drops the message, no retry.
    let next = sim.with_fabric(|f| f.stats().transmitted);
    sim.with_fabric(|f| {
        f.set_faults(FaultPlan {
            drop_packets: vec![next + 1],
            ..FaultPlan::default()
        })
    })
    .unwrap();
    post(
        &qa,
        SendWr::send(2, &[slot_sge(&a, 0, data.len())]).signaled(),
    );
    post(&qa, SendWr::send(3, &[slot_sge(&a, 0, 10)]).signaled());
    assert_eq!(wait(&sim, &a.cq, 2).len(), 2);
    let r = wait(&sim, &b.cq, 2);
    assert_eq!(r.len(), 1, "only the intact message arrives");
    assert_eq!(r[0].byte_len, 10);
}

#[test]
fn posting_in_the_wrong_state_fails_and_err_flushes() {
    let sim = Sim::new(16);
    let a = node(&sim, 1, Personality::Rxe);
    let q = qp(&a, QpType::Rc);
    let sge = [slot_sge(&a, 0, 8)];
    // SAFETY: SGEs in a.mr.
    let e = unsafe { q.post_send(&[SendWr::send(1, &sge)]) }.unwrap_err();
    assert_eq!(
        (e.kind(), e.bad_wr()),
        (verbs_api::ErrorKind::InvalidState, Some(0))
    );
    // SAFETY: as above.
    let e = unsafe { q.post_recv(&[verbs_api::RecvWr::new(1, &sge)]) }.unwrap_err();
    assert_eq!(e.kind(), verbs_api::ErrorKind::InvalidState);
    // A transition not in the table.
    let e = q.modify_with(&QpModify::to(QpState::Rts)).unwrap_err();
    assert_eq!(e.kind(), verbs_api::ErrorKind::InvalidState);
    q.modify_with(
        &QpModify::to(QpState::Init)
            .port(1)
            .pkey_index(0)
            .access(AccessFlags::LOCAL_WRITE),
    )
    .unwrap();
    post_recvs(&a, &q, 0..3);
    q.modify_with(&QpModify::to(QpState::Err)).unwrap();
    let c = wait(&sim, &a.cq, 3);
    assert_eq!(c.len(), 3);
    // An error completion's opcode is undefined; rxe leaves it 0 (SEND).
    assert!(c
        .iter()
        .all(|c| c.status == WcStatus::WrFlushErr && c.opcode == WcOpcode::Send));
    let _ = WcFlags::empty();
}

#[test]
fn first_packet_in_rtr_raises_comm_est_and_min_rnr_timer_paces_retries() {
    // mlx5 raises COMM_EST for the first packet of a QP still in RTR; rxe raises none
    // (the conformance case rc_responder_in_rtr_receives_without_comm_est).
    let sim = Sim::new(17);
    let a = node(&sim, 1, Personality::Rxe);
    let b = node(&sim, 2, Personality::Mlx5);
    let (qa, qb) = (qp(&a, QpType::Rc), qp(&b, QpType::Rc));
    let slow = Link {
        rnr_retry: 3,
        min_rnr_timer: 14,
        ..DEFAULT
    }; // 1.28 ms per RNR wait
    connect(&qa, &a, ip(2), qb.qp_num(), &slow);
    // b stays in RTR: it receives but does not send.
    let access = AccessFlags::LOCAL_WRITE;
    qb.modify_with(
        &QpModify::to(QpState::Init)
            .port(1)
            .pkey_index(0)
            .access(access),
    )
    .unwrap();
    qb.modify_with(
        &QpModify::to(QpState::Rtr)
            .av(AhAttr::roce(Gid::from_ipv4(ip(1)), 1, 1))
            .path_mtu(Mtu::Mtu1024)
            .dest_qpn(qa.qp_num())
            .rq_psn(100)
            .max_dest_rd_atomic(1)
            .min_rnr_timer(14),
    )
    .unwrap();
    post(&qa, SendWr::send(1, &[slot_sge(&a, 0, 8)]).signaled());
    let t0 = sim.now();
    let c = wait(&sim, &a.cq, 1);
    assert_eq!(c[0].status, WcStatus::RnrRetryExcErr);
    assert!(
        sim.now() - t0 >= 3 * 1_280_000,
        "three RNR waits of 1.28 ms: {} ns",
        sim.now() - t0
    );
    let ev = b.ctx.poll_async_event().unwrap().unwrap();
    assert_eq!(ev.event_type, verbs_api::EventType::CommEst);
    assert_eq!(ev.element, verbs_api::EventElement::Qp(qb.qp_num()));
}

#[test]
fn sqd_drains_notifies_and_holds_new_work_until_rts() {
    let sim = Sim::new(18);
    let (a, b, qa, qb) = pair(&sim, QpType::Rc, &DEFAULT);
    post_recvs(&b, &qb, 0..4);
    post(&qa, SendWr::send(1, &[slot_sge(&a, 0, 100)]).signaled());
    post(&qa, SendWr::send(2, &[slot_sge(&a, 0, 100)]).signaled());
    qa.modify_with(&QpModify::to(QpState::Sqd).en_sqd_async_notify(true))
        .unwrap();
    assert!(
        a.ctx.poll_async_event().unwrap().is_none(),
        "two sends still outstanding"
    );
    post(&qa, SendWr::send(3, &[slot_sge(&a, 0, 100)]).signaled()); // queued, not sent
    assert_eq!(wait(&sim, &a.cq, 2).len(), 2);
    let ev = a.ctx.poll_async_event().unwrap().unwrap();
    assert_eq!(ev.event_type, verbs_api::EventType::SqDrained);
    assert_eq!(
        wait(&sim, &b.cq, 3).len(),
        2,
        "the third send waits for RTS"
    );
    qa.modify_with(&QpModify::to(QpState::Rts)).unwrap();
    assert_eq!(wait(&sim, &b.cq, 1)[0].wr_id, 2);
    assert_eq!(wait(&sim, &a.cq, 1)[0].wr_id, 3);
}

/// `ibv_modify_qp` takes max_rd_atomic and max_dest_rd_atomic up to the device's
/// max_qp_rd_atom and refuses more with EINVAL: 16 on mlx5 (the kernel's
/// `mlx5_ib_modify_qp` against 1 << log_max_ra_res_qp / log_max_ra_req_qp), 128 on rxe
/// (`rxe_qp_chk_attr`).
#[test]
fn rd_atomic_depths_above_the_devices_are_einval() {
    let sim = Sim::new(5);
    for (p, most) in [(Personality::Mlx5, 16u8), (Personality::Rxe, 128)] {
        let n = node(&sim, if p == Personality::Mlx5 { 1 } else { 2 }, p);
        assert_eq!(
            n.ctx.query_device().unwrap().max_qp_rd_atom,
            u32::from(most)
        );
        let q = qp(&n, QpType::Rc);
        q.modify_with(
            &QpModify::to(QpState::Init)
                .port(1)
                .pkey_index(0)
                .access(AccessFlags::REMOTE_READ),
        )
        .unwrap();
        let rtr = || {
            QpModify::to(QpState::Rtr)
                .av(AhAttr::roce(Gid::from_ipv4(ip(3)), 1, 1))
                .path_mtu(Mtu::Mtu1024)
                .dest_qpn(0x99)
                .rq_psn(0)
                .min_rnr_timer(1)
        };
        let e = q
            .modify_with(&rtr().max_dest_rd_atomic(most + 1))
            .unwrap_err();
        assert_eq!(
            (e.kind(), e.errno()),
            (ErrorKind::InvalidArgument, Some(22))
        );
        assert_eq!(q.state().unwrap(), QpState::Init, "{p:?}");
        q.modify_with(&rtr().max_dest_rd_atomic(most)).unwrap();
        let rts = || {
            QpModify::to(QpState::Rts)
                .sq_psn(0)
                .timeout(14)
                .retry_cnt(7)
                .rnr_retry(7)
        };
        let e = q.modify_with(&rts().max_rd_atomic(most + 1)).unwrap_err();
        assert_eq!(
            (e.kind(), e.errno()),
            (ErrorKind::InvalidArgument, Some(22))
        );
        q.modify_with(&rts().max_rd_atomic(most)).unwrap();
        assert_eq!(q.state().unwrap(), QpState::Rts, "{p:?}");
    }
}
