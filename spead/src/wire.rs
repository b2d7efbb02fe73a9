//! Sans-IO encoding and decoding of SPEAD packets and item pointers.
//!
//! Everything here works on caller-provided byte slices and never allocates, so the
//! same code serves kernel sockets, verbs rings and in-memory buffers. The rules follow
//! spead2 4.5.1 (see `SPEAD.md`): each rejection is a distinct [`WireError`] so that
//! receivers can count why packets were dropped.

use thiserror::Error;

/// Magic byte and version, checked together (`0x53`, `0x04`).
pub const MAGIC_VERSION: u16 = 0x5304;
/// Bytes in the fixed packet header.
pub const HEADER_SIZE: usize = 8;
/// Bytes per item pointer.
pub const POINTER_SIZE: usize = 8;

/// Padding pointer.
pub const NULL_ID: u64 = 0x00;
/// Heap identifier (immediate, mandatory).
pub const HEAP_CNT_ID: u64 = 0x01;
/// Total heap payload length (immediate, optional).
pub const HEAP_LENGTH_ID: u64 = 0x02;
/// Offset of the packet payload in the heap (immediate, mandatory).
pub const PAYLOAD_OFFSET_ID: u64 = 0x03;
/// Length of the packet payload (immediate, mandatory).
pub const PAYLOAD_LENGTH_ID: u64 = 0x04;
/// Embedded descriptor packet (addressed).
pub const DESCRIPTOR_ID: u64 = 0x05;
/// Stream control (immediate).
pub const STREAM_CTRL_ID: u64 = 0x06;
/// Descriptor field: item name.
pub const DESCRIPTOR_NAME_ID: u64 = 0x10;
/// Descriptor field: item description.
pub const DESCRIPTOR_DESCRIPTION_ID: u64 = 0x11;
/// Descriptor field: shape.
pub const DESCRIPTOR_SHAPE_ID: u64 = 0x12;
/// Descriptor field: format.
pub const DESCRIPTOR_FORMAT_ID: u64 = 0x13;
/// Descriptor field: described item ID.
pub const DESCRIPTOR_ID_ID: u64 = 0x14;
/// Descriptor field: numpy header.
pub const DESCRIPTOR_DTYPE_ID: u64 = 0x15;

/// STREAM_CTRL value: start of stream.
pub const CTRL_STREAM_START: u64 = 0;
/// STREAM_CTRL value: descriptors reissued.
pub const CTRL_DESCRIPTOR_REISSUE: u64 = 1;
/// STREAM_CTRL value: end of stream.
pub const CTRL_STREAM_STOP: u64 = 2;
/// STREAM_CTRL value: descriptors updated.
pub const CTRL_DESCRIPTOR_UPDATE: u64 = 3;

/// Why a packet was rejected. One variant per rule, so receivers can count them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum WireError {
    /// Fewer than 8 bytes, or the item pointers run past the end of the buffer.
    #[error("packet truncated: need {needed} bytes, have {available}")]
    Truncated {
        /// Bytes the header says are needed.
        needed: usize,
        /// Bytes available.
        available: usize,
    },
    /// Bytes 0-1 are not `0x5304`.
    #[error("bad magic/version 0x{0:04x}")]
    BadMagic(u16),
    /// Byte 2 or 3 is zero, or they do not add up to 64 bits.
    #[error("unsupported flavour: item pointer bytes {item_pointer_bytes}, heap address bytes {heap_address_bytes}")]
    BadFlavour {
        /// Byte 2 of the header.
        item_pointer_bytes: u8,
        /// Byte 3 of the header.
        heap_address_bytes: u8,
    },
    /// No immediate HEAP_CNT pointer.
    #[error("packet has no HEAP_CNT")]
    MissingHeapCnt,
    /// No immediate PAYLOAD_OFFSET pointer.
    #[error("packet has no PAYLOAD_OFFSET")]
    MissingPayloadOffset,
    /// No immediate PAYLOAD_LENGTH pointer.
    #[error("packet has no PAYLOAD_LENGTH")]
    MissingPayloadLength,
    /// `8 + 8n + payload_length` exceeds the datagram.
    #[error("payload runs past the end of the packet: need {needed} bytes, have {available}")]
    PayloadTruncated {
        /// Bytes the header says are needed.
        needed: u64,
        /// Bytes available.
        available: usize,
    },
    /// `payload_offset + payload_length > heap_length`.
    #[error("payload [{offset}, {offset}+{length}) lies beyond heap length {heap_length}")]
    OffsetBeyondLength {
        /// PAYLOAD_OFFSET.
        offset: u64,
        /// PAYLOAD_LENGTH.
        length: u64,
        /// HEAP_LENGTH.
        heap_length: u64,
    },
    /// A datagram holds more (or fewer) bytes than its single packet.
    #[error("datagram size {datagram} does not match packet size {packet}")]
    SizeMismatch {
        /// Packet size from its header.
        packet: usize,
        /// Datagram size.
        datagram: usize,
    },
}

