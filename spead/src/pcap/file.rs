//! Capture file records: classic pcap (both byte orders, micro- and nanosecond
//! timestamps) and pcapng (sections of either byte order, several interfaces,
//! `if_tsresol` / `if_tsoffset`).
//!
//! The reader owns one buffer that grows to the largest record and is reused, so
//! reading a record does not allocate.

use std::io::{self, Read};

use thiserror::Error;

/// Records larger than this (captured bytes) are taken as corruption; libpcap uses the
/// same bound (256 KiB), and a UDP datagram with its headers is far smaller.
pub const MAX_RECORD: u32 = 256 * 1024;
/// pcapng blocks larger than this are taken as corruption (records, plus room for
/// options and comments).
const MAX_BLOCK: u32 = 16 * 1024 * 1024;

const MAGIC_US: u32 = 0xa1b2_c3d4;
const MAGIC_NS: u32 = 0xa1b2_3c4d;
const NG_SHB: u32 = 0x0a0d_0d0a;
const NG_BYTE_ORDER: u32 = 0x1a2b_3c4d;
const NG_IDB: u32 = 1;
const NG_PB: u32 = 2;
const NG_SPB: u32 = 3;
const NG_EPB: u32 = 6;

/// A capture file that cannot be read (any further).
#[derive(Debug, Error)]
pub enum PcapError {
    /// The reader failed.
    #[error("I/O error at byte {offset}: {source}")]
    Io {
        /// Byte offset where reading failed.
        offset: u64,
        /// The underlying error.
        source: io::Error,
    },
    /// Neither pcap nor pcapng.
    #[error("not a pcap or pcapng file (magic {magic:#010x} at byte 0)")]
    BadMagic {
        /// The first four bytes, big-endian.
        magic: u32,
    },
    /// The file ends inside a header or record.
    #[error("file truncated at byte {offset}: {what} needs {needed} bytes, only {got} left")]
    Truncated {
        /// Byte offset where the cut-short structure starts.
        offset: u64,
        /// What was being read.
        what: &'static str,
        /// Bytes it needs.
        needed: u64,
        /// Bytes that were there.
        got: u64,
    },
    /// A header or record that makes no sense.
    #[error("corrupt file at byte {offset}: {reason}")]
    Corrupt {
        /// Byte offset of the bad structure.
        offset: u64,
        /// What is wrong with it.
        reason: String,
    },
}

impl PcapError {
    /// Byte offset in the file where the problem is.
    pub fn offset(&self) -> u64 {
        match self {
            Self::Io { offset, .. }
            | Self::Truncated { offset, .. }
            | Self::Corrupt { offset, .. } => *offset,
            Self::BadMagic { .. } => 0,
        }
    }
}

impl From<PcapError> for io::Error {
    fn from(e: PcapError) -> Self {
        let kind = match &e {
            PcapError::Io { source, .. } => source.kind(),
            PcapError::Truncated { .. } => io::ErrorKind::UnexpectedEof,
            PcapError::BadMagic { .. } | PcapError::Corrupt { .. } => io::ErrorKind::InvalidData,
        };
        io::Error::new(kind, e)
    }
}

/// Which container the file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileFormat {
    /// Classic pcap.
    Pcap {
        /// Fields are big-endian.
        big_endian: bool,
        /// Timestamps have nanosecond (not microsecond) fractions.
        nanosecond: bool,
        /// The file's link type.
        link_type: u32,
        /// The file's snapshot length.
        snaplen: u32,
    },
    /// pcapng.
    PcapNg,
}

/// One captured frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record<'a> {
    /// Timestamp in nanoseconds since the Unix epoch (0 when the record has none).
    pub ts_ns: u64,
    /// Link type (LINKTYPE_* value) of the frame.
    pub link_type: u32,
    /// Length of the frame on the wire; more than `data.len()` when it was cut short.
    pub orig_len: u32,
    /// The captured bytes.
    pub data: &'a [u8],
    /// Byte offset of the record in the file.
    pub offset: u64,
}

