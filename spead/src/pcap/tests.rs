//! Tiny captures built in memory: every link type, both containers and byte orders,
//! VLAN tags, IP options, fragments, truncation, corruption and filters.

use std::net::{Ipv4Addr, SocketAddrV4};

use netwire::checksum::internet_checksum as ip_checksum;
use proptest::prelude::*;

use super::*;
use crate::recv::StreamConfig;
use crate::send::{heap_to_bytes, Heap};
use crate::wire::Flavour;

const SRC: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 40000);
const DST: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(239, 10, 0, 1), 7148);

/// An IPv4 packet (with `options`, a multiple of 4 bytes) carrying `payload`.
fn ipv4(proto: u8, frag: u16, options: &[u8], l4: &[u8]) -> Vec<u8> {
    assert_eq!(options.len() % 4, 0);
    let ihl = 20 + options.len();
    let total = ihl + l4.len();
    let mut ip = vec![0u8; ihl];
    ip[0] = 0x40 | (ihl / 4) as u8;
    ip[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    ip[4..6].copy_from_slice(&0x1234u16.to_be_bytes());
    ip[6..8].copy_from_slice(&frag.to_be_bytes());
    ip[8] = 64;
    ip[9] = proto;
    ip[12..16].copy_from_slice(&SRC.ip().octets());
    ip[16..20].copy_from_slice(&DST.ip().octets());
    ip[20..].copy_from_slice(options);
    let sum = ip_checksum(&ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    ip.extend_from_slice(l4);
    ip
}

fn udp(src: SocketAddrV4, dst: SocketAddrV4, payload: &[u8]) -> Vec<u8> {
    let mut u = Vec::new();
    u.extend_from_slice(&src.port().to_be_bytes());
    u.extend_from_slice(&dst.port().to_be_bytes());
    u.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(payload);
    u
}

fn ip_udp(payload: &[u8]) -> Vec<u8> {
    ipv4(17, 0x4000, &[], &udp(SRC, DST, payload))
}

fn ip_udp_to(dst: SocketAddrV4, payload: &[u8]) -> Vec<u8> {
    let mut ip = ipv4(17, 0, &[], &udp(SRC, dst, payload));
    ip[16..20].copy_from_slice(&dst.ip().octets());
    ip[10..12].copy_from_slice(&[0, 0]);
    let sum = ip_checksum(&ip[..20]);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    ip
}

fn eth(tags: &[u16], ethertype: u16, l3: &[u8]) -> Vec<u8> {
    let mut f = vec![0x01, 0x00, 0x5e, 0x0a, 0x00, 0x01, 0x02, 0, 0, 0, 0, 1];
    for &tpid in tags {
        f.extend_from_slice(&tpid.to_be_bytes());
        f.extend_from_slice(&0x0064u16.to_be_bytes()); // VLAN 100
    }
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(l3);
    f
}

fn sll(protocol: u16, l3: &[u8]) -> Vec<u8> {
    let mut f = vec![0, 0, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0];
    f.extend_from_slice(&protocol.to_be_bytes());
    f.extend_from_slice(l3);
    f
}

fn sll2(protocol: u16, l3: &[u8]) -> Vec<u8> {
    let mut f = protocol.to_be_bytes().to_vec();
    f.extend_from_slice(&[0, 0, 0, 0, 0, 1, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0]);
    f.extend_from_slice(l3);
    f
}

#[derive(Clone)]
struct Rec {
    ts_ns: u64,
    data: Vec<u8>,
    orig_len: u32,
}

fn rec(ts_ns: u64, data: Vec<u8>) -> Rec {
    let orig_len = data.len() as u32;
    Rec {
        ts_ns,
        data,
        orig_len,
    }
}

fn put32(out: &mut Vec<u8>, big: bool, v: u32) {
    out.extend_from_slice(&if big {
        v.to_be_bytes()
    } else {
        v.to_le_bytes()
    });
}

fn put16(out: &mut Vec<u8>, big: bool, v: u16) {
    out.extend_from_slice(&if big {
        v.to_be_bytes()
    } else {
        v.to_le_bytes()
    });
}

/// A classic pcap file.
fn pcap(big: bool, nanos: bool, link: u32, records: &[Rec]) -> Vec<u8> {
    let mut out = Vec::new();
    put32(&mut out, big, if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 });
    put16(&mut out, big, 2);
    put16(&mut out, big, 4);
    put32(&mut out, big, 0);
    put32(&mut out, big, 0);
    put32(&mut out, big, 262_144);
    put32(&mut out, big, link);
    for r in records {
        let div = if nanos { 1 } else { 1000 };
        put32(&mut out, big, (r.ts_ns / 1_000_000_000) as u32);
        put32(&mut out, big, ((r.ts_ns % 1_000_000_000) / div) as u32);
        put32(&mut out, big, r.data.len() as u32);
        put32(&mut out, big, r.orig_len);
        out.extend_from_slice(&r.data);
    }
    out
}

fn ng_block(out: &mut Vec<u8>, big: bool, block_type: u32, body: &[u8]) {
    let padded = body.len().div_ceil(4) * 4;
    let total = (12 + padded) as u32;
    put32(out, big, block_type);
    put32(out, big, total);
    out.extend_from_slice(body);
    out.resize(out.len() + padded - body.len(), 0);
    put32(out, big, total);
}

fn ng_shb(out: &mut Vec<u8>, big: bool) {
    let mut body = Vec::new();
    put32(&mut body, big, 0x1a2b_3c4d);
    put16(&mut body, big, 1);
    put16(&mut body, big, 0);
    body.extend_from_slice(&[0xff; 8]); // section length unknown
    ng_block(out, big, 0x0a0d_0d0a, &body);
}

/// An IDB with an optional if_tsresol.
fn ng_idb(out: &mut Vec<u8>, big: bool, link: u16, tsresol: Option<u8>) {
    let mut body = Vec::new();
    put16(&mut body, big, link);
    put16(&mut body, big, 0);
    put32(&mut body, big, 0);
    if let Some(r) = tsresol {
        put16(&mut body, big, 9);
        put16(&mut body, big, 1);
        body.extend_from_slice(&[r, 0, 0, 0]);
        put16(&mut body, big, 0);
        put16(&mut body, big, 0);
    }
    ng_block(out, big, 1, &body);
}

fn ng_epb(out: &mut Vec<u8>, big: bool, iface: u32, ts: u64, r: &Rec) {
    let mut body = Vec::new();
    put32(&mut body, big, iface);
    put32(&mut body, big, (ts >> 32) as u32);
    put32(&mut body, big, ts as u32);
    put32(&mut body, big, r.data.len() as u32);
    put32(&mut body, big, r.orig_len);
    body.extend_from_slice(&r.data);
    ng_block(out, big, 6, &body);
}

/// Timestamp, source, destination and payload of a datagram.
type Found = (u64, SocketAddrV4, SocketAddrV4, Vec<u8>);

fn all_datagrams(file: &[u8]) -> (Vec<Found>, PcapStats) {
    let mut src = PcapSource::new(file, Filter::ANY).unwrap();
    let mut out = Vec::new();
    while let Some(d) = src.next_datagram().unwrap() {
        out.push((d.ts_ns, d.src, d.dst, d.payload.to_vec()));
    }
    (out, *src.stats())
}

fn one_payload(link: u32, frame: Vec<u8>) -> Result<Vec<u8>, DropCause> {
    parse_frame(link, &frame, true).map(|u| {
        assert_eq!(u.src, SRC);
        u.payload.to_vec()
    })
}

#[test]
fn every_link_type() {
    let p = b"spead payload".to_vec();
    let ip = ip_udp(&p);
    assert_eq!(
        one_payload(link_type::ETHERNET, eth(&[], 0x0800, &ip)),
        Ok(p.clone())
    );
    assert_eq!(
        one_payload(link_type::LINUX_SLL, sll(0x0800, &ip)),
        Ok(p.clone())
    );
    assert_eq!(
        one_payload(link_type::LINUX_SLL2, sll2(0x0800, &ip)),
        Ok(p.clone())
    );
    assert_eq!(one_payload(link_type::RAW, ip.clone()), Ok(p.clone()));
    assert_eq!(one_payload(link_type::IPV4, ip.clone()), Ok(p.clone()));
    let mut null = 2u32.to_le_bytes().to_vec();
    null.extend_from_slice(&ip);
    assert_eq!(one_payload(link_type::NULL, null), Ok(p.clone()));
    let mut lo = 2u32.to_be_bytes().to_vec();
    lo.extend_from_slice(&ip);
    assert_eq!(one_payload(link_type::LOOP, lo), Ok(p.clone()));
    let mut null6 = 30u32.to_le_bytes().to_vec();
    null6.extend_from_slice(&ip);
    assert_eq!(one_payload(link_type::NULL, null6), Err(DropCause::NotIpv4));
    assert_eq!(
        one_payload(147, ip.clone()),
        Err(DropCause::UnsupportedLinkType)
    );
    let u = parse_frame(link_type::RAW, &ip, true).unwrap();
    assert_eq!((u.src, u.dst), (SRC, DST));
}

#[test]
fn vlan_tags_on_every_link_type() {
    let p = vec![1, 2, 3, 4, 5];
    let ip = ip_udp(&p);
    let one = eth(&[0x8100], 0x0800, &ip);
    assert_eq!(one_payload(link_type::ETHERNET, one), Ok(p.clone()));
    let qinq = eth(&[0x88a8, 0x8100], 0x0800, &ip);
    assert_eq!(one_payload(link_type::ETHERNET, qinq), Ok(p.clone()));
    let ipv6_in_vlan = eth(&[0x8100], 0x86dd, &ip);
    assert_eq!(
        one_payload(link_type::ETHERNET, ipv6_in_vlan),
        Err(DropCause::NotIpv4)
    );
    // A tag cut short.
    let cut = eth(&[], 0x8100, &[0, 100]);
    assert_eq!(
        one_payload(link_type::ETHERNET, cut),
        Err(DropCause::Truncated)
    );
    let mut tagged = vec![0, 100, 0x08, 0x00];
    tagged.extend_from_slice(&ip);
    assert_eq!(
        one_payload(link_type::LINUX_SLL, sll(0x8100, &tagged)),
        Ok(p.clone())
    );
    assert_eq!(
        one_payload(link_type::LINUX_SLL2, sll2(0x8100, &tagged)),
        Ok(p.clone())
    );
    assert_eq!(
        one_payload(link_type::LINUX_SLL, sll(0x0806, &ip)),
        Err(DropCause::NotIpv4)
    );
}

#[test]
fn ip_options_are_skipped() {
    for words in [1usize, 2, 10] {
        let options: Vec<u8> = (0..words * 4)
            .map(|i| if i == 0 { 0x94 } else { 1 })
            .collect();
        let ip = ipv4(17, 0, &options, &udp(SRC, DST, b"after options"));
        assert_eq!(ip[0] & 0x0f, 5 + words as u8);
        assert_eq!(
            one_payload(link_type::ETHERNET, eth(&[], 0x0800, &ip)),
            Ok(b"after options".to_vec())
        );
    }
}

#[test]
fn ethernet_padding_and_trailers_are_ignored() {
    let mut frame = eth(&[], 0x0800, &ip_udp(b"x"));
    frame.resize(60, 0xee); // minimum frame size padding
    frame.extend_from_slice(&[0xde, 0xad, 0xbe, 0xef]); // FCS
    assert_eq!(one_payload(link_type::ETHERNET, frame), Ok(b"x".to_vec()));
}

#[test]
fn drop_causes() {
    let l4 = udp(SRC, DST, b"payload");
    let e = |ip: &[u8]| eth(&[], 0x0800, ip);
    // Fragments: more-fragments flag, or an offset.
    assert_eq!(
        one_payload(1, e(&ipv4(17, 0x2000, &[], &l4))),
        Err(DropCause::Fragment)
    );
    assert_eq!(
        one_payload(1, e(&ipv4(17, 0x0010, &[], &l4))),
        Err(DropCause::Fragment)
    );
    // Don't-fragment alone is fine.
    assert!(one_payload(1, e(&ipv4(17, 0x4000, &[], &l4))).is_ok());
    assert_eq!(
        one_payload(1, e(&ipv4(6, 0, &[], &l4))),
        Err(DropCause::NotUdp)
    );
    assert_eq!(
        one_payload(1, eth(&[], 0x86dd, &l4)),
        Err(DropCause::NotIpv4)
    );
    // Raw IP that is IPv6.
    let mut v6 = ip_udp(b"p");
    v6[0] = 0x60;
    assert_eq!(one_payload(link_type::RAW, v6), Err(DropCause::NotIpv4));
    // Bad checksum, unless not verified.
    let mut bad = ip_udp(b"p");
    bad[10] ^= 0xff;
    assert_eq!(one_payload(101, bad.clone()), Err(DropCause::BadChecksum));
    assert!(parse_frame(101, &bad, false).is_ok());
    // Header length below 20 bytes.
    let mut short_ihl = ip_udp(b"p");
    short_ihl[0] = 0x44;
    assert_eq!(one_payload(101, short_ihl), Err(DropCause::BadIpHeader));
    // Total length below the header length.
    let mut small_total = ip_udp(b"p");
    small_total[2..4].copy_from_slice(&10u16.to_be_bytes());
    assert_eq!(
        parse_frame(101, &small_total, false).map(|_| ()),
        Err(DropCause::BadIpHeader)
    );
    // UDP length shorter than its header, or longer than the IP payload.
    let mut udp_short = l4.clone();
    udp_short[4..6].copy_from_slice(&4u16.to_be_bytes());
    assert_eq!(
        one_payload(101, ipv4(17, 0, &[], &udp_short)),
        Err(DropCause::BadUdpLength)
    );
    let mut udp_long = l4.clone();
    udp_long[4..6].copy_from_slice(&400u16.to_be_bytes());
    assert_eq!(
        one_payload(101, ipv4(17, 0, &[], &udp_long)),
        Err(DropCause::BadUdpLength)
    );
}

#[test]
fn headers_cut_short_are_truncated() {
    let ip = ip_udp(b"0123456789");
    let frame = eth(&[], 0x0800, &ip);
    for cut in [0, 5, 13, 14, 15, 20, 33, 34, 38, 41, frame.len() - 1] {
        assert_eq!(
            one_payload(link_type::ETHERNET, frame[..cut].to_vec()),
            Err(DropCause::Truncated),
            "cut at {cut}"
        );
    }
    for cut in [0, 10, 15, 19] {
        assert_eq!(
            one_payload(link_type::LINUX_SLL2, sll2(0x0800, &ip)[..cut].to_vec()),
            Err(DropCause::Truncated)
        );
    }
    // Options announced but cut off.
    let opts = ipv4(17, 0, &[1; 8], &udp(SRC, DST, b""));
    assert_eq!(
        one_payload(101, opts[..24].to_vec()),
        Err(DropCause::Truncated)
    );
}

#[test]
fn classic_pcap_both_byte_orders_and_resolutions() {
    let ts = 1_700_000_000_123_456_789u64;
    for big in [false, true] {
        for nanos in [false, true] {
            let file = pcap(
                big,
                nanos,
                1,
                &[
                    rec(ts, eth(&[], 0x0800, &ip_udp(b"first"))),
                    rec(ts + 1000, eth(&[], 0x0800, &ip_udp(b"second"))),
                ],
            );
            let reader = PcapReader::new(&file[..]).unwrap();
            assert_eq!(
                reader.format(),
                FileFormat::Pcap {
                    big_endian: big,
                    nanosecond: nanos,
                    link_type: 1,
                    snaplen: 262_144
                }
            );
            let (d, stats) = all_datagrams(&file);
            let want = if nanos { ts } else { ts / 1000 * 1000 };
            assert_eq!(d.len(), 2);
            assert_eq!(d[0], (want, SRC, DST, b"first".to_vec()));
            assert_eq!(d[1].0, want + 1000);
            assert_eq!(d[1].3, b"second");
            assert_eq!(stats.records, 2);
            assert_eq!(stats.datagrams, 2);
            assert_eq!(stats.dropped(), 0);
        }
    }
}

#[test]
fn records_expose_their_bytes() {
    let frame = sll(0x0800, &ip_udp(b"abc"));
    let file = pcap(false, true, link_type::LINUX_SLL, &[rec(5, frame.clone())]);
    let mut reader = PcapReader::new(&file[..]).unwrap();
    let r = reader.next_record().unwrap().unwrap();
    assert_eq!(r.data, &frame[..]);
    assert_eq!((r.ts_ns, r.link_type, r.offset), (5, 113, 24));
    assert!(reader.next_record().unwrap().is_none());
    assert!(reader.next_record().unwrap().is_none());
}

#[test]
fn pcapng_sections_interfaces_and_resolutions() {
    for big in [false, true] {
        let mut file = Vec::new();
        ng_shb(&mut file, big);
        ng_idb(&mut file, big, 1, None); // microseconds
        ng_idb(&mut file, big, 113, Some(9)); // nanoseconds
        ng_idb(&mut file, big, 101, Some(0x80 | 10)); // 1/1024 s
        ng_block(&mut file, big, 5, &[0; 16]); // interface statistics: skipped
        let r0 = rec(0, eth(&[], 0x0800, &ip_udp(b"eth")));
        let r1 = rec(0, sll(0x0800, &ip_udp(b"sll")));
        let r2 = rec(0, ip_udp(b"raw"));
        ng_epb(&mut file, big, 0, 1_500_000, &r0);
        ng_epb(&mut file, big, 1, 2_000_000_007, &r1);
        ng_epb(&mut file, big, 2, 1024 * 3 + 512, &r2);
        // A simple packet block (interface 0, no timestamp).
        let mut spb = Vec::new();
        let frame = eth(&[], 0x0800, &ip_udp(b"simple"));
        put32(&mut spb, big, frame.len() as u32);
        spb.extend_from_slice(&frame);
        ng_block(&mut file, big, 3, &spb);
        // A second section in the other byte order, with its own interfaces.
        ng_shb(&mut file, !big);
        ng_idb(&mut file, !big, 276, None);
        ng_epb(
            &mut file,
            !big,
            0,
            7,
            &rec(0, sll2(0x0800, &ip_udp(b"sll2"))),
        );
        assert_eq!(
            PcapReader::new(&file[..]).unwrap().format(),
            FileFormat::PcapNg
        );
        let (d, stats) = all_datagrams(&file);
        let got: Vec<(u64, &[u8])> = d.iter().map(|x| (x.0, &x.3[..])).collect();
        assert_eq!(
            got,
            vec![
                (1_500_000_000, &b"eth"[..]),
                (2_000_000_007, b"sll"),
                (3_500_000_000, b"raw"),
                (0, b"simple"),
                (7000, b"sll2"),
            ]
        );
        assert_eq!(stats.records, 5);
    }
}

#[test]
fn pcapng_errors() {
    let mut file = Vec::new();
    ng_shb(&mut file, false);
    ng_idb(&mut file, false, 1, None);
    let good = rec(0, eth(&[], 0x0800, &ip_udp(b"ok")));
    ng_epb(&mut file, false, 0, 1, &good);
    let good_len = file.len();
    // A packet for an interface never declared.
    let mut bad_iface = file.clone();
    ng_epb(&mut bad_iface, false, 3, 1, &good);
    // A trailing length that disagrees.
    let mut bad_trailer = file.clone();
    ng_epb(&mut bad_trailer, false, 0, 1, &good);
    let n = bad_trailer.len();
    bad_trailer[n - 4] ^= 4;
    // A block cut short.
    let mut cut = file.clone();
    ng_epb(&mut cut, false, 0, 1, &good);
    cut.truncate(cut.len() - 10);
    // A captured length beyond its block.
    let mut overlong = file.clone();
    ng_epb(&mut overlong, false, 0, 1, &good);
    overlong[good_len + 20..good_len + 24].copy_from_slice(&5000u32.to_le_bytes());
    for (name, f) in [
        ("iface", bad_iface),
        ("trailer", bad_trailer),
        ("cut", cut),
        ("overlong", overlong),
    ] {
        let mut src = PcapSource::new(&f[..], Filter::ANY).unwrap();
        assert_eq!(
            src.next_datagram().unwrap().unwrap().payload,
            b"ok",
            "{name}"
        );
        let err = src.next_datagram().unwrap_err();
        assert_eq!(err.offset(), good_len as u64, "{name}: {err}");
        assert!(src.next_datagram().unwrap().is_none());
        assert!(src.is_done());
    }
    // A section header whose trailing length disagrees.
    let mut shb = Vec::new();
    ng_shb(&mut shb, true);
    let n = shb.len();
    shb[n - 1] ^= 8;
    assert!(matches!(
        PcapReader::new(&shb[..]),
        Err(PcapError::Corrupt { offset: 0, .. })
    ));
    // A bad byte-order magic.
    let mut bom = Vec::new();
    ng_shb(&mut bom, false);
    bom[8] = 0;
    assert!(matches!(
        PcapReader::new(&bom[..]),
        Err(PcapError::Corrupt { offset: 8, .. })
    ));
}

#[test]
fn truncated_and_corrupt_classic_files() {
    let frames: Vec<Rec> = (0..3u8)
        .map(|i| rec(u64::from(i), eth(&[], 0x0800, &ip_udp(&[i; 10]))))
        .collect();
    let file = pcap(false, false, 1, &frames);
    let rec_len = 16 + frames[0].data.len();
    let third = 24 + 2 * rec_len;
    // Cut inside the third record's data, then inside its header.
    for cut in [third + 20, third + 3] {
        let mut src = PcapSource::new(&file[..cut], Filter::ANY).unwrap();
        assert_eq!(src.next_datagram().unwrap().unwrap().payload, &[0; 10]);
        assert_eq!(src.next_datagram().unwrap().unwrap().payload, &[1; 10]);
        let err = src.next_datagram().unwrap_err();
        assert!(matches!(err, PcapError::Truncated { .. }), "{err}");
        assert_eq!(err.offset(), third as u64);
        assert!(err.to_string().contains(&format!("byte {third}")), "{err}");
        assert!(src.next_datagram().unwrap().is_none());
        assert_eq!(src.stats().datagrams, 2);
    }
    // An absurd captured length.
    let mut huge = file.clone();
    huge[third + 8..third + 12].copy_from_slice(&0x7fff_ffffu32.to_le_bytes());
    let mut src = PcapSource::new(&huge[..], Filter::ANY).unwrap();
    src.next_datagram().unwrap().unwrap();
    src.next_datagram().unwrap().unwrap();
    let err = src.next_datagram().unwrap_err();
    assert!(matches!(err, PcapError::Corrupt { offset, .. } if offset == third as u64));
    // Header problems.
    assert!(matches!(
        PcapReader::new(&file[..10]),
        Err(PcapError::Truncated { offset: 0, .. })
    ));
    assert!(matches!(
        PcapReader::new(&file[..2]),
        Err(PcapError::Truncated { .. })
    ));
    assert!(matches!(
        PcapReader::new(&b"GIF89a................................"[..]),
        Err(PcapError::BadMagic { .. })
    ));
    let mut v3 = file.clone();
    v3[4] = 3;
    assert!(matches!(
        PcapReader::new(&v3[..]),
        Err(PcapError::Corrupt { .. })
    ));
    // An empty file after the header is simply empty.
    assert_eq!(all_datagrams(&file[..24]).0.len(), 0);
    // Errors become io::Errors with a kind.
    let e: std::io::Error = PcapReader::new(&file[..10]).unwrap_err().into();
    assert_eq!(e.kind(), std::io::ErrorKind::UnexpectedEof);
}

#[test]
fn short_captures_and_drops_are_counted() {
    let ok = eth(&[], 0x0800, &ip_udp(b"fine"));
    let mut snapped = rec(0, ok[..30].to_vec());
    snapped.orig_len = ok.len() as u32;
    // Captured short of its length even though the payload would fit (snaplen cut FCS).
    let mut fcs_cut = rec(0, ok.clone());
    fcs_cut.orig_len = ok.len() as u32 + 4;
    let file = pcap(
        true,
        false,
        1,
        &[
            rec(0, ok.clone()),
            snapped,
            fcs_cut,
            rec(
                0,
                eth(&[], 0x0800, &ipv4(17, 0x2000, &[], &udp(SRC, DST, b"frag"))),
            ),
            rec(0, eth(&[], 0x0800, &ipv4(1, 0, &[], b"icmp"))),
            rec(0, eth(&[], 0x0806, &[0; 28])),
            rec(0, ok.clone()),
        ],
    );
    let (d, stats) = all_datagrams(&file);
    assert_eq!(d.len(), 2);
    assert_eq!(
        stats,
        PcapStats {
            records: 7,
            datagrams: 2,
            truncated: 2,
            fragment: 1,
            not_udp: 1,
            not_ipv4: 1,
            ..PcapStats::default()
        }
    );
    assert_eq!(stats.dropped(), 5);
    assert_eq!(
        stats.to_string(),
        "7 records, 2 datagrams, 0 filtered, 5 dropped (not_ipv4 1, truncated 2, fragment 1, not_udp 1)"
    );
    // Unsupported link types are counted per frame.
    let (d, stats) = all_datagrams(&pcap(false, false, 147, &[rec(0, ok)]));
    assert!(d.is_empty());
    assert_eq!(stats.unsupported_link_type, 1);
}

#[test]
fn filters_parse_and_match() {
    let f: Filter = "239.10.0.1:7148".parse().unwrap();
    assert_eq!(f.addr, Some(Ipv4Addr::new(239, 10, 0, 1)));
    assert_eq!(f.port, Some(7148));
    assert!(f.matches(DST));
    assert!(!f.matches(SocketAddrV4::new(*DST.ip(), 7149)));
    assert!(!f.matches(SocketAddrV4::new(Ipv4Addr::new(239, 10, 0, 2), 7148)));
    let any_port: Filter = "239.10.0.1:*".parse().unwrap();
    assert!(any_port.matches(SocketAddrV4::new(*DST.ip(), 1)));
    let any_addr: Filter = "*:7148".parse().unwrap();
    assert!(any_addr.matches(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 7148)));
    assert_eq!("*:*".parse::<Filter>().unwrap(), Filter::ANY);
    for (s, round) in [
        ("*:7148", "*:7148"),
        ("1.2.3.4:*", "1.2.3.4:*"),
        ("*:*", "*:*"),
    ] {
        assert_eq!(s.parse::<Filter>().unwrap().to_string(), round);
    }
    assert!(matches!(
        "7148".parse::<Filter>(),
        Err(FilterError::Syntax(_))
    ));
    assert!(matches!(
        "host:1".parse::<Filter>(),
        Err(FilterError::Address(_))
    ));
    assert!(matches!(
        "::1:1".parse::<Filter>(),
        Err(FilterError::Address(_))
    ));
    assert!(matches!(
        "1.2.3.4:70000".parse::<Filter>(),
        Err(FilterError::Port(_))
    ));

    let spec: PcapSpec = "dir/x.pcap?239.10.0.1:7148".parse().unwrap();
    assert_eq!(spec.path, std::path::Path::new("dir/x.pcap"));
    assert_eq!(spec.filter, f);
    let spec: PcapSpec = "x.pcap".parse().unwrap();
    assert_eq!(spec.filter, Filter::ANY);
    assert!(matches!(
        "?*:1".parse::<PcapSpec>(),
        Err(FilterError::NoPath)
    ));
    assert!("x.pcap?bad".parse::<PcapSpec>().is_err());
}

