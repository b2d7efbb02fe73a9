//! Writer/reader round trips for both containers at both resolutions and every link
//! type; the real captures in `tests/data`; and each place where `pcap-file` alone
//! would be wrong, shown against it. (The reader's error cases are tested through
//! spead's pcap source, in `spead/src/pcap/tests.rs`.)

use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;
use std::time::Duration;

use super::*;
use crate::eth::Mac;
use crate::raw::udp_frame;

const SRC: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 40000);
const DST: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(239, 10, 0, 1), 7148);
const SRC_MAC: [u8; 6] = [2, 0, 10, 0, 0, 1];
/// 2023-11-14 22:13:20.123456789 UTC.
const TS: u64 = 1_700_000_000_123_456_789;

fn eth_frame(payload: &[u8]) -> Vec<u8> {
    udp_frame(SRC_MAC, SRC, [1, 0, 0x5e, 10, 0, 1], DST, 64, payload)
}

/// The same IPv4 packet in a frame of `link_type`.
fn framed(link_type: u32, payload: &[u8]) -> Vec<u8> {
    let eth = eth_frame(payload);
    let ip = &eth[14..];
    let mut f = match link_type {
        link_type::ETHERNET => return eth,
        // Packet type "outgoing", ARPHRD_ETHER, 6-byte address, protocol IPv4.
        link_type::LINUX_SLL => {
            let mut h = vec![0, 4, 0, 1, 0, 6];
            h.extend_from_slice(&SRC_MAC);
            h.extend_from_slice(&[0, 0, 0x08, 0x00]);
            h
        }
        // Protocol, reserved, ifindex 2, ARPHRD_ETHER, outgoing, 6-byte address.
        link_type::LINUX_SLL2 => {
            let mut h = vec![0x08, 0x00, 0, 0, 0, 0, 0, 2, 0, 1, 4, 6];
            h.extend_from_slice(&SRC_MAC);
            h.extend_from_slice(&[0, 0]);
            h
        }
        link_type::NULL => 2u32.to_le_bytes().to_vec(),
        link_type::LOOP => 2u32.to_be_bytes().to_vec(),
        _ => Vec::new(),
    };
    f.extend_from_slice(ip);
    f
}

const LINK_TYPES: [u32; 9] = [
    link_type::NULL,
    link_type::ETHERNET,
    link_type::RAW_BSD_12,
    link_type::RAW_BSD_14,
    link_type::RAW,
    link_type::LOOP,
    link_type::LINUX_SLL,
    link_type::IPV4,
    link_type::LINUX_SLL2,
];

fn write_file(format: WriteFormat, records: &[(u64, Vec<u8>)]) -> Vec<u8> {
    let mut w = PcapWriter::with_format(Vec::new(), format).unwrap();
    for (ts, data) in records {
        w.write(*ts, data).unwrap();
    }
    assert_eq!(w.records(), records.len() as u64);
    w.finish().unwrap()
}

/// A record read back: (timestamp, link type, original length, bytes).
type Read = (u64, u32, u32, Vec<u8>);

/// Every record of a file.
fn read_all(bytes: &[u8]) -> (FileFormat, Vec<Read>) {
    let mut r = PcapReader::new(bytes).unwrap();
    let mut out = Vec::new();
    while let Some(rec) = r.next_record().unwrap() {
        out.push((rec.ts_ns, rec.link_type, rec.orig_len, rec.data.to_vec()));
    }
    assert_eq!(r.position(), bytes.len() as u64);
    (r.format(), out)
}

