//! Real frames: Ethernet II, IPv4, IPv6, UDP and RoCEv2 builders and parsers, exact enough that
//! Wireshark and tshark decode what the simulator writes. They live in the `netwire`
//! crate, shared with the SPEAD verbs transports and the pcap code; this module keeps
//! the paths the simulator and its users name them by.

pub use netwire::frame::*;
pub use netwire::{eth, ipv4, ipv6, roce, udp, FrameError};
