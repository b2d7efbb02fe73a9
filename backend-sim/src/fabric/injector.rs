//! [`FaultInjector`]: a [`Link`] decorator that applies one direction's [`LinkFaults`]
//! (buffer overrun, loss, bursts of loss, corruption, duplication, delay, jitter,
//! reordering) to the link it wraps, as smoltcp's `phy::FaultInjector` wraps a device.
//! With clean faults it draws nothing and changes nothing.
//!
//! Each fault kind draws from a random stream of its own, derived from the run's seed and
//! the link (its port's MAC and direction, see [`LinkId`]): a link's draws depend only on
//! the frames that cross it, so adding a sender leaves the other links' losses where they
//! were, and a replay that puts the same frames on the same links in the same order draws
//! the same faults.

use super::link::{Flip, FlipAt, Link, Verdict};
use crate::clock::Nanos;
use crate::fault::{Direction, DropReason, LinkFaults};
use crate::frame::eth::Mac;
use crate::rng::SimRng;
use std::collections::VecDeque;

/// Names one direction of one port's link, for its random streams: stable whatever
/// order ports are added in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LinkId {
    pub mac: Mac,
    pub direction: Direction,
}

/// The fault kinds that draw randomness, one stream each.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Loss = 1,
    Burst,
    Corrupt,
    CorruptSwitch,
    CorruptPayload,
    Duplicate,
    Jitter,
    Reorder,
}

impl LinkId {
    /// The ChaCha stream number of `kind` on this link: the MAC's 48 bits, the direction
    /// and the kind.
    fn stream(self, kind: Kind) -> u64 {
        let m = self.mac.0;
        let mac = u64::from_be_bytes([0, 0, m[0], m[1], m[2], m[3], m[4], m[5]]);
        let dir = match self.direction {
            Direction::ToSwitch => 0,
            Direction::FromSwitch => 1,
        };
        (mac << 16) | (dir << 8) | kind as u64
    }
}

/// One random stream, made at its first draw: most links of most runs draw nothing, and a
/// stream made later gives the same draws, which depend only on the seed and the stream
/// number.
#[derive(Debug, Clone)]
struct LazyRng {
    seed: u64,
    stream: u64,
    rng: Option<SimRng>,
}

impl LazyRng {
    fn new(seed: u64, stream: u64) -> Self {
        LazyRng {
            seed,
            stream,
            rng: None,
        }
    }

    fn get(&mut self) -> &mut SimRng {
        let (seed, stream) = (self.seed, self.stream);
        self.rng.get_or_insert_with(|| SimRng::stream(seed, stream))
    }

    /// As [`SimRng::chance`], which draws nothing for p <= 0 or p >= 1.
    fn chance(&mut self, p: f64) -> bool {
        if p <= 0.0 {
            return false;
        }
        if p >= 1.0 {
            return true;
        }
        self.get().chance(p)
    }

    /// As [`SimRng::up_to`], which draws nothing for 0.
    fn up_to(&mut self, max: u64) -> u64 {
        if max == 0 {
            return 0;
        }
        self.get().up_to(max)
    }

    fn next_u64(&mut self) -> u64 {
        self.get().next_u64()
    }

    fn drawn(&self) -> bool {
        self.rng.as_ref().is_some_and(SimRng::drawn)
    }
}

/// A link's random streams, one per fault kind.
#[derive(Debug, Clone)]
struct Streams {
    loss: LazyRng,
    burst: LazyRng,
    corrupt: LazyRng,
    corrupt_switch: LazyRng,
    corrupt_payload: LazyRng,
    duplicate: LazyRng,
    jitter: LazyRng,
    reorder: LazyRng,
}

impl Streams {
    fn new(seed: u64, id: LinkId) -> Self {
        let s = |k| LazyRng::new(seed, id.stream(k));
        Streams {
            loss: s(Kind::Loss),
            burst: s(Kind::Burst),
            corrupt: s(Kind::Corrupt),
            corrupt_switch: s(Kind::CorruptSwitch),
            corrupt_payload: s(Kind::CorruptPayload),
            duplicate: s(Kind::Duplicate),
            jitter: s(Kind::Jitter),
            reorder: s(Kind::Reorder),
        }
    }
}

/// Faults around a link.
#[derive(Debug, Clone)]
pub(crate) struct FaultInjector<L> {
    inner: L,
    faults: LinkFaults,
    direction: Direction,
    streams: Streams,
    /// In a burst of loss (the Gilbert-Elliott channel's bad state).
    in_burst: bool,
    /// Arrival time of the last in-order frame (jitter keeps FIFO order).
    last_arrival: Nanos,
    /// Finish times of frames still being serialized or waiting (for the buffer limit).
    queued: VecDeque<Nanos>,
}

impl<L: Link> FaultInjector<L> {
    /// `inner` with `faults`, drawing from the streams of link `id` under `seed`.
    pub fn new(inner: L, faults: LinkFaults, seed: u64, id: LinkId) -> Self {
        FaultInjector {
            inner,
            faults,
            direction: id.direction,
            streams: Streams::new(seed, id),
            in_burst: false,
            last_arrival: 0,
            queued: VecDeque::new(),
        }
    }

