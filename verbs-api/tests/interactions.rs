//! Interaction rules checked with the mockall mocks (feature `mock`): what the helpers
//! and provided methods ask of a backend, in what order, with which arguments.

use std::sync::{Arc, Mutex};

use verbs_api::helpers::{repost_loop, ContextBuilder, Endpoint, Notification, RepostOptions};
use verbs_api::mock::*;
use verbs_api::pool::{SendParams, SlotPool, SlotPoolConfig};
use verbs_api::*;

fn device_attr() -> DeviceAttr {
    DeviceAttr {
        max_mr_size: 1 << 20,
        max_qp_wr: 1024,
        max_cqe: 4096,
        max_sge: 4,
        phys_port_cnt: 1,
        num_comp_vectors: 4,
        ..DeviceAttr::default()
    }
}

fn context() -> MockContext {
    let mut ctx = MockContext::new();
    ctx.expect_query_device().returning(|| Ok(device_attr()));
    ctx.expect_alloc_mr()
        .returning(|_, len, access| Ok(FakeMr::new(len, 0x42, 0x43, access)));
    ctx
}

fn pool(ctx: &MockContext, slots: usize) -> SlotPool<MockContext> {
    let cfg = SlotPoolConfig::new(64, slots).with_padding(GRH_LEN);
    SlotPool::new(ctx, &MockProtectionDomain::new(), &cfg).expect("pool")
}

/// A QP mock that records the wr_ids of every receive posted to it.
fn recording_qp(log: Arc<Mutex<Vec<u64>>>) -> MockQueuePair {
    let mut qp = MockQueuePair::new();
    qp.expect_post_recv().returning(move |wrs| {
        for w in wrs {
            assert_eq!(w.sg_list.len(), 1);
            assert_eq!(w.sg_list[0].lkey, 0x42);
            assert_eq!(w.sg_list[0].length as usize, GRH_LEN + 64);
            log.lock().unwrap().push(w.wr_id);
        }
        Ok(())
    });
    qp
}

/// An endpoint of `qp` on `cq` that polls (no channel), on port 1 of `ctx`.
fn polled_endpoint(
    ctx: MockContext,
    qp: MockQueuePair,
    cq: MockCompletionQueue,
) -> Endpoint<MockContext> {
    Endpoint {
        qp,
        cq,
        channel: None,
        pd: MockProtectionDomain::new(),
        ctx,
        port: 1,
        notification: Notification::Poll,
    }
}

fn recv_wc(wr_id: u64, byte_len: u32) -> Completion {
    Completion {
        wr_id,
        opcode: WcOpcode::Recv,
        byte_len,
        ..Completion::default()
    }
}

#[test]
fn repost_loop_reposts_every_completed_receive_slot() {
    let ctx = context();
    let pool = pool(&ctx, 8);
    let posted = Arc::new(Mutex::new(Vec::new()));
    let qp = recording_qp(posted.clone());
    pool.post_recv_batch(&qp, pool.take_n(8))
        .expect("initial post");
    assert_eq!(posted.lock().unwrap().len(), 8);
    assert_eq!(pool.posted(), 8);

    // "DMA" a payload into three slots, after their 40-byte GRH.
    let chosen: Vec<u64> = [2usize, 5, 7]
        .iter()
        .map(|&i| posted.lock().unwrap()[i])
        .collect();
    for (k, &wr_id) in chosen.iter().enumerate() {
        let slot = (wr_id & 0xffff_ffff) as usize;
        let stride = 128; // 40 + 64 rounded up to 64
        pool.mr()
            .write(slot * stride + GRH_LEN, &[k as u8 + 1; 10])
            .unwrap();
    }
    posted.lock().unwrap().clear();

    let mut cq = MockCompletionQueue::new();
    let mut round = 0;
    let wcs: Vec<Completion> = chosen
        .iter()
        .map(|&w| recv_wc(w, GRH_LEN as u32 + 10))
        .collect();
    cq.expect_poll().returning(move |out| {
        round += 1;
        if round == 1 {
            out[..3].copy_from_slice(&wcs);
            Ok(3)
        } else {
            Ok(0)
        }
    });
    let ep = polled_endpoint(ctx, qp, cq);
    let mut seen = Vec::new();
    let opts = RepostOptions {
        max_poll: 2,
        ..RepostOptions::default()
    };
    let stats = repost_loop(&ep, &pool, &opts, |batch| {
        if batch.is_empty() {
            return -1; // the timeout round: stop
        }
        for (wc, bytes) in batch.iter() {
            seen.push((wc.wr_id, bytes.expect("a pool slot").to_vec()));
        }
        0
    })
    .expect("loop");

    assert_eq!(stats.completions, 3);
    assert_eq!(stats.reposted, 3);
    assert_eq!(stats.timeouts, 1);
    assert_eq!(
        *posted.lock().unwrap(),
        chosen,
        "exactly the completed slots are reposted"
    );
    assert_eq!(pool.posted(), 8);
    for (k, (wr_id, bytes)) in seen.iter().enumerate() {
        assert_eq!(*wr_id, chosen[k]);
        assert_eq!(
            bytes,
            &vec![k as u8 + 1; 10],
            "callback sees the payload after the GRH"
        );
    }
}

