//! One direction of a host's link to the switch, as a stack in the manner of smoltcp's phy
//! layer: a `Wire` (a FIFO with a propagation latency and a bandwidth) at the bottom, and
//! decorators around it that implement the same `Link` trait (the `FaultInjector` of
//! `fabric/injector.rs` today). The fabric composes the stack of each port from its
//! configuration and never looks inside it. [`LinkConfig`] is the public part.

use crate::clock::Nanos;
use crate::fault::DropReason;

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

/// Where a bit of a frame is flipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FlipAt {
    /// On a link's wire: the receiving port's FCS check drops the frame.
    Wire,
    /// Inside the switch, with a good FCS made afterwards.
    Switch,
    /// By the sender, in the payload, before the checksums were made (never a link's).
    Payload,
}

/// A bit flip a link applies: where, and a uniform draw the fabric maps to a bit of the
/// frame (it knows the frame's layout; the link knows only its length).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Flip {
    pub at: FlipAt,
    pub draw: u64,
}

/// What a link decided for one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Lost, for this reason.
    Drop(DropReason),
    /// Arrives at the far end at `arrival`; `duplicate` if a second copy follows; `flip`
    /// if one bit of it is flipped on the way.
    Deliver {
        /// When the last bit has been serialized onto the wire.
        finish: Nanos,
        arrival: Nanos,
        duplicate: bool,
        flip: Option<Flip>,
    },
}

/// One direction of a link, or a decorator around one.
pub(crate) trait Link: std::fmt::Debug {
    /// Puts a frame of `len` bytes on the link at `now`. A layer that draws randomness owns
    /// its streams (derived from the run's seed, one per link and fault kind), so a run is
    /// a pure function of its seed.
    fn send(&mut self, now: Nanos, len: usize) -> Verdict;
}

/// The bare link: serialization at the configured bandwidth, then the propagation latency.
/// Frames leave in the order they were sent (one transmitter).
#[derive(Debug, Clone)]
pub(crate) struct Wire {
    config: LinkConfig,
    ser_mul: u64,
    /// When the transmitter is free again.
    busy_until: Nanos,
}

impl Wire {
    pub fn new(config: LinkConfig) -> Self {
        Wire {
            config,
            ser_mul: ser_multiplier(config.bandwidth_bps),
            busy_until: 0,
        }
    }
}

impl Link for Wire {
    fn send(&mut self, now: Nanos, len: usize) -> Verdict {
        let start = now.max(self.busy_until);
        let finish = start + ser_ns(len, self.ser_mul);
        self.busy_until = finish;
        Verdict::Deliver {
            finish,
            arrival: finish + self.config.latency_ns,
            duplicate: false,
            flip: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wire_serializes_back_to_back_and_adds_the_latency() {
        let cfg = LinkConfig {
            latency_ns: 500,
            bandwidth_bps: 8_000_000_000, // one byte per ns
        };
        let mut w = Wire::new(cfg);
        // 100 bytes + 24 bytes of preamble, IFG and FCS: 124 ns on the wire.
        assert_eq!(
            w.send(0, 100),
            Verdict::Deliver {
                finish: 124,
                arrival: 624,
                duplicate: false,
                flip: None
            }
        );
        // Sent at 10 while the first is still serializing: it waits its turn.
        assert_eq!(
            w.send(10, 100),
            Verdict::Deliver {
                finish: 248,
                arrival: 748,
                duplicate: false,
                flip: None
            }
        );
        assert_eq!(cfg.serialization_ns(100), 124);
    }
}
