//! The random number generators of a run: ChaCha8 seeded from a u64. Every link direction
//! and fault kind draws from a stream of its own ([`SimRng::stream`]: the run's seed with a
//! ChaCha stream number naming the link and the kind), so a stream's draws depend only on
//! the frames that cross its link, and the same seed and the same calls give the same
//! draws on every machine. Adding a host, a sender or a fault kind leaves every other
//! link's draws as they were.

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

    /// Stream `stream` of `seed`: independent of every other stream of the same seed
    /// (ChaCha's 64-bit stream number), and the same on every machine.
    #[must_use]
    pub fn stream(seed: u64, stream: u64) -> Self {
        let mut inner = ChaCha8Rng::seed_from_u64(seed);
        inner.set_stream(stream);
        SimRng { inner, seed }
    }

    /// True once anything has been drawn from this generator.
    #[must_use]
    pub fn drawn(&self) -> bool {
        self.inner.get_word_pos() != 0
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_of_one_seed_differ_and_repeat() {
        let draws = |mut r: SimRng| (0..4).map(|_| r.next_u64()).collect::<Vec<_>>();
        assert_eq!(draws(SimRng::stream(7, 3)), draws(SimRng::stream(7, 3)));
        assert_ne!(draws(SimRng::stream(7, 3)), draws(SimRng::stream(7, 4)));
        assert_ne!(draws(SimRng::stream(7, 3)), draws(SimRng::stream(8, 3)));
        assert_eq!(draws(SimRng::stream(7, 0)), draws(SimRng::new(7)));
        assert_eq!(SimRng::stream(7, 3).seed(), 7);
    }
}
