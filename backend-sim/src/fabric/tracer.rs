//! [`Tracer`]: the observer that folds every fabric event into the run's [`TraceHash`]
//! and, when a `tracing` subscriber listens (`RUST_LOG=backend_sim=trace` under one that
//! reads it), logs it as a `tracing` event. Silent and cheap by default: with no
//! subscriber each event costs one disabled-callsite check.

use super::tap::{Seen, Tap};
use crate::clock::Nanos;
use crate::ids::PortId;
use crate::trace::{tag, TraceHash};
use tracing::trace;

/// The trace hash and the `tracing` log of the fabric.
#[derive(Debug, Default)]
pub(crate) struct Tracer {
    pub hash: TraceHash,
}

/// Folds a frame event: its time, port, index and length, then its first bytes.
fn fold_frame(h: &mut TraceHash, tag: u8, now: Nanos, port: PortId, index: u64, frame: &[u8]) {
    h.event(tag, &[now, u64::from(port.0), index, frame.len() as u64]);
    h.bytes_head(frame);
}

impl Tap for Tracer {
    fn seen(&mut self, ev: &Seen<'_>) {
        let h = &mut self.hash;
        match *ev {
            Seen::Transmit {
                now,
                port,
                index,
                frame,
            } => {
                fold_frame(h, tag::TRANSMIT, now, port, index, frame);
                trace!(now, %port, index, len = frame.len(), "transmit");
            }
            Seen::AtSwitch { now, from, index } => {
                h.event(tag::AT_SWITCH, &[now, u64::from(from.0), index]);
                trace!(now, %from, index, "at switch");
            }
            Seen::Arrive {
                now,
                port,
                index,
                frame,
            } => {
                fold_frame(h, tag::ARRIVE, now, port, index, frame);
                trace!(now, %port, index, len = frame.len(), "arrive");
            }
            Seen::Drop {
                now,
                port,
                index,
                reason,
            } => {
                h.event(tag::DROP, &[now, u64::from(port.0), index, reason as u64]);
                trace!(now, %port, index, ?reason, "drop");
            }
            Seen::Duplicate { now, port, index } => {
                h.event(tag::DUPLICATE, &[now, u64::from(port.0), index]);
                trace!(now, %port, index, "duplicate");
            }
            Seen::Corrupt { index, bit } => {
                h.event(tag::CORRUPT, &[index, bit as u64]);
                trace!(index, bit, "corrupt");
            }
            Seen::Timer { now, token } => {
                h.event(tag::TIMER, &[now, token]);
                trace!(now, token, "timer");
            }
            Seen::Replay { now, id } => {
                h.event(tag::REPLAY, &[now, id as u64]);
                trace!(now, id, "replay");
            }
        }
    }
}
