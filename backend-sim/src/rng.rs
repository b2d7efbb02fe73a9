//! The one random number generator of a run: ChaCha8 seeded from a u64. It draws the
//! probabilistic faults and jitter, in event order, so the same seed and the same calls give
//! the same draws on every machine.

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

/// The seeded generator.
#[derive(Debug, Clone)]
pub struct SimRng {
    inner: ChaCha8Rng,
    seed: u64,
}

impl SimRng {
    /// A generator from `seed`.
    #[must_use]
    pub fn new(seed: u64) -> Self {
        SimRng {
            inner: ChaCha8Rng::seed_from_u64(seed),
            seed,
        }
    }

    /// The seed this generator started from (print it when a test fails).
    #[must_use]
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// A uniform u64.
    pub fn next_u64(&mut self) -> u64 {
        self.inner.next_u64()
    }

    /// True with probability `p` (p <= 0 never draws, so a fault-free link consumes no
    /// randomness; p >= 1 always true).
    pub fn chance(&mut self, p: f64) -> bool {
        if p <= 0.0 {
            return false;
        }
        if p >= 1.0 {
            return true;
        }
        // 53 random bits give a uniform f64 in [0, 1).
        let x = (self.inner.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
        x < p
    }

    /// A uniform integer in `0..=max`.
    pub fn up_to(&mut self, max: u64) -> u64 {
        if max == 0 {
            return 0;
        }
        if max == u64::MAX {
            return self.inner.next_u64();
        }
        // Lemire's multiply-shift; the tiny bias is irrelevant for fault draws and the
        // result is still a pure function of the seed.
        ((u128::from(self.inner.next_u64()) * u128::from(max + 1)) >> 64) as u64
    }
}
