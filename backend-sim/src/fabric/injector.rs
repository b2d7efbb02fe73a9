//! [`FaultInjector`]: a [`Link`] decorator that applies one direction's [`LinkFaults`]
//! (buffer overrun, loss, corruption, duplication, delay, jitter, reordering) to the link
//! it wraps, as smoltcp's `phy::FaultInjector` wraps a device. With clean faults it draws
//! no randomness and changes nothing.
//!
//! The random draws come from the generator the fabric hands in (today the run's single
//! stream; a per-link stream derived from the seed only changes what is passed to
//! [`Link::send`]).

use super::link::{Link, Verdict};
use crate::clock::Nanos;
use crate::fault::{DropReason, LinkFaults};
use crate::rng::SimRng;
use std::collections::VecDeque;

/// Faults around a link.
#[derive(Debug, Clone)]
pub(crate) struct FaultInjector<L> {
    inner: L,
    faults: LinkFaults,
    /// Arrival time of the last in-order frame (jitter keeps FIFO order).
    last_arrival: Nanos,
    /// Finish times of frames still being serialized or waiting (for the buffer limit).
    queued: VecDeque<Nanos>,
}

impl<L: Link> FaultInjector<L> {
    pub fn new(inner: L, faults: LinkFaults) -> Self {
        FaultInjector {
            inner,
            faults,
            last_arrival: 0,
            queued: VecDeque::new(),
        }
    }

    /// Replaces the faults (the link's timing state stays).
    pub fn set_faults(&mut self, faults: LinkFaults) {
        self.faults = faults;
    }
}

impl<L: Link> Link for FaultInjector<L> {
    /// Draws the faults in a fixed order: buffer, loss, corruption, duplication, jitter,
    /// reordering.
    fn send(&mut self, now: Nanos, len: usize, rng: &mut SimRng) -> Verdict {
        let f = &self.faults;
        if let Some(limit) = f.buffer_frames {
            while self.queued.front().is_some_and(|&t| t <= now) {
                self.queued.pop_front();
            }
            if self.queued.len() >= limit as usize {
                return Verdict::Drop(DropReason::Overrun);
            }
        }
        let (finish, arrival) = match self.inner.send(now, len, rng) {
            Verdict::Deliver {
                finish, arrival, ..
            } => (finish, arrival),
            drop @ Verdict::Drop(_) => return drop,
        };
        if f.buffer_frames.is_some() {
            self.queued.push_back(finish);
        }
        if rng.chance(f.loss) {
            return Verdict::Drop(DropReason::Loss);
        }
        let corrupt_bit = if rng.chance(f.corrupt) && len > 14 {
            // Any bit after the Ethernet header: a flip in the header would only misroute.
            Some(14 * 8 + rng.up_to(((len - 14) * 8 - 1) as u64) as usize)
        } else {
            None
        };
        let duplicate = rng.chance(f.duplicate);
        let mut arrival = arrival + f.delay_ns;
        if f.jitter_ns > 0 {
            arrival += rng.up_to(f.jitter_ns);
        }
        arrival = arrival.max(self.last_arrival);
        self.last_arrival = arrival;
        if f.reorder_window_ns > 0 && rng.chance(f.reorder) {
            arrival += 1 + rng.up_to(f.reorder_window_ns - 1);
        }
        Verdict::Deliver {
            finish,
            arrival,
            duplicate,
            corrupt_bit,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::link::{LinkConfig, Wire};
    use super::*;

    fn wire() -> Wire {
        Wire::new(LinkConfig {
            latency_ns: 100,
            bandwidth_bps: 0,
        })
    }

    #[test]
    fn clean_faults_pass_the_wire_through_and_draw_nothing() {
        let mut plain = wire();
        let mut wrapped = FaultInjector::new(wire(), LinkFaults::default());
        let (mut a, mut b) = (SimRng::new(9), SimRng::new(9));
        for t in [0, 5, 5, 40] {
            assert_eq!(wrapped.send(t, 64, &mut a), plain.send(t, 64, &mut b));
        }
        // Neither generator moved: the next draws agree with a fresh one.
        assert_eq!(a.next_u64(), SimRng::new(9).next_u64());
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
        );
        let mut rng = SimRng::new(1);
        // 40 bytes + 24: the first frame occupies the link until 64.
        assert!(matches!(
            l.send(0, 40, &mut rng),
            Verdict::Deliver { finish: 64, .. }
        ));
        assert_eq!(l.send(63, 40, &mut rng), Verdict::Drop(DropReason::Overrun));
        assert!(matches!(
            l.send(64, 40, &mut rng),
            Verdict::Deliver { finish: 128, .. }
        ));
    }

    #[test]
    fn certain_loss_drops_and_jitter_never_reorders() {
        let mut lossy = FaultInjector::new(wire(), LinkFaults::loss(1.0));
        let mut rng = SimRng::new(3);
        assert_eq!(lossy.send(0, 64, &mut rng), Verdict::Drop(DropReason::Loss));
        let jitter = LinkFaults {
            jitter_ns: 1000,
            ..LinkFaults::default()
        };
        let mut l = FaultInjector::new(wire(), jitter);
        let mut last = 0;
        for t in 0..200 {
            let Verdict::Deliver { arrival, .. } = l.send(t, 64, &mut rng) else {
                panic!("jitter never drops");
            };
            assert!(arrival >= last, "frame {t} overtook its predecessor");
            assert!((t + 100..=t + 1100).contains(&arrival));
            last = arrival;
        }
    }
}