#[test]
fn the_filter_selects_datagrams() {
    let other = SocketAddrV4::new(Ipv4Addr::new(239, 10, 0, 2), 7148);
    let other_port = SocketAddrV4::new(*DST.ip(), 9000);
    let file = pcap(
        false,
        false,
        1,
        &[
            rec(0, eth(&[], 0x0800, &ip_udp_to(DST, b"a"))),
            rec(0, eth(&[], 0x0800, &ip_udp_to(other, b"b"))),
            rec(0, eth(&[], 0x0800, &ip_udp_to(other_port, b"c"))),
        ],
    );
    let run = |f: &str| {
        let mut src = PcapSource::new(&file[..], f.parse().unwrap()).unwrap();
        let mut got = Vec::new();
        while let Some(d) = src.next_datagram().unwrap() {
            got.push(d.payload[0]);
        }
        (String::from_utf8(got).unwrap(), src.stats().filtered)
    };
    assert_eq!(run("*:*"), ("abc".to_string(), 0));
    assert_eq!(run("239.10.0.1:7148"), ("a".to_string(), 2));
    assert_eq!(run("*:7148"), ("ab".to_string(), 1));
    assert_eq!(run("239.10.0.1:*"), ("ac".to_string(), 1));
    assert_eq!(run("239.10.0.3:*"), (String::new(), 3));
}

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

