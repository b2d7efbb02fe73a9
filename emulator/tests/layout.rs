//! The bindgen layouts against gcc's: a C program built with Debian's verbs.h and
//! rdma_cma.h prints the size and member offsets of the structs the emulator hands out or
//! reads, and Rust's `size_of`/`offset_of` on [`ibverbs::base::ffi`] must give the same numbers.

mod common;

use common::{require, run, stderr, stdout};
use ibverbs::base::ffi;
use std::mem::{offset_of, size_of};
use std::process::Command;

/// `(C expression, Rust value)` pairs: `sizeof(struct S)` and `offsetof(struct S, f)`.
macro_rules! layout {
    ($($s:ident { $($f:ident),* })*) => {
        vec![$(
            (format!("sizeof(struct {})", stringify!($s)), size_of::<ffi::$s>()),
            $((
                format!("offsetof(struct {}, {})", stringify!($s), stringify!($f)),
                offset_of!(ffi::$s, $f),
            ),)*
        )*]
    };
}

#[test]
fn layouts_match_gcc() {
    let rust = layout! {
        ibv_device { node_type, transport_type, name, dev_name, dev_path, ibdev_path }
        ibv_context_ops { alloc_mw, bind_mw, dealloc_mw, poll_cq, req_notify_cq, post_srq_recv, post_send, post_recv }
        ibv_context { device, ops, cmd_fd, async_fd, num_comp_vectors, mutex, abi_compat }
        verbs_context { query_port, create_cq_ex, query_device_ex, ibv_destroy_flow, ibv_create_flow, create_qp_ex, sz, context }
        ibv_comp_channel { context, fd, refcnt }
        ibv_cq { context, channel, cq_context, handle, cqe, mutex, cond, comp_events_completed, async_events_completed }
        ibv_pd { context, handle }
        ibv_mr { context, pd, addr, length, handle, lkey, rkey }
        ibv_qp { context, qp_context, pd, send_cq, recv_cq, srq, handle, qp_num, state, qp_type, mutex, cond, events_completed }
        ibv_ah { context, pd, handle }
        ibv_qp_init_attr { qp_context, send_cq, recv_cq, srq, cap, qp_type, sq_sig_all }
        ibv_qp_cap { max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline_data }
        ibv_qp_attr { qp_state, cur_qp_state, path_mtu, qkey, rq_psn, sq_psn, dest_qp_num, qp_access_flags, cap, ah_attr, alt_ah_attr, pkey_index, max_rd_atomic, max_dest_rd_atomic, min_rnr_timer, port_num, timeout, retry_cnt, rnr_retry, rate_limit }
        ibv_ah_attr { grh, dlid, sl, src_path_bits, static_rate, is_global, port_num }
        ibv_global_route { dgid, flow_label, sgid_index, hop_limit, traffic_class }
        ibv_sge { addr, length, lkey }
        ibv_send_wr { wr_id, next, sg_list, num_sge, opcode, send_flags, wr, qp_type }
        ibv_recv_wr { wr_id, next, sg_list, num_sge }
        ibv_wc { wr_id, status, opcode, vendor_err, byte_len, qp_num, src_qp, wc_flags, pkey_index, slid, sl, dlid_path_bits }
        ibv_device_attr { fw_ver, node_guid, sys_image_guid, max_mr_size, vendor_id, max_qp, device_cap_flags, atomic_cap, max_pkeys, local_ca_ack_delay, phys_port_cnt }
        ibv_device_attr_ex { orig_attr, comp_mask, odp_caps, device_cap_flags_ex, raw_packet_caps, max_dm_size }
        ibv_port_attr { state, max_mtu, active_mtu, gid_tbl_len, port_cap_flags, max_msg_sz, pkey_tbl_len, lid, active_width, active_speed, phys_state, link_layer, flags, port_cap_flags2 }
        ibv_gid_entry { gid, gid_index, port_num, gid_type, ndev_ifindex }
        ibv_sa_path_rec { dgid, sgid, dlid, slid, raw_traffic, flow_label, hop_limit, traffic_class, reversible, numb_path, pkey, sl, mtu_selector, mtu, rate_selector, rate, packet_life_time_selector, packet_life_time, preference }
        rdma_event_channel { fd }
        rdma_ib_addr { sgid, dgid, pkey }
        rdma_addr { addr }
        rdma_route { addr, path_rec, num_paths }
        rdma_cm_id { verbs, channel, context, qp, route, ps, port_num, event, send_cq_channel, send_cq, recv_cq_channel, recv_cq, srq, pd, qp_type }
        rdma_conn_param { private_data, private_data_len, responder_resources, initiator_depth, flow_control, retry_count, rnr_retry_count, srq, qp_num }
        rdma_ud_param { private_data, private_data_len, ah_attr, qp_num, qkey }
        rdma_cm_event { id, listen_id, event, status, param }
        rdma_addrinfo { ai_flags, ai_family, ai_qp_type, ai_port_space, ai_src_len, ai_dst_len, ai_src_addr, ai_dst_addr, ai_src_canonname, ai_dst_canonname, ai_route_len, ai_route, ai_connect_len, ai_connect, ai_next }
        rdma_cm_join_mc_attr_ex { comp_mask, join_flags, addr }
    };
    let mut c_src = String::from("#include <stddef.h>\n#include <stdio.h>\n#include <infiniband/verbs.h>\n#include <rdma/rdma_cma.h>\nint main(void) {\n");
    for (expr, _) in &rust {
        c_src.push_str(&format!("\tprintf(\"%zu\\n\", (size_t)({expr}));\n"));
    }
    c_src.push_str("\treturn 0;\n}\n");
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let src = dir.join("layout.c");
    let exe = dir.join("layout");
    std::fs::write(&src, c_src).unwrap();
    let mut cc = Command::new(require("gcc", "gcc"));
    cc.arg("-o").arg(&exe).arg(&src);
    let o = run(cc);
    assert!(
        o.status.success(),
        "gcc: {} (install libibverbs-dev)",
        stderr(&o)
    );
    let o = run(Command::new(&exe));
    assert!(o.status.success());
    let c_values: Vec<usize> = stdout(&o).lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(c_values.len(), rust.len());
    for ((expr, r), c) in rust.iter().zip(&c_values) {
        assert_eq!(r, c, "{expr}: Rust {r}, gcc {c}");
    }
}

