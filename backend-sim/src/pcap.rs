//! Classic pcap files: a writer with nanosecond timestamps (what the simulator captures)
//! and a reader for Ethernet, Linux cooked (SLL and SLL2) and raw IPv4 link types (what
//! recordings of real observations come as). Written by hand so that bad input gives an
//! error naming the record and the problem, never a panic.

use crate::clock::Nanos;
use crate::frame::eth::{EthHeader, Mac, ETHERTYPE_IPV4};
use std::io::{self, Write};
use std::net::Ipv4Addr;

/// LINKTYPE_ETHERNET.
pub const LINKTYPE_ETHERNET: u32 = 1;
/// LINKTYPE_RAW (raw IP; IPv4 or IPv6 by the version nibble).
pub const LINKTYPE_RAW: u32 = 101;
/// DLT_RAW as some BSDs number it in files.
pub const LINKTYPE_RAW_BSD_12: u32 = 12;
/// DLT_RAW as OpenBSD numbers it in files.
pub const LINKTYPE_RAW_BSD_14: u32 = 14;
/// LINKTYPE_LINUX_SLL (cooked capture v1, `tcpdump -i any` before libpcap 1.10).
pub const LINKTYPE_LINUX_SLL: u32 = 113;
/// LINKTYPE_IPV4.
pub const LINKTYPE_IPV4: u32 = 228;
/// LINKTYPE_LINUX_SLL2 (cooked capture v2).
pub const LINKTYPE_LINUX_SLL2: u32 = 276;

const MAGIC_US: u32 = 0xa1b2_c3d4;
const MAGIC_NS: u32 = 0xa1b2_3c4d;
const PCAPNG_MAGIC: u32 = 0x0a0d_0d0a;
/// Largest record we accept (libpcap's own limit for most link types).
const MAX_RECORD: u32 = 262_144;

/// Why a pcap file cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum PcapError {
    /// Fewer than 24 bytes: no global header.
    #[error("not a pcap file: {0} bytes, shorter than the 24-byte global header")]
    TooShort(usize),
    /// A pcapng file.
    #[error("this is a pcapng file; convert it with `editcap -F pcap IN OUT` first")]
    Pcapng,
    /// Unknown magic number.
    #[error("not a pcap file: magic number {0:#010x}")]
    BadMagic(u32),
    /// A link type we cannot turn into Ethernet frames.
    #[error("unsupported pcap link type {0} (supported: 1 Ethernet, 113 Linux SLL, 276 Linux SLL2, 101/12/14/228 raw IPv4)")]
    UnsupportedLinkType(u32),
    /// A record header or its data runs past the end of the file.
    #[error("record {index} at byte {offset} is truncated: need {need} bytes, {have} left")]
    Truncated {
        /// Record number, from 0.
        index: usize,
        /// Byte offset of the record header.
        offset: usize,
        /// Bytes the record needs.
        need: usize,
        /// Bytes left in the file.
        have: usize,
    },
    /// A record that cannot be right.
    #[error("record {index} at byte {offset} is malformed: {reason}")]
    BadRecord {
        /// Record number, from 0.
        index: usize,
        /// Byte offset of the record header.
        offset: usize,
        /// What is wrong.
        reason: String,
    },
    /// Reading or writing the file failed.
    #[error("pcap I/O: {0}")]
    Io(#[from] io::Error),
}

/// One record of a pcap file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PcapRecord {
    /// Timestamp in nanoseconds since the epoch of the file.
    pub ts_ns: u64,
    /// Bytes captured.
    pub data: Vec<u8>,
    /// Length of the packet on the wire (at least `data.len()`).
    pub orig_len: u32,
}

/// A whole pcap file in memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PcapFile {
    /// Link type of every record.
    pub link_type: u32,
    /// Snap length from the global header.
    pub snaplen: u32,
    /// Records in file order.
    pub records: Vec<PcapRecord>,
}

fn rd32(b: &[u8], big: bool) -> u32 {
    let a = [b[0], b[1], b[2], b[3]];
    if big {
        u32::from_be_bytes(a)
    } else {
        u32::from_le_bytes(a)
    }
}