proptest! {
    #[test]
    fn random_frames_never_panic(link in prop::sample::select(vec![0u32, 1, 101, 108, 113, 228, 276, 9]),
                                 bytes in prop::collection::vec(any::<u8>(), 0..80),
                                 verify in any::<bool>()) {
        if let Ok(u) = parse_frame(link, &bytes, verify) {
            prop_assert!(u.payload.len() < bytes.len());
        }
    }

    #[test]
    fn mutated_files_never_panic(flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..8),
                                 cut in any::<prop::sample::Index>(),
                                 ng in any::<bool>()) {
        let frame = eth(&[0x8100], 0x0800, &ip_udp(b"fuzz me"));
        let mut file = if ng {
            let mut f = Vec::new();
            ng_shb(&mut f, false);
            ng_idb(&mut f, false, 1, Some(9));
            ng_epb(&mut f, false, 0, 1, &rec(0, frame.clone()));
            ng_epb(&mut f, false, 0, 2, &rec(0, frame));
            f
        } else {
            pcap(false, false, 1, &[rec(0, frame.clone()), rec(1, frame)])
        };
        for (i, b) in flips {
            let at = i.index(file.len());
            file[at] ^= b;
        }
        let len = cut.index(file.len() + 1);
        if let Ok(mut src) = PcapSource::new(&file[..len], Filter::ANY) {
            while let Ok(Some(_)) = src.next_datagram() {}
            prop_assert!(src.next_datagram().unwrap().is_none());
        }
    }
}

