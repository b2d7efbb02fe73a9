//! What the kernel's `ib_cm` (drivers/infiniband/core/cm.c) does around the CM MADs of a
//! connection, for the emulated hosts whose connection manager the fabric bridges
//! ([`super::cm_bridge`]): a state machine per connection, driven by the MADs the bridge
//! sends for an emulated host ([`Resend::sent`]), the MADs that reach an emulated host's
//! port ([`Resend::received`]) and the clock ([`Resend::poll`]), with no I/O of its own
//! (so the tests drive it with a virtual clock).
//!
//! - A REQ, REP or DREQ is kept and sent again when its answer has not come within its
//!   timeout, at most `max_cm_retries` times (the MAD layer's retries of `cm_alloc_msg`):
//!   the REQ's timeout is twice the path's packet life time plus the remote CM response
//!   timeout (`ib_send_cm_req`), a REP's the local CM response timeout of the REQ it
//!   answers (`cm_req_handler`), a DREQ's that of the connection's REQ or REP
//!   (`cm_send_dreq_locked`), each `cm_convert_to_ms`; an MRA makes the wait its service
//!   timeout plus the path's ACK timeout (`cm_mra_handler`).
//! - When the retries are spent (`cm_process_send_error`) the emulated id is told with a
//!   REJ of reason [`SEND_TIMEOUT`], which only this module sends: a REQ or REP
//!   unanswered is `IB_CM_REQ_ERROR` / `IB_CM_REP_ERROR`, which cma.c reports as
//!   `RDMA_CM_EVENT_UNREACHABLE` with status -ETIMEDOUT, and a DREQ unanswered
//!   `IB_CM_DREQ_ERROR`, DISCONNECTED with status -ETIMEDOUT; the emulated CM turns the
//!   REJ into that event.
//! - Duplicates are answered as cm.c answers them: a REQ repeated while its REP is not
//!   sent yet, or after, is dropped (`cm_dup_req_handler` answers only in MRA_REQ_SENT,
//!   which the bridge never enters; a connection in timewait is out of the remote id
//!   table, `cm_enter_timewait`, so a REQ then is a new one); a REP repeated after the
//!   RTU gets the RTU again, before it nothing (`cm_dup_rep_handler`); a DREQ in
//!   timewait, or for a connection not known, gets a DREP (`cm_dreq_handler`,
//!   `cm_issue_drep`); a repeated RTU, DREP or MRA is dropped.
//!   A MAD that matches no connection (a REP, RTU, DREP, REJ or MRA for an id `cm.c`
//!   would not find) is dropped too.
//! - A connection is forgotten when it ends: at once when it goes back to idle (a REJ
//!   of a request, a REQ or REP timed out), after timewait (`cm_enter_timewait`: the
//!   path's ACK timeout, `cm_convert_to_ms`) when a DREQ/DREP or a REJ after the REP
//!   closed it.
//!
//! - SIDR (a SIDR REQ resent on its timeout, repeats dropped) is [`cm_sidr::Sidr`]'s.
//!
//! The clock is the fabric's: the wall clock since the fabric started (the fabric runs in
//! real time), in nanoseconds.

use std::net::Ipv4Addr;

use backend_sim::Nanos;

use super::cm_bridge::WIRE_REJ_TIMEOUT as REJ_TIMEOUT;
use super::cm_frame;
use super::cm_mad::{Mad, Msg, Rej, CLASS_CM};
use super::cm_sidr::{self, Due, Seen, Sidr};
use crate::rdmacm::core::messages::{self as m, Address, Endpoint, Message, SEND_TIMEOUT};
use crate::rdmacm::core::route::PACKET_LIFE_TIME;

/// `IB_CM_REJ_STALE_CONN`.
const REJ_STALE_CONN: u16 = 10;
/// `CM_MSG_RESPONSE_REQ`, `CM_MSG_RESPONSE_REP`.
const RESPONSE_REQ: u8 = 0;
const RESPONSE_REP: u8 = 1;

