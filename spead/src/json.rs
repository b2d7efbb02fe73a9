//! The JSON heap form: what `spead-recv --json` prints and `spead-send --json` reads,
//! so that a capture can be replayed as a send.
//!
//! One object per heap: `cnt`, `flavour` (heap address bits), `complete`, `items`
//! (`id`, `hex`, and `immediate` for immediates) in the order their item pointers came
//! on the wire, descriptor items (0x05) and empty items included, so that sending the
//! items again in that order reproduces the heap's packets byte for byte; and
//! `descriptors` (decoded, for people: a replay sends the raw 0x05 items, and encodes
//! `descriptors` only for a heap whose `items` have none, as a hand-written file may).
//! spead2's `get_items` order (addressed items by address, then immediates by value,
//! without descriptors or empty items) is [`crate::recv::Heap::items`].

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::descriptor::Descriptor;
use crate::recv::{Heap, Stats};
use crate::send;
use crate::wire::{Flavour, DESCRIPTOR_ID};

/// One item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ItemJson {
    /// Item ID.
    pub id: u64,
    /// Value bytes in hex (immediates: HAB/8 big-endian bytes).
    pub hex: String,
    /// Immediate value, when the item was immediate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub immediate: Option<u64>,
}

/// A decoded descriptor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DescriptorJson {
    /// Described item ID.
    pub id: u64,
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
    /// Format as (code, bits) pairs.
    pub format: Vec<(String, u64)>,
    /// Shape (`null` for a variable dimension).
    pub shape: Vec<Option<u64>>,
    /// numpy dtype string, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dtype: Option<String>,
    /// Raw numpy header, when sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numpy_header: Option<String>,
}

/// One heap.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeapJson {
    /// HEAP_CNT.
    pub cnt: u64,
    /// Heap address bits (40 or 48).
    #[serde(default = "default_flavour")]
    pub flavour: u8,
    /// Whether the heap was complete.
    #[serde(default = "default_true")]
    pub complete: bool,
    /// Items in the order their pointers came on the wire.
    pub items: Vec<ItemJson>,
    /// Descriptors carried by the heap.
    #[serde(default)]
    pub descriptors: Vec<DescriptorJson>,
    /// HEAP_LENGTH (incomplete heaps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heap_length: Option<u64>,
    /// Bytes received (incomplete heaps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received_length: Option<u64>,
    /// Received ranges (incomplete heaps).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub payload_ranges: Vec<(u64, u64)>,
}

fn default_flavour() -> u8 {
    40
}

fn default_true() -> bool {
    true
}

/// A JSON heap that cannot be sent.
#[derive(Debug, Error)]
pub enum JsonError {
    /// Bad hex in an item.
    #[error("item {0:#x}: bad hex")]
    Hex(u64),
    /// Unsupported heap address bits.
    #[error("unsupported flavour {0}")]
    Flavour(u8),
}

/// Lower-case hex of bytes.
pub fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 15)] as char);
    }
    s
}

/// Bytes from hex, `None` if malformed.
pub fn from_hex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| s.get(i..i + 2).and_then(|d| u8::from_str_radix(d, 16).ok()))
        .collect()
}

/// A descriptor for JSON.
pub fn descriptor_json(d: &Descriptor) -> DescriptorJson {
    DescriptorJson {
        id: d.id,
        name: String::from_utf8_lossy(&d.name).into_owned(),
        description: String::from_utf8_lossy(&d.description).into_owned(),
        format: d
            .format
            .iter()
            .map(|&(c, b)| ((c as char).to_string(), b))
            .collect(),
        shape: d.effective_shape(),
        dtype: d.numpy_dtype(),
        numpy_header: d
            .dtype
            .as_ref()
            .map(|h| String::from_utf8_lossy(h).into_owned()),
    }
}

/// A received heap as JSON.
pub fn heap_json(heap: &Heap) -> HeapJson {
    HeapJson {
        cnt: heap.cnt,
        flavour: heap.flavour.heap_address_bits() as u8,
        complete: heap.complete,
        items: heap
            .wire_items()
            .iter()
            .map(|i| ItemJson {
                id: i.id,
                hex: to_hex(i.bytes()),
                immediate: i.immediate,
            })
            .collect(),
        descriptors: heap
            .descriptors()
            .into_iter()
            .filter_map(Result::ok)
            .map(|d| descriptor_json(&d))
            .collect(),
        heap_length: (!heap.complete).then_some(heap.heap_length).flatten(),
        received_length: (!heap.complete).then_some(heap.received_length),
        payload_ranges: if heap.complete {
            Vec::new()
        } else {
            heap.payload_ranges.clone()
        },
    }
}

