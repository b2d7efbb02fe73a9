//! `Sim::snapshot`, `restore` and `reseed`: what they put back and what they refuse.

use std::net::Ipv4Addr;

use backend_sim::{CaptureFilter, FaultPlan, LinkFaults, Personality, Sim};
use verbs_api::{Context, Verbs};

fn two_hosts(seed: u64) -> (Sim, backend_sim::PortId, backend_sim::PortId) {
    let sim = Sim::new(seed);
    let a = sim.add_host("a", Ipv4Addr::new(10, 0, 0, 1), Personality::Rxe);
    let b = sim.add_host("b", Ipv4Addr::new(10, 0, 0, 2), Personality::Mlx5);
    let (a, b) = (a.expect("host a"), b.expect("host b"));
    (
        sim.clone(),
        sim.port_of(a).expect("port"),
        sim.port_of(b).expect("port"),
    )
}

/// A frame from port `a` to the host at 10.0.0.2 (the fabric routes it by MAC).
fn frame(sim: &Sim, to: backend_sim::PortId) -> Vec<u8> {
    let mac = sim.with_fabric(|f| f.port_config(to).expect("port").mac);
    let mut f = mac.0.to_vec();
    f.extend([2, 0, 0, 0, 0, 1, 0x88, 0xb5]);
    f.resize(64, 0xa5);
    f
}

#[test]
fn restore_puts_back_time_events_and_trace() {
    let (sim, a, b) = two_hosts(3);
    sim.set_faults(FaultPlan {
        default_link: LinkFaults::loss(0.5),
        ..FaultPlan::default()
    })
    .expect("faults");
    let f = frame(&sim, b);
    sim.with_fabric(|fab| fab.transmit(a, f.clone()))
        .expect("transmit");
    let snap = sim.snapshot().expect("snapshot");
    let (now, hash) = (sim.now(), sim.trace_hash());
    let run = || {
        for _ in 0..20 {
            sim.with_fabric(|fab| fab.transmit(a, f.clone()))
                .expect("transmit");
        }
        sim.run_until_idle();
        (
            sim.now(),
            sim.trace_hash(),
            sim.with_fabric(|fab| fab.stats()),
        )
    };
    let first = run();
    assert_ne!(first.1, hash);
    sim.restore(&snap).expect("restore");
    assert_eq!((sim.now(), sim.trace_hash()), (now, hash));
    // The same calls after the restore draw the same losses and end the same way.
    assert_eq!(run(), first);
}

#[test]
fn restore_refuses_other_live_objects() {
    let (sim, _, _) = two_hosts(1);
    let verbs = sim.verbs(backend_sim::HostId(0));
    let name = verbs.devices().expect("devices")[0].name.clone();
    let ctx = verbs.open(&name).expect("open");
    let snap = sim.snapshot().expect("snapshot");
    let pd = ctx.alloc_pd().expect("pd");
    let refused = sim
        .restore(&snap)
        .expect_err("a PD made since the snapshot");
    assert_eq!(
        refused.to_string(),
        "the verbs objects alive are not the ones alive at the snapshot"
    );
    drop(pd);
    sim.restore(&snap).expect("the same objects again");
    drop(ctx);
    assert!(sim.restore(&snap).is_err(), "the context is gone");
}

#[test]
fn snapshot_refuses_a_running_capture() {
    let (sim, _, _) = two_hosts(1);
    sim.with_fabric(|f| f.capture_to_memory(CaptureFilter::All))
        .expect("capture");
    assert_eq!(
        sim.snapshot().map(|_| ()).map_err(|e| e.to_string()),
        Err("a capture is running".to_owned())
    );
}

#[test]
fn reseed_gives_a_fresh_simulations_draws_and_refuses_after_a_draw() {
    let lossy = FaultPlan {
        default_link: LinkFaults::loss(0.5),
        ..FaultPlan::default()
    };
    let losses = |sim: &Sim, a, b| {
        sim.set_faults(lossy.clone()).expect("faults");
        let f = frame(sim, b);
        for _ in 0..64 {
            sim.with_fabric(|fab| fab.transmit(a, f.clone()))
                .expect("transmit");
        }
        sim.run_until_idle();
        sim.trace_hash()
    };
    let (fresh, a, b) = two_hosts(99);
    let want = losses(&fresh, a, b);
    let (other, a, b) = two_hosts(5);
    assert_ne!(
        losses(&other, a, b),
        want,
        "another seed loses other frames"
    );
    let (sim, a, b) = two_hosts(5);
    sim.reseed(99).expect("nothing drawn yet");
    assert_eq!(sim.seed(), 99);
    assert_eq!(losses(&sim, a, b), want);
    assert_eq!(
        sim.reseed(7).unwrap_err().to_string(),
        "random draws were made before"
    );
}
