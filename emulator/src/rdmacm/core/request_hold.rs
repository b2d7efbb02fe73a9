//! How long a connection-manager request from another host's process is held: a message
//! carries how long before it the sending host's NIC sent its last frame (its gap,
//! [`crate::rdmacm::core::messages::encode`]), so that the receiver can keep the spacing
//! the two had on the sender's side (see [`crate::fabric::spacing`]): a request is
//! handled no sooner after the frames before it than it was sent after them, as on one
//! wire.
//!
//! Why a request: its outcome depends on the receiver's timing. perftest's `-R` server
//! (4.5-0.17) listens for its data connection only once the send of its last handshake
//! message has completed, and its client connects as soon as that message arrived; on a
//! network the client's setup (milliseconds) lets the ACK reach the server long before
//! the REQ. Through the fabric process on a loaded machine the two arrived together, the
//! REQ found no listener and was rejected (`IB_CM_REJ_INVALID_SERVICE_ID`, as the
//! kernel's `cm_match_req` answers), and perftest's retry after a rejection uses the ids
//! it has just destroyed (fixed upstream by perftest commit 3d9d8d0): the client
//! crashed and its server waited for ever.

use std::time::{Duration, Instant};

use crate::fabric::spacing::{polls, Taken};

/// The most a request is held back: the sender's gap beyond it is not kept. It bounds the
/// wait when the frames the receiver took last were sent after the request (not before
/// it, as the hold assumes).
pub const MAX_HOLD: Duration = Duration::from_millis(100);

/// How long, from `now`, a request must wait: until `gap` (at most [`MAX_HOLD`]) after
/// the receiver took the sender's frames (`frames_taken`). Nothing to wait without
/// either.
#[must_use]
pub fn hold(frames_taken: Option<Instant>, gap: Option<Duration>, now: Instant) -> Duration {
    match (frames_taken, gap) {
        (Some(t), Some(g)) => (t + g.min(MAX_HOLD)).saturating_duration_since(now),
        _ => Duration::ZERO,
    }
}

/// How often [`hold_request`] looks whether the program has polled.
const LOOK_EVERY: Duration = Duration::from_micros(50);

/// Holds a request whose sender sent it `gap` after the frames this process took
/// (`frames_taken`), and which arrived (was read from the fabric's socket) at `arrived`.
/// A request that arrived at least `gap` after those frames kept its spacing, and needs
/// no wait once a CQ poll of the program has returned completions since they were
/// taken. Otherwise it waits until the program has seen what those frames did, its
/// first CQ poll that returned completions after they were taken (a program whose thread
/// was not running when they came has had no time to react yet; at most [`MAX_HOLD`] is
/// spent waiting for it), and then `gap` (at most [`MAX_HOLD`]) more. The spacing is judged at the arrival, not when this thread gets
/// to the request: on a loaded machine it may run late itself.
pub fn hold_request(frames_taken: Option<Taken>, gap: Option<Duration>, arrived: Instant) {
    let (Some(taken), Some(_)) = (frames_taken, gap) else {
        return;
    };
    if hold(Some(taken.at), gap, arrived).is_zero() && polls() != taken.polls {
        return;
    }
    let give_up = Instant::now() + MAX_HOLD;
    while polls() == taken.polls && Instant::now() < give_up {
        std::thread::sleep(LOOK_EVERY);
    }
    let seen = Instant::now();
    std::thread::sleep(hold(Some(seen), gap, seen));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_waits_for_the_rest_of_its_senders_gap() {
        let t = Instant::now();
        let ms = Duration::from_millis;
        // Frames taken at t, request sent 3 ms after them: at t + 1 ms, 2 ms to go.
        assert_eq!(hold(Some(t), Some(ms(3)), t + ms(1)), ms(2));
        // Past the gap: at once.
        assert_eq!(hold(Some(t), Some(ms(3)), t + ms(5)), Duration::ZERO);
        // A gap beyond MAX_HOLD counts as MAX_HOLD.
        assert_eq!(hold(Some(t), Some(ms(5000)), t), MAX_HOLD);
        // No frame taken, or none sent: at once.
        assert_eq!(hold(None, Some(ms(3)), t), Duration::ZERO);
        assert_eq!(hold(Some(t), None, t), Duration::ZERO);
    }
}
