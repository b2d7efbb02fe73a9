//! The one error type of the pcap reader: what is wrong and at which byte.

use std::io;

use thiserror::Error;

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