#[test]
fn round_trips_both_containers_both_resolutions_every_link_type() {
    for container in [Container::Pcap, Container::PcapNg] {
        for resolution in [Resolution::Micro, Resolution::Nano] {
            for lt in LINK_TYPES {
                let format = WriteFormat {
                    container,
                    resolution,
                    link_type: lt,
                    snaplen: MAX_RECORD,
                };
                let recs = vec![
                    (TS, framed(lt, b"first")),
                    (TS + 1_001, framed(lt, b"second, odd length")),
                ];
                let (got_format, got) = read_all(&write_file(format, &recs));
                let expect_format = match container {
                    Container::Pcap => FileFormat::Pcap {
                        big_endian: false,
                        nanosecond: resolution == Resolution::Nano,
                        link_type: lt,
                        snaplen: MAX_RECORD,
                    },
                    Container::PcapNg => FileFormat::PcapNg,
                };
                assert_eq!(got_format, expect_format);
                let keep = |ts: u64| match resolution {
                    Resolution::Micro => ts / 1000 * 1000,
                    Resolution::Nano => ts,
                };
                let want: Vec<Read> = recs
                    .iter()
                    .map(|(ts, d)| (keep(*ts), lt, d.len() as u32, d.clone()))
                    .collect();
                assert_eq!(got, want, "{container:?} {resolution:?} link type {lt}");
                for (_, lt, _, data) in &got {
                    let u = parse_frame(*lt, data, true).unwrap();
                    assert_eq!((u.src, u.dst), (SRC, DST));
                }
            }
        }
    }
}

#[test]
fn the_simulator_format_is_nanosecond_ethernet_pcap() {
    let mut w = PcapWriter::new(Vec::new()).unwrap();
    w.write(1_500_000_123, &eth_frame(b"x")).unwrap();
    let bytes = w.finish().unwrap();
    assert_eq!(&bytes[..4], &0xa1b2_3c4du32.to_le_bytes());
    let (format, recs) = read_all(&bytes);
    assert_eq!(
        format,
        FileFormat::Pcap {
            big_endian: false,
            nanosecond: true,
            link_type: 1,
            snaplen: MAX_RECORD
        }
    );
    assert_eq!(recs[0].0, 1_500_000_123);
}

#[test]
fn records_longer_than_the_snap_length_are_cut_and_keep_their_length() {
    for container in [Container::Pcap, Container::PcapNg] {
        let format = WriteFormat {
            container,
            resolution: Resolution::Nano,
            link_type: link_type::ETHERNET,
            snaplen: 40,
        };
        let frame = eth_frame(&[7; 58]);
        let (_, got) = read_all(&write_file(format, &[(5, frame.clone())]));
        assert_eq!(
            got,
            vec![(5, 1, 100, frame[..40].to_vec())],
            "{container:?}"
        );
    }
}

#[test]
fn impossible_writes_are_refused() {
    let err = |format: WriteFormat| PcapWriter::with_format(Vec::new(), format).unwrap_err();
    let base = WriteFormat::SIMULATOR;
    let e = err(WriteFormat { snaplen: 0, ..base });
    assert_eq!(e.to_string(), "snap length 0 is not 1 to 262144");
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    let e = err(WriteFormat {
        snaplen: MAX_RECORD + 1,
        ..base
    });
    assert_eq!(e.to_string(), "snap length 262145 is not 1 to 262144");
    let e = err(WriteFormat {
        link_type: 0x1_0001,
        ..base
    });
    assert_eq!(e.to_string(), "link type 65537 does not fit 16 bits");
    let mut w = PcapWriter::new(Vec::new()).unwrap();
    let e = w.write_record(0, &[0; 10], 9).unwrap_err();
    assert_eq!(
        e.to_string(),
        "record of 10 bytes longer than its original length 9"
    );
    let e = w.write(u64::MAX, &[0; 10]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "timestamp 18446744073709551615 ns is past what classic pcap holds"
    );
    assert_eq!(w.records(), 0);
    // pcapng holds 64-bit timestamps.
    let mut w = PcapWriter::with_format(
        Vec::new(),
        WriteFormat {
            container: Container::PcapNg,
            ..base
        },
    )
    .unwrap();
    w.write(u64::MAX, &[0; 10]).unwrap();
    let (_, got) = read_all(&w.finish().unwrap());
    assert_eq!(got[0].0, u64::MAX);
}

/// pcap-file 2.0's classic packet parser refuses every record of a capture made with a
/// short snap length; this reader gives the record and its original length.
#[test]
fn pcap_file_refuses_snapped_records_and_this_reader_does_not() {
    let format = WriteFormat {
        snaplen: 40,
        ..WriteFormat::SIMULATOR
    };
    let bytes = write_file(format, &[(9, eth_frame(&[1; 100]))]);
    let (rest, parser) = pcap_file::pcap::PcapParser::new(&bytes).unwrap();
    let err = parser.next_packet(rest).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Invalid field value: PacketHeader orig_len > snap_len"
    );
    let (_, got) = read_all(&bytes);
    assert_eq!((got[0].2, got[0].3.len()), (142, 40));
}

