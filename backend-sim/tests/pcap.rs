//! pcap capture with virtual timestamps, and replay from Ethernet, SLL, SLL2 and raw-IPv4
//! recordings; malformed files give errors, never panics.

use backend_sim::frame::eth::Mac;
use backend_sim::frame::UdpFrameSpec;
use backend_sim::pcap::{self, PcapError, PcapFile, PcapWriter};
use backend_sim::{
    CaptureFilter, Direction, Fabric, FabricError, LinkFaults, Output, PortId, ReplayOptions,
};
use netwire::pcap::PcapError as ReadError;
use proptest::prelude::*;
use std::net::Ipv4Addr;

fn ip(n: u8) -> Ipv4Addr {
    Ipv4Addr::new(10, 0, 0, n)
}

fn fabric() -> Fabric {
    let mut f = Fabric::new(7);
    for i in 1..=3 {
        f.add_host_with_port(format!("h{i}"), ip(i)).unwrap();
    }
    f
}

fn group() -> Ipv4Addr {
    Ipv4Addr::new(239, 10, 0, 1)
}

fn mframe(seq: u32) -> Vec<u8> {
    let s = UdpFrameSpec::new(
        Mac([2, 0, 10, 0, 0, 1]),
        Mac::for_ipv4_multicast(group()),
        (ip(1), 5000),
        (group(), 7148),
    );
    s.build(&seq.to_be_bytes())
}

fn frames_at(f: &mut Fabric, port: u32) -> Vec<(u64, Vec<u8>)> {
    f.drain()
        .into_iter()
        .filter_map(|(t, o)| match o {
            Output::Frame { port: p, frame, .. } if p.0 == port => Some((t, frame)),
            _ => None,
        })
        .collect()
}

#[test]
fn capture_all_records_every_transmitted_frame_with_virtual_time() {
    let mut f = fabric();
    f.join_group(PortId(1), group()).unwrap();
    f.capture_to_memory(CaptureFilter::All).unwrap();
    for i in 0..5u32 {
        f.schedule_timer(u64::from(i) * 1_000_000_007, u64::from(i));
    }
    let mut sent = Vec::new();
    while let Some(o) = f.step() {
        if let Output::Timer { token } = o {
            let fr = mframe(token as u32);
            sent.push((f.now(), fr.clone()));
            f.transmit(PortId(0), fr).unwrap();
        }
    }
    let bytes = f.finish_capture().unwrap().unwrap();
    let p = PcapFile::parse(&bytes).unwrap();
    assert_eq!(p.link_type, pcap::LINKTYPE_ETHERNET);
    let got: Vec<(u64, Vec<u8>)> = p.records.into_iter().map(|r| (r.ts_ns, r.data)).collect();
    assert_eq!(got, sent);
    assert_eq!(got[4].0, 4_000_000_028, "nanosecond timestamps");
}

#[test]
fn port_capture_shows_what_the_port_sends_and_receives() {
    let mut f = fabric();
    f.join_group(PortId(1), group()).unwrap();
    f.capture_to_memory(CaptureFilter::Port(PortId(1))).unwrap();
    f.transmit(PortId(0), mframe(1)).unwrap();
    let s = UdpFrameSpec::new(
        Mac([2, 0, 10, 0, 0, 3]),
        Mac([2, 0, 10, 0, 0, 1]),
        (ip(3), 1),
        (ip(1), 2),
    );
    f.transmit(PortId(2), s.build(b"not for port 1")).unwrap();
    let _ = f.drain();
    let p = PcapFile::parse(&f.finish_capture().unwrap().unwrap()).unwrap();
    assert_eq!(p.records.len(), 1);
    assert_eq!(p.records[0].data, mframe(1));
}

