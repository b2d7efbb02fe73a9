//! One pcap/pcapng reader and writer, and the link layers of what they hold.
//!
//! - [`PcapReader`]: records of classic pcap files (either byte order, micro- or
//!   nanosecond timestamps) and pcapng files (sections of either byte order, several
//!   interfaces, `if_tsresol` and `if_tsoffset`), from any [`std::io::Read`], through one
//!   reused buffer. Errors name the byte offset and what is wrong.
//! - [`PcapWriter`]: classic pcap or pcapng, micro- or nanosecond, any link type.
//! - [`parse_frame`]: from a frame to its UDP datagram, for the link types Ethernet
//!   (with 802.1Q/802.1ad tags), Linux SLL and SLL2, raw IPv4 and BSD loopback.
//! - [`to_ethernet`]: from a record of those link types to an Ethernet frame, for
//!   replaying recordings into a simulated fabric.
//!
//! Built on `pcap-file` where it is correct; see the `read` module's notes (and its
//! tests) for where it is not and what this module does instead.

mod error;
mod link;
mod read;
mod write;

#[cfg(test)]
mod tests;

pub use error::PcapError;
pub use link::{link_type, locate, parse_frame, to_ethernet, Converted, UdpFrame};
pub use read::{FileFormat, PcapReader, Record, RecordInfo, MAX_RECORD};
pub use write::{Container, PcapWriter, Resolution, WriteFormat};

pub use crate::raw::DropCause;
