//! Capture file records: classic pcap (both byte orders, micro- and nanosecond
//! timestamps) and pcapng (sections of either byte order, several interfaces,
//! `if_tsresol` / `if_tsoffset`).
//!
//! The reader owns one buffer that grows to the largest block and is reused, so reading
//! a record does not allocate. `pcap-file` parses what it parses correctly: the classic
//! file header and the framing of pcapng blocks (length, padding, trailing length). This
//! module reads the rest itself, because `pcap-file` 2.0 gets it wrong:
//!
//! - its classic packet parser refuses a record whose original length exceeds the snap
//!   length, which is every packet of a capture made with a short snap length (`tcpdump
//!   -s 96`); this reader takes the record header itself and reports the cut-short
//!   packet by its `orig_len`;
//! - its enhanced packet block keeps the raw timestamp as if it were nanoseconds,
//!   whatever the interface's `if_tsresol`, and ignores `if_tsoffset`, so dumpcap's
//!   microsecond files come out 1000 times too early; this reader reads the packet
//!   blocks' fixed fields itself and scales them by the interface (which also keeps
//!   `pcap-file` from allocating the packet options of every record);
//! - its option lists fail without a closing `opt_endofopt`, which the format lets a
//!   writer leave out (the list ends with the block), and its interface description
//!   block fails when the reserved field is not 0, which readers must ignore; it also
//!   reads `if_tsoffset` unsigned where the format says signed. This reader walks the
//!   section header's and interface description's fields and options itself.
//!
//! Every case is tested in `tests` against a file that shows it.

use std::io::{self, Read};
use std::ops::Range;

use pcap_file::pcapng::RawBlock;
use pcap_file::{Endianness, TsResolution};

use super::error::PcapError;

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

