//! Test data shared by spead's unit tests and the workspace's tests (feature
//! `test-support`): the shapes of spead2's own tests, so that both compare the same bytes.

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

#[cfg(test)]
mod tests {
    #[test]
    fn pieces_are_position_then_counter() {
        let p = super::spead2_heap_payload(0x0102, 12);
        assert_eq!(p, [1, 2, 0, 0, 1, 2, 0, 1, 1, 2, 0, 2]);
    }
}