impl PcapFile {
    /// Parses a pcap file (either byte order, microsecond or nanosecond timestamps).
    ///
    /// # Errors
    /// [`PcapError`] naming what is wrong: too short, pcapng, bad magic, unsupported link
    /// type, or a truncated or oversized record.
    pub fn parse(bytes: &[u8]) -> Result<Self, PcapError> {
        if bytes.len() >= 4 && rd32(bytes, false) == PCAPNG_MAGIC {
            return Err(PcapError::Pcapng);
        }
        if bytes.len() < 24 {
            return Err(PcapError::TooShort(bytes.len()));
        }
        let (big, nanos) = match (rd32(bytes, false), rd32(bytes, true)) {
            (MAGIC_US, _) => (false, false),
            (MAGIC_NS, _) => (false, true),
            (_, MAGIC_US) => (true, false),
            (_, MAGIC_NS) => (true, true),
            (m, _) => return Err(PcapError::BadMagic(m)),
        };
        let snaplen = rd32(&bytes[16..], big);
        // The low 16 bits hold the link type; the upper bits may carry FCS information.
        let link_type = rd32(&bytes[20..], big) & 0x0fff_ffff;
        match link_type {
            LINKTYPE_ETHERNET | LINKTYPE_RAW | LINKTYPE_RAW_BSD_12 | LINKTYPE_RAW_BSD_14
            | LINKTYPE_LINUX_SLL | LINKTYPE_IPV4 | LINKTYPE_LINUX_SLL2 => {}
            other => return Err(PcapError::UnsupportedLinkType(other)),
        }
        let mut records = Vec::new();
        let mut off = 24;
        while off < bytes.len() {
            let index = records.len();
            let have = bytes.len() - off;
            if have < 16 {
                return Err(PcapError::Truncated {
                    index,
                    offset: off,
                    need: 16,
                    have,
                });
            }
            let h = &bytes[off..off + 16];
            let sec = u64::from(rd32(h, big));
            let frac = u64::from(rd32(&h[4..], big));
            let incl = rd32(&h[8..], big);
            let orig = rd32(&h[12..], big);
            let bad = |reason: String| PcapError::BadRecord {
                index,
                offset: off,
                reason,
            };
            if incl > MAX_RECORD {
                return Err(bad(format!("captured length {incl} exceeds {MAX_RECORD}")));
            }
            if (nanos && frac >= 1_000_000_000) || (!nanos && frac >= 1_000_000) {
                return Err(bad(format!("sub-second timestamp {frac} out of range")));
            }
            let need = 16 + incl as usize;
            if have < need {
                return Err(PcapError::Truncated {
                    index,
                    offset: off,
                    need,
                    have,
                });
            }
            let ts_ns = sec * 1_000_000_000 + if nanos { frac } else { frac * 1000 };
            records.push(PcapRecord {
                ts_ns,
                data: bytes[off + 16..off + need].to_vec(),
                orig_len: orig.max(incl),
            });
            off += need;
        }
        Ok(PcapFile {
            link_type,
            snaplen,
            records,
        })
    }

    /// Reads and parses a pcap file from disk.
    ///
    /// # Errors
    /// [`PcapError::Io`] if the file cannot be read, else as [`PcapFile::parse`].
    pub fn read(path: impl AsRef<std::path::Path>) -> Result<Self, PcapError> {
        Self::parse(&std::fs::read(path)?)
    }
}

/// What a record turns into on the way into the fabric.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Converted {
    /// An Ethernet frame ready to inject.
    Frame(Vec<u8>),
    /// A record that carries no IPv4 and no Ethernet frame (for example IPv6 in a raw
    /// capture): skipped and counted.
    Skipped(&'static str),
}