/// `cm_convert_to_ms` (4.096 µs x 2^`iba_time`, approximated) in nanoseconds.
#[must_use]
pub fn convert(iba_time: u8) -> Nanos {
    (1u64 << iba_time.saturating_sub(8).min(31)) * 1_000_000
}

/// `cm_ack_timeout`: 4.096 µs x 2^t = 4.096 µs x 2^`ca_ack_delay` + 2 x 4.096 µs x
/// 2^`packet_life_time`, rounded as cm.c rounds.
#[must_use]
pub fn ack_timeout(ca_ack_delay: u8, packet_life_time: u8) -> u8 {
    let t = packet_life_time.saturating_add(1);
    let t = if t >= ca_ack_delay {
        t + u8::from(ca_ack_delay >= t - 1)
    } else {
        ca_ack_delay + u8::from(t >= ca_ack_delay.saturating_sub(1))
    };
    t.min(31)
}

/// A connection's state (`enum ib_cm_state`, the ones the bridge reaches).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// The emulated host sent a REQ.
    ReqSent,
    /// The remote side MRAed it.
    MraReqRcvd,
    /// A remote REQ reached the emulated host.
    ReqRcvd,
    /// The emulated host answered it with a REP.
    RepSent,
    /// The remote side MRAed the REP.
    MraRepRcvd,
    /// The remote REP reached the emulated host.
    RepRcvd,
    /// Connected.
    Established,
    /// The emulated host sent a DREQ.
    DreqSent,
    /// A remote DREQ reached it.
    DreqRcvd,
    /// Over; repeats are still answered until the timewait ends.
    Timewait,
}

/// A MAD waiting for its answer.
#[derive(Debug, Clone)]
struct Pending {
    frame: Vec<u8>,
    /// When it goes again.
    due: Nanos,
    /// How long each wait is.
    wait: Nanos,
    /// Sends left.
    left: u8,
}

#[derive(Debug, Clone)]
struct Conn {
    /// The emulated host.
    host: Ipv4Addr,
    /// Its communication id (not known until it answers a remote REQ).
    local: Option<u32>,
    /// The remote host.
    remote: Ipv4Addr,
    /// Its communication id (not known until its REP when the emulated host requested).
    remote_id: Option<u32>,
    state: State,
    /// cm.c's `timeout_ms`, in nanoseconds.
    timeout: Nanos,
    /// `max_cm_retries`.
    retries: u8,
    /// The path's ACK timeout (`av.timeout`).
    av_timeout: u8,
    /// The transaction id of the REQ.
    tid: u64,
    pending: Option<Pending>,
    /// When the timewait ends.
    timewait_end: Nanos,
}

/// What to do with a MAD that reached an emulated host's port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Translate it for the host's process ([`super::cm_bridge::Bridge::from_wire`]).
    Pass,
    /// Drop it (a duplicate, or a MAD for no connection).
    Drop,
    /// Answer it with `mad`, sent from the host's port to `to`.
    Reply {
        /// The remote host.
        to: Ipv4Addr,
        /// The answer.
        mad: Mad,
    },
}

/// What the clock calls for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Send `frame` again from emulated host `host`'s port.
    Resend {
        /// The emulated host.
        host: Ipv4Addr,
        /// The frame, as sent before.
        frame: Vec<u8>,
    },
    /// The retries are spent: emulated host `host`'s process gets `body` ([`m::encode`])
    /// from remote host `from`.
    Tell {
        /// The emulated host.
        host: Ipv4Addr,
        /// The remote host.
        from: Ipv4Addr,
        /// The message.
        body: Vec<u8>,
    },
}

/// Counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResendStats {
    /// MADs sent again after their timeout.
    pub resent: u64,
    /// Duplicates received (answered or dropped).
    pub duplicates: u64,
    /// Connections whose retries were spent.
    pub timed_out: u64,
    /// MADs received for no connection and dropped.
    pub stray: u64,
}

