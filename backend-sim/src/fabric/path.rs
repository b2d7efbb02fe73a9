//! The frame path and the event loop: a frame from a port's transmit, through its link,
//! the switch and the egress link, to the port it arrives at (or the drop that ends it);
//! timers and replayed frames on the same queue.

use super::corruption::{self, PayloadCorruption, UndetectedCorruption};
use super::error::FabricError;
use super::events::EventKind;
use super::link::{FlipAt, Link, Verdict};
use super::outbox::ExternalMsg;
use super::tap::Seen;
use super::topology::{dst_mac, ipv4_dst};
use super::{Fabric, Output};
use crate::clock::Nanos;
use crate::fault::DropReason;
use crate::frame::eth::Mac;
use crate::ids::PortId;

impl Fabric {
    /// Sets a timer: [`Fabric::step`] returns [`Output::Timer`] with `token` at virtual time
    /// `at` (or now, if `at` has passed). Timers cannot be cancelled; the layer above
    /// ignores tokens it no longer cares about.
    pub fn schedule_timer(&mut self, at: Nanos, token: u64) {
        let at = at.max(self.clock.now());
        self.queue.push(at, EventKind::Timer { token });
    }

    /// Hands a frame to the fabric at `from` now. Returns the frame's global packet index
    /// (what [`FaultPlan::drop_packets`](crate::fault::FaultPlan::drop_packets) names),
    /// also when a fault then loses it.
    ///
    /// # Errors
    /// [`FabricError::UnknownPort`], [`FabricError::FrameTooShort`] or
    /// [`FabricError::FrameTooLong`]; no index is used up then.
    pub fn transmit(&mut self, from: PortId, frame: Vec<u8>) -> Result<u64, FabricError> {
        self.send_frame(from, frame, true, false)
    }

    /// [`Fabric::transmit`] of a frame whose IPv4 header checksum and UDP checksum (and,
    /// a RoCEv2 frame, its ICRC) the caller vouches for (a sending NIC's checksum offload
    /// filled them, see [`crate::frame::offload_checksums`], or the NIC built the RoCEv2
    /// frame over IPv4): it arrives [`Output::Frame`]`::sealed` unless a fault flips one
    /// of its bits, and the receiving port does not sum it again.
    ///
    /// # Errors
    /// As [`Fabric::transmit`].
    pub fn transmit_sealed(&mut self, from: PortId, frame: Vec<u8>) -> Result<u64, FabricError> {
        self.send_frame(from, frame, true, true)
    }

