//! One conformance suite for every backend: the same test bodies run on the simulator
//! (rxe personality) and on real verbs (rxe in the Soft-RoCE VM, or a NIC). Each case
//! logs what it observes as exact lines ([`outcome::Log`]: every post's return code,
//! every completion with all its fields in the order polled, QP states, async events,
//! bytes in memory) and compares the whole log with what rxe does. Where rxe differs from
//! the man pages or mlx5, the case's doc says so and docs/divergences.md lists it; the
//! simulator's rxe personality must match rxe.
//!
//! Use [`conformance_tests!`](crate::conformance_tests) to instantiate every case as a
//! `#[test]` for one backend.
//!
//! All QPs live on one device and talk to each other through it (loopback), as Soft-RoCE
//! requires (SOFT-ROCE.md), except in the cases about loss, whose second QP is on a
//! second device behind a link that can lose packets ([`loss`]).

pub mod cases;
pub mod loss;
pub mod outcome;
pub mod rig;
pub mod split;

pub use loss::{EmuLink, LossyLink, LossyLinks, VethLink};
pub use rig::{Env, Rig};

/// Instantiates every conformance case as a `#[test]`, given an expression that makes
/// a fresh [`Env`] for each test. The cases about loss, which need the env's lossy link,
/// are in a module `lossy_link` (so `--skip lossy_link::` leaves them out where a backend
/// has no such link). `conformance_tests!(@windows ENV)` instantiates only the
/// memory-window cases (the simulator runs them on its mlx5 personality too), and
/// `conformance_tests!(@queues ENV)` only the cases of work queues, indirection tables,
/// RSS QPs and striding RQs, in a module `queues` (on rxe they check its refusals; the
/// simulator's mlx5 personality and the emulated mlx5 run what they do).
#[macro_export]
macro_rules! conformance_tests {
    ($env:expr) => {
        $crate::conformance_tests!(@cases $env;
            cq_events_notify_and_ack,
            solicited_only_notification,
            cq_overrun_raises_async_event,
            cq_sizes_round_to_power_of_two_minus_one,
            cq_size_refusals,
            req_notify_without_channel,
            solicited_only_wakes_on_flush,
            solicited_only_ignores_unsolicited_error,
            rearm_keeps_next_completion,
            cq_overrun_moves_qp_to_err,
            one_channel_two_cqs,
            poll_one_at_a_time,
            poll_without_room_leaves_completions,
            device_and_port_queries,
            retry_cnt_seven_is_infinite,
            device_limits,
            query_port_and_gid_out_of_range,
            open_unknown_device,
            device_list_entry,
            raw_packet_and_flow_steering_unsupported,
            address_handles,
            memory_registration_and_access,
            mr_keys,
            reg_mr_over_caller_memory,
            reg_mr_refusals,
            send_from_deregistered_mr,
            ud_multicast_fan_out_and_detach,
            multicast_attach_refusals,
            multicast_sender_attached_receives_its_own,
            multicast_wrong_qkey_dropped,
            multicast_two_groups,
            multicast_to_an_empty_group,
            rc_bring_up_and_invalid_transitions,
            qp_caps_round_up,
            qp_create_refusals,
            modify_refuses_bad_values,
            rd_atomic_rounds_up_to_power_of_two,
            query_qp_reports_attributes_and_psns,
            ud_bring_up_and_masks,
            posting_before_ready,
            post_send_refusals,
            sq_drained_event,
            uc_bring_up_and_masks,
            ud_reset_and_reuse,
            sqd_and_back_to_rts,
            qkey_change_in_rts,
            recv_list_fails_at_the_bad_request,
            loc_prot_err_on_bad_lkey,
            rem_access_err_on_bad_rkey_or_missing_access,
            rnr_retry_exceeded_without_receive,
            wr_flush_err_after_err,
            responder_without_remote_write,
            responder_without_remote_read,
            responder_without_remote_atomic,
            read_to_responder_with_no_rd_atomic,
            rc_receive_too_small,
            write_with_imm_bad_rkey,
            receive_into_mr_without_local_write,
            read_into_bad_local_lkey,
            atomic_into_bad_local_lkey,
            atomic_length_and_alignment,
            retry_exceeded_to_missing_qp,
            posting_to_a_qp_in_err,
            error_lands_on_the_failing_request,
            read_past_the_remote_region,
            rnr_retry_infinite_waits_for_a_receive,
            rc_send_recv_sgl_and_imm,
            rc_rdma_write_read_and_atomics,
            rc_inline_send,
            rc_send_completion_fields,
            rc_send_with_imm_fields,
            rc_zero_length_send,
            rc_multi_packet_send,
            rc_rdma_write_fields,
            rc_rdma_write_with_imm_fields,
            rc_rdma_read_fields,
            rc_atomic_fields,
            rc_unsignaled_sends,
            rc_sq_sig_all,
            rc_fenced_send_after_read,
            rc_send_to_srq,
            rc_zero_length_write_any_rkey,
            rc_inline_rdma_write,
            rc_reads_in_order_one_outstanding,
            rc_read_with_no_rd_atomic_never_issues,
            rc_responder_in_rtr_receives_without_comm_est,
            srq_shared_with_limit_event,
            srq_sizes_round_up,
            srq_full_and_resize,
            srq_refusals,
            srq_limit_rearm,
            srq_list_and_limit_query,
            srq_qp_to_err_raises_no_last_wqe,
            uc_send_recv,
            uc_rdma_write,
            uc_write_bad_rkey_is_silent,
            uc_without_receive_is_dropped,
            uc_read_is_refused,
            ud_send_recv_with_grh,
            rc_and_ud_over_the_link_local_gid,
            ud_send_above_mtu_completes_and_sends_nothing,
            ud_message_above_receive_buffer_fails_the_receive,
            ud_completion_fields,
            ud_send_error_moves_qp_to_err,
            ud_zero_length_send,
            ud_inline_send,
            ud_send_to_missing_qp,
            ud_without_receive_is_dropped,
            ud_scatter_gather_and_grh,
            ud_message_of_exactly_the_mtu,
            ud_batch_in_order,
            ud_receives_in_rtr_not_in_init,
            ud_solicited_event,
            ud_recv_too_many_sges,
            ud_two_senders_two_receivers_one_cq,
            ud_multicast_attach_before_rts,
            ud_controlled_qkey_is_sent_as_given,
            ud_grh_across_sges,
            ud_unsignaled_sends,
            ud_send_queue_full_enomem,
            ud_send_queue_full_in_err,
            ud_send_error_in_a_list,
            rc_send_queue_full_enomem,
            uc_send_queue_full_enomem,
            cq_resize_rounds_like_create,
            cq_resize_keeps_completions_and_refuses_below_them,
        );
        $crate::conformance_tests!(@windows $env);
        $crate::conformance_tests!(@queues $env);
        mod lossy_link {
            use super::*;
            $crate::conformance_tests!(@cases $env;
                rc_psn_nak_counts_as_a_retry,
                uc_resynchronises_after_a_lost_message,
                uc_drops_the_rest_of_a_message_after_a_lost_packet,
            );
        }
    };
    // The memory-window cases (a personality of its own may run them alone).
    (@windows $env:expr) => {
        $crate::conformance_tests!(@cases $env;
            mw_device_caps,
            mw_type1_bind_write_read,
            mw_access_outside_the_window,
            mw_write_through_read_only_window,
            mw_type1_rebind_and_unbind,
            mw_old_rkey_refused_after_rebind,
            mw_bind_refusals,
            mw_bind_to_region_without_mw_bind,
            mw_bind_past_the_region,
            mw_type2_bind_and_local_inv,
            mw_type2_send_with_inv,
            mw_type2_errors,
            mw_type2_only_through_its_qp,
            mw_send_with_inv_bad_rkey,
            mw_dealloc_bound_window,
            mw_type2_zero_based,
            mw_atomic_through_window,
            mw_uc_bind_and_write,
        );
    };
    // Work queues, indirection tables, RSS QPs and striding RQs, in a module `queues`
    // (on rxe each checks the refusals; a personality or device with them runs them alone).
    (@queues $env:expr) => {
        mod queues {
            use super::*;
            $crate::conformance_tests!(@cases $env;
                wq_takes_frames_only_when_ready,
                rss_steers_by_toeplitz_hash,
                striding_rq_packs_frames_into_strides,
                striding_rq_filler_ends_a_full_wqe,
                striding_rq_two_byte_shift,
                striding_rq_malformed_entry_fails,
                wq_and_rss_refusals,
            );
        }
    };
    (@cases $env:expr; $($case:ident),+ $(,)?) => {
        $(
            #[test]
            fn $case() {
                let env = $env;
                $crate::conformance::cases::$case(&env);
            }
        )+
    };
}
