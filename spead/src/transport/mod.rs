//! Transports: kernel UDP (recvmmsg/sendmmsg, multicast), TCP, memory and files.
//!
//! They only move bytes; all SPEAD logic lives in the sans-IO [`crate::recv`] and
//! [`crate::send`] cores, so later transports (verbs) reuse those unchanged.

mod byte_stream;
mod endpoint;
mod sender;
mod threaded;
mod udp;

pub use byte_stream::{ByteStreamReader, PacketWriter, StreamBreak};
pub use endpoint::{Endpoint, EndpointError};
pub use sender::{PacketSink, SendIoError, Sender};
pub use threaded::ThreadedReceiver;
pub use udp::{UdpReceiver, UdpRecvConfig, UdpSendConfig, UdpSender};