    /// [`Fabric::transmit`] of a frame made at `from` now (`made`: the sender's payload
    /// corruption applies) or replayed as recorded; `sealed` as
    /// [`Fabric::transmit_sealed`].
    fn send_frame(
        &mut self,
        from: PortId,
        mut frame: Vec<u8>,
        made: bool,
        mut sealed: bool,
    ) -> Result<u64, FabricError> {
        let port = self.topo.port_mut(from)?;
        if frame.len() < 14 {
            return Err(FabricError::FrameTooShort(frame.len()));
        }
        if frame.len() > port.config.max_frame {
            self.stats.dropped_too_long += 1;
            return Err(FabricError::FrameTooLong {
                len: frame.len(),
                max: port.config.max_frame,
            });
        }
        let now = self.clock.now();
        let index = self.stats.transmitted;
        self.stats.transmitted += 1;
        port.stats.tx_frames += 1;
        port.stats.tx_bytes += frame.len() as u64;
        let (mac, mc_loopback) = (port.config.mac, port.config.multicast_loopback);
        // A buggy sender corrupts the payload before the checksums are made: the frame
        // leaves (and is captured) bad but valid.
        if let Some(draw) = made.then(|| port.up.payload_flip()).flatten() {
            if let Some(bit) = corruption::corrupt_payload(&mut frame, draw) {
                // The checksums are made again over the flipped payload, but the seal
                // covered the bytes as they were: the receiver sums them itself.
                sealed = false;
                self.stats.corrupted_payload += 1;
                self.payload_corruptions.push(PayloadCorruption {
                    index,
                    bit,
                    frame: frame.clone(),
                });
                self.taps.seen(Seen::Corrupt {
                    index,
                    bit,
                    at: FlipAt::Payload,
                });
            }
        }
        self.taps.seen(Seen::Transmit {
            now,
            port: from,
            index,
            frame: &frame,
        });
        if self.plan.drops(index) {
            self.drop(DropReason::DropList, now, from, index);
            return Ok(index);
        }
        let dst = dst_mac(&frame);
        if dst == mac {
            // NIC loopback: never reaches the wire.
            let at = now + self.loopback_ns;
            self.queue.push(
                at,
                EventKind::Arrive {
                    to: from,
                    frame,
                    index,
                    sealed,
                },
            );
            return Ok(index);
        }
        // Multicast loopback: a copy for the sending port when it is a member of the
        // frame's group, by IPv4 group or by Ethernet group (a flow rule naming a
        // multicast MAC joins one), as mlx5 loops multicast back to its own steering.
        if dst.is_multicast() && mc_loopback {
            let by_ip = ipv4_dst(&frame)
                .is_some_and(|g| g.is_multicast() && self.topo.switch.is_member(from, g));
            if by_ip || self.topo.switch.is_mac_member(from, dst) {
                let at = now + self.loopback_ns;
                let to = from;
                let frame = frame.clone();
                let arrive = EventKind::Arrive {
                    to,
                    frame,
                    index,
                    sealed,
                };
                self.queue.push(at, arrive);
            }
        }
        if self.external.owns(from) {
            // The link leads outside: its switch takes it from there.
            self.external.tell(
                from,
                ExternalMsg::Frame {
                    frame,
                    index,
                    sealed,
                },
            );
            return Ok(index);
        }
        let verdict = self.topo.ports[from.idx()].up.send(now, frame.len());
        self.cross(verdict, now, from, None, frame, index, sealed);
        Ok(index)
    }

    /// Acts on a link's verdict for a frame crossing from `from` (to the switch when `to`
    /// is `None`, else down to port `to`): the drop, the flipped bit (on the wire the
    /// receiving port's FCS check drops the frame; in the switch it goes on, bad), the
    /// duplicate and the arrival. A flipped bit breaks the frame's seal.
    #[allow(clippy::too_many_arguments)]
    fn cross(
        &mut self,
        verdict: Verdict,
        now: Nanos,
        from: PortId,
        to: Option<PortId>,
        mut frame: Vec<u8>,
        index: u64,
        mut sealed: bool,
    ) {
        let near = to.unwrap_or(from);
        let (arrival, duplicate, flip) = match verdict {
            Verdict::Drop(r) => return self.drop(r, now, near, index),
            Verdict::Deliver {
                arrival,
                duplicate,
                flip,
                ..
            } => (arrival, duplicate, flip),
        };
        if let Some(f) = flip {
            if let Some(bit) = corruption::bit_after_header(frame.len(), f.draw) {
                corruption::flip(&mut frame, bit);
                sealed = false;
                self.taps.seen(Seen::Corrupt {
                    index,
                    bit,
                    at: f.at,
                });
                if f.at == FlipAt::Wire {
                    // Every Ethernet frame carries an FCS (CRC-32) that catches any
                    // single-bit error: the receiving port drops the frame.
                    self.stats.corrupted_wire += 1;
                    let stats = &mut self.topo.ports[near.idx()].stats;
                    match to {
                        Some(_) => stats.rx_fcs_errors += 1,
                        None => stats.switch_fcs_errors += 1,
                    }
                    return self.drop(DropReason::Fcs, now, near, index);
                }
                self.stats.corrupted_switch += 1;
                self.switch_flipped.insert((index, to));
            }
        }
        let event = |frame| match to {
            None => EventKind::AtSwitch {
                from,
                frame,
                index,
                sealed,
            },
            Some(to) => EventKind::Arrive {
                to,
                frame,
                index,
                sealed,
            },
        };
        if duplicate {
            self.stats.duplicated += 1;
            self.taps.seen(Seen::Duplicate {
                now,
                port: near,
                index,
            });
            self.queue.push(arrival, event(frame.clone()));
        }
        self.queue.push(arrival, event(frame));
    }

