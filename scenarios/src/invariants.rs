//! The invariants every outcome must satisfy, whatever the faults.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::model::Scenario;
use crate::outcome::Outcome;

/// One broken invariant, precise enough to debug from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Receiver index, if the violation is a receiver's.
    pub receiver: Option<usize>,
    /// What went wrong.
    pub what: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.receiver {
            Some(r) => write!(f, "receiver {r}: {}", self.what),
            None => f.write_str(&self.what),
        }
    }
}

/// Checks every invariant and returns all violations (empty when the run is correct):
/// - a heap reported complete carries exactly the bytes sent (digest and length), unless
///   a buggy sender corrupted one of its packets' payload ([`Outcome::tainted`]: nothing
///   below the application can tell such a packet from a good one, so its heap may be
///   wrong, or another heap's, or one never sent); no other fault excuses wrong bytes;
/// - every heap a receiver reports was sent to a group it subscribes to;
/// - every sent heap is complete, incomplete, or lost; without faults, reported once;
/// - counters add up: packets received = accepted + dropped by cause;
/// - with no faults (and, for several senders, a substream per sender, and a consumer
///   that keeps up or has the slots to wait), every heap arrives complete, once and,
///   per sender, in order;
/// - memory stays within the configured bound.
pub fn check(s: &Scenario, o: &Outcome) -> Vec<Violation> {
    let mut v = Vec::new();
    let sent: BTreeMap<u64, &crate::outcome::SentHeap> =
        o.sent.iter().map(|h| (h.cnt, h)).collect();
    let expected_sent: u64 = s.senders.iter().map(|x| u64::from(x.heaps)).sum();
    if o.sent.len() as u64 != expected_sent {
        v.push(Violation {
            receiver: None,
            what: format!(
                "{} heaps sent, the scenario has {expected_sent}",
                o.sent.len()
            ),
        });
    }
    if o.receivers.len() != s.receivers.len() {
        v.push(Violation {
            receiver: None,
            what: format!(
                "{} receiver reports for {} receivers",
                o.receivers.len(),
                s.receivers.len()
            ),
        });
        return v;
    }
    for (r, rep) in o.receivers.iter().enumerate() {
        let mut bad = |what: String| {
            v.push(Violation {
                receiver: Some(r),
                what,
            })
        };
        let senders: BTreeSet<usize> = s.senders_of(r).into_iter().collect();
        // Loss-free delivery is owed only without faults, and, when several senders feed
        // the receiver, when each sender's heaps land in substreams of their own: heap
        // counters interleave senders (`heap_cnt`), so that holds when the substream
        // count is a multiple of the sender count. Otherwise a long heap of one sender
        // shares a ring of `max_heaps` slots with another sender's stream of new heaps,
        // and spead2 (like us) evicts it by design.
        let own_substreams =
            (s.receivers[r].substreams as usize).is_multiple_of(s.senders.len().max(1));
        // A slow consumer with fewer receive slots than packets in flight overruns its
        // buffer (the NIC drops what finds no posted receive): that loss is configured.
        let spec = &s.receivers[r];
        let packets_to_r: u64 = senders
            .iter()
            .map(|&x| u64::from(s.senders[x].heaps) * s.packets_per_heap(x))
            .sum();
        // Senders post up to 32 packets at once: a receiver needs room for such a burst
        // from each of its senders even when it keeps up.
        let burst = packets_to_r.min(32 * senders.len() as u64);
        let keeps_up = spec.buffer_slots as u64
            >= if spec.consumer_delay_ns == 0 {
                burst
            } else {
                packets_to_r
            };
        let owed = s.faults.is_none() && (senders.len() <= 1 || own_substreams) && keeps_up;
        let mut seen = BTreeSet::new();
        for h in &rep.heaps {
            // Under faults a heap may come out more than once (evicted part, then late or
            // duplicated packets start it again, as in spead2); without faults, once.
            if !seen.insert(h.cnt) && owed {
                bad(format!("heap {} delivered twice", h.cnt));
            }
            if o.tainted.contains(&h.cnt) {
                // What a buggy sender's packet did to this heap is not the receiver's.
                continue;
            }
            let Some(sh) = sent.get(&h.cnt) else {
                bad(format!("heap {} was never sent", h.cnt));
                continue;
            };
            if !senders.contains(&sh.sender) {
                bad(format!(
                    "heap {} comes from sender {}, whose group it does not subscribe to",
                    h.cnt, sh.sender
                ));
            }
            if h.complete {
                if h.received != sh.len as u64 || h.heap_len != sh.len as u64 {
                    bad(format!(
                        "complete heap {} has {} of {} bytes (sent {})",
                        h.cnt, h.received, h.heap_len, sh.len
                    ));
                }
                if h.digest != Some(sh.digest) {
                    bad(format!("complete heap {} carries bytes that were not sent (digest {:?}, sent {:#x})", h.cnt, h.digest, sh.digest));
                }
            } else if h.received > h.heap_len {
                bad(format!(
                    "incomplete heap {} has more bytes ({}) than its length ({})",
                    h.cnt, h.received, h.heap_len
                ));
            }
        }
        let dropped: u64 = rep.dropped.values().sum();
        if rep.packets_received != rep.packets_accepted + dropped {
            bad(format!(
                "counters do not add up: {} received != {} accepted + {dropped} dropped {:?}",
                rep.packets_received, rep.packets_accepted, rep.dropped
            ));
        }
        if rep.peak_memory > rep.memory_bound {
            bad(format!(
                "peak memory {} exceeds the bound {}",
                rep.peak_memory, rep.memory_bound
            ));
        }
        if owed {
            let expected: u64 = senders.iter().map(|&x| u64::from(s.senders[x].heaps)).sum();
            let complete = rep.heaps.iter().filter(|h| h.complete).count() as u64;
            if complete != expected || rep.heaps.len() as u64 != expected {
                bad(format!(
                    "no faults, yet {complete} of {expected} heaps complete ({} delivered)",
                    rep.heaps.len()
                ));
            }
            for &x in &senders {
                let cnts: Vec<u64> = rep
                    .heaps
                    .iter()
                    .map(|h| h.cnt)
                    .filter(|&c| sent.get(&c).is_some_and(|sh| sh.sender == x))
                    .collect();
                if cnts.windows(2).any(|w| w[0] > w[1]) {
                    bad(format!(
                        "no faults, yet sender {x}'s heaps arrived out of order: {cnts:?}"
                    ));
                }
            }
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::{ReceivedHeap, ReceiverReport, SentHeap};
    use crate::payload::{digest, heap_payload};

    fn perfect(s: &Scenario) -> Outcome {
        let mut sent = Vec::new();
        for (i, snd) in s.senders.iter().enumerate() {
            for k in 0..snd.heaps {
                let p = heap_payload(s.seed, i, k, snd.heap_size);
                sent.push(SentHeap {
                    sender: i,
                    cnt: s.heap_cnt(i, k),
                    len: p.len(),
                    digest: digest(&p),
                    packets: 1,
                });
            }
        }
        let heaps: Vec<ReceivedHeap> = sent
            .iter()
            .map(|h| ReceivedHeap {
                cnt: h.cnt,
                complete: true,
                digest: Some(h.digest),
                received: h.len as u64,
                heap_len: h.len as u64,
                at_ns: 0,
            })
            .collect();
        let n = heaps.len() as u64;
        let rep = ReceiverReport {
            heaps,
            packets_received: n,
            packets_accepted: n,
            memory_bound: 1,
            ..Default::default()
        };
        Outcome {
            packets_sent: n,
            receivers: vec![rep; s.receivers.len()],
            sent,
            trace_hash: None,
            tainted: Default::default(),
        }
    }

    #[test]
    fn a_perfect_run_passes() {
        let s = Scenario::simple(2, 5, 1000);
        assert_eq!(check(&s, &perfect(&s)), vec![]);
    }

    #[test]
    fn each_broken_invariant_is_reported() {
        let s = Scenario::simple(1, 5, 1000);
        let mut o = perfect(&s);
        o.receivers[0].heaps[1].digest = Some(1);
        let v = check(&s, &o);
        assert!(v.iter().any(|x| x.what.contains("not sent")), "{v:?}");

        let mut o = perfect(&s);
        o.receivers[0].heaps.swap(0, 1);
        assert!(check(&s, &o)
            .iter()
            .any(|x| x.what.contains("out of order")));

        let mut o = perfect(&s);
        o.receivers[0].heaps.pop();
        assert!(check(&s, &o).iter().any(|x| x.what.contains("4 of 5")));

        let mut o = perfect(&s);
        o.receivers[0].packets_received += 1;
        assert!(check(&s, &o)
            .iter()
            .any(|x| x.what.contains("do not add up")));

        let mut o = perfect(&s);
        o.receivers[0].peak_memory = 2;
        assert!(check(&s, &o).iter().any(|x| x.what.contains("peak memory")));

        // A heap a buggy sender corrupted may carry wrong bytes; no other may.
        let mut o = perfect(&s);
        o.receivers[0].heaps[1].digest = Some(1);
        o.receivers[0].heaps[2].cnt = 999;
        o.tainted = [o.receivers[0].heaps[1].cnt, 999].into();
        assert_eq!(check(&s, &o), vec![]);
        o.tainted.remove(&999);
        assert!(check(&s, &o).iter().any(|x| x.what.contains("never sent")));

        let mut o = perfect(&s);
        let h = o.receivers[0].heaps[0].clone(); // no faults in this scenario
        o.receivers[0].heaps.push(h);
        assert!(check(&s, &o).iter().any(|x| x.what.contains("twice")));
    }
}
