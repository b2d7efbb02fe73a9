//! SPEAD over verbs, written once against [`verbs_api`] so the same code runs on the
//! simulator, on Soft-RoCE and on NICs.
//!
//! - [`Receiver::raw`]: spead2's ibverbs reader. One RAW_PACKET QP, one flow rule per
//!   endpoint as spead2 builds them (a multicast group: its 01:00:5e MAC, the group and
//!   the UDP port; a unicast address: the interface's MAC, the address and the port;
//!   `0.0.0.0`: the port only), receive slots from a registered pool, batched
//!   reposting, interrupt-driven (completion channel, `comp_vector >= 0`) or
//!   busy-polling (`comp_vector < 0`). IP options are skipped; as in spead2 no checksum
//!   is checked unless [`IbvConfig::verify_checksums`] asks. Frames that are
//!   VLAN-tagged, fragments, or not UDP to an endpoint are counted by cause and
//!   dropped. Needs RAW_PACKET and flow steering (mlx5; the simulator's mlx5
//!   personality).
//! - [`Receiver::ud`]: the same over UD multicast: the QP attaches to each group's GID
//!   and the 40-byte GRH in front of every message is skipped. Runs on rxe and
//!   InfiniBand.
//! - [`Sender::raw`] / [`Sender::ud`]: spead2's ibverbs writer: one substream per
//!   multicast endpoint, packets written straight into registered slots (the packetizer
//!   writes into them), item bytes in user-registered memory gathered by SGE without a
//!   copy ([`Sender::add_memory_region`]), Ethernet/IPv4/UDP headers from a prebuilt
//!   template (IP checksum offloaded when the device can), one signaled work request
//!   per batch; [`Sender::send_heaps`] with spead2's `max_heaps` queue and rate limit.
//! - [`UdpReader`]: `SPEAD2_IBV_INTERFACE` rerouting plain UDP readers to
//!   [`Receiver::raw`], as spead2's UDP reader factory does.
//!
//! UD carries no UDP port, so the port of an endpoint selects the Q_Key
//! ([`ud_qkey`]): senders and receivers of the same endpoint agree, and different ports
//! on one group stay apart.

mod config;
mod error;
pub mod frame;
mod iface;
mod receiver;
mod reroute;
mod sender;

pub use config::{
    find_device, parse_interface, ud_qkey, DeviceMatch, IbvConfig, DEFAULT_BUFFER_SIZE,
    DEFAULT_MAX_SIZE, DEFAULT_SEND_BUFFER_SIZE, ENV_COMP_VECTOR, ENV_INTERFACE,
};
pub use error::VerbsError;
pub use frame::FrameDrop;
pub use iface::interface_mac;
pub use receiver::{source_mac, Receiver, ReceiverStats, RxFrame};
pub use reroute::{EnvOverride, UdpReader};
pub use sender::{
    HeapSent, SendHeapsError, SendStreamConfig, SendWithError, Sender, SenderStats, MAX_SGE,
};
