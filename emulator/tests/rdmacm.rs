//! The emulated librdmacm (and libmlx5) under programs: C programs built against Debian's
//! librdmacm connecting ids of one process, rdmacm-utils' `mckey` and `rping`, and what
//! spead2 does with `libmlx5.so.1`.

mod common;

use common::{build_c, emulated, require, run, stderr, stdout};

/// Builds `tests/c/NAME.c` against Debian's librdmacm and libibverbs.
fn build(name: &str) -> std::path::PathBuf {
    build_c(name, &["-lrdmacm", "-libverbs", "-ldl"])
}

/// Runs `tests/c/NAME.c` on the emulator with the leak report on; asserts that it
/// succeeded and destroyed every verbs object (the connection manager's own PD goes with
/// the last id; its context is the library's), and returns its stdout.
fn run_leak_free(name: &str) -> String {
    let mut c = emulated(&build(name));
    c.env("VERBS_EMU_LEAKS", "1");
    let o = run(c);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stderr(&o), "verbs-emu: every verbs object was destroyed\n");
    stdout(&o)
}

#[test]
fn two_ids_of_one_process_connect_exchange_messages_and_disconnect() {
    assert_eq!(
        run_leak_free("cm_loopback"),
        "listener bound to 10.100.0.1:7471, device mlx5_0, port 1\n\
         client channel readable 1\n\
         client: RDMA_CM_EVENT_ADDR_RESOLVED status 0\n\
         client 10.100.0.1:32768 -> 10.100.0.1:7471, same context as the listener 1\n\
         client: RDMA_CM_EVENT_ROUTE_RESOLVED status 0\n\
         paths 1: ::ffff:10.100.0.1 -> ::ffff:10.100.0.1 mtu 5 hop_limit 64 life 18 pkey 0xffff\n\
         client qp state 1, cqs made for it 1\n\
         server: RDMA_CM_EVENT_CONNECT_REQUEST status 0\n\
         request on the listener 1, context 0x5e, private data 56 bytes \"hello from the client\", \
         responder_resources 1 initiator_depth 1, peer 10.100.0.1:32768\n\
         peer port is the client's 1\n\
         client: RDMA_CM_EVENT_ESTABLISHED status 0\n\
         reply private data 196 bytes \"welcome\", client qp state 3\n\
         server: RDMA_CM_EVENT_ESTABLISHED status 0\n\
         server qp state 3\n\
         server wc wr_id 11 success len 18 \"ping over rdma_cm\"\n\
         client wc wr_id 22 success\n\
         client wc wr_id 21 success len 5 \"pong\"\n\
         server: RDMA_CM_EVENT_DISCONNECTED status 0\n\
         client: RDMA_CM_EVENT_DISCONNECTED status 0\n\
         qp states after disconnect 6 6\n\
         done\n"
    );
}

#[test]
fn the_connection_manager_fails_the_way_the_kernel_does() {
    let o = run(emulated(&build("cm_errors")));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "create_id with port space 7: EINVAL\n\
         bind 10.100.0.2 (host h2's): EADDRNOTAVAIL\n\
         bind 127.0.0.1: ENODEV\n\
         bind AF_UNIX: EINVAL\n\
         bind 10.100.0.1:7000: ok\n\
         bind it again: EINVAL\n\
         another id on 10.100.0.1:7000: EADDRINUSE\n\
         bind 0.0.0.0:7001: ok, device 0\n\
         disconnect an unconnected id: EINVAL\n\
         resolve_route before resolve_addr: EINVAL\n\
         resolve 192.168.9.9 (no route): ENETUNREACH\n\
         resolve 10.100.0.77 (nobody answers): ok\n\
         client: RDMA_CM_EVENT_ADDR_ERROR status -110\n\
         client: RDMA_CM_EVENT_ADDR_RESOLVED status 0\n\
         client: RDMA_CM_EVENT_ROUTE_RESOLVED status 0\n\
         client: RDMA_CM_EVENT_REJECTED status 8\n\
         qp state after the reject 6\n\
         client: RDMA_CM_EVENT_ADDR_RESOLVED status 0\n\
         client: RDMA_CM_EVENT_ROUTE_RESOLVED status 0\n\
         client: RDMA_CM_EVENT_REJECTED status 8\n\
         client: RDMA_CM_EVENT_ADDR_RESOLVED status 0\n\
         client: RDMA_CM_EVENT_ROUTE_RESOLVED status 0\n\
         connect without a QP or parameters: EINVAL\n\
         server: RDMA_CM_EVENT_CONNECT_REQUEST status 0\n\
         request's qp_num 77\n\
         accept without a QP or parameters: EINVAL\n\
         client: RDMA_CM_EVENT_REJECTED status 28\n\
         reject private data 148 bytes \"no\"\n\
         reject it again: EINVAL\n\
         get_cm_event on an empty non-blocking channel: EAGAIN\n\
         set TOS: ok\n\
         set TOS with 4 bytes: EINVAL\n\
         set option 99: ENOSYS\n\
         leave a group never joined: EADDRNOTAVAIL\n\
         event 99 is UNKNOWN EVENT\n\
         devices 1: mlx5_0, list ends 1\n\
         getaddrinfo: flags 1 family 2 qp_type 2 ps 0x106 src 10.100.0.1:7471 dst_len 0\n\
         getaddrinfo: flags 0 qp_type 2 ps 0x106 dst 10.100.0.2:18515\n\
         old channel after the move: EAGAIN\n\
         moved: RDMA_CM_EVENT_ADDR_RESOLVED status 0\n\
         moved id's channel is the new one 1\n\
         rsocket: EOPNOTSUPP\n\
         done\n"
    );
    assert_eq!(
        stderr(&o),
        "verbs-emu: rsocket is not emulated (EOPNOTSUPP)\n"
    );
}

