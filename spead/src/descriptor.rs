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

    /// The numpy header (DTYPE, 0x15) parsed, if the descriptor has one.
    ///
    /// # Errors
    /// [`NumpyError`] when the header is not a numpy header dict.
    pub fn numpy_header(&self) -> Option<Result<NumpyHeader, NumpyError>> {
        self.dtype
            .as_deref()
            .filter(|h| !h.is_empty())
            .map(NumpyHeader::parse)
    }

    /// The numpy dtype: from the numpy header if present (`<u2`, or for a structured
    /// dtype its field list as numpy writes it, `[('re', '<f2'), ('im', '<f2')]`),
    /// else from a single-field format of a standard width (spead2 uses big-endian
    /// then; `f` 16 is float16). `None` when there is none or the header is malformed.
    pub fn numpy_dtype(&self) -> Option<String> {
        if let Some(h) = self.numpy_header() {
            return h.ok().map(|h| h.descr.to_string());
        }
        match self.format.as_slice() {
            [(code, bits)] => {
                let bytes = bits / 8;
                match (code, bits) {
                    (b'u' | b'i', 8 | 16 | 32 | 64) => Some(format!(">{}{}", *code as char, bytes)),
                    (b'f', 16 | 32 | 64) => Some(format!(">f{bytes}")),
                    (b'c', 64 | 128) => Some(format!(">c{bytes}")),
                    (b'b', 8) => Some("?".to_string()),
                    (b'c', 8) => Some("S1".to_string()),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// The shape, taken from the numpy header when present (and well formed).
    pub fn effective_shape(&self) -> Vec<Option<u64>> {
        match self.numpy_header() {
            Some(Ok(h)) => h.shape.into_iter().map(Some).collect(),
            _ => self.shape.clone(),
        }
    }
}

/// A numpy dtype as a numpy header's `descr` gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dtype {
    /// A plain type string such as `<u2`, `>f2` (float16), `|S10`.
    Simple(String),
    /// A structured dtype: its fields in order.
    Struct(Vec<Field>),
}

/// One field of a structured dtype.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// Field name (the second element when numpy gives a `(title, name)` pair).
    pub name: String,
    /// Field type.
    pub dtype: Dtype,
    /// Sub-array shape (empty for a scalar field).
    pub shape: Vec<u64>,
}

impl Dtype {
    /// Bytes per element, when the type is one numpy gives a fixed size.
    pub fn itemsize(&self) -> Option<u64> {
        match self {
            Self::Simple(s) => {
                let t = s.trim_start_matches(['<', '>', '|', '=']);
                let (kind, rest) = t.split_at(t.char_indices().nth(1).map_or(t.len(), |c| c.0));
                let n: Option<u64> = rest.split('[').next().and_then(|d| d.parse().ok());
                match kind {
                    "?" => Some(1),
                    "U" => n.map(|n| 4 * n),
                    "b" | "i" | "u" | "f" | "c" | "S" | "a" | "V" | "M" | "m" => n,
                    _ => None,
                }
            }
            Self::Struct(fields) => fields.iter().try_fold(0u64, |acc, f| {
                let count: u64 = f.shape.iter().product();
                Some(acc + f.dtype.itemsize()? * count)
            }),
        }
    }
}

impl std::fmt::Display for Dtype {
    /// As numpy writes `descr` (`'<u2'` unquoted for a simple type).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Simple(s) => f.write_str(s),
            Self::Struct(fields) => {
                f.write_str("[")?;
                for (i, field) in fields.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "('{}', ", field.name)?;
                    match &field.dtype {
                        Dtype::Simple(s) => write!(f, "'{s}'")?,
                        d => write!(f, "{d}")?,
                    }
                    if !field.shape.is_empty() {
                        let dims: Vec<String> = field.shape.iter().map(u64::to_string).collect();
                        let trailing = if dims.len() == 1 { "," } else { "" };
                        write!(f, ", ({}{trailing})", dims.join(", "))?;
                    }
                    f.write_str(")")?;
                }
                f.write_str("]")
            }
        }
    }
}

