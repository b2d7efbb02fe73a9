//! The verbs send transport (raw Ethernet frames or UD multicast messages), after
//! spead2's `udp_ibv_writer` (src/send_udp_ibv.cpp).
//!
//! Packets live in a ring of registered slots. The packetizer writes each SPEAD header
//! and its item pointers straight into a slot behind the prebuilt Ethernet/IPv4/UDP
//! headers; item bytes that lie in a memory region the user registered
//! ([`Sender::add_memory_region`]) are not copied but gathered by the NIC from there
//! (one SGE each, up to 4 SGEs a packet, merged when contiguous), the others are copied
//! into the slot. Packets are posted in batches, only the last request of a batch
//! signaled, its `wr_id` the batch's length; a completion frees that many slots.
//!
//! Heaps go through [`Sender::send_heaps`] with spead2's stream semantics: up to
//! `max_heaps` heaps in flight (queued and not yet completed; a group that does not fit
//! is refused, as spead2's `async_send_heaps` refuses it with `would_block`), packets
//! paced by the shared [`RateLimiter`] on a [`Clock`] (virtual time on the simulator),
//! each heap reported once all its packets completed ([`Sender::take_completed`]).

mod bring_up;
mod gather;
mod heaps;
mod posting;
mod slots;
mod state;
mod types;

pub use state::Sender;
pub use types::{HeapSent, SendHeapsError, SendStreamConfig, SendWithError, SenderStats, MAX_SGE};