/// The connections of the emulated hosts with hosts beyond the ports.
#[derive(Debug, Default)]
pub struct Resend {
    conns: Vec<Conn>,
    /// (remote host, its communication id) of the connections forgotten since
    /// [`Resend::take_forgotten`].
    forgotten: Vec<(Ipv4Addr, u32)>,
    /// SIDR ([`cm_sidr`]).
    sidr: Sidr,
    /// Counters.
    pub stats: ResendStats,
}

impl Resend {
    /// Connections known (an entry each until it ends).
    #[must_use]
    pub fn live(&self) -> usize {
        self.conns.len() + self.sidr.live()
    }

    /// The state of emulated host `host`'s connection of id `local`.
    #[must_use]
    pub fn state(&self, host: Ipv4Addr, local: u32) -> Option<State> {
        self.by_local(host, local).map(|i| self.conns[i].state)
    }

    /// The (remote host, remote communication id) of the connections forgotten since the
    /// last call (the bridge forgets them too).
    pub fn take_forgotten(&mut self) -> Vec<(Ipv4Addr, u32)> {
        std::mem::take(&mut self.forgotten)
    }

    /// When [`Resend::poll`] has something to do next.
    #[must_use]
    pub fn next_due(&self) -> Option<Nanos> {
        self.conns
            .iter()
            .filter_map(|c| match (&c.pending, c.state) {
                (Some(p), _) => Some(p.due),
                (None, State::Timewait) => Some(c.timewait_end),
                _ => None,
            })
            .chain(self.sidr.next_due())
            .min()
    }

    fn by_local(&self, host: Ipv4Addr, local: u32) -> Option<usize> {
        self.conns
            .iter()
            .position(|c| c.host == host && c.local == Some(local))
    }

    fn by_remote(&self, remote: Ipv4Addr, id: u32) -> Option<usize> {
        self.conns
            .iter()
            .position(|c| c.remote == remote && c.remote_id == Some(id))
    }

    /// The connection of `host`'s id `local` with `remote`'s id `remote_id`.
    fn by_both(&self, host: Ipv4Addr, local: u32, remote: Ipv4Addr, id: u32) -> Option<usize> {
        self.by_local(host, local)
            .filter(|&i| self.conns[i].remote == remote && self.conns[i].remote_id == Some(id))
    }

    fn forget(&mut self, i: usize) {
        let c = self.conns.swap_remove(i);
        if let Some(id) = c.remote_id {
            self.forgotten.push((c.remote, id));
        }
    }

    fn timewait(&mut self, i: usize, now: Nanos) {
        let c = &mut self.conns[i];
        c.state = State::Timewait;
        c.pending = None;
        c.timewait_end = now + convert(c.av_timeout);
    }

    fn arm(&mut self, i: usize, now: Nanos, frame: &[u8]) {
        let c = &mut self.conns[i];
        c.pending = Some(Pending {
            frame: frame.to_vec(),
            due: now + c.timeout,
            wait: c.timeout,
            left: c.retries,
        });
    }

