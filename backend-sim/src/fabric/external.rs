//! External links: a port whose link leads out of this fabric, to a switch that something
//! outside the simulation runs (the emulator's fabric process). What the port's NIC
//! transmits goes to an outbox the layer above drains, instead of up the port's link (or,
//! with an [`ExternalSink`], straight to the layer above at the moment it is sent); what arrives
//! from outside is handed in with [`Fabric::inject`] and reaches the port at the current
//! virtual time. Multicast memberships of the port are told to the outside too, so its
//! switch can route groups. NIC loopback (frames to the port's own MAC, multicast copies
//! back to a member port) stays inside, as on a real NIC.
//!
//! An open fabric's time must not run ahead of the outside's: [`Fabric::set_horizon`]
//! caps every step at a time the layer above gives (the emulator's wall clock), so an
//! empty poll that takes "the next event" stops there instead of jumping to a
//! retransmission timer seconds ahead.
//!
//! Nothing here reads a clock or draws randomness: with no external port and no horizon
//! the fabric runs exactly as before (same events, same trace hash).

use super::error::FabricError;
use super::events::EventKind;
use super::outbox::{ExternalMsg, ExternalSink, MAX_SPARE};
use super::Fabric;
use crate::clock::Nanos;
use crate::ids::PortId;
use std::collections::VecDeque;

impl Fabric {
    /// Makes `port`'s link lead outside: from now on what it transmits (but NIC loopback)
    /// goes to the outbox ([`Fabric::take_external`]) and its multicast joins and leaves
    /// are told there too. The port's own link faults no longer apply to what it sends
    /// (the outside's switch applies its own).
    ///
    /// # Errors
    /// [`FabricError::UnknownPort`].
    pub fn set_external(&mut self, port: PortId) -> Result<(), FabricError> {
        self.topo.port(port)?;
        if !self.external.owns(port) {
            self.external.ports.push(port);
        }
        Ok(())
    }

    /// True if `port`'s link leads outside.
    #[must_use]
    pub fn is_external(&self, port: PortId) -> bool {
        self.external.owns(port)
    }

    /// Sends what external ports have to tell to `sink` as it happens (`None`: to the
    /// outbox, which [`Fabric::take_external`] drains). Anything already in the outbox
    /// stays there.
    pub fn set_external_sink(&mut self, sink: Option<ExternalSink>) {
        self.external.sink = sink;
    }

    /// Moves everything the external ports have to tell into `out` (appended, in order).
    pub fn take_external(&mut self, out: &mut VecDeque<(PortId, ExternalMsg)>) {
        out.append(&mut self.external.outbox);
    }

    /// Gives a frame buffer back for reuse (one [`Fabric::take_external`] handed out,
    /// one [`Fabric::spare_frame`] gave that was not used, or a frame the layer above
    /// is done with): the pool the NICs build frames in and [`Fabric::inject`]'s
    /// callers fill.
    pub fn recycle_frame(&mut self, frame: Vec<u8>) {
        if self.external.spare.len() < MAX_SPARE {
            self.external.spare.push(frame);
        }
    }

    /// An empty frame buffer to fill for [`Fabric::inject`]: a recycled one when there
    /// is one, so the receive path allocates nothing once traffic flows both ways.
    pub fn spare_frame(&mut self) -> Vec<u8> {
        let mut v = self.external.spare.pop().unwrap_or_default();
        v.clear();
        v
    }

    /// A frame from outside reaches `to` now, at the end of its link: the port's checks
    /// (frame size, and the RoCEv2 checksums when it verifies them) apply as to any frame
    /// that arrives, then it goes up to the layer above like any other. `index` names it
    /// in the trace (the outside's global index, so both traces agree).
    ///
    /// # Errors
    /// [`FabricError::UnknownPort`] or [`FabricError::FrameTooShort`]; nothing is
    /// scheduled then (the buffer is kept for reuse).
    pub fn inject(&mut self, to: PortId, frame: Vec<u8>, index: u64) -> Result<(), FabricError> {
        let refused = match self.topo.port(to) {
            Err(e) => Some(e),
            Ok(_) if frame.len() < 14 => Some(FabricError::FrameTooShort(frame.len())),
            Ok(_) => None,
        };
        if let Some(e) = refused {
            self.recycle_frame(frame);
            return Err(e);
        }
        let now = self.clock.now();
        self.queue.push(
            now,
            EventKind::Arrive {
                to,
                frame,
                index,
                // Nothing vouches for a frame from outside.
                sealed: false,
            },
        );
        Ok(())
    }

