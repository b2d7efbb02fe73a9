//! The slot pool against its model: arbitrary operation sequences (take, release, post
//! sends one by one and in batches, post receives, progress, forged completions) on two
//! simulated hosts; see `workspace_tests::pool_model`.

use proptest::prelude::*;
use workspace_tests::pool_model::{Op, Rig};

fn op() -> impl Strategy<Value = Op> {
    (any::<u8>(), any::<u8>()).prop_map(|(code, arg)| Op::from_bytes(code, arg))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, failure_persistence: None, ..ProptestConfig::default() })]
    #[test]
    fn the_pool_agrees_with_its_model(seed in any::<u64>(), ops in proptest::collection::vec(op(), 0..64)) {
        if let Err(e) = Rig::run(seed, &ops) {
            prop_assert!(false, "{}", e);
        }
    }
}

#[test]
fn a_plain_exchange_delivers_every_message() {
    let mut ops = vec![Op::PostRecv(4), Op::PostRecv(4)];
    for n in 0..6 {
        ops.push(Op::TakeSend);
        ops.push(Op::PostSend(0, n * 10));
    }
    ops.push(Op::Progress);
    ops.extend([Op::TakeSend, Op::TakeSend, Op::PostSendBatch, Op::Progress]);
    let rig = Rig::run(1, &ops).unwrap();
    assert_eq!(rig.received, 8);
}

#[test]
fn forged_completions_are_refused() {
    let ops = [
        Op::PostRecv(2),
        Op::TakeSend,
        Op::Forge(0),
        Op::Forge(1 << 32),
        Op::Forge(u64::MAX),
        Op::PostSend(0, 9),
        Op::Forge(1),
        Op::Progress,
    ];
    let rig = Rig::run(2, &ops).unwrap();
    assert_eq!(rig.received, 1);
}
