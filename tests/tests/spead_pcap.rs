//! `spead-recv pcap:...` against spead2: the captures in `tests/data` (real spead2
//! traffic on loopback, made by `tests/py/capture_fixtures.py`) give exactly the heaps
//! that spead2's own pcap reader (`add_udp_pcap_file_reader`) assembles from them.
//!
//! Our side runs the code `spead-recv` runs for a `pcap:` source: a [`PcapSource`]
//! pumped into a [`Stream`] on a [`ThreadedReceiver`], with the tool's default
//! configuration, and heaps turned into JSON by the function behind `--json`.

use std::path::Path;

use spead::json::{heap_json, HeapJson};
use spead::pcap::{FileFormat, Filter, PcapSource, PcapStats};
use spead::recv::{MemoryPool, Stats, Stream, StreamConfig};
use spead::transport::ThreadedReceiver;
use workspace_tests::data;
use workspace_tests::spead2::{run_tool, summarize, summarize_tool_output, HeapSummary};

const ETH: &str = "spead2_lo_eth.pcap";
const SLL: &str = "spead2_any_sll.pcap";
const SLL2: &str = "spead2_any_sll2.pcap";
const PCAPNG: &str = "spead2_lo.pcapng";

/// The stream configuration `spead-recv` uses by default.
fn tool_config() -> StreamConfig {
    StreamConfig {
        max_heaps: 4,
        substreams: 1,
        allow_out_of_order: false,
        stop_on_stop_item: true,
        deliver_incomplete: false,
        max_heap_size: 256 << 20,
        pool: MemoryPool::new(16),
        ..StreamConfig::default()
    }
}

/// What `spead-recv pcap:PATH?FILTER --json` prints: heaps, stream counters, and the
/// pcap reader's counters (on stderr in the tool).
fn ours(path: &Path, filter: &str) -> (Vec<HeapJson>, Stats, PcapStats) {
    let filter: Filter = filter.parse().unwrap();
    let path = path.to_path_buf();
    let (tx, rx) = std::sync::mpsc::channel();
    let receiver = ThreadedReceiver::spawn(tool_config(), 4, move || {
        let mut source = PcapSource::open(&path, filter)?;
        Ok(move |stream: &mut Stream| -> std::io::Result<bool> {
            if source.is_done() {
                return Ok(false);
            }
            source.pump(stream, 64)?;
            if source.is_done() {
                tx.send(*source.stats()).unwrap();
            }
            Ok(true)
        })
    });
    let mut heaps = Vec::new();
    while let Some(h) = receiver.next_heap() {
        heaps.push(heap_json(&h));
    }
    let stats = receiver.join().unwrap();
    (heaps, stats, rx.recv().unwrap())
}

/// spead2's heaps from the same capture, with a BPF filter ("" for none).
fn spead2(path: &Path, bpf: &str) -> (Vec<HeapSummary>, serde_json::Value, Vec<String>) {
    let out = run_tool(&["recv-pcap", path.to_str().unwrap(), bpf, "4"], b"");
    let (heaps, stats) = summarize_tool_output(&out);
    let descriptors = out
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v.get("cnt").is_some())
        .map(|v| descriptor_names_spead2(&v))
        .collect();
    (heaps, stats.expect("spead2 counters"), descriptors)
}

fn descriptor_names_spead2(v: &serde_json::Value) -> String {
    v["descriptors"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|d| {
                    format!(
                        "{:#x}={}",
                        d["id"].as_u64().unwrap(),
                        d["name"].as_str().unwrap()
                    )
                })
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default()
}

fn descriptor_names(h: &HeapJson) -> String {
    h.descriptors
        .iter()
        .map(|d| format!("{:#x}={}", d.id, d.name))
        .collect::<Vec<_>>()
        .join(",")
}

