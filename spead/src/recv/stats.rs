//! Stream statistics, named as spead2 names them, with counters users register.
//!
//! spead2 (`src/recv_stream.cpp`, `make_default_stats`) keeps a vector of named values:
//! nine built-in ones in a fixed order (`heaps`, `incomplete_heaps_evicted`,
//! `incomplete_heaps_flushed`, `packets`, `batches`, `max_batch`, `single_packet_heaps`,
//! `search_dist`, `worker_blocked`), then custom ones added with
//! `stream_config::add_stat`, each a COUNTER (summed) or a MAXIMUM. Chunk streams add
//! `too_old_heaps` and `rejected_heaps` that way. We keep the same names, order and
//! indices, and add our own counters after them under their own names.

use std::sync::Arc;

use super::pool::PoolStats;

/// How two values of a statistic combine (spead2's `stream_stat_config::mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StatMode {
    /// Values add up.
    #[default]
    Counter,
    /// The larger value wins.
    Maximum,
}

impl StatMode {
    /// Combines two values.
    pub fn combine(self, a: u64, b: u64) -> u64 {
        match self {
            Self::Counter => a.wrapping_add(b),
            Self::Maximum => a.max(b),
        }
    }
}

/// spead2's built-in statistics, in spead2's order; [`Stats`] has a field for each.
pub const BUILTIN_STATS: [(&str, StatMode); 9] = [
    ("heaps", StatMode::Counter),
    ("incomplete_heaps_evicted", StatMode::Counter),
    ("incomplete_heaps_flushed", StatMode::Counter),
    ("packets", StatMode::Counter),
    ("batches", StatMode::Counter),
    ("max_batch", StatMode::Maximum),
    ("single_packet_heaps", StatMode::Counter),
    ("search_dist", StatMode::Counter),
    ("worker_blocked", StatMode::Counter),
];

/// Our counters beyond spead2's, in the order [`Stats::iter`] lists them.
const EXTRA_STATS: [&str; 11] = [
    "packets_dropped_in_order",
    "packets_duplicate",
    "packets_too_fragmented",
    "packets_malformed",
    "packets_inconsistent",
    "packets_too_large",
    "packets_after_stop",
    "packets_before_start",
    "incomplete_heaps_dropped",
    "pointers_dropped",
    "heaps_alloc_failed",
];

/// A statistic name that is already taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a statistic called {0:?} already exists")]
pub struct DuplicateStat(pub String);

/// The custom statistics of a stream: names and modes, after spead2's nine.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatsConfig {
    custom: Vec<(String, StatMode)>,
}

impl StatsConfig {
    /// Registers a statistic and returns its index (spead2's: 9 for the first custom
    /// one), as spead2's `stream_config::add_stat`.
    ///
    /// # Errors
    /// [`DuplicateStat`] when the name is a built-in, one of ours or already added.
    pub fn add(&mut self, name: &str, mode: StatMode) -> Result<usize, DuplicateStat> {
        if self.index(name).is_some() || EXTRA_STATS.contains(&name) {
            return Err(DuplicateStat(name.to_string()));
        }
        self.custom.push((name.to_string(), mode));
        Ok(BUILTIN_STATS.len() + self.custom.len() - 1)
    }

    /// The index of a built-in or custom statistic.
    pub fn index(&self, name: &str) -> Option<usize> {
        BUILTIN_STATS
            .iter()
            .map(|(n, _)| *n)
            .chain(self.custom.iter().map(|(n, _)| n.as_str()))
            .position(|n| n == name)
    }

    /// Number of custom statistics.
    pub fn custom_len(&self) -> usize {
        self.custom.len()
    }
}

