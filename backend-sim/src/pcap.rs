//! Capture files in memory, for replay into the fabric, and the writer the fabric
//! captures with. Reading, writing and link-layer decoding are `netwire::pcap`'s (classic
//! pcap of either resolution and pcapng; Ethernet, Linux SLL and SLL2, raw IPv4 and
//! loopback link types); this module holds a whole file's records and names a bad one
//! by its index.

use netwire::eth::Mac;
use std::io;
use std::net::Ipv4Addr;

pub use netwire::pcap::link_type::{
    ETHERNET as LINKTYPE_ETHERNET, IPV4 as LINKTYPE_IPV4, LINUX_SLL as LINKTYPE_LINUX_SLL,
    LINUX_SLL2 as LINKTYPE_LINUX_SLL2, RAW as LINKTYPE_RAW, RAW_BSD_12 as LINKTYPE_RAW_BSD_12,
    RAW_BSD_14 as LINKTYPE_RAW_BSD_14,
};
pub use netwire::pcap::{Converted, PcapWriter};

/// The link types a replay turns into Ethernet frames.
const REPLAYABLE: [u32; 9] = [
    netwire::pcap::link_type::NULL,
    LINKTYPE_ETHERNET,
    LINKTYPE_RAW_BSD_12,
    LINKTYPE_RAW_BSD_14,
    LINKTYPE_RAW,
    netwire::pcap::link_type::LOOP,
    LINKTYPE_LINUX_SLL,
    LINKTYPE_IPV4,
    LINKTYPE_LINUX_SLL2,
];

/// Why a capture file cannot be read or replayed.
#[derive(Debug, thiserror::Error)]
pub enum PcapError {
    /// The file is not a capture file, or is cut short or corrupt.
    #[error("pcap: {0}")]
    Read(#[from] netwire::pcap::PcapError),
    /// A link type that cannot be turned into Ethernet frames.
    #[error("unsupported pcap link type {0} (supported: 1 Ethernet, 113 Linux SLL, 276 Linux SLL2, 101/12/14/228 raw IPv4, 0/108 loopback)")]
    UnsupportedLinkType(u32),
    /// A pcapng file whose interfaces have different link types.
    #[error("pcapng record {index} has link type {found}, but earlier records {first}: one link type per replayed file")]
    MixedLinkTypes {
        /// Record number, from 0.
        index: usize,
        /// The link type of the first record.
        first: u32,
        /// The link type of this record.
        found: u32,
    },
    /// A record that cannot be right.
    #[error("record {index} at byte {offset} is malformed: {reason}")]
    BadRecord {
        /// Record number, from 0.
        index: usize,
        /// Byte offset of the record header (0 when not known).
        offset: usize,
        /// What is wrong.
        reason: String,
    },
    /// Reading the file failed.
    #[error("pcap I/O: {0}")]
    Io(#[from] io::Error),
}

/// One record of a capture file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PcapRecord {
    /// Timestamp in nanoseconds since the epoch of the file.
    pub ts_ns: u64,
    /// Bytes captured.
    pub data: Vec<u8>,
    /// Length of the packet on the wire (at least `data.len()`).
    pub orig_len: u32,
}

/// A whole capture file in memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PcapFile {
    /// Link type of every record (of a pcapng file without records: Ethernet).
    pub link_type: u32,
    /// Snap length from the file header (pcapng: 0).
    pub snaplen: u32,
    /// Records in file order.
    pub records: Vec<PcapRecord>,
}

impl PcapFile {
    /// Parses a classic pcap (either byte order, microsecond or nanosecond timestamps)
    /// or pcapng file whose records share one replayable link type.
    ///
    /// # Errors
    /// [`PcapError::Read`] naming what is wrong and where (not a capture file, cut short,
    /// corrupt), [`PcapError::UnsupportedLinkType`], [`PcapError::MixedLinkTypes`].
    pub fn parse(bytes: &[u8]) -> Result<Self, PcapError> {
        Self::from_reader(bytes)
    }

    /// Reads a capture file from `input` as [`PcapFile::parse`] does.
    ///
    /// # Errors
    /// As [`PcapFile::parse`]; a failing `input` gives [`PcapError::Read`] with the byte
    /// offset.
    pub fn from_reader(input: impl io::Read) -> Result<Self, PcapError> {
        let mut reader = netwire::pcap::PcapReader::new(input)?;
        let (mut link_type, snaplen) = match reader.format() {
            netwire::pcap::FileFormat::Pcap {
                link_type, snaplen, ..
            } => (Some(link_type), snaplen),
            netwire::pcap::FileFormat::PcapNg => (None, 0),
        };
        if let Some(lt) = link_type.filter(|lt| !REPLAYABLE.contains(lt)) {
            return Err(PcapError::UnsupportedLinkType(lt));
        }
        let mut records = Vec::new();
        while let Some(r) = reader.next_record()? {
            match link_type {
                None if !REPLAYABLE.contains(&r.link_type) => {
                    return Err(PcapError::UnsupportedLinkType(r.link_type))
                }
                None => link_type = Some(r.link_type),
                Some(first) if first != r.link_type => {
                    return Err(PcapError::MixedLinkTypes {
                        index: records.len(),
                        first,
                        found: r.link_type,
                    })
                }
                Some(_) => {}
            }
            records.push(PcapRecord {
                ts_ns: r.ts_ns,
                data: r.data.to_vec(),
                orig_len: r.orig_len.max(r.data.len() as u32),
            });
        }
        Ok(PcapFile {
            link_type: link_type.unwrap_or(LINKTYPE_ETHERNET),
            snaplen,
            records,
        })
    }