    /// True once any of the link's streams has been drawn from.
    pub fn drawn(&self) -> bool {
        let s = &self.streams;
        [
            &s.loss,
            &s.burst,
            &s.corrupt,
            &s.corrupt_switch,
            &s.corrupt_payload,
            &s.duplicate,
            &s.jitter,
            &s.reorder,
        ]
        .iter()
        .any(|r| r.drawn())
    }

    /// Gives the link the streams of `seed` instead, as if it had been made with it (the
    /// caller checks [`FaultInjector::drawn`] first: draws made under the old seed cannot
    /// be made again under the new one).
    pub fn reseed(&mut self, seed: u64, id: LinkId) {
        self.streams = Streams::new(seed, id);
    }

    /// Replaces the faults (the link's timing state and streams stay).
    pub fn set_faults(&mut self, faults: LinkFaults) {
        self.faults = faults;
    }

    /// True if [`FaultInjector::payload_flip`] can ever corrupt a frame here (it draws
    /// nothing to say so).
    pub fn may_flip_payload(&self) -> bool {
        self.direction == Direction::ToSwitch && self.faults.corrupt_payload > 0.0
    }

    /// The sender's payload corruption of the next frame it makes: a uniform draw the
    /// fabric maps to a bit of the frame's payload, or `None`. Only a port's transmit side
    /// makes frames.
    pub fn payload_flip(&mut self) -> Option<u64> {
        let s = &mut self.streams.corrupt_payload;
        (self.direction == Direction::ToSwitch && s.chance(self.faults.corrupt_payload))
            .then(|| s.next_u64())
    }

    /// One step of the Gilbert-Elliott channel: true if the frame is lost in a burst.
    fn burst_loses(&mut self) -> bool {
        let Some(b) = self.faults.burst else {
            return false;
        };
        let s = &mut self.streams.burst;
        self.in_burst = if self.in_burst {
            !s.chance(b.leave)
        } else {
            s.chance(b.enter)
        };
        self.in_burst && s.chance(b.loss)
    }
}

