//! Scenarios on the simulator: fixed cases and a property test over the whole scenario
//! space, each checked against every invariant.

use proptest::prelude::*;
use scenarios::runner::run_sim;
use scenarios::{check, Scenario};

fn assert_ok(s: &Scenario) -> scenarios::Outcome {
    let o = run_sim(s).unwrap_or_else(|e| panic!("{}: {e}", s.name));
    let v = check(s, &o);
    assert!(v.is_empty(), "{}: {v:#?}", s.name);
    o
}

#[test]
fn no_faults_every_heap_complete_at_every_receiver() {
    let s = Scenario::simple(4, 20, 30_000);
    let o = assert_ok(&s);
    for r in &o.receivers {
        assert_eq!(r.heaps.len(), 20);
        assert!(r.heaps.iter().all(|h| h.complete));
    }
}

#[test]
fn the_same_seed_gives_the_same_trace() {
    let mut s = Scenario::simple(2, 10, 10_000);
    s.faults.loss = 0.05;
    let a = run_sim(&s).unwrap();
    let b = run_sim(&s).unwrap();
    assert_eq!(a.trace_hash, b.trace_hash);
    assert_eq!(a, b);
    s.seed += 1;
    let c = run_sim(&s).unwrap();
    assert_ne!(a.trace_hash, c.trace_hash);
}

#[test]
fn an_exact_drop_list_makes_exactly_those_heaps_incomplete() {
    let mut s = Scenario::simple(1, 5, 4000);
    // 4000 bytes in 1472-byte packets: 3 packets per heap; drop heap 2's second packet.
    s.faults.drop = vec![4];
    let o = assert_ok(&s);
    let heaps = &o.receivers[0].heaps;
    let incomplete: Vec<u64> = heaps
        .iter()
        .filter(|h| !h.complete)
        .map(|h| h.cnt)
        .collect();
    assert_eq!(incomplete, vec![2]);
    assert_eq!(heaps.iter().filter(|h| h.complete).count(), 4);
}

/// A buggy sender's packets are valid on the wire: the receiver's own checks are all that
/// stands between them and a heap. Some complete with wrong bytes (their digest differs):
/// exactly those the fabric recorded as touched, which the invariants excuse; without the
/// record the same heaps are violations. A receiver with wire and switch flips instead
/// never completes a wrong heap (assert_ok).
#[test]
fn a_buggy_sender_makes_wrong_heaps_only_where_it_corrupted() {
    let mut s = Scenario::simple(2, 40, 6000);
    s.faults.corrupt_payload = 0.1;
    let mut o = assert_ok(&s);
    let sent: std::collections::BTreeMap<u64, u64> =
        o.sent.iter().map(|h| (h.cnt, h.digest)).collect();
    let wrong: Vec<u64> = o
        .receivers
        .iter()
        .flat_map(|r| &r.heaps)
        .filter(|h| h.complete && sent.get(&h.cnt).copied() != h.digest)
        .map(|h| h.cnt)
        .collect();
    assert!(
        !wrong.is_empty(),
        "no complete heap carried a corrupted payload"
    );
    assert!(
        wrong.iter().all(|c| o.tainted.contains(c)),
        "{wrong:?} {:?}",
        o.tainted
    );
    o.tainted.clear();
    let v = check(&s, &o);
    assert!(v.iter().any(|x| x.what.contains("were not sent")), "{v:?}");
    // Wire and switch flips at the same rate: caught below the application.
    let mut s = Scenario::simple(2, 40, 6000);
    s.faults.corrupt = 0.05;
    s.faults.corrupt_switch = 0.05;
    let o = assert_ok(&s);
    assert!(o.tainted.is_empty());
    assert!(o
        .receivers
        .iter()
        .any(|r| r.dropped.get("checksum").copied().unwrap_or(0) > 0));
}

proptest! {
    #![proptest_config(scenarios::strategy::proptest_config(256))]
    #[test]
    fn any_scenario_keeps_every_invariant(s in scenarios::strategy::scenario()) {
        let o = match run_sim(&s) {
            Ok(o) => o,
            Err(e) => {
                let path = std::env::temp_dir().join("scenario-failure.toml");
                let _ = std::fs::write(&path, format!("# run error: {e}\n{}", s.to_toml().unwrap_or_default()));
                return Err(TestCaseError::fail(format!("seed {}: {e}", s.seed)));
            }
        };
        let v = check(&s, &o);
        if !v.is_empty() {
            // Written on every failure, so after shrinking it holds the minimal case.
            let path = std::env::temp_dir().join("scenario-failure.toml");
            let _ = std::fs::write(&path, format!("# seed {}\n# {:?}\n{}", s.seed, v, s.to_toml().unwrap_or_default()));
            return Err(TestCaseError::fail(format!(
                "seed {} violates {v:#?}; scenario written to {} (rerun: cargo xtask scenario run {})",
                s.seed, path.display(), path.display()
            )));
        }
    }
}

#[test]
fn a_rate_paced_sender_holds_its_rate_in_virtual_time() {
    // 20 heaps of 30 kB at 1 GB/s (8 Gb/s) of packets: one byte per nanosecond. Heaps
    // are alike (same packets, same spacing), so heap 20 completes exactly as much
    // later than heap 1 as heaps 2..=20 take to send at the rate.
    let mut s = Scenario::simple(1, 20, 30_000);
    let rate = 1e9;
    s.senders[0].rate = rate;
    let o = assert_ok(&s);
    let heaps = &o.receivers[0].heaps;
    assert_eq!(heaps.len(), 20);
    let size = s.effective_packet_size(0);
    let heap_bytes: u64 = (0..20u32)
        .map(|k| {
            let (heap, _) = scenarios::runner::drive::build_heap(&s, 0, k);
            let mut p = spead::send::Packetizer::new(&heap, s.heap_cnt(0, k), size).unwrap();
            let mut buf = vec![0; size];
            let mut n = 0;
            while let Some(len) = p.next_packet(&mut buf).unwrap() {
                n += len as u64;
            }
            n
        })
        .skip(1)
        .sum();
    assert_eq!(heaps[19].at_ns - heaps[0].at_ns, heap_bytes);
}
