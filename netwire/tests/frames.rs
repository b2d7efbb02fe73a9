//! Frame builders and parsers: round trips, checksums and the RoCEv2 ICRC.

use netwire::eth::Mac;
use netwire::frame::{check_integrity, offload_checksums, FrameView, Integrity, UdpFrameSpec, L4};
use netwire::roce::{
    self, build_roce_frame, icrc_ok, opcode, parse_roce, Aeth, AtomicEth, Bth, Deth, Reth,
    RoceHeaders, RoceRoute,
};
use std::net::Ipv4Addr;

fn spec() -> UdpFrameSpec {
    UdpFrameSpec::new(
        Mac([2, 0, 10, 0, 0, 1]),
        Mac([2, 0, 10, 0, 0, 2]),
        (Ipv4Addr::new(10, 0, 0, 1), 7000),
        (Ipv4Addr::new(10, 0, 0, 2), 8888),
    )
}

fn route() -> RoceRoute {
    RoceRoute {
        ip_id: 1,
        ..RoceRoute::new(
            (Mac([2, 0, 10, 0, 0, 1]), Ipv4Addr::new(10, 0, 0, 1)),
            (Mac([2, 0, 10, 0, 0, 2]), Ipv4Addr::new(10, 0, 0, 2)),
        )
    }
}

#[test]
fn udp_frame_round_trip_with_checksums() {
    let mut s = spec();
    s.udp_checksum = true;
    let payload: Vec<u8> = (0..1472u32).map(|i| i as u8).collect();
    let f = s.build(&payload);
    assert_eq!(f.len(), 14 + 20 + 8 + 1472);
    let v = FrameView::parse(&f).unwrap();
    let (ip, off) = v.ipv4.unwrap();
    assert_eq!(off, 14);
    assert_eq!(ip.src, Ipv4Addr::new(10, 0, 0, 1));
    assert_eq!(ip.total_len as usize, 20 + 8 + 1472);
    match v.l4 {
        L4::Udp { header, .. } => {
            assert_eq!(header.dst_port, 8888);
            assert_ne!(header.checksum, 0);
        }
        other => panic!("not UDP: {other:?}"),
    }
    assert_eq!(&f[v.udp_payload().unwrap()], &payload[..]);
    assert_eq!(check_integrity(&f), Integrity::Ok);
    // A payload bit flip is caught by the UDP checksum.
    let mut bad = f.clone();
    bad[100] ^= 0x10;
    assert_eq!(check_integrity(&bad), Integrity::BadUdpChecksum);
    // A header bit flip by the IP checksum.
    let mut bad = f.clone();
    bad[14 + 8] ^= 1; // TTL
    assert_eq!(check_integrity(&bad), Integrity::BadIpChecksum);
}

#[test]
fn ip_csum_offload_fills_checksums() {
    let mut f = spec().build(b"hello world");
    f[24] = 0; // clobber the IP checksum
    f[25] = 0;
    offload_checksums(&mut f);
    assert_eq!(check_integrity(&f), Integrity::Ok);
    assert_ne!(u16::from_be_bytes([f[40], f[41]]), 0, "UDP checksum filled");
}

#[test]
fn truncated_frames_are_errors_not_panics() {
    let f = spec().build(&[0u8; 100]);
    for cut in 0..f.len() {
        let _ = FrameView::parse(&f[..cut]);
        let _ = check_integrity(&f[..cut]);
        let _ = parse_roce(&f[..cut]);
    }
    assert!(FrameView::parse(&f[..20]).is_err());
}

#[test]
fn ud_send_frame_round_trip_and_icrc() {
    let h = RoceHeaders {
        bth: Bth {
            opcode: opcode::UD | opcode::SEND_ONLY_IMM,
            pkey: 0xffff,
            dest_qp: 0x12,
            psn: 7,
            solicited: true,
            ..Bth::default()
        },
        deth: Some(Deth {
            qkey: 0x1111_1111,
            src_qp: 0x34,
        }),
        imm: Some(0xdead_beef),
        ..RoceHeaders::default()
    };
    let payload = b"abcdefg"; // 7 bytes: pad 1
    let f = build_roce_frame(&route(), &h, payload);
    let v = FrameView::parse(&f).unwrap();
    assert!(v.is_roce());
    assert_eq!(check_integrity(&f), Integrity::Ok);
    let p = parse_roce(&f[v.udp_payload().unwrap()]).unwrap();
    assert_eq!(p.payload, payload);
    assert_eq!(p.headers.bth.pad_count, 1);
    assert_eq!(p.headers.deth, h.deth);
    assert_eq!(p.headers.imm, Some(0xdead_beef));
    assert!(p.headers.bth.solicited);
    assert_eq!(p.headers.bth.dest_qp, 0x12);
    // Every bit outside the masked fields is covered by the ICRC (or the IP checksum).
    let ip = &f[14..];
    assert!(icrc_ok(ip));
    for byte in 0..ip.len() {
        let masked = matches!(byte, 1 | 8 | 10 | 11 | 26 | 27 | 32);
        let mut c = ip.to_vec();
        c[byte] ^= 0x04;
        if !masked {
            assert!(!icrc_ok(&c), "flip at IP byte {byte} not caught by ICRC");
        } else {
            assert!(
                icrc_ok(&c),
                "masked IP byte {byte} must not change the ICRC"
            );
        }
    }
}

