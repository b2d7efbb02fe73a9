//! Unmodified Debian programs (rdma-core 44's ibverbs-utils) and a C program built against
//! Debian's libibverbs, run with the emulator first on `LD_LIBRARY_PATH`.

mod common;

use common::{emulated, require, run, stderr, stdout};

#[test]
fn ibv_devices_lists_the_hosts_device() {
    let prog = require("ibv_devices", "ibverbs-utils");
    let o = run(emulated(&prog));
    assert_eq!(stderr(&o), "");
    assert!(o.status.success());
    assert_eq!(
        stdout(&o),
        "    device          \t   node GUID\n    ------          \t----------------\n    mlx5_0          \t00000afffe640001\n"
    );
    // Host h2 has its own device, with its own GUID (from its MAC, from 10.100.0.2).
    let mut c = emulated(&prog);
    c.env("VERBS_EMU_HOST", "h2");
    let o = run(c);
    assert!(o.status.success());
    assert_eq!(
        stdout(&o),
        "    device          \t   node GUID\n    ------          \t----------------\n    mlx5_0          \t00000afffe640002\n"
    );
}

#[test]
fn ibv_devinfo_verbose_shows_the_port_and_gids() {
    let prog = require("ibv_devinfo", "ibverbs-utils");
    let mut c = emulated(&prog);
    c.arg("-v").env("VERBS_EMU_HOST", "h3");
    let o = run(c);
    assert_eq!(stderr(&o), "");
    assert!(o.status.success());
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    for want in [
        "hca_id:\tmlx5_0",
        "\ttransport:\t\t\tInfiniBand (0)",
        "\tnode_guid:\t\t\t0000:0aff:fe64:0003",
        "\tvendor_id:\t\t\t0x02c9",
        "\tboard_id:\t\t\tVERBS_EMU_H3",
        "\tphys_port_cnt:\t\t\t1",
        "\t\t\t\t\tMANAGED_FLOW_STEERING",
        "\t\t\t\t\tIP csum offload",
        "\tnum_comp_vectors:\t\t4",
        "\t\tport:\t1",
        "\t\t\tstate:\t\t\tPORT_ACTIVE (4)",
        "\t\t\tmax_mtu:\t\t4096 (5)",
        "\t\t\tlink_layer:\t\tEthernet",
        "\t\t\tgid_tbl_len:\t\t2",
        "\t\t\tphys_state:\t\tLINK_UP (5)",
        "\t\t\tGID[  0]:\t\tfe80:0000:0000:0000:0000:0aff:fe64:0003, RoCE v1",
        "\t\t\tGID[  1]:\t\t::ffff:10.100.0.3, RoCE v2",
    ] {
        assert!(
            lines.contains(&want),
            "ibv_devinfo -v printed no line {want:?}:\n{out}"
        );
    }
    // The GIDs are the port's last lines.
    assert_eq!(
        &lines[lines.len() - 3..],
        [
            "\t\t\tGID[  0]:\t\tfe80:0000:0000:0000:0000:0aff:fe64:0003, RoCE v1",
            "\t\t\tGID[  1]:\t\t::ffff:10.100.0.3, RoCE v2",
            ""
        ]
    );
}

#[test]
fn a_topology_file_names_the_hosts() {
    let prog = require("ibv_devinfo", "ibverbs-utils");
    let file = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("one-rxe-host.toml");
    std::fs::write(
        &file,
        "[[host]]\nname = \"a\"\nip = \"192.168.7.5\"\npersonality = \"rxe\"\n",
    )
    .unwrap();
    let mut c = emulated(&prog);
    c.arg("-v")
        .env("VERBS_EMU_TOPOLOGY", &file)
        .env("VERBS_EMU_HOST", "a");
    let o = run(c);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.starts_with("hca_id:\trxe0\n"), "{out}");
    assert!(out.contains("\n\tboard_id:\t\t\tVERBS_EMU_A\n"), "{out}");
    assert!(out.contains("\n\t\t\tactive_mtu:\t\t1024 (3)\n"), "{out}");
    // rxe lists RoCE v2 GIDs only, the link-local one first (as in the Soft-RoCE VM).
    let gids: Vec<&str> = out.lines().filter(|l| l.contains("GID[")).collect();
    assert_eq!(gids.len(), 2, "{out}");
    assert!(
        gids[0].starts_with("\t\t\tGID[  0]:\t\tfe80:") && gids[0].ends_with(", RoCE v2"),
        "{out}"
    );
    assert_eq!(gids[1], "\t\t\tGID[  1]:\t\t::ffff:192.168.7.5, RoCE v2");
}

