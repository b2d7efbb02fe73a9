//! Replay: a pcap's records as a frame source at one port, sent at their recorded spacing
//! as if that port's host had sent them (so the fault plan applies to them too).

use super::error::FabricError;
use crate::clock::Nanos;
use crate::frame::eth::Mac;
use crate::ids::PortId;
use crate::pcap::{to_ethernet, Converted, PcapError, PcapFile};
use std::collections::VecDeque;
use std::net::Ipv4Addr;

/// How to replay a pcap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReplayOptions {
    /// Virtual time of the first record (default: now). Later records keep their recorded
    /// spacing; a timestamp that goes backwards is sent right after its predecessor.
    pub start_at: Option<Nanos>,
}

/// What a replay scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplaySummary {
    /// Frames scheduled.
    pub frames: usize,
    /// Records skipped (not IPv4).
    pub skipped: usize,
    /// Virtual time of the first frame.
    pub first_at: Nanos,
    /// Virtual time of the last frame.
    pub last_at: Nanos,
}

/// A replay in progress: the frames still to send from `from`, each with its time.
#[derive(Debug)]
pub(crate) struct Replay {
    pub from: PortId,
    frames: VecDeque<(Nanos, Vec<u8>)>,
}

impl Replay {
    /// Converts every record of `pcap` (to Ethernet from `src_mac`, resolving unicast
    /// destinations with `resolve`) and times it from `start`. A bad record fails the
    /// whole replay, so a bad file schedules nothing.
    pub fn new(
        from: PortId,
        pcap: &PcapFile,
        src_mac: Mac,
        resolve: &dyn Fn(Ipv4Addr) -> Option<Mac>,
        start: Nanos,
    ) -> Result<(Self, ReplaySummary), FabricError> {
        let mut frames = VecDeque::with_capacity(pcap.records.len());
        let mut skipped = 0;
        let first_ts = pcap.records.first().map_or(0, |r| r.ts_ns);
        let mut last_at = start;
        for (index, rec) in pcap.records.iter().enumerate() {
            match to_ethernet(pcap.link_type, rec, src_mac, resolve) {
                Ok(Converted::Frame(f)) => {
                    let at = start
                        .saturating_add(rec.ts_ns.saturating_sub(first_ts))
                        .max(last_at);
                    last_at = at;
                    frames.push_back((at, f));
                }
                Ok(Converted::Skipped(_)) => skipped += 1,
                Err(reason) => {
                    return Err(PcapError::BadRecord {
                        index,
                        offset: 0,
                        reason,
                    }
                    .into());
                }
            }
        }
        let summary = ReplaySummary {
            frames: frames.len(),
            skipped,
            first_at: frames.front().map_or(start, |f| f.0),
            last_at,
        };
        Ok((Replay { from, frames }, summary))
    }

    /// When the next frame is due.
    pub fn next_at(&self) -> Option<Nanos> {
        self.frames.front().map(|f| f.0)
    }

    /// Takes the next frame; a finished replay gives its memory back.
    pub fn pop(&mut self) -> Option<Vec<u8>> {
        let f = self.frames.pop_front().map(|f| f.1);
        if self.frames.is_empty() {
            self.frames = VecDeque::new();
        }
        f
    }
}
