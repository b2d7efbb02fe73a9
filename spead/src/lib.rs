//! # spead
//!
//! The SPEAD protocol (as spoken by spead2): a sans-IO codec, heap assembly and a
//! packetizer, and transports over UDP, TCP, memory and files.
//!
//! - [`wire`]: packets and item pointers, both flavours, every rejection rule.
//! - [`descriptor`]: item descriptors (embedded packets).
//! - [`recv`]: heap assembly from packets, and chunk streams ([`recv::chunk`]).
//! - [`send`]: the packetizer (byte-identical to spead2), rate limiting, interleaving.
//! - [`transport`]: UDP (recvmmsg/sendmmsg, multicast), TCP, memory and files.
//! - [`json`]: the JSON heap form used by `spead-recv --json` and `spead-send --json`.
//!
//! The receive and send cores are sans-IO: bytes in, heaps out, and heaps in, packets
//! written into caller buffers. Transports (here UDP, TCP, memory and files; verbs
//! later) only move bytes.
//!
//! ```
//! use spead::descriptor::Descriptor;
//! use spead::recv::{Stream, StreamConfig};
//! use spead::send::{Heap, Packetizer};
//! use spead::wire::Flavour;
//!
//! let mut heap = Heap::new(Flavour::SPEAD_64_48);
//! heap.add_descriptor(&Descriptor {
//!     id: 0x1000,
//!     name: b"samples".to_vec(),
//!     format: vec![(b'u', 8)],
//!     shape: vec![Some(4000)],
//!     ..Descriptor::default()
//! });
//! heap.add_item(0x1000, vec![7u8; 4000], false);
//! heap.add_item(0x1001, 42u16.to_be_bytes(), true); // fits: sent as an immediate
//!
//! let mut stream = Stream::new(StreamConfig::default());
//! let mut packetizer = Packetizer::new(&heap, 1, 1472).unwrap();
//! let mut buf = [0u8; 1472];
//! while let Some(len) = packetizer.next_packet(&mut buf).unwrap() {
//!     stream.add_datagram(&buf[..len]).unwrap();
//! }
//! let received = stream.pop_heap().unwrap();
//! assert!(received.complete);
//! let items = received.items();
//! assert_eq!(items[0].bytes(), &[7u8; 4000][..]);
//! assert_eq!(items[1].immediate, Some(42));
//! let descriptor = received.descriptors().remove(0).unwrap();
//! assert_eq!(descriptor.numpy_dtype().as_deref(), Some(">u1"));
//! ```

pub mod descriptor;
pub mod items;
pub mod json;
pub mod pcap;
pub mod recv;
pub mod send;
#[cfg(any(test, feature = "test-support"))]
pub mod test_support;
pub mod transport;
pub mod verbs;
pub mod wire;

#[cfg(test)]
mod proptests;
