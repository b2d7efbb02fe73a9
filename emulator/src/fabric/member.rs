//! The process's host as a member of the fabric: the progress thread's rounds, which
//! inject what the `Receiver` takes and move the simulation on the wall clock.

use std::sync::{Arc, Mutex, PoisonError};

use backend_sim::fabric::ExternalMsg;
use backend_sim::{Nanos, PortId, Sim};

use super::client::{Receiver, Sender};
use super::stall::StallWatch;

/// Most frames taken from the ring in one round (the rest wait for the next).
const RECV_BATCH: usize = 256;

/// Most virtual time one round moves on (nanoseconds). A round that comes later than that
/// after the last (the process was not scheduled for a while, on a loaded machine) counts
/// the rest as a pause, as [`Member::pump`] counts a full ring: what arrived meanwhile is
/// handled first, so the NIC's timers do not fire for the time its process did not run
/// (an RC requester descheduled for longer than its ACK timeout would otherwise retry
/// although the responses sat in its ring), and a NIC sending at its link's rate sends
/// after a stall what the link takes in MAX_STEP, not all it would have sent meanwhile.
const MAX_STEP: Nanos = 250_000;

/// Frames the NIC takes from the rings (where they lie, `Sim::receive`) before the
/// simulation runs what they started (completions, replies), within a round.
const INJECT_CHUNK: usize = 16;

/// The process's host as a member of the fabric: its external port and what the fabric
/// sends it.
#[derive(Debug)]
pub struct Member {
    rx: Receiver,
    tx: Arc<Mutex<Sender>>,
    port: PortId,
    /// How far virtual time is behind the wall clock: the time spent paused.
    lag: Nanos,
    /// The wall-clock time of the last round.
    last: Nanos,
    /// When a [`Member::pump`] last took frames.
    took_at: Option<Nanos>,
    /// Whether a reader of this host's rings stopped reading.
    stalls: StallWatch,
}

impl Member {
    /// `port` of `sim` leads to the fabric from now on: what it sends goes out through
    /// `tx` as it is sent, and [`Member::pump`] brings in what `rx` receives. Virtual
    /// time stops where it stands until the first pump.
    ///
    /// # Errors
    /// The port does not exist.
    pub fn new(sim: &Sim, port: PortId, tx: Sender, rx: Receiver) -> Result<Self, String> {
        let tx = Arc::new(Mutex::new(tx));
        let sink = Arc::clone(&tx);
        sim.with_fabric(|f| {
            f.set_external(port)?;
            f.set_horizon(Some(f.now()));
            f.set_external_sink(Some(Box::new(move |_, msg: &mut ExternalMsg| {
                sink.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .send(msg);
            })));
            Ok::<_, backend_sim::FabricError>(())
        })
        .map_err(|e| format!("the host's port: {e}"))?;
        Ok(Member {
            rx,
            tx,
            port,
            lag: 0,
            last: 0,
            took_at: None,
            stalls: StallWatch::default(),
        })
    }

    /// The descriptors to poll before sleeping (see [`Receiver::poll_fds`]).
    pub fn poll_fds(&self, fds: &mut Vec<libc::pollfd>) {
        self.rx.poll_fds(fds);
    }

    /// Moves what the NIC sent and the ring had no room for into the ring, as far as it
    /// has room; how many frames still wait.
    pub fn flush(&self) -> usize {
        let mut tx = self.tx.lock().unwrap_or_else(PoisonError::into_inner);
        tx.flush();
        tx.waiting()
    }

    /// Before the progress thread sleeps: true if frames are waiting already.
    #[must_use]
    pub fn about_to_sleep(&self) -> bool {
        self.rx.about_to_sleep()
    }

