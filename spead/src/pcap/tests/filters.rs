//! Filters: parsing, matching, and the datagrams they select.

use super::*;

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
