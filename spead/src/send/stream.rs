//! Sending several heaps: heap counters, interleaving and substreams.
//!
//! spead2's `send_heaps` sends a group of heaps either serially (all packets of one
//! heap, then the next) or round robin (one packet of each heap in turn); each heap
//! goes to a substream (destination index). This is the sans-IO part: it yields
//! packets into caller buffers, tagged with their substream.

use super::heap::Heap;
use super::packetizer::{Packetizer, Part, SendError};

/// How packets of a group of heaps are ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GroupMode {
    /// One packet from each unfinished heap in turn.
    #[default]
    RoundRobin,
    /// Each heap completely before the next.
    Serial,
}

/// Heap counters as spead2 assigns them: `first`, `first + step`, ...
#[derive(Debug, Clone, Copy)]
pub struct CntSequence {
    next: u64,
    step: u64,
}

impl Default for CntSequence {
    fn default() -> Self {
        Self { next: 1, step: 1 }
    }
}

impl CntSequence {
    /// A sequence starting at `first` with increment `step`.
    pub fn new(first: u64, step: u64) -> Self {
        Self { next: first, step }
    }

    /// The next counter.
    pub fn next_cnt(&mut self) -> u64 {
        let c = self.next;
        self.next = self.next.wrapping_add(self.step);
        c
    }
}

/// A heap with its counter and destination substream.
#[derive(Debug, Clone, Copy)]
pub struct HeapReference<'h> {
    /// The heap.
    pub heap: &'h Heap,
    /// Its HEAP_CNT.
    pub cnt: u64,
    /// Index of the destination (substream).
    pub substream: usize,
}

/// Packets of a group of heaps, interleaved per [`GroupMode`].
#[derive(Debug)]
pub struct HeapGroup<'h> {
    gens: Vec<(Packetizer<'h>, usize)>,
    mode: GroupMode,
    next: usize,
}

impl<'h> HeapGroup<'h> {
    /// Prepares a group.
    ///
    /// # Errors
    /// The first heap's [`SendError`], if any cannot be sent.
    pub fn new(
        heaps: &[HeapReference<'h>],
        max_packet_size: usize,
        mode: GroupMode,
    ) -> Result<Self, SendError> {
        let gens = heaps
            .iter()
            .map(|h| Packetizer::new(h.heap, h.cnt, max_packet_size).map(|p| (p, h.substream)))
            .collect::<Result<_, _>>()?;
        Ok(Self {
            gens,
            mode,
            next: 0,
        })
    }

    /// Writes the next packet into `buf`: its length and substream, or `None` at the end.
    ///
    /// # Errors
    /// [`SendError::BufferTooSmall`] if `buf` is too short.
    pub fn next_packet(&mut self, buf: &mut [u8]) -> Result<Option<(usize, usize)>, SendError> {
        Ok(self
            .next_with(|p| p.next_packet(buf))?
            .map(|(len, i)| (len, self.gens[i].1)))
    }

    /// As [`Packetizer::next_packet_parts`] for the next packet of the group: the prefix
    /// length written into `buf` and the index in the group of the heap it belongs to,
    /// or `None` at the end.
    ///
    /// # Errors
    /// [`SendError::BufferTooSmall`] if `buf` is too short.
    pub fn next_packet_parts(
        &mut self,
        buf: &mut [u8],
        parts: &mut Vec<Part<'h>>,
    ) -> Result<Option<(usize, usize)>, SendError> {
        self.next_with(|p| p.next_packet_parts(buf, parts))
    }

    /// True when the heap at `index` of the group has no packet left.
    pub fn is_done(&self, index: usize) -> bool {
        !self.gens[index].0.has_next()
    }

    fn next_with(
        &mut self,
        mut cut: impl FnMut(&mut Packetizer<'h>) -> Result<Option<usize>, SendError>,
    ) -> Result<Option<(usize, usize)>, SendError> {
        let n = self.gens.len();
        for _ in 0..n {
            let i = self.next;
            let gen = &mut self.gens[i].0;
            if let Some(len) = cut(gen)? {
                if self.mode == GroupMode::RoundRobin || !gen.has_next() {
                    self.next = (i + 1) % n;
                }
                return Ok(Some((len, i)));
            }
            self.next = (i + 1) % n;
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{decode_packet, Flavour};

    #[test]
    fn round_robin_and_serial() {
        let mut h = Heap::new(Flavour::SPEAD_64_40);
        h.add_item(0x1000, vec![1u8; 300], false);
        let refs = [
            HeapReference {
                heap: &h,
                cnt: 1,
                substream: 0,
            },
            HeapReference {
                heap: &h,
                cnt: 2,
                substream: 1,
            },
        ];
        let mut buf = vec![0u8; 256];
        for (mode, want) in [
            (GroupMode::RoundRobin, vec![1, 2, 1, 2]),
            (GroupMode::Serial, vec![1, 1, 2, 2]),
        ] {
            let mut g = HeapGroup::new(&refs, 200, mode).unwrap();
            let mut cnts = Vec::new();
            while let Some((len, sub)) = g.next_packet(&mut buf).unwrap() {
                let p = decode_packet(&buf[..len]).unwrap();
                assert_eq!(sub as u64 + 1, p.heap_cnt);
                cnts.push(p.heap_cnt);
            }
            assert_eq!(cnts, want);
        }
    }
}