/// Compares our result on `file` with spead2's: heaps (cnt, every item's id, bytes and
/// immediate value), descriptors, and the counters both keep.
fn assert_same_as_spead2(file: &str, ours_filter: &str, bpf: &str) -> Vec<HeapJson> {
    let path = data(file);
    let (heaps, stats, pcap) = ours(&path, ours_filter);
    let (theirs, their_stats, their_descriptors) = spead2(&path, bpf);
    let what = format!("{file} (filter {ours_filter} / {bpf:?})");
    let mine = summarize(&heaps);
    assert_eq!(
        mine.iter().map(|h| h.0).collect::<Vec<_>>(),
        theirs.iter().map(|h| h.0).collect::<Vec<_>>(),
        "{what}: heap cnts"
    );
    for (a, b) in mine.iter().zip(&theirs) {
        assert!(
            a == b,
            "{what}: heap {} differs\nours:   {a:?}\nspead2: {b:?}",
            a.0
        );
    }
    let my_descriptors: Vec<String> = heaps.iter().map(descriptor_names).collect();
    assert_eq!(my_descriptors, their_descriptors, "{what}: descriptors");
    for (name, value) in [
        ("heaps", stats.heaps),
        ("packets", stats.packets),
        ("single_packet_heaps", stats.single_packet_heaps),
        ("incomplete_heaps_evicted", stats.incomplete_heaps_evicted),
        ("incomplete_heaps_flushed", stats.incomplete_heaps_flushed),
    ] {
        assert_eq!(value, their_stats[name].as_u64().unwrap(), "{what}: {name}");
    }
    assert_eq!(pcap.dropped(), 0, "{what}: {pcap}");
    assert!(heaps.iter().all(|h| h.complete));
    heaps
}

#[test]
fn ethernet_capture_gives_spead2_heaps() {
    // No filter: the side stream (port 7149) ends first, and its stop heap stops
    // both receivers before the main stream's last heap.
    let heaps = assert_same_as_spead2(ETH, "*:*", "");
    let cnts: Vec<u64> = heaps.iter().map(|h| h.cnt).collect();
    assert_eq!(cnts, [1, 1001, 2, 1002, 3, 1003, 4]);
}

#[test]
fn linux_sll_capture_gives_spead2_heaps() {
    assert_same_as_spead2(SLL, "*:*", "");
    assert_same_as_spead2(SLL, "*:7148", "udp dst port 7148");
}

#[test]
fn pcapng_capture_gives_spead2_heaps() {
    assert_same_as_spead2(PCAPNG, "*:*", "");
    assert_same_as_spead2(PCAPNG, "127.0.0.1:7149", "udp dst port 7149");
}

#[test]
fn filters_select_streams_as_spead2_filters_do() {
    let main = assert_same_as_spead2(ETH, "*:7148", "udp dst port 7148");
    let cnts: Vec<u64> = main.iter().map(|h| h.cnt).collect();
    assert_eq!(
        cnts,
        [1, 2, 3, 4, 5],
        "the whole main stream, up to its stop heap"
    );
    // What the fixture holds: descriptors in the first heap, immediates (u48 and u16)
    // and arrays of several packets in every heap.
    assert_eq!(main[0].descriptors.len(), 5);
    assert!(main[1..].iter().all(|h| h.descriptors.is_empty()));
    for (i, h) in main.iter().enumerate() {
        let items = summarize(std::slice::from_ref(h)).remove(0).1;
        let imm: Vec<(u64, Option<u64>)> = items
            .iter()
            .filter(|it| it.2.is_some())
            .map(|it| (it.0, it.2))
            .collect();
        let i = i as u64;
        assert_eq!(
            imm,
            [
                (0x1601, Some(100 + i)),
                (0x1600, Some(1_000_000 + i * 1024))
            ]
        );
        let sizes: Vec<(u64, usize)> = items
            .iter()
            .filter(|it| it.2.is_none())
            .map(|it| (it.0, it.1.len() / 2))
            .collect();
        assert_eq!(sizes, [(0x1800, 2048), (0x1801, 8192), (0x1802, 128)]);
    }
    let side = assert_same_as_spead2(
        ETH,
        "127.0.0.1:7149",
        "dst host 127.0.0.1 and udp dst port 7149",
    );
    let cnts: Vec<u64> = side.iter().map(|h| h.cnt).collect();
    assert_eq!(cnts, [1001, 1002, 1003]);
    // A filter matching nothing.
    let (heaps, stats, pcap) = ours(&data(ETH), "127.0.0.2:*");
    assert!(heaps.is_empty());
    assert_eq!(stats.packets, 0);
    assert_eq!(pcap.filtered, pcap.records);
}