#[test]
fn repost_loop_releases_flushed_slots_instead_of_reposting() {
    let ctx = context();
    let pool = pool(&ctx, 4);
    let posted = Arc::new(Mutex::new(Vec::new()));
    let qp = recording_qp(posted.clone());
    pool.post_recv_batch(&qp, pool.take_n(4)).unwrap();
    let ids = posted.lock().unwrap().clone();
    posted.lock().unwrap().clear();
    let mut cq = MockCompletionQueue::new();
    let flushed: Vec<Completion> = ids
        .iter()
        .map(|&w| Completion {
            wr_id: w,
            status: WcStatus::WrFlushErr,
            ..Completion::default()
        })
        .collect();
    cq.expect_poll().times(1).returning(move |out| {
        out[..4].copy_from_slice(&flushed);
        Ok(4)
    });
    let ep = polled_endpoint(ctx, qp, cq);
    let stats = repost_loop(&ep, &pool, &RepostOptions::default(), |_| -1).unwrap();
    assert_eq!(stats.errors, 4);
    assert_eq!(stats.reposted, 0);
    assert!(posted.lock().unwrap().is_empty());
    assert_eq!(pool.available(), 4, "flushed slots return to the free list");
}

#[test]
fn wait_arms_the_cq_before_blocking_and_acks_the_event() {
    let mut seq = mockall::Sequence::new();
    let mut cq = MockCompletionQueue::new();
    cq.expect_poll()
        .times(3)
        .in_sequence(&mut seq)
        .returning(|_| Ok(0));
    cq.expect_req_notify()
        .withf(|&s| !s)
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| Ok(()));
    cq.expect_poll()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| Ok(0));
    let mut ch = MockCompletionChannel::new();
    ch.expect_get_cq_event()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|_| Ok(Some(7)));
    cq.expect_ack_events()
        .withf(|&n| n == 1)
        .times(1)
        .in_sequence(&mut seq)
        .return_const(());
    cq.expect_poll()
        .times(1)
        .in_sequence(&mut seq)
        .returning(|out| {
            out[0] = recv_wc(1, 4);
            Ok(1)
        });
    let ep = Endpoint {
        qp: MockQueuePair::new(),
        cq,
        channel: Some(ch),
        pd: MockProtectionDomain::new(),
        ctx: MockContext::new(),
        port: 1,
        notification: Notification::Channel {
            solicited_only: false,
        },
    };
    let mut wc = [Completion::default(); 4];
    assert_eq!(ep.wait(&mut wc, 3, None).unwrap(), 1);
    assert_eq!(wc[0].wr_id, 1);
}

#[test]
fn modify_checks_the_state_table_before_the_backend_sees_it() {
    let mut qp = MockQueuePair::new();
    qp.expect_state().returning(|| Ok(QpState::Reset));
    qp.expect_qp_type().return_const(QpType::Rc);
    qp.expect_qp_num().return_const(9u32);
    qp.expect_apply_modify().never();

    let e = qp.modify_with(&QpModify::to(QpState::Rts)).unwrap_err();
    assert_eq!(
        e.kind(),
        ErrorKind::InvalidState,
        "RESET -> RTS is not a transition"
    );

    let e = qp
        .modify_with(&QpModify::to(QpState::Init).port(1).pkey_index(0))
        .unwrap_err();
    assert_eq!(
        e.kind(),
        ErrorKind::InvalidArgument,
        "RC needs ACCESS_FLAGS for INIT"
    );
    assert!(e.message().contains("ACCESS_FLAGS"));

    let m = QpModify::to(QpState::Init)
        .port(1)
        .pkey_index(0)
        .access(AccessFlags::empty())
        .qkey(1);
    let e = qp.modify_with(&m).unwrap_err();
    assert_eq!(
        e.kind(),
        ErrorKind::InvalidArgument,
        "RC does not take a QKEY"
    );
}