#[test]
fn an_unknown_host_is_a_clear_error() {
    let prog = require("ibv_devices", "ibverbs-utils");
    let mut c = emulated(&prog);
    c.env("VERBS_EMU_HOST", "h9");
    let o = run(c);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stdout(&o), "");
    assert_eq!(
        stderr(&o),
        "verbs-emu: VERBS_EMU_HOST=h9 names no host of the topology (h1, h2, h3, h4)\n\
         Failed to get IB devices list: No such device\n"
    );
}

/// Builds `tests/c/NAME.c` against Debian's libibverbs.
fn build_c(name: &str) -> std::path::PathBuf {
    common::build_c(name, &["-libverbs"])
}

/// Builds and runs `tests/c/NAME.c` on the emulator; it must succeed with nothing on
/// stderr. Returns its stdout.
fn run_clean(name: &str) -> String {
    let o = run(emulated(&build_c(name)));
    assert_eq!(stderr(&o), "", "{name} wrote to stderr");
    assert!(o.status.success(), "{name} failed");
    stdout(&o)
}

#[test]
fn a_c_program_sends_ud_to_itself_through_the_inline_verbs_and_a_channel_fd_and_replies_from_the_wc(
) {
    assert_eq!(
        run_clean("ud_loopback"),
        // The send completion of a SEND_WITH_IMM carries WITH_IMM (imm_data 0), as on rxe
        // and mlx5 (docs/divergences.md, row 6).
        "qp state 3\n\
         event on our cq 1, cq_context 0x1234\n\
         wc wr_id 9 status success opcode 0 byte_len 31 imm 0x00000000 src_qp_is_self 0\n\
         wc wr_id 7 status success opcode 128 byte_len 71 imm 0xabcd0123 src_qp_is_self 1\n\
         payload \"hello through the emulated NIC\"\n\
         reply is_global 1 dgid_is_own 1 sgid_index 1 hop_limit 64 port 1\n\
         done\n"
    );
}

#[test]
fn raw_packet_qps_steer_a_multicast_group_by_flow_rule() {
    assert_eq!(
        run_clean("raw_multicast"),
        "managed flow steering 1, raw ip csum 1\n\
         send wr_id 2 success\n\
         recv wr_id 1 success byte_len 58 ip_csum_ok 1\n\
         udp dst port 8888 payload \"spead-like heap\"\n\
         done\n"
    );
}

#[test]
fn bad_calls_give_the_documented_errno_and_missing_verbs_are_logged_once() {
    let exe = build_c("errors");
    let o = run(emulated(&exe));
    assert!(o.status.success());
    assert_eq!(
        stdout(&o),
        "reg_mr unknown access bit: EINVAL\n\
         reg_mr remote write without local write: EINVAL\n\
         reg_mr zero length: EINVAL\n\
         create_cq 0 entries: EINVAL\n\
         create_cq bad vector: EINVAL\n\
         query_gid index 5: EINVAL\n\
         query_port 2: EINVAL\n\
         destroy_comp_channel with a CQ: EBUSY\n\
         destroy_cq used by a QP: EBUSY\n\
         dealloc_pd used by a QP: EBUSY\n\
         modify_qp RESET to RTS: EINVAL\n\
         modify_qp unknown mask bit: EINVAL\n\
         post_send unknown opcode: EINVAL, bad_wr is it 1\n\
         alloc_td: EOPNOTSUPP\n\
         alloc_td again: EOPNOTSUPP\n\
         destroy_comp_channel after its CQ: ok\n\
         dealloc_pd after its QP: ok\n"
    );
    assert_eq!(
        stderr(&o),
        "verbs-emu: ibv_alloc_td is not emulated (EOPNOTSUPP)\n"
    );
}

#[test]
fn srq_limit_events_arrive_on_the_async_fd() {
    assert_eq!(
        run_clean("async_srq"),
        "srq max_wr >= 8: 1\n\
         async event \"SRQ limit reached\" on our srq 1\n\
         limit after the event 0\n\
         wc wr_id 1 success\n\
         wc wr_id 100 success\n\
         payload \"below the limit\"\n\
         done\n"
    );
}

#[test]
fn verbs_run_from_many_threads_at_once() {
    assert_eq!(
        run_clean("threads"),
        "thread 0: 50 good receives\n\
         thread 1: 50 good receives\n\
         thread 2: 50 good receives\n\
         thread 3: 50 good receives\n"
    );
}

