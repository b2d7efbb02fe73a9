//! pcap sources: the UDP datagrams of a capture file, fed to a [`Stream`] as if they had
//! arrived on a socket.
//!
//! - [`PcapReader`]: records of classic pcap files (either byte order, micro- or
//!   nanosecond timestamps) and pcapng files (`netwire`'s reader).
//! - [`parse_frame`]: from a frame to its UDP datagram, for the link types Ethernet
//!   (with 802.1Q/802.1ad tags), Linux SLL and SLL2, raw IPv4 and BSD loopback. IPv4
//!   only; IP options are skipped by the header length (`netwire`'s decoder).
//! - [`PcapSource`]: both together, with a destination [`Filter`] and per-cause
//!   [`PcapStats`]; it yields [`Datagram`]s borrowed from one reused buffer (no
//!   allocation per packet) and can pump a [`Stream`].
//!
//! Frames that give no datagram (IP fragments, other protocols, frames captured short of
//! their length or with headers cut short, bad IPv4 header checksums, unsupported link
//! types) are counted by [`DropCause`] and skipped. A file that is cut short or corrupt
//! ends the source with a [`PcapError`] naming the byte offset; every record before it
//! has been delivered.
//!
//! ```
//! use spead::pcap::{Filter, PcapSource};
//! # fn demo(path: &std::path::Path) -> Result<(), spead::pcap::PcapError> {
//! let mut source = PcapSource::open(path, "239.10.0.1:7148".parse().unwrap())?;
//! while let Some(d) = source.next_datagram()? {
//!     println!("{} ns: {} -> {}, {} bytes", d.ts_ns, d.src, d.dst, d.payload.len());
//! }
//! println!("{:?}", source.stats());
//! # Ok(()) }
//! ```

mod filter;

#[cfg(test)]
mod tests;

use std::fs::File;
use std::io::{BufReader, Read};
use std::net::SocketAddrV4;
use std::path::Path;

use serde::Serialize;

pub use filter::{Filter, FilterError, PcapSpec};
pub use netwire::pcap::{
    link_type, parse_frame, DropCause, FileFormat, PcapError, PcapReader, Record, UdpFrame,
    MAX_RECORD,
};

use crate::recv::Stream;

/// A UDP datagram from a capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Datagram<'a> {
    /// Capture timestamp, nanoseconds since the Unix epoch (0 if the record had none).
    pub ts_ns: u64,
    /// Source address and port.
    pub src: SocketAddrV4,
    /// Destination address and port.
    pub dst: SocketAddrV4,
    /// The UDP payload (a SPEAD packet, for SPEAD traffic).
    pub payload: &'a [u8],
}

/// What a [`PcapSource`] did with the records it read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PcapStats {
    /// Records read.
    pub records: u64,
    /// UDP datagrams delivered.
    pub datagrams: u64,
    /// UDP datagrams skipped by the destination filter.
    pub filtered: u64,
    /// Frames of a link type this reader does not decode.
    pub unsupported_link_type: u64,
    /// Frames that are not IPv4.
    pub not_ipv4: u64,
    /// Frames captured short of their length, or with headers cut short.
    pub truncated: u64,
    /// IPv4 headers with impossible lengths.
    pub bad_ip_header: u64,
    /// IPv4 headers whose checksum does not verify.
    pub bad_ip_checksum: u64,
    /// IPv4 fragments.
    pub fragment: u64,
    /// IPv4 packets that are not UDP.
    pub not_udp: u64,
    /// UDP headers with impossible lengths.
    pub bad_udp_length: u64,
}

impl PcapStats {
    /// The counter of one drop cause.
    pub fn dropped_for(&self, cause: DropCause) -> u64 {
        match cause {
            DropCause::UnsupportedLinkType => self.unsupported_link_type,
            DropCause::NotIpv4 => self.not_ipv4,
            DropCause::Truncated => self.truncated,
            DropCause::BadIpHeader => self.bad_ip_header,
            DropCause::BadChecksum => self.bad_ip_checksum,
            DropCause::Fragment => self.fragment,
            DropCause::NotUdp => self.not_udp,
            DropCause::BadUdpLength => self.bad_udp_length,
        }
    }

    /// Frames dropped, all causes together (not counting [`Self::filtered`]).
    pub fn dropped(&self) -> u64 {
        DropCause::ALL.iter().map(|&c| self.dropped_for(c)).sum()
    }

    fn count(&mut self, cause: DropCause) {
        let c = match cause {
            DropCause::UnsupportedLinkType => &mut self.unsupported_link_type,
            DropCause::NotIpv4 => &mut self.not_ipv4,
            DropCause::Truncated => &mut self.truncated,
            DropCause::BadIpHeader => &mut self.bad_ip_header,
            DropCause::BadChecksum => &mut self.bad_ip_checksum,
            DropCause::Fragment => &mut self.fragment,
            DropCause::NotUdp => &mut self.not_udp,
            DropCause::BadUdpLength => &mut self.bad_udp_length,
        };
        *c += 1;
    }
}