/// Turns one record of `link_type` into an Ethernet frame. Cooked and raw-IP records have no
/// (or only a source) link-layer address: the source MAC is taken from the record when it
/// has one, else `src_mac`; the destination MAC is the group MAC for IPv4 multicast,
/// broadcast for the limited broadcast address, and otherwise `resolve(dst ip)` (the
/// fabric's address table, standing in for ARP).
///
/// # Errors
/// A reason string when the record is too short for its link-layer header or the frame
/// truncated (captured with a short snap length).
pub fn to_ethernet(
    link_type: u32,
    rec: &PcapRecord,
    src_mac: Mac,
    resolve: &dyn Fn(Ipv4Addr) -> Option<Mac>,
) -> Result<Converted, String> {
    let d = &rec.data;
    if (rec.orig_len as usize) > d.len() {
        return Err(format!(
            "truncated by the snap length ({} of {} bytes captured)",
            d.len(),
            rec.orig_len
        ));
    }
    let (ethertype, payload, src) = match link_type {
        LINKTYPE_ETHERNET => {
            EthHeader::parse(d).map_err(|e| e.to_string())?;
            return Ok(Converted::Frame(d.clone()));
        }
        LINKTYPE_LINUX_SLL => {
            if d.len() < 16 {
                return Err(format!(
                    "{} bytes, shorter than the 16-byte SLL header",
                    d.len()
                ));
            }
            let hatype = u16::from_be_bytes([d[2], d[3]]);
            let alen = usize::from(u16::from_be_bytes([d[4], d[5]]));
            let src =
                (hatype == 1 && alen == 6).then(|| Mac([d[6], d[7], d[8], d[9], d[10], d[11]]));
            (u16::from_be_bytes([d[14], d[15]]), &d[16..], src)
        }
        LINKTYPE_LINUX_SLL2 => {
            if d.len() < 20 {
                return Err(format!(
                    "{} bytes, shorter than the 20-byte SLL2 header",
                    d.len()
                ));
            }
            let hatype = u16::from_be_bytes([d[8], d[9]]);
            let alen = usize::from(d[11]);
            let src =
                (hatype == 1 && alen == 6).then(|| Mac([d[12], d[13], d[14], d[15], d[16], d[17]]));
            (u16::from_be_bytes([d[0], d[1]]), &d[20..], src)
        }
        LINKTYPE_RAW | LINKTYPE_RAW_BSD_12 | LINKTYPE_RAW_BSD_14 | LINKTYPE_IPV4 => {
            match d.first().map(|b| b >> 4) {
                Some(4) => (ETHERTYPE_IPV4, &d[..], None),
                Some(6) => return Ok(Converted::Skipped("IPv6")),
                _ => return Err("raw IP record is empty or not IP".into()),
            }
        }
        other => return Err(format!("unsupported link type {other}")),
    };
    if ethertype != ETHERTYPE_IPV4 {
        return Ok(Converted::Skipped("not IPv4"));
    }
    if payload.len() < 20 {
        return Err(format!(
            "IPv4 packet of {} bytes, shorter than its header",
            payload.len()
        ));
    }
    let dst_ip = Ipv4Addr::new(payload[16], payload[17], payload[18], payload[19]);
    let dst = if dst_ip.is_multicast() {
        Mac::for_ipv4_multicast(dst_ip)
    } else if dst_ip.is_broadcast() {
        crate::frame::eth::BROADCAST
    } else {
        resolve(dst_ip).unwrap_or_default()
    };
    let mut out = Vec::with_capacity(14 + payload.len());
    EthHeader::write_untagged(dst, src.unwrap_or(src_mac), ETHERTYPE_IPV4, &mut out);
    out.extend_from_slice(payload);
    Ok(Converted::Frame(out))
}

/// Writes classic pcap with nanosecond timestamps and the Ethernet link type.
#[derive(Debug)]
pub struct PcapWriter<W: Write> {
    out: W,
    records: u64,
}

impl<W: Write> PcapWriter<W> {
    /// Writes the global header to `out`.
    ///
    /// # Errors
    /// The I/O error of the write.
    pub fn new(mut out: W) -> io::Result<Self> {
        let mut h = [0u8; 24];
        h[0..4].copy_from_slice(&MAGIC_NS.to_le_bytes());
        h[4..6].copy_from_slice(&2u16.to_le_bytes());
        h[6..8].copy_from_slice(&4u16.to_le_bytes());
        h[16..20].copy_from_slice(&MAX_RECORD.to_le_bytes());
        h[20..24].copy_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
        out.write_all(&h)?;
        Ok(PcapWriter { out, records: 0 })
    }

    /// Writes one frame captured at virtual time `ts`.
    ///
    /// # Errors
    /// The I/O error of the write.
    pub fn write(&mut self, ts: Nanos, frame: &[u8]) -> io::Result<()> {
        let incl = frame.len().min(MAX_RECORD as usize);
        let mut h = [0u8; 16];
        h[0..4].copy_from_slice(&((ts / 1_000_000_000) as u32).to_le_bytes());
        h[4..8].copy_from_slice(&((ts % 1_000_000_000) as u32).to_le_bytes());
        h[8..12].copy_from_slice(&(incl as u32).to_le_bytes());
        h[12..16].copy_from_slice(&(frame.len() as u32).to_le_bytes());
        self.out.write_all(&h)?;
        self.out.write_all(&frame[..incl])?;
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