#[test]
fn the_leak_report_names_what_a_program_left_behind() {
    let exe = build_c("leak");
    let mut c = emulated(&exe);
    c.env("VERBS_EMU_LEAKS", "1");
    let o = run(c);
    assert!(o.status.success());
    assert_eq!(stdout(&o), "leaving\n");
    assert_eq!(
        stderr(&o),
        "verbs-emu: not destroyed at exit: 1 context, 1 PD, 1 MR\n"
    );
    // Without the variable, no report.
    let o = run(emulated(&exe));
    assert_eq!(stderr(&o), "");
    // A program that destroys everything gets a clean report.
    let mut c = emulated(&build_c("ud_loopback"));
    c.env("VERBS_EMU_LEAKS", "1");
    let o = run(c);
    assert!(o.status.success());
    assert_eq!(stderr(&o), "verbs-emu: every verbs object was destroyed\n");
}

#[test]
fn extended_cqs_poll_through_the_cq_ex_function_pointers() {
    let exe = build_c("cq_ex");
    let o = run(emulated(&exe));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "timestamps: Operation not supported\n\
         wr_id 9 status success opcode 0 byte_len 9 qp_is_self 1 imm 0x0 src_qp_is_self 0\n\
         wr_id 7 status success opcode 128 byte_len 49 qp_is_self 1 imm 0x600d src_qp_is_self 1\n\
         done\n"
    );
    assert_eq!(
        stderr(&o),
        "verbs-emu: ibv_create_cq_ex is not emulated (completion timestamps, flow tags and TM \
         info)\n"
    );
}

#[test]
fn extended_qps_build_and_post_through_the_qp_ex_send_api() {
    assert_eq!(
        run_clean("qp_ex"),
        "plain QP has a qp_ex: 0\n\
         wr_complete: Success\n\
         wr_id 1 success opcode 0 byte_len 12 imm 0x0\n\
         wr_id 2 success opcode 0 byte_len 12\n\
         wr_id 100 success opcode 128 byte_len 52 imm 0x77\n\
         wr_id 101 success opcode 128 byte_len 52\n\
         payloads \"from an sge\" \"inline data\"\n\
         setter without a request: Invalid argument\n\
         done\n"
    );
}

#[test]
fn memory_windows_bind_and_invalidate_through_the_qp_ex_send_api() {
    assert_eq!(
        run_clean("mw_ex"),
        "type 2\n\
         bind: Success\n\
         b: wr_id 1 success opcode 5 byte_len 0\n\
         write: Success\n\
         a: wr_id 2 success opcode 1 byte_len 8\n\
         landed \"windowed\"\n\
         send_inv: Success\n\
         a: wr_id 3 success opcode 0 byte_len 4\n\
         b: wr_id 10 success opcode 128 flags 0x8 invalidated the window's rkey 1\n\
         bind and local_inv: Success\n\
         b: wr_id 4 success opcode 5 byte_len 0\n\
         b: wr_id 5 success opcode 6 byte_len 0\n\
         write: Success\n\
         a: wr_id 6 remote access error opcode 0 byte_len 0\n\
         dealloc_mw: 0\n\
         done\n"
    );
}

#[test]
fn a_cq_resizes_to_the_rounded_size_and_keeps_its_completions() {
    assert_eq!(
        run_clean("resize_cq"),
        "created: cqe 7\n\
         resize to 20: 0, cqe 31\n\
         resize to 2 with 3 waiting: Invalid argument, cqe 31\n\
         resize to 3: 0, cqe 3\n\
         resize to 0: Invalid argument\n\
         polled 3: 10/0 11/0 12/0\n"
    );
}

/// The striding receive queue spead2 uses, written out in C (`tests/c/mprq.c`): the caps
/// a ConnectX-5 reports (the kernel's `MLX5_{MIN,MAX}_SINGLE_*` limits), the ring of
/// `sizeof(struct mlx5_mprq_wqe)` entries, packed completions (byte count, strides, the
/// filler flag) with a filler when a packet does not fit the rest of a WQE, and a
/// malformed entry failing with a local length error.
#[test]
fn a_striding_rq_fills_its_wqes_stride_by_stride_through_the_ring_and_doorbell() {
    let exe = common::build_c("mprq", &["-libverbs", "-lmlx5"]);
    let o = run(emulated(&exe));
    assert_eq!(stderr(&o), "", "mprq wrote to stderr");
    assert!(o.status.success(), "mprq failed");
    let mut want = String::from(
        "mlx5dv_is_supported 1\n\
         striding rq 1 mpw 1: stride log bytes 6..13, log strides 9..16, raw packet 1\n\
         rwq wqe_cnt 2 stride 32 (sizeof mlx5_mprq_wqe 32)\n",
    );
    for _ in 0..21 {
        want += "success bytes 1514 strides 24 filler 0\n";
    }
    want += "success bytes 0 strides 8 filler 1\n\
             success bytes 1514 strides 24 filler 0\n\
             frame 20 at stride 480 intact 1, frame 21 at WQE 1 intact 1\n\
             local length error bytes 0 strides 0 filler 0\n\
             done\n";
    assert_eq!(stdout(&o), want);
}
