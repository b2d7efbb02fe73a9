//! The differential check: the same scenario (and drop list) on two backends must give
//! the same sets of complete and incomplete heaps and the same counters.

use std::collections::BTreeSet;

use crate::outcome::Outcome;

/// The differences between two outcomes of one scenario (empty when they agree):
/// per receiver, the complete heaps, the incomplete heaps (with their byte counts), the
/// packets received and accepted, and the drops by cause; and the packets sent.
pub fn compare(a: &Outcome, b: &Outcome) -> Vec<String> {
    let mut d = Vec::new();
    if a.packets_sent != b.packets_sent {
        d.push(format!(
            "packets sent: {} vs {}",
            a.packets_sent, b.packets_sent
        ));
    }
    if a.receivers.len() != b.receivers.len() {
        d.push(format!(
            "{} vs {} receivers",
            a.receivers.len(),
            b.receivers.len()
        ));
        return d;
    }
    for (r, (x, y)) in a.receivers.iter().zip(&b.receivers).enumerate() {
        let complete = |o: &crate::ReceiverReport| -> BTreeSet<(u64, Option<u64>)> {
            o.heaps
                .iter()
                .filter(|h| h.complete)
                .map(|h| (h.cnt, h.digest))
                .collect()
        };
        let incomplete = |o: &crate::ReceiverReport| -> BTreeSet<(u64, u64)> {
            o.heaps
                .iter()
                .filter(|h| !h.complete)
                .map(|h| (h.cnt, h.received))
                .collect()
        };
        if complete(x) != complete(y) {
            d.push(format!(
                "receiver {r}: complete heaps {:?} vs {:?}",
                complete(x),
                complete(y)
            ));
        }
        if incomplete(x) != incomplete(y) {
            d.push(format!(
                "receiver {r}: incomplete heaps {:?} vs {:?}",
                incomplete(x),
                incomplete(y)
            ));
        }
        if (x.packets_received, x.packets_accepted) != (y.packets_received, y.packets_accepted) {
            d.push(format!(
                "receiver {r}: packets received/accepted {}/{} vs {}/{}",
                x.packets_received, x.packets_accepted, y.packets_received, y.packets_accepted
            ));
        }
        if x.dropped != y.dropped {
            d.push(format!(
                "receiver {r}: drops {:?} vs {:?}",
                x.dropped, y.dropped
            ));
        }
    }
    d
}