    /// Reads and parses a capture file from disk.
    ///
    /// # Errors
    /// [`PcapError::Io`] if the file cannot be read, else as [`PcapFile::parse`].
    pub fn read(path: impl AsRef<std::path::Path>) -> Result<Self, PcapError> {
        let file = std::fs::File::open(path)?;
        Self::from_reader(io::BufReader::with_capacity(1 << 16, file))
    }
}

/// Turns one record of `link_type` into an Ethernet frame: [`netwire::pcap::to_ethernet`].
///
/// # Errors
/// A one-line reason when the record cannot become a frame.
pub fn to_ethernet(
    link_type: u32,
    rec: &PcapRecord,
    src_mac: Mac,
    resolve: &dyn Fn(Ipv4Addr) -> Option<Mac>,
) -> Result<Converted, String> {
    netwire::pcap::to_ethernet(link_type, &rec.data, rec.orig_len, src_mac, resolve)
}

#[cfg(test)]
mod tests {
    use super::*;
    use netwire::pcap::{Container, Resolution, WriteFormat};

    fn pcapng(link_type: u32, frames: &[&[u8]]) -> Vec<u8> {
        let format = WriteFormat {
            container: Container::PcapNg,
            resolution: Resolution::Micro,
            link_type,
            snaplen: 65535,
        };
        let mut w = PcapWriter::with_format(Vec::new(), format).unwrap();
        for (i, f) in frames.iter().enumerate() {
            w.write(1_000_000 * (i as u64 + 1), f).unwrap();
        }
        w.finish().unwrap()
    }

    #[test]
    fn pcapng_files_are_read() {
        let ip = [0x45u8; 20];
        let file = PcapFile::parse(&pcapng(LINKTYPE_RAW, &[&ip, &ip[..]])).unwrap();
        assert_eq!(file.link_type, LINKTYPE_RAW);
        assert_eq!(file.snaplen, 0);
        assert_eq!(
            file.records,
            vec![
                PcapRecord {
                    ts_ns: 1_000_000,
                    data: ip.to_vec(),
                    orig_len: 20
                },
                PcapRecord {
                    ts_ns: 2_000_000,
                    data: ip.to_vec(),
                    orig_len: 20
                },
            ]
        );
        // The real pcapng capture in tests/data (dumpcap on loopback).
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../tests/data/spead2_lo.pcapng"
        );
        let real = PcapFile::read(path).unwrap();
        assert_eq!(
            (real.link_type, real.records.len()),
            (LINKTYPE_ETHERNET, 45)
        );
    }

    #[test]
    fn pcapng_link_types_must_be_replayable_and_the_same() {
        let e = PcapFile::parse(&pcapng(147, &[&[0; 20]])).unwrap_err();
        assert!(matches!(e, PcapError::UnsupportedLinkType(147)), "{e}");
        // Two sections, the second with another link type.
        let mut two = pcapng(LINKTYPE_ETHERNET, &[&[0; 20]]);
        two.extend_from_slice(&pcapng(LINKTYPE_LINUX_SLL, &[&[0; 20]]));
        let e = PcapFile::parse(&two).unwrap_err();
        assert_eq!(
            e.to_string(),
            "pcapng record 1 has link type 113, but earlier records 1: one link type per replayed file"
        );
        // An empty pcapng file is an empty Ethernet capture.
        let empty = PcapFile::parse(&pcapng(LINKTYPE_LINUX_SLL2, &[])).unwrap();
        assert_eq!(
            (empty.link_type, empty.records.len()),
            (LINKTYPE_ETHERNET, 0)
        );
    }

    #[test]
    fn read_errors_name_the_byte() {
        let e = PcapFile::parse(&[0xd4, 0xc3, 0xb2, 0xa1, 2, 0]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "pcap: file truncated at byte 0: pcap file header needs 24 bytes, only 6 left"
        );
        let e = PcapFile::read("/nonexistent/x.pcap").unwrap_err();
        assert!(matches!(e, PcapError::Io(_)), "{e}");
    }
}
