//! SPEAD over verbs on real verbs (Soft-RoCE rxe0 in the VM): the UD bodies, the same
//! ones the simulator runs. One host plays sender and receivers (multicast loops back
//! through the device); loss is made at the sender, since only the simulator's fabric
//! can make the other faults. Built only with the `hw` feature. The interface address
//! comes from `RDMA_IFACE` (the VM's veth0 is 10.77.0.1, the default).

use std::net::Ipv4Addr;

use backend_hw::HwVerbs;
use workspace_tests::spead_verbs::{
    drop_at_sender, groups_to_receivers, multicast_to_two_receivers, Mode, Node,
};

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

#[test]
fn ud_several_groups_and_receivers_on_real_verbs() {
    let verbs = HwVerbs::new();
    let node = Node {
        verbs: &verbs,
        iface: iface(),
        mac: [0; 6],
    };
    groups_to_receivers(node, [node, node, node], Mode::Ud);
}

#[test]
fn ud_drop_at_sender_on_real_verbs() {
    let verbs = HwVerbs::new();
    let node = Node {
        verbs: &verbs,
        iface: iface(),
        mac: [0; 6],
    };
    drop_at_sender(node, node, Mode::Ud);
}

#[test]
fn ud_gathered_heaps_reach_their_substreams_on_real_verbs() {
    let verbs = HwVerbs::new();
    let node = Node {
        verbs: &verbs,
        iface: iface(),
        mac: [0; 6],
    };
    workspace_tests::spead_verbs::gathered_heaps_reach_their_substreams(
        node,
        node,
        Mode::Ud,
        || {},
    );
}