#[test]
fn rc_headers_round_trip() {
    let cases = [
        RoceHeaders {
            bth: Bth {
                opcode: opcode::WRITE_ONLY_IMM,
                dest_qp: 5,
                psn: 0xff_fffe,
                ack_req: true,
                pkey: 0xffff,
                ..Bth::default()
            },
            reth: Some(Reth {
                va: 0x1000_2000_3000,
                rkey: 0x77,
                dma_len: 9,
            }),
            imm: Some(42),
            ..RoceHeaders::default()
        },
        RoceHeaders {
            bth: Bth {
                opcode: opcode::ACKNOWLEDGE,
                dest_qp: 9,
                psn: 3,
                pkey: 0xffff,
                ..Bth::default()
            },
            aeth: Some(Aeth {
                syndrome: roce::syndrome::NAK_REMOTE_ACCESS_ERROR,
                msn: 77,
            }),
            ..RoceHeaders::default()
        },
        RoceHeaders {
            bth: Bth {
                opcode: opcode::COMPARE_SWAP,
                dest_qp: 9,
                psn: 3,
                pkey: 0xffff,
                ..Bth::default()
            },
            atomic_eth: Some(AtomicEth {
                va: 0x40,
                rkey: 1,
                swap_add: 5,
                compare: 6,
            }),
            ..RoceHeaders::default()
        },
        RoceHeaders {
            bth: Bth {
                opcode: opcode::ATOMIC_ACKNOWLEDGE,
                dest_qp: 9,
                psn: 3,
                pkey: 0xffff,
                ..Bth::default()
            },
            aeth: Some(Aeth {
                syndrome: 0x1f,
                msn: 1,
            }),
            atomic_ack: Some(0x0123_4567_89ab_cdef),
            ..RoceHeaders::default()
        },
        RoceHeaders {
            bth: Bth {
                opcode: opcode::READ_REQUEST,
                dest_qp: 9,
                psn: 3,
                pkey: 0xffff,
                ..Bth::default()
            },
            reth: Some(Reth {
                va: 8,
                rkey: 2,
                dma_len: 4096,
            }),
            ..RoceHeaders::default()
        },
    ];
    for h in cases {
        let payload: &[u8] = if roce::opcode_layout(h.bth.opcode).unwrap().payload {
            b"0123456789"
        } else {
            b""
        };
        let f = build_roce_frame(&route(), &h, payload);
        assert_eq!(check_integrity(&f), Integrity::Ok, "{h:?}");
        let v = FrameView::parse(&f).unwrap();
        let p = parse_roce(&f[v.udp_payload().unwrap()]).unwrap();
        let mut expect = h;
        expect.bth.pad_count = p.headers.bth.pad_count;
        assert_eq!(p.headers, expect);
        assert_eq!(p.payload, payload);
    }
}

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn icrc_matches_a_frame_captured_from_real_hardware() {
    // A RoCEv2 CNP captured on a ConnectX-4 Lx (as published in scapy's RoCE tests): its
    // last four bytes are the ICRC the NIC computed.
    let f = hex(
        "e41d2dab2bc2 7cfe90643b32 0800 45c2 003c 718c 4000 4011 9161 0a001101 0a001201
         0000 12b7 0028 0000 8100ffff 40000118 00000000 00000000 00000000 00000000 00000000
         82fd002a",
    );
    assert_eq!(f.len(), 74);
    let ip = &f[14..];
    assert!(icrc_ok(ip));
    assert_eq!(
        roce::compute_icrc(&ip[..ip.len() - 4]).to_le_bytes(),
        [0x82, 0xfd, 0x00, 0x2a]
    );
}

#[test]
fn the_icrc_starts_from_rxes_seed() {
    // rxe seeds its CRC with 0xdebb20e3, the register after the 8 bytes of ones that
    // stand for the LRH: an ICRC over nothing else is that register, inverted.
    assert_eq!(roce::compute_icrc(&[]), !0xdebb_20e3);
}

