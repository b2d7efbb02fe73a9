//! One direction of a host's link to the switch: a FIFO with a propagation latency, a
//! bandwidth (serialization time per frame), an optional buffer limit, and faults.

use crate::clock::Nanos;
use crate::fault::{DropReason, LinkFaults};
use crate::rng::SimRng;
use std::collections::VecDeque;

/// Speed and length of a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkConfig {
    /// One-way propagation latency.
    pub latency_ns: Nanos,
    /// Bits per second (0: infinitely fast).
    pub bandwidth_bps: u64,
}

impl Default for LinkConfig {
    /// 100 Gb/s and 500 ns, a rack-local link.
    fn default() -> Self {
        LinkConfig {
            latency_ns: 500,
            bandwidth_bps: 100_000_000_000,
        }
    }
}

impl LinkConfig {
    /// Time to put `bytes` on the wire (with the 20 bytes of preamble, SFD and IFG and the
    /// 4-byte FCS a real Ethernet adds).
    #[must_use]
    pub fn serialization_ns(&self, bytes: usize) -> Nanos {
        if self.bandwidth_bps == 0 {
            return 0;
        }
        ser_ns(bytes, ser_multiplier(self.bandwidth_bps))
    }
}

/// 32.32 fixed-point nanoseconds per byte, rounded up: one multiply per frame instead of
/// a division, and a pure integer function of the configuration (deterministic).
fn ser_multiplier(bps: u64) -> u64 {
    if bps == 0 {
        return 0;
    }
    ((8_000_000_000u128 << 32).div_ceil(u128::from(bps))).min(u128::from(u64::MAX)) as u64
}

fn ser_ns(bytes: usize, mul: u64) -> Nanos {
    let wire = bytes as u128 + 24;
    ((wire * u128::from(mul) + 0xffff_ffff) >> 32) as Nanos
}

/// What the link decided for one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Lost, for this reason.
    Drop(DropReason),
    /// Arrives at the far end at `arrival`; `duplicate` if a second copy follows;
    /// `corrupt_bit` if one bit (index into the frame) is flipped.
    Deliver {
        arrival: Nanos,
        duplicate: bool,
        corrupt_bit: Option<usize>,
    },
}

/// One direction of a link.
#[derive(Debug, Clone)]
pub(crate) struct LinkDir {
    pub config: LinkConfig,
    pub faults: LinkFaults,
    ser_mul: u64,
    /// When the transmitter is free again.
    busy_until: Nanos,
    /// Arrival time of the last in-order frame (jitter keeps FIFO order).
    last_arrival: Nanos,
    /// Finish times of frames still being serialized or waiting (for the buffer limit).
    queued: VecDeque<Nanos>,
}

impl LinkDir {
    pub fn new(config: LinkConfig) -> Self {
        LinkDir {
            config,
            ser_mul: ser_multiplier(config.bandwidth_bps),
            faults: LinkFaults::default(),
            busy_until: 0,
            last_arrival: 0,
            queued: VecDeque::new(),
        }
    }

    /// Puts a frame of `len` bytes on the link at `now`, drawing its faults in a fixed order
    /// (buffer, loss, corruption, duplication, jitter, reordering).
    pub fn send(&mut self, now: Nanos, len: usize, rng: &mut SimRng) -> Verdict {
        let f = &self.faults;
        if let Some(limit) = f.buffer_frames {
            while self.queued.front().is_some_and(|&t| t <= now) {
                self.queued.pop_front();
            }
            if self.queued.len() >= limit as usize {
                return Verdict::Drop(DropReason::Overrun);
            }
        }
        let start = now.max(self.busy_until);
        let finish = start + ser_ns(len, self.ser_mul);
        self.busy_until = finish;
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
        let mut arrival = finish + self.config.latency_ns + f.delay_ns;
        if f.jitter_ns > 0 {
            arrival += rng.up_to(f.jitter_ns);
        }
        arrival = arrival.max(self.last_arrival);
        self.last_arrival = arrival;
        if f.reorder_window_ns > 0 && rng.chance(f.reorder) {
            arrival += 1 + rng.up_to(f.reorder_window_ns - 1);
        }
        Verdict::Deliver {
            arrival,
            duplicate,
            corrupt_bit,
        }
    }
}
