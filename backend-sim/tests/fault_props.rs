//! Property tests over generated (and, on failure, shrunk) fault plans: every frame is
//! accounted for, drop lists are exact, and a plan replays to the same trace.

use backend_sim::frame::eth::Mac;
use backend_sim::frame::UdpFrameSpec;
use backend_sim::{
    BurstLoss, Direction, Fabric, FaultPlan, LinkFaultRule, LinkFaults, Output, PortId,
};
use proptest::prelude::*;
use std::net::Ipv4Addr;

fn faults() -> impl Strategy<Value = LinkFaults> {
    (
        0.0..0.5f64,
        0.0..0.3f64,
        0.0..0.3f64,
        0..2_000u64,
        0..2_000u64,
        0.0..0.5f64,
        0..5_000u64,
        prop::option::of(1..16u32),
        prop::option::of((0.0..0.2f64, 0.05..1.0f64, 0.0..=1.0f64)),
    )
        .prop_map(
            |(
                loss,
                duplicate,
                corrupt,
                delay_ns,
                jitter_ns,
                reorder,
                reorder_window_ns,
                buffer_frames,
                burst,
            )| LinkFaults {
                loss,
                burst: burst.map(|(enter, leave, loss)| BurstLoss { enter, leave, loss }),
                duplicate,
                corrupt,
                delay_ns,
                jitter_ns,
                reorder,
                reorder_window_ns,
                buffer_frames,
                // Flips that reach the receiver change the sequence numbers this test
                // reads; tests/corruption.rs covers them.
                corrupt_switch: 0.0,
                corrupt_payload: 0.0,
            },
        )
}

fn plan() -> impl Strategy<Value = FaultPlan> {
    (faults(), faults(), prop::collection::vec(0..300u64, 0..20)).prop_map(
        |(up, down, drop_packets)| FaultPlan {
            links: vec![
                LinkFaultRule {
                    port: PortId(0),
                    direction: Direction::ToSwitch,
                    faults: up,
                },
                LinkFaultRule {
                    port: PortId(1),
                    direction: Direction::FromSwitch,
                    faults: down,
                },
            ],
            drop_packets,
            ..FaultPlan::default()
        },
    )
}

/// Sends 300 checksummed UDP frames from port 0 to port 1; returns (trace hash, sequence
/// numbers delivered, fabric stats).
fn run(seed: u64, plan: &FaultPlan) -> (u64, Vec<u32>, backend_sim::FabricStats) {
    let mut f = Fabric::new(seed);
    f.add_host_with_port("a", Ipv4Addr::new(10, 0, 0, 1))
        .unwrap();
    f.add_host_with_port("b", Ipv4Addr::new(10, 0, 0, 2))
        .unwrap();
    f.set_faults(plan.clone()).unwrap();
    let (ma, mb) = (
        f.port_config(PortId(0)).unwrap().mac,
        f.port_config(PortId(1)).unwrap().mac,
    );
    let mut spec = UdpFrameSpec::new(
        ma,
        mb,
        (Ipv4Addr::new(10, 0, 0, 1), 1),
        (Ipv4Addr::new(10, 0, 0, 2), 2),
    );
    spec.udp_checksum = true;
    let _ = Mac::default();
    let mut got = Vec::new();
    for i in 0..300u32 {
        f.transmit(PortId(0), spec.build(&i.to_be_bytes())).unwrap();
        if i % 10 == 9 {
            f.schedule_timer(f.now() + 1_000, 0);
            while let Some(o) = f.step() {
                match o {
                    Output::Frame { frame, .. } => got.push(u32::from_be_bytes([
                        frame[42], frame[43], frame[44], frame[45],
                    ])),
                    Output::Timer { .. } => break,
                }
            }
        }
    }
    for (_, o) in f.drain() {
        if let Output::Frame { frame, .. } = o {
            got.push(u32::from_be_bytes([
                frame[42], frame[43], frame[44], frame[45],
            ]));
        }
    }
    (f.trace_hash(), got, f.stats())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn every_frame_is_accounted_for_and_runs_replay(seed in any::<u64>(), plan in plan()) {
        let (hash, got, s) = run(seed, &plan);
        // Every wire flip fails the FCS, so copies in = copies out.
        prop_assert_eq!(s.transmitted, 300);
        prop_assert_eq!(s.delivered + s.dropped(), s.transmitted + s.duplicated);
        prop_assert_eq!(got.len() as u64, s.delivered);
        for d in &plan.drop_packets {
            prop_assert!(!got.contains(&(*d as u32)), "packet {} was on the drop list", d);
        }
        let again = run(seed, &plan);
        prop_assert_eq!(hash, again.0);
        prop_assert_eq!(got, again.1);
    }
}
