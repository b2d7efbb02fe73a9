//! Item descriptors: what an item is called and how its bytes are laid out.
//!
//! On the wire a descriptor is an addressed item (ID 0x05) whose bytes are a complete
//! embedded SPEAD packet, encoded exactly as spead2 does so that our descriptor heaps
//! are byte-identical to spead2's.

use crate::items::{extract_items, ItemValue, RawItem};
use crate::wire::{
    decode_packet, Flavour, WireError, DESCRIPTOR_DESCRIPTION_ID, DESCRIPTOR_DTYPE_ID,
    DESCRIPTOR_FORMAT_ID, DESCRIPTOR_ID_ID, DESCRIPTOR_NAME_ID, DESCRIPTOR_SHAPE_ID, HEAP_CNT_ID,
    HEAP_LENGTH_ID, PAYLOAD_LENGTH_ID, PAYLOAD_OFFSET_ID,
};
use thiserror::Error;

/// Why a descriptor could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DescriptorError {
    /// The embedded packet is malformed.
    #[error("embedded packet: {0}")]
    Wire(#[from] WireError),
    /// No immediate DESCRIPTOR_ID (0x14) pointer.
    #[error("descriptor has no ID")]
    MissingId,
    /// A format field is not a whole number of entries.
    #[error("format field length {0} is not a multiple of the entry size")]
    BadFormat(usize),
    /// A shape field is not a whole number of entries.
    #[error("shape field length {0} is not a multiple of the entry size")]
    BadShape(usize),
}

/// A decoded (or to-be-encoded) item descriptor.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Descriptor {
    /// The described item's ID.
    pub id: u64,
    /// Name (0x10).
    pub name: Vec<u8>,
    /// Description (0x11).
    pub description: Vec<u8>,
    /// Format (0x13): (type code, bit width) pairs.
    pub format: Vec<(u8, u64)>,
    /// Shape (0x12): `None` is a variable dimension.
    pub shape: Vec<Option<u64>>,
    /// numpy header (0x15), which overrides format and shape when present.
    pub dtype: Option<Vec<u8>>,
}

impl Descriptor {
    /// Encodes the embedded packet as spead2 does for `flavour`.
    pub fn encode(&self, flavour: Flavour) -> Vec<u8> {
        let hab_bytes = flavour.immediate_bytes();
        let mut format = Vec::with_capacity(self.format.len() * (9 - hab_bytes));
        for &(code, bits) in &self.format {
            format.push(code);
            format.extend_from_slice(&bits.to_be_bytes()[hab_bytes..]);
        }
        let mut shape = Vec::with_capacity(self.shape.len() * (1 + hab_bytes));
        for dim in &self.shape {
            let (flag, size) = match dim {
                Some(n) => (0u8, *n),
                None => (1u8, 0),
            };
            shape.push(flag);
            shape.extend_from_slice(&size.to_be_bytes()[8 - hab_bytes..]);
        }
        let dtype = self.dtype.as_deref().filter(|d| !d.is_empty());
        let fields: Vec<(u64, &[u8])> = [
            (DESCRIPTOR_NAME_ID, &self.name[..]),
            (DESCRIPTOR_DESCRIPTION_ID, &self.description[..]),
            (DESCRIPTOR_FORMAT_ID, &format[..]),
            (DESCRIPTOR_SHAPE_ID, &shape[..]),
        ]
        .into_iter()
        .chain(dtype.map(|d| (DESCRIPTOR_DTYPE_ID, d)))
        .collect();
        let n_pointers = 5 + fields.len();
        let payload_len: usize = fields.iter().map(|(_, b)| b.len()).sum();
        let total = 8 + 8 * n_pointers + payload_len;
        let mut out = Vec::with_capacity(total);
        out.extend_from_slice(&flavour.header(n_pointers as u16));
        let len = payload_len as u64;
        for p in [
            flavour.immediate(HEAP_CNT_ID, 1),
            flavour.immediate(HEAP_LENGTH_ID, len),
            flavour.immediate(PAYLOAD_OFFSET_ID, 0),
            flavour.immediate(PAYLOAD_LENGTH_ID, len),
            flavour.immediate(DESCRIPTOR_ID_ID, self.id),
        ] {
            out.extend_from_slice(&p.to_be_bytes());
        }
        let mut addr = 0u64;
        for (id, bytes) in &fields {
            out.extend_from_slice(&flavour.address(*id, addr).to_be_bytes());
            addr += bytes.len() as u64;
        }
        for (_, bytes) in &fields {
            out.extend_from_slice(bytes);
        }
        out
    }

