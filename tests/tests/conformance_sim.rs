//! The conformance suite on the simulator, rxe personality: one host with one device
//! `rxe0` whose QPs talk to each other, as on Soft-RoCE in the VM.

use std::net::Ipv4Addr;

use backend_sim::{Personality, Sim, SimVerbs};
use workspace_tests::conformance::Env;

fn env() -> Env<SimVerbs> {
    let sim = Sim::new(0x5eed);
    let host = sim
        .add_host("h0", Ipv4Addr::new(10, 77, 0, 1), Personality::Rxe)
        .expect("host");
    Env {
        verbs: sim.verbs(host),
        device: "rxe0".into(),
        port: 1,
    }
}

workspace_tests::conformance_tests!(env());
