//! Frames of every link type: VLAN tags, IP options, padding, drop causes, truncation.

use super::*;

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