/// pcap-file 2.0 takes an enhanced packet block's timestamp as nanoseconds whatever the
/// interface's `if_tsresol`; this reader scales it.
#[test]
fn pcap_file_ignores_if_tsresol_and_this_reader_does_not() {
    let format = WriteFormat {
        container: Container::PcapNg,
        resolution: Resolution::Micro,
        ..WriteFormat::SIMULATOR
    };
    let bytes = write_file(format, &[(TS, eth_frame(b"us"))]);
    let (mut rest, mut parser) = pcap_file::pcapng::PcapNgParser::new(&bytes).unwrap();
    let theirs = loop {
        let (r, block) = parser.next_block(rest).unwrap();
        rest = r;
        if let pcap_file::pcapng::Block::EnhancedPacket(epb) = block {
            break epb.timestamp;
        }
    };
    assert_eq!(
        theirs,
        Duration::from_nanos(TS / 1000),
        "microseconds taken as ns"
    );
    let (_, got) = read_all(&bytes);
    assert_eq!(got[0].0, TS / 1000 * 1000);
}

/// pcap-file 2.0 reads `if_tsoffset` unsigned; the format defines it signed, and a
/// negative offset moves timestamps back.
#[test]
fn a_negative_if_tsoffset_moves_timestamps_back() {
    use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
    use pcap_file::pcapng::blocks::interface_description::{
        InterfaceDescriptionBlock, InterfaceDescriptionOption,
    };
    use pcap_file::pcapng::blocks::section_header::SectionHeaderBlock;
    use pcap_file::pcapng::Block;
    type Le = byteorder_slice::LittleEndian;
    let mut bytes = Vec::new();
    let section = SectionHeaderBlock {
        endianness: pcap_file::Endianness::Little,
        ..SectionHeaderBlock::default()
    };
    Block::SectionHeader(section)
        .write_to::<Le, _>(&mut bytes)
        .unwrap();
    Block::InterfaceDescription(InterfaceDescriptionBlock {
        linktype: pcap_file::DataLink::ETHERNET,
        snaplen: 0,
        options: vec![
            InterfaceDescriptionOption::IfTsResol(9),
            InterfaceDescriptionOption::IfTsOffset((-5i64) as u64),
        ],
    })
    .write_to::<Le, _>(&mut bytes)
    .unwrap();
    let frame = eth_frame(b"offset");
    Block::EnhancedPacket(EnhancedPacketBlock {
        interface_id: 0,
        timestamp: Duration::from_nanos(TS),
        original_len: frame.len() as u32,
        data: frame.clone().into(),
        options: Vec::new(),
    })
    .write_to::<Le, _>(&mut bytes)
    .unwrap();
    let (_, got) = read_all(&bytes);
    assert_eq!(
        got,
        vec![(TS - 5_000_000_000, 1, frame.len() as u32, frame)]
    );
}

/// pcap-file 2.0 fails on an interface description block whose options end with the
/// block rather than with `opt_endofopt` (which the format allows), or whose reserved
/// field is not 0 (which readers must ignore); this reader reads both.
#[test]
fn pcap_file_refuses_valid_interface_blocks_and_this_reader_does_not() {
    let format = WriteFormat {
        container: Container::PcapNg,
        ..WriteFormat::SIMULATOR
    };
    let written = write_file(format, &[(TS, eth_frame(b"idb"))]);
    // The section header block is 28 bytes; then the interface block of 32: header,
    // link type, reserved, snap length, if_tsresol (8 bytes), opt_endofopt, trailer.
    let idb = 28;
    assert_eq!(&written[idb + 4..idb + 8], &32u32.to_le_bytes());
    assert_eq!(&written[idb + 24..idb + 28], &[0; 4], "opt_endofopt");
    let mut no_end = written[..idb + 24].to_vec();
    no_end.extend_from_slice(&written[idb + 28..]);
    no_end[idb + 4..idb + 8].copy_from_slice(&28u32.to_le_bytes());
    no_end[idb + 24..idb + 28].copy_from_slice(&28u32.to_le_bytes());
    let mut reserved = written.clone();
    reserved[idb + 10] = 1;
    for (name, bytes, error) in [
        ("no opt_endofopt", no_end, "Invalid option"),
        (
            "reserved 1",
            reserved,
            "InterfaceDescriptionBlock: reserved != 0",
        ),
    ] {
        let (mut rest, mut parser) = pcap_file::pcapng::PcapNgParser::new(&bytes).unwrap();
        let theirs = loop {
            match parser.next_block(rest) {
                Ok((r, _)) => rest = r,
                Err(e) => break e.to_string(),
            }
        };
        assert_eq!(theirs, format!("Invalid field value: {error}"), "{name}");
        let (_, got) = read_all(&bytes);
        assert_eq!(got[0].0, TS, "{name}: nanoseconds from if_tsresol");
    }
}

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data")
        .join(name)
}