/// A parsed numpy header (`{'descr': ..., 'fortran_order': ..., 'shape': (...)}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NumpyHeader {
    /// The element type.
    pub descr: Dtype,
    /// Column-major layout.
    pub fortran_order: bool,
    /// The array shape.
    pub shape: Vec<u64>,
}

/// Why a numpy header could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("numpy header: {what} at byte {at}")]
pub struct NumpyError {
    /// What was wrong.
    pub what: &'static str,
    /// Where.
    pub at: usize,
}

/// The Python literals a numpy header is made of (what `ast.literal_eval` reads).
#[derive(Debug, Clone, PartialEq)]
enum Literal {
    Str(String),
    Int(u64),
    Bool(bool),
    Seq(Vec<Literal>),
    Dict(Vec<(Literal, Literal)>),
}

struct Parser<'a> {
    s: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn err(&self, what: &'static str) -> NumpyError {
        NumpyError { what, at: self.at }
    }

    fn skip_ws(&mut self) {
        while self.s.get(self.at).is_some_and(u8::is_ascii_whitespace) {
            self.at += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        self.skip_ws();
        if self.s.get(self.at) == Some(&c) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    /// Items up to `close`, separated by commas (a trailing comma allowed).
    fn items<T>(
        &mut self,
        close: u8,
        mut item: impl FnMut(&mut Self) -> Result<T, NumpyError>,
    ) -> Result<Vec<T>, NumpyError> {
        let mut out = Vec::new();
        loop {
            if self.eat(close) {
                return Ok(out);
            }
            out.push(item(self)?);
            if !self.eat(b',') {
                return if self.eat(close) {
                    Ok(out)
                } else {
                    Err(self.err("expected ',' or a closing bracket"))
                };
            }
        }
    }

    fn value(&mut self) -> Result<Literal, NumpyError> {
        self.skip_ws();
        match self.s.get(self.at) {
            Some(b'{') => {
                self.at += 1;
                self.items(b'}', |p| {
                    let k = p.value()?;
                    if !p.eat(b':') {
                        return Err(p.err("expected ':'"));
                    }
                    Ok((k, p.value()?))
                })
                .map(Literal::Dict)
            }
            Some(b'(') => {
                self.at += 1;
                self.items(b')', Self::value).map(Literal::Seq)
            }
            Some(b'[') => {
                self.at += 1;
                self.items(b']', Self::value).map(Literal::Seq)
            }
            Some(&q @ (b'\'' | b'"')) => {
                let start = self.at + 1;
                let len = self.s[start..]
                    .iter()
                    .position(|&c| c == q)
                    .ok_or_else(|| self.err("unterminated string"))?;
                self.at = start + len + 1;
                Ok(Literal::Str(
                    String::from_utf8_lossy(&self.s[start..start + len]).into_owned(),
                ))
            }
            Some(c) if c.is_ascii_digit() => {
                let start = self.at;
                while self.s.get(self.at).is_some_and(u8::is_ascii_digit) {
                    self.at += 1;
                }
                // Python 2 headers may write long integers as 3L.
                let digits = std::str::from_utf8(&self.s[start..self.at]).unwrap_or("");
                if self.s.get(self.at) == Some(&b'L') {
                    self.at += 1;
                }
                digits
                    .parse()
                    .map(Literal::Int)
                    .map_err(|_| self.err("integer too large"))
            }
            _ => {
                for (word, v) in [("True", true), ("False", false)] {
                    if self.s[self.at..].starts_with(word.as_bytes()) {
                        self.at += word.len();
                        return Ok(Literal::Bool(v));
                    }
                }
                Err(self.err("unexpected character"))
            }
        }
    }
}

fn dims(v: &Literal) -> Option<Vec<u64>> {
    match v {
        Literal::Seq(items) => items
            .iter()
            .map(|d| match d {
                Literal::Int(n) => Some(*n),
                _ => None,
            })
            .collect(),
        Literal::Int(n) => Some(vec![*n]),
        _ => None,
    }
}

fn dtype(v: &Literal) -> Option<Dtype> {
    match v {
        Literal::Str(s) => Some(Dtype::Simple(s.clone())),
        Literal::Seq(fields) => fields
            .iter()
            .map(|f| match f {
                Literal::Seq(parts) if (2..=3).contains(&parts.len()) => {
                    let name = match &parts[0] {
                        Literal::Str(n) => n.clone(),
                        Literal::Seq(t) => match t.as_slice() {
                            [_, Literal::Str(n)] => n.clone(),
                            _ => return None,
                        },
                        _ => return None,
                    };
                    let shape = match parts.get(2) {
                        Some(s) => dims(s)?,
                        None => Vec::new(),
                    };
                    Some(Field {
                        name,
                        dtype: dtype(&parts[1])?,
                        shape,
                    })
                }
                _ => None,
            })
            .collect::<Option<Vec<_>>>()
            .map(Dtype::Struct),
        _ => None,
    }
}

impl NumpyHeader {
    /// Parses a numpy header dict, as numpy's `format.read_array_header` would.
    ///
    /// # Errors
    /// [`NumpyError`] naming the first problem.
    pub fn parse(text: &[u8]) -> Result<Self, NumpyError> {
        let mut p = Parser { s: text, at: 0 };
        let Literal::Dict(entries) = p.value()? else {
            return Err(NumpyError {
                what: "not a dict",
                at: 0,
            });
        };
        p.skip_ws();
        if p.at != text.len() {
            return Err(p.err("trailing characters"));
        }
        let get = |key: &str| {
            entries
                .iter()
                .find(|(k, _)| *k == Literal::Str(key.to_string()))
                .map(|(_, v)| v)
        };
        let missing = |what| NumpyError { what, at: 0 };
        let descr = get("descr")
            .and_then(dtype)
            .ok_or_else(|| missing("no valid 'descr'"))?;
        let fortran_order = match get("fortran_order") {
            Some(Literal::Bool(b)) => *b,
            _ => return Err(missing("no valid 'fortran_order'")),
        };
        let shape = get("shape")
            .and_then(dims)
            .ok_or_else(|| missing("no valid 'shape'"))?;
        Ok(Self {
            descr,
            fortran_order,
            shape,
        })
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
    fn numpy_headers_with_structured_dtypes_and_float16_parse() {
        let d = |h: &str| Descriptor {
            id: 0x1000,
            dtype: Some(h.as_bytes().to_vec()),
            ..Descriptor::default()
        };
        let half = d("{'descr': '<f2', 'fortran_order': False, 'shape': (4,), }");
        let h = half.numpy_header().unwrap().unwrap();
        assert_eq!(h.descr, Dtype::Simple("<f2".into()));
        assert_eq!(h.descr.itemsize(), Some(2));
        assert_eq!(half.effective_shape(), vec![Some(4)]);
        let structured = d(concat!(
            "{'descr': [('re', '<f2'), ('im', '<f2'), (('title', 'flags'), '|u1', (3,)), ",
            "('inner', [('a', '>i4'), ('b', '<U2')])], 'fortran_order': True, 'shape': (2, 5)}"
        ));
        let h = structured.numpy_header().unwrap().unwrap();
        assert!(h.fortran_order);
        assert_eq!(h.shape, vec![2, 5]);
        assert_eq!(h.descr.itemsize(), Some(2 + 2 + 3 + 4 + 8));
        assert_eq!(
            structured.numpy_dtype().as_deref(),
            Some("[('re', '<f2'), ('im', '<f2'), ('flags', '|u1', (3,)), ('inner', [('a', '>i4'), ('b', '<U2')])]")
        );
        assert_eq!(structured.effective_shape(), vec![Some(2), Some(5)]);
        let from_format = Descriptor {
            format: vec![(b'f', 16)],
            ..Descriptor::default()
        };
        assert_eq!(from_format.numpy_dtype().as_deref(), Some(">f2"));
        for bad in [
            "{'descr': '<f2'}",
            "{'descr': [('x',)], 'fortran_order': False, 'shape': ()}",
            "[1, 2]",
            "{'descr': '<u1', 'fortran_order': False, 'shape': ()} x",
        ] {
            assert!(d(bad).numpy_header().unwrap().is_err(), "{bad}");
            assert_eq!(d(bad).numpy_dtype(), None, "{bad}");
        }
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(Descriptor::decode(&[]).is_err());
        assert!(Descriptor::decode(&[0x53, 4, 2, 6, 0, 0, 0, 0]).is_err());
    }
}