    fn drop(&mut self, reason: DropReason, now: Nanos, port: PortId, index: u64) {
        self.stats.count_drop(reason);
        if reason == DropReason::Overrun {
            self.topo.ports[port.idx()].stats.rx_overrun += 1;
        }
        self.taps.seen(Seen::Drop {
            now,
            port,
            index,
            reason,
        });
    }

    /// Virtual time of the next event, if any.
    #[must_use]
    pub fn next_event_time(&self) -> Option<Nanos> {
        self.queue.peek_time()
    }

    /// Events waiting.
    #[must_use]
    pub fn pending_events(&self) -> usize {
        self.queue.len()
    }

    /// True while a frame transmitted before the one of global index `index` (see
    /// [`Fabric::transmit`]) is still crossing the fabric: what a message that must not
    /// overtake them waits for.
    #[must_use]
    pub fn frames_in_flight_before(&self, index: u64) -> bool {
        self.queue.holds_frame_below(index)
    }

    /// Takes events in (time, sequence) order until one produces an [`Output`] for the
    /// layer above, advancing the clock to it. `None` when the queue is empty.
    pub fn step(&mut self) -> Option<Output> {
        self.step_until(Nanos::MAX)
    }

    /// Like [`Fabric::step`], but takes no event later than `deadline`; when none is left
    /// by then the clock moves to `deadline` (if it is not `Nanos::MAX`) and `None` is
    /// returned.
    pub fn step_until(&mut self, deadline: Nanos) -> Option<Output> {
        let now = self.clock.now();
        let deadline = self
            .external
            .horizon
            .map_or(deadline, |h| deadline.min(h.max(now)));
        loop {
            match self.queue.peek_time() {
                Some(t) if t <= deadline => {}
                _ => {
                    if deadline != Nanos::MAX {
                        self.clock.advance_to(deadline);
                    }
                    return None;
                }
            }
            let ev = self.queue.pop()?;
            self.clock.advance_to(ev.time);
            let now = ev.time;
            match ev.kind {
                EventKind::AtSwitch {
                    from,
                    frame,
                    index,
                    sealed,
                } => self.forward(now, from, frame, index, sealed),
                EventKind::Arrive {
                    to,
                    frame,
                    index,
                    sealed,
                } => {
                    if let Some(out) = self.arrive(now, to, frame, index, sealed) {
                        return Some(out);
                    }
                }
                EventKind::Timer { token } => {
                    self.taps.seen(Seen::Timer { now, token });
                    return Some(Output::Timer { token });
                }
                EventKind::Replay { id } => self.replay_next(now, id),
            }
        }
    }

    /// Runs until no event is left, handing every output to `handle` (which may transmit
    /// and set timers in turn).
    pub fn run_until_idle(&mut self, mut handle: impl FnMut(&mut Fabric, Output)) {
        while let Some(out) = self.step() {
            handle(self, out);
        }
    }

    /// Runs until idle and returns every output, for tests of the bare fabric.
    pub fn drain(&mut self) -> Vec<(Nanos, Output)> {
        let mut v = Vec::new();
        while let Some(out) = self.step() {
            v.push((self.now(), out));
        }
        v
    }

