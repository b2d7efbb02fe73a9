use socket2::SockRef;

use super::*;
use crate::recv::{Stream, StreamConfig};
use crate::send::{GroupMode, Heap, HeapGroup, HeapReference};
use crate::wire::Flavour;

#[test]
fn loopback_round_trip() {
    round_trip("127.0.0.1:0");
}

#[test]
fn ipv6_loopback_round_trip_through_sendmmsg() {
    round_trip("[::1]:0");
}

/// A heap packetized into one buffer at a fixed stride, as `Sender` does: full
/// packets back to back (a GSO run), the last one shorter.
fn strided_heap(cnt: u64, len: usize, packet: usize) -> (Vec<u8>, Vec<usize>) {
    let mut h = Heap::new(Flavour::SPEAD_64_48);
    h.add_item(
        0x1000,
        (0..len).map(|i| (i * 3) as u8).collect::<Vec<_>>(),
        false,
    );
    let refs = [HeapReference {
        heap: &h,
        cnt,
        substream: 0,
    }];
    let mut g = HeapGroup::new(&refs, packet, GroupMode::Serial).unwrap();
    let mut buf = vec![0u8; packet * 256];
    let mut lens = Vec::new();
    while let Some((n, _)) = g
        .next_packet(&mut buf[lens.len() * packet..(lens.len() + 1) * packet])
        .unwrap()
    {
        lens.push(n);
    }
    (buf, lens)
}

fn receive_all(rx: &mut UdpReceiver, stream: &mut Stream, want: u64) {
    while stream.raw_stats().packets + stream.raw_stats().packets_malformed < want {
        let n = rx.pump(stream).unwrap();
        assert!(n > 0, "timed out");
    }
}

/// Runs of equal packets go out as segmented sends and may come back coalesced:
/// the stream must see each datagram exactly once, whole, whether or not the
/// kernel offers GSO and GRO, with the options on and off.
#[test]
fn segmented_sends_and_coalesced_receives_keep_every_datagram() {
    for (gso, gro) in [(true, true), (true, false), (false, true)] {
        let mut cfg = UdpRecvConfig::new("127.0.0.1:0".parse().unwrap());
        cfg.buffer_size = 4 << 20;
        cfg.gro = gro;
        let mut rx = UdpReceiver::bind(&cfg).unwrap();
        let mut send = UdpSendConfig::new(vec![rx.local_addr().unwrap()]);
        send.gso = gso;
        let mut tx = UdpSender::new(&send).unwrap();
        let (buf, lens) = strided_heap(3, 100_000, 1472);
        assert_eq!(lens.len(), 70);
        assert!(lens[..69].iter().all(|&n| n == 1472) && lens[69] < 1472);
        let batch: Vec<(&[u8], usize)> = lens
            .iter()
            .enumerate()
            .map(|(i, &n)| (&buf[i * 1472..i * 1472 + n], 0))
            .collect();
        tx.send_batch(&batch).unwrap();
        let mut stream = Stream::new(StreamConfig::default());
        receive_all(&mut rx, &mut stream, 70);
        let heap = stream.pop_heap().unwrap();
        assert!(heap.complete, "gso {gso} gro {gro}");
        assert_eq!(heap.cnt, 3);
        let want: Vec<u8> = (0..100_000).map(|i| (i * 3) as u8).collect();
        assert_eq!(heap.items()[0].bytes(), &want[..]);
        let st = stream.raw_stats();
        assert_eq!((st.packets, st.packets_malformed), (70, 0));
    }
}

