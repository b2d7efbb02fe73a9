//! The `spead-send` and `spead-recv` tools end to end: files, JSON capture and replay,
//! and UDP on 127.0.0.1.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Command, Stdio};

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("spead-tools-{}-{name}", std::process::id()))
}

fn run(bin: &str, args: &[&str]) -> String {
    let out = Command::new(bin).args(args).output().expect("spawn");
    assert!(
        out.status.success(),
        "{bin} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf8")
}

fn heaps(jsonl: &str) -> (Vec<serde_json::Value>, serde_json::Value) {
    let mut heaps = Vec::new();
    let mut stats = serde_json::Value::Null;
    for line in jsonl.lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("json");
        match v.get("stats") {
            Some(s) => stats = s.clone(),
            None => heaps.push(v),
        }
    }
    (heaps, stats)
}

const SEND: &str = env!("CARGO_BIN_EXE_spead-send");
const RECV: &str = env!("CARGO_BIN_EXE_spead-recv");

#[test]
fn file_capture_and_replay() {
    let (a, b, cap) = (tmp("a.spead"), tmp("b.spead"), tmp("cap.jsonl"));
    let a_arg = format!("file:{}", a.display());
    let b_arg = format!("file:{}", b.display());
    run(
        SEND,
        &[
            "--heaps",
            "5",
            "--heap-size",
            "20000",
            "--items",
            "3",
            "--addr-bits",
            "48",
            &a_arg,
        ],
    );
    let captured = run(RECV, &["--json", &a_arg]);
    let (first, stats) = heaps(&captured);
    assert_eq!(first.len(), 5);
    assert_eq!(stats["heaps"], 5);
    assert_eq!(stats["packets_malformed"], 0);
    let desc = first[0]["descriptors"].as_array().expect("descriptors");
    assert_eq!(desc.len(), 3);
    assert_eq!(desc[0]["name"], "item0");
    assert_eq!(desc[0]["dtype"], ">u1");
    assert_eq!(desc[0]["shape"][0], 6666);
    assert!(first.iter().all(|h| h["complete"] == true));
    assert_eq!(first[1]["items"].as_array().map(Vec::len), Some(3));
    std::fs::write(&cap, &captured).unwrap();
    run(SEND, &["--json", cap.to_str().unwrap(), &b_arg]);
    let (second, _) = heaps(&run(RECV, &["--json", &b_arg]));
    assert_eq!(first, second);
    for p in [a, b, cap] {
        std::fs::remove_file(p).unwrap();
    }
}

#[test]
fn udp_loopback_between_the_tools() {
    let mut recv = Command::new(RECV)
        .args(["--json", "udp:127.0.0.1:0", "--buffer", "16777216"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn recv");
    let mut err = BufReader::new(recv.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let addr = line.trim().rsplit("udp:").next().unwrap().to_string();
    run(
        SEND,
        &[
            "--heaps",
            "20",
            "--heap-size",
            "100000",
            "--rate",
            "0.2",
            &format!("udp:{addr}"),
        ],
    );
    let mut out = String::new();
    recv.stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    assert!(recv.wait().unwrap().success());
    let (got, stats) = heaps(&out);
    assert_eq!(got.len(), 20);
    assert!(got.iter().all(|h| h["complete"] == true));
    assert_eq!(stats["incomplete_heaps_evicted"], 0);
}

#[test]
fn max_heaps_is_heaps_in_flight_and_never_interleaves_heaps() {
    // spead2_send's --max-heaps bounds the heaps queued for sending; heaps still go
    // out one after another. So 1 and 8 give the same bytes, and a receiver with a
    // single live-heap slot assembles every heap.
    let outs: Vec<Vec<u8>> = ["1", "8"]
        .iter()
        .map(|m| {
            let path = tmp(&format!("inflight-{m}.spead"));
            let arg = format!("file:{}", path.display());
            run(
                SEND,
                &[
                    "--heaps",
                    "12",
                    "--heap-size",
                    "20000",
                    "--items",
                    "2",
                    "--max-heaps",
                    m,
                    &arg,
                ],
            );
            let (got, stats) = heaps(&run(RECV, &["--json", "--max-heaps", "1", &arg]));
            assert_eq!(got.len(), 12, "--max-heaps {m}");
            assert!(got.iter().all(|h| h["complete"] == true), "--max-heaps {m}");
            assert_eq!(stats["incomplete_heaps_evicted"], 0, "--max-heaps {m}");
            let bytes = std::fs::read(&path).unwrap();
            std::fs::remove_file(&path).unwrap();
            bytes
        })
        .collect();
    assert!(
        outs[0] == outs[1],
        "--max-heaps 1 and 8 sent different bytes"
    );
}

#[test]
fn substreams_each_get_descriptors_and_a_stop_heap_of_their_own() {
    // As spead2_send: heap i on substream i % 2, descriptors in the first heap of
    // each substream, then one stop heap per substream with distinct counters.
    let path = tmp("substreams.spead");
    let arg = format!("file:{}", path.display());
    run(
        SEND,
        &[
            "--heaps",
            "4",
            "--heap-size",
            "3000",
            "--items",
            "2",
            "--substreams",
            "2",
            &arg,
        ],
    );
    let (got, _) = heaps(&run(RECV, &["--json", "--ignore-stop", &arg]));
    std::fs::remove_file(&path).unwrap();
    let cnts: Vec<u64> = got.iter().map(|h| h["cnt"].as_u64().unwrap()).collect();
    assert_eq!(cnts, [1, 2, 3, 4, 5, 6]);
    let descriptors: Vec<usize> = got
        .iter()
        .map(|h| h["descriptors"].as_array().unwrap().len())
        .collect();
    assert_eq!(descriptors, [2, 2, 0, 0, 0, 0]);
    for stop in &got[4..] {
        assert_eq!(stop["items"][0]["id"], 6);
        assert_eq!(stop["items"][0]["immediate"], 2);
    }
}
