//! A capture pumped into a stream.

use super::*;

fn spead_heap(cnt: u64, len: usize) -> Vec<Vec<u8>> {
    let mut heap = Heap::new(Flavour::SPEAD_64_48);
    heap.add_item(0x1000, vec![cnt as u8; len], false);
    heap.add_item(0x1001, 7u16.to_be_bytes(), true);
    let bytes = heap_to_bytes(&heap, cnt, 1472).unwrap();
    let mut out = Vec::new();
    let mut rest = &bytes[..];
    while !rest.is_empty() {
        let n = crate::wire::decode_packet(rest).unwrap().size();
        out.push(rest[..n].to_vec());
        rest = &rest[n..];
    }
    out
}

#[test]
fn pump_feeds_a_stream_and_keeps_heaps_before_an_error() {
    let mut records = Vec::new();
    for cnt in 1..=3 {
        for p in spead_heap(cnt, 3000) {
            records.push(rec(0, eth(&[0x8100], 0x0800, &ip_udp(&p))));
        }
    }
    let file = pcap(false, true, 1, &records);
    let mut stream = Stream::new(StreamConfig::default());
    let mut src = PcapSource::new(&file[..], Filter::ANY).unwrap();
    src.run(&mut stream).unwrap();
    stream.stop();
    let mut cnts = Vec::new();
    while let Some(h) = stream.pop_heap() {
        assert!(h.complete);
        assert_eq!(h.items()[0].bytes(), &vec![h.cnt as u8; 3000][..]);
        cnts.push(h.cnt);
    }
    assert_eq!(cnts, [1, 2, 3]);
    assert_eq!(stream.stats().packets, records.len() as u64);

    // Cut in the last record: heaps 1 and 2 are complete before the error.
    let mut stream = Stream::new(StreamConfig::default());
    let mut src = PcapSource::new(&file[..file.len() - 5], Filter::ANY).unwrap();
    let err = src.run(&mut stream).unwrap_err();
    assert!(matches!(err, PcapError::Truncated { .. }));
    assert!(src.is_done());
    let mut cnts = Vec::new();
    while let Some(h) = stream.pop_heap() {
        cnts.push(h.cnt);
    }
    assert_eq!(cnts, [1, 2]);
}
