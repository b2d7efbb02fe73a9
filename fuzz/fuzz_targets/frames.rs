//! Frames from the wire: arbitrary bytes through the simulator's frame parser and NIC
//! integrity check, the RoCEv2 header parser on the UDP payload, the RAW receive path's
//! IPv4/UDP locator, and spead's verbs receive rules. Whatever parses must re-parse the
//! same way.
#![no_main]

use libfuzzer_sys::fuzz_target;
use netwire::frame::{check_integrity, FrameView};
use netwire::roce::parse_roce;

fuzz_target!(|data: &[u8]| {
    let _ = check_integrity(data);
    if let Ok(view) = FrameView::parse(data) {
        assert_eq!(FrameView::parse(data).ok(), Some(view));
        if let Some(range) = view.udp_payload() {
            let payload = &data[range];
            let _ = parse_roce(payload);
            let _ = spead::wire::decode_packet(payload);
        }
    }
    for link in [
        netwire::pcap::link_type::ETHERNET,
        netwire::pcap::link_type::LINUX_SLL,
        netwire::pcap::link_type::LINUX_SLL2,
        netwire::pcap::link_type::RAW,
    ] {
        let _ = netwire::pcap::locate(link, data, true);
    }
    let _ = spead::verbs::frame::parse(data, false);
    let _ = spead::verbs::frame::parse(data, true);
    // The same bytes as a RoCEv2 UDP payload.
    let _ = parse_roce(data);
});
