//! rdma-core's Python bindings (pyverbs, Debian's python3-pyverbs for `/usr/bin/python3`)
//! on the emulated NIC, as a user's Python drives them: its extension modules link
//! libibverbs.so.1 and libmlx5.so.1 (every libmlx5 symbol they bind must exist) and find
//! the emulator's first on the library path.
//!
//! `tests/py/pyverbs_local.py` runs on one host in one process: the device and port
//! queries; RC QPs connected to each other (send with a completion channel, RDMA write
//! with immediate, RDMA read, a query with every mask bit); UD QPs (GRH, source QP, a CQ
//! that cannot shrink below its waiting completions); a RAW_PACKET QP steered by Ethernet
//! flows to an extended CQ (a frame to the port's own MAC, and one to an Ethernet
//! multicast group a flow names, looped back as mlx5 does); RC traffic, an MR and a CQ in
//! a parent domain; an MR re-registered (access, range, PD: keys kept) with its QPs reset
//! in between (their completions taken out of their CQs, as libmlx5 does); an SRQ; and
//! libmlx5's answers on an mlx5 device with direct verbs. `tests/py/pyverbs_hosts.py`
//! connects RC QPs between hosts h1 and h2 joined to a fabric process: RDMA write, send
//! and RDMA read across it.

mod common;

use std::path::{Path, PathBuf};

use common::fabric::{scratch, start, Fabric};
use common::{emulated, require, run, stderr, stdout};

/// Debian's Python, the one python3-pyverbs is built for, after checking pyverbs is there.
fn python() -> PathBuf {
    let python = require("python3", "python3");
    assert!(
        Path::new("/usr/lib/python3/dist-packages/pyverbs/device.cpython-311-x86_64-linux-gnu.so")
            .exists(),
        "pyverbs is not installed: install the Debian package python3-pyverbs (as root: \
         apt-get install python3-pyverbs; `cargo xtask ci` does it)"
    );
    python
}

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/py")
        .join(name)
}

