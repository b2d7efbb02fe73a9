//! The packetizer: a heap becomes packets written into caller buffers.
//!
//! Its output is byte-identical to spead2's `packet_generator` (4.5.1): every packet
//! starts with HEAP_CNT, HEAP_LENGTH, PAYLOAD_OFFSET, PAYLOAD_LENGTH; the heap's
//! pointers fill the earliest packets (or all of them when repeated); addressed items
//! are laid out back to back in the order added; and when the payload is too small to
//! give every packet a payload byte, a NULL pointer and zero padding are added.

use super::heap::{Heap, ItemValue};
use crate::wire::{
    Flavour, HEADER_SIZE, HEAP_CNT_ID, HEAP_LENGTH_ID, NULL_ID, PAYLOAD_LENGTH_ID,
    PAYLOAD_OFFSET_ID, POINTER_SIZE,
};
use thiserror::Error;

/// Header plus the four mandatory pointers.
pub const PREFIX_SIZE: usize = HEADER_SIZE + 4 * POINTER_SIZE;

/// Why a heap cannot be packetized.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum SendError {
    /// `max_packet_size` (rounded down to a multiple of 8) is below 56 bytes.
    #[error("packet size {0} is too small")]
    PacketTooSmall(usize),
    /// Repeated pointers do not fit in one packet.
    #[error("packet size is too small to repeat item pointers")]
    RepeatPointersTooMany,
    /// The heap counter does not fit in the flavour's address bits.
    #[error("heap cnt {0} does not fit the flavour")]
    CntTooLarge(u64),
    /// The heap payload does not fit in the flavour's address bits.
    #[error("heap payload of {0} bytes does not fit the flavour")]
    HeapTooLarge(u64),
    /// An item ID does not fit the flavour.
    #[error("item id {0:#x} does not fit the flavour")]
    IdTooLarge(u64),
    /// A caller buffer is shorter than the maximum packet size.
    #[error("buffer of {0} bytes is shorter than the maximum packet size")]
    BufferTooSmall(usize),
    /// A heap's substream index is not below the number of substreams (spead2's
    /// `async_send_heaps` refuses it with `invalid_argument`; it is never wrapped).
    #[error("substream index {substream} is out of range for {substreams} substreams")]
    SubstreamOutOfRange {
        /// The index asked for.
        substream: usize,
        /// Substreams the transport has.
        substreams: usize,
    },
    /// A paused packetizer was resumed on a heap other than its own.
    #[error("a packetizer was resumed on another heap than the one it was cutting")]
    NotThisHeap,
}

/// A piece of a packet's item bytes, as [`Packetizer::next_packet_parts`] hands it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part<'h> {
    /// Bytes of an item of the heap.
    Data(&'h [u8]),
    /// This many zero bytes.
    Zeros(usize),
}

impl Part<'_> {
    /// Its length in bytes.
    pub fn len(&self) -> usize {
        match self {
            Part::Data(d) => d.len(),
            Part::Zeros(n) => *n,
        }
    }

    /// True when it has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Turns one heap into packets, one call per packet.
#[derive(Debug, Clone)]
pub struct Packetizer<'h> {
    heap: &'h Heap,
    at: Cursor,
}

/// Where a [`Packetizer`] stands in its heap, without the borrow of the heap: a caller
/// that sends one packet now and the next later keeps this in between
/// ([`Packetizer::pause`], [`Packetizer::resume`]) and builds each packet straight into
/// its send buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    /// Items in the heap, to check that it is resumed on the heap it was made for.
    items: usize,
    flavour: Flavour,
    cnt: u64,
    max_packet_size: usize,
    payload_size: u64,
    real_payload_size: u64,
    max_item_pointers: usize,
    need_null_item: bool,
    payload_offset: u64,
    next_item_pointer: usize,
    next_address: u64,
    next_item: usize,
    next_item_offset: usize,
}

impl Cursor {
    /// True while packets remain.
    pub fn has_next(&self) -> bool {
        self.payload_offset < self.payload_size
    }
}