impl<L: Link> Link for FaultInjector<L> {
    /// Applies the faults in a fixed order: buffer, loss, bursts, corruption (wire, then
    /// switch), duplication, jitter, reordering; each kind draws from its own stream.
    fn send(&mut self, now: Nanos, len: usize) -> Verdict {
        if let Some(limit) = self.faults.buffer_frames {
            while self.queued.front().is_some_and(|&t| t <= now) {
                self.queued.pop_front();
            }
            if self.queued.len() >= limit as usize {
                return Verdict::Drop(DropReason::Overrun);
            }
        }
        let (finish, arrival) = match self.inner.send(now, len) {
            Verdict::Deliver {
                finish, arrival, ..
            } => (finish, arrival),
            drop @ Verdict::Drop(_) => return drop,
        };
        if self.faults.buffer_frames.is_some() {
            self.queued.push_back(finish);
        }
        if self.streams.loss.chance(self.faults.loss) {
            return Verdict::Drop(DropReason::Loss);
        }
        if self.burst_loses() {
            return Verdict::Drop(DropReason::Burst);
        }
        let f = &self.faults;
        let st = &mut self.streams;
        let flip = if len <= 14 {
            None
        } else if st.corrupt.chance(f.corrupt) {
            Some(Flip {
                at: FlipAt::Wire,
                draw: st.corrupt.next_u64(),
            })
        } else if st.corrupt_switch.chance(f.corrupt_switch) {
            Some(Flip {
                at: FlipAt::Switch,
                draw: st.corrupt_switch.next_u64(),
            })
        } else {
            None
        };
        let duplicate = st.duplicate.chance(f.duplicate);
        let mut arrival = arrival + f.delay_ns;
        if f.jitter_ns > 0 {
            arrival += st.jitter.up_to(f.jitter_ns);
        }
        arrival = arrival.max(self.last_arrival);
        self.last_arrival = arrival;
        if f.reorder_window_ns > 0 && st.reorder.chance(f.reorder) {
            arrival += 1 + st.reorder.up_to(f.reorder_window_ns - 1);
        }
        Verdict::Deliver {
            finish,
            arrival,
            duplicate,
            flip,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::link::{LinkConfig, Wire};
    use super::*;
    use crate::fault::BurstLoss;

    fn wire() -> Wire {
        Wire::new(LinkConfig {
            latency_ns: 100,
            bandwidth_bps: 0,
        })
    }

    const UP: LinkId = LinkId {
        mac: Mac([2, 0, 10, 0, 0, 1]),
        direction: Direction::ToSwitch,
    };

    fn injector(faults: LinkFaults) -> FaultInjector<Wire> {
        FaultInjector::new(wire(), faults, 9, UP)
    }

    /// Which of `n` frames a link loses.
    fn lost(l: &mut FaultInjector<Wire>, n: u64) -> Vec<u64> {
        (0..n)
            .filter(|&t| matches!(l.send(t * 10, 64), Verdict::Drop(_)))
            .collect()
    }

    #[test]
    fn clean_faults_pass_the_wire_through() {
        let mut plain = wire();
        let mut wrapped = injector(LinkFaults::default());
        for t in [0, 5, 5, 40] {
            assert_eq!(wrapped.send(t, 64), plain.send(t, 64));
        }
        assert_eq!(wrapped.payload_flip(), None);
    }

    #[test]
    fn each_kind_draws_from_its_own_stream_of_its_own_link() {
        let loss = LinkFaults::loss(0.3);
        let base = lost(&mut injector(loss.clone()), 200);
        assert!((40..=80).contains(&base.len()), "{}", base.len());
        // Duplication, corruption and jitter on the same link leave the losses alone.
        let busy = LinkFaults {
            duplicate: 0.5,
            corrupt_switch: 0.5,
            jitter_ns: 50,
            ..loss.clone()
        };
        assert_eq!(lost(&mut injector(busy), 200), base);
        // The same link under the same seed repeats; another link or seed differs.
        assert_eq!(lost(&mut injector(loss.clone()), 200), base);
        let down = LinkId {
            direction: Direction::FromSwitch,
            ..UP
        };
        assert_ne!(
            lost(&mut FaultInjector::new(wire(), loss.clone(), 9, down), 200),
            base
        );
        assert_ne!(
            lost(&mut FaultInjector::new(wire(), loss, 10, UP), 200),
            base
        );
    }

    #[test]
    fn a_full_buffer_overruns_until_the_queue_drains() {
        let faults = LinkFaults {
            buffer_frames: Some(1),
            ..LinkFaults::default()
        };
        let mut l = FaultInjector::new(
            Wire::new(LinkConfig {
                latency_ns: 0,
                bandwidth_bps: 8_000_000_000,
            }),
            faults,
            1,
            UP,
        );
        // 40 bytes + 24: the first frame occupies the link until 64.
        assert!(matches!(l.send(0, 40), Verdict::Deliver { finish: 64, .. }));
        assert_eq!(l.send(63, 40), Verdict::Drop(DropReason::Overrun));
        assert!(matches!(
            l.send(64, 40),
            Verdict::Deliver { finish: 128, .. }
        ));
    }

    #[test]
    fn certain_loss_drops_and_jitter_never_reorders() {
        let mut lossy = injector(LinkFaults::loss(1.0));
        assert_eq!(lossy.send(0, 64), Verdict::Drop(DropReason::Loss));
        let jitter = LinkFaults {
            jitter_ns: 1000,
            ..LinkFaults::default()
        };
        let mut l = injector(jitter);
        let mut last = 0;
        for t in 0..200 {
            let Verdict::Deliver { arrival, .. } = l.send(t, 64) else {
                panic!("jitter never drops");
            };
            assert!(arrival >= last, "frame {t} overtook its predecessor");
            assert!((t + 100..=t + 1100).contains(&arrival));
            last = arrival;
        }
    }

    #[test]
    fn bursts_lose_runs_of_frames() {
        // Bursts start rarely, last ten frames on average and lose all they cover.
        let burst = LinkFaults {
            burst: Some(BurstLoss {
                enter: 0.02,
                leave: 0.1,
                loss: 1.0,
            }),
            ..LinkFaults::default()
        };
        let mut l = injector(burst);
        let verdicts: Vec<bool> = (0..2000)
            .map(|t| l.send(t * 10, 64) == Verdict::Drop(DropReason::Burst))
            .collect();
        let lost = verdicts.iter().filter(|&&x| x).count();
        let runs = verdicts.windows(2).filter(|w| w[1] && !w[0]).count();
        // About 1/6 of the time in a burst; runs average ~10 frames, not single losses.
        assert!((150..=600).contains(&lost), "{lost} lost");
        assert!(lost / runs.max(1) >= 5, "{lost} lost in {runs} runs");
    }

    #[test]
    fn corruption_flips_on_the_wire_or_in_the_switch_and_payload_only_at_the_sender() {
        let mut wire_flips = injector(LinkFaults::corrupt(1.0));
        let Verdict::Deliver { flip: Some(f), .. } = wire_flips.send(0, 64) else {
            panic!("certain corruption flips");
        };
        assert_eq!(f.at, FlipAt::Wire);
        let switch = LinkFaults {
            corrupt_switch: 1.0,
            corrupt_payload: 1.0,
            ..LinkFaults::default()
        };
        let mut l = injector(switch.clone());
        let Verdict::Deliver { flip: Some(f), .. } = l.send(0, 64) else {
            panic!("certain corruption flips");
        };
        assert_eq!(f.at, FlipAt::Switch);
        assert!(l.payload_flip().is_some());
        // Too short to have anything after the Ethernet header: nothing to flip.
        assert!(matches!(
            l.send(10, 14),
            Verdict::Deliver { flip: None, .. }
        ));
        let down = LinkId {
            direction: Direction::FromSwitch,
            ..UP
        };
        assert_eq!(
            FaultInjector::new(wire(), switch, 9, down).payload_flip(),
            None
        );
    }
}
