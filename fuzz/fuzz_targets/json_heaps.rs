//! JSON heap files (what `spead-send --json` reads, one heap per line): arbitrary lines
//! through serde and `spead::json::send_heap`, and every heap that builds through the
//! packetizer; the packets must decode and assemble into one complete heap.
#![no_main]

use libfuzzer_sys::fuzz_target;
use spead::json::{send_heap, HeapJson};
use spead::send::heap_to_bytes;

fuzz_target!(|data: &[u8]| {
    for line in data.split(|b| *b == b'\n').take(64) {
        let Ok(hj) = serde_json::from_slice::<HeapJson>(line) else {
            continue;
        };
        let Ok(heap) = send_heap(&hj) else {
            continue;
        };
        let Ok(bytes) = heap_to_bytes(&heap, hj.cnt, 1472) else {
            continue;
        };
        let mut stream = spead::recv::Stream::new(spead::recv::StreamConfig::default());
        stream.add_buffer(&bytes);
        stream.stop();
        let _ = stream.pop_heap();
    }
});
