//! proptest strategies for every part of a scenario. Sizes are kept small enough that
//! hundreds of cases run in CI in minutes; proptest shrinks failures towards fewer hosts,
//! heaps, bytes and faults.

use std::net::Ipv4Addr;

use proptest::collection::vec;
use proptest::prelude::*;

use crate::model::{
    Burst, Faults, Group, Host, Nic, Partition, Receiver, Scenario, Sender, Transport,
};

/// A host called `h{i}` at 10.0.0.(i+1).
pub fn host(i: usize) -> impl Strategy<Value = Host> {
    prop_oneof![4 => Just(Nic::Mlx5), 1 => Just(Nic::Rxe)].prop_map(move |nic| Host {
        name: format!("h{i}"),
        ip: Ipv4Addr::new(10, 0, 0, 1 + i as u8),
        nic,
    })
}

/// Group `i`: 239.10.0.(i+1), port 7148 (one port for all groups, so a UD receiver,
/// whose Q_Key the port selects, may subscribe to several).
pub fn group(i: usize) -> Group {
    Group {
        addr: Ipv4Addr::new(239, 10, 0, 1 + i as u8),
        port: 7148,
    }
}

/// A sender on one of `hosts` hosts to one of `groups` groups.
pub fn sender(hosts: usize, groups: usize) -> impl Strategy<Value = Sender> {
    (
        0..hosts,
        0..groups,
        1u32..12,
        1usize..20_000,
        1u32..4,
        prop_oneof![
            Just(1472usize),
            Just(1024),
            Just(512),
            Just(256),
            Just(8192)
        ],
        1u32..3,
    )
        .prop_map(
            |(h, group, heaps, heap_size, items, packet_size, substreams)| Sender {
                host: format!("h{h}"),
                group,
                heaps,
                heap_size,
                items,
                packet_size,
                rate: 0.0,
                substreams,
            },
        )
}

/// A receiver on one of `hosts` hosts subscribed to a non-empty set of `groups` groups.
/// Only simulator transports (raw, UD) are generated.
pub fn receiver(hosts: usize, groups: usize) -> impl Strategy<Value = Receiver> {
    (
        0..hosts,
        prop_oneof![Just(Transport::Raw), Just(Transport::Ud)],
        proptest::sample::subsequence((0..groups).collect::<Vec<_>>(), 1..=groups),
        1usize..6,
        1u32..3,
        prop_oneof![Just(4096usize), Just(64), Just(16)],
        prop_oneof![3 => Just(0u64), 1 => 0u64..200_000],
    )
        .prop_map(
            |(h, transport, groups, max_heaps, substreams, buffer_slots, consumer_delay_ns)| {
                Receiver {
                    host: format!("h{h}"),
                    transport,
                    groups,
                    max_heaps,
                    substreams,
                    buffer_slots,
                    consumer_delay_ns,
                }
            },
        )
}

/// Corruption in the switch and by the sender, and bursts of loss, each absent in most
/// scenarios (a scenario whose heaps a buggy sender corrupted excuses their bytes, which
/// would hide other bugs from a search that met it too often).
fn corruption_and_bursts() -> impl Strategy<Value = (f64, f64, Option<Burst>)> {
    (
        prop_oneof![5 => Just(0.0), 1 => 0.0..0.05f64],
        prop_oneof![9 => Just(0.0), 1 => 0.0..0.05f64],
        prop_oneof![
            5 => Just(None),
            1 => (0.0..0.05f64, 0.05..1.0f64, 0.5..=1.0f64)
                .prop_map(|(enter, leave, loss)| Some(Burst { enter, leave, loss })),
        ],
    )
}

