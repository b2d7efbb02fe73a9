//! Test data shared by spead's unit tests and the workspace's tests (feature
//! `test-support`): the shapes of spead2's own tests, so that both compare the same bytes.

use crate::send::{heap_to_bytes, Heap};
use crate::wire::{encode_packet, Flavour};

/// spead2's `make_heap_payload` (tests/test_recv_chunk_stream.py): `size` bytes in 4-byte
/// pieces of (position, counter), each a 16-bit number, big-endian here.
#[must_use]
pub fn spead2_heap_payload(position: u64, size: usize) -> Vec<u8> {
    (0..size / 4)
        .flat_map(|i| {
            let mut b = [0u8; 4];
            b[..2].copy_from_slice(&(position as u16).to_be_bytes());
            b[2..].copy_from_slice(&(i as u16).to_be_bytes());
            b
        })
        .collect()
}

/// A heap of the item group of spead2's chunk stream tests, in SPEAD-64-48 with
/// 9000-byte packets: heap `cnt`, item 0x1000 the position (immediate), 0x1001 the
/// `payload_size` bytes of [`spead2_heap_payload`], and with `extra` an item 0x1002 of
/// three times the position (immediate).
///
/// # Panics
/// When the heap cannot be encoded (a `payload_size` beyond SPEAD-64-48's 48 bits).
#[must_use]
pub fn spead2_chunk_heap(cnt: u64, position: u64, payload_size: usize, extra: bool) -> Vec<u8> {
    let mut h = Heap::new(Flavour::SPEAD_64_48);
    h.add_immediate(0x1000, position);
    h.add_item(0x1001, spead2_heap_payload(position, payload_size), false);
    if extra {
        h.add_immediate(0x1002, position * 3);
    }
    heap_to_bytes(&h, cnt, 9000).expect("a chunk test heap")
}

/// spead2's `make_packet` (tests/test_recv_chunk_stream.py): the one packet of heap
/// `position` (SPEAD-64-48) carrying bytes `[start, end)` of its `payload_size`-byte
/// payload, with the heap's position item 0x1000 (immediate) and payload item 0x1001.
///
/// # Panics
/// When `start..end` is not within the payload.
#[must_use]
pub fn spead2_chunk_packet(
    position: u64,
    start: usize,
    end: usize,
    payload_size: usize,
) -> Vec<u8> {
    let f = Flavour::SPEAD_64_48;
    let ptrs = [
        f.immediate(1, position),
        f.immediate(3, start as u64),
        f.immediate(4, (end - start) as u64),
        f.immediate(2, payload_size as u64),
        f.immediate(0x1000, position),
        f.address(0x1001, 0),
    ];
    let payload = spead2_heap_payload(position, payload_size);
    encode_packet(f, &ptrs, &payload[start..end]).expect("a chunk test packet")
}

/// Heap `cnt` holding only the end-of-stream control item (SPEAD-64-48, 9000-byte
/// packets).
///
/// # Panics
/// Never for a `cnt` of 48 bits.
#[must_use]
pub fn stop_heap(cnt: u64) -> Vec<u8> {
    let mut h = Heap::new(Flavour::SPEAD_64_48);
    h.add_end();
    heap_to_bytes(&h, cnt, 9000).expect("a stop heap")
}

#[cfg(test)]
mod tests {
    #[test]
    fn pieces_are_position_then_counter() {
        let p = super::spead2_heap_payload(0x0102, 12);
        assert_eq!(p, [1, 2, 0, 0, 1, 2, 0, 1, 1, 2, 0, 2]);
    }
}
