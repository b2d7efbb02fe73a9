//! Heaps handed to the application once assembly is finished (or abandoned).

use super::pool::PoolBuffer;
use crate::descriptor::{Descriptor, DescriptorError};
use crate::items::{extract_items, items_in_pointer_order, ItemValue, RawItem};
use crate::wire::{Flavour, CTRL_STREAM_START, CTRL_STREAM_STOP, DESCRIPTOR_ID, STREAM_CTRL_ID};

/// An item's bytes: a slice of the heap, or an immediate's big-endian bytes.
#[derive(Debug, Clone, Copy)]
enum ItemData<'a> {
    Slice(&'a [u8]),
    Inline([u8; 8], usize),
}

/// One item of a received heap.
#[derive(Debug, Clone, Copy)]
pub struct Item<'a> {
    /// Item ID.
    pub id: u64,
    /// The value if the item was immediate.
    pub immediate: Option<u64>,
    data: ItemData<'a>,
}

impl<'a> Item<'a> {
    /// The item's bytes (for immediates, HAB/8 big-endian bytes, as spead2 gives them).
    pub fn bytes(&self) -> &[u8] {
        match &self.data {
            ItemData::Slice(s) => s,
            ItemData::Inline(b, n) => &b[8 - n..],
        }
    }
}

/// A heap leaving the receiver: complete, or incomplete with what was received.
#[derive(Debug)]
pub struct Heap {
    /// HEAP_CNT.
    pub cnt: u64,
    /// Flavour of its packets.
    pub flavour: Flavour,
    /// True when every byte of a heap with HEAP_LENGTH arrived.
    pub complete: bool,
    /// True when the received bytes form one run from offset 0 (always true for
    /// complete heaps; the only way a heap without HEAP_LENGTH is delivered).
    pub contiguous: bool,
    /// HEAP_LENGTH, if any packet carried it.
    pub heap_length: Option<u64>,
    /// Payload bytes received.
    pub received_length: u64,
    /// Received payload ranges `[start, end)`, sorted (filled for incomplete heaps).
    pub payload_ranges: Vec<(u64, u64)>,
    /// The heap contained STREAM_CTRL = stop.
    pub end_of_stream: bool,
    /// Payload and item pointers (pooled).
    pub(crate) payload: PoolBuffer,
}

impl Heap {
    /// End of the heap's payload: HEAP_LENGTH, else the received length.
    pub fn payload_end(&self) -> u64 {
        self.heap_length.unwrap_or(self.received_length)
    }

    /// The payload bytes (unreceived parts of incomplete heaps are unspecified).
    pub fn payload(&self) -> &[u8] {
        let end = (self.payload_end() as usize).min(self.payload.len());
        &self.payload.as_slice()[..end]
    }

    fn covered(&self, start: u64, end: u64) -> bool {
        if self.complete || (self.contiguous && end <= self.received_length) {
            return true;
        }
        self.payload_ranges
            .iter()
            .any(|&(s, e)| s <= start && end <= e)
    }

    /// The heap's items in spead2's order, without descriptors (as spead2's
    /// `get_items`). For incomplete heaps, only items whose bytes all arrived.
    pub fn items(&self) -> Vec<Item<'_>> {
        let mut items = self.raw_items();
        items.retain(|i| !(i.id == DESCRIPTOR_ID && i.immediate.is_none()));
        items
    }

    /// All items, descriptor items (0x05) included.
    pub fn raw_items(&self) -> Vec<Item<'_>> {
        let mut raw: Vec<RawItem> = Vec::new();
        extract_items(
            self.flavour,
            self.payload.pointers(),
            self.payload_end(),
            &mut raw,
        );
        raw.into_iter().filter_map(|r| self.item(r)).collect()
    }

    /// Every item in the order its pointer arrived (the wire order when the packets
    /// came in order), descriptor and empty items included: what it takes to send the
    /// heap again byte for byte. For incomplete heaps, only items whose bytes all
    /// arrived.
    pub fn wire_items(&self) -> Vec<Item<'_>> {
        items_in_pointer_order(self.flavour, self.payload.pointers(), self.payload_end())
            .into_iter()
            .filter_map(|r| self.item(r))
            .collect()
    }

    /// The item of `r`, if its bytes arrived.
    fn item(&self, r: RawItem) -> Option<Item<'_>> {
        match r.value {
            ItemValue::Immediate(v) => Some(Item {
                id: r.id,
                immediate: Some(v),
                data: ItemData::Inline(v.to_be_bytes(), self.flavour.immediate_bytes()),
            }),
            ItemValue::Range(s, e) => {
                if !self.covered(s, e) || e as usize > self.payload.len() {
                    return None;
                }
                Some(Item {
                    id: r.id,
                    immediate: None,
                    data: ItemData::Slice(&self.payload.as_slice()[s as usize..e as usize]),
                })
            }
        }
    }

    /// The descriptors this heap carries, each decoded or its error.
    pub fn descriptors(&self) -> Vec<Result<Descriptor, DescriptorError>> {
        self.raw_items()
            .iter()
            .filter(|i| i.id == DESCRIPTOR_ID && i.immediate.is_none())
            .map(|i| Descriptor::decode(i.bytes()))
            .collect()
    }

    /// True if the heap holds STREAM_CTRL = start.
    pub fn is_start_of_stream(&self) -> bool {
        self.has_ctrl(CTRL_STREAM_START)
    }

    fn has_ctrl(&self, value: u64) -> bool {
        self.payload.pointers().iter().any(|&p| {
            let d = self.flavour.decode(p);
            d.immediate && d.id == STREAM_CTRL_ID && d.value == value
        })
    }

    /// True if the heap holds STREAM_CTRL = stop.
    pub fn is_end_of_stream(&self) -> bool {
        self.has_ctrl(CTRL_STREAM_STOP)
    }
}
