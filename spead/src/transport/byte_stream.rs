//! Packets back to back in a byte stream: TCP, files and memory buffers.
//!
//! This is the format spead2's `BytesStream` and TCP streams write. The reader finds
//! each packet's end from its header and pointers, and refuses packets longer than
//! `max_packet_size`, so a hostile length field never makes it buffer more.

use std::io::{self, Read, Write};

use crate::recv::Stream;
use crate::wire::packet_size;

/// Why a byte stream could not be followed to its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum StreamBreak {
    /// The bytes at `at` do not start a SPEAD packet.
    #[error("no SPEAD packet at byte {at}")]
    NotSpead {
        /// Offset in the stream.
        at: u64,
    },
    /// The packet at `at` is longer than the largest accepted.
    #[error("the packet at byte {at} is {size} bytes, more than the maximum of {max}")]
    TooLong {
        /// Offset in the stream.
        at: u64,
        /// The packet's size from its header.
        size: usize,
        /// The largest packet accepted.
        max: usize,
    },
    /// The stream ended inside the packet that starts at `at`.
    #[error("truncated: the stream ends inside the packet at byte {at}")]
    Truncated {
        /// Offset in the stream.
        at: u64,
    },
}

/// Feeds packets from a byte stream into a [`Stream`].
#[derive(Debug)]
pub struct ByteStreamReader<R> {
    reader: R,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    max_packet_size: usize,
    eof: bool,
    /// Bytes of the stream before `buf[start]`.
    consumed: u64,
    /// Bytes read from the stream.
    read: u64,
    broken: Option<StreamBreak>,
}

impl<R: Read> ByteStreamReader<R> {
    /// Reads from `reader`, accepting packets up to `max_packet_size` bytes.
    pub fn new(reader: R, max_packet_size: usize) -> Self {
        let cap = (4 * max_packet_size).max(1 << 20);
        Self {
            reader,
            buf: vec![0; cap],
            start: 0,
            end: 0,
            max_packet_size,
            eof: false,
            consumed: 0,
            read: 0,
            broken: None,
        }
    }

    /// Bytes read from the stream so far.
    pub fn bytes_read(&self) -> u64 {
        self.read
    }

    /// Why the stream stopped before its end, if it did (each case also counts a
    /// malformed packet).
    pub fn broken(&self) -> Option<StreamBreak> {
        self.broken
    }

    /// True once the stream ended (or could not be followed any further).
    pub fn is_done(&self) -> bool {
        self.eof
    }

    /// Reads once and hands every whole packet to `stream`. Returns the number of
    /// packets handed over; `Ok(0)` with [`Self::is_done`] at the end.
    ///
    /// # Errors
    /// I/O errors of the reader.
    pub fn pump(&mut self, stream: &mut Stream) -> io::Result<usize> {
        if self.eof {
            return Ok(0);
        }
        if self.start > 0 && self.buf.len() - self.end < self.max_packet_size {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.consumed += self.start as u64;
            self.start = 0;
        }
        let n = match self.reader.read(&mut self.buf[self.end..]) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(0),
            Err(e) => return Err(e),
        };
        if n == 0 {
            self.eof = true;
        }
        self.end += n;
        self.read += n as u64;
        let mut count = 0;
        while !stream.is_stopped() {
            let avail = &self.buf[self.start..self.end];
            let at = self.consumed + self.start as u64;
            match packet_size(avail) {
                Ok(Some(size)) if size > self.max_packet_size => {
                    stream.stats_mut().packets_malformed += 1;
                    self.broken = Some(StreamBreak::TooLong {
                        at,
                        size,
                        max: self.max_packet_size,
                    });
                    self.eof = true;
                    break;
                }
                Ok(Some(size)) if size <= avail.len() => {
                    let _ = stream.add_datagram(&avail[..size]);
                    self.start += size;
                    count += 1;
                }
                Ok(_) => {
                    if self.eof && !avail.is_empty() {
                        stream.stats_mut().packets_malformed += 1;
                        self.broken = Some(StreamBreak::Truncated { at });
                    }
                    break;
                }
                Err(_) => {
                    stream.stats_mut().packets_malformed += 1;
                    self.broken = Some(StreamBreak::NotSpead { at });
                    self.eof = true;
                    break;
                }
            }
        }
        if stream.is_stopped() {
            self.eof = true;
        }
        stream.note_batch(count);
        Ok(count)
    }

    /// Pumps until the end of the stream or a stop.
    ///
    /// # Errors
    /// I/O errors of the reader.
    pub fn run(&mut self, stream: &mut Stream) -> io::Result<()> {
        while !self.eof {
            self.pump(stream)?;
        }
        Ok(())
    }
}

