//! Rate limiting with spead2's semantics.
//!
//! spead2 sends `burst_size` bytes back to back, then waits. Two lower bounds govern
//! the next burst: the standard one advances by `burst / rate` per burst regardless of
//! when bursts really went out, and the catch-up one is the time the burst was
//! actually sent plus `burst / (rate * burst_rate_ratio)`. So after oversleeping the
//! sender catches up, but never faster than the catch-up rate. After a sender was idle
//! ([`RateLimiter::resume`]) the standard bound is moved to now, so idleness is not
//! "caught up". Bytes are SPEAD packet bytes (UDP/IP headers excluded). The standard
//! bound is kept as an `f64` offset from a fixed origin so rounding does not drift.
//!
//! This type is sans-IO: the caller asks when it may send and does the sleeping.

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
    origin: Option<Instant>,
    /// Standard-rate bound, seconds after `origin`.
    send_time: f64,
    /// Catch-up bound, seconds after `origin`.
    send_time_burst: f64,
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
            origin: None,
            send_time: 0.0,
            send_time_burst: 0.0,
        }
    }

    /// True when no limit applies.
    pub fn is_unlimited(&self) -> bool {
        self.seconds_per_byte == 0.0
    }

    fn since_origin(&mut self, now: Instant) -> (Instant, f64) {
        let origin = *self.origin.get_or_insert(now);
        (origin, now.saturating_duration_since(origin).as_secs_f64())
    }

    /// Before sending a packet at `now`: `None` to send now, or the instant to wait for
    /// (then call again).
    pub fn wait_until(&mut self, now: Instant) -> Option<Instant> {
        if self.is_unlimited() {
            return None;
        }
        let (origin, t) = self.since_origin(now);
        if self.rate_bytes >= self.burst_size {
            let bytes = self.rate_bytes as f64;
            let next = self.send_time + bytes * self.seconds_per_byte;
            let next_burst = self.send_time_burst + bytes * self.seconds_per_byte_burst;
            let target = next.max(next_burst);
            // Instants have nanosecond resolution: within a nanosecond counts as
            // reached, or a caller sleeping until the returned instant would spin.
            if t + 1e-9 < target {
                return Some(origin + Duration::from_secs_f64(target));
            }
            self.send_time = next;
            // The catch-up bound counts from when this burst really goes out.
            self.send_time_burst = t.max(target);
            self.rate_bytes = 0;
        }
        None
    }

    /// Records that `bytes` were sent.
    pub fn sent(&mut self, bytes: usize) {
        self.rate_bytes += bytes;
    }

    /// The sender had nothing to send until `now`: do not catch up on that time.
    pub fn resume(&mut self, now: Instant) {
        if self.is_unlimited() {
            return;
        }
        let (_, t) = self.since_origin(now);
        let pending = self.rate_bytes as f64 * self.seconds_per_byte;
        if self.send_time + pending < t {
            self.send_time = t - pending;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(d: Duration) -> f64 {
        d.as_secs_f64() * 1e3
    }

    #[test]
    fn bursts_then_waits() {
        let t0 = Instant::now();
        let mut r = RateLimiter::new(1000.0, 100, 1.05);
        assert_eq!(r.wait_until(t0), None);
        r.sent(100);
        let w = r.wait_until(t0).unwrap();
        assert!((ms(w - t0) - 100.0).abs() < 0.01);
        assert_eq!(r.wait_until(w), None);
        // Overslept by a second: the next bursts follow at the catch-up rate (105 B
        // per 100 ms), not all at once.
        r.sent(100);
        let late = w + Duration::from_secs(1);
        assert_eq!(r.wait_until(late), None);
        r.sent(105);
        let next = r.wait_until(late).unwrap();
        assert!((ms(next - late) - 100.0).abs() < 0.01);
        assert!(RateLimiter::new(0.0, 10, 1.0).wait_until(t0).is_none());
    }

    #[test]
    fn idle_time_is_not_caught_up() {
        let t0 = Instant::now();
        let later = t0 + Duration::from_secs(10);
        for (resume, expected_ms) in [(true, 100.0), (false, 50.0)] {
            let mut r = RateLimiter::new(1000.0, 100, 2.0);
            assert_eq!(r.wait_until(t0), None);
            r.sent(100);
            // Idle for 10 s. With resume the standard bound moves up, so after the
            // next burst a full interval follows; without it the sender would race
            // at the catch-up rate (2x) to make up for the idle time.
            if resume {
                r.resume(later);
            }
            assert_eq!(r.wait_until(later), None);
            r.sent(100);
            let w = r.wait_until(later).unwrap();
            assert!(
                (ms(w - later) - expected_ms).abs() < 0.01,
                "resume {resume}"
            );
        }
    }

    #[test]
    fn long_runs_do_not_drift() {
        // 40 Gb/s in 65536-byte bursts: 13107.2 ns each. A million bursts must land
        // within a microsecond of 13.1072 s.
        let t0 = Instant::now();
        let mut r = RateLimiter::new(5e9, 65536, 1.05);
        let mut now = t0;
        assert_eq!(r.wait_until(now), None);
        for _ in 0..1_000_000 {
            r.sent(65536);
            if let Some(t) = r.wait_until(now) {
                now = t;
                assert_eq!(r.wait_until(now), None);
            }
        }
        assert!((ms(now - t0) - 13107.2).abs() < 1e-3);
    }
}