#[test]
fn pyverbs_runs_rc_ud_raw_and_srq_on_one_emulated_host() {
    let mut c = emulated(&python());
    c.arg(script("pyverbs_local.py"));
    let o = run(c);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "devices ['mlx5_0']\n\
         vendor 0x2c9 part 4123 ports 1 ports_ex 1\n\
         port state 4 link_layer 2 active_mtu 5 gid_tbl_len 2\n\
         gid 0 fe80:0000:0000:0000:0000:0aff:fe64:0001 type 0\n\
         gid 1 0000:0000:0000:0000:0000:ffff:0a64:0001 type 1\n\
         cmd_fd dups True\n\
         rc states 3 3\n\
         channel event for the send CQ\n\
         send: wr_id 1 status 0 opcode 0 wc_flags 0x0\n\
         recv: wr_id 10 status 0 opcode 128 byte_len 13 wc_flags 0x0\n\
         recv qp is B True data b'hello pyverbs'\n\
         write_imm: wr_id 2 status 0 opcode 1 wc_flags 0x2\n\
         recv_imm: wr_id 11 status 0 opcode 129 byte_len 32 wc_flags 0x2\n\
         imm 0x12345678 written True\n\
         read: wr_id 3 status 0 opcode 2 byte_len 16 wc_flags 0x0\n\
         read data b'read me, please!'\n\
         query state 3 dest is B True mtu 3\n\
         ah on the RoCE v1 GID: made\n\
         rtr on the RoCE v1 GID: done\n\
         cqe 3\n\
         resize below the waiting completions: errno 22\n\
         ud send: wr_id 30 status 0 opcode 0 wc_flags 0x0\n\
         ud send: wr_id 31 status 0 opcode 0 wc_flags 0x0\n\
         ud send: wr_id 32 status 0 opcode 0 wc_flags 0x0\n\
         resized to 1: cqe 1\n\
         ud recv: wr_id 20 status 0 opcode 128 byte_len 88 wc_flags 0x1\n  \
         from the sender True grh True data True\n\
         ud recv: wr_id 21 status 0 opcode 128 byte_len 87 wc_flags 0x1\n  \
         from the sender True grh True data True\n\
         ud recv: wr_id 22 status 0 opcode 128 byte_len 86 wc_flags 0x1\n  \
         from the sender True grh True data True\n\
         raw send: wr_id 41 status 0 opcode 0 wc_flags 0x0\n\
         raw recv: wr_id 40 status 0 opcode 128 byte_len 64 cvlan 0\n\
         raw frame intact True\n\
         raw send to a MAC group: wr_id 43 status 0 opcode 0 wc_flags 0x0\n\
         raw recv from the group: wr_id 42 status 0 byte_len 64\n\
         group frame intact True\n\
         cq in the parent domain: made\n\
         domain send: wr_id 51 status 0 opcode 0 wc_flags 0x0\n\
         domain recv: wr_id 50 status 0 opcode 128 byte_len 25 wc_flags 0x0\n\
         domain data b'through the parent domain'\n\
         allocator calls []\n\
         rereg access without its flag: errno 22\n\
         rereg access: keys kept True\n\
         write without remote access: wr_id 60 status 10\n\
         completions left after the reset 0 0\n\
         write with remote access again: wr_id 62 status 0 opcode 1 wc_flags 0x0\n\
         written b'0123456789abcdef'\n\
         rereg range: keys kept True length 256\n\
         write into the new range: wr_id 63 status 0 opcode 1 wc_flags 0x0\n\
         new range holds b'0123456789abcdef'\n\
         send into another PD's region: wr_id 65 status 11\n\
         its receive: wr_id 64 status 4\n\
         send after the PD is back: wr_id 67 status 0 opcode 0 wc_flags 0x0\n\
         its receive: wr_id 66 status 0 opcode 128 byte_len 16 wc_flags 0x0\n\
         received b'0123456789abcdef'\n\
         srq of no receives: max_wr 0 max_sge 0\n\
         Mlx5Context: opened\n\
         mlx5dv_is_supported False\n\
         mlx5dv_reserved_qpn_alloc 95\n\
         mlx5dv_qp_cancel_posted_send_wrs -95\n\
         mlx5dv_devx_get_event -1 95\n\
         mlx5dv_dr_domain_create None 95\n\
         done\n"
    );
    // Each refused libmlx5 function says so once.
    assert_eq!(
        stderr(&o),
        "verbs-emu: mlx5dv_reserved_qpn_alloc is not emulated (EOPNOTSUPP)\n\
         verbs-emu: mlx5dv_qp_cancel_posted_send_wrs is not emulated (EOPNOTSUPP)\n\
         verbs-emu: mlx5dv_devx_get_event is not emulated (EOPNOTSUPP)\n\
         verbs-emu: mlx5dv_dr_domain_create is not emulated (EOPNOTSUPP)\n"
    );
}

#[test]
fn pyverbs_connects_rc_qps_between_two_emulated_hosts() {
    let python = python();
    let dir = scratch("pyverbs-hosts");
    let fabric = Fabric::start(&dir, &[]);
    let folder = dir.to_str().expect("a UTF-8 path").to_owned();
    let mut s = fabric.program(&python, "h2");
    s.arg(script("pyverbs_hosts.py")).args(["server", &folder]);
    let server = start(s, &dir, "server");
    let mut c = fabric.program(&python, "h1");
    c.arg(script("pyverbs_hosts.py")).args(["client", &folder]);
    let client = start(c, &dir, "client").finish();
    let server = server.finish();
    let summary = fabric.stop();
    assert!(client.status.success(), "client: {client:?}");
    assert!(server.status.success(), "server: {server:?}");
    assert_eq!(
        client.out,
        "client gid 0000:0000:0000:0000:0000:ffff:0a64:0001\n\
         client write: wr_id 10 status 0 opcode 1\n\
         client send: wr_id 11 status 0 opcode 0\n\
         client read: wr_id 12 status 0 opcode 2 byte_len 33\n\
         client read data b'the server keeps this for reading'\n\
         client done\n"
    );
    assert_eq!(
        server.out,
        "server gid 0000:0000:0000:0000:0000:ffff:0a64:0002\n\
         server recv: wr_id 1 status 0 opcode 128 byte_len 21 on our QP True\n\
         server message b'the client says hello'\n\
         server written True\n\
         server done\n"
    );
    assert_eq!((client.err.as_str(), server.err.as_str()), ("", ""));
    // The write, the send, the read request and their answers: six frames, none lost.
    assert!(
        summary.starts_with("6 frames from hosts, 6 delivered, lost: none;"),
        "{summary}"
    );
}
