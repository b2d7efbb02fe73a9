//! A capture writer: classic pcap with nanosecond or microsecond timestamps, or pcapng
//! with one interface whose `if_tsresol` says which, for any link type. The file
//! structures are `pcap-file`'s; see [`PcapWriter::write_record`] for the one place
//! where its pcapng timestamps need care.

use std::borrow::Cow;
use std::io::{self, Write};
use std::time::Duration;

use byteorder_slice::LittleEndian;
use pcap_file::pcap::{PcapHeader, RawPcapPacket};
use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption,
};
use pcap_file::pcapng::blocks::section_header::SectionHeaderBlock;
use pcap_file::pcapng::Block;
use pcap_file::{DataLink, Endianness, TsResolution};

use super::link::link_type;
use super::read::MAX_RECORD;

/// Timestamp resolution of a written file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// Microseconds (classic pcap's magic 0xa1b2c3d4; pcapng's default).
    Micro,
    /// Nanoseconds (classic pcap's magic 0xa1b23c4d; pcapng `if_tsresol` 9).
    Nano,
}

/// The container of a written file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Container {
    /// Classic pcap (little-endian).
    Pcap,
    /// pcapng: one little-endian section with one interface.
    PcapNg,
}

/// What a [`PcapWriter`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteFormat {
    /// The container.
    pub container: Container,
    /// Timestamp resolution.
    pub resolution: Resolution,
    /// Link type of every record (see [`link_type`]).
    pub link_type: u32,
    /// Captured bytes kept of each record at most (1 to [`MAX_RECORD`]).
    pub snaplen: u32,
}

impl WriteFormat {
    /// What the simulator captures: classic pcap, nanoseconds, Ethernet, records up to
    /// [`MAX_RECORD`] bytes.
    pub const SIMULATOR: WriteFormat = WriteFormat {
        container: Container::Pcap,
        resolution: Resolution::Nano,
        link_type: link_type::ETHERNET,
        snaplen: MAX_RECORD,
    };
}

fn to_io(e: pcap_file::PcapError) -> io::Error {
    match e {
        pcap_file::PcapError::IoError(e) => e,
        other => io::Error::new(io::ErrorKind::InvalidInput, other),
    }
}

/// Writes a capture file record by record.
#[derive(Debug)]
pub struct PcapWriter<W: Write> {
    out: W,
    format: WriteFormat,
    records: u64,
}

impl<W: Write> PcapWriter<W> {
    /// The output the records go to (for example to flush it while writing goes on).
    pub fn get_mut(&mut self) -> &mut W {
        &mut self.out
    }

    /// Writes the header of a [`WriteFormat::SIMULATOR`] file to `out`.
    ///
    /// # Errors
    /// The I/O error of the write.
    pub fn new(out: W) -> io::Result<Self> {
        Self::with_format(out, WriteFormat::SIMULATOR)
    }

    /// Writes the header of a `format` file to `out`.
    ///
    /// # Errors
    /// [`io::ErrorKind::InvalidInput`] for a snap length of 0 or above [`MAX_RECORD`] or
    /// a link type above 65535; else the I/O error of the write.
    pub fn with_format(mut out: W, format: WriteFormat) -> io::Result<Self> {
        if format.snaplen == 0 || format.snaplen > MAX_RECORD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("snap length {} is not 1 to {MAX_RECORD}", format.snaplen),
            ));
        }
        if format.link_type > 0xffff {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("link type {} does not fit 16 bits", format.link_type),
            ));
        }
        match format.container {
            Container::Pcap => {
                let header = PcapHeader {
                    snaplen: format.snaplen,
                    datalink: DataLink::from(format.link_type),
                    ts_resolution: match format.resolution {
                        Resolution::Micro => TsResolution::MicroSecond,
                        Resolution::Nano => TsResolution::NanoSecond,
                    },
                    endianness: Endianness::Little,
                    ..PcapHeader::default()
                };
                header.write_to(&mut out).map_err(to_io)?;
            }
            Container::PcapNg => {
                let section = SectionHeaderBlock {
                    endianness: Endianness::Little,
                    ..SectionHeaderBlock::default()
                };
                Block::SectionHeader(section).write_to::<LittleEndian, _>(&mut out)?;
                let resol = match format.resolution {
                    Resolution::Micro => 6,
                    Resolution::Nano => 9,
                };
                let iface = InterfaceDescriptionBlock {
                    linktype: DataLink::from(format.link_type),
                    snaplen: format.snaplen,
                    options: vec![InterfaceDescriptionOption::IfTsResol(resol)],
                };
                Block::InterfaceDescription(iface).write_to::<LittleEndian, _>(&mut out)?;
            }
        }
        Ok(PcapWriter {
            out,
            format,
            records: 0,
        })
    }

    /// Writes one whole frame captured at `ts_ns` nanoseconds (since the epoch, or of
    /// virtual time); frames longer than the snap length are cut to it.
    ///
    /// # Errors
    /// As [`Self::write_record`].
    pub fn write(&mut self, ts_ns: u64, frame: &[u8]) -> io::Result<()> {
        let orig_len = u32::try_from(frame.len()).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("frame of {} bytes", frame.len()),
            )
        })?;
        self.write_record(ts_ns, frame, orig_len)
    }

    /// Writes one record: the first bytes of a frame of `orig_len` bytes on the wire
    /// (cut further to the snap length). The timestamp is truncated to the file's
    /// resolution.
    ///
    /// `pcap-file` writes an enhanced packet block's timestamp as the `Duration`'s
    /// nanosecond count whatever the interface's resolution, so for a microsecond pcapng
    /// file the record is handed a `Duration` of as many nanoseconds as there are
    /// microseconds: the count the block must carry.
    ///
    /// # Errors
    /// [`io::ErrorKind::InvalidInput`] when `data` is longer than `orig_len` or (classic
    /// pcap) the timestamp is past 2106; else the I/O error of the write.
    pub fn write_record(&mut self, ts_ns: u64, data: &[u8], orig_len: u32) -> io::Result<()> {
        let incl = data.len().min(self.format.snaplen as usize);
        let data = &data[..incl];
        if incl as u64 > u64::from(orig_len) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("record of {incl} bytes longer than its original length {orig_len}"),
            ));
        }
        let units = match self.format.resolution {
            Resolution::Micro => ts_ns / 1000,
            Resolution::Nano => ts_ns,
        };
        match self.format.container {
            Container::Pcap => {
                let per_sec = match self.format.resolution {
                    Resolution::Micro => 1_000_000,
                    Resolution::Nano => 1_000_000_000,
                };
                let ts_sec = u32::try_from(units / per_sec).map_err(|_| {
                    io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("timestamp {ts_ns} ns is past what classic pcap holds"),
                    )
                })?;
                let packet = RawPcapPacket {
                    ts_sec,
                    ts_frac: (units % per_sec) as u32,
                    incl_len: incl as u32,
                    orig_len,
                    data: Cow::Borrowed(data),
                };
                packet
                    .write_to::<_, LittleEndian>(&mut self.out)
                    .map_err(to_io)?;
            }
            Container::PcapNg => {
                let packet = EnhancedPacketBlock {
                    interface_id: 0,
                    timestamp: Duration::from_nanos(units),
                    original_len: orig_len,
                    data: Cow::Borrowed(data),
                    options: Vec::new(),
                };
                Block::EnhancedPacket(packet).write_to::<LittleEndian, _>(&mut self.out)?;
            }
        }
        self.records += 1;
        Ok(())
    }

    /// Records written so far.
    #[must_use]
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Flushes and returns the sink.
    ///
    /// # Errors
    /// The I/O error of the flush.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}