    /// A frame at the switch: a copy down every target port's link (or a drop when there
    /// is none).
    fn forward(&mut self, now: Nanos, from: PortId, frame: Vec<u8>, index: u64, sealed: bool) {
        self.taps.seen(Seen::AtSwitch { now, from, index });
        if frame.len() >= 12 {
            let src = Mac([frame[6], frame[7], frame[8], frame[9], frame[10], frame[11]]);
            self.topo.switch.learn(from, src);
        }
        let mut targets = std::mem::take(&mut self.scratch);
        self.topo.targets(from, &frame, &mut targets);
        if let Some((&last, rest)) = targets.split_last() {
            for &to in rest {
                self.egress(now, from, to, frame.clone(), index, sealed);
            }
            self.egress(now, from, last, frame, index, sealed);
        } else {
            self.drop(DropReason::NoRoute, now, from, index);
        }
        self.scratch = targets;
    }

    fn egress(
        &mut self,
        now: Nanos,
        from: PortId,
        to: PortId,
        frame: Vec<u8>,
        index: u64,
        sealed: bool,
    ) {
        if self.plan.cuts(now, from, to) {
            return self.drop(DropReason::Partition, now, to, index);
        }
        let verdict = self.topo.ports[to.idx()].down.send(now, frame.len());
        self.cross(verdict, now, from, Some(to), frame, index, sealed);
    }

    /// A frame at a port (its FCS good): seen there (a capture of the port shows it), then
    /// the NIC's checks of a RoCEv2 frame, then up to the layer above.
    fn arrive(
        &mut self,
        now: Nanos,
        to: PortId,
        frame: Vec<u8>,
        index: u64,
        sealed: bool,
    ) -> Option<Output> {
        self.admit(now, to, &frame, index, sealed)
            .then_some(Output::Frame {
                port: to,
                frame,
                index,
                sealed,
            })
    }

    /// A frame at the end of its link at port `to` now: the port's checks and counts (a
    /// drop is counted and traced). True if it goes up to the layer above.
    pub(super) fn admit(
        &mut self,
        now: Nanos,
        to: PortId,
        frame: &[u8],
        index: u64,
        sealed: bool,
    ) -> bool {
        let port = &mut self.topo.ports[to.idx()];
        if frame.len() > port.config.max_frame {
            self.drop(DropReason::TooLong, now, to, index);
            return false;
        }
        self.taps.seen(Seen::Arrive {
            now,
            port: to,
            index,
            frame,
        });
        let port = &mut self.topo.ports[to.idx()];
        // A sealed frame passes the checks unsummed: its sender made them right and no
        // bit of it changed on the way.
        if let Some(reason) = (port.config.verify_checksums && !sealed)
            .then(|| corruption::roce_drop(frame))
            .flatten()
        {
            let s = &mut port.stats;
            match reason {
                DropReason::IpHeader => s.rx_ip_header_errors += 1,
                DropReason::UdpChecksum => s.rx_udp_checksum_errors += 1,
                _ => s.rx_icrc_errors += 1,
            }
            self.drop(reason, now, to, index);
            return false;
        }
        port.stats.rx_frames += 1;
        port.stats.rx_bytes += frame.len() as u64;
        self.stats.delivered += 1;
        if !self.switch_flipped.is_empty()
            && (self.switch_flipped.contains(&(index, None))
                || self.switch_flipped.contains(&(index, Some(to))))
            && corruption::passes_checks(frame)
        {
            self.undetected.push(UndetectedCorruption {
                index,
                port: to,
                frame: frame.to_vec(),
            });
        }
        true
    }

    fn replay_next(&mut self, now: Nanos, id: usize) {
        let Some(r) = self.replays.get_mut(id) else {
            return;
        };
        let Some((from, frame)) = r.pop() else {
            return;
        };
        let next = r.next_at();
        self.taps.seen(Seen::Replay { now, id });
        // A frame the port cannot send is counted (too long) and the replay goes on. It is
        // sent as recorded: a sender's payload corruption is already in it.
        let _ = self.send_frame(from, frame, false, false);
        if let Some(at) = next {
            self.queue.push(at, EventKind::Replay { id });
        }
    }
}
