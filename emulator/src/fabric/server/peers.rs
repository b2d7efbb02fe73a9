//! What the fabric process does with its peers: accepting and refusing them, reading
//! their messages (hello, memberships, connection-manager messages, which it forwards
//! or returns), telling the others when one has gone, hanging up.

use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsFd, OwnedFd};
use std::time::Instant;

use backend_sim::frame::eth::Mac;
use backend_sim::PortId;

use super::{
    peer_gone, transmit_ring, uid_allowed, Conn, Group, Server, MAX_MEMBERSHIPS, READ_BATCH,
};
use crate::fabric::ring::{Consumer, Producer, Region, Way, DEFAULT_CAP};
use crate::fabric::sys::{self, Recv};
use crate::fabric::wire::{FromFabric, ToFabric, MAX_MSG};

impl Server {
    pub(super) fn accept(&mut self) -> io::Result<()> {
        while let Some(fd) = sys::accept(self.listener.as_fd())? {
            match sys::peer_uid(fd.as_fd()) {
                Ok(uid) if uid_allowed(uid, sys::my_uid()) => {}
                Ok(uid) => {
                    self.refuse(&fd, &format!("user {uid} may not join this fabric"));
                    continue;
                }
                Err(e) => {
                    self.refuse(&fd, &format!("cannot tell who you are: {e}"));
                    continue;
                }
            }
            let conn = Conn {
                fd,
                host: None,
                groups: Vec::new(),
                rings: None,
                backlog: std::collections::VecDeque::new(),
                backlog_bytes: 0,
                read: (0, Instant::now()),
            };
            match self.conns.iter().position(Option::is_none) {
                Some(i) => self.conns[i] = Some(conn),
                None => self.conns.push(Some(conn)),
            }
        }
        Ok(())
    }

    /// Tells a peer why (best effort) and counts the refusal; the caller drops the fd.
    pub(super) fn refuse(&mut self, fd: &OwnedFd, why: &str) {
        self.stats.refused += 1;
        FromFabric::Error(why).encode(&mut self.out);
        let _ = sys::send(fd.as_fd(), &self.out, true);
        sys::discard_unread(fd.as_fd());
    }

    /// Reads what connection `i` sent (a batch at most).
    pub(super) fn read(&mut self, i: usize) {
        for _ in 0..READ_BATCH {
            let Some(c) = self.conns[i].as_ref() else {
                return;
            };
            let got = sys::recv(c.fd.as_fd(), &mut self.buf);
            let n = match got {
                Ok(Recv::Msg(n)) => n,
                Ok(Recv::Empty) => return,
                Ok(Recv::Closed) | Err(_) => return self.close(i),
                Ok(Recv::Truncated(n)) => {
                    return self.hang_up(i, &format!("a message of {n} bytes (at most {MAX_MSG})"));
                }
            };
            if let Err(why) = self.handle(i, n) {
                return self.hang_up(i, &why);
            }
        }
    }

    /// Acts on the message of `n` bytes in the buffer from connection `i`.
    pub(super) fn handle(&mut self, i: usize, n: usize) -> Result<(), String> {
        let buf = std::mem::take(&mut self.buf);
        let r = ToFabric::decode(&buf[..n]).and_then(|m| self.act(i, m));
        self.buf = buf;
        r
    }

    pub(super) fn act(&mut self, i: usize, msg: ToFabric<'_>) -> Result<(), String> {
        let host = self.conns[i].as_ref().and_then(|c| c.host);
        let port = |s: usize| self.slots[s].port;
        match (host, msg) {
            (None, ToFabric::Hello { mac, ip, host }) => self.hello(i, mac, ip, host),
            (Some(_), ToFabric::Hello { .. }) => Err("a second hello".into()),
            (None, _) => Err("a message before the hello".into()),
            // The ring is drained every round; the doorbell only woke the fabric.
            (Some(_), ToFabric::Doorbell) => Ok(()),
            (Some(s), ToFabric::Join(g)) => self.member(i, port(s), Group::Ip(g), true),
            (Some(s), ToFabric::Leave(g)) => self.member(i, port(s), Group::Ip(g), false),
            (Some(s), ToFabric::JoinMac(m)) => self.member(i, port(s), Group::Mac(m), true),
            (Some(s), ToFabric::LeaveMac(m)) => self.member(i, port(s), Group::Mac(m), false),
            (Some(s), ToFabric::Cm { to, body }) => {
                self.cm(i, s, to, body);
                Ok(())
            }
            (Some(_), ToFabric::Switched(id)) => {
                self.switched(i, id);
                Ok(())
            }
            (Some(_), ToFabric::Unpeered(id)) => {
                self.unpeered(i, id);
                Ok(())
            }
        }
    }

