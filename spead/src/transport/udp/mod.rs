//! UDP over kernel sockets: unicast and IPv4 multicast, batched with
//! `recvmmsg`/`sendmmsg` through libc (std and socket2 have neither); sockets, their
//! options and addresses through socket2.
//!
//! These types hold raw pointers for the batch calls, so they are not `Send`: create
//! them on the thread that uses them.
//!
//! The receiver sets SO_RXQ_OVFL, so the kernel attaches to each datagram the socket's
//! drop counter as it stood when the datagram was queued (datagrams the kernel dropped
//! because the receive buffer was full); [`UdpReceiver::kernel_drops`] is the count as
//! of the last datagram received.

mod recv;
mod send;
mod socket;

pub use recv::{UdpReceiver, UdpRecvConfig};
pub use send::{UdpSendConfig, UdpSender};

#[cfg(test)]
mod tests;
