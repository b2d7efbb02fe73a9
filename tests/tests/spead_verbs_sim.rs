//! SPEAD over verbs on the simulator: raw (mlx5 personality) and UD (rxe personality),
//! the same bodies that run on Soft-RoCE for UD.

use std::net::Ipv4Addr;

use backend_sim::{Personality, Sim};
use workspace_tests::spead_verbs::{multicast_to_two_receivers, Mode};

fn sim_mac(ip: Ipv4Addr) -> [u8; 6] {
    let o = ip.octets();
    [0x02, 0x00, o[0], o[1], o[2], o[3]]
}

#[test]
fn raw_multicast_to_two_receivers_on_mlx5() {
    let ip = Ipv4Addr::new(10, 0, 0, 1);
    let sim = Sim::new(1);
    let h = sim.add_host("h0", ip, Personality::Mlx5).unwrap();
    multicast_to_two_receivers(&sim.verbs(h), ip, Mode::Raw, sim_mac(ip));
}

#[test]
fn ud_multicast_to_two_receivers_on_rxe() {
    let ip = Ipv4Addr::new(10, 77, 0, 1);
    let sim = Sim::new(1);
    let h = sim.add_host("h0", ip, Personality::Rxe).unwrap();
    multicast_to_two_receivers(&sim.verbs(h), ip, Mode::Ud, sim_mac(ip));
}
