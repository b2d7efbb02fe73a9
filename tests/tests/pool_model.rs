//! The slot pool against its model: arbitrary operation sequences (take, release, post
//! sends one by one and in batches, post receives, progress, forged completions) on two
//! simulated hosts; see `workspace_tests::pool_model`.

use proptest::prelude::*;
use workspace_tests::pool_model::{Hosts, Op, Rig};

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

/// Runs one after another on one [`Hosts`] (what the fuzz target does: each run restores
/// the set-up's snapshot and takes its own seed) give what each gives on fresh hosts,
/// the trace hash included.
#[test]
fn runs_in_sequence_give_what_fresh_hosts_give() {
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let runs: Vec<(u64, Vec<Op>)> = (0..40)
        .map(|k| {
            let seed = next();
            let ops = (0..(k * 7) % 90)
                .map(|_| {
                    let r = next();
                    Op::from_bytes(r as u8, (r >> 8) as u8)
                })
                .collect();
            (seed, ops)
        })
        .collect();
    let fresh: Vec<_> = runs.iter().map(|(s, ops)| Rig::run(*s, ops)).collect();
    let hosts = Hosts::new();
    for pass in 0..2 {
        for (k, ((seed, ops), want)) in runs.iter().zip(&fresh).enumerate() {
            assert_eq!(&hosts.run(*seed, ops), want, "run {k}, pass {pass}");
        }
    }
    let hashes: std::collections::BTreeSet<u64> = fresh
        .iter()
        .map(|o| {
            o.as_ref()
                .expect("the pool agrees with its model")
                .trace_hash
        })
        .collect();
    assert!(
        hashes.len() > runs.len() / 2,
        "{} distinct runs",
        hashes.len()
    );
}
