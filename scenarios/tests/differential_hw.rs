//! The differential runner on real verbs (Soft-RoCE rxe0 in the VM, via
//! `cargo xtask test --backend hw --vm`): a fixed corpus and a bounded number of
//! proptest cases run on the simulator and on the device; the sets of complete and
//! incomplete heaps and the counters must be equal. Built only with the `hw` feature.

use std::net::Ipv4Addr;

use proptest::prelude::*;
use scenarios::runner::hw::run_hw;
use scenarios::runner::{compare, run_sim};
use scenarios::{check, Scenario, Transport};

fn iface() -> Ipv4Addr {
    std::env::var("RDMA_IFACE")
        .ok()
        .map(|v| v.parse().expect("RDMA_IFACE is an IPv4 address"))
        .unwrap_or(Ipv4Addr::new(10, 77, 0, 1))
}

fn differential(s: &Scenario) -> Result<(), String> {
    let sim = run_sim(s).map_err(|e| format!("simulator: {e}"))?;
    let hw = run_hw(s, iface()).map_err(|e| format!("hardware: {e}"))?;
    let v = check(s, &hw);
    if !v.is_empty() {
        return Err(format!("hardware run violates {v:?}"));
    }
    let d = compare(&sim, &hw);
    if d.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "seed {}: simulator and hardware differ: {d:#?}\n{}",
            s.seed,
            s.to_toml().unwrap_or_default()
        ))
    }
}

fn ud(mut s: Scenario) -> Scenario {
    for h in &mut s.hosts {
        h.nic = scenarios::Nic::Rxe;
    }
    for r in &mut s.receivers {
        r.transport = Transport::Ud;
    }
    for snd in &mut s.senders {
        snd.packet_size = 1024;
    }
    s
}

#[test]
fn corpus_no_faults() {
    differential(&ud(Scenario::simple(3, 8, 20_000))).unwrap();
}

#[test]
fn corpus_exact_drops_and_duplicates() {
    let mut s = ud(Scenario::simple(2, 10, 5000));
    s.faults.drop = vec![0, 7, 8, 30];
    s.faults.duplicate = vec![3, 12];
    differential(&s).unwrap();
}

#[test]
fn corpus_two_groups_two_senders() {
    let mut s = ud(Scenario::simple(2, 5, 3000));
    s.groups.push(scenarios::Group {
        addr: Ipv4Addr::new(239, 10, 0, 2),
        port: 7148,
    });
    let mut second = s.senders[0].clone();
    second.group = 1;
    second.heap_size = 7000;
    s.senders.push(second);
    s.receivers[1].groups = vec![0, 1];
    s.faults.drop = vec![5];
    differential(&s).unwrap();
}

proptest! {
    #![proptest_config(scenarios::strategy::proptest_config(12))]
    #[test]
    fn generated_scenarios_agree(s in scenarios::strategy::ud_sender_faults_scenario()) {
        differential(&s).map_err(TestCaseError::fail)?;
    }
}