#[test]
fn fcs_bits_in_the_link_type_field_are_ignored() {
    let mut file = pcap(
        false,
        false,
        1,
        &[rec(0, eth(&[], 0x0800, &ip_udp(b"fcs")))],
    );
    // "FCS present, 4 bytes" in the upper bits of the header's link type.
    file[20..24].copy_from_slice(&(0x2400_0000u32 | 1).to_le_bytes());
    let mut frame_with_fcs = eth(&[], 0x0800, &ip_udp(b"fcs"));
    frame_with_fcs.extend_from_slice(&[1, 2, 3, 4]);
    // Replace the record by one that carries an FCS.
    let mut file = file[..24].to_vec();
    file.extend_from_slice(&pcap(false, false, 1, &[rec(0, frame_with_fcs)])[24..]);
    assert_eq!(all_datagrams(&file).0[0].3, b"fcs");
}

#[test]
fn pcapng_timestamp_offset() {
    let mut file = Vec::new();
    ng_shb(&mut file, false);
    let mut body = Vec::new();
    put16(&mut body, false, 1);
    put16(&mut body, false, 0);
    put32(&mut body, false, 0);
    put16(&mut body, false, 14); // if_tsoffset: 100 s
    put16(&mut body, false, 8);
    body.extend_from_slice(&100i64.to_le_bytes());
    put16(&mut body, false, 0);
    put16(&mut body, false, 0);
    ng_block(&mut file, false, 1, &body);
    ng_epb(
        &mut file,
        false,
        0,
        2,
        &rec(0, eth(&[], 0x0800, &ip_udp(b"t"))),
    );
    assert_eq!(all_datagrams(&file).0[0].0, 100_000_002_000);
    // An option running past its block is corruption.
    let mut bad = file.clone();
    bad[28 + 8 + 8 + 2] = 200; // the option length
    assert!(matches!(
        PcapSource::new(&bad[..], Filter::ANY)
            .unwrap()
            .next_datagram(),
        Err(PcapError::Corrupt { offset: 28, .. })
    ));
}