    /// The bridge sent `frame` (a CM MAD of an emulated host) at `now`.
    pub fn sent(&mut self, now: Nanos, frame: &[u8]) {
        let Some((host, remote, _, payload)) = cm_frame::parse_hosts(frame) else {
            return;
        };
        let Ok(mad) = Mad::decode(payload) else {
            return;
        };
        match mad.msg {
            Msg::Req(r) => {
                if let Some(i) = self.by_local(host, r.local_comm_id) {
                    self.conns.swap_remove(i);
                }
                self.conns.push(Conn {
                    host,
                    local: Some(r.local_comm_id),
                    remote,
                    remote_id: None,
                    state: State::ReqSent,
                    timeout: 2 * convert(PACKET_LIFE_TIME) + convert(r.remote_cm_response_timeout),
                    retries: r.max_cm_retries,
                    av_timeout: PACKET_LIFE_TIME + 1,
                    tid: mad.tid,
                    pending: None,
                    timewait_end: 0,
                });
                let i = self.conns.len() - 1;
                self.arm(i, now, frame);
            }
            Msg::Rep(r) => {
                if let Some(i) = self.by_remote(remote, r.remote_comm_id) {
                    let c = &mut self.conns[i];
                    c.local = Some(r.local_comm_id);
                    c.state = State::RepSent;
                    self.arm(i, now, frame);
                }
            }
            Msg::Rtu(l, r) => {
                if let Some(i) = self.by_both(host, l, remote, r) {
                    self.conns[i].state = State::Established;
                    self.conns[i].pending = None;
                }
            }
            Msg::Dreq(l, r, _) => {
                if let Some(i) = self.by_both(host, l, remote, r) {
                    self.conns[i].state = State::DreqSent;
                    self.arm(i, now, frame);
                }
            }
            Msg::Drep(l, r) => {
                if let Some(i) = self.by_both(host, l, remote, r) {
                    self.timewait(i, now);
                }
            }
            Msg::Rej(r) => {
                let i = self
                    .by_remote(remote, r.remote_comm_id)
                    .or_else(|| self.by_local(host, r.local_comm_id));
                if let Some(i) = i {
                    // cm_send_rej_locked: after the REP, timewait; before, idle.
                    if matches!(self.conns[i].state, State::RepSent | State::MraRepRcvd) {
                        self.timewait(i, now);
                    } else {
                        self.forget(i);
                    }
                }
            }
            Msg::Mra(..) => {}
            Msg::SidrReq(r) => self.sidr.sent_req(now, host, remote, &r, frame),
            Msg::SidrRep(r) => self.sidr.sent_rep(remote, r.request_id),
        }
    }

    /// What to do with `frame`, which reached emulated host `host`'s port at `now`:
    /// `None` if it is no CM MAD for the host.
    pub fn received(&mut self, now: Nanos, host: Ipv4Addr, frame: &[u8]) -> Option<Verdict> {
        let (remote, dst, _, payload) = cm_frame::parse_hosts(frame)?;
        if dst != host || payload.get(1) != Some(&CLASS_CM) {
            return None;
        }
        let Ok(mad) = Mad::decode(payload) else {
            // The bridge counts it and drops it.
            return Some(Verdict::Pass);
        };
        Some(self.take(now, host, remote, mad))
    }

    fn dup(&mut self) -> Verdict {
        self.stats.duplicates += 1;
        Verdict::Drop
    }

    fn seen(&mut self, seen: Seen) -> Verdict {
        match seen {
            Seen::New => Verdict::Pass,
            Seen::Duplicate => self.dup(),
            Seen::Stray => self.stray(),
        }
    }

    fn stray(&mut self) -> Verdict {
        self.stats.stray += 1;
        Verdict::Drop
    }

