//! A deliberately broken receiver is caught: with [`OffByOneMultiPacket`] recording the
//! heaps (a complete heap that came in more than one packet is recorded one byte short),
//! the property "every scenario keeps every invariant" fails, and proptest shrinks the
//! failure to a scenario of a few packets.

use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};
use scenarios::outcome::{ReceivedHeap, SentHeap};
use scenarios::report::simrun::{self, Options};
use scenarios::runner::drive::{AsReceived, Recorder};
use scenarios::{check, Scenario};

/// A receiver with an off-by-one in reassembly: a complete heap that arrived in more
/// than one packet loses its last payload byte (its digest and received length say so).
struct OffByOneMultiPacket;

impl Recorder for OffByOneMultiPacket {
    fn record(&mut self, h: &spead::recv::Heap, now: u64, sent: &[SentHeap]) -> ReceivedHeap {
        let mut rec = AsReceived.record(h, now, sent);
        if h.complete && sent.iter().any(|x| x.cnt == h.cnt && x.packets > 1) {
            let mut items = h.items();
            items.sort_by_key(|i| i.id);
            let last = items.len().saturating_sub(1);
            rec.digest = Some(scenarios::payload::digest_chunks(
                items.iter().enumerate().map(|(n, i)| {
                    let b = i.bytes();
                    if n == last {
                        &b[..b.len().saturating_sub(1)]
                    } else {
                        b
                    }
                }),
            ));
            rec.received = rec.received.saturating_sub(1);
        }
        rec
    }
}

fn property(s: &Scenario, recorder: &mut dyn Recorder) -> Result<(), TestCaseError> {
    let run = simrun::run_with(s, &Options::default(), recorder)
        .map_err(|e| TestCaseError::fail(format!("seed {}: {e}", s.seed)))?;
    let v = check(s, &run.outcome);
    if v.is_empty() {
        Ok(())
    } else {
        Err(TestCaseError::fail(format!(
            "seed {}: {}",
            s.seed,
            v.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        )))
    }
}

fn runner() -> TestRunner {
    TestRunner::new_with_rng(
        Config {
            cases: 64,
            max_shrink_iters: 4096,
            failure_persistence: None,
            ..Config::default()
        },
        TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]),
    )
}

#[test]
fn proptest_catches_the_off_by_one_receiver_and_shrinks_it_to_a_few_packets() {
    let result = runner().run(&scenarios::strategy::scenario(), |s| {
        property(&s, &mut OffByOneMultiPacket)
    });
    let (reason, shrunk) = match result {
        Err(TestError::Fail(reason, s)) => (reason, s),
        Ok(()) => panic!("the broken receiver passed 64 cases"),
        Err(e) => panic!("unexpected: {e}"),
    };
    println!(
        "proptest's minimal failing scenario ({reason}):\n{}",
        shrunk.to_toml().unwrap()
    );
    // The shrunk case is small: one sender, one receiver, one heap of a few packets.
    assert_eq!(shrunk.senders.len(), 1, "{shrunk:#?}");
    assert_eq!(shrunk.receivers.len(), 1, "{shrunk:#?}");
    assert!(shrunk.senders[0].heaps <= 2, "{shrunk:#?}");
    // Packets per heap as really sent (UD receivers cut packets to the UD MTU).
    let sent = simrun::run(&shrunk, &Options::default())
        .unwrap()
        .outcome
        .sent;
    let packets: u32 = sent.iter().map(|h| h.packets).sum();
    println!("{} heap(s), {packets} packets in all", sent.len());
    assert!((2..=6).contains(&packets), "{packets} packets: {shrunk:#?}");
    assert!(reason.message().contains("complete heap"), "{reason}");
    // And the same scenario passes with the receiver as written.
    property(&shrunk, &mut AsReceived).unwrap();
}

#[test]
fn the_receiver_as_written_passes_the_same_cases() {
    // The control: the same 64 cases without the fault keep every invariant.
    runner()
        .run(&scenarios::strategy::scenario(), |s| {
            property(&s, &mut AsReceived)
        })
        .unwrap();
}
