//! The containers: classic pcap and pcapng, both byte orders and resolutions, their
//! errors, truncation and corruption, and reading through short reads and I/O errors.

use super::*;

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