    fn take(&mut self, now: Nanos, host: Ipv4Addr, remote: Ipv4Addr, mad: Mad) -> Verdict {
        match mad.msg {
            Msg::Req(r) => {
                if let Some(i) = self.by_remote(remote, r.local_comm_id) {
                    if self.conns[i].state != State::Timewait {
                        return self.dup();
                    }
                    // cm_enter_timewait took the connection out of the remote id
                    // table: the REQ is a new one.
                    self.forget(i);
                }
                // cm_format_paths_from_req: the packet life time is the REQ's local
                // ACK timeout less one; the ACK timeout one more.
                let t = r.local_ack_timeout;
                self.conns.push(Conn {
                    host,
                    local: None,
                    remote,
                    remote_id: Some(r.local_comm_id),
                    state: State::ReqRcvd,
                    timeout: convert(r.local_cm_response_timeout),
                    retries: r.max_cm_retries,
                    av_timeout: t - u8::from(t > 0) + 1,
                    tid: mad.tid,
                    pending: None,
                    timewait_end: 0,
                });
                Verdict::Pass
            }
            Msg::Rep(r) => {
                let Some(i) = self.by_local(host, r.remote_comm_id) else {
                    return self.stray();
                };
                let c = &mut self.conns[i];
                match (c.state, c.remote_id) {
                    (State::ReqSent | State::MraReqRcvd, None) => {
                        c.remote_id = Some(r.local_comm_id);
                        c.state = State::RepRcvd;
                        c.pending = None;
                        // cm_rep_handler: the ACK timeout with the REP's target ACK delay.
                        c.av_timeout = ack_timeout(r.target_ack_delay, c.av_timeout - 1);
                        Verdict::Pass
                    }
                    (State::Established, Some(id)) if id == r.local_comm_id => {
                        let tid = c.tid;
                        self.stats.duplicates += 1;
                        Verdict::Reply {
                            to: remote,
                            mad: Mad {
                                tid,
                                msg: Msg::Rtu(r.remote_comm_id, id),
                            },
                        }
                    }
                    (_, Some(id)) if id == r.local_comm_id => self.dup(),
                    _ => self.stray(),
                }
            }
            Msg::Rtu(l, r) => {
                let Some(i) = self.by_both(host, r, remote, l) else {
                    return self.stray();
                };
                let c = &mut self.conns[i];
                if matches!(c.state, State::RepSent | State::MraRepRcvd) {
                    c.state = State::Established;
                    c.pending = None;
                    Verdict::Pass
                } else {
                    self.dup()
                }
            }
            Msg::Dreq(l, r, _) => {
                let Some(i) = self.by_both(host, r, remote, l) else {
                    // cm_issue_drep: a DREQ for no connection gets its DREP.
                    self.stats.duplicates += 1;
                    return Verdict::Reply {
                        to: remote,
                        mad: Mad {
                            tid: mad.tid,
                            msg: Msg::Drep(r, l),
                        },
                    };
                };
                let c = &mut self.conns[i];
                match c.state {
                    State::RepSent | State::MraRepRcvd | State::Established | State::DreqSent => {
                        c.state = State::DreqRcvd;
                        c.pending = None;
                        Verdict::Pass
                    }
                    State::Timewait => {
                        self.stats.duplicates += 1;
                        Verdict::Reply {
                            to: remote,
                            mad: Mad {
                                tid: mad.tid,
                                msg: Msg::Drep(r, l),
                            },
                        }
                    }
                    State::DreqRcvd => self.dup(),
                    _ => self.stray(),
                }
            }
            Msg::Drep(l, r) => {
                let Some(i) = self.by_both(host, r, remote, l) else {
                    return self.stray();
                };
                if matches!(self.conns[i].state, State::DreqSent | State::DreqRcvd) {
                    self.timewait(i, now);
                    Verdict::Pass
                } else {
                    self.dup()
                }
            }
            Msg::Rej(r) => self.rejected(now, host, remote, &r),
            Msg::SidrReq(r) => {
                let seen = self.sidr.received_req(host, remote, &r);
                self.seen(seen)
            }
            Msg::SidrRep(r) => {
                let seen = self.sidr.received_rep(host, remote, &r);
                self.seen(seen)
            }
            Msg::Mra(l, r, what, service_timeout) => {
                // cm_acquire_mraed_id: an MRA of a REQ names no remote id yet.
                let i = match what {
                    RESPONSE_REQ => self
                        .by_local(host, r)
                        .filter(|&i| self.conns[i].remote_id.is_none()),
                    RESPONSE_REP => self.by_both(host, r, remote, l),
                    _ => None,
                };
                let Some(i) = i else {
                    return self.stray();
                };
                let c = &mut self.conns[i];
                let next = match (c.state, what) {
                    (State::ReqSent, RESPONSE_REQ) => State::MraReqRcvd,
                    (State::RepSent, RESPONSE_REP) => State::MraRepRcvd,
                    (State::MraReqRcvd | State::MraRepRcvd, _) => return self.dup(),
                    _ => return self.stray(),
                };
                c.state = next;
                let wait = convert(service_timeout) + convert(c.av_timeout);
                if let Some(p) = c.pending.as_mut() {
                    p.wait = wait;
                    p.due = now + wait;
                }
                // The bridge has nothing to tell the emulated CM (it waits without a
                // timeout of its own).
                Verdict::Drop
            }
        }
    }

