//! Rate limiting with spead2's semantics.
//!
//! spead2 lets a sender emit `burst_size` bytes at full speed, then waits until the
//! time those bytes would take at `rate`. If it fell behind, it catches up at no more
//! than `rate * burst_rate_ratio`. Bytes are packet bytes (SPEAD header included,
//! UDP/IP headers not). This type is sans-IO: the caller asks when it may send and
//! does the sleeping.

use std::time::{Duration, Instant};

/// spead2's default burst size.
pub const DEFAULT_BURST_SIZE: usize = 65536;
/// spead2's default burst rate ratio.
pub const DEFAULT_BURST_RATE_RATIO: f64 = 1.05;

/// A rate limiter (sans-IO).
#[derive(Debug, Clone)]
pub struct RateLimiter {
    seconds_per_byte: f64,
    seconds_per_byte_burst: f64,
    burst_size: usize,
    rate_bytes: usize,
    send_time: Option<Instant>,
    send_time_burst: Option<Instant>,
}

impl RateLimiter {
    /// `rate` in bytes per second (0 = unlimited), burst in bytes, and catch-up ratio.
    pub fn new(rate: f64, burst_size: usize, burst_rate_ratio: f64) -> Self {
        let (spb, spb_burst) = if rate > 0.0 {
            (1.0 / rate, 1.0 / (rate * burst_rate_ratio.max(1.0)))
        } else {
            (0.0, 0.0)
        };
        Self {
            seconds_per_byte: spb,
            seconds_per_byte_burst: spb_burst,
            burst_size: burst_size.max(1),
            rate_bytes: 0,
            send_time: None,
            send_time_burst: None,
        }
    }

    /// True when no limit applies.
    pub fn is_unlimited(&self) -> bool {
        self.seconds_per_byte == 0.0
    }

    /// Before sending a packet at `now`: `None` to send now, or the instant to wait for
    /// (then call again).
    pub fn wait_until(&mut self, now: Instant) -> Option<Instant> {
        if self.is_unlimited() {
            return None;
        }
        let send_time = *self.send_time.get_or_insert(now);
        let send_time_burst = *self.send_time_burst.get_or_insert(now);
        if self.rate_bytes >= self.burst_size {
            let wait = Duration::from_secs_f64(self.rate_bytes as f64 * self.seconds_per_byte);
            let wait_burst =
                Duration::from_secs_f64(self.rate_bytes as f64 * self.seconds_per_byte_burst);
            let target = (send_time + wait).max(send_time_burst + wait_burst);
            if now < target {
                return Some(target);
            }
            self.send_time = Some(send_time + wait);
            self.send_time_burst = Some(now.max(target));
            self.rate_bytes = 0;
        }
        None
    }

    /// Records that `bytes` were sent.
    pub fn sent(&mut self, bytes: usize) {
        self.rate_bytes += bytes;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bursts_then_waits() {
        let t0 = Instant::now();
        let mut r = RateLimiter::new(1000.0, 100, 1.05);
        assert_eq!(r.wait_until(t0), None);
        r.sent(100);
        let w = r.wait_until(t0).unwrap();
        assert!(w >= t0 + Duration::from_millis(99));
        assert!(w <= t0 + Duration::from_millis(101));
        assert_eq!(r.wait_until(w), None);
        // Far behind: the next burst may follow at rate * ratio, not immediately.
        r.sent(100);
        let late = w + Duration::from_secs(1);
        assert_eq!(r.wait_until(late), None);
        r.sent(105);
        let next = r.wait_until(late).unwrap();
        assert!(next > late + Duration::from_millis(99));
        assert!(RateLimiter::new(0.0, 10, 1.0).wait_until(t0).is_none());
    }
}