    /// One round at wall-clock time `now` (virtual nanoseconds): injects what the fabric
    /// sent, then lets the simulation run up to `now` and no further (the NIC handles the
    /// frames; what it sends in turn leaves through the sink at once), then reads the
    /// socket's messages: a connection manager's message comes after the frames the
    /// fabric put in the ring before it, as on a wire. Two turns of the simulation's
    /// lock: a program polling a CQ in a loop takes it all the time.
    ///
    /// A round moves virtual time on by [`MAX_STEP`] at most; the rest counts as a pause.
    ///
    /// While frames the NIC sent still wait for room in the ring (the fabric paused this
    /// host: see `PAUSE_BYTES` in the fabric's server), or a ring's reader has left
    /// frames in it unread for [`super::stall::STALL`] (the peer's process or the fabric
    /// did not run: [`StallWatch`]), virtual time stands still: the NIC sends nothing
    /// new and its timers wait, as a NIC paused by its switch, and what comes in is still
    /// taken and handled at the current virtual time. Afterwards virtual time goes on
    /// from where it stood (it stays behind the wall clock by the time spent paused), so
    /// that no timer fires for the pause: an RC requester does not give up on a peer
    /// whose process was stopped while the requests waited for it.
    pub fn pump(&mut self, sim: &Sim, now: Nanos) {
        if self.advance(sim, now) > 0 {
            self.took_at = Some(now);
        }
        self.rx.read_control();
        let news = self.rx.take_news();
        if !news.is_empty() {
            let mut tx = self.tx.lock().unwrap_or_else(PoisonError::into_inner);
            for n in news {
                tx.apply(n);
            }
        }
        self.rx.settle();
    }

    /// True if a [`Member::pump`] took frames from the ring less than `within`
    /// nanoseconds before `now` (more are likely to come soon).
    #[must_use]
    pub fn took_frames_within(&self, now: Nanos, within: Nanos) -> bool {
        self.took_at.is_some_and(|t| now.saturating_sub(t) < within)
    }

    /// Injects what the ring holds and runs the simulation up to `now` (see
    /// [`Member::pump`]); how many frames it took.
    fn advance(&mut self, sim: &Sim, now: Nanos) -> usize {
        let clear = {
            let mut tx = self.tx.lock().unwrap_or_else(PoisonError::into_inner);
            // Not `&&`: the watch sees every round's marks.
            let flushed = tx.flush();
            !self.stalls.stalled(now, tx.marks()) & flushed
        };
        if !clear {
            self.lag += now.saturating_sub(self.last);
        }
        self.last = self.last.max(now);
        let target = now.saturating_sub(self.lag);
        let port = self.port;
        let rx = &mut self.rx;
        let horizon = sim.with_fabric(|f| {
            let from = f.now();
            let horizon = if clear {
                target.clamp(from, from + MAX_STEP)
            } else {
                from
            };
            f.set_horizon(Some(horizon));
            horizon
        });
        // A round that comes late (the process was not scheduled) moves virtual time on by
        // MAX_STEP at most: the rest counts as a pause.
        if clear {
            self.lag += target.saturating_sub(horizon);
        }
        let mut taken = 0;
        loop {
            let got = sim.receive(|deliver| {
                for n in 0..INJECT_CHUNK {
                    // The NIC reads the frame where it lies in the ring (the ring checked
                    // its length: the port refuses nothing else).
                    let took = rx.take(|frame, index, sealed| deliver(port, frame, index, sealed));
                    if took.is_none() {
                        return n;
                    }
                }
                INJECT_CHUNK
            });
            // What the frames started (completions, replies), then the timers due by the
            // horizon: a frame that waited in the ring is handled before a timer it would
            // have stopped (an RC ACK before the requester's ACK timeout).
            sim.run_for(Nanos::MAX);
            taken += got;
            if got < INJECT_CHUNK || taken >= RECV_BATCH {
                self.rx.round_done();
                return taken;
            }
        }
    }

    /// [`Member::pump`] without reading the socket, for a program's thread that polls a
    /// CQ: it takes what the fabric put in the ring and moves the simulation to `now`,
    /// and leaves the connection manager's messages (and the doorbells) to the progress
    /// thread, which reads them after the frames before them, as `pump` does.
    pub fn pump_frames(&mut self, sim: &Sim, now: Nanos) {
        let _ = self.advance(sim, now);
    }
}