/// The four real captures of the same spead2 traffic (see `tests/data/README.md`):
/// each holds 45 UDP datagrams, 41 to port 7148 and 4 to 7149, with the same payloads
/// in every file, and timestamps of when they were made.
#[test]
fn real_captures_of_every_container_and_link_type() {
    let files = [
        ("spead2_lo_eth.pcap", Some((false, 1)), 1),
        ("spead2_any_sll.pcap", Some((true, 113)), 113),
        ("spead2_any_sll2.pcap", Some((false, 276)), 276),
        ("spead2_lo.pcapng", None, 1),
    ];
    let mut payloads_of_first: Option<Vec<Vec<u8>>> = None;
    for (name, classic, lt) in files {
        let bytes = std::fs::read(data(name)).unwrap();
        let (format, recs) = read_all(&bytes);
        match (format, classic) {
            (
                FileFormat::Pcap {
                    nanosecond,
                    link_type,
                    ..
                },
                Some((ns, l)),
            ) => assert_eq!((nanosecond, link_type), (ns, l), "{name}"),
            (FileFormat::PcapNg, None) => {}
            other => panic!("{name}: {other:?}"),
        }
        let mut payloads = Vec::new();
        let mut ports = [0usize; 2];
        for (ts, l, orig, d) in &recs {
            assert_eq!(*l, lt, "{name}");
            assert_eq!(*orig as usize, d.len(), "{name}: nothing cut short");
            // Made in 2025 or 2026 (pcap-file alone puts the pcapng ones in 1970).
            assert!(
                (1_735_000_000..1_800_000_000).contains(&(ts / 1_000_000_000)),
                "{name}: {ts}"
            );
            let u = parse_frame(*l, d, true).unwrap();
            assert_eq!(*u.src.ip(), Ipv4Addr::LOCALHOST);
            ports[usize::from(u.dst.port() - 7148)] += 1;
            payloads.push(u.payload.to_vec());
            // Every record also becomes an Ethernet frame around the same IPv4 packet.
            let ip_start = d.len() - (u.payload.len() + 28);
            let Converted::Frame(f) =
                to_ethernet(*l, d, *orig, Mac([2, 0, 0, 0, 0, 9]), &|_| None).unwrap()
            else {
                panic!("{name}: skipped")
            };
            assert_eq!(&f[14..], &d[ip_start..], "{name}");
        }
        assert_eq!(ports, [41, 4], "{name}");
        match &payloads_of_first {
            None => payloads_of_first = Some(payloads),
            Some(first) => assert_eq!(first, &payloads, "{name}"),
        }
    }
}

