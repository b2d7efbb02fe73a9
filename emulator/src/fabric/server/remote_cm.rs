//! The fabric's connection manager toward hosts beyond its ports: the emulated CM's
//! messages to a remote host leave the sender's port as CM MADs, and CM MADs that reach
//! an emulated host's port go to its process as messages (see
//! [`crate::fabric::ports::cm_bridge`]). Between processes each message travels in an
//! envelope ([`crate::rdmacm::core::envelope`]: the sender's gap since its last frame);
//! the envelope is opened before a message becomes a MAD, and a message from a MAD goes
//! in one that asks for no hold (the remote sender's frames do not pass the fabric's
//! clock).

use std::net::Ipv4Addr;

use backend_sim::PortId;

use super::Server;
use crate::fabric::ports::cm_bridge::{FromWire, Host};
use crate::rdmacm::core::envelope;

impl Server {
    /// Takes `frame`, which the switch sends to host port `port`, if it is a CM MAD for
    /// the host: its message goes to the host's process, a repeat gets its answer again.
    /// True if taken (the host's NIC, which has no QP1, does not get it).
    pub(super) fn cm_mad_in(&mut self, port: PortId, frame: &[u8]) -> bool {
        let Some(slot) = self.slots.get(port.0 as usize) else {
            return false;
        };
        let host = Host {
            ip: slot.ip,
            mac: slot.mac,
        };
        match self.cm_bridge.from_wire(host, frame) {
            None => false,
            Some(FromWire::Forward { from, body }) => {
                self.forward_cm(from, host.ip, &envelope::seal(None, &body));
                true
            }
            Some(FromWire::Again(reply)) => {
                // A frame of the port's own host, well under its maximum.
                let _ = self.fabric.transmit(port, reply);
                true
            }
            Some(FromWire::Dropped) => true,
        }
    }

    /// Sends emulated host `from`'s message `body` to remote host `to` as a CM MAD from
    /// its port. False if `to` is no remote host or the message has no MAD (the caller
    /// returns it to its sender).
    pub(super) fn cm_mad_out(&mut self, from: Ipv4Addr, to: Ipv4Addr, body: &[u8]) -> bool {
        if self.ports.is_empty() || !self.cm_bridge.is_remote(to) {
            return false;
        }
        let Some(slot) = self.slots.iter().find(|s| s.ip == from) else {
            return false;
        };
        let (port, host) = (
            slot.port,
            Host {
                ip: slot.ip,
                mac: slot.mac,
            },
        );
        let Ok((_, message)) = envelope::open(body) else {
            return false;
        };
        match self.cm_bridge.to_wire(host, to, message) {
            Ok(frame) => self.fabric.transmit(port, frame).is_ok(),
            Err(_) => false,
        }
    }
}
