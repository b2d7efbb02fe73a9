//! verbs-api's generic helpers (context builder, bring-up, slot pools, channel waits) run
//! unchanged on the simulator: the code a user writes for hardware.

use backend_sim::{Personality, Sim};
use std::net::Ipv4Addr;
use std::time::Duration;
use verbs_api::helpers::builder::{ContextBuilder, Notification};
use verbs_api::helpers::transition::{bring_up, ConnectParams};
use verbs_api::pool::{SendParams, SlotPool, SlotPoolConfig};
use verbs_api::{AhAttr, Completion, Context, Gid, QpState, QpType, QueuePair, WrDetail};

#[test]
fn builder_pool_and_channel_wait_carry_ud_multicast() {
    let sim = Sim::new(9);
    let ha = sim
        .add_host("sender", Ipv4Addr::new(10, 0, 0, 1), Personality::Rxe)
        .unwrap();
    let hb = sim
        .add_host("receiver", Ipv4Addr::new(10, 0, 0, 2), Personality::Rxe)
        .unwrap();
    let tx = ContextBuilder::new(QpType::Ud)
        .build(&sim.verbs(ha))
        .unwrap();
    let rx = ContextBuilder::new(QpType::Ud)
        .notification(Notification::Channel {
            solicited_only: false,
        })
        .build(&sim.verbs(hb))
        .unwrap();
    let p = ConnectParams::default();
    bring_up(&tx.qp, QpState::Rts, &p).unwrap();
    bring_up(&rx.qp, QpState::Rts, &p).unwrap();
    let group = Ipv4Addr::new(239, 10, 10, 10);
    rx.qp.attach_mcast(&Gid::from_ipv4(group), 0).unwrap();

    let rpool = SlotPool::new(&rx.ctx, &rx.pd, &SlotPoolConfig::new(2048, 16)).unwrap();
    rpool.post_recv_batch(&rx.qp, rpool.take_n(16)).unwrap();
    let tpool = SlotPool::new(&tx.ctx, &tx.pd, &SlotPoolConfig::new(2048, 4)).unwrap();
    let ah = tx
        .ctx
        .create_ah(&tx.pd, &AhAttr::roce(Gid::from_ipv4(group), 1, 1))
        .unwrap();
    for i in 0..10u8 {
        let mut t = tpool.take().unwrap();
        tpool.slot_mut(&mut t)[..3].copy_from_slice(&[i, i, i]);
        let detail = WrDetail::Ud {
            ah: &ah,
            remote_qpn: verbs_api::MULTICAST_QPN,
            remote_qkey: p.qkey,
        };
        tpool
            .post_send(&tx.qp, t, 3, SendParams::send(detail))
            .unwrap();
        let mut wc = [Completion::default(); 4];
        let n = tx.wait(&mut wc, 4, Some(Duration::from_millis(1))).unwrap();
        for c in &wc[..n] {
            tpool.release(tpool.complete(c).unwrap());
        }
    }
    let mut got = Vec::new();
    let mut wc = [Completion::default(); 8];
    while got.len() < 10 {
        let n = rx
            .wait(&mut wc, 2, Some(Duration::from_millis(10)))
            .unwrap();
        assert!(n > 0, "timed out after {} messages", got.len());
        for c in &wc[..n] {
            assert!(c.is_success(), "{c:?}");
            let t = rpool.complete(c).unwrap();
            got.push(rpool.received(&t, c)[verbs_api::GRH_LEN]);
            rpool.post_recv(&rx.qp, t).unwrap();
        }
    }
    assert_eq!(got, (0..10).collect::<Vec<u8>>());
}