/// A heap to send from its JSON form: the items in the listed order, immediates as
/// immediates; when no item is a descriptor (0x05), the decoded `descriptors` first,
/// encoded as spead2 does.
///
/// # Errors
/// [`JsonError`] for bad hex or flavours.
pub fn send_heap(h: &HeapJson) -> Result<send::Heap, JsonError> {
    let flavour = Flavour::new(h.flavour).ok_or(JsonError::Flavour(h.flavour))?;
    let mut heap = send::Heap::new(flavour);
    let raw_descriptors = h
        .items
        .iter()
        .any(|i| i.id == DESCRIPTOR_ID && i.immediate.is_none());
    for d in h.descriptors.iter().filter(|_| !raw_descriptors) {
        heap.add_descriptor(&Descriptor {
            id: d.id,
            name: d.name.clone().into_bytes(),
            description: d.description.clone().into_bytes(),
            format: d
                .format
                .iter()
                .map(|(c, b)| (c.bytes().next().unwrap_or(b'u'), *b))
                .collect(),
            shape: d.shape.clone(),
            dtype: d.numpy_header.clone().map(String::into_bytes),
        });
    }
    for item in &h.items {
        let bytes = from_hex(&item.hex).ok_or(JsonError::Hex(item.id))?;
        match item.immediate {
            Some(v) => heap.add_immediate(item.id, v),
            None => heap.add_item(item.id, bytes, false),
        }
    }
    Ok(heap)
}

/// Counters as a JSON object (`{"stats": {...}}`).
pub fn stats_json(s: &Stats) -> serde_json::Value {
    serde_json::json!({
        "stats": {
            "heaps": s.heaps,
            "incomplete_heaps_evicted": s.incomplete_heaps_evicted,
            "incomplete_heaps_flushed": s.incomplete_heaps_flushed,
            "packets": s.packets,
            "batches": s.batches,
            "max_batch": s.max_batch,
            "single_packet_heaps": s.single_packet_heaps,
            "search_dist": s.search_dist,
            "worker_blocked": s.worker_blocked,
            "packets_dropped_in_order": s.packets_dropped_in_order,
            "packets_duplicate": s.packets_duplicate,
            "packets_malformed": s.packets_malformed,
            "packets_inconsistent": s.packets_inconsistent,
            "packets_too_large": s.packets_too_large,
            "packets_after_stop": s.packets_after_stop,
            "incomplete_heaps_dropped": s.incomplete_heaps_dropped,
            "pointers_dropped": s.pointers_dropped,
            "pool": {
                "allocated": s.pool.allocated,
                "reused": s.pool.reused,
                "grown": s.pool.grown,
                "returned": s.pool.returned,
                "released": s.pool.released,
                "idle_buffers": s.pool.idle_buffers,
                "idle_bytes": s.pool.idle_bytes,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recv::{Stream, StreamConfig};
    use crate::send::heap_to_bytes;

    #[test]
    fn receive_then_replay_gives_the_same_bytes() {
        let mut h = send::Heap::new(Flavour::SPEAD_64_48);
        h.add_descriptor(&Descriptor {
            id: 0x1000,
            name: b"x".to_vec(),
            format: vec![(b'u', 8)],
            shape: vec![Some(3)],
            ..Descriptor::default()
        });
        h.add_descriptor(&Descriptor {
            id: 0x1002,
            name: b"y".to_vec(),
            shape: vec![Some(2)],
            dtype: Some(b"{'descr': '<u2', 'fortran_order': False, 'shape': (2,)}".to_vec()),
            ..Descriptor::default()
        });
        h.add_item(0x1000, vec![1, 2, 3], false);
        h.add_immediate(0x1001, 77);
        let bytes = heap_to_bytes(&h, 9, 1472).unwrap();
        let mut s = Stream::new(StreamConfig::default());
        s.add_buffer(&bytes);
        let got = heap_json(&s.pop_heap().unwrap());
        assert_eq!(got.descriptors.len(), 2);
        // Wire order: the two descriptor items, then the items as added.
        let ids: Vec<u64> = got.items.iter().map(|i| i.id).collect();
        assert_eq!(ids, [DESCRIPTOR_ID, DESCRIPTOR_ID, 0x1000, 0x1001]);
        assert_eq!(got.items[3].immediate, Some(77));
        assert_eq!(got.descriptors[0].dtype.as_deref(), Some(">u1"));
        let text = serde_json::to_string(&got).unwrap();
        let back: HeapJson = serde_json::from_str(&text).unwrap();
        let replay = send_heap(&back).unwrap();
        assert_eq!(heap_to_bytes(&replay, back.cnt, 1472).unwrap(), bytes);
        // A hand-written heap lists descriptors decoded only: they are encoded first.
        let mut hand = back.clone();
        hand.items.retain(|i| i.id != DESCRIPTOR_ID);
        let replay = send_heap(&hand).unwrap();
        assert_eq!(heap_to_bytes(&replay, back.cnt, 1472).unwrap(), bytes);
        assert_eq!(from_hex("0aff"), Some(vec![10, 255]));
        assert_eq!(from_hex("0g"), None);
    }
}