/// Writes packets back to back (to a `Vec<u8>`, a file or a TCP connection).
#[derive(Debug)]
pub struct PacketWriter<W: Write> {
    writer: W,
}

impl<W: Write> PacketWriter<W> {
    /// Wraps a writer.
    pub fn new(writer: W) -> Self {
        Self { writer }
    }

    /// Writes one packet.
    ///
    /// # Errors
    /// I/O errors of the writer.
    pub fn write_packet(&mut self, packet: &[u8]) -> io::Result<()> {
        self.writer.write_all(packet)
    }

    /// Flushes the writer.
    ///
    /// # Errors
    /// I/O errors of the flush.
    pub fn flush(&mut self) -> io::Result<()> {
        self.writer.flush()
    }

    /// Flushes and returns the writer.
    ///
    /// # Errors
    /// I/O errors of the flush.
    pub fn into_inner(mut self) -> io::Result<W> {
        self.writer.flush()?;
        Ok(self.writer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recv::StreamConfig;
    use crate::send::{heap_to_bytes, Heap};
    use crate::wire::Flavour;

    /// A reader that returns at most `step` bytes per read.
    struct Dribble<'a>(&'a [u8], usize);
    impl Read for Dribble<'_> {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            let n = self.0.len().min(self.1).min(out.len());
            out[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    #[test]
    fn reads_packets_split_across_reads() {
        let mut bytes = Vec::new();
        for cnt in 1..=3 {
            let mut h = Heap::new(Flavour::SPEAD_64_48);
            h.add_item(0x1000, vec![cnt as u8; 3000], false);
            bytes.extend(heap_to_bytes(&h, cnt, 1472).unwrap());
        }
        let mut stream = Stream::new(StreamConfig::default());
        ByteStreamReader::new(Dribble(&bytes, 7), 9000)
            .run(&mut stream)
            .unwrap();
        let mut n = 0;
        while let Some(h) = stream.pop_heap() {
            assert!(h.complete);
            n += 1;
        }
        assert_eq!(n, 3);
    }

    #[test]
    fn stops_at_garbage_and_oversize() {
        let mut stream = Stream::new(StreamConfig::default());
        let garbage = [0xffu8; 100];
        let mut reader = ByteStreamReader::new(&garbage[..], 9000);
        reader.run(&mut stream).unwrap();
        assert_eq!(stream.stats().packets_malformed, 1);
        assert_eq!(reader.broken(), Some(StreamBreak::NotSpead { at: 0 }));
        let mut h = Heap::new(Flavour::SPEAD_64_48);
        h.add_item(0x1000, vec![0; 5000], false);
        let bytes = heap_to_bytes(&h, 1, 9000).unwrap();
        let mut stream = Stream::new(StreamConfig::default());
        let mut reader = ByteStreamReader::new(&bytes[..], 1500);
        reader.run(&mut stream).unwrap();
        assert_eq!(stream.stats().packets_malformed, 1);
        assert_eq!(stream.stats().packets, 0);
        assert_eq!(
            reader.broken(),
            Some(StreamBreak::TooLong {
                at: 0,
                size: bytes.len(),
                max: 1500
            })
        );
    }

    #[test]
    fn says_where_a_stream_was_cut() {
        let mut h = Heap::new(Flavour::SPEAD_64_48);
        h.add_item(0x1000, vec![0; 5000], false);
        let bytes = heap_to_bytes(&h, 1, 1472).unwrap();
        // Two whole packets, then 10 bytes of the third.
        let cut = 2 * 1472 + 10;
        let mut stream = Stream::new(StreamConfig::default());
        let mut reader = ByteStreamReader::new(&bytes[..cut], 9000);
        reader.run(&mut stream).unwrap();
        assert_eq!(stream.stats().packets, 2);
        assert_eq!(reader.bytes_read(), cut as u64);
        assert_eq!(
            reader.broken(),
            Some(StreamBreak::Truncated { at: 2 * 1472 })
        );
        let mut reader = ByteStreamReader::new(&bytes[..], 9000);
        reader
            .run(&mut Stream::new(StreamConfig::default()))
            .unwrap();
        assert_eq!(reader.broken(), None);
    }
}
