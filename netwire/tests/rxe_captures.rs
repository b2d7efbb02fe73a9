//! netwire against real rxe frames: `tests/data/rxe_rocev2_ipv{4,6}.pcap`, RC and UD
//! pingpongs between two Soft-RoCE devices in the VM (`tests/data/README.md` says how
//! they were made). Every frame parses, carries the ICRC we compute, and is rebuilt byte
//! for byte by `build_roce_frame` from its own addresses, headers and payload.

use std::io::BufReader;
use std::net::IpAddr;

use netwire::eth::EthHeader;
use netwire::frame::{check_integrity, FrameView, Integrity, L4};
use netwire::pcap::PcapReader;
use netwire::roce::{build_roce_frame, icrc_ok, parse_roce, RoceIps, RoceRoute};

fn frames(file: &str) -> Vec<Vec<u8>> {
    let path = format!("{}/tests/data/{file}", env!("CARGO_MANIFEST_DIR"));
    let f = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut r = PcapReader::new(BufReader::new(f)).expect("a pcap");
    let mut out = Vec::new();
    while let Some(rec) = r.next_record().expect("a good record") {
        out.push(rec.data.to_vec());
    }
    out
}

/// The route that rebuilds `frame`: its MACs, addresses, UDP source port and IP fields.
fn route_of(frame: &[u8], view: &FrameView) -> RoceRoute {
    let eth = EthHeader::parse(frame).expect("ethernet");
    let L4::Udp { header, .. } = view.l4 else {
        panic!("not UDP")
    };
    let (ips, tos, ttl, ip_id) = match (view.ipv4, view.ipv6) {
        (Some((ip, _)), _) => (RoceIps::V4(ip.src, ip.dst), ip.tos, ip.ttl, ip.id),
        (None, Some((ip, _))) => (
            RoceIps::V6(ip.src, ip.dst),
            ip.traffic_class,
            ip.hop_limit,
            0,
        ),
        (None, None) => panic!("not IP"),
    };
    RoceRoute {
        src_mac: eth.src,
        dst_mac: eth.dst,
        ips,
        src_port: header.src_port,
        tos,
        ttl,
        ip_id,
    }
}

fn check(file: &str, v6: bool) {
    let frames = frames(file);
    assert_eq!(frames.len(), 18, "{file}");
    let mut opcodes = Vec::new();
    for (i, f) in frames.iter().enumerate() {
        let view = FrameView::parse(f).unwrap_or_else(|e| panic!("{file} frame {i}: {e}"));
        assert!(view.is_roce(), "{file} frame {i}");
        assert_eq!(view.ipv6.is_some(), v6, "{file} frame {i}");
        let ip = &f[view.ip_range().expect("IP")];
        assert!(
            icrc_ok(ip),
            "{file} frame {i}: the ICRC rxe sent is not ours"
        );
        assert_eq!(check_integrity(f), Integrity::Ok, "{file} frame {i}");
        if let Some((h, _)) = view.ipv6 {
            // rxe_net.c prepare_ipv6_hdr: flow label 0; the kernel's hop limit (the AV
            // asked for 1); UDP checksum 0 (prepare_udp_hdr).
            assert_eq!((h.traffic_class, h.flow_label, h.hop_limit), (0, 0, 64));
            assert_eq!(h.next_header, 17);
            assert!(matches!(h.src, a if a.segments()[0] == 0xfe80));
        }
        let L4::Udp { header, .. } = view.l4 else {
            unreachable!()
        };
        assert_eq!(header.checksum, 0, "{file} frame {i}");
        let pkt = parse_roce(&f[view.udp_payload().expect("UDP")]).expect("RoCE");
        opcodes.push(pkt.headers.bth.opcode);
        let rebuilt = build_roce_frame(&route_of(f, &view), &pkt.headers, pkt.payload);
        assert_eq!(&rebuilt, f, "{file} frame {i} rebuilt");
        // One flipped payload bit: the ICRC no longer matches.
        let mut bad = f.clone();
        let last_payload = f.len() - 5;
        bad[last_payload] ^= 1;
        assert!(
            !icrc_ok(&bad[view.ip_range().expect("IP")]),
            "{file} frame {i}"
        );
        assert_eq!(
            check_integrity(&bad),
            Integrity::BadIcrc,
            "{file} frame {i}"
        );
    }
    // Three RC SEND_ONLY/ACK exchanges each way, then three UD SEND_ONLYs each way.
    let mut want = [0x04, 0x11].repeat(6);
    want.extend([0x64; 6]);
    assert_eq!(opcodes, want, "{file}");
}

#[test]
fn rxe_rocev2_over_ipv6_frames_parse_verify_and_rebuild() {
    check("rxe_rocev2_ipv6.pcap", true);
}

#[test]
fn rxe_rocev2_over_ipv4_frames_parse_verify_and_rebuild() {
    check("rxe_rocev2_ipv4.pcap", false);
}

#[test]
fn the_link_local_addresses_are_the_macs_eui64() {
    for f in frames("rxe_rocev2_ipv6.pcap") {
        let view = FrameView::parse(&f).expect("a frame");
        let (ip, _) = view.ipv6.expect("IPv6");
        assert_eq!(
            netwire::ipv6::link_local_mac(&ip.src),
            Some(view.eth.src.0),
            "source {}",
            IpAddr::V6(ip.src)
        );
        assert_eq!(netwire::ipv6::link_local_mac(&ip.dst), Some(view.eth.dst.0));
    }
}