impl std::fmt::Display for PcapStats {
    /// `N records, N datagrams, N filtered, N dropped (cause N, ...)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} records, {} datagrams, {} filtered, {} dropped",
            self.records,
            self.datagrams,
            self.filtered,
            self.dropped()
        )?;
        let mut sep = " (";
        for cause in DropCause::ALL {
            let n = self.dropped_for(cause);
            if n > 0 {
                write!(f, "{sep}{cause} {n}")?;
                sep = ", ";
            }
        }
        if sep == ", " {
            f.write_str(")")?;
        }
        Ok(())
    }
}

/// The UDP datagrams of a capture file, filtered by destination.
#[derive(Debug)]
pub struct PcapSource<R> {
    reader: PcapReader<R>,
    filter: Filter,
    verify_ip_checksum: bool,
    stats: PcapStats,
    done: bool,
}

impl PcapSource<BufReader<File>> {
    /// Opens a capture file.
    ///
    /// # Errors
    /// [`PcapError::Io`] when the file cannot be opened, and the errors of
    /// [`PcapReader::new`].
    pub fn open(path: impl AsRef<Path>, filter: Filter) -> Result<Self, PcapError> {
        let file =
            File::open(path.as_ref()).map_err(|source| PcapError::Io { offset: 0, source })?;
        Self::new(BufReader::with_capacity(1 << 16, file), filter)
    }
}

impl<R: Read> PcapSource<R> {
    /// Reads the header of a capture from `reader`. The IPv4 header checksum is checked.
    ///
    /// # Errors
    /// The errors of [`PcapReader::new`].
    pub fn new(reader: R, filter: Filter) -> Result<Self, PcapError> {
        Ok(Self {
            reader: PcapReader::new(reader)?,
            filter,
            verify_ip_checksum: true,
            stats: PcapStats::default(),
            done: false,
        })
    }

    /// Whether bad IPv4 header checksums drop a frame (default: yes).
    #[must_use]
    pub fn verify_ip_checksum(mut self, verify: bool) -> Self {
        self.verify_ip_checksum = verify;
        self
    }

    /// The filter.
    pub fn filter(&self) -> Filter {
        self.filter
    }

    /// The record reader (for the file format).
    pub fn reader(&self) -> &PcapReader<R> {
        &self.reader
    }

    /// Counters so far.
    pub fn stats(&self) -> &PcapStats {
        &self.stats
    }

    /// True once the file ended (or failed).
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// The next datagram that passes the filter; `None` at the end of the file.
    ///
    /// # Errors
    /// The [`PcapError`] of a truncated or corrupt file, or of a failing reader. Every
    /// datagram before the bad record has been returned; afterwards this returns
    /// `Ok(None)`.
    pub fn next_datagram(&mut self) -> Result<Option<Datagram<'_>>, PcapError> {
        let found = loop {
            let meta = match self.reader.advance() {
                Ok(Some(m)) => m,
                Ok(None) => {
                    self.done = true;
                    return Ok(None);
                }
                Err(e) => {
                    self.done = true;
                    return Err(e);
                }
            };
            self.stats.records += 1;
            if (meta.orig_len as usize) > meta.data.len() {
                self.stats.count(DropCause::Truncated);
                continue;
            }
            let frame = &self.reader.buffer()[meta.data.clone()];
            match netwire::pcap::locate(meta.link_type, frame, self.verify_ip_checksum) {
                Ok((src, dst, range)) if self.filter.matches(dst) => {
                    let start = meta.data.start + range.start;
                    break (meta.ts_ns, src, dst, start..meta.data.start + range.end);
                }
                Ok(_) => self.stats.filtered += 1,
                Err(cause) => self.stats.count(cause),
            }
        };
        self.stats.datagrams += 1;
        let (ts_ns, src, dst, range) = found;
        Ok(Some(Datagram {
            ts_ns,
            src,
            dst,
            payload: &self.reader.buffer()[range],
        }))
    }

    /// Hands up to `max` datagrams to `stream` (fewer at the end of the file or when the
    /// stream stops), as one batch. Returns how many were handed over.
    ///
    /// # Errors
    /// As [`Self::next_datagram`]; datagrams handed over before the error stay in the
    /// stream.
    pub fn pump(&mut self, stream: &mut Stream, max: usize) -> Result<usize, PcapError> {
        let mut n = 0;
        let mut result = Ok(());
        while n < max && !stream.is_stopped() {
            match self.next_datagram() {
                Ok(Some(d)) => {
                    // Rejections are counted by the stream.
                    let _ = stream.add_datagram(d.payload);
                    n += 1;
                }
                Ok(None) => break,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        if stream.is_stopped() {
            self.done = true;
        }
        stream.note_batch(n);
        result.map(|()| n)
    }

    /// Pumps until the end of the file or a stop.
    ///
    /// # Errors
    /// As [`Self::pump`].
    pub fn run(&mut self, stream: &mut Stream) -> Result<(), PcapError> {
        while !self.done {
            self.pump(stream, 64)?;
        }
        Ok(())
    }
}