#[test]
fn ud_ids_resolve_a_service_and_join_a_multicast_group() {
    assert_eq!(
        run_leak_free("cm_ud"),
        "client: RDMA_CM_EVENT_ADDR_RESOLVED status 0\n\
         client: RDMA_CM_EVENT_ROUTE_RESOLVED status 0\n\
         client qp type 4 state 3\n\
         server: RDMA_CM_EVENT_CONNECT_REQUEST status 0\n\
         request private data 180 bytes \"sidr\"\n\
         client: RDMA_CM_EVENT_ESTABLISHED status 0\n\
         qp_num is the server's 1, qkey 0x1234567, dgid ::ffff:10.100.0.1, sgid_index 1, is_global 1\n\
         received success len 50 from qp of the sender \"over SIDR\"\n\
         member: RDMA_CM_EVENT_ADDR_RESOLVED status 0\n\
         member: RDMA_CM_EVENT_MULTICAST_JOIN status 0\n\
         join of a: dgid ::ffff:239.1.2.3 qp_num 0xffffff qkey 0x1234567 hop_limit 64 sgid_index 1\n\
         member: RDMA_CM_EVENT_ADDR_RESOLVED status 0\n\
         member: RDMA_CM_EVENT_MULTICAST_JOIN status 0\n\
         join of b: dgid ::ffff:239.1.2.3 qp_num 0xffffff qkey 0x1234567 hop_limit 64 sgid_index 1\n\
         received success len 53 from qp of the sender \"to the group\"\n\
         done\n"
    );
}

#[test]
fn mckey_joins_a_group_and_sends_to_it() {
    let mut c = emulated(&require("mckey", "rdmacm-utils"));
    c.args(["-m", "239.1.2.3", "-b", "10.100.0.1", "-s", "-C", "4"]);
    let o = run(c);
    assert_eq!(stderr(&o), "");
    assert!(o.status.success());
    assert_eq!(
        stdout(&o),
        "mckey: starting client\n\
         mckey: joining\n\
         mckey: joined dgid: ::ffff:239.1.2.3 mlid 0x0 sl 0\n\
         initiating data transfers\n\
         data transfers complete\n\
         test complete\n\
         return status 0\n"
    );
}

#[test]
fn rping_client_is_rejected_where_nobody_listens() {
    // rping's CM thread exits the process (status -1) as soon as it sees the REJECTED
    // event; the main thread's own messages may or may not make it out before that.
    let mut c = emulated(&require("rping", "rdmacm-utils"));
    c.args(["-c", "-a", "10.100.0.1", "-C", "1"]);
    let o = run(c);
    assert_eq!(o.status.code(), Some(255));
    assert_eq!(stdout(&o), "");
    let err = stderr(&o);
    assert!(
        err.starts_with("cma event RDMA_CM_EVENT_REJECTED, error 8\n"),
        "{err}"
    );
}

#[test]
fn libmlx5_answers_spead2_that_the_device_has_no_direct_verbs() {
    // What the program prints when every direct-verbs call is refused.
    let refused = "symbols found 1\n\
                   mlx5dv_is_supported(mlx5_0) 0\n\
                   mlx5dv_query_device Operation not supported\n\
                   mlx5dv_create_wq (nil) Operation not supported\n";
    let exe = build("mlx5dv");
    // An mlx5 device without direct verbs (a topology's `direct_verbs = false`).
    let topology = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("mlx5-no-dv.toml");
    std::fs::write(
        &topology,
        "[[host]]\nname = \"h1\"\nip = \"10.100.0.1\"\ndirect_verbs = false\n",
    )
    .expect("write the topology");
    let mut c = emulated(&exe);
    c.env("VERBS_EMU_TOPOLOGY", &topology);
    let o = run(c);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), refused);
    assert_eq!(
        stderr(&o),
        "verbs-emu: mlx5dv_query_device is not emulated (EOPNOTSUPP)\n\
         verbs-emu: mlx5dv_create_wq is not emulated (EOPNOTSUPP)\n"
    );
    // Debian's own libmlx5 loads over the emulator too (it binds to the provider
    // interface), and its own check finds that the device is not an mlx5 one (the null
    // provider ops after the ibv_device), so every call refuses.
    let mut c = emulated(&exe);
    c.arg("/usr/lib/x86_64-linux-gnu/libmlx5.so.1");
    let o = run(c);
    assert!(o.status.success());
    assert_eq!(stdout(&o), refused);
    assert_eq!(stderr(&o), "");
}

#[test]
fn libmlx5_answers_spead2_that_an_mlx5_device_has_direct_verbs() {
    // The default topology's mlx5 device has them: the device is supported, the query
    // succeeds, and a WQ with no PD, CQ or receives is EINVAL.
    let o = run(emulated(&build("mlx5dv")));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "symbols found 1\n\
         mlx5dv_is_supported(mlx5_0) 1\n\
         mlx5dv_query_device Success\n\
         mlx5dv_create_wq (nil) Invalid argument\n"
    );
    assert_eq!(stderr(&o), "");
}