/// A SPEAD flavour: how many of the 64 pointer bits address the heap.
///
/// spead2 supports any multiple of 8 from 8 to 56; 40 and 48 are the ones in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Flavour {
    heap_address_bits: u8,
}

impl Default for Flavour {
    fn default() -> Self {
        Self::SPEAD_64_40
    }
}

impl Flavour {
    /// SPEAD-64-40 (spead2's default).
    pub const SPEAD_64_40: Self = Self {
        heap_address_bits: 40,
    };
    /// SPEAD-64-48.
    pub const SPEAD_64_48: Self = Self {
        heap_address_bits: 48,
    };

    /// A flavour with the given heap address bits, if valid (a multiple of 8 in 8..=56).
    pub fn new(heap_address_bits: u8) -> Option<Self> {
        (heap_address_bits % 8 == 0 && (8..=56).contains(&heap_address_bits))
            .then_some(Self { heap_address_bits })
    }

    /// Heap address bits (HAB).
    pub fn heap_address_bits(self) -> u32 {
        u32::from(self.heap_address_bits)
    }

    /// Bytes an immediate value can hold (HAB / 8).
    pub fn immediate_bytes(self) -> usize {
        usize::from(self.heap_address_bits / 8)
    }

    /// Mask of the value/address bits.
    pub fn value_mask(self) -> u64 {
        (1u64 << self.heap_address_bits) - 1
    }

    /// Largest item ID this flavour can carry.
    pub fn max_id(self) -> u64 {
        (1u64 << (63 - u32::from(self.heap_address_bits))) - 1
    }

    /// Encodes an immediate pointer (value truncated to HAB bits).
    pub fn immediate(self, id: u64, value: u64) -> u64 {
        (1u64 << 63)
            | ((id & self.max_id()) << self.heap_address_bits)
            | (value & self.value_mask())
    }

    /// Encodes an addressed pointer.
    pub fn address(self, id: u64, address: u64) -> u64 {
        ((id & self.max_id()) << self.heap_address_bits) | (address & self.value_mask())
    }

    /// Decodes a pointer.
    pub fn decode(self, raw: u64) -> ItemPointer {
        ItemPointer {
            immediate: raw >> 63 != 0,
            id: (raw >> self.heap_address_bits) & self.max_id(),
            value: raw & self.value_mask(),
        }
    }

    /// The packet header word for `n` item pointers.
    pub fn header(self, n_pointers: u16) -> [u8; 8] {
        let hab = self.heap_address_bits / 8;
        let [m0, m1] = MAGIC_VERSION.to_be_bytes();
        let [n0, n1] = n_pointers.to_be_bytes();
        [m0, m1, 8 - hab, hab, 0, 0, n0, n1]
    }
}

