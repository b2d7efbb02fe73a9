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

/// Extracts items from a heap's pointers (the special immediates 1-4 already removed,
/// duplicates already collapsed) for a heap of `heap_end` payload bytes.
///
/// Order follows spead2: pointers are stably sorted by (immediate flag, address), so
/// addressed items come first in address order, then immediates. NULL items, empty
/// addressed items and items past `heap_end` are left out, as spead2 does.
pub fn extract_items(flavour: Flavour, pointers: &[u64], heap_end: u64, out: &mut Vec<RawItem>) {
    out.extend(
        sorted_items(flavour, pointers, heap_end)
            .into_iter()
            .filter(|(_, r)| match r.value {
                ItemValue::Immediate(_) => r.id != NULL_ID,
                ItemValue::Range(start, end) => r.id != NULL_ID && start < end,
            })
            .map(|(_, r)| r),
    );
}

/// Every item of a heap's pointers in the order of the pointers (the wire order when
/// they arrived in order), empty addressed items included: what it takes to send the
/// heap again byte for byte. NULL items and items past `heap_end` are left out.
pub fn items_in_pointer_order(flavour: Flavour, pointers: &[u64], heap_end: u64) -> Vec<RawItem> {
    let mut items = sorted_items(flavour, pointers, heap_end);
    items.retain(|(_, r)| r.id != NULL_ID);
    items.sort_by_key(|&(index, _)| index);
    items.into_iter().map(|(_, r)| r).collect()
}

/// Each pointer's item with the pointer's index, in spead2's sorted order; an addressed
/// item runs to the next address or `heap_end`; items that would end before they start
/// or past `heap_end` are dropped.
fn sorted_items(flavour: Flavour, pointers: &[u64], heap_end: u64) -> Vec<(usize, RawItem)> {
    let sort_mask = (1u64 << 63) | flavour.value_mask();
    let mut sorted: Vec<(usize, u64)> = pointers.iter().copied().enumerate().collect();
    sorted.sort_by_key(|&(_, p)| p & sort_mask);
    let mut out = Vec::with_capacity(sorted.len());
    for (k, &(index, raw)) in sorted.iter().enumerate() {
        let p = flavour.decode(raw);
        let value = if p.immediate {
            ItemValue::Immediate(p.value)
        } else {
            let end = match sorted.get(k + 1).map(|&(_, n)| flavour.decode(n)) {
                Some(next) if !next.immediate => next.value,
                _ => heap_end,
            };
            if end < p.value || end > heap_end {
                continue;
            }
            ItemValue::Range(p.value, end)
        };
        out.push((index, RawItem { id: p.id, value }));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(id: u64, start: u64, end: u64) -> RawItem {
        RawItem {
            id,
            value: ItemValue::Range(start, end),
        }
    }

    fn imm(id: u64, value: u64) -> RawItem {
        RawItem {
            id,
            value: ItemValue::Immediate(value),
        }
    }

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
            vec![range(0x1000, 0, 10), range(0x1002, 10, 30), imm(0x1600, 7)]
        );
    }

    #[test]
    fn pointer_order_keeps_empty_items_and_the_order_they_came_in() {
        let f = Flavour::SPEAD_64_48;
        let ptrs = [
            f.immediate(0x1600, 7),
            f.address(0x1001, 10),
            f.address(0x1003, 0),
            f.address(0x1000, 0),
            f.address(NULL_ID, 30),
            f.address(0x1002, 10),
        ];
        assert_eq!(
            items_in_pointer_order(f, &ptrs, 32),
            vec![
                imm(0x1600, 7),
                range(0x1001, 10, 10),
                range(0x1003, 0, 0),
                range(0x1000, 0, 10),
                range(0x1002, 10, 30),
            ]
        );
    }
}
