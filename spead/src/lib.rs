//! # spead
//!
//! The SPEAD protocol (as spoken by spead2): a sans-IO codec, heap assembly and a
//! packetizer, and transports over UDP, TCP, memory and files.
//!
//! - [`wire`]: packets and item pointers, both flavours, every rejection rule.
//! - [`descriptor`]: item descriptors (embedded packets).
//! - [`recv`]: heap assembly from packets.
//! - [`send`]: the packetizer (byte-identical to spead2), rate limiting, interleaving.
//! - [`transport`]: UDP (recvmmsg/sendmmsg, multicast), TCP, memory and files.
//! - [`json`]: the JSON heap form used by `spead-recv --json` and `spead-send --json`.

pub mod descriptor;
pub mod items;
pub mod json;
pub mod recv;
pub mod send;
pub mod transport;
pub mod wire;

#[cfg(test)]
mod proptests;