/// A [`Record`] that says where its bytes are in [`PcapReader::buffer`] instead of
/// borrowing them, for callers that keep the reader borrowed mutably meanwhile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordInfo {
    /// Timestamp in nanoseconds since the Unix epoch (0 when the record has none).
    pub ts_ns: u64,
    /// Link type (LINKTYPE_* value) of the frame.
    pub link_type: u32,
    /// Length of the frame on the wire.
    pub orig_len: u32,
    /// Where the captured bytes are in the buffer.
    pub data: Range<usize>,
    /// Byte offset of the record in the file.
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
        let magic = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
        if magic == NG_SHB {
            this.format = FileFormat::PcapNg;
            this.read_section_header(0)?;
            return Ok(this);
        }
        if ![MAGIC_US, MAGIC_NS].contains(&magic)
            && ![MAGIC_US, MAGIC_NS].contains(&magic.swap_bytes())
        {
            return Err(PcapError::BadMagic { magic });
        }
        this.read_exact(&mut head[4..], 0, "pcap file header", 4)?;
        let (_, header) =
            pcap_file::pcap::PcapHeader::from_slice(&head).map_err(|e| PcapError::Corrupt {
                offset: 0,
                reason: format!("pcap file header: {e}"),
            })?;
        if header.version_major != 2 {
            return Err(PcapError::Corrupt {
                offset: 4,
                reason: format!("unsupported pcap version {}", header.version_major),
            });
        }
        this.order = match header.endianness {
            Endianness::Big => Order::Big,
            Endianness::Little => Order::Little,
        };
        this.format = FileFormat::Pcap {
            big_endian: header.endianness == Endianness::Big,
            nanosecond: header.ts_resolution == TsResolution::NanoSecond,
            snaplen: header.snaplen,
            // The upper bits carry FCS information; the link type is the low 16 bits.
            link_type: u32::from(header.datalink) & 0xffff,
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
            data: &self.buf[m.data],
            offset: m.offset,
        }))
    }

    /// The buffer the last [`Self::advance`] filled.
    pub fn buffer(&self) -> &[u8] {
        &self.buf
    }

    /// Reads the next record into the buffer and says where it is: [`Self::next_record`]
    /// without the borrow.
    ///
    /// # Errors
    /// As [`Self::next_record`].
    pub fn advance(&mut self) -> Result<Option<RecordInfo>, PcapError> {
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

    /// Reads exactly `buf.len()` more bytes of the structure `what` that starts at
    /// `offset`, of which `already` bytes were read before.
    fn read_exact(
        &mut self,
        buf: &mut [u8],
        offset: u64,
        what: &'static str,
        already: u64,
    ) -> Result<(), PcapError> {
        let got = self.fill(buf)?;
        if got < buf.len() {
            return Err(PcapError::Truncated {
                offset,
                what,
                needed: already + buf.len() as u64,
                got: already + got as u64,
            });
        }
        Ok(())
    }

    /// [`Self::read_exact`] of `len` bytes into the record buffer at `at`.
    fn fill_buf(
        &mut self,
        at: usize,
        len: usize,
        offset: u64,
        what: &'static str,
        already: u64,
    ) -> Result<(), PcapError> {
        if self.buf.len() < at + len {
            self.buf.resize(at + len, 0);
        }
        let mut buf = std::mem::take(&mut self.buf);
        let r = self.read_exact(&mut buf[at..at + len], offset, what, already);
        self.buf = buf;
        r
    }

    fn advance_classic(&mut self) -> Result<Option<RecordInfo>, PcapError> {
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
        self.fill_buf(0, caplen as usize, offset, "record", 16)?;
        let ts_ns = sec
            .saturating_mul(1_000_000_000)
            .saturating_add(if nanosecond {
                frac
            } else {
                frac.saturating_mul(1000)
            });
        Ok(Some(RecordInfo {
            ts_ns,
            link_type,
            orig_len,
            data: 0..caplen as usize,
            offset,
        }))
    }

    /// Reads a section header block whose type field (4 bytes) was already read.
    fn read_section_header(&mut self, offset: u64) -> Result<(), PcapError> {
        let mut head = [0u8; 12];
        head[..4].copy_from_slice(&NG_SHB.to_be_bytes());
        self.read_exact(&mut head[4..], offset, "section header block", 4)?;
        let bom = [head[8], head[9], head[10], head[11]];
        self.order = if u32::from_le_bytes(bom) == NG_BYTE_ORDER {
            Order::Little
        } else if u32::from_be_bytes(bom) == NG_BYTE_ORDER {
            Order::Big
        } else {
            return Err(PcapError::Corrupt {
                offset: offset + 8,
                reason: "pcapng section header with a bad byte-order magic".to_string(),
            });
        };
        let total = self.order.u32(&head[4..8]);
        self.read_block(offset, &head, total, 28, "section header block")?;
        self.check_trailer(offset, total)?;
        let major = self.order.u16(&self.buf[12..]);
        if major != 1 {
            return Err(PcapError::Corrupt {
                offset: offset + 12,
                reason: format!("unsupported pcapng version {major}"),
            });
        }
        self.interfaces.clear();
        Ok(())
    }

    /// Checks a block's total length (at least `min`, a multiple of 4, at most
    /// `MAX_BLOCK`) and reads the whole block into the start of the buffer: the `head`
    /// bytes already read, then the rest.
    fn read_block(
        &mut self,
        offset: u64,
        head: &[u8],
        total: u32,
        min: u32,
        what: &'static str,
    ) -> Result<(), PcapError> {
        if total < min || total % 4 != 0 || total > MAX_BLOCK {
            return Err(PcapError::Corrupt {
                offset,
                reason: format!("pcapng {what} of {total} bytes"),
            });
        }
        let n = head.len();
        self.buf.resize(self.buf.len().max(n), 0);
        self.buf[..n].copy_from_slice(head);
        self.fill_buf(n, total as usize - n, offset, what, n as u64)
    }

    /// Checks the block of `total` bytes at the start of the buffer with `pcap-file`'s
    /// block framing: a multiple of 4 bytes, whose trailing length matches.
    fn check_trailer(&self, offset: u64, total: u32) -> Result<(), PcapError> {
        let block = &self.buf[..total as usize];
        let framed = match self.order {
            Order::Little => {
                RawBlock::from_slice::<byteorder_slice::LittleEndian>(block).map(|_| ())
            }
            Order::Big => RawBlock::from_slice::<byteorder_slice::BigEndian>(block).map(|_| ()),
        };
        framed.map_err(|e| {
            let trailer = self.order.u32(&block[block.len() - 4..]);
            let reason = if trailer == total {
                format!("pcapng block of {total} bytes: {e}")
            } else {
                format!("pcapng block length {total} but trailing length {trailer}")
            };
            PcapError::Corrupt { offset, reason }
        })
    }

    fn advance_ng(&mut self) -> Result<Option<RecordInfo>, PcapError> {
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
            self.read_exact(&mut head[4..], offset, "block header", 4)?;
            let o = self.order;
            let block_type = o.u32(&head[0..]);
            let total = o.u32(&head[4..]);
            self.read_block(offset, &head, total, 12, "block")?;
            self.check_trailer(offset, total)?;
            // The body is buf[8..8 + body_len], then the trailing length.
            let body_len = total as usize - 12;
            match block_type {
                NG_IDB => self.interface(offset, body_len)?,
                NG_EPB | NG_PB => {
                    let what = if block_type == NG_EPB {
                        "enhanced packet block"
                    } else {
                        "packet block"
                    };
                    if body_len < 20 {
                        return Err(short_block(offset, what));
                    }
                    let b = &self.buf[8..];
                    // An EPB has a 32-bit interface id, a PB a 16-bit one and a drop count.
                    let iface = if block_type == NG_EPB {
                        o.u32(b) as usize
                    } else {
                        usize::from(o.u16(b))
                    };
                    let ts = (u64::from(o.u32(&b[4..])) << 32) | u64::from(o.u32(&b[8..]));
                    let caplen = o.u32(&b[12..]);
                    let orig_len = o.u32(&b[16..]);
                    if caplen as usize > body_len - 20 || caplen > MAX_RECORD {
                        return Err(PcapError::Corrupt {
                            offset,
                            reason: format!(
                                "packet of {caplen} captured bytes in a block of {total} bytes"
                            ),
                        });
                    }
                    let iface = self.iface(offset, iface)?;
                    return Ok(Some(RecordInfo {
                        ts_ns: ts_to_ns(ts, iface.units_per_sec, iface.offset_sec),
                        link_type: iface.link_type,
                        orig_len,
                        data: 28..28 + caplen as usize,
                        offset,
                    }));
                }
                NG_SPB => {
                    if body_len < 4 {
                        return Err(short_block(offset, "simple packet block"));
                    }
                    let iface = self.iface(offset, 0)?;
                    let orig_len = o.u32(&self.buf[8..]);
                    let mut caplen = (body_len - 4).min(orig_len as usize);
                    if iface.snaplen > 0 {
                        caplen = caplen.min(iface.snaplen as usize);
                    }
                    return Ok(Some(RecordInfo {
                        ts_ns: 0,
                        link_type: iface.link_type,
                        orig_len,
                        data: 12..12 + caplen,
                        offset,
                    }));
                }
                _ => {} // statistics, name resolution, custom blocks...
            }
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

    /// Parses an interface description block whose body (`body_len` bytes) is at byte 8
    /// of the buffer. Options end at `opt_endofopt` or at the end of the block.
    fn interface(&mut self, offset: u64, body_len: usize) -> Result<(), PcapError> {
        let o = self.order;
        if body_len < 8 {
            return Err(short_block(offset, "interface description block"));
        }
        let body = &self.buf[8..8 + body_len];
        let mut iface = Interface {
            link_type: u32::from(o.u16(body)),
            snaplen: o.u32(&body[4..]),
            units_per_sec: 1_000_000,
            offset_sec: 0,
        };
        let mut pos = 8;
        while pos + 4 <= body_len {
            let code = o.u16(&body[pos..]);
            let len = usize::from(o.u16(&body[pos + 2..]));
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
                    let r = body[value];
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
                (14, 8) => {
                    let mut b = [0u8; 8];
                    b.copy_from_slice(&body[value..value + 8]);
                    iface.offset_sec = match o {
                        Order::Little => i64::from_le_bytes(b),
                        Order::Big => i64::from_be_bytes(b),
                    };
                }
                _ => {}
            }
            pos = value + len.div_ceil(4) * 4;
        }
        self.interfaces.push(iface);
        Ok(())
    }
}

fn short_block(offset: u64, what: &str) -> PcapError {
    PcapError::Corrupt {
        offset,
        reason: format!("{what} too short for its fields"),
    }
}

/// Nanoseconds since the epoch from a timestamp in `units_per_sec` units plus an offset
/// in seconds, saturating.
fn ts_to_ns(ts: u64, units_per_sec: u128, offset_sec: i64) -> u64 {
    let ns = u128::from(ts) * 1_000_000_000 / units_per_sec.max(1);
    let ns = ns as i128 + i128::from(offset_sec) * 1_000_000_000;
    ns.clamp(0, i128::from(u64::MAX)) as u64
}