    /// Decodes a descriptor item's bytes (an embedded packet).
    ///
    /// # Errors
    /// [`DescriptorError`] when the embedded packet or its fields are malformed.
    pub fn decode(bytes: &[u8]) -> Result<Self, DescriptorError> {
        let packet = decode_packet(bytes)?;
        let flavour = packet.flavour;
        let hab_bytes = flavour.immediate_bytes();
        let pointers: Vec<u64> = packet
            .raw_pointers()
            .filter(|&p| {
                // As any heap (spead2's live_heap::add_pointers): IDs 1-4 are never items.
                !(HEAP_CNT_ID..=PAYLOAD_LENGTH_ID).contains(&flavour.decode(p).id)
            })
            .collect();
        let mut items: Vec<RawItem> = Vec::new();
        extract_items(flavour, &pointers, packet.payload.len() as u64, &mut items);
        let mut d = Descriptor::default();
        let mut have_id = false;
        for item in items {
            let bytes: &[u8] = match item.value {
                ItemValue::Immediate(v) => {
                    if item.id == DESCRIPTOR_ID_ID {
                        d.id = v;
                        have_id = true;
                    }
                    continue;
                }
                ItemValue::Range(s, e) => &packet.payload[s as usize..e as usize],
            };
            match item.id {
                DESCRIPTOR_NAME_ID => d.name = bytes.to_vec(),
                DESCRIPTOR_DESCRIPTION_ID => d.description = bytes.to_vec(),
                DESCRIPTOR_FORMAT_ID => {
                    let entry = 9 - hab_bytes;
                    if bytes.len() % entry != 0 {
                        return Err(DescriptorError::BadFormat(bytes.len()));
                    }
                    d.format = bytes
                        .chunks_exact(entry)
                        .map(|c| (c[0], be_uint(&c[1..])))
                        .collect();
                }
                DESCRIPTOR_SHAPE_ID => {
                    let entry = 1 + hab_bytes;
                    if bytes.len() % entry != 0 {
                        return Err(DescriptorError::BadShape(bytes.len()));
                    }
                    d.shape = bytes
                        .chunks_exact(entry)
                        .map(|c| (c[0] & 1 == 0).then(|| be_uint(&c[1..])))
                        .collect();
                }
                DESCRIPTOR_DTYPE_ID => d.dtype = Some(bytes.to_vec()),
                DESCRIPTOR_ID_ID => {
                    d.id = be_uint(bytes);
                    have_id = true;
                }
                _ => {}
            }
        }
        if !have_id {
            return Err(DescriptorError::MissingId);
        }
        Ok(d)
    }

    /// The numpy dtype string (e.g. `<u2`), from the numpy header if present, else
    /// from a single-field format of a standard width (spead2 uses big-endian then).
    pub fn numpy_dtype(&self) -> Option<String> {
        if let Some(header) = &self.dtype {
            let text = String::from_utf8_lossy(header);
            let start = text.find("'descr'")?;
            let rest = &text[start + 7..];
            let q1 = rest.find('\'')?;
            let rest = &rest[q1 + 1..];
            let q2 = rest.find('\'')?;
            return Some(rest[..q2].to_string());
        }
        match self.format.as_slice() {
            [(code, bits)] => {
                let bytes = bits / 8;
                match (code, bits) {
                    (b'u' | b'i', 8 | 16 | 32 | 64) => Some(format!(">{}{}", *code as char, bytes)),
                    (b'f', 16 | 32 | 64) => Some(format!(">f{bytes}")),
                    (b'b', 8) => Some("?".to_string()),
                    (b'c', 8) => Some("S1".to_string()),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// The shape, taken from the numpy header when present.
    pub fn effective_shape(&self) -> Vec<Option<u64>> {
        if let Some(header) = &self.dtype {
            let text = String::from_utf8_lossy(header);
            if let Some(start) = text.find("'shape'") {
                let rest = &text[start..];
                if let (Some(a), Some(b)) = (rest.find('('), rest.find(')')) {
                    if a < b {
                        return rest[a + 1..b]
                            .split(',')
                            .filter(|s| !s.trim().is_empty())
                            .map(|s| s.trim().parse().ok())
                            .collect();
                    }
                }
            }
        }
        self.shape.clone()
    }
}

fn be_uint(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    #[test]
    fn matches_spead2_bytes() {
        let d = Descriptor {
            id: 0x1000,
            name: b"name".to_vec(),
            description: b"desc".to_vec(),
            format: vec![(b'u', 40)],
            shape: vec![Some(2), Some(3)],
            dtype: None,
        };
        let b = d.encode(Flavour::SPEAD_64_48);
        assert_eq!(
            hex(&b),
            "530402060000000980010000000000018002000000000019800300000000000080040000000000198014000000001000001000000000000000110000000000040013000000000008001200000000000b6e616d65646573637500280000000000000200000000000003"
        );
        assert_eq!(Descriptor::decode(&b).unwrap(), d);
        assert_eq!(d.numpy_dtype(), None);
    }

    #[test]
    fn round_trips_with_dtype_and_variable_dims() {
        for f in [Flavour::SPEAD_64_40, Flavour::SPEAD_64_48] {
            let d = Descriptor {
                id: 0x1234,
                name: b"x".to_vec(),
                description: vec![],
                format: vec![],
                shape: vec![Some(2), None],
                dtype: Some(b"{'descr': '<u2', 'fortran_order': False, 'shape': (2, 3)}".to_vec()),
            };
            let back = Descriptor::decode(&d.encode(f)).unwrap();
            assert_eq!(back, d);
            assert_eq!(back.numpy_dtype().as_deref(), Some("<u2"));
            assert_eq!(back.effective_shape(), vec![Some(2), Some(3)]);
        }
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(Descriptor::decode(&[]).is_err());
        assert!(Descriptor::decode(&[0x53, 4, 2, 6, 0, 0, 0, 0]).is_err());
    }
}