    /// cm_acquire_rejected_id and cm_rej_handler.
    fn rejected(&mut self, now: Nanos, host: Ipv4Addr, remote: Ipv4Addr, r: &Rej) -> Verdict {
        let i = if r.reason == REJ_TIMEOUT {
            // The requester gave up: it names our id only if it had our REP or MRA.
            self.by_remote(remote, r.local_comm_id)
        } else if r.message_rejected == RESPONSE_REQ {
            self.by_local(host, r.remote_comm_id)
                .filter(|&i| self.conns[i].remote_id.is_none())
        } else {
            self.by_both(host, r.remote_comm_id, remote, r.local_comm_id)
        };
        let Some(i) = i else {
            return self.stray();
        };
        match self.conns[i].state {
            State::ReqSent
            | State::MraReqRcvd
            | State::RepSent
            | State::MraRepRcvd
            | State::ReqRcvd => {
                if r.reason == REJ_STALE_CONN {
                    self.timewait(i, now);
                } else {
                    self.forget(i);
                }
            }
            State::DreqSent | State::RepRcvd | State::Established => self.timewait(i, now),
            State::DreqRcvd | State::Timewait => return self.dup(),
        }
        Verdict::Pass
    }

    /// What is due by `now`: MADs to send again, ids to tell that their retries are
    /// spent; timewaits that ended are forgotten.
    pub fn poll(&mut self, now: Nanos) -> Vec<Action> {
        let mut out = Vec::new();
        for due in self.sidr.poll(now) {
            out.push(match due {
                Due::Again { host, frame } => {
                    self.stats.resent += 1;
                    Action::Resend { host, frame }
                }
                Due::GaveUp {
                    host,
                    request_id,
                    remote,
                } => {
                    self.stats.timed_out += 1;
                    tell(host, request_id, remote, 0, &cm_sidr::timed_out())
                }
            });
        }
        let mut i = 0;
        while i < self.conns.len() {
            let c = &self.conns[i];
            let due = match &c.pending {
                Some(p) => p.due,
                None if c.state == State::Timewait => c.timewait_end,
                None => Nanos::MAX,
            };
            if due > now {
                i += 1;
                continue;
            }
            if c.pending.is_none() {
                // The timewait is over.
                self.forget(i);
                continue;
            }
            if let Some(frame) = self.again(i, now) {
                self.stats.resent += 1;
                out.push(Action::Resend {
                    host: self.conns[i].host,
                    frame,
                });
                i += 1;
                continue;
            }
            self.stats.timed_out += 1;
            out.push(self.give_up(i));
            if self.conns[i].state == State::DreqSent {
                self.timewait(i, now);
                i += 1;
            } else {
                self.forget(i);
            }
        }
        out
    }

    /// The pending MAD of connection `i` to send again at `now`, if it has sends left.
    fn again(&mut self, i: usize, now: Nanos) -> Option<Vec<u8>> {
        let p = self.conns[i].pending.as_mut()?;
        if p.left == 0 {
            return None;
        }
        p.left -= 1;
        p.due = now + p.wait;
        Some(p.frame.clone())
    }

    /// What connection `i`'s emulated id is told when its retries are spent
    /// (`cm_process_send_error`).
    fn give_up(&self, i: usize) -> Action {
        let c = &self.conns[i];
        let msg = Message::Rej {
            reason: SEND_TIMEOUT,
            private_data: Vec::new(),
        };
        tell(
            c.host,
            c.local.unwrap_or(0),
            c.remote,
            c.remote_id.unwrap_or(0),
            &msg,
        )
    }
}

/// Emulated host `host`'s id `local` is told `msg` from remote host `remote`'s id
/// `remote_id`.
fn tell(host: Ipv4Addr, local: u32, remote: Ipv4Addr, remote_id: u32, msg: &Message) -> Action {
    let mut body = Vec::new();
    m::encode(
        None,
        Address::Endpoint(Endpoint { host, id: local }),
        Endpoint {
            host: remote,
            id: remote_id,
        },
        msg,
        &mut body,
    );
    Action::Tell {
        host,
        from: remote,
        body,
    }
}

#[cfg(test)]
mod tests;
