//! Test bodies for SPEAD over verbs, written once and run on every backend that supports
//! the transport (raw: the simulator's mlx5; UD: the simulator's rxe and Soft-RoCE).

mod basic;
mod capture;
mod gather;
mod plan;

pub use basic::{
    assert_all_complete, multicast_to_two_receivers, payload, receive_heaps, send_heaps, Mode,
};
pub use capture::{capture_datagrams, synthetic_capture, write_pcap};
pub use gather::gathered_heaps_reach_their_substreams;
pub use plan::{
    assert_clean, assert_exact_loss, drop_at_sender, drop_list, groups_to_receivers, lenient,
    receiver_specs, run_plan, Node, Outcome, Plan, RecvSpec,
};