#[test]
fn linux_sll2_capture_gives_the_same_heaps() {
    // spead2 4.5.1 reads only Ethernet and SLL captures, so compare with its result
    // on the Ethernet capture of the same (deterministic) traffic.
    let (theirs, _, _) = spead2(&data(ETH), "udp dst port 7148");
    let (heaps, stats, pcap) = ours(&data(SLL2), "*:7148");
    assert_eq!(summarize(&heaps), theirs);
    assert_eq!(stats.heaps, 5);
    assert_eq!(pcap.dropped(), 0);
}

#[test]
fn every_capture_holds_the_same_heaps() {
    let reference = summarize(&ours(&data(ETH), "*:7148").0);
    for file in [SLL, SLL2, PCAPNG] {
        assert_eq!(
            summarize(&ours(&data(file), "*:7148").0),
            reference,
            "{file}"
        );
    }
}

#[test]
fn capture_files_are_what_the_script_says() {
    for (file, link, nanos) in [
        (ETH, 1u32, false),
        (SLL, 113, true),
        (SLL2, 276, false),
        (PCAPNG, 1, false),
    ] {
        let path = data(file);
        assert!(
            std::fs::metadata(&path).unwrap().len() < 200_000,
            "{file} is small"
        );
        let mut source = PcapSource::open(&path, Filter::ANY).unwrap();
        match source.reader().format() {
            FileFormat::Pcap {
                link_type,
                nanosecond,
                ..
            } => assert_eq!((link_type, nanosecond), (link, nanos), "{file}"),
            FileFormat::PcapNg => assert_eq!(file, PCAPNG),
        }
        let mut last = 0;
        let mut n = 0;
        while let Some(d) = source.next_datagram().unwrap() {
            assert!(
                d.ts_ns >= last && d.ts_ns > 1_600_000_000_000_000_000,
                "{file}"
            );
            last = d.ts_ns;
            assert_eq!(d.src.ip(), &std::net::Ipv4Addr::LOCALHOST);
            assert!([7148, 7149].contains(&d.dst.port()));
            n += 1;
        }
        // 5 main heaps of 8 packets (the first 9: descriptors), a stop heap, and the
        // side stream's 4 single-packet heaps.
        assert_eq!(n, 45, "{file}");
        assert_eq!(source.stats().datagrams, source.stats().records);
    }
}

#[test]
fn a_capture_cut_short_still_gives_the_heaps_before_the_cut() {
    let bytes = std::fs::read(data(ETH)).unwrap();
    let path = workspace_tests::spead2::temp_path("cut.pcap");
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let mut stream = Stream::new(tool_config());
    let mut source = PcapSource::open(&path, "*:7148".parse().unwrap()).unwrap();
    let err = source.run(&mut stream).unwrap_err();
    std::fs::remove_file(&path).unwrap();
    assert!(err.to_string().contains("truncated at byte"), "{err}");
    assert!(err.offset() < bytes.len() as u64 / 2);
    stream.stop();
    let mut cnts = Vec::new();
    while let Some(h) = stream.pop_heap() {
        cnts.push(h.cnt);
    }
    assert!(!cnts.is_empty() && cnts.len() < 5, "{cnts:?}");
    assert_eq!(cnts, (1..=cnts.len() as u64).collect::<Vec<_>>());
}