impl<'h> Packetizer<'h> {
    /// Prepares to send `heap` with heap counter `cnt` in packets of at most
    /// `max_packet_size` bytes (rounded down to a multiple of 8).
    ///
    /// # Errors
    /// [`SendError`] when the heap cannot be sent with these parameters.
    pub fn new(heap: &'h Heap, cnt: u64, max_packet_size: usize) -> Result<Self, SendError> {
        let flavour = heap.flavour;
        let max_packet_size = max_packet_size & !7;
        if max_packet_size < PREFIX_SIZE + 2 * POINTER_SIZE {
            return Err(SendError::PacketTooSmall(max_packet_size));
        }
        if cnt > flavour.value_mask() {
            return Err(SendError::CntTooLarge(cnt));
        }
        if let Some(item) = heap.items.iter().find(|i| i.id > flavour.max_id()) {
            return Err(SendError::IdTooLarge(item.id));
        }
        let real_payload_size = heap.payload_size();
        let mut payload_size = real_payload_size;
        if payload_size > flavour.value_mask() {
            return Err(SendError::HeapTooLarge(payload_size));
        }
        let max_item_pointers = (max_packet_size - (PREFIX_SIZE + POINTER_SIZE)) / POINTER_SIZE;
        let item_packets = heap.items.len() / max_item_pointers + 1;
        if heap.repeat_pointers && item_packets > 1 {
            return Err(SendError::RepeatPointersTooMany);
        }
        let min_payload_size = (item_packets as u64 - 1) * POINTER_SIZE as u64 + 1;
        let mut need_null_item = false;
        if payload_size < min_payload_size {
            payload_size = min_payload_size;
            need_null_item = true;
        }
        Ok(Self {
            heap,
            at: Cursor {
                items: heap.items.len(),
                flavour,
                cnt,
                max_packet_size,
                payload_size,
                real_payload_size,
                max_item_pointers,
                need_null_item,
                payload_offset: 0,
                next_item_pointer: 0,
                next_address: 0,
                next_item: 0,
                next_item_offset: 0,
            },
        })
    }

    /// Where this packetizer stands, to [`Packetizer::resume`] later on the same heap.
    pub fn pause(self) -> Cursor {
        self.at
    }

    /// Goes on from `at` on `heap`, which must be the heap (unchanged) that `at` was
    /// paused on.
    ///
    /// # Errors
    /// [`SendError::NotThisHeap`] when `heap`'s items or payload size differ from those of
    /// the heap `at` was made for.
    pub fn resume(heap: &'h Heap, at: Cursor) -> Result<Self, SendError> {
        if heap.items.len() != at.items || heap.payload_size() != at.real_payload_size {
            return Err(SendError::NotThisHeap);
        }
        Ok(Self { heap, at })
    }

    /// The maximum packet size in use (rounded).
    pub fn max_packet_size(&self) -> usize {
        self.at.max_packet_size
    }

    /// HEAP_LENGTH as sent (including padding).
    pub fn heap_length(&self) -> u64 {
        self.at.payload_size
    }

    /// True while packets remain.
    pub fn has_next(&self) -> bool {
        self.at.payload_offset < self.at.payload_size
    }

    /// Writes the next packet into `buf` and returns its length, or `Ok(None)` when
    /// the heap is done.
    ///
    /// # Errors
    /// [`SendError::BufferTooSmall`] if `buf` is shorter than the maximum packet size.
    pub fn next_packet(&mut self, buf: &mut [u8]) -> Result<Option<usize>, SendError> {
        self.emit(buf, |buf, pos, part| match part {
            Part::Data(d) => {
                buf[pos..pos + d.len()].copy_from_slice(d);
                pos + d.len()
            }
            Part::Zeros(n) => {
                buf[pos..pos + n].fill(0);
                pos + n
            }
        })
    }

    /// The next packet as spead2's `packet_generator` hands it to a scatter-gather
    /// writer: the header, item pointers and padding written into `buf` (the returned
    /// length), then the item bytes as [`Part`]s appended to `parts` (cleared first),
    /// borrowed from the heap. `Ok(None)` when the heap is done.
    ///
    /// # Errors
    /// [`SendError::BufferTooSmall`] if `buf` is shorter than the maximum packet size.
    pub fn next_packet_parts(
        &mut self,
        buf: &mut [u8],
        parts: &mut Vec<Part<'h>>,
    ) -> Result<Option<usize>, SendError> {
        parts.clear();
        self.emit(buf, |_, pos, part| {
            parts.push(part);
            pos
        })
    }