/// With GRO the receive buffers are 64 KiB, but a datagram longer than
/// `max_packet_size` is still refused (as a truncated one was), each one counted.
#[test]
fn datagrams_longer_than_the_maximum_are_malformed_with_gro() {
    let mut cfg = UdpRecvConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.max_packet_size = 1000;
    let mut rx = UdpReceiver::bind(&cfg).unwrap();
    let mut tx = UdpSender::new(&UdpSendConfig::new(vec![rx.local_addr().unwrap()])).unwrap();
    // Four whole single-packet heaps of 1200 bytes on the wire, back to back.
    let f = Flavour::SPEAD_64_48;
    let payload = vec![7u8; 1160];
    let mut big = Vec::new();
    for cnt in 1..=4u64 {
        let pointers = [
            f.immediate(crate::wire::HEAP_CNT_ID, cnt),
            f.immediate(crate::wire::HEAP_LENGTH_ID, 1160),
            f.immediate(crate::wire::PAYLOAD_OFFSET_ID, 0),
            f.immediate(crate::wire::PAYLOAD_LENGTH_ID, 1160),
        ];
        big.extend(crate::wire::encode_packet(f, &pointers, &payload).unwrap());
    }
    assert_eq!(big.len(), 4 * 1200);
    let batch: Vec<(&[u8], usize)> = big.chunks(1200).map(|c| (c, 0)).collect();
    tx.send_batch(&batch).unwrap();
    let mut stream = Stream::new(StreamConfig::default());
    receive_all(&mut rx, &mut stream, 4);
    assert_eq!(stream.raw_stats().packets_malformed, 4);
    assert_eq!(stream.raw_stats().packets, 0);
    // The same datagrams within the maximum are four whole heaps.
    let mut cfg = UdpRecvConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.max_packet_size = 1200;
    let mut rx = UdpReceiver::bind(&cfg).unwrap();
    let mut tx = UdpSender::new(&UdpSendConfig::new(vec![rx.local_addr().unwrap()])).unwrap();
    tx.send_batch(&batch).unwrap();
    let mut stream = Stream::new(StreamConfig::default());
    receive_all(&mut rx, &mut stream, 4);
    assert_eq!(stream.raw_stats().packets, 4);
    assert_eq!(stream.ready_len(), 4);
}

#[test]
fn buffer_sizes_are_applied() {
    // Linux reports double what it granted; 64 KiB is within every default limit.
    let mut cfg = UdpRecvConfig::new("127.0.0.1:0".parse().unwrap());
    cfg.buffer_size = 64 << 10;
    let rx = UdpReceiver::bind(&cfg).unwrap();
    assert_eq!(
        SockRef::from(&rx.sock).recv_buffer_size().unwrap(),
        128 << 10
    );
    let mut send = UdpSendConfig::new(vec![rx.local_addr().unwrap()]);
    send.buffer_size = 64 << 10;
    let tx = UdpSender::new(&send).unwrap();
    assert_eq!(
        SockRef::from(&tx.sock).send_buffer_size().unwrap(),
        128 << 10
    );
}

fn round_trip(addr: &str) {
    let mut cfg = UdpRecvConfig::new(addr.parse().unwrap());
    cfg.buffer_size = 4 << 20;
    let mut rx = UdpReceiver::bind(&cfg).unwrap();
    let dest = rx.local_addr().unwrap();
    let mut tx = UdpSender::new(&UdpSendConfig::new(vec![dest])).unwrap();
    let mut h = Heap::new(Flavour::SPEAD_64_40);
    h.add_item(
        0x1000,
        (0..20000u32).map(|i| i as u8).collect::<Vec<_>>(),
        false,
    );
    let refs = [HeapReference {
        heap: &h,
        cnt: 7,
        substream: 0,
    }];
    let mut g = HeapGroup::new(&refs, 1472, GroupMode::Serial).unwrap();
    let mut bufs = Vec::new();
    let mut buf = vec![0u8; 1472];
    while let Some((len, _)) = g.next_packet(&mut buf).unwrap() {
        bufs.push(buf[..len].to_vec());
    }
    let batch: Vec<(&[u8], usize)> = bufs.iter().map(|b| (&b[..], 0)).collect();
    tx.send_batch(&batch).unwrap();
    let mut stream = Stream::new(StreamConfig::default());
    let mut got = 0;
    while got < bufs.len() {
        let n = rx.pump(&mut stream).unwrap();
        assert!(n > 0, "timed out");
        got += n;
    }
    let heap = stream.pop_heap().unwrap();
    assert!(heap.complete);
    assert_eq!(heap.cnt, 7);
    assert_eq!(heap.items()[0].bytes().len(), 20000);
}
