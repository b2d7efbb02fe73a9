//! Replay: a pcap's records as a frame source, sent at their recorded spacing as if the
//! host of one port had sent them, or each from the port whose MAC is its source (a
//! capture of this fabric replayed in its transmit order); the fault plan applies to them
//! too.

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

/// A replay in progress: the frames still to send, each with its time and port.
#[derive(Debug, Clone)]
pub(crate) struct Replay {
    frames: VecDeque<(Nanos, PortId, Vec<u8>)>,
}

impl Replay {
    /// Converts every record of `pcap` (to Ethernet from `src_mac`, resolving unicast
    /// destinations with `resolve`), times it from `start` and sends it from the port
    /// `port_of` names for the frame. A bad record fails the whole replay, so a bad file
    /// schedules nothing.
    pub fn new(
        pcap: &PcapFile,
        src_mac: Mac,
        resolve: &dyn Fn(Ipv4Addr) -> Option<Mac>,
        port_of: &dyn Fn(&[u8]) -> PortId,
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
                    frames.push_back((at, port_of(&f), f));
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
        Ok((Replay { frames }, summary))
    }

    /// When the next frame is due.
    pub fn next_at(&self) -> Option<Nanos> {
        self.frames.front().map(|f| f.0)
    }

    /// Takes the next frame and the port it leaves from; a finished replay gives its
    /// memory back.
    pub fn pop(&mut self) -> Option<(PortId, Vec<u8>)> {
        let f = self.frames.pop_front().map(|f| (f.1, f.2));
        if self.frames.is_empty() {
            self.frames = VecDeque::new();
        }
        f
    }
}
