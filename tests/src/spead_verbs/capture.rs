//! Captures: reading the datagrams of a pcap, writing one, and a synthetic SPEAD capture.

use std::net::{Ipv4Addr, SocketAddrV4};

use spead::send::{Heap, Packetizer};
use spead::wire::Flavour;

use super::basic::payload;

/// The UDP datagrams of a capture file: (destination, payload), in file order.
///
/// # Panics
/// When the file cannot be read.
pub fn capture_datagrams(path: &std::path::Path) -> Vec<(SocketAddrV4, Vec<u8>)> {
    let mut src = spead::pcap::PcapSource::open(path, spead::pcap::Filter::ANY)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out = Vec::new();
    while let Some(d) = src.next_datagram().expect("read capture") {
        out.push((d.dst, d.payload.to_vec()));
    }
    out
}

/// Writes `frames` (timestamp ns, Ethernet frame) as a classic pcap with nanosecond
/// timestamps.
///
/// # Panics
/// When the file cannot be written.
pub fn write_pcap(path: &std::path::Path, frames: &[(u64, Vec<u8>)]) {
    let write = || -> std::io::Result<()> {
        let mut w = netwire::pcap::PcapWriter::new(std::fs::File::create(path)?)?;
        for (ts, f) in frames {
            w.write(*ts, f)?;
        }
        w.finish().map(drop)
    };
    write().unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// Writes a capture of SPEAD traffic to two groups on one port (heaps 1..=6 of about
/// 5 KB, 1024-byte packets so that they fit rxe's UD MTU, 1 us apart, a stop heap at
/// the end) and returns its datagrams (destination, payload).
pub fn synthetic_capture(path: &std::path::Path) -> Vec<(SocketAddrV4, Vec<u8>)> {
    let groups = [
        SocketAddrV4::new(Ipv4Addr::new(239, 10, 0, 1), 7148),
        SocketAddrV4::new(Ipv4Addr::new(239, 10, 0, 2), 7148),
    ];
    let src = SocketAddrV4::new(Ipv4Addr::new(10, 1, 0, 1), 40000);
    let mut frames = Vec::new();
    let mut sent = Vec::new();
    let mut t = 1_000_000_000u64;
    for cnt in 1..=7u64 {
        let dst = groups[(cnt % 2) as usize];
        let mut heap = Heap::new(Flavour::SPEAD_64_48);
        if cnt == 7 {
            heap.add_end();
        } else {
            heap.add_item(0x1000, payload(cnt, 5000 + cnt as usize * 10), false);
        }
        let mut p = Packetizer::new(&heap, cnt, 1024).expect("packetizer");
        let mut buf = vec![0; 1024];
        while let Some(n) = p.next_packet(&mut buf).expect("packet") {
            let o = dst.ip().octets();
            let f = spead::verbs::frame::udp_frame(
                [2, 0, 10, 1, 0, 1],
                src,
                [1, 0, 0x5e, o[1] & 0x7f, o[2], o[3]],
                dst,
                8,
                &buf[..n],
            );
            frames.push((t, f));
            t += 1000;
            sent.push((dst, buf[..n].to_vec()));
        }
    }
    write_pcap(path, &frames);
    sent
}
