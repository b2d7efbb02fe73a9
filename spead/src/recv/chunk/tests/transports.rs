//! Chunk streams fed by every transport.

use super::*;

#[test]
fn transports_feed_chunk_streams() {
    use crate::pcap::{Filter, PcapSource};
    use crate::transport::ByteStreamReader;
    use crate::transport::{UdpReceiver, UdpRecvConfig, UdpSendConfig, UdpSender};
    use netwire::pcap::{PcapWriter, WriteFormat};
    use std::net::{Ipv4Addr, SocketAddrV4};
    let positions: Vec<u64> = (0..25).collect();
    let mut heaps: Vec<Vec<u8>> = positions.iter().map(|&p| heap_bytes(p + 1, p)).collect();
    heaps.push(stop_heap(100));
    let expect = |ready: &Ready| {
        let chunks = ready.lock().unwrap();
        assert_eq!(chunks.len(), 3);
        for (i, c) in chunks.iter().enumerate() {
            check_chunk(c, i as i64, &prefix_present(i, 25));
        }
    };
    // Memory / file: packets back to back.
    let (mut s, ready) = stream(place_plain);
    let mut reader = ByteStreamReader::new(std::io::Cursor::new(heaps.concat()), 9000);
    reader.run(&mut s).unwrap();
    assert!(s.is_stopped());
    expect(&ready);
    // A pcap capture of the same datagrams.
    let (mut s, ready) = stream(place_plain);
    let frame = |payload: &[u8]| {
        netwire::raw::udp_frame(
            [2, 0, 0, 0, 0, 1],
            SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 9000),
            [1, 0, 0x5e, 10, 0, 1],
            SocketAddrV4::new(Ipv4Addr::new(239, 10, 0, 1), 7148),
            64,
            payload,
        )
    };
    let mut w = PcapWriter::with_format(Vec::new(), WriteFormat::SIMULATOR).unwrap();
    for (i, h) in heaps.iter().enumerate() {
        w.write(i as u64 * 1000, &frame(h)).unwrap();
    }
    let file = w.finish().unwrap();
    PcapSource::new(&file[..], Filter::ANY)
        .unwrap()
        .run(&mut s)
        .unwrap();
    assert!(s.is_stopped());
    expect(&ready);
    // UDP over loopback: one heap per datagram.
    let (mut s, ready) = stream(place_plain);
    let mut cfg = UdpRecvConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.buffer_size = 4 << 20;
    let mut rx = UdpReceiver::bind(&cfg).unwrap();
    let mut tx = UdpSender::new(&UdpSendConfig::new(vec![rx.local_addr().unwrap()])).unwrap();
    let batch: Vec<(&[u8], usize)> = heaps.iter().map(|h| (&h[..], 0)).collect();
    tx.send_batch(&batch).unwrap();
    while !s.is_stopped() {
        assert!(rx.pump(&mut s).unwrap() > 0, "timed out");
    }
    expect(&ready);
}
