//! # spead
//!
//! The SPEAD protocol (as spoken by spead2): a sans-IO codec, heap assembly and a
//! packetizer, and transports over UDP, TCP, memory and files.