    /// A frame from outside reaches `to` now, at the end of its link, and is checked
    /// there as [`Fabric::inject`]'s frames are, without the event queue (`sealed`: its
    /// sending NIC sealed it and it came through shared memory, where no bit of it can
    /// change, so the port does not sum it again): true if it passes, and the caller hands it to the layer
    /// above at once, where it lies (the emulator's NIC reads a frame in the shared ring,
    /// `World::receive_now`).
    ///
    /// # Errors
    /// As [`Fabric::inject`]; nothing is counted then.
    pub fn arrive_now(
        &mut self,
        to: PortId,
        frame: &[u8],
        index: u64,
        sealed: bool,
    ) -> Result<bool, FabricError> {
        self.topo.port(to)?;
        if frame.len() < 14 {
            return Err(FabricError::FrameTooShort(frame.len()));
        }
        let now = self.clock.now();
        Ok(self.admit(now, to, frame, index, sealed))
    }

    /// Caps virtual time: no step takes an event later than `horizon`, and a step that
    /// finds nothing due by then moves the clock to it, not beyond (`None`: no cap, the
    /// closed fabric's behaviour). The clock never moves back: under a horizon in the
    /// past a step takes only what is due now.
    pub fn set_horizon(&mut self, horizon: Option<Nanos>) {
        self.external.horizon = horizon;
    }