/// A decoded item pointer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ItemPointer {
    /// Immediate flag (bit 63).
    pub immediate: bool,
    /// Item ID.
    pub id: u64,
    /// Immediate value or heap address.
    pub value: u64,
}

/// One decoded packet, borrowing the caller's bytes.
#[derive(Debug, Clone, Copy)]
pub struct Packet<'a> {
    /// The flavour of this packet (and so of its heap).
    pub flavour: Flavour,
    /// HEAP_CNT.
    pub heap_cnt: u64,
    /// HEAP_LENGTH, if present.
    pub heap_length: Option<u64>,
    /// PAYLOAD_OFFSET.
    pub payload_offset: u64,
    /// The raw item pointers (8 bytes each, big-endian), including the special ones.
    pub pointers: &'a [u8],
    /// Exactly PAYLOAD_LENGTH bytes.
    pub payload: &'a [u8],
    /// True if an immediate STREAM_CTRL = stop pointer is present.
    pub stop: bool,
    /// True if every pointer is an immediate HEAP_CNT, HEAP_LENGTH, PAYLOAD_OFFSET or
    /// PAYLOAD_LENGTH: the packet carries no item pointer (most packets of a large
    /// heap), so a receiver has no pointer to record.
    pub(crate) specials_only: bool,
}

impl<'a> Packet<'a> {
    /// Total size of the packet on the wire.
    pub fn size(&self) -> usize {
        HEADER_SIZE + self.pointers.len() + self.payload.len()
    }

    /// Iterates over the raw pointer words.
    pub fn raw_pointers(&self) -> impl Iterator<Item = u64> + 'a {
        self.pointers
            .chunks_exact(POINTER_SIZE)
            .map(|c| u64::from_be_bytes(c.try_into().unwrap_or([0; 8])))
    }

    /// Iterates over the decoded pointers.
    pub fn item_pointers(&self) -> impl Iterator<Item = ItemPointer> + 'a {
        let flavour = self.flavour;
        self.raw_pointers().map(move |p| flavour.decode(p))
    }
}

/// Reads the flavour and pointer count from the first 8 bytes.
///
/// # Errors
/// [`WireError::Truncated`], [`WireError::BadMagic`] or [`WireError::BadFlavour`].
#[inline]
pub fn decode_header(data: &[u8]) -> Result<(Flavour, usize), WireError> {
    if data.len() < HEADER_SIZE {
        return Err(WireError::Truncated {
            needed: HEADER_SIZE,
            available: data.len(),
        });
    }
    let magic = u16::from_be_bytes([data[0], data[1]]);
    if magic != MAGIC_VERSION {
        return Err(WireError::BadMagic(magic));
    }
    let (b2, b3) = (data[2], data[3]);
    if b2 == 0 || b3 == 0 || u32::from(b2) + u32::from(b3) != 8 {
        return Err(WireError::BadFlavour {
            item_pointer_bytes: b2,
            heap_address_bytes: b3,
        });
    }
    let n = usize::from(u16::from_be_bytes([data[6], data[7]]));
    Ok((
        Flavour {
            heap_address_bits: b3 * 8,
        },
        n,
    ))
}

/// Total size of the packet starting at `data`, reading only its header and pointers.
///
/// Used by stream transports (TCP, files, memory) to find packet boundaries.
/// Returns `Ok(None)` when more bytes are needed to know.
///
/// # Errors
/// Any header rule of [`decode_packet`] that can be checked without the payload.
pub fn packet_size(data: &[u8]) -> Result<Option<usize>, WireError> {
    if data.len() < HEADER_SIZE {
        return Ok(None);
    }
    let (flavour, n) = decode_header(data)?;
    let ptr_end = HEADER_SIZE + n * POINTER_SIZE;
    if data.len() < ptr_end {
        return Ok(None);
    }
    let mut payload_length = None;
    for chunk in data[HEADER_SIZE..ptr_end].chunks_exact(POINTER_SIZE) {
        let p = flavour.decode(u64::from_be_bytes(chunk.try_into().unwrap_or([0; 8])));
        if p.immediate && p.id == PAYLOAD_LENGTH_ID {
            payload_length = Some(p.value);
        }
    }
    let len = payload_length.ok_or(WireError::MissingPayloadLength)?;
    match usize::try_from(len)
        .ok()
        .and_then(|l| l.checked_add(ptr_end))
    {
        Some(size) => Ok(Some(size)),
        None => Err(WireError::PayloadTruncated {
            needed: len,
            available: data.len(),
        }),
    }
}

