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
#[derive(Debug, Default, Clone)]
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
            Seen::Corrupt { index, bit, at } => {
                h.event(tag::CORRUPT, &[index, bit as u64, at as u64]);
                trace!(index, bit, ?at, "corrupt");
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

#[cfg(test)]
mod tests {
    use crate::fabric::Fabric;
    use std::net::Ipv4Addr;
    use std::sync::{Arc, Mutex};
    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::{Event, Metadata, Subscriber};

    /// A subscriber that keeps the message of every event.
    #[derive(Clone, Default)]
    struct Messages(Arc<Mutex<Vec<String>>>);

    struct Message<'a>(&'a mut String);

    impl Visit for Message<'_> {
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            if field.name() == "message" {
                *self.0 = format!("{value:?}");
            }
        }
    }

    impl Subscriber for Messages {
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, _: &Attributes<'_>) -> Id {
            Id::from_u64(1)
        }
        fn record(&self, _: &Id, _: &Record<'_>) {}
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, e: &Event<'_>) {
            let mut m = String::new();
            e.record(&mut Message(&mut m));
            self.0.lock().unwrap().push(m);
        }
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }

    #[test]
    fn every_hop_is_a_tracing_event_when_a_subscriber_listens() {
        let run = || {
            let mut f = Fabric::new(1);
            let (_, a) = f
                .add_host_with_port("a", Ipv4Addr::new(10, 0, 0, 1))
                .unwrap();
            f.add_host_with_port("b", Ipv4Addr::new(10, 0, 0, 2))
                .unwrap();
            let mut frame = vec![0u8; 60];
            frame[..6].copy_from_slice(&[2, 0, 10, 0, 0, 2]);
            f.transmit(a, frame).unwrap();
            f.schedule_timer(10, 7);
            f.drain();
            f.trace_hash()
        };
        let seen = Messages::default();
        let hash = tracing::subscriber::with_default(seen.clone(), run);
        assert_eq!(
            *seen.0.lock().unwrap(),
            ["transmit", "timer", "at switch", "arrive"]
        );
        // Listening changes nothing in the run.
        assert_eq!(hash, run());
    }
}
