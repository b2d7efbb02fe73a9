//! The conformance suite on the simulator, rxe personality: one host with one device
//! `rxe0` whose QPs talk to each other, as on Soft-RoCE in the VM. The cases about loss
//! add a second device `rxe1` to the host (its own port on the fabric) and lose frames
//! with the fault plan's drop list.

use std::net::Ipv4Addr;

use backend_sim::fabric::PortConfig;
use backend_sim::{HostId, Personality, Sim, SimVerbs};
use workspace_tests::conformance::{Env, LossyLink, LossyLinks};

/// The simulator's side of a lossy link: the next frame handed to the fabric is lost.
#[derive(Debug)]
struct SimLink {
    sim: Sim,
}

impl LossyLink for SimLink {
    fn peer_device(&self) -> &str {
        "rxe1"
    }

    fn lose_next(&self, _dest_qpn: u32, _psn: u32) -> Result<(), String> {
        let (next, mut plan) = self
            .sim
            .with_fabric(|f| (f.stats().transmitted, f.faults().clone()));
        plan.drop_packets.push(next);
        self.sim.set_faults(plan).map_err(|e| e.to_string())
    }
}

fn lossy(sim: &Sim, host: HostId) -> LossyLinks {
    let sim = sim.clone();
    LossyLinks::new(move || {
        sim.add_device(
            host,
            Personality::Rxe,
            PortConfig::with_ip(Ipv4Addr::new(10, 77, 0, 2)),
        )
        .map_err(|e| e.to_string())?;
        Ok(Box::new(SimLink { sim: sim.clone() }))
    })
}

fn env() -> Env<SimVerbs> {
    let sim = Sim::new(0x5eed);
    let host = sim
        .add_host("h0", Ipv4Addr::new(10, 77, 0, 1), Personality::Rxe)
        .expect("host");
    Env {
        verbs: sim.verbs(host),
        device: "rxe0".into(),
        port: 1,
        lossy: Some(lossy(&sim, host)),
    }
}

workspace_tests::conformance_tests!(env());

/// The memory-window cases on the mlx5 personality, whose divergences from rxe the cases
/// spell out (docs/divergences.md rows 50-59).
mod mlx5_windows {
    use super::*;

    fn env() -> Env<SimVerbs> {
        let sim = Sim::new(0x5eed);
        let host = sim
            .add_host("h0", Ipv4Addr::new(10, 77, 0, 1), Personality::Mlx5)
            .expect("host");
        Env {
            verbs: sim.verbs(host),
            device: Personality::Mlx5.name(0),
            port: 1,
            lossy: None,
        }
    }

    workspace_tests::conformance_tests!(@windows env());
}

/// The cases of work queues, indirection tables, RSS QPs and striding RQs on the mlx5
/// personality, which has them (on rxe, above, they check its refusals).
mod mlx5_queues {
    use super::*;

    fn env() -> Env<SimVerbs> {
        let sim = Sim::new(0x5eed);
        let host = sim
            .add_host("h0", Ipv4Addr::new(10, 77, 0, 1), Personality::Mlx5)
            .expect("host");
        Env {
            verbs: sim.verbs(host),
            device: Personality::Mlx5.name(0),
            port: 1,
            lossy: None,
        }
    }

    workspace_tests::conformance_tests!(@queues env());
}
