//! SPEAD over verbs on real verbs (Soft-RoCE rxe0 in the VM): the UD body, the same one
//! the simulator runs. Built only with the `hw` feature. The interface address comes
//! from `RDMA_IFACE` (the VM's veth0 is 10.77.0.1, the default).

use std::net::Ipv4Addr;

use backend_hw::HwVerbs;
use workspace_tests::spead_verbs::{multicast_to_two_receivers, Mode};

fn iface() -> Ipv4Addr {
    std::env::var("RDMA_IFACE")
        .ok()
        .map(|v| v.parse().expect("RDMA_IFACE is an IPv4 address"))
        .unwrap_or(Ipv4Addr::new(10, 77, 0, 1))
}

#[test]
fn ud_multicast_to_two_receivers_on_real_verbs() {
    multicast_to_two_receivers(&HwVerbs::new(), iface(), Mode::Ud, [0; 6]);
}