#[test]
fn built_frames_parse_and_verify_in_etherparse() {
    let mut s = spec();
    s.udp_checksum = true;
    s.tos = 0x04;
    s.ip_id = 77;
    for len in [0usize, 1, 7, 1472] {
        let payload: Vec<u8> = (0..len).map(|i| (i * 13) as u8).collect();
        let f = s.build(&payload);
        let p = etherparse::SlicedPacket::from_ethernet(&f).unwrap();
        let Some(etherparse::NetSlice::Ipv4(ip)) = &p.net else {
            panic!("not IPv4")
        };
        let iph = ip.header().to_header();
        assert_eq!(iph.header_checksum, iph.calc_header_checksum());
        assert_eq!((iph.identification, iph.ecn.value()), (77, 0));
        assert_eq!(iph.dscp.value(), 1);
        let Some(etherparse::TransportSlice::Udp(udp)) = &p.transport else {
            panic!("not UDP")
        };
        let udph = udp.to_header();
        assert_eq!(
            udph.checksum,
            udph.calc_checksum_ipv4(&iph, udp.payload()).unwrap(),
            "len {len}"
        );
        assert_eq!(udp.payload(), &payload[..]);
    }
    // A RoCEv2 frame: etherparse sees UDP to 4791 with the IB packet as its payload.
    let h = RoceHeaders {
        bth: Bth {
            opcode: opcode::RC | opcode::SEND_ONLY,
            pkey: 0xffff,
            dest_qp: 0x11,
            psn: 5,
            ..Bth::default()
        },
        ..RoceHeaders::default()
    };
    let f = build_roce_frame(&route(), &h, b"hello");
    let p = etherparse::SlicedPacket::from_ethernet(&f).unwrap();
    let Some(etherparse::TransportSlice::Udp(udp)) = &p.transport else {
        panic!("not UDP")
    };
    assert_eq!(udp.destination_port(), roce::ROCEV2_UDP_PORT);
    let parsed = parse_roce(udp.payload()).unwrap();
    assert_eq!(parsed.payload, b"hello");
    assert_eq!(parsed.headers.bth.pad_count, 3);
}

/// RoCE v1 (IBA annex A16): EtherType 0x8915, the GRH (an IPv6-shaped header whose next
/// header is 0x1b, its payload length counting the BTH through the ICRC), the IB
/// transport, the ICRC over the GRH with traffic class, flow label and hop limit masked
/// (as RoCEv2 masks the IPv6 header) and the BTH with resv8a masked.
#[test]
fn roce_v1_frames_carry_a_grh_and_an_icrc_over_it() {
    use netwire::roce::{compute_icrc, RoceIps};
    let (a, b) = (Mac([2, 0, 10, 0, 0, 1]), Mac([2, 0, 10, 0, 0, 2]));
    let (ga, gb) = (
        netwire::ipv6::link_local_of_mac(a.0),
        netwire::ipv6::link_local_of_mac(b.0),
    );
    let route = RoceRoute {
        ips: RoceIps::V1(ga, gb),
        ttl: 1,
        tos: 0x28,
        ..route()
    };
    let h = RoceHeaders {
        bth: Bth {
            opcode: opcode::UD | opcode::SEND_ONLY,
            dest_qp: 0x11,
            psn: 5,
            ..Bth::default()
        },
        deth: Some(Deth {
            qkey: 0x1111_1111,
            src_qp: 0x12,
        }),
        ..RoceHeaders::default()
    };
    let f = build_roce_frame(&route, &h, b"hello v1");
    assert_eq!(f[12..14], [0x89, 0x15]);
    assert_eq!(f.len(), 14 + 40 + 12 + 8 + 8 + 4);
    let view = FrameView::parse(&f).unwrap();
    assert!(view.is_roce() && !view.is_roce_v2());
    let (grh, off) = view.ipv6.unwrap();
    assert_eq!(off, 14);
    assert_eq!((grh.src, grh.dst), (ga, gb));
    assert_eq!(
        (grh.next_header, grh.hop_limit, grh.traffic_class),
        (0x1b, 1, 0x28)
    );
    assert_eq!(usize::from(grh.payload_len), 12 + 8 + 8 + 4);
    let ib = view.roce_packet().unwrap();
    assert_eq!(ib, 54..f.len());
    let pkt = parse_roce(&f[ib]).unwrap();
    assert_eq!(
        (pkt.headers.bth.dest_qp, pkt.payload),
        (0x11, &b"hello v1"[..])
    );
    let datagram = &f[view.ip_range().unwrap()];
    assert!(icrc_ok(datagram));
    assert_eq!(check_integrity(&f), Integrity::Ok);
    // The ICRC by the rule: ones for the LRH, the GRH and BTH masked, the rest as is.
    let mut masked = datagram[..datagram.len() - 4].to_vec();
    masked[0] |= 0x0f;
    masked[1..4].fill(0xff);
    masked[7] = 0xff;
    masked[40 + 4] = 0xff;
    let mut crc = crc32fast::Hasher::new();
    crc.update(&[0xff; 8]);
    crc.update(&masked);
    assert_eq!(
        compute_icrc(&datagram[..datagram.len() - 4]),
        crc.finalize()
    );
    // A router may change the hop limit: the ICRC does not see it. The opcode it does.
    let mut hop = f.clone();
    hop[14 + 7] = 9;
    assert_eq!(check_integrity(&hop), Integrity::Ok);
    let mut op = f.clone();
    op[54] ^= 1;
    assert_eq!(check_integrity(&op), Integrity::BadIcrc);
}