    /// The cap in force ([`Fabric::set_horizon`]).
    #[must_use]
    pub fn horizon(&self) -> Option<Nanos> {
        self.external.horizon
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::Output;
    use crate::fault::LinkFaults;
    use crate::frame::eth::Mac;
    use std::net::Ipv4Addr;

    fn frame_to(dst: Mac, src: Mac, len: usize) -> Vec<u8> {
        let mut f = vec![0u8; len];
        f[..6].copy_from_slice(&dst.0);
        f[6..12].copy_from_slice(&src.0);
        f[12..14].copy_from_slice(&0x88b5u16.to_be_bytes()); // local experimental type
        f
    }

    fn two_hosts() -> (Fabric, PortId, PortId, Mac, Mac) {
        let mut f = Fabric::new(3);
        let (_, a) = f
            .add_host_with_port("a", Ipv4Addr::new(10, 0, 0, 1))
            .unwrap();
        let (_, b) = f
            .add_host_with_port("b", Ipv4Addr::new(10, 0, 0, 2))
            .unwrap();
        let ma = f.port_config(a).unwrap().mac;
        let mb = f.port_config(b).unwrap().mac;
        (f, a, b, ma, mb)
    }

    #[test]
    fn an_external_port_sends_to_the_outbox_not_the_switch() {
        let (mut f, a, b, ma, mb) = two_hosts();
        f.set_external(a).unwrap();
        assert!(f.is_external(a) && !f.is_external(b));
        let frame = frame_to(mb, ma, 60);
        assert_eq!(f.transmit(a, frame.clone()).unwrap(), 0);
        assert_eq!(f.drain(), vec![]);
        let mut out = VecDeque::new();
        f.take_external(&mut out);
        assert_eq!(
            out,
            VecDeque::from([(
                a,
                ExternalMsg::Frame {
                    frame,
                    index: 0,
                    sealed: false,
                }
            )])
        );
        f.take_external(&mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(f.stats().transmitted, 1);
        assert_eq!(f.stats().delivered, 0);
    }

    #[test]
    fn loopback_stays_inside() {
        let (mut f, a, _, ma, _) = two_hosts();
        f.set_external(a).unwrap();
        let frame = frame_to(ma, ma, 60);
        f.transmit(a, frame.clone()).unwrap();
        let got = f.drain();
        assert_eq!(
            got,
            vec![(
                200,
                Output::Frame {
                    port: a,
                    frame,
                    index: 0,
                    sealed: false,
                }
            )]
        );
        let mut out = VecDeque::new();
        f.take_external(&mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn multicast_memberships_are_told_and_copies_loop_back() {
        let (mut f, a, b, ma, _) = two_hosts();
        f.set_external(a).unwrap();
        let g = Ipv4Addr::new(239, 1, 2, 3);
        let gm = Mac([0x01, 0x00, 0x5e, 1, 2, 3]);
        f.join_group(a, g).unwrap();
        f.join_group(b, g).unwrap(); // not external: nothing told
        f.join_mac_group(a, gm).unwrap();
        assert!(f.leave_mac_group(a, gm).unwrap());
        assert!(f.leave_group(a, g).unwrap());
        f.join_group(a, g).unwrap();
        // An IPv4 multicast frame from the member port: a copy back, the frame outside.
        let mut frame = frame_to(gm, ma, 60);
        frame[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        frame[30..34].copy_from_slice(&g.octets());
        f.transmit(a, frame.clone()).unwrap();
        let got = f.drain();
        assert_eq!(got.len(), 1);
        assert!(matches!(&got[0].1, Output::Frame { port, .. } if *port == a));
        let mut out = VecDeque::new();
        f.take_external(&mut out);
        let want = [
            ExternalMsg::JoinGroup(g),
            ExternalMsg::JoinMac(gm),
            ExternalMsg::LeaveMac(gm),
            ExternalMsg::LeaveGroup(g),
            ExternalMsg::JoinGroup(g),
            ExternalMsg::Frame {
                frame,
                index: 0,
                sealed: false,
            },
        ];
        assert_eq!(out.into_iter().map(|(_, m)| m).collect::<Vec<_>>(), want);
    }

    #[test]
    fn injected_frames_arrive_now_and_pass_the_ports_checks() {
        let (mut f, a, _, ma, mb) = two_hosts();
        f.set_external(a).unwrap();
        f.schedule_timer(1000, 9);
        assert_eq!(f.step(), Some(Output::Timer { token: 9 }));
        let frame = frame_to(ma, mb, 80);
        f.inject(a, frame.clone(), 77).unwrap();
        assert_eq!(
            f.step(),
            Some(Output::Frame {
                port: a,
                frame: frame.clone(),
                index: 77,
                sealed: false,
            })
        );
        assert_eq!(f.now(), 1000);
        assert_eq!(f.port_stats(a).unwrap().rx_frames, 1);
        // Too long for the port: dropped on arrival, as from a link.
        f.inject(a, vec![0u8; 9015], 78).unwrap();
        assert_eq!(f.step(), None);
        assert_eq!(f.stats().dropped_too_long, 1);
        assert!(matches!(
            f.inject(a, frame[..13].to_vec(), 79),
            Err(FabricError::FrameTooShort(13))
        ));
        assert!(matches!(
            f.inject(PortId(9), frame, 79),
            Err(FabricError::UnknownPort(_))
        ));
    }

    #[test]
    fn frames_arriving_now_pass_the_ports_checks_without_the_queue() {
        let (mut f, a, _, ma, mb) = two_hosts();
        f.set_external(a).unwrap();
        let frame = frame_to(ma, mb, 80);
        assert!(f.arrive_now(a, &frame, 77, false).unwrap());
        assert_eq!(f.pending_events(), 0);
        assert_eq!(f.port_stats(a).unwrap().rx_frames, 1);
        assert_eq!(f.stats().delivered, 1);
        // Too long for the port: dropped on arrival, as from a link.
        assert!(!f.arrive_now(a, &[0u8; 9015], 78, true).unwrap());
        assert_eq!(f.stats().dropped_too_long, 1);
        assert!(matches!(
            f.arrive_now(a, &frame[..13], 79, false),
            Err(FabricError::FrameTooShort(13))
        ));
        assert!(matches!(
            f.arrive_now(PortId(9), &frame, 79, false),
            Err(FabricError::UnknownPort(_))
        ));
        assert_eq!(f.port_stats(a).unwrap().rx_frames, 1);
    }

    #[test]
    fn recycled_buffers_are_handed_out_again() {
        let (mut f, a, _, ma, mb) = two_hosts();
        let mut buf = Vec::with_capacity(4096);
        buf.push(1);
        let ptr = buf.as_ptr();
        f.recycle_frame(buf);
        let mut buf = f.spare_frame();
        assert_eq!((buf.as_ptr(), buf.len()), (ptr, 0));
        buf.extend_from_slice(&frame_to(ma, mb, 64));
        f.inject(a, buf, 0).unwrap();
        match f.step() {
            Some(Output::Frame { frame, .. }) => {
                assert_eq!(frame.as_ptr(), ptr);
                assert_eq!(frame, frame_to(ma, mb, 64));
            }
            other => panic!("expected the frame, got {other:?}"),
        }
    }

    #[test]
    fn a_sink_takes_messages_as_they_happen_and_frames_are_reused() {
        use std::sync::{Arc, Mutex};
        let (mut f, a, _, ma, mb) = two_hosts();
        f.set_external(a).unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        f.set_external_sink(Some(Box::new(move |port, msg| {
            s.lock().unwrap().push((port, msg.clone()));
        })));
        let frame = frame_to(mb, ma, 60);
        f.transmit(a, frame.clone()).unwrap();
        let g = Ipv4Addr::new(239, 0, 0, 9);
        f.join_group(a, g).unwrap();
        assert_eq!(
            *seen.lock().unwrap(),
            vec![
                (
                    a,
                    ExternalMsg::Frame {
                        frame,
                        index: 0,
                        sealed: false,
                    }
                ),
                (a, ExternalMsg::JoinGroup(g))
            ]
        );
        let mut out = VecDeque::new();
        f.take_external(&mut out);
        assert!(out.is_empty());
        // The sent frame's buffer is the next spare one.
        assert_eq!(f.spare_frame().capacity(), 60);
        f.set_external_sink(None);
        f.leave_group(a, g).unwrap();
        f.take_external(&mut out);
        assert_eq!(out, VecDeque::from([(a, ExternalMsg::LeaveGroup(g))]));
    }

    #[test]
    fn the_horizon_caps_steps() {
        let (mut f, ..) = two_hosts();
        f.schedule_timer(5000, 1);
        f.set_horizon(Some(2000));
        assert_eq!(f.horizon(), Some(2000));
        assert_eq!(f.step(), None);
        assert_eq!(f.now(), 2000);
        assert_eq!(f.step_until(10_000), None);
        assert_eq!(f.now(), 2000);
        f.set_horizon(Some(1000)); // in the past: the clock stays, what is due now goes
        f.schedule_timer(0, 2);
        assert_eq!(f.step(), Some(Output::Timer { token: 2 }));
        assert_eq!(f.step(), None);
        assert_eq!(f.now(), 2000);
        f.set_horizon(None);
        assert_eq!(f.step(), Some(Output::Timer { token: 1 }));
        assert_eq!(f.now(), 5000);
    }

    /// Three fabrics: a switch fabric (no NICs, all hosts) and one per host whose own
    /// port is external; the test moves frames between them as the emulator's fabric
    /// process does, and the switch fabric's link faults apply.
    #[test]
    fn hosts_in_separate_fabrics_talk_through_a_switch_fabric() {
        let (mut sw, sa, sb, ma, mb) = two_hosts();
        for p in [sa, sb] {
            sw.set_link_faults(
                p,
                crate::fault::Direction::FromSwitch,
                LinkFaults::default(),
            )
            .unwrap();
        }
        let (mut ha, a, ..) = two_hosts();
        let (mut hb, _, b, ..) = two_hosts();
        ha.set_external(a).unwrap();
        hb.set_external(b).unwrap();
        let frame = frame_to(mb, ma, 100);
        ha.transmit(a, frame.clone()).unwrap();
        let mut out = VecDeque::new();
        ha.take_external(&mut out);
        let Some((_, ExternalMsg::Frame { frame: f1, .. })) = out.pop_front() else {
            panic!("nothing in the outbox");
        };
        let index = sw.transmit(sa, f1).unwrap();
        let Some(Output::Frame {
            port,
            frame: f2,
            index: i2,
            ..
        }) = sw.step()
        else {
            panic!("the switch fabric delivered nothing");
        };
        assert_eq!((port, i2), (sb, index));
        hb.inject(b, f2, i2).unwrap();
        assert_eq!(
            hb.step(),
            Some(Output::Frame {
                port: b,
                frame,
                index,
                sealed: false,
            })
        );
    }
}