/// Counters of a receive stream. The first nine fields are spead2's, with spead2's
/// meaning; custom counters follow at spead2's indices; the rest are ours.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Heaps that left the stream (complete, evicted or flushed).
    pub heaps: u64,
    /// Incomplete heaps evicted to make room for a new heap.
    pub incomplete_heaps_evicted: u64,
    /// Incomplete heaps flushed at stop (an incomplete stop heap among them).
    pub incomplete_heaps_flushed: u64,
    /// Packets offered to heap assembly (after decoding).
    pub packets: u64,
    /// Batches of packets (one per `recvmmsg`, buffer, ...).
    pub batches: u64,
    /// Largest batch.
    pub max_batch: u64,
    /// Heaps that arrived in a single packet.
    pub single_packet_heaps: u64,
    /// Heap look-ups (one probe each).
    pub search_dist: u64,
    /// Times a worker blocked on a full queue of heaps.
    pub worker_blocked: u64,
    /// Packets dropped by in-order mode (gaps, duplicates, new heaps not at offset 0).
    pub packets_dropped_in_order: u64,
    /// Packets dropped by out-of-order mode as duplicates or overlaps.
    pub packets_duplicate: u64,
    /// Packets dropped because their heap already had `max_ranges_per_heap` ranges.
    pub packets_too_fragmented: u64,
    /// Packets that failed to decode (every [`crate::wire::WireError`]).
    pub packets_malformed: u64,
    /// Packets whose HEAP_LENGTH or flavour disagreed with their heap's.
    pub packets_inconsistent: u64,
    /// Packets of heaps longer than `max_heap_size` (or unsized when not allowed).
    pub packets_too_large: u64,
    /// Packets arriving after the stream stopped.
    pub packets_after_stop: u64,
    /// Packets offered before [`super::Stream::start`] on an `explicit_start` stream.
    pub packets_before_start: u64,
    /// Incomplete heaps dropped rather than delivered.
    pub incomplete_heaps_dropped: u64,
    /// Item pointers dropped because a heap had `max_pointers_per_heap`.
    pub pointers_dropped: u64,
    /// Packets dropped because memory for their heap could not be had.
    pub heaps_alloc_failed: u64,
    /// Heap payload buffer pool statistics.
    pub pool: PoolStats,
    custom_names: Arc<StatsConfig>,
    custom: Vec<u64>,
}

impl Stats {
    /// Zeroed statistics with the custom counters of `config`.
    pub fn new(config: &StatsConfig) -> Self {
        Self {
            custom_names: Arc::new(config.clone()),
            custom: vec![0; config.custom_len()],
            ..Self::default()
        }
    }

    fn builtin(&self) -> [u64; 9] {
        [
            self.heaps,
            self.incomplete_heaps_evicted,
            self.incomplete_heaps_flushed,
            self.packets,
            self.batches,
            self.max_batch,
            self.single_packet_heaps,
            self.search_dist,
            self.worker_blocked,
        ]
    }

    fn builtin_mut(&mut self) -> [&mut u64; 9] {
        [
            &mut self.heaps,
            &mut self.incomplete_heaps_evicted,
            &mut self.incomplete_heaps_flushed,
            &mut self.packets,
            &mut self.batches,
            &mut self.max_batch,
            &mut self.single_packet_heaps,
            &mut self.search_dist,
            &mut self.worker_blocked,
        ]
    }

    fn extras(&self) -> [u64; 11] {
        [
            self.packets_dropped_in_order,
            self.packets_duplicate,
            self.packets_too_fragmented,
            self.packets_malformed,
            self.packets_inconsistent,
            self.packets_too_large,
            self.packets_after_stop,
            self.packets_before_start,
            self.incomplete_heaps_dropped,
            self.pointers_dropped,
            self.heaps_alloc_failed,
        ]
    }

    fn extras_mut(&mut self) -> [&mut u64; 11] {
        [
            &mut self.packets_dropped_in_order,
            &mut self.packets_duplicate,
            &mut self.packets_too_fragmented,
            &mut self.packets_malformed,
            &mut self.packets_inconsistent,
            &mut self.packets_too_large,
            &mut self.packets_after_stop,
            &mut self.packets_before_start,
            &mut self.incomplete_heaps_dropped,
            &mut self.pointers_dropped,
            &mut self.heaps_alloc_failed,
        ]
    }

    /// Every statistic by name: spead2's nine, the custom ones, then ours.
    pub fn iter(&self) -> Vec<(&str, u64)> {
        let builtin = self.builtin();
        let mut out: Vec<(&str, u64)> = BUILTIN_STATS
            .iter()
            .zip(builtin)
            .map(|((n, _), v)| (*n, v))
            .collect();
        out.extend(
            self.custom_names
                .custom
                .iter()
                .zip(&self.custom)
                .map(|((n, _), v)| (n.as_str(), *v)),
        );
        out.extend(EXTRA_STATS.iter().copied().zip(self.extras()));
        out
    }

