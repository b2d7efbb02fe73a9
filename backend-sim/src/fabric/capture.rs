//! [`Capture`]: the observer that writes frames to a pcap with their virtual timestamps,
//! as smoltcp's `PcapWriter` records a device's traffic. [`CaptureFilter::All`] records
//! every frame once, when a port transmits it; [`CaptureFilter::Port`] records what one
//! port transmits and receives, as tcpdump on its interface would.

use super::tap::{Seen, Tap};
use crate::clock::Nanos;
use crate::ids::PortId;
use crate::pcap::PcapWriter;
use std::io::{self, Write};

/// Which frames a capture records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaptureFilter {
    /// Every frame once, when a port transmits it.
    All,
    /// What this port transmits and receives, as tcpdump on its interface would show.
    Port(PortId),
}

/// Where the pcap bytes go.
#[derive(Debug)]
pub(crate) enum Sink {
    Memory(Vec<u8>),
    File(io::BufWriter<std::fs::File>),
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sink::Memory(v) => v.write(buf),
            Sink::File(f) => f.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Sink::Memory(_) => Ok(()),
            Sink::File(f) => f.flush(),
        }
    }
}

/// A running capture. The first write error is kept (and later frames skipped) so the
/// data path never fails because a disk did; [`Capture::finish`] reports it.
#[derive(Debug)]
pub(crate) struct Capture {
    filter: CaptureFilter,
    writer: PcapWriter<Sink>,
    error: Option<io::Error>,
}

impl Capture {
    pub fn new(filter: CaptureFilter, sink: Sink) -> io::Result<Self> {
        Ok(Capture {
            filter,
            writer: PcapWriter::new(sink)?,
            error: None,
        })
    }

    fn record(&mut self, ts: Nanos, frame: &[u8]) {
        if self.error.is_none() {
            if let Err(e) = self.writer.write(ts, frame) {
                self.error = Some(e);
            }
        }
    }

    /// Flushes and returns the sink (the bytes of a memory capture).
    ///
    /// # Errors
    /// The first write error, or the flush's.
    pub fn finish(self) -> io::Result<Sink> {
        if let Some(e) = self.error {
            return Err(e);
        }
        self.writer.finish()
    }
}

impl Tap for Capture {
    fn seen(&mut self, ev: &Seen<'_>) {
        match *ev {
            Seen::Transmit {
                now, port, frame, ..
            } if self.filter == CaptureFilter::All || self.filter == CaptureFilter::Port(port) => {
                self.record(now, frame);
            }
            Seen::Arrive {
                now, port, frame, ..
            } if self.filter == CaptureFilter::Port(port) => self.record(now, frame),
            _ => {}
        }
    }
}