/// Faults over a run of about `packets` packets on `hosts` hosts: exact drops and
/// duplicates, loss, duplication, reordering, corruption on the wire, delay and jitter,
/// partitions. [`all_faults`] adds the rest.
pub fn faults(packets: u64, hosts: usize) -> impl Strategy<Value = Faults> {
    let idx = 0..packets.max(1);
    (
        vec(idx.clone(), 0..6),
        vec(idx, 0..3),
        prop_oneof![2 => Just(0.0), 1 => 0.0..0.2f64],
        prop_oneof![3 => Just(0.0), 1 => 0.0..0.1f64],
        prop_oneof![2 => Just(0u32), 1 => 1u32..8],
        prop_oneof![3 => Just(0.0), 1 => 0.0..0.05f64],
        prop_oneof![2 => Just((0u64, 0u64)), 1 => (0u64..50_000, 0u64..20_000)],
        vec((0..hosts, 0u64..1_000_000, 0u64..500_000), 0..2),
    )
        .prop_map(
            |(
                mut drop,
                mut duplicate,
                loss,
                dup,
                reorder_window,
                corrupt,
                (delay_ns, jitter_ns),
                parts,
            )| {
                drop.sort_unstable();
                drop.dedup();
                duplicate.sort_unstable();
                duplicate.dedup();
                Faults {
                    drop,
                    duplicate,
                    loss,
                    dup,
                    reorder_window,
                    corrupt,
                    delay_ns,
                    jitter_ns,
                    partitions: parts
                        .into_iter()
                        .map(|(h, start_ns, len)| Partition {
                            host: format!("h{h}"),
                            start_ns,
                            end_ns: start_ns + len,
                        })
                        .collect(),
                    ..Faults::default()
                }
            },
        )
}

/// [`faults`] plus the kinds the fault swarm adds: corruption inside the switch and by the
/// sender, and bursts of loss.
pub fn all_faults(packets: u64, hosts: usize) -> impl Strategy<Value = Faults> {
    (faults(packets, hosts), corruption_and_bursts()).prop_map(
        |(f, (corrupt_switch, corrupt_payload, burst))| Faults {
            corrupt_switch,
            corrupt_payload,
            burst,
            ..f
        },
    )
}

/// The size of generated scenarios: inclusive ranges of hosts, groups, senders and
/// receivers, and caps on each sender's heaps and heap size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Hosts, `h0` ..
    pub hosts: (usize, usize),
    /// Multicast groups.
    pub groups: (usize, usize),
    /// Senders.
    pub senders: (usize, usize),
    /// Receivers.
    pub receivers: (usize, usize),
    /// At most this many heaps per sender.
    pub max_heaps: u32,
    /// At most this many bytes per heap.
    pub max_heap_size: usize,
    /// The scenario's name: this prefix and the seed.
    pub name: &'static str,
}

impl Shape {
    /// 2-4 hosts, 1-2 groups, 1-2 senders, 1-3 receivers, heaps as [`sender`] draws them.
    pub const SMALL: Shape = Shape {
        hosts: (2, 4),
        groups: (1, 2),
        senders: (1, 2),
        receivers: (1, 3),
        max_heaps: u32::MAX,
        max_heap_size: usize::MAX,
        name: "prop",
    };
}

/// A whole valid scenario for the simulator: [`Shape::SMALL`] with [`faults`]. Raw
/// receivers are placed on mlx5 hosts.
pub fn scenario() -> impl Strategy<Value = Scenario> {
    scenario_of(Shape::SMALL, |packets, hosts| {
        faults(packets, hosts).boxed()
    })
}

/// As [`scenario`], with [`all_faults`]: what the fault swarm draws. (The scenario
/// properties keep to [`faults`], whose shrinking the broken-receiver test relies on.)
pub fn every_fault_scenario() -> impl Strategy<Value = Scenario> {
    scenario_of(Shape::SMALL, |packets, hosts| {
        all_faults(packets, hosts).boxed()
    })
}

