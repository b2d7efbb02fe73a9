//! spead2 (4.5.1, the PyPI wheel) on the emulated NIC: it `dlopen`s libibverbs.so.1,
//! librdmacm.so.1 and libmlx5.so.1 from the emulator's folder, finds its device with
//! `rdma_bind_addr` on host h1's address, and an ibverbs sender (`UdpIbvStream`) and an
//! ibverbs reader (`add_udp_ibv_reader`) in one process exchange heaps over a multicast
//! group (mlx5's multicast loopback, steered by flow rules to the reader's RAW_PACKET QP).
//!
//! spead2's reader also joins the group with a kernel UDP socket on the interface address,
//! so the program runs in a network namespace of its own (`unshare -n`, as root) with a
//! veth interface holding 10.100.0.1.

mod common;

use common::{emulated, require, run, stderr, stdout};
use serde_json::{json, Value};

/// Heaps the sender sends (cnt 1 ..= HEAPS), and the end-of-stream heap after them.
const HEAPS: u64 = 64;

/// What `tests/py/spead2_multicast.py` puts in heap `i`'s item 0x1001.
fn payload(i: u64) -> Vec<u8> {
    let n = 100 + 3000 * (i % 4);
    (0..n).map(|k| ((7 * i + k) % 251) as u8).collect()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn spead2_sends_and_receives_multicast_heaps_on_the_emulated_nic() {
    let python = workspace_tests::spead2::python();
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/py/spead2_multicast.py");
    require("ip", "iproute2");
    let mut c = emulated(&require("unshare", "util-linux"));
    c.args(["-n", "sh", "-c"])
        .arg(
            "ip link add v0 type veth peer name v1 && ip addr add 10.100.0.1/24 dev v0 && \
             ip link set v1 up && ip link set v0 up && exec \"$@\"",
        )
        .arg("sh")
        .arg(python)
        .arg(script)
        .args(["239.10.0.1", "7148", &HEAPS.to_string()]);
    let o = run(c);
    assert_eq!(stderr(&o), "", "spead2 (or the emulator) complained");
    assert!(o.status.success());
    let got: Vec<Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    let mut want: Vec<Value> = (0..HEAPS)
        .map(|i| {
            json!({
                "cnt": i + 1,
                "items": [
                    {"id": 0x1000, "hex": hex(&i.to_be_bytes())},
                    {"id": 0x1001, "hex": hex(&payload(i))},
                ],
            })
        })
        .collect();
    want.push(json!({"stats": {"heaps": HEAPS, "incomplete_heaps_evicted": 0}}));
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w);
    }
}