    /// Takes a connection-manager message from connection `i` (host `s`) to the process
    /// of host `to`: after what the sender wrote into its ring before it, which goes on
    /// the wire first, and behind messages held before it (see `Server::held_cm`).
    pub(super) fn cm(&mut self, i: usize, s: usize, to: Ipv4Addr, body: &[u8]) {
        let port = self.slots[s].port;
        if let Some((rx, _)) = self.conns[i].as_mut().and_then(|c| c.rings.as_mut()) {
            // A corrupt ring is found, and hung up on, by the round's own read.
            let _ = transmit_ring(&mut self.fabric, &mut self.spare, port, rx, usize::MAX);
        }
        let from = self.slots[s].ip;
        let sent = self.fabric.stats().transmitted;
        if self.held_cm.is_empty() && self.arrived_before(sent) {
            self.forward_cm(from, to, body);
        } else {
            self.held_cm.push_back((from, to, body.to_vec(), sent));
        }
    }

    /// Forwards the held connection-manager messages whose frames have arrived, in order.
    pub(super) fn release_cm(&mut self) {
        while let Some(&(_, _, _, sent)) = self.held_cm.front() {
            if !self.arrived_before(sent) {
                return;
            }
            if let Some((from, to, body, _)) = self.held_cm.pop_front() {
                self.forward_cm(from, to, &body);
            }
        }
    }

    /// True when every frame transmitted before global index `sent` has reached its
    /// process's ring (or was dropped): none crosses the fabric or waits in a backlog.
    pub(super) fn arrived_before(&self, sent: u64) -> bool {
        let backlogged = self
            .conns
            .iter()
            .flatten()
            .any(|c| c.backlog.iter().any(|&(_, index)| index < sent));
        !backlogged && !self.fabric.frames_in_flight_before(sent)
    }

    /// The connection of the process that is host `ip`, if one is.
    pub(super) fn process_of(&self, ip: Ipv4Addr) -> Option<&Conn> {
        let slot = self.slots.iter().find(|d| d.ip == ip)?;
        self.conns[slot.conn?].as_ref()
    }

    /// Forwards a connection-manager message from host `from` to the process of host
    /// `to`, or returns it when there is none.
    pub(super) fn forward_cm(&mut self, from: Ipv4Addr, to: Ipv4Addr, body: &[u8]) {
        FromFabric::Cm { from, body }.encode(&mut self.out);
        let Some(d) = self.process_of(to) else {
            // A host beyond a port gets it as a CM MAD (see `remote_cm`).
            if self.cm_mad_out(from, to, body) {
                self.stats.cm_forwarded += 1;
                return;
            }
            return self.return_cm(from, to, body);
        };
        match sys::send(d.fd.as_fd(), &self.out, true) {
            Ok(()) => self.stats.cm_forwarded += 1,
            // The destination's process has just gone (the fabric has not read its
            // hang-up yet): as if there were none.
            Err(e) if peer_gone(&e) => self.return_cm(from, to, body),
            Err(_) => self.stats.cm_lost += 1,
        }
    }

    /// Returns a connection-manager message to the process of host `from`, its sender:
    /// no process is host `to`. It counts as returned also when the sender has gone too
    /// (nobody is left to tell): every message the fabric takes is counted once, whether
    /// the fabric handles it before or after its sender exits.
    pub(super) fn return_cm(&mut self, from: Ipv4Addr, to: Ipv4Addr, body: &[u8]) {
        FromFabric::CmReturned { to, body }.encode(&mut self.out);
        let Some(me) = self.process_of(from) else {
            // A remote host's message: its kernel gets the answer of a CM without the id
            // or listener (`remote_cm`).
            self.answer_remote(from, to, body);
            self.stats.cm_returned += 1;
            return;
        };
        match sys::send(me.fd.as_fd(), &self.out, true) {
            Ok(()) => self.stats.cm_returned += 1,
            // The sender has gone too (its hang-up not read yet): nobody is left to tell.
            Err(e) if peer_gone(&e) => self.stats.cm_returned += 1,
            Err(_) => self.stats.cm_lost += 1,
        }
    }

    pub(super) fn hello(
        &mut self,
        i: usize,
        mac: Mac,
        ip: Ipv4Addr,
        host: &str,
    ) -> Result<(), String> {
        let Some(s) = self.slots.iter().position(|s| s.name == host) else {
            let names: Vec<&str> = self.slots.iter().map(|s| s.name.as_str()).collect();
            return Err(format!(
                "no host {host} in the fabric's topology (it has {})",
                names.join(", ")
            ));
        };
        let slot = &self.slots[s];
        if slot.ip != ip || slot.mac != mac {
            return Err(format!(
                "host {host} is {} ({}) in the fabric's topology, not {ip} ({mac}): give \
                 the program the fabric's topology",
                slot.ip, slot.mac
            ));
        }
        if let Some(old) = slot.conn {
            // The process that was this host may have gone without our noticing yet.
            let gone = self.conns[old]
                .as_ref()
                .is_none_or(|c| sys::hung_up(c.fd.as_fd()));
            if !gone {
                return Err(format!("host {host} is already joined by another process"));
            }
            self.close(old);
        }
        let (shared, region) =
            Region::create(DEFAULT_CAP).map_err(|e| format!("cannot make your rings: {e}"))?;
        let ring = u32::try_from(region.cap()).map_err(|_| "rings too large")?;
        FromFabric::Welcome { ring }.encode(&mut self.out);
        let c = self.conns[i].as_mut().ok_or("gone")?;
        sys::send_with_fd(c.fd.as_fd(), &self.out, shared.as_fd())
            .map_err(|e| format!("the welcome: {e}"))?;
        let region = std::sync::Arc::new(region);
        c.rings = Some((
            Consumer::new(region.clone(), Way::ToFabric),
            Producer::new(region, Way::FromFabric),
        ));
        c.host = Some(s);
        self.slots[s].conn = Some(i);
        self.stats.joined += 1;
        self.pair_up(i);
        Ok(())
    }