/// Where the current record's bytes are in the reader's buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RecordMeta {
    pub ts_ns: u64,
    pub link_type: u32,
    pub orig_len: u32,
    pub start: usize,
    pub end: usize,
    pub offset: u64,
}

#[derive(Debug, Clone, Copy)]
struct Interface {
    link_type: u32,
    snaplen: u32,
    /// Timestamp units per second.
    units_per_sec: u128,
    /// Seconds added to every timestamp.
    offset_sec: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Order {
    Little,
    Big,
}

impl Order {
    fn u16(self, b: &[u8]) -> u16 {
        let a = [b[0], b[1]];
        match self {
            Self::Little => u16::from_le_bytes(a),
            Self::Big => u16::from_be_bytes(a),
        }
    }

    fn u32(self, b: &[u8]) -> u32 {
        let a = [b[0], b[1], b[2], b[3]];
        match self {
            Self::Little => u32::from_le_bytes(a),
            Self::Big => u32::from_be_bytes(a),
        }
    }

    fn i64(self, b: &[u8]) -> i64 {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[..8]);
        match self {
            Self::Little => i64::from_le_bytes(a),
            Self::Big => i64::from_be_bytes(a),
        }
    }
}

/// Reads the records of a pcap or pcapng file from any [`Read`].
///
/// After an error, [`PcapReader::next_record`] returns `Ok(None)`: records before the
/// error have been delivered, nothing after it is.
#[derive(Debug)]
pub struct PcapReader<R> {
    reader: R,
    /// Bytes consumed from `reader`.
    pos: u64,
    buf: Vec<u8>,
    format: FileFormat,
    order: Order,
    /// pcapng: interfaces of the current section.
    interfaces: Vec<Interface>,
    done: bool,
}

impl<R: Read> PcapReader<R> {
    /// Reads the file header (classic) or the first section header (pcapng).
    ///
    /// # Errors
    /// [`PcapError::BadMagic`] when the file is neither format, [`PcapError::Truncated`]
    /// when it ends inside the header, [`PcapError::Corrupt`] for a bad header and
    /// [`PcapError::Io`] when the reader fails.
    pub fn new(reader: R) -> Result<Self, PcapError> {
        let mut this = Self {
            reader,
            pos: 0,
            buf: Vec::new(),
            format: FileFormat::PcapNg,
            order: Order::Little,
            interfaces: Vec::new(),
            done: false,
        };
        let mut head = [0u8; 24];
        let got = this.fill(&mut head[..4])?;
        if got < 4 {
            return Err(PcapError::Truncated {
                offset: 0,
                what: "file header",
                needed: 4,
                got: got as u64,
            });
        }
        let magic_be = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
        if magic_be == NG_SHB {
            this.format = FileFormat::PcapNg;
            this.read_section_header(0)?;
            return Ok(this);
        }
        let (order, nanosecond) = match magic_be {
            MAGIC_US => (Order::Big, false),
            MAGIC_NS => (Order::Big, true),
            m if m.swap_bytes() == MAGIC_US => (Order::Little, false),
            m if m.swap_bytes() == MAGIC_NS => (Order::Little, true),
            magic => return Err(PcapError::BadMagic { magic }),
        };
        this.order = order;
        let got = this.fill(&mut head[4..])?;
        if got < 20 {
            return Err(PcapError::Truncated {
                offset: 0,
                what: "pcap file header",
                needed: 24,
                got: 4 + got as u64,
            });
        }
        let major = order.u16(&head[4..]);
        if major != 2 {
            return Err(PcapError::Corrupt {
                offset: 4,
                reason: format!("unsupported pcap version {major}"),
            });
        }
        this.format = FileFormat::Pcap {
            big_endian: order == Order::Big,
            nanosecond,
            snaplen: order.u32(&head[16..]),
            // The upper bits carry FCS information; the link type is the low 16 bits.
            link_type: order.u32(&head[20..]) & 0xffff,
        };
        Ok(this)
    }

    /// The container format (for classic pcap, with its header fields).
    pub fn format(&self) -> FileFormat {
        self.format
    }

