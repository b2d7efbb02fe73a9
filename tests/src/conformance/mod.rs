//! One conformance suite for every backend: the same test bodies run on the simulator
//! (rxe personality) and on real verbs (rxe in the Soft-RoCE VM, or a NIC). Each case
//! asserts exact completions (status, opcode, byte_len, immediate, wr_id order) and
//! errors; where rxe differs from the man pages, the simulator's rxe personality must
//! match rxe.
//!
//! Use [`conformance_tests!`](crate::conformance_tests) to instantiate every case as a
//! `#[test]` for one backend.
//!
//! All QPs live on one device and talk to each other through it (loopback), as Soft-RoCE
//! requires (SOFT-ROCE.md).

pub mod cases;
pub mod rig;

pub use rig::{Env, Rig};

/// Instantiates every conformance case as a `#[test]`, given an expression that makes
/// a fresh [`Env`] for each test.
#[macro_export]
macro_rules! conformance_tests {
    ($env:expr) => {
        $crate::conformance_tests!(@cases $env;
            device_and_port_queries,
            memory_registration_and_access,
            cq_events_notify_and_ack,
            solicited_only_notification,
            rc_bring_up_and_invalid_transitions,
            rc_send_recv_sgl_and_imm,
            rc_rdma_write_read_and_atomics,
            rc_inline_send,
            loc_prot_err_on_bad_lkey,
            rem_access_err_on_bad_rkey_or_missing_access,
            rnr_retry_exceeded_without_receive,
            wr_flush_err_after_err,
            ud_send_recv_with_grh,
            ud_multicast_fan_out_and_detach,
            srq_shared_with_limit_event,
            cq_overrun_raises_async_event,
            ud_send_above_mtu_completes_and_sends_nothing,
            ud_message_above_receive_buffer_fails_the_receive,
        );
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
