//! Capture files: arbitrary bytes through netwire's pcap/pcapng reader, every record
//! through the link-layer conversion the replay uses and the frame parser, and the same
//! bytes through spead's pcap source (which filters SPEAD datagrams out of a capture).
#![no_main]

use libfuzzer_sys::fuzz_target;
use netwire::frame::{check_integrity, FrameView};
use netwire::pcap::{to_ethernet, Converted, PcapReader};

fuzz_target!(|data: &[u8]| {
    if let Ok(mut reader) = PcapReader::new(data) {
        // A corrupt file may announce huge records; the reader must refuse them, never
        // allocate them. At most 10,000 records per input.
        for _ in 0..10_000 {
            match reader.next_record() {
                Ok(Some(r)) => {
                    let converted =
                        to_ethernet(r.link_type, r.data, r.orig_len, netwire::eth::Mac([2, 0, 0, 0, 0, 1]), &|_| {
                            None
                        });
                    if let Ok(Converted::Frame(frame)) = converted {
                        let _ = FrameView::parse(&frame);
                        let _ = check_integrity(&frame);
                    }
                }
                Ok(None) | Err(_) => break,
            }
        }
    }
    if let Ok(mut source) = spead::pcap::PcapSource::new(data, spead::pcap::Filter::ANY) {
        for _ in 0..10_000 {
            match source.next_datagram() {
                Ok(Some(d)) => {
                    let _ = spead::wire::decode_packet(d.payload);
                }
                Ok(None) | Err(_) => break,
            }
        }
    }
});