    /// One membership more (`join`) or fewer of connection `i`'s port.
    pub(super) fn member(
        &mut self,
        i: usize,
        port: PortId,
        g: Group,
        join: bool,
    ) -> Result<(), String> {
        let Some(c) = self.conns[i].as_mut() else {
            return Ok(());
        };
        let at = c.groups.iter().position(|(x, _)| *x == g);
        if join {
            match at {
                Some(k) => c.groups[k].1 += 1,
                None if c.groups.len() >= MAX_MEMBERSHIPS => {
                    return Err(format!("more than {MAX_MEMBERSHIPS} multicast groups"));
                }
                None => c.groups.push((g, 1)),
            }
            let _ = match g {
                Group::Ip(ip) => self.fabric.join_group(port, ip),
                Group::Mac(m) => self.fabric.join_mac_group(port, m),
            };
        } else {
            let Some(k) = at else {
                return Err(format!("left a group it had not joined ({g:?})"));
            };
            c.groups[k].1 -= 1;
            if c.groups[k].1 == 0 {
                c.groups.remove(k);
            }
            let _ = match g {
                Group::Ip(ip) => self.fabric.leave_group(port, ip),
                Group::Mac(m) => self.fabric.leave_mac_group(port, m),
            };
        }
        Ok(())
    }

    /// Tells every process of a host whose process has gone, once the frames sent before
    /// it went have all been delivered into rings (none is crossing the fabric or
    /// waiting in a backlog).
    pub(super) fn tell_gone(&mut self) {
        let mut k = 0;
        while k < self.gone.len() {
            let (ip, sent) = self.gone[k];
            // After the frames, and after the messages it sent before it went.
            let held = self.held_cm.iter().any(|&(from, ..)| from == ip);
            if held || !self.arrived_before(sent) {
                k += 1;
                continue;
            }
            self.gone.remove(k);
            FromFabric::Gone(ip).encode(&mut self.out);
            // Not to a new process of that host, joined since.
            let slots = &self.slots;
            let others = self.conns.iter().flatten();
            for other in others.filter(|o| o.host.is_some_and(|h| slots[h].ip != ip)) {
                match sys::send(other.fd.as_fd(), &self.out, true) {
                    // That process has gone too: nobody is left to tell.
                    Err(e) if !peer_gone(&e) => self.stats.cm_lost += 1,
                    _ => {}
                }
            }
        }
    }

    /// Tells connection `i` why, then closes it.
    pub(super) fn hang_up(&mut self, i: usize, why: &str) {
        if let Some(c) = self.conns[i].as_ref() {
            if c.host.is_some() {
                self.stats.bad_messages += 1;
            } else {
                self.stats.refused += 1;
            }
            FromFabric::Error(why).encode(&mut self.out);
            let _ = sys::send(c.fd.as_fd(), &self.out, true);
            sys::discard_unread(c.fd.as_fd());
        }
        self.close(i);
    }

    /// Forgets connection `i`: its host is free again and its memberships are undone.
    pub(super) fn close(&mut self, i: usize) {
        let Some(mut c) = self.conns[i].take() else {
            return;
        };
        let Some(s) = c.host else {
            return;
        };
        // Frames still waiting for it reach nobody now.
        self.stats.no_process += c.backlog.len() as u64;
        self.pairs_gone(i);
        self.slots[s].conn = None;
        let port = self.slots[s].port;
        if let Some((rx, _)) = c.rings.as_mut() {
            // What the process sent before it went is on the wire: it goes on (a ring
            // found corrupt just stops here).
            let _ = transmit_ring(&mut self.fabric, &mut self.spare, port, rx, usize::MAX);
        }
        // The others' connection managers play its kernel's part for their peers there,
        // once what it sent has arrived (see `Server::gone`).
        let sent = self.fabric.stats().transmitted;
        self.gone.push((self.slots[s].ip, sent));
        self.release_cm();
        self.tell_gone();
        for (g, n) in c.groups {
            for _ in 0..n {
                let _ = match g {
                    Group::Ip(ip) => self.fabric.leave_group(port, ip),
                    Group::Mac(m) => self.fabric.leave_mac_group(port, m),
                };
            }
        }
    }
}