/// A reader that hands out one byte per call, with an interruption before each.
struct Dribble<'a>(&'a [u8], bool);

impl std::io::Read for Dribble<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.1 = !self.1;
        if self.1 {
            return Err(std::io::ErrorKind::Interrupted.into());
        }
        match (self.0.split_first(), buf.first_mut()) {
            (Some((&b, rest)), Some(slot)) => {
                *slot = b;
                self.0 = rest;
                Ok(1)
            }
            _ => Ok(0),
        }
    }
}

#[test]
fn short_reads_and_interruptions() {
    let frames: Vec<Rec> = (0..4u8)
        .map(|i| rec(u64::from(i), eth(&[], 0x0800, &ip_udp(&[i; 3]))))
        .collect();
    let file = pcap(true, true, 1, &frames);
    let mut src = PcapSource::new(Dribble(&file, false), Filter::ANY).unwrap();
    let mut n = 0u8;
    while let Some(d) = src.next_datagram().unwrap() {
        assert_eq!(d.payload, &[n; 3]);
        n += 1;
    }
    assert_eq!(n, 4);
    assert_eq!(src.reader().position(), file.len() as u64);
}

#[test]
fn io_errors_carry_the_offset() {
    /// Serves its bytes, then fails.
    struct Failing(Vec<u8>, usize);
    impl std::io::Read for Failing {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let rest = &self.0[self.1..];
            if rest.is_empty() {
                return Err(std::io::Error::other("disk on fire"));
            }
            let n = buf.len().min(rest.len());
            buf[..n].copy_from_slice(&rest[..n]);
            self.1 += n;
            Ok(n)
        }
    }
    let file = pcap(false, false, 1, &[rec(0, eth(&[], 0x0800, &ip_udp(b"x")))]);
    let mut src = PcapSource::new(Failing(file[..60].to_vec(), 0), Filter::ANY).unwrap();
    let err = src.next_datagram().unwrap_err();
    assert!(matches!(err, PcapError::Io { offset: 60, .. }), "{err}");
    assert!(err.to_string().contains("disk on fire"));
    assert!(src.next_datagram().unwrap().is_none());
}

#[test]
fn pcapng_obsolete_packet_block() {
    for big in [false, true] {
        let mut file = Vec::new();
        ng_shb(&mut file, big);
        ng_idb(&mut file, big, 228, Some(9));
        let data = ip_udp(b"old");
        let mut body = Vec::new();
        put16(&mut body, big, 0); // interface
        put16(&mut body, big, 0); // drops
        put32(&mut body, big, 0);
        put32(&mut body, big, 42);
        put32(&mut body, big, data.len() as u32);
        put32(&mut body, big, data.len() as u32);
        body.extend_from_slice(&data);
        ng_block(&mut file, big, 2, &body);
        let (d, _) = all_datagrams(&file);
        assert_eq!((d[0].0, &d[0].3[..]), (42, &b"old"[..]));
    }
}