    /// A statistic by name (spead2's `stream_stats::find`).
    pub fn get(&self, name: &str) -> Option<u64> {
        self.iter()
            .into_iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v)
    }

    /// A built-in or custom statistic by spead2 index.
    pub fn value(&self, index: usize) -> Option<u64> {
        match index.checked_sub(BUILTIN_STATS.len()) {
            None => Some(self.builtin()[index]),
            Some(i) => self.custom.get(i).copied(),
        }
    }

    /// A built-in or custom statistic by spead2 index, mutably.
    pub fn value_mut(&mut self, index: usize) -> Option<&mut u64> {
        match index.checked_sub(BUILTIN_STATS.len()) {
            None => self.builtin_mut().into_iter().nth(index),
            Some(i) => self.custom.get_mut(i),
        }
    }

    /// The custom counters, in registration order (index 9 is the first).
    pub fn custom(&self) -> &[u64] {
        &self.custom
    }

    /// The custom counters, mutably (what spead2 hands a place callback as
    /// `batch_stats`, without the built-in ones).
    pub fn custom_mut(&mut self) -> &mut [u64] {
        &mut self.custom
    }

    /// Combines `other` into `self` as spead2's `stream_stats::operator+=` does
    /// (counters add, maxima take the larger). Pool statistics are taken from `other`
    /// when `self` has none.
    ///
    /// # Errors
    /// [`StatsMismatch`] when the two have different custom statistics.
    pub fn combine(&mut self, other: &Stats) -> Result<(), StatsMismatch> {
        if self.custom_names.custom != other.custom_names.custom {
            return Err(StatsMismatch);
        }
        for (i, (a, b)) in self
            .builtin_mut()
            .into_iter()
            .zip(other.builtin())
            .enumerate()
        {
            *a = BUILTIN_STATS[i].1.combine(*a, b);
        }
        let modes: Vec<StatMode> = self.custom_names.custom.iter().map(|c| c.1).collect();
        for ((a, b), m) in self.custom.iter_mut().zip(&other.custom).zip(modes) {
            *a = m.combine(*a, *b);
        }
        for (a, b) in self.extras_mut().into_iter().zip(other.extras()) {
            *a += b;
        }
        if self.pool == PoolStats::default() {
            self.pool = other.pool;
        }
        Ok(())
    }
}

/// Statistics with different custom counters cannot be combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("statistics have different custom counters and cannot be combined")]
pub struct StatsMismatch;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_order_and_indices_follow_spead2() {
        let mut cfg = StatsConfig::default();
        assert_eq!(cfg.add("too_old_heaps", StatMode::Counter), Ok(9));
        assert_eq!(cfg.add("peak", StatMode::Maximum), Ok(10));
        assert_eq!(
            cfg.add("heaps", StatMode::Counter),
            Err(DuplicateStat("heaps".into()))
        );
        assert_eq!(
            cfg.add("packets_malformed", StatMode::Counter),
            Err(DuplicateStat("packets_malformed".into()))
        );
        assert_eq!(cfg.index("worker_blocked"), Some(8));
        assert_eq!(cfg.index("peak"), Some(10));
        let mut s = Stats::new(&cfg);
        s.heaps = 3;
        s.max_batch = 5;
        *s.value_mut(9).unwrap() = 7;
        *s.value_mut(10).unwrap() = 4;
        let names: Vec<&str> = s.iter().iter().map(|(n, _)| *n).collect();
        assert_eq!(
            &names[..11],
            &[
                "heaps",
                "incomplete_heaps_evicted",
                "incomplete_heaps_flushed",
                "packets",
                "batches",
                "max_batch",
                "single_packet_heaps",
                "search_dist",
                "worker_blocked",
                "too_old_heaps",
                "peak"
            ]
        );
        assert_eq!(s.get("too_old_heaps"), Some(7));
        assert_eq!(s.get("nonsense"), None);
        assert_eq!(s.value(5), Some(5));
        assert_eq!(s.value(11), None);
        let mut t = s.clone();
        *t.value_mut(10).unwrap() = 2;
        t.max_batch = 9;
        t.combine(&s).unwrap();
        assert_eq!((t.heaps, t.max_batch), (6, 9));
        assert_eq!((t.value(9), t.value(10)), (Some(14), Some(4)));
        assert_eq!(t.combine(&Stats::default()), Err(StatsMismatch));
    }
}
