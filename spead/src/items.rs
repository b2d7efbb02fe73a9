//! Turning a heap's item pointers into items, with spead2's length rules.
//!
//! Shared by received heaps and by descriptor decoding (a descriptor is itself a
//! one-packet heap). Addressed items run to the next address, the last one to the end
//! of the heap; NULL and zero-length items are dropped.

use crate::wire::{Flavour, NULL_ID};

/// Where an item's value lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemValue {
    /// An immediate value (HAB bits).
    Immediate(u64),
    /// A byte range `[start, end)` of the heap payload.
    Range(u64, u64),
}

/// One item of a heap, before its bytes are looked up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawItem {
    /// Item ID.
    pub id: u64,
    /// Its value.
    pub value: ItemValue,
}

/// Extracts items from a heap's pointers (IDs 1-4 already removed, immediate or not,
/// duplicates already collapsed) for a heap of `heap_end` payload bytes.
///
/// Order follows spead2: pointers are stably sorted by (immediate flag, address), so
/// addressed items come first in address order, then immediates.
pub fn extract_items(flavour: Flavour, pointers: &[u64], heap_end: u64, out: &mut Vec<RawItem>) {
    let sort_mask = (1u64 << 63) | flavour.value_mask();
    let mut sorted: Vec<u64> = pointers.to_vec();
    sorted.sort_by_key(|p| p & sort_mask);
    for (i, &raw) in sorted.iter().enumerate() {
        let p = flavour.decode(raw);
        if p.immediate {
            if p.id != NULL_ID {
                out.push(RawItem {
                    id: p.id,
                    value: ItemValue::Immediate(p.value),
                });
            }
            continue;
        }
        let end = match sorted.get(i + 1).map(|&n| flavour.decode(n)) {
            Some(next) if !next.immediate => next.value,
            _ => heap_end,
        };
        if p.id == NULL_ID || end <= p.value || end > heap_end {
            continue;
        }
        out.push(RawItem {
            id: p.id,
            value: ItemValue::Range(p.value, end),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_follow_addresses() {
        let f = Flavour::SPEAD_64_48;
        let ptrs = [
            f.address(0x1001, 10),
            f.immediate(0x1600, 7),
            f.address(0x1000, 0),
            f.address(0x1002, 10),
            f.address(NULL_ID, 30),
        ];
        let mut out = Vec::new();
        extract_items(f, &ptrs, 32, &mut out);
        assert_eq!(
            out,
            vec![
                RawItem {
                    id: 0x1000,
                    value: ItemValue::Range(0, 10)
                },
                RawItem {
                    id: 0x1002,
                    value: ItemValue::Range(10, 30)
                },
                RawItem {
                    id: 0x1600,
                    value: ItemValue::Immediate(7)
                },
            ]
        );
    }
}