    /// Cuts the next packet: the prefix goes into `buf`, each piece of item bytes to
    /// `put(buf, pos, part)`, which returns the position after it in `buf`.
    fn emit(
        &mut self,
        buf: &mut [u8],
        mut put: impl FnMut(&mut [u8], usize, Part<'h>) -> usize,
    ) -> Result<Option<usize>, SendError> {
        if !self.has_next() {
            return Ok(None);
        }
        if buf.len() < self.at.max_packet_size {
            return Err(SendError::BufferTooSmall(buf.len()));
        }
        let heap = self.heap;
        let flavour = self.at.flavour;
        if heap.repeat_pointers {
            self.at.next_item_pointer = 0;
            self.at.next_address = 0;
        }
        let n_items = heap.items.len() + usize::from(self.at.need_null_item);
        let n_pointers = self
            .at
            .max_item_pointers
            .min(n_items - self.at.next_item_pointer);
        let mut payload_len = (self.at.payload_size - self.at.payload_offset)
            .min((self.at.max_packet_size - n_pointers * POINTER_SIZE - PREFIX_SIZE) as u64)
            as usize;
        buf[..8].copy_from_slice(&flavour.header((n_pointers + 4) as u16));
        let mut pos = 8;
        let mut put_word = |pos: &mut usize, word: [u8; 8]| {
            buf[*pos..*pos + 8].copy_from_slice(&word);
            *pos += 8;
        };
        for word in [
            flavour.immediate(HEAP_CNT_ID, self.at.cnt),
            flavour.immediate(HEAP_LENGTH_ID, self.at.payload_size),
            flavour.immediate(PAYLOAD_OFFSET_ID, self.at.payload_offset),
            flavour.immediate(PAYLOAD_LENGTH_ID, payload_len as u64),
        ] {
            put_word(&mut pos, word.to_be_bytes());
        }
        let imm_bytes = flavour.immediate_bytes();
        for _ in 0..n_pointers {
            let word = match heap.items.get(self.at.next_item_pointer) {
                None => flavour.address(NULL_ID, self.at.next_address).to_be_bytes(),
                Some(item) => match &item.value {
                    ItemValue::Inline(v) => flavour.immediate(item.id, *v).to_be_bytes(),
                    ItemValue::Bytes {
                        data,
                        allow_immediate,
                    } if *allow_immediate && data.len() <= imm_bytes => {
                        let mut w = flavour.immediate(item.id, 0).to_be_bytes();
                        w[8 - data.len()..].copy_from_slice(data);
                        w
                    }
                    ItemValue::Bytes { data, .. } => {
                        let w = flavour.address(item.id, self.at.next_address).to_be_bytes();
                        self.at.next_address += data.len() as u64;
                        w
                    }
                },
            };
            put_word(&mut pos, word);
            self.at.next_item_pointer += 1;
        }
        // spead2 places a packet's padding (beyond the real payload) straight after
        // the item pointers, before that packet's item bytes. Receivers then see the
        // bytes shifted when real data and padding share a packet, but byte equality
        // with spead2 is the contract, so we do the same.
        let real_end = self.at.real_payload_size.max(self.at.payload_offset);
        let real = (real_end.min(self.at.payload_offset + payload_len as u64)
            - self.at.payload_offset) as usize;
        let padding = payload_len - real;
        buf[pos..pos + padding].fill(0);
        pos += padding;
        payload_len = real;
        self.at.payload_offset += (real + padding) as u64;
        while payload_len > 0 {
            match heap.items.get(self.at.next_item) {
                None => {
                    pos = put(buf, pos, Part::Zeros(payload_len));
                    payload_len = 0;
                }
                Some(item) => match &item.value {
                    ItemValue::Bytes { data, .. } if !item.is_immediate(flavour) => {
                        let n = (data.len() - self.at.next_item_offset).min(payload_len);
                        pos = put(
                            buf,
                            pos,
                            Part::Data(
                                &data[self.at.next_item_offset..self.at.next_item_offset + n],
                            ),
                        );
                        self.at.next_item_offset += n;
                        if self.at.next_item_offset == data.len() {
                            self.at.next_item += 1;
                            self.at.next_item_offset = 0;
                        }
                        payload_len -= n;
                    }
                    _ => {
                        self.at.next_item += 1;
                        self.at.next_item_offset = 0;
                    }
                },
            }
        }
        Ok(Some(pos))
    }

    /// All remaining packets, appended back to back to `out` (as spead2's BytesStream).
    pub fn write_all(&mut self, out: &mut Vec<u8>) {
        let mut buf = vec![0u8; self.at.max_packet_size];
        while let Ok(Some(n)) = self.next_packet(&mut buf) {
            out.extend_from_slice(&buf[..n]);
        }
    }
}

/// Packetizes a heap into one buffer of back-to-back packets.
///
/// # Errors
/// As [`Packetizer::new`].
pub fn heap_to_bytes(heap: &Heap, cnt: u64, max_packet_size: usize) -> Result<Vec<u8>, SendError> {
    let mut p = Packetizer::new(heap, cnt, max_packet_size)?;
    let mut out = Vec::new();
    p.write_all(&mut out);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    #[test]
    fn a_paused_and_resumed_packetizer_cuts_the_same_packets() {
        let mut h = Heap::new(Flavour::SPEAD_64_48);
        h.add_item(0x1000, vec![7u8; 3000], false);
        h.add_item(0x1001, vec![9u8; 10], false);
        let whole = heap_to_bytes(&h, 5, 1024).unwrap();
        let mut cut = Vec::new();
        let mut at = Packetizer::new(&h, 5, 1024).unwrap().pause();
        let mut buf = [0u8; 1024];
        while at.has_next() {
            let mut p = Packetizer::resume(&h, at).unwrap();
            let n = p.next_packet(&mut buf).unwrap().unwrap();
            cut.extend_from_slice(&buf[..n]);
            at = p.pause();
        }
        assert_eq!(cut, whole);
        let mut other = h.clone();
        other.add_item(0x1002, vec![1u8; 4], false);
        assert!(matches!(
            Packetizer::resume(&other, at),
            Err(SendError::NotThisHeap)
        ));
    }

    #[test]
    fn test_vectors() {
        let f = Flavour::SPEAD_64_48;
        let h = Heap::new(f);
        assert_eq!(
            hex(&heap_to_bytes(&h, 0x123456, 1472).unwrap()),
            "53040206000000058001000000123456800200000000000180030000000000008004000000000001000000000000000000"
        );
        let mut h = Heap::new(f);
        h.add_item(0x2345, vec![0x76, 0x54], true);
        assert_eq!(
            hex(&heap_to_bytes(&h, 0x123456, 1472).unwrap()),
            "53040206000000068001000000123456800200000000000180030000000000008004000000000001a345000000007654000000000000000000"
        );
        let mut h = Heap::new(f);
        h.add_end();
        assert_eq!(
            hex(&heap_to_bytes(&h, 0x123456, 1472).unwrap()),
            "530402060000000680010000001234568002000000000001800300000000000080040000000000018006000000000002000000000000000000"
        );
    }

    #[test]
    fn splits_like_spead2() {
        let mut h = Heap::new(Flavour::SPEAD_64_48);
        h.add_item(0x1000, (0u8..100).collect::<Vec<_>>(), false);
        let b = heap_to_bytes(&h, 1, 83).unwrap();
        assert_eq!(b.len(), 228);
        assert_eq!(&hex(&b[..48]), "530402060000000580010000000000018002000000000064800300000000000080040000000000201000000000000000");
    }

    #[test]
    fn padding_goes_before_item_bytes_as_in_spead2() {
        // Observed from spead2 4.5.1: one pointer per packet forces padding to 17
        // bytes, and the first packet's 2 padding bytes precede its 6 item bytes.
        let mut h = Heap::new(Flavour::SPEAD_64_40);
        h.add_item(0x1000, vec![1, 2, 3], false);
        h.add_item(0x1001, vec![5, 6, 7], false);
        let b = heap_to_bytes(&h, 1, 56).unwrap();
        let payloads: Vec<String> = {
            let mut rest = &b[..];
            let mut out = Vec::new();
            while !rest.is_empty() {
                let p = crate::wire::decode_packet(rest).unwrap();
                out.push(hex(p.payload));
                rest = &rest[p.size()..];
            }
            out
        };
        assert_eq!(payloads, vec!["0000010203050607", "0000000000000000", "00"]);
    }

    #[test]
    fn rejects_bad_parameters() {
        let h = Heap::new(Flavour::SPEAD_64_40);
        assert_eq!(
            Packetizer::new(&h, 1, 55).unwrap_err(),
            SendError::PacketTooSmall(48)
        );
        assert!(Packetizer::new(&h, 1 << 40, 1472).is_err());
        let mut h = Heap::new(Flavour::SPEAD_64_40);
        h.repeat_pointers = true;
        for i in 0..10 {
            h.add_immediate(0x1000 + i, i);
        }
        assert_eq!(
            Packetizer::new(&h, 1, 64).unwrap_err(),
            SendError::RepeatPointersTooMany
        );
    }
}