#[test]
fn capture_to_file_and_replay_file() {
    let dir = std::env::temp_dir().join(format!("backend-sim-pcap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("cap.pcap");
    let mut f = fabric();
    f.capture_to_file(&path, CaptureFilter::All).unwrap();
    for i in 0..3 {
        f.transmit(PortId(0), mframe(i)).unwrap();
    }
    assert_eq!(f.finish_capture().unwrap(), None);
    let mut g = fabric();
    g.join_group(PortId(2), group()).unwrap();
    let s = g
        .replay_file(PortId(0), &path, ReplayOptions::default())
        .unwrap();
    assert_eq!(s.frames, 3);
    assert_eq!(frames_at(&mut g, 2).len(), 3);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Writes a pcap of `link_type` with microsecond stamps, big-endian when `big`.
fn handmade(link_type: u32, big: bool, recs: &[(u64, Vec<u8>)]) -> Vec<u8> {
    let w32 = |v: u32| {
        if big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let w16 = |v: u16| {
        if big {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let mut out = Vec::new();
    out.extend_from_slice(&w32(0xa1b2_c3d4));
    out.extend_from_slice(&w16(2));
    out.extend_from_slice(&w16(4));
    out.extend_from_slice(&[0; 8]);
    out.extend_from_slice(&w32(65535));
    out.extend_from_slice(&w32(link_type));
    for (ts_us, d) in recs {
        out.extend_from_slice(&w32((ts_us / 1_000_000) as u32));
        out.extend_from_slice(&w32((ts_us % 1_000_000) as u32));
        out.extend_from_slice(&w32(d.len() as u32));
        out.extend_from_slice(&w32(d.len() as u32));
        out.extend_from_slice(d);
    }
    out
}

fn replay_and_collect(link_type: u32, big: bool, recs: &[(u64, Vec<u8>)]) -> Vec<(u64, Vec<u8>)> {
    let mut f = fabric();
    f.join_group(PortId(1), group()).unwrap();
    let file = PcapFile::parse(&handmade(link_type, big, recs)).unwrap();
    let s = f
        .replay(
            PortId(2),
            &file,
            ReplayOptions {
                start_at: Some(1_000),
            },
        )
        .unwrap();
    assert_eq!(s.frames, recs.len());
    assert_eq!(s.first_at, 1_000);
    frames_at(&mut f, 1)
}

#[test]
fn replay_of_ethernet_sll_sll2_and_raw_ip_keeps_recorded_spacing() {
    let eth: Vec<(u64, Vec<u8>)> = (0..4u32)
        .map(|i| (10_000_000 + u64::from(i) * 250, mframe(i)))
        .collect();
    let got = replay_and_collect(pcap::LINKTYPE_ETHERNET, false, &eth);
    assert_eq!(
        got.iter().map(|g| g.1.clone()).collect::<Vec<_>>(),
        eth.iter().map(|e| e.1.clone()).collect::<Vec<_>>()
    );
    let t0 = got[0].0;
    assert_eq!(
        got.iter().map(|g| g.0 - t0).collect::<Vec<_>>(),
        vec![0, 250_000, 500_000, 750_000]
    );

    let ipv4 = |e: &Vec<u8>| e[14..].to_vec();
    // Linux cooked v1: packet type, ARPHRD_ETHER, addr len 6, addr (8), protocol.
    let sll: Vec<(u64, Vec<u8>)> = eth
        .iter()
        .map(|(t, e)| {
            let mut d = vec![0, 4, 0, 1, 0, 6, 2, 0, 10, 0, 0, 9, 0, 0, 0x08, 0x00];
            d.extend(ipv4(e));
            (*t, d)
        })
        .collect();
    // Linux cooked v2: protocol, reserved, ifindex, ARPHRD_ETHER, packet type, addr len, addr.
    let sll2: Vec<(u64, Vec<u8>)> = eth
        .iter()
        .map(|(t, e)| {
            let mut d = vec![
                0x08, 0x00, 0, 0, 0, 0, 0, 2, 0, 1, 4, 6, 2, 0, 10, 0, 0, 9, 0, 0,
            ];
            d.extend(ipv4(e));
            (*t, d)
        })
        .collect();
    let raw: Vec<(u64, Vec<u8>)> = eth.iter().map(|(t, e)| (*t, ipv4(e))).collect();
    for (lt, recs, big) in [
        (pcap::LINKTYPE_LINUX_SLL, &sll, true),
        (pcap::LINKTYPE_LINUX_SLL2, &sll2, false),
        (pcap::LINKTYPE_RAW, &raw, false),
        (pcap::LINKTYPE_IPV4, &raw, true),
    ] {
        let got = replay_and_collect(lt, big, recs);
        assert_eq!(got.len(), 4, "link type {lt}");
        for (g, e) in got.iter().zip(&eth) {
            assert_eq!(
                &g.1[..6],
                &e.1[..6],
                "group MAC derived from the IP destination"
            );
            assert_eq!(&g.1[12..], &e.1[12..], "IP packet unchanged");
        }
        if lt == pcap::LINKTYPE_LINUX_SLL {
            assert_eq!(
                &got[0].1[6..12],
                &[2, 0, 10, 0, 0, 9],
                "source MAC from the SLL header"
            );
        }
    }
}

#[test]
fn replay_with_faults_on_top() {
    let mut f = fabric();
    f.join_group(PortId(1), group()).unwrap();
    f.set_link_faults(PortId(1), Direction::FromSwitch, LinkFaults::loss(1.0))
        .unwrap();
    let recs: Vec<(u64, Vec<u8>)> = (0..4u32).map(|i| (u64::from(i), mframe(i))).collect();
    let file = PcapFile::parse(&handmade(1, false, &recs)).unwrap();
    f.replay(PortId(0), &file, ReplayOptions::default())
        .unwrap();
    assert!(frames_at(&mut f, 1).is_empty());
    assert_eq!(f.stats().dropped_loss, 4);
}

#[test]
fn malformed_pcaps_give_clear_errors() {
    let good = handmade(1, false, &[(0, mframe(0)), (1, mframe(1))]);
    let read_err = |bytes: &[u8]| match PcapFile::parse(bytes) {
        Err(PcapError::Read(e)) => e,
        other => panic!("{other:?}"),
    };
    assert!(matches!(
        read_err(&good[..10]),
        ReadError::Truncated {
            offset: 0,
            needed: 24,
            got: 10,
            ..
        }
    ));
    // pcapng is read, and a section header cut short is named as such.
    let e = read_err(&[0x0a, 0x0d, 0x0d, 0x0a, 0x1c, 0, 0, 0]);
    assert!(
        matches!(
            e,
            ReadError::Truncated {
                what: "section header block",
                ..
            }
        ),
        "{e}"
    );
    let mut bad = good.clone();
    bad[0] = 0;
    assert!(matches!(read_err(&bad), ReadError::BadMagic { .. }));
    assert!(matches!(
        PcapFile::parse(&handmade(105, false, &[])),
        Err(PcapError::UnsupportedLinkType(105))
    ));
    let second = 24 + 16 + mframe(0).len();
    let e = read_err(&good[..good.len() - 3]);
    assert_eq!(e.offset(), second as u64, "{e}");
    assert!(
        e.to_string()
            .contains(&format!("truncated at byte {second}")),
        "{e}"
    );
    assert!(matches!(
        read_err(&good[..24 + 10]),
        ReadError::Truncated {
            offset: 24,
            needed: 16,
            got: 10,
            ..
        }
    ));
    let mut huge = good.clone();
    huge[24 + 8..24 + 12].copy_from_slice(&0x7fff_ffffu32.to_le_bytes());
    assert!(matches!(
        read_err(&huge),
        ReadError::Corrupt { offset: 24, .. }
    ));
    // A raw-IP record too short to be IPv4, and an SLL record shorter than its header.
    let mut f = fabric();
    let p = PcapFile::parse(&handmade(
        pcap::LINKTYPE_RAW,
        false,
        &[(0, vec![0x45, 0, 0])],
    ))
    .unwrap();
    assert!(matches!(
        f.replay(PortId(0), &p, ReplayOptions::default()),
        Err(FabricError::Pcap(PcapError::BadRecord { .. }))
    ));
    let p = PcapFile::parse(&handmade(
        pcap::LINKTYPE_LINUX_SLL,
        false,
        &[(0, vec![0; 5])],
    ))
    .unwrap();
    assert!(f.replay(PortId(0), &p, ReplayOptions::default()).is_err());
    assert_eq!(f.pending_events(), 0, "a bad file schedules nothing");
    assert!(f
        .replay_file(PortId(0), "/nonexistent/x.pcap", ReplayOptions::default())
        .is_err());
}

#[test]
fn writer_output_parses_back() {
    let mut w = PcapWriter::new(Vec::new()).unwrap();
    w.write(1_500_000_123, &mframe(3)).unwrap();
    let bytes = w.finish().unwrap();
    let p = PcapFile::parse(&bytes).unwrap();
    assert_eq!(p.records[0].ts_ns, 1_500_000_123);
    assert_eq!(p.records[0].data, mframe(3));
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400), lt in prop_oneof![Just(1u32), Just(113), Just(276), Just(101), Just(228)]) {
        let mut file = handmade(lt, false, &[]);
        file.extend_from_slice(&bytes);
        if let Ok(p) = PcapFile::parse(&file) {
            let mut f = fabric();
            let _ = f.replay(PortId(0), &p, ReplayOptions::default());
            let _ = f.drain();
        }
        let _ = PcapFile::parse(&bytes);
    }
}
