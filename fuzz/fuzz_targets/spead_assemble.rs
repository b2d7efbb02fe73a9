//! Fuzz the decoder and heap assembler: arbitrary bytes as one datagram, as a
//! back-to-back buffer, and split into datagrams by a length prefix, in both
//! assembly modes. Run with `cargo xtask fuzz --target spead_assemble`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use spead::descriptor::Descriptor;
use spead::recv::{Stream, StreamConfig};

fuzz_target!(|data: &[u8]| {
    let _ = spead::wire::decode_packet(data);
    let _ = Descriptor::decode(data);
    for ooo in [false, true] {
        let mut stream = Stream::new(StreamConfig {
            allow_out_of_order: ooo,
            deliver_incomplete: true,
            max_heaps: 2,
            max_heap_size: 1 << 20,
            ..StreamConfig::default()
        });
        let _ = stream.add_datagram(data);
        stream.add_buffer(data);
        // First byte pairs give datagram lengths.
        let mut rest = data;
        while rest.len() > 2 {
            let n = usize::from(u16::from_be_bytes([rest[0], rest[1]])).min(rest.len() - 2);
            let _ = stream.add_datagram(&rest[2..2 + n]);
            rest = &rest[2 + n..];
        }
        stream.stop();
        while let Some(h) = stream.pop_heap() {
            for item in h.items() {
                let _ = item.bytes();
            }
            let _ = h.descriptors();
        }
    }
});
