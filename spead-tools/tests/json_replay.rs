//! `spead-recv --json` then `spead-send --json` reproduces spead2-made streams byte for
//! byte: items are listed in the order their pointers came on the wire (descriptor and
//! empty items included), and a replay sends them in that order.
//!
//! The streams: spead2 4.5.1's packetizer (through `tests/py/spead2_tool.py`) on varied
//! generated heaps, both flavours, several packet sizes; and the real spead2 UDP
//! traffic recorded in `tests/data`.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use workspace_tests::spead2::{spead2_bytes, stream_specs, temp_path};
use workspace_tests::spead_verbs::capture_datagrams;

const SEND: &str = env!("CARGO_BIN_EXE_spead-send");
const RECV: &str = env!("CARGO_BIN_EXE_spead-recv");

/// `spead-recv --json SOURCE`'s output.
fn recv_json(source: &str) -> Vec<u8> {
    let out = Command::new(RECV)
        .args(["--json", source])
        .output()
        .expect("run spead-recv");
    assert!(
        out.status.success(),
        "spead-recv {source}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// The packets `spead-send --json - --no-stop --packet N file:OUT` writes for `json`.
fn replay(json: &[u8], packet: usize, out: &Path) -> Vec<u8> {
    let mut child = Command::new(SEND)
        .args(["--json", "-", "--no-stop", "--packet", &packet.to_string()])
        .arg(format!("file:{}", out.display()))
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run spead-send");
    child.stdin.take().unwrap().write_all(json).unwrap();
    let done = child.wait_with_output().unwrap();
    assert!(
        done.status.success(),
        "spead-send: {}",
        String::from_utf8_lossy(&done.stderr)
    );
    let bytes = std::fs::read(out).unwrap();
    std::fs::remove_file(out).unwrap();
    bytes
}

#[test]
fn spead2_packetizer_streams_come_back_byte_equal() {
    let mut streams = 0;
    let mut heaps = 0;
    for seed in 1..=8u64 {
        for packet in [1472usize, 9000, 256] {
            // Heaps whose every packet repeats all pointers are left out: the JSON form
            // does not say a heap was sent that way (a replay sends pointers once).
            let specs: Vec<_> = stream_specs(seed, 24, packet)
                .into_iter()
                .filter(|s| !s.repeat_pointers)
                .collect();
            let packets = spead2_bytes(&specs);
            // The stream ends with spead2's stop heap; the replay is sent without one.
            let (stop, data) = packets.split_last().unwrap();
            assert!(!stop.is_empty());
            let input = temp_path(&format!("json-replay-{seed}-{packet}.spead"));
            std::fs::write(&input, packets.concat()).unwrap();
            let json = recv_json(&format!("file:{}", input.display()));
            std::fs::remove_file(&input).unwrap();
            let lines = json
                .split(|&b| b == b'\n')
                .filter(|l| !l.is_empty())
                .count();
            assert_eq!(lines, data.len() + 1, "a line per heap, then the counters");
            let out = temp_path(&format!("json-replay-{seed}-{packet}.out"));
            let again = replay(&json, packet, &out);
            assert!(
                again == data.concat(),
                "seed {seed}, packet {packet}: the replay differs from spead2's bytes"
            );
            streams += 1;
            heaps += data.len();
        }
    }
    assert_eq!(streams, 24);
    println!("{streams} spead2-made streams, {heaps} heaps, byte-equal after a JSON round trip");
}

#[test]
fn recorded_spead2_udp_traffic_comes_back_byte_equal() {
    let data = workspace_tests::data("spead2_lo_eth.pcap");
    // The main stream (port 7148): heaps 1-5 and a stop heap, 1472-byte packets.
    let datagrams: Vec<Vec<u8>> = capture_datagrams(&data)
        .into_iter()
        .filter(|(dst, _)| dst.port() == 7148)
        .map(|(_, payload)| payload)
        .collect();
    let (_stop, heaps) = datagrams.split_last().unwrap();
    let json = recv_json(&format!("pcap:{}?*:7148", data.display()));
    let out = temp_path("json-replay-pcap.out");
    let again = replay(&json, 1472, &out);
    assert_eq!(again.len(), heaps.concat().len());
    assert!(
        again == heaps.concat(),
        "the replay differs from spead2's datagrams"
    );
}
