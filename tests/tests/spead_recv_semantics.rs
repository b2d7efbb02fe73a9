//! Heap assembly edge cases fed to spead2 4.5.1 and to us: the same heaps come out
//! (complete or not, contiguous or not, with the same items, lengths and ranges) and
//! the same counters. Each case is a rule where our receiver used to differ.

use std::process::Command;

use serde_json::{json, Value};
use spead::recv::{Stream, StreamConfig};
use spead::send::{heap_to_bytes, Heap};
use spead::wire::{encode_packet, Flavour};
use workspace_tests::spead2::{python, run_json_script};

const F: Flavour = Flavour::SPEAD_64_48;

/// A SPEAD-64-48 packet with the given specials, extra pointers and payload.
fn raw(cnt: u64, heap_len: Option<u64>, offset: u64, extra: &[u64], payload: &[u8]) -> Vec<u8> {
    let mut ptrs = vec![F.immediate(1, cnt)];
    ptrs.extend(heap_len.map(|l| F.immediate(2, l)));
    ptrs.push(F.immediate(3, offset));
    ptrs.push(F.immediate(4, payload.len() as u64));
    ptrs.extend_from_slice(extra);
    encode_packet(F, &ptrs, payload).unwrap()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn spead2(data: &[u8], max_heaps: usize, ooo: bool) -> Vec<Value> {
    let max_heaps = max_heaps.to_string();
    let ooo = if ooo { "1" } else { "0" };
    run_json_script("spead2_recv_semantics.py", &[&max_heaps, ooo], data)
}

fn ours(data: &[u8], max_heaps: usize, ooo: bool) -> Vec<Value> {
    let mut s = Stream::new(StreamConfig {
        max_heaps,
        allow_out_of_order: ooo,
        deliver_incomplete: true,
        ..StreamConfig::default()
    });
    s.add_buffer(data);
    s.stop();
    let mut out = Vec::new();
    while let Some(h) = s.pop_heap() {
        let items: Vec<Value> = h
            .items()
            .iter()
            .map(|i| json!([i.id, hex(i.bytes())]))
            .collect();
        let mut v = json!({"cnt": h.cnt, "contiguous": h.contiguous, "items": items});
        if !h.contiguous {
            v["heap_length"] = json!(h.heap_length.map_or(-1, |l| l as i64));
            v["received_length"] = json!(h.received_length);
            v["payload_ranges"] = json!(h
                .payload_ranges
                .iter()
                .map(|r| [r.0, r.1])
                .collect::<Vec<_>>());
        }
        out.push(v);
    }
    let st = s.stats();
    out.push(json!({"stats": {
        "heaps": st.heaps,
        "incomplete_heaps_evicted": st.incomplete_heaps_evicted,
        "incomplete_heaps_flushed": st.incomplete_heaps_flushed,
        "packets": st.packets,
        "single_packet_heaps": st.single_packet_heaps,
    }}));
    out
}

fn same(name: &str, data: &[u8], max_heaps: usize, ooo: bool) -> Vec<Value> {
    let theirs = spead2(data, max_heaps, ooo);
    let mine = ours(data, max_heaps, ooo);
    assert_eq!(mine, theirs, "{name}");
    mine
}

fn stop_heap(cnt: u64) -> Vec<u8> {
    let mut h = Heap::new(F);
    h.add_end();
    heap_to_bytes(&h, cnt, 1472).unwrap()
}

#[test]
fn edge_cases_assemble_as_in_spead2() {
    let payload: Vec<u8> = (0u8..64).collect();
    let cases: Vec<(&str, Vec<u8>, bool)> = vec![
        (
            "an item past HEAP_LENGTH keeps a fully received heap incomplete",
            [
                raw(
                    1,
                    Some(8),
                    0,
                    &[F.address(0x1000, 0), F.address(0x1001, 16)],
                    &payload[..8],
                ),
                stop_heap(99),
            ]
            .concat(),
            false,
        ),
        (
            "addressed IDs 1-4 are not items and do not end the item before them",
            [
                raw(
                    2,
                    Some(24),
                    0,
                    &[
                        F.address(0x1000, 0),
                        F.address(3, 8),
                        F.address(0x1001, 16),
                        F.address(0, 20),
                        F.immediate(0x1002, 77),
                    ],
                    &payload[..24],
                ),
                stop_heap(99),
            ]
            .concat(),
            false,
        ),
        (
            "a HEAP_LENGTH below an item address is refused",
            [
                raw(3, None, 0, &[F.address(0x1000, 40)], &payload[..8]),
                raw(3, Some(16), 8, &[], &payload[8..16]),
                stop_heap(99),
            ]
            .concat(),
            false,
        ),
        (
            "the first half of a sized heap is not contiguous",
            [
                raw(
                    4,
                    Some(64),
                    0,
                    &[F.immediate(0x1600, 5), F.address(0x1000, 0)],
                    &payload[..32],
                ),
                stop_heap(99),
            ]
            .concat(),
            false,
        ),
        (
            "an unsized heap is contiguous unless an item lies beyond its data",
            [
                raw(
                    5,
                    None,
                    0,
                    &[F.address(0x1000, 0), F.address(0x1001, 48)],
                    &payload[..32],
                ),
                raw(
                    6,
                    None,
                    0,
                    &[F.address(0x1000, 0), F.address(0x1001, 16)],
                    &payload[..32],
                ),
                stop_heap(99),
            ]
            .concat(),
            false,
        ),
        (
            "an incomplete stop heap is flushed",
            raw(
                7,
                Some(64),
                0,
                &[
                    F.immediate(6, 2),
                    F.immediate(0x1600, 1),
                    F.address(0x1000, 0),
                ],
                &payload[..32],
            ),
            false,
        ),
        (
            "out of order: ranges of an incomplete heap",
            [
                raw(8, Some(64), 48, &[], &payload[48..64]),
                raw(8, Some(64), 0, &[F.address(0x1000, 0)], &payload[..16]),
                raw(8, Some(64), 8, &[], &payload[8..24]),
                stop_heap(99),
            ]
            .concat(),
            true,
        ),
    ];
    for (name, data, ooo) in &cases {
        same(name, data, 4, *ooo);
    }
    // Spot checks that the cases say what their names say.
    let v = ours(&cases[0].1, 4, false);
    assert_eq!(v[0]["contiguous"], json!(false));
    let v = ours(&cases[1].1, 4, false);
    assert_eq!(v[0]["items"][0], json!([0x1000, hex(&payload[..16])]));
    let v = ours(&cases[5].1, 4, false);
    assert_eq!(
        v.last().unwrap()["stats"]["incomplete_heaps_flushed"],
        json!(1)
    );
}

#[test]
fn statistic_names_indices_and_order_are_spead2s() {
    let script = "import json, spead2, spead2.recv\n\
        cfg = spead2.recv.StreamConfig()\n\
        a = cfg.add_stat('my_counter')\n\
        b = cfg.add_stat('peak', spead2.recv.StreamStatConfig.Mode.MAXIMUM)\n\
        s = spead2.recv.Stream(spead2.ThreadPool(), cfg)\n\
        print(json.dumps([a, b, list(s.stats.keys())]))\n";
    let out = Command::new(python())
        .args(["-c", script])
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let theirs: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut cfg = StreamConfig::default();
    let a = cfg
        .add_stat("my_counter", spead::recv::StatMode::Counter)
        .unwrap();
    let b = cfg
        .add_stat("peak", spead::recv::StatMode::Maximum)
        .unwrap();
    let s = Stream::new(cfg);
    let stats = s.stats();
    let names: Vec<&str> = stats.iter().iter().map(|(n, _)| *n).take(11).collect();
    assert_eq!(json!([a, b, names]), theirs);
}