#[test]
fn verbs_context_ends_with_sz_then_the_ibv_context() {
    // verbs_get_ctx() finds the verbs_context by container_of from the ibv_context, and
    // verbs_get_ctx_op() reads `sz` just before it.
    assert_eq!(
        offset_of!(ffi::verbs_context, sz) + size_of::<usize>(),
        offset_of!(ffi::verbs_context, context)
    );
    assert_eq!(
        offset_of!(ffi::verbs_context, context) + size_of::<ffi::ibv_context>(),
        size_of::<ffi::verbs_context>()
    );
    assert_eq!(size_of::<ffi::ibv_sge>(), size_of::<verbs_api::Sge>());
}

#[test]
fn an_ibv_cq_ex_starts_with_an_ibv_cq() {
    // The emulator hands out every CQ as an ibv_cq_ex, so ibv_cq_ex_to_cq (a cast) and
    // programs reading a plain ibv_cq see the same members.
    macro_rules! same {
        ($($f:ident),*) => {$(
            assert_eq!(offset_of!(ffi::ibv_cq, $f), offset_of!(ffi::ibv_cq_ex, $f), stringify!($f));
        )*};
    }
    same!(
        context,
        channel,
        cq_context,
        handle,
        cqe,
        mutex,
        cond,
        comp_events_completed,
        async_events_completed
    );
    assert!(size_of::<ffi::ibv_cq>() <= size_of::<ffi::ibv_cq_ex>());
}

#[test]
fn an_ibv_qp_ex_starts_with_its_ibv_qp() {
    // The emulator hands out every QP as an ibv_qp_ex; ibv_qp_to_qp_ex is then a cast.
    assert_eq!(offset_of!(ffi::ibv_qp_ex, qp_base), 0);
}
