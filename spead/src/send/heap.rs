//! Heaps to send: an ordered list of items, as spead2's `send::heap`.

use crate::descriptor::Descriptor;
use crate::wire::{Flavour, CTRL_STREAM_START, CTRL_STREAM_STOP, DESCRIPTOR_ID, STREAM_CTRL_ID};

/// How an item's value travels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ItemValue {
    /// An immediate value given as a number (spead2's `is_inline`).
    Inline(u64),
    /// Bytes. With `allow_immediate`, bytes fitting in HAB/8 go in the pointer,
    /// right-aligned; otherwise they are addressed payload.
    Bytes {
        /// The value.
        data: Vec<u8>,
        /// Whether the bytes may be sent as an immediate.
        allow_immediate: bool,
    },
}

/// One item of a heap to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// Item ID.
    pub id: u64,
    /// Value.
    pub value: ItemValue,
}

impl Item {
    /// True if this item goes in its pointer for a flavour.
    pub fn is_immediate(&self, flavour: Flavour) -> bool {
        match &self.value {
            ItemValue::Inline(_) => true,
            ItemValue::Bytes {
                data,
                allow_immediate,
            } => *allow_immediate && data.len() <= flavour.immediate_bytes(),
        }
    }
}

/// A heap to send.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Heap {
    /// Flavour of its packets.
    pub flavour: Flavour,
    /// Items in the order they were added (addressed payload is laid out in this order).
    pub items: Vec<Item>,
    /// Repeat all item pointers in every packet (they must fit in one packet).
    pub repeat_pointers: bool,
}

impl Heap {
    /// An empty heap of `flavour`.
    pub fn new(flavour: Flavour) -> Self {
        Self {
            flavour,
            items: Vec::new(),
            repeat_pointers: false,
        }
    }

    /// Adds an item from bytes.
    pub fn add_item(&mut self, id: u64, data: impl Into<Vec<u8>>, allow_immediate: bool) {
        self.items.push(Item {
            id,
            value: ItemValue::Bytes {
                data: data.into(),
                allow_immediate,
            },
        });
    }

    /// Adds an immediate item given as a number.
    pub fn add_immediate(&mut self, id: u64, value: u64) {
        self.items.push(Item {
            id,
            value: ItemValue::Inline(value),
        });
    }

    /// Adds a descriptor (an addressed 0x05 item holding an embedded packet).
    pub fn add_descriptor(&mut self, descriptor: &Descriptor) {
        self.add_item(DESCRIPTOR_ID, descriptor.encode(self.flavour), false);
    }

    /// Adds STREAM_CTRL = start.
    pub fn add_start(&mut self) {
        self.add_immediate(STREAM_CTRL_ID, CTRL_STREAM_START);
    }

    /// Adds STREAM_CTRL = stop.
    pub fn add_end(&mut self) {
        self.add_immediate(STREAM_CTRL_ID, CTRL_STREAM_STOP);
    }

    /// Bytes of addressed payload (before padding).
    pub fn payload_size(&self) -> u64 {
        self.items
            .iter()
            .filter(|i| !i.is_immediate(self.flavour))
            .map(|i| match &i.value {
                ItemValue::Bytes { data, .. } => data.len() as u64,
                ItemValue::Inline(_) => 0,
            })
            .sum()
    }
}