#[test]
fn modify_passes_valid_transitions_through() {
    let mut qp = MockQueuePair::new();
    qp.expect_state().returning(|| Ok(QpState::Reset));
    qp.expect_qp_type().return_const(QpType::Ud);
    qp.expect_apply_modify()
        .withf(|a, m| a.qp_state == QpState::Init && a.qkey == 5 && m.contains(QpAttrMask::QKEY))
        .times(1)
        .returning(|_, _| Ok(()));
    qp.modify_with(&QpModify::to(QpState::Init).port(1).pkey_index(0).qkey(5))
        .unwrap();
}

#[test]
fn pool_rejects_bad_shapes_with_the_right_kind() {
    let ctx = context();
    let pd = MockProtectionDomain::new();
    let e = SlotPool::new(&ctx, &pd, &SlotPoolConfig::new(0, 4)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    let e = SlotPool::new(&ctx, &pd, &SlotPoolConfig::new(64, 0)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    // 1 MiB max_mr_size: 16385 slots of 64 bytes is one slot too many.
    let e = SlotPool::new(&ctx, &pd, &SlotPoolConfig::new(64, 16385)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LimitExceeded);
    assert!(e.message().contains("max_mr_size"), "{}", e.message());
    assert!(SlotPool::new(&ctx, &pd, &SlotPoolConfig::new(64, 16384)).is_ok());
    let e = SlotPool::new(&ctx, &pd, &SlotPoolConfig::new(usize::MAX, 2)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LimitExceeded);
}

#[test]
fn a_completion_hands_a_slot_back_once() {
    let ctx = context();
    let pool = pool(&ctx, 2);
    let posted = Arc::new(Mutex::new(Vec::new()));
    let qp = recording_qp(posted.clone());
    let t = pool.take().unwrap();
    let wr_id = pool.wr_id(&t);
    pool.post_recv(&qp, t).unwrap();
    let wc = recv_wc(wr_id, 50);
    let t = pool.complete(&wc).expect("first completion");
    let e = pool.complete(&wc).unwrap_err();
    assert_eq!(
        e.kind(),
        ErrorKind::InvalidState,
        "a repeated completion is refused"
    );
    let e = pool.complete(&recv_wc(0x99_0000_0000, 1)).unwrap_err();
    assert_eq!(
        e.kind(),
        ErrorKind::InvalidArgument,
        "another pool's wr_id is refused"
    );
    assert_eq!(pool.received(&t, &wc).len(), 10);
    pool.release(t);
    assert_eq!(pool.available(), 2);
}

#[test]
fn a_refused_post_hands_the_token_back() {
    let ctx = context();
    let pool = pool(&ctx, 3);
    let mut qp = MockQueuePair::new();
    qp.expect_post_recv().returning(|wrs| {
        // Room for one more only.
        if wrs.len() > 1 {
            Err(
                Error::new(ErrorKind::QueueFull, "ibv_post_recv", "receive queue full")
                    .with_bad_wr(1),
            )
        } else {
            Ok(())
        }
    });
    let err = pool.post_recv_batch(&qp, pool.take_n(3)).unwrap_err();
    assert_eq!(err.error.kind(), ErrorKind::QueueFull);
    assert_eq!(err.posted, 1);
    assert_eq!(err.tokens.len(), 2);
    assert_eq!(pool.posted(), 1);
    let mut qp = MockQueuePair::new();
    qp.expect_post_send().returning(|_| {
        Err(Error::new(
            ErrorKind::InvalidState,
            "ibv_post_send",
            "QP in RESET",
        ))
    });
    let mut tokens = err.tokens.into_iter();
    let mut t = tokens.next().unwrap();
    pool.slot_mut(&mut t)[..3].copy_from_slice(b"abc");
    let r = pool
        .post_send(&qp, t, 3, SendParams::send(WrDetail::None))
        .unwrap_err();
    assert_eq!(r.error.kind(), ErrorKind::InvalidState);
    assert_eq!(
        &pool.slot(&r.token)[..3],
        b"abc",
        "the token still reads its slot"
    );
}

#[test]
fn builder_checks_queue_sizes_against_the_device() {
    let mut verbs = MockVerbs::new();
    verbs.expect_devices().returning(|| {
        Ok(vec![DeviceInfo {
            name: "sim0".into(),
            guid: 1,
            node_type: NodeType::Ca,
            transport_type: TransportType::Ib,
        }])
    });
    verbs.expect_open().returning(|_| {
        let mut ctx = MockContext::new();
        ctx.expect_query_device().returning(|| Ok(device_attr()));
        Ok(ctx)
    });
    let e = ContextBuilder::new(QpType::Ud)
        .queues(4096, 16, 1, 1)
        .build(&verbs)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LimitExceeded);
    assert!(
        e.message().contains("send queue depth of 4096"),
        "{}",
        e.message()
    );
    let e = ContextBuilder::new(QpType::Ud)
        .port(2)
        .build(&verbs)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
}

#[test]
fn builder_creates_channel_cq_and_qp_with_the_vector_modulo_the_count() {
    let mut verbs = MockVerbs::new();
    verbs.expect_open().withf(|n| n == "mlx5_0").returning(|_| {
        let mut ctx = MockContext::new();
        ctx.expect_query_device().returning(|| Ok(device_attr()));
        ctx.expect_alloc_pd()
            .returning(|| Ok(MockProtectionDomain::new()));
        ctx.expect_create_comp_channel()
            .times(1)
            .returning(|| Ok(MockCompletionChannel::new()));
        ctx.expect_create_cq()
            .withf(|&cqe, ch, &v| cqe == 48 && ch.is_some() && v == 6 % 4)
            .returning(|_, _, _| Ok(MockCompletionQueue::new()));
        ctx.expect_create_qp()
            .withf(|_, init| init.qp_type == QpType::RawPacket && init.cap.max_recv_wr == 32)
            .returning(|_, _| Ok(MockQueuePair::new()));
        Ok(ctx)
    });
    let ep = ContextBuilder::new(QpType::RawPacket)
        .device("mlx5_0")
        .queues(16, 32, 1, 1)
        .notification(Notification::Channel {
            solicited_only: false,
        })
        .comp_vector(6)
        .build(&verbs)
        .expect("endpoint");
    assert!(ep.channel.is_some());
}

#[test]
fn a_send_batch_signals_once_and_its_completion_returns_every_slot() {
    let ctx = context();
    let pool = pool(&ctx, 40);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let mut qp = MockQueuePair::new();
    qp.expect_post_send().returning(move |wrs| {
        for w in wrs {
            log.lock()
                .unwrap()
                .push((w.wr_id, w.send_flags, w.sg_list[0].length));
        }
        Ok(())
    });
    let items: Vec<_> = pool.take_n(35).into_iter().map(|t| (t, 10)).collect();
    let first = pool.wr_id(&items[0].0);
    assert_eq!(
        pool.post_send_batch(&qp, items, SendParams::send(WrDetail::None))
            .unwrap(),
        35
    );
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 35);
    // 35 requests go in two post calls (32 + 3): the last of each call is signaled.
    let signaled: Vec<usize> = (0..35)
        .filter(|&i| seen[i].1.contains(SendFlags::SIGNALED))
        .collect();
    assert_eq!(signaled, vec![31, 34]);
    assert!(seen.iter().all(|s| s.2 == 10));
    let mut back = Vec::new();
    let wc = |wr_id| Completion {
        wr_id,
        opcode: WcOpcode::Send,
        ..Completion::default()
    };
    assert_eq!(pool.complete_batch(&wc(seen[31].0), &mut back).unwrap(), 32);
    assert_eq!(
        pool.wr_id(&back[0]),
        first,
        "tokens come back in posting order"
    );
    assert_eq!(pool.complete_batch(&wc(seen[34].0), &mut back).unwrap(), 3);
    assert_eq!(back.len(), 35);
    assert_eq!(pool.posted(), 0);
    let e = pool.complete_batch(&wc(seen[34].0), &mut back).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidState);
    for t in back {
        pool.release(t);
    }
    assert_eq!(pool.available(), 40);
}