/// Decodes the packet at the start of `data` (trailing bytes are left alone: see
/// [`Packet::size`]).
///
/// # Errors
/// A [`WireError`] naming the first rule the packet breaks.
#[inline]
pub fn decode_packet(data: &[u8]) -> Result<Packet<'_>, WireError> {
    match decode_plain(data) {
        Some(p) => Ok(p),
        None => decode_any(data),
    }
}

/// The packet most packets are: exactly the four special pointers, immediate, in the
/// order spead2's packetizer (and ours) writes them, and valid. `None` for anything
/// else, which [`decode_any`] then decodes (or names the rule it breaks); for a packet
/// this accepts, `decode_any` would give the same.
#[inline]
pub(crate) fn decode_plain(data: &[u8]) -> Option<Packet<'_>> {
    const PLAIN: usize = HEADER_SIZE + 4 * POINTER_SIZE;
    let head: &[u8; PLAIN] = data.get(..PLAIN)?.try_into().ok()?;
    let word = |k: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&head[8 * k..8 * k + 8]);
        u64::from_be_bytes(b)
    };
    let h = word(0);
    let (ip_bytes, ha_bytes) = ((h >> 40) as u8, (h >> 32) as u8);
    if h >> 48 != u64::from(MAGIC_VERSION)
        || h & 0xffff != 4
        || ip_bytes == 0
        || ha_bytes == 0
        || u32::from(ip_bytes) + u32::from(ha_bytes) != 8
    {
        return None;
    }
    let flavour = Flavour {
        heap_address_bits: ha_bytes * 8,
    };
    let hab = flavour.heap_address_bits;
    let mask = flavour.value_mask();
    // Above the value: the immediate flag, then the ID.
    let immediate = 1u64 << (63 - hab);
    let (a, b, c, d) = (word(1), word(2), word(3), word(4));
    if a >> hab != immediate | HEAP_CNT_ID
        || b >> hab != immediate | HEAP_LENGTH_ID
        || c >> hab != immediate | PAYLOAD_OFFSET_ID
        || d >> hab != immediate | PAYLOAD_LENGTH_ID
    {
        return None;
    }
    let (heap_length, payload_offset, payload_length) = (b & mask, c & mask, d & mask);
    let len = usize::try_from(payload_length).ok()?;
    let payload = data.get(PLAIN..PLAIN.checked_add(len)?)?;
    if payload_offset.checked_add(payload_length)? > heap_length {
        return None;
    }
    Some(Packet {
        flavour,
        heap_cnt: a & mask,
        heap_length: Some(heap_length),
        payload_offset,
        pointers: &head[HEADER_SIZE..],
        payload,
        stop: false,
        specials_only: true,
    })
}

