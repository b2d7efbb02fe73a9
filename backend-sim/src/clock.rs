//! The virtual clock: nanoseconds since the fabric was built. Nothing in the simulator
//! reads the wall clock; time moves only when the event loop takes the next event.

/// Virtual time in nanoseconds.
pub type Nanos = u64;

/// A monotonic virtual clock.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Clock {
    now: Nanos,
}

impl Clock {
    /// The current virtual time.
    #[must_use]
    pub fn now(&self) -> Nanos {
        self.now
    }

    /// Moves the clock forward to `t`; an earlier `t` leaves it where it is, so time never
    /// runs backwards whatever the caller passes.
    pub fn advance_to(&mut self, t: Nanos) {
        if t > self.now {
            self.now = t;
        }
    }
}