/// A scenario of `shape`, its faults drawn by `faults(packets, hosts)`. Raw receivers'
/// hosts and every sender's host get mlx5 NICs (raw frames need mlx5 at both ends).
pub fn scenario_of(
    shape: Shape,
    faults: fn(u64, usize) -> BoxedStrategy<Faults>,
) -> impl Strategy<Value = Scenario> {
    (
        shape.hosts.0..=shape.hosts.1,
        shape.groups.0..=shape.groups.1,
        any::<u64>(),
    )
        .prop_flat_map(move |(nh, ng, seed)| {
            (
                (0..nh).map(host).collect::<Vec<_>>(),
                vec(sender(nh, ng), shape.senders.0..=shape.senders.1),
                vec(receiver(nh, ng), shape.receivers.0..=shape.receivers.1),
                Just(ng),
                Just(seed),
                Just(nh),
            )
        })
        .prop_flat_map(move |(mut hosts, mut senders, receivers, ng, seed, nh)| {
            for snd in &mut senders {
                snd.heaps = snd.heaps.min(shape.max_heaps);
                snd.heap_size = snd.heap_size.min(shape.max_heap_size);
            }
            for r in receivers.iter().filter(|r| r.transport == Transport::Raw) {
                let i = r.host[1..].parse::<usize>().unwrap_or(0);
                hosts[i].nic = Nic::Mlx5;
            }
            for snd in &senders {
                let i = snd.host[1..].parse::<usize>().unwrap_or(0);
                hosts[i].nic = Nic::Mlx5;
            }
            let packets: u64 = senders
                .iter()
                .map(|s| {
                    u64::from(s.heaps)
                        * (s.heap_size as u64 / (s.packet_size as u64 - 80).max(1) + 1)
                })
                .sum();
            (
                Just((hosts, senders, receivers, ng, seed)),
                faults(packets, nh),
            )
        })
        .prop_map(
            move |((hosts, senders, receivers, ng, seed), faults)| Scenario {
                name: format!("{}-{seed:016x}", shape.name),
                seed,
                hosts,
                groups: (0..ng).map(group).collect(),
                senders,
                receivers,
                faults,
            },
        )
}

/// Scenarios that run the same on the simulator and on real verbs (the differential
/// check): rxe hosts, UD receivers, no consumer delay, and only the faults a sender can
/// apply (exact drops and duplicates). The hardware runs put every host on one device,
/// where packets leave in the order they are posted, while the simulator gives each host
/// its own link, where two hosts' packets interleave at the switch. A stream places each
/// new heap in the next slot of its window round-robin, as spead2 does, so a long heap is
/// evicted once `max_heaps` others have started, at a point that depends on that
/// interleaving: a receiver that hears more than one sender gets a window for every heap
/// it can see (each duplicated packet may start one more), so what it reports does not
/// depend on the order.
pub fn ud_sender_faults_scenario() -> impl Strategy<Value = Scenario> {
    scenario().prop_map(|mut s| {
        for h in &mut s.hosts {
            h.nic = Nic::Rxe;
        }
        for r in &mut s.receivers {
            r.transport = Transport::Ud;
            r.consumer_delay_ns = 0;
            r.buffer_slots = r.buffer_slots.max(1024);
        }
        for snd in &mut s.senders {
            snd.packet_size = snd.packet_size.min(1024);
            snd.heaps = snd.heaps.min(6);
        }
        let f = &s.faults;
        s.faults = Faults {
            drop: f.drop.clone(),
            duplicate: f.duplicate.clone(),
            ..Faults::default()
        };
        for r in 0..s.receivers.len() {
            let senders = s.senders_of(r);
            if senders.len() > 1 {
                let heaps: usize = senders.iter().map(|&i| s.senders[i].heaps as usize).sum();
                let w = &mut s.receivers[r].max_heaps;
                *w = (*w).max(heaps + s.faults.duplicate.len() + 1);
            }
        }
        s
    })
}

/// The proptest configuration of the scenario properties: deterministic by default (a
/// fixed RNG seed, so CI runs the same cases every time), overridable for deeper
/// searches: `SCENARIO_CASES=N` sets the number of cases, `SCENARIO_SEED=N` the seed
/// (`random` for a fresh one each run).
pub fn proptest_config(default_cases: u32) -> ProptestConfig {
    let cases = std::env::var("SCENARIO_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default_cases);
    let rng_seed = match std::env::var("SCENARIO_SEED").ok().as_deref() {
        Some("random") => proptest::test_runner::RngSeed::Random,
        Some(v) => v
            .parse()
            .map(proptest::test_runner::RngSeed::Fixed)
            .unwrap_or(proptest::test_runner::RngSeed::Fixed(DEFAULT_SEED)),
        None => proptest::test_runner::RngSeed::Fixed(DEFAULT_SEED),
    };
    ProptestConfig {
        cases,
        rng_seed,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// The RNG seed of the scenario properties unless `SCENARIO_SEED` says otherwise.
pub const DEFAULT_SEED: u64 = 0x5ce7_a210;

#[cfg(test)]
mod tests {
    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
        #[test]
        fn generated_scenarios_are_valid_and_round_trip(s in scenario()) {
            prop_assert_eq!(s.validate(), Ok(()));
            let back = Scenario::from_toml(&s.to_toml().unwrap()).unwrap();
            prop_assert_eq!(back, s);
        }
    }
}