/// [`decode_packet`] for any packet.
#[inline(never)]
fn decode_any(data: &[u8]) -> Result<Packet<'_>, WireError> {
    let (flavour, n) = decode_header(data)?;
    let ptr_end = HEADER_SIZE + n * POINTER_SIZE;
    if data.len() < ptr_end {
        return Err(WireError::Truncated {
            needed: ptr_end,
            available: data.len(),
        });
    }
    let pointers = &data[HEADER_SIZE..ptr_end];
    let mut heap_cnt = None;
    let mut heap_length = None;
    let mut payload_offset = None;
    let mut payload_length = None;
    let mut stop = false;
    let mut specials_only = true;
    let hab = flavour.heap_address_bits;
    let mask = flavour.value_mask();
    let word = |k: usize| {
        let mut b = [0u8; POINTER_SIZE];
        b.copy_from_slice(&pointers[k * POINTER_SIZE..(k + 1) * POINTER_SIZE]);
        u64::from_be_bytes(b)
    };
    // Fast path: the four special items first, immediate, in the order spead2's
    // packetizer (and ours) writes them. The loop below then reads the rest, exactly
    // as it would have read these four.
    let mut first = 0;
    if n >= 4 {
        let special = |id: u64| (1u64 << 63) | (id << hab);
        let (a, b, c, d) = (word(0), word(1), word(2), word(3));
        if a & !mask == special(HEAP_CNT_ID)
            && b & !mask == special(HEAP_LENGTH_ID)
            && c & !mask == special(PAYLOAD_OFFSET_ID)
            && d & !mask == special(PAYLOAD_LENGTH_ID)
        {
            heap_cnt = Some(a & mask);
            heap_length = Some(b & mask);
            payload_offset = Some(c & mask);
            payload_length = Some(d & mask);
            first = 4;
        }
    }
    for k in first..n {
        let raw = word(k);
        if raw >> 63 == 0 {
            specials_only = false;
            continue;
        }
        let id = (raw >> hab) & flavour.max_id();
        let value = raw & mask;
        match id {
            HEAP_CNT_ID => heap_cnt = Some(value),
            HEAP_LENGTH_ID => heap_length = Some(value),
            PAYLOAD_OFFSET_ID => payload_offset = Some(value),
            PAYLOAD_LENGTH_ID => payload_length = Some(value),
            STREAM_CTRL_ID if value == CTRL_STREAM_STOP => {
                stop = true;
                specials_only = false;
            }
            _ => specials_only = false,
        }
    }
    let heap_cnt = heap_cnt.ok_or(WireError::MissingHeapCnt)?;
    let payload_offset = payload_offset.ok_or(WireError::MissingPayloadOffset)?;
    let payload_length = payload_length.ok_or(WireError::MissingPayloadLength)?;
    let available = data.len() - ptr_end;
    if payload_length > available as u64 {
        return Err(WireError::PayloadTruncated {
            needed: payload_length + ptr_end as u64,
            available: data.len(),
        });
    }
    if let Some(heap_length) = heap_length {
        if payload_offset
            .checked_add(payload_length)
            .map_or(true, |end| end > heap_length)
        {
            return Err(WireError::OffsetBeyondLength {
                offset: payload_offset,
                length: payload_length,
                heap_length,
            });
        }
    }
    Ok(Packet {
        flavour,
        heap_cnt,
        heap_length,
        payload_offset,
        pointers,
        payload: &data[ptr_end..ptr_end + payload_length as usize],
        stop,
        specials_only,
    })
}

/// Decodes a datagram that must hold exactly one packet (UDP semantics, as spead2).
///
/// # Errors
/// As [`decode_packet`], plus [`WireError::SizeMismatch`] for trailing bytes.
pub fn decode_datagram(data: &[u8]) -> Result<Packet<'_>, WireError> {
    let p = decode_packet(data)?;
    if p.size() != data.len() {
        return Err(WireError::SizeMismatch {
            packet: p.size(),
            datagram: data.len(),
        });
    }
    Ok(p)
}

/// A packet made of exactly these raw item pointers (specials included, in this order)
/// and payload, with no checks: for crafting test input, valid or not. `None` for more
/// than 65535 pointers.
pub fn encode_packet(flavour: Flavour, pointers: &[u64], payload: &[u8]) -> Option<Vec<u8>> {
    let n = u16::try_from(pointers.len()).ok()?;
    let mut out = Vec::with_capacity(HEADER_SIZE + POINTER_SIZE * pointers.len() + payload.len());
    out.extend_from_slice(&flavour.header(n));
    for p in pointers {
        out.extend_from_slice(&p.to_be_bytes());
    }
    out.extend_from_slice(payload);
    Some(out)
}