#[test]
fn to_ethernet_addresses_and_refusals() {
    let resolve =
        |ip: Ipv4Addr| (ip == Ipv4Addr::new(10, 0, 0, 2)).then_some(Mac([2, 0, 0, 0, 0, 2]));
    let fallback = Mac([2, 0, 0, 0, 0, 9]);
    let conv = |lt: u32, d: &[u8]| to_ethernet(lt, d, d.len() as u32, fallback, &resolve);
    // The source MAC comes from a cooked header that has one; the group MAC from the
    // multicast destination.
    for lt in [link_type::LINUX_SLL, link_type::LINUX_SLL2] {
        let Ok(Converted::Frame(f)) = conv(lt, &framed(lt, b"p")) else {
            panic!("{lt}")
        };
        assert_eq!(f, eth_frame(b"p"), "link type {lt}");
    }
    let Ok(Converted::Frame(f)) = conv(link_type::RAW, &framed(link_type::RAW, b"p")) else {
        panic!()
    };
    assert_eq!(&f[..12], &[1, 0, 0x5e, 10, 0, 1, 2, 0, 0, 0, 0, 9]);
    // Unicast through `resolve`, broadcast to ff:ff:..., and an unknown host to 00:...
    let to = |dst: Ipv4Addr| {
        let f = udp_frame(SRC_MAC, SRC, [0; 6], SocketAddrV4::new(dst, 1), 64, b"u");
        match conv(link_type::IPV4, &f[14..]) {
            Ok(Converted::Frame(g)) => Mac([g[0], g[1], g[2], g[3], g[4], g[5]]),
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(to(Ipv4Addr::new(10, 0, 0, 2)), Mac([2, 0, 0, 0, 0, 2]));
    assert_eq!(to(Ipv4Addr::BROADCAST), crate::eth::BROADCAST);
    assert_eq!(to(Ipv4Addr::new(10, 0, 0, 3)), Mac::default());
    // Skipped: IPv6 in raw IP, ARP in a cooked capture, IPv6 on BSD loopback.
    let mut v6 = framed(link_type::RAW, b"p");
    v6[0] = 0x60;
    assert_eq!(conv(link_type::RAW, &v6), Ok(Converted::Skipped("IPv6")));
    let mut arp = framed(link_type::LINUX_SLL, b"p");
    arp[14..16].copy_from_slice(&0x0806u16.to_be_bytes());
    assert_eq!(
        conv(link_type::LINUX_SLL, &arp),
        Ok(Converted::Skipped("not IPv4"))
    );
    let mut null6 = framed(link_type::NULL, b"p");
    null6[0] = 30;
    assert_eq!(
        conv(link_type::NULL, &null6),
        Ok(Converted::Skipped("not IPv4"))
    );
    // Refused, with the reason.
    assert_eq!(
        conv(link_type::LINUX_SLL, &[0; 5]),
        Err("5 bytes, shorter than the 16-byte SLL header".into())
    );
    assert_eq!(
        conv(link_type::LINUX_SLL2, &[0x08, 0]),
        Err("2 bytes, shorter than the 20-byte SLL2 header".into())
    );
    assert_eq!(
        conv(link_type::RAW, &[0x45, 0, 0]),
        Err("IPv4 packet of 3 bytes, shorter than its header".into())
    );
    assert_eq!(
        conv(link_type::RAW, &[]),
        Err("IP record is empty or not IP".into())
    );
    assert_eq!(conv(147, &[0; 40]), Err("unsupported link type 147".into()));
    assert_eq!(
        conv(link_type::ETHERNET, &[0; 10]),
        Err("ethernet header truncated: need 14 bytes, have 10".into())
    );
    let f = eth_frame(b"snapped");
    assert_eq!(
        to_ethernet(
            link_type::ETHERNET,
            &f[..30],
            f.len() as u32,
            fallback,
            &resolve
        ),
        Err("truncated by the snap length (30 of 49 bytes captured)".into())
    );
}

/// etherparse 0.21 refuses the Linux SLL header of a real `tcpdump -i any` capture on
/// loopback (ARPHRD_LOOPBACK), so cooked headers are decoded here, not by it.
#[test]
fn etherparse_refuses_real_sll_captures_on_loopback() {
    let bytes = std::fs::read(data("spead2_any_sll.pcap")).unwrap();
    let mut r = PcapReader::new(&bytes[..]).unwrap();
    let rec = r.next_record().unwrap().unwrap();
    assert_eq!(u16::from_be_bytes([rec.data[2], rec.data[3]]), 772);
    let err = etherparse::LinuxSllHeaderSlice::from_slice(rec.data).unwrap_err();
    assert!(err.to_string().contains("772 (Loopback device)"), "{err}");
    assert!(parse_frame(rec.link_type, rec.data, true).is_ok());
}