    /// Bytes read from the file so far.
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// The next record, or `None` at the end of the file (or after an error).
    ///
    /// # Errors
    /// [`PcapError::Truncated`] when the file ends inside a record,
    /// [`PcapError::Corrupt`] for an impossible record, [`PcapError::Io`] when the
    /// reader fails. The reader is finished after an error.
    pub fn next_record(&mut self) -> Result<Option<Record<'_>>, PcapError> {
        Ok(self.advance()?.map(|m| Record {
            ts_ns: m.ts_ns,
            link_type: m.link_type,
            orig_len: m.orig_len,
            data: &self.buf[m.start..m.end],
            offset: m.offset,
        }))
    }

    /// The buffer the last [`Self::advance`] filled.
    pub(crate) fn buffer(&self) -> &[u8] {
        &self.buf
    }

    /// Reads the next record into the buffer and says where it is.
    pub(crate) fn advance(&mut self) -> Result<Option<RecordMeta>, PcapError> {
        if self.done {
            return Ok(None);
        }
        let r = match self.format {
            FileFormat::Pcap { .. } => self.advance_classic(),
            FileFormat::PcapNg => self.advance_ng(),
        };
        if !matches!(r, Ok(Some(_))) {
            self.done = true;
        }
        r
    }

    /// Reads until `buf` is full or the end of the file; returns the bytes read.
    fn fill(&mut self, buf: &mut [u8]) -> Result<usize, PcapError> {
        let mut got = 0;
        while got < buf.len() {
            match self.reader.read(&mut buf[got..]) {
                Ok(0) => break,
                Ok(n) => {
                    got += n;
                    self.pos += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(source) => {
                    return Err(PcapError::Io {
                        offset: self.pos,
                        source,
                    })
                }
            }
        }
        Ok(got)
    }

    /// Reads exactly `len` bytes into the start of the record buffer.
    fn fill_buf(
        &mut self,
        len: usize,
        offset: u64,
        what: &'static str,
        already: u64,
    ) -> Result<(), PcapError> {
        if self.buf.len() < len {
            self.buf.resize(len, 0);
        }
        let mut buf = std::mem::take(&mut self.buf);
        let r = self.fill(&mut buf[..len]);
        self.buf = buf;
        let got = r?;
        if got < len {
            return Err(PcapError::Truncated {
                offset,
                what,
                needed: already + len as u64,
                got: already + got as u64,
            });
        }
        Ok(())
    }

    fn advance_classic(&mut self) -> Result<Option<RecordMeta>, PcapError> {
        let FileFormat::Pcap {
            nanosecond,
            link_type,
            ..
        } = self.format
        else {
            return Ok(None);
        };
        let offset = self.pos;
        let mut head = [0u8; 16];
        let got = self.fill(&mut head)?;
        if got == 0 {
            return Ok(None);
        }
        if got < head.len() {
            return Err(PcapError::Truncated {
                offset,
                what: "record header",
                needed: 16,
                got: got as u64,
            });
        }
        let o = self.order;
        let sec = u64::from(o.u32(&head[0..]));
        let frac = u64::from(o.u32(&head[4..]));
        let caplen = o.u32(&head[8..]);
        let orig_len = o.u32(&head[12..]);
        if caplen > MAX_RECORD {
            return Err(PcapError::Corrupt {
                offset,
                reason: format!("record of {caplen} captured bytes (limit {MAX_RECORD})"),
            });
        }
        self.fill_buf(caplen as usize, offset, "record", 16)?;
        let ts_ns = sec
            .saturating_mul(1_000_000_000)
            .saturating_add(if nanosecond {
                frac
            } else {
                frac.saturating_mul(1000)
            });
        Ok(Some(RecordMeta {
            ts_ns,
            link_type,
            orig_len,
            start: 0,
            end: caplen as usize,
            offset,
        }))
    }

    /// Reads a section header block whose type field (4 bytes) was already read.
    fn read_section_header(&mut self, offset: u64) -> Result<(), PcapError> {
        let mut head = [0u8; 8];
        let got = self.fill(&mut head)?;
        if got < 8 {
            return Err(PcapError::Truncated {
                offset,
                what: "section header block",
                needed: 12,
                got: 4 + got as u64,
            });
        }
        let bom = &head[4..8];
        self.order = if u32::from_le_bytes([bom[0], bom[1], bom[2], bom[3]]) == NG_BYTE_ORDER {
            Order::Little
        } else if u32::from_be_bytes([bom[0], bom[1], bom[2], bom[3]]) == NG_BYTE_ORDER {
            Order::Big
        } else {
            return Err(PcapError::Corrupt {
                offset: offset + 8,
                reason: "pcapng section header with a bad byte-order magic".to_string(),
            });
        };
        let total = self.order.u32(&head[0..4]);
        if total < 28 || total % 4 != 0 || total > MAX_BLOCK {
            return Err(PcapError::Corrupt {
                offset,
                reason: format!("pcapng section header block of {total} bytes"),
            });
        }
        // Version, section length and options, then the trailing length.
        let rest = total as usize - 12;
        self.fill_buf(rest, offset, "section header block", 12)?;
        let major = self.order.u16(&self.buf[0..]);
        if major != 1 {
            return Err(PcapError::Corrupt {
                offset: offset + 12,
                reason: format!("unsupported pcapng version {major}"),
            });
        }
        // The buffer holds everything after the byte-order magic.
        self.check_trailer(offset, total, total as usize - 16)?;
        self.interfaces.clear();
        Ok(())
    }

    /// Checks that a block's trailing length, at `at` in the buffer, matches `total`.
    fn check_trailer(&self, offset: u64, total: u32, at: usize) -> Result<(), PcapError> {
        let trailer = self.order.u32(&self.buf[at..at + 4]);
        if trailer != total {
            return Err(PcapError::Corrupt {
                offset,
                reason: format!("pcapng block length {total} but trailing length {trailer}"),
            });
        }
        Ok(())
    }

    fn advance_ng(&mut self) -> Result<Option<RecordMeta>, PcapError> {
        loop {
            let offset = self.pos;
            let mut head = [0u8; 8];
            let got = self.fill(&mut head[..4])?;
            if got == 0 {
                return Ok(None);
            }
            if got < 4 {
                return Err(PcapError::Truncated {
                    offset,
                    what: "block header",
                    needed: 8,
                    got: got as u64,
                });
            }
            if u32::from_be_bytes([head[0], head[1], head[2], head[3]]) == NG_SHB {
                self.read_section_header(offset)?;
                continue;
            }
            let got = self.fill(&mut head[4..])?;
            if got < 4 {
                return Err(PcapError::Truncated {
                    offset,
                    what: "block header",
                    needed: 8,
                    got: 4 + got as u64,
                });
            }
            let o = self.order;
            let block_type = o.u32(&head[0..]);
            let total = o.u32(&head[4..]);
            if total < 12 || total % 4 != 0 || total > MAX_BLOCK {
                return Err(PcapError::Corrupt {
                    offset,
                    reason: format!("pcapng block of {total} bytes"),
                });
            }
            // The body and the trailing length: `total - 8` bytes.
            let body_len = total as usize - 12;
            self.fill_buf(body_len + 4, offset, "block", 8)?;
            self.check_trailer(offset, total, body_len)?;
            match block_type {
                NG_IDB => self.interface(offset, body_len)?,
                NG_EPB | NG_PB => {
                    let (iface, ts_high, ts_low, caplen, orig_len) = if block_type == NG_EPB {
                        if body_len < 20 {
                            return Err(self.short_block(offset, "enhanced packet block"));
                        }
                        (
                            o.u32(&self.buf[0..]) as usize,
                            o.u32(&self.buf[4..]),
                            o.u32(&self.buf[8..]),
                            o.u32(&self.buf[12..]),
                            o.u32(&self.buf[16..]),
                        )
                    } else {
                        if body_len < 20 {
                            return Err(self.short_block(offset, "packet block"));
                        }
                        (
                            usize::from(o.u16(&self.buf[0..])),
                            o.u32(&self.buf[4..]),
                            o.u32(&self.buf[8..]),
                            o.u32(&self.buf[12..]),
                            o.u32(&self.buf[16..]),
                        )
                    };
                    if caplen as usize > body_len - 20 || caplen > MAX_RECORD {
                        return Err(PcapError::Corrupt {
                            offset,
                            reason: format!(
                                "packet of {caplen} captured bytes in a block of {total} bytes"
                            ),
                        });
                    }
                    let iface = self.iface(offset, iface)?;
                    let ts = (u64::from(ts_high) << 32) | u64::from(ts_low);
                    return Ok(Some(RecordMeta {
                        ts_ns: ts_to_ns(ts, iface.units_per_sec, iface.offset_sec),
                        link_type: iface.link_type,
                        orig_len,
                        start: 20,
                        end: 20 + caplen as usize,
                        offset,
                    }));
                }
                NG_SPB => {
                    if body_len < 4 {
                        return Err(self.short_block(offset, "simple packet block"));
                    }
                    let iface = self.iface(offset, 0)?;
                    let orig_len = o.u32(&self.buf[0..]);
                    let mut caplen = (body_len - 4).min(orig_len as usize);
                    if iface.snaplen > 0 {
                        caplen = caplen.min(iface.snaplen as usize);
                    }
                    return Ok(Some(RecordMeta {
                        ts_ns: 0,
                        link_type: iface.link_type,
                        orig_len,
                        start: 4,
                        end: 4 + caplen,
                        offset,
                    }));
                }
                _ => {} // statistics, name resolution, custom blocks...
            }
        }
    }

    fn short_block(&self, offset: u64, what: &str) -> PcapError {
        PcapError::Corrupt {
            offset,
            reason: format!("{what} too short for its fields"),
        }
    }

    fn iface(&self, offset: u64, index: usize) -> Result<Interface, PcapError> {
        self.interfaces
            .get(index)
            .copied()
            .ok_or_else(|| PcapError::Corrupt {
                offset,
                reason: format!("packet for undeclared interface {index}"),
            })
    }

    /// Parses an interface description block (body in the buffer).
    fn interface(&mut self, offset: u64, body_len: usize) -> Result<(), PcapError> {
        let o = self.order;
        if body_len < 8 {
            return Err(self.short_block(offset, "interface description block"));
        }
        let mut iface = Interface {
            link_type: u32::from(o.u16(&self.buf[0..])),
            snaplen: o.u32(&self.buf[4..]),
            units_per_sec: 1_000_000,
            offset_sec: 0,
        };
        let mut pos = 8;
        while pos + 4 <= body_len {
            let code = o.u16(&self.buf[pos..]);
            let len = usize::from(o.u16(&self.buf[pos + 2..]));
            let value = pos + 4;
            if value + len > body_len {
                return Err(PcapError::Corrupt {
                    offset,
                    reason: format!("interface option {code} runs past its block"),
                });
            }
            match (code, len) {
                (0, _) => break,
                (9, 1) => {
                    let r = self.buf[value];
                    let exp = u32::from(r & 0x7f);
                    let units = if r & 0x80 != 0 {
                        1u128.checked_shl(exp).filter(|_| exp < 128)
                    } else {
                        10u128.checked_pow(exp)
                    };
                    iface.units_per_sec = units.ok_or_else(|| PcapError::Corrupt {
                        offset,
                        reason: format!("timestamp resolution {r:#04x}"),
                    })?;
                }
                (14, 8) => iface.offset_sec = o.i64(&self.buf[value..]),
                _ => {}
            }
            pos = value + len.div_ceil(4) * 4;
        }
        self.interfaces.push(iface);
        Ok(())
    }
}

/// Nanoseconds since the epoch from a timestamp in `units_per_sec` units plus an offset
/// in seconds, saturating.
fn ts_to_ns(ts: u64, units_per_sec: u128, offset_sec: i64) -> u64 {
    let ns = u128::from(ts) * 1_000_000_000 / units_per_sec.max(1);
    let ns = ns as i128 + i128::from(offset_sec) * 1_000_000_000;
    ns.clamp(0, i128::from(u64::MAX)) as u64
}
