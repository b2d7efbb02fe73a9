//! Our own SPEAD tools, built against Debian's libibverbs (`spead-tools --features hw`),
//! on the emulated NIC as two hosts: `spead-recv --backend hw ibv:GROUP:PORT` on h2 and
//! `spead-send --backend hw ibv:GROUP:PORT` on h1 (spead2's RAW_PACKET reader and writer
//! on the default topology's mlx5 hosts), joined to one fabric process. The heaps h2
//! prints are exactly those the same `spead-send` writes to a file and `spead-recv`
//! reads back from it.

mod common;

use common::fabric::{scratch, start, Fabric};
use common::hw_tools;
use common::spead::{
    assert_all_delivered, assert_heaps, nic_ready, on_nic, packets_sent, reference_heaps, wait_for,
    HEAP_ARGS,
};

const GROUP: &str = "ibv:239.10.0.1:7148";

#[test]
fn spead_send_and_spead_recv_over_verbs_between_two_hosts() {
    let tools = hw_tools();
    let (send, recv) = (tools.join("spead-send"), tools.join("spead-recv"));
    let dir = scratch("spead-tools");
    // What the heaps are: the same sender into a file, read back.
    let want = reference_heaps(&tools, &dir);

    let fabric = Fabric::start(&dir, &[]);
    let mut r = fabric.program(&recv, "h2");
    r.args(on_nic("10.100.0.2", GROUP)).arg("--json");
    let receiver = start(r, &dir, "recv");
    // The receiver says when its flow rule is in place; what is sent after that arrives.
    wait_for(&dir.join("recv.err"), &nic_ready("10.100.0.2", GROUP));
    let mut s = fabric.program(&send, "h1");
    s.args(HEAP_ARGS).args(on_nic("10.100.0.1", GROUP));
    let packets = packets_sent(&start(s, &dir, "send").finish());
    let got = receiver.finish();
    assert_heaps("spead-recv over verbs", &got, &want);
    assert_all_delivered(&got, GROUP, packets);
    let summary = fabric.stop();
    assert!(
        summary.starts_with(&format!("{packets} frames from hosts")),
        "{summary}"
    );
}
