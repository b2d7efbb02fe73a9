//! Rate limiting with spead2's semantics, on nanoseconds from any clock.
//!
//! spead2 sends `burst_size` bytes back to back, then waits. Two lower bounds govern
//! the next burst: the standard one advances by `burst / rate` per burst regardless of
//! when bursts really went out, and the catch-up one is the time the burst was
//! actually sent plus `burst / (rate * burst_rate_ratio)`. So after oversleeping the
//! sender catches up, but never faster than the catch-up rate. After a sender was idle
//! ([`RateLimiter::resume`]) the standard bound is moved to now, so idleness is not
//! "caught up". Bytes are whatever the caller counts (SPEAD packet bytes for the UDP
//! sender, UDP/IP headers excluded). The standard bound is kept as an `f64` offset
//! from the first instant seen, so rounding does not drift.
//!
//! This type is sans-IO: times are nanoseconds on the caller's clock (wall time since
//! some start for a real sender, the simulator's virtual time for a simulated one);
//! the caller asks when it may send and does the waiting.

/// spead2's default burst size.
pub const DEFAULT_BURST_SIZE: usize = 65536;
/// spead2's default burst rate ratio.
pub const DEFAULT_BURST_RATE_RATIO: f64 = 1.05;

/// A rate limiter (sans-IO) on nanosecond timestamps.
#[derive(Debug, Clone)]
pub struct RateLimiter {
    ns_per_byte: f64,
    ns_per_byte_burst: f64,
    burst_size: usize,
    rate_bytes: usize,
    /// The first timestamp seen; the bounds count from it.
    origin: Option<u64>,
    /// Standard-rate bound, ns after `origin`.
    send_time: f64,
    /// Catch-up bound, ns after `origin`.
    send_time_burst: f64,
}

impl RateLimiter {
    /// `rate` in bytes per second (0 = unlimited), burst in bytes (at least 1; a burst
    /// of 1 waits after every send), and catch-up ratio (at least 1).
    pub fn new(rate: f64, burst_size: usize, burst_rate_ratio: f64) -> Self {
        let (per_byte, per_byte_burst) = if rate > 0.0 {
            (1e9 / rate, 1e9 / (rate * burst_rate_ratio.max(1.0)))
        } else {
            (0.0, 0.0)
        };
        Self {
            ns_per_byte: per_byte,
            ns_per_byte_burst: per_byte_burst,
            burst_size: burst_size.max(1),
            rate_bytes: 0,
            origin: None,
            send_time: 0.0,
            send_time_burst: 0.0,
        }
    }

    /// True when no limit applies.
    pub fn is_unlimited(&self) -> bool {
        self.ns_per_byte == 0.0
    }

    fn since_origin(&mut self, now_ns: u64) -> (u64, f64) {
        let origin = *self.origin.get_or_insert(now_ns);
        (origin, now_ns.saturating_sub(origin) as f64)
    }

    /// Before sending at `now_ns`: `None` to send now, or the time (ns, same clock) to
    /// wait for, then call again. The time returned is never earlier than the bound,
    /// so calling again at it gives `None`.
    pub fn wait_until(&mut self, now_ns: u64) -> Option<u64> {
        if self.is_unlimited() {
            return None;
        }
        let (origin, t) = self.since_origin(now_ns);
        if self.rate_bytes >= self.burst_size {
            let bytes = self.rate_bytes as f64;
            let next = self.send_time + bytes * self.ns_per_byte;
            let next_burst = self.send_time_burst + bytes * self.ns_per_byte_burst;
            let target = next.max(next_burst);
            if t < target {
                return Some(origin + target.ceil() as u64);
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

    /// The sender had nothing to send until `now_ns`: do not catch up on that time.
    pub fn resume(&mut self, now_ns: u64) {
        if self.is_unlimited() {
            return;
        }
        let (_, t) = self.since_origin(now_ns);
        let pending = self.rate_bytes as f64 * self.ns_per_byte;
        if self.send_time + pending < t {
            self.send_time = t - pending;
        }
    }
}

/// The clock a rate-limited sender reads and waits on, in nanoseconds: the wall clock
/// ([`WallClock`]) for real devices, the simulator's virtual time for simulated ones.
pub trait Clock {
    /// Nanoseconds now, from any fixed origin.
    fn now_ns(&mut self) -> u64;
    /// Waits until [`Clock::now_ns`] reaches `ns` (the simulator runs its events up to
    /// then).
    fn sleep_until(&mut self, ns: u64);
}

/// The wall clock: nanoseconds since the clock was made, waits by sleeping the thread.
#[derive(Debug, Clone, Copy)]
pub struct WallClock {
    epoch: std::time::Instant,
}

impl WallClock {
    /// A clock starting at 0 now.
    pub fn new() -> Self {
        WallClock {
            epoch: std::time::Instant::now(),
        }
    }
}

impl Default for WallClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for WallClock {
    fn now_ns(&mut self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn sleep_until(&mut self, ns: u64) {
        let now = self.now_ns();
        if ns > now {
            std::thread::sleep(std::time::Duration::from_nanos(ns - now));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn bursts_then_waits() {
        let t0 = 5 * MS;
        let mut r = RateLimiter::new(1000.0, 100, 1.05);
        assert_eq!(r.wait_until(t0), None);
        r.sent(100);
        let w = r.wait_until(t0).unwrap();
        assert_eq!(w - t0, 100 * MS);
        assert_eq!(r.wait_until(w), None);
        // Overslept by a second: the next bursts follow at the catch-up rate (105 B
        // per 100 ms), not all at once.
        r.sent(100);
        let late = w + 1000 * MS;
        assert_eq!(r.wait_until(late), None);
        r.sent(105);
        let next = r.wait_until(late).unwrap();
        assert_eq!(next - late, 100 * MS);
        assert!(RateLimiter::new(0.0, 10, 1.0).wait_until(t0).is_none());
    }

    #[test]
    fn a_burst_of_one_byte_paces_every_send() {
        // 1 GB/s, 1000-byte sends: one every microsecond, exactly, whenever asked.
        let mut r = RateLimiter::new(1e9, 1, 1.0);
        let mut now = 0;
        for k in 1..=1000u64 {
            assert_eq!(r.wait_until(now), None);
            r.sent(1000);
            now = r.wait_until(now + 10).unwrap();
            assert_eq!(now, k * 1000);
        }
    }

    #[test]
    fn idle_time_is_not_caught_up() {
        let t0 = 0;
        let later = t0 + 10_000 * MS;
        for (resume, expected_ms) in [(true, 100), (false, 50)] {
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
            assert_eq!(w - later, expected_ms * MS, "resume {resume}");
        }
    }

    #[test]
    fn long_runs_do_not_drift() {
        // 40 Gb/s in 65536-byte bursts: 13107.2 ns each. A million bursts must land
        // within a nanosecond of 13.1072 s.
        let t0 = 1;
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
        assert!((now - t0).abs_diff(13_107_200_000) <= 1, "{}", now - t0);
    }
}
