//! The wire: Ethernet II, IPv4, IPv6, UDP and RoCEv2 headers, the Internet checksum and the
//! RoCEv2 ICRC, and one pcap/pcapng reader and writer. Shared by the simulator
//! (`backend-sim`), the SPEAD verbs transports and pcap sources (`spead`), and the
//! capture and replay tools.
//!
//! - [`checksum`]: the Internet checksum, in steps a caller runs only where needed.
//! - [`eth`], [`ipv4`], [`ipv6`], [`udp`], [`roce`]: header structs that parse and write
//!   themselves; [`roce`] also computes the ICRC (on `crc32fast`).
//! - [`frame`]: whole frames for the simulator: a parsed view, a NIC's integrity check
//!   (with a fixed-offset fast path), a UDP frame builder, IP_CSUM offload.
//! - [`raw`]: fixed-offset IPv4/UDP for the hot paths: header templates for RAW senders
//!   and a UDP locator whose every rejection is a counted cause.
//! - [`pcap`]: the capture reader and writer (on `pcap-file`) and link-layer decoding.
//!
//! The tests build and check frames with etherparse, an implementation independent of
//! this one; docs/architecture.md says why etherparse and not pnet, and why it is not used for
//! decoding captures.

pub mod checksum;
pub mod eth;
pub mod frame;
pub mod ipv4;
pub mod ipv6;
pub mod pcap;
pub mod raw;
pub mod roce;
pub mod udp;

/// Why bytes are not a frame this crate understands.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// A header runs past the end of the bytes.
    #[error("{layer} header truncated: need {need} bytes, have {have}")]
    Truncated {
        /// The layer being parsed.
        layer: &'static str,
        /// Bytes needed.
        need: usize,
        /// Bytes present.
        have: usize,
    },
    /// A header field is impossible.
    #[error("malformed frame: {0}")]
    Malformed(&'static str),
}
