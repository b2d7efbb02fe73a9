//! The fabric's connection manager toward hosts beyond its ports: the emulated CM's
//! messages to a remote host leave the sender's port as CM MADs, and CM MADs that reach
//! an emulated host's port go to its process as messages (see
//! [`crate::fabric::ports::cm_bridge`]); what the kernel's CM does around them (resends
//! on a timeout, answers to repeats, timewait) is [`crate::fabric::ports::cm_resend`]'s,
//! on the fabric's clock (the wall clock since it started). Each message carries its
//! sender's gap since its last frame ([`crate::rdmacm::core::messages::encode`], for
//! [`crate::rdmacm::core::request_hold`]); a MAD does not keep it, and a message from a
//! MAD has none, which asks for no hold (the remote sender's frames do not pass the
//! fabric's clock).

use std::net::Ipv4Addr;

use backend_sim::{Nanos, PortId};

use super::Server;
use crate::fabric::ports::cm_bridge::{FromWire, Host};
use crate::fabric::ports::cm_frame;
use crate::fabric::ports::cm_resend::{Action, Verdict};
use crate::rdmacm::core::messages::{self as m, Address, Endpoint};
use crate::rdmacm::core::network::answer_to;

impl Server {
    /// Takes `frame`, which the switch sends to host port `port`, if it is a CM MAD for
    /// the host: a repeat is answered or dropped as the kernel's CM would, and anything
    /// else goes to the host's process as its message. True if taken (the host's NIC,
    /// which has no QP1, does not get it).
    pub(super) fn cm_mad_in(&mut self, port: PortId, frame: &[u8]) -> bool {
        let Some(slot) = self.slots.get(port.0 as usize) else {
            return false;
        };
        let host = Host {
            ip: slot.ip,
            mac: slot.mac,
        };
        let now = self.now();
        match self.cm_resend.received(now, host.ip, frame) {
            None => return false,
            Some(Verdict::Pass) => {}
            Some(Verdict::Drop) => {
                self.cm_forget();
                return true;
            }
            Some(Verdict::Reply { to, mad }) => {
                // Over the IP version the repeat came by (a link-local connection's IPv6).
                let v6 = cm_frame::parse_hosts(frame).is_some_and(|(_, _, v6, _)| v6);
                let reply = self.cm_bridge.frame(host, to, &mad, v6);
                // A frame of the port's own host, well under its maximum.
                let _ = self.fabric.transmit(port, reply);
                return true;
            }
        }
        self.cm_forget();
        match self.cm_bridge.from_wire(host, frame) {
            None => false,
            Some(FromWire::Forward { from, body }) => {
                self.forward_cm(from, host.ip, &body);
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
        match self.cm_bridge.to_wire(host, to, body) {
            Ok(frame) => {
                let now = self.now();
                self.cm_resend.sent(now, &frame);
                self.cm_forget();
                self.fabric.transmit(port, frame).is_ok()
            }
            Err(_) => false,
        }
    }

    /// Answers remote host `from`'s message `body` to emulated host `to`, which no process
    /// took (the host's process has not joined yet, or has gone), as the kernel's CM of a
    /// host without the listener or id answers
    /// ([`crate::rdmacm::core::network::answer_to`]): a REQ with a REJ (invalid service
    /// id), a SIDR REQ with a SIDR REP (unsupported), a DREQ with a DREP. Without it the
    /// remote side's resends would be dropped as repeats until its retries are spent.
    pub(super) fn answer_remote(&mut self, from: Ipv4Addr, to: Ipv4Addr, body: &[u8]) {
        if !self.cm_bridge.is_remote(from) {
            return;
        }
        let Ok((_, (_, sender, msg))) = m::decode(body) else {
            return;
        };
        let Some(answer) = answer_to(&msg) else {
            return;
        };
        let mut out = Vec::new();
        m::encode(
            None,
            Address::Endpoint(sender),
            Endpoint { host: to, id: 0 },
            &answer,
            &mut out,
        );
        if self.cm_mad_out(to, from, &out) {
            self.stats.cm_forwarded += 1;
        }
    }

    /// Does what the CM's clock calls for by now: sends MADs again, tells the emulated
    /// ids whose retries are spent.
    pub(super) fn cm_timers(&mut self) {
        if self.ports.is_empty() || self.cm_resend.next_due().is_none_or(|t| t > self.now()) {
            return;
        }
        let now = self.now();
        for a in self.cm_resend.poll(now) {
            match a {
                Action::Resend { host, frame } => {
                    if let Some(s) = self.slots.iter().find(|s| s.ip == host) {
                        // A frame the port sent before.
                        let _ = self.fabric.transmit(s.port, frame);
                    }
                }
                Action::Tell { host, from, body } => {
                    self.forward_cm(from, host, &body);
                }
            }
        }
        self.cm_forget();
    }

    /// When [`Server::cm_timers`] has something to do next.
    pub(super) fn cm_due(&self) -> Option<Nanos> {
        if self.ports.is_empty() {
            return None;
        }
        self.cm_resend.next_due()
    }

    /// The bridge forgets the connections the resend table forgot.
    fn cm_forget(&mut self) {
        for (remote, id) in self.cm_resend.take_forgotten() {
            self.cm_bridge.forget(remote, id);
        }
    }

    /// The summary's clause on the CM MADs (empty without ports): `; CM MADs: 3 sent, 3
    /// taken in, 1 resent, 0 duplicates, 0 timed out, 0 stray; CM connections live: 1`.
    pub(super) fn cm_summary(&self) -> String {
        if self.ports.is_empty() {
            return String::new();
        }
        let (b, r) = (self.cm_bridge.stats, self.cm_resend.stats);
        format!(
            "; CM MADs: {} sent, {} taken in, {} resent, {} duplicates, {} timed out, {} \
             stray; CM connections live: {}",
            b.out,
            b.in_,
            r.resent,
            r.duplicates,
            r.timed_out,
            r.stray,
            self.cm_resend.live()
        )
    }
}