/// The packets found back to back in `data` (memory buffers, files), each as its
/// bytes; iteration ends at the end of `data` or at the first packet that does not
/// decode.
pub fn split_packets(data: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = data;
    std::iter::from_fn(move || {
        let n = decode_packet(rest).ok()?.size();
        let (p, tail) = rest.split_at(n);
        rest = tail;
        Some(p)
    })
}

/// Big-endian bytes of an immediate value, as spead2 exposes immediate items
/// (HAB / 8 bytes).
pub fn immediate_bytes(flavour: Flavour, value: u64) -> Vec<u8> {
    value.to_be_bytes()[8 - flavour.immediate_bytes()..].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plain-packet decoder gives what the general one gives, for plain packets and
    /// for every near miss (it must decline those, leaving the verdict to the other).
    #[test]
    fn the_plain_packet_path_agrees_with_the_general_one() {
        let f = Flavour::SPEAD_64_48;
        let g = Flavour::SPEAD_64_40;
        let specials = |fl: Flavour, cnt: u64, hl: u64, off: u64, len: u64| {
            vec![
                fl.immediate(HEAP_CNT_ID, cnt),
                fl.immediate(HEAP_LENGTH_ID, hl),
                fl.immediate(PAYLOAD_OFFSET_ID, off),
                fl.immediate(PAYLOAD_LENGTH_ID, len),
            ]
        };
        let mut cases: Vec<Vec<u8>> = Vec::new();
        for fl in [f, g] {
            cases.push(encode_packet(fl, &specials(fl, 7, 100, 0, 64), &[1; 64]).unwrap());
            cases.push(encode_packet(fl, &specials(fl, 7, 100, 36, 64), &[1; 64]).unwrap());
            // Offset + length beyond HEAP_LENGTH, and a payload cut short.
            cases.push(encode_packet(fl, &specials(fl, 7, 100, 40, 64), &[1; 64]).unwrap());
            cases.push(encode_packet(fl, &specials(fl, 7, 100, 0, 64), &[1; 63]).unwrap());
            // Trailing bytes, an empty payload, a stop pointer, the specials reordered,
            // one of them addressed, and a duplicate HEAP_CNT after them.
            cases.push(encode_packet(fl, &specials(fl, 7, 100, 0, 8), &[2; 20]).unwrap());
            cases.push(encode_packet(fl, &specials(fl, 7, 0, 0, 0), &[]).unwrap());
            let mut p = specials(fl, 7, 100, 0, 8);
            p.push(fl.immediate(STREAM_CTRL_ID, CTRL_STREAM_STOP));
            cases.push(encode_packet(fl, &p, &[3; 8]).unwrap());
            let mut p = specials(fl, 7, 100, 0, 8);
            p.swap(0, 1);
            cases.push(encode_packet(fl, &p, &[3; 8]).unwrap());
            let mut p = specials(fl, 7, 100, 0, 8);
            p[2] = fl.address(PAYLOAD_OFFSET_ID, 0);
            cases.push(encode_packet(fl, &p, &[3; 8]).unwrap());
            let mut p = specials(fl, 7, 100, 0, 8);
            p.push(fl.immediate(HEAP_CNT_ID, 9));
            cases.push(encode_packet(fl, &p, &[3; 8]).unwrap());
        }
        let mut bad_magic = cases[0].clone();
        bad_magic[1] = 5;
        let mut bad_flavour = cases[0].clone();
        bad_flavour[2] = 0;
        cases.push(bad_magic);
        cases.push(bad_flavour);
        cases.push(cases[0][..39].to_vec());
        let mut plain = 0;
        for (k, c) in cases.iter().enumerate() {
            let fast = format!("{:?}", decode_packet(c));
            assert_eq!(fast, format!("{:?}", decode_any(c)), "case {k}");
            plain += usize::from(decode_plain(c).is_some());
        }
        // The valid plain packets (with and without trailing bytes) took the plain path.
        assert_eq!(plain, 8);
    }

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn decodes_test_vector_immediate() {
        let b = hex(
            "5304020600000006 8001000000123456 8002000000000001 8003000000000000
            8004000000000001 a345000000007654 0000000000000000 00",
        );
        let p = decode_datagram(&b).unwrap();
        assert_eq!(p.flavour, Flavour::SPEAD_64_48);
        assert_eq!(p.heap_cnt, 0x123456);
        assert_eq!(p.heap_length, Some(1));
        assert_eq!(p.payload, &[0]);
        let items: Vec<_> = p.item_pointers().collect();
        assert_eq!(
            items[4],
            ItemPointer {
                immediate: true,
                id: 0x2345,
                value: 0x7654
            }
        );
    }

    #[test]
    fn rejects_each_rule() {
        let good = hex(
            "5304020600000005 8001000000123456 8002000000000001 8003000000000000
            8004000000000001 0000000000000000 00",
        );
        assert!(decode_datagram(&good).is_ok());
        for len in 0..good.len() {
            assert!(decode_packet(&good[..len]).is_err(), "len {len}");
        }
        let mut b = good.clone();
        b[1] = 5;
        assert_eq!(decode_packet(&b).unwrap_err(), WireError::BadMagic(0x5305));
        for (b2, b3) in [(0, 8), (8, 0), (3, 6), (2, 2)] {
            let mut b = good.clone();
            b[2] = b2;
            b[3] = b3;
            assert!(matches!(
                decode_packet(&b),
                Err(WireError::BadFlavour { .. })
            ));
        }
        let mut b = good.clone();
        b[8] = 0x80;
        b[9] = 0x07;
        assert_eq!(decode_packet(&b).unwrap_err(), WireError::MissingHeapCnt);
        let mut b = good.clone();
        b[25] = 0x07;
        assert_eq!(
            decode_packet(&b).unwrap_err(),
            WireError::MissingPayloadOffset
        );
        let mut b = good.clone();
        b[33] = 0x07;
        assert_eq!(
            decode_packet(&b).unwrap_err(),
            WireError::MissingPayloadLength
        );
        let mut b = good.clone();
        b[23] = 0; // heap length 0 < 1
        assert!(matches!(
            decode_packet(&b),
            Err(WireError::OffsetBeyondLength { .. })
        ));
        let mut b = good.clone();
        b.push(0);
        assert!(matches!(
            decode_datagram(&b),
            Err(WireError::SizeMismatch { .. })
        ));
        assert_eq!(packet_size(&good).unwrap(), Some(good.len()));
        let mut two = good.clone();
        two.extend_from_slice(&good);
        two.push(0x53);
        let parts: Vec<&[u8]> = split_packets(&two).collect();
        let f = Flavour::SPEAD_64_48;
        let ptrs = [
            f.immediate(HEAP_CNT_ID, 0x123456),
            f.immediate(HEAP_LENGTH_ID, 1),
            f.immediate(PAYLOAD_OFFSET_ID, 0),
            f.immediate(PAYLOAD_LENGTH_ID, 1),
            f.address(NULL_ID, 0),
        ];
        assert_eq!(encode_packet(f, &ptrs, &[0]).unwrap(), good);
        assert_eq!(encode_packet(f, &vec![0; 65536], &[]), None);
        assert_eq!(parts, vec![&good[..], &good[..]]);
    }

    #[test]
    fn absurd_lengths_are_errors() {
        let mut b = hex(
            "5304020600000004 8001000000000001 8003000000000000 8004ffffffffffff 8002ffffffffffff",
        );
        assert!(matches!(
            decode_packet(&b),
            Err(WireError::PayloadTruncated { .. })
        ));
        b[30] = 0xff; // offset huge
        assert!(decode_packet(&b).is_err());
    }
}
