//! Bad input, as a new user or a damaged recording gives it, for every tool: a missing,
//! empty, garbage, truncated or unreadable file, an out-of-range number, a bad endpoint
//! or a bad interface. Each row says what the tool must do: its exit status (2 for a
//! usage error, 1 for a failure at run time) and the words of its error, which names
//! what was wrong. No row may panic, and a usage error is one line. Then: what was
//! received before a damaged file's fault is still written out.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use cli_oneline::refusals::Refusals;
use workspace_tests::spead_verbs::{capture_datagrams, synthetic_capture};

const SEND: &str = env!("CARGO_BIN_EXE_spead-send");
const RECV: &str = env!("CARGO_BIN_EXE_spead-recv");
const CAPTURE: &str = env!("CARGO_BIN_EXE_spead-capture");

/// A directory of bad (and a few good) input files for one test.
struct Files {
    dir: PathBuf,
}

impl Files {
    fn new(name: &str) -> Files {
        let dir = std::env::temp_dir().join(format!("spead-bad-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let files = Files { dir };
        // A good capture and heap stream, and damaged copies.
        synthetic_capture(&files.path("good.pcap"));
        let pcap = std::fs::read(files.path("good.pcap")).unwrap();
        std::fs::write(files.path("cut.pcap"), &pcap[..pcap.len() - 100]).unwrap();
        let out = Command::new(SEND)
            .args(["--heaps", "3", "--heap-size", "5000", "--packet", "1472"])
            .arg(format!("file:{}", files.path("good.spead").display()))
            .output()
            .unwrap();
        assert!(out.status.success());
        let spead = std::fs::read(files.path("good.spead")).unwrap();
        std::fs::write(files.path("cut.spead"), &spead[..spead.len() - 700]).unwrap();
        std::fs::write(files.path("empty"), b"").unwrap();
        std::fs::write(files.path("garbage"), [0xa5u8; 300]).unwrap();
        std::fs::create_dir_all(files.path("a-directory")).unwrap();
        let heap = r#"{"cnt":1,"flavour":48,"items":[{"id":4096,"hex":"00010203"}]}"#;
        let json = |name: &str, text: &str| std::fs::write(files.path(name), text).unwrap();
        json("good.json", &format!("{heap}\n"));
        json("cut.json", &format!("{heap}\n{}", &heap[..30]));
        json("not-json.json", &format!("{heap}\nthis is not JSON\n"));
        json("no-items.json", "{\"cnt\":1,\"flavour\":48}\n");
        json(
            "bad-hex.json",
            r#"{"cnt":1,"items":[{"id":4096,"hex":"0g"}]}"#,
        );
        json("bad-flavour.json", r#"{"cnt":1,"flavour":44,"items":[]}"#);
        json("stats-only.json", "{\"stats\":{\"heaps\":0}}\n");
        std::fs::write(files.path("binary.json"), [0xffu8, 0xfe, b'\n']).unwrap();
        files
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn arg(&self, prefix: &str, name: &str) -> String {
        format!("{prefix}{}", self.path(name).display())
    }
}

impl Drop for Files {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn run(tool: &str, args: &[String]) -> Output {
    Command::new(tool)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn name(tool: &str) -> &str {
    Path::new(tool).file_name().unwrap().to_str().unwrap()
}

#[test]
fn every_tool_refuses_bad_input_with_a_clear_error() {
    let f = Files::new("table");
    let out = f.arg("file:", "out.spead");
    let pcap_out = f.path("out.pcap").display().to_string();
    let s = |v: &[&str]| v.iter().map(|a| (*a).to_string()).collect::<Vec<String>>();
    // (tool, arguments, exit status, words of the error)
    let rows: Vec<(&str, Vec<String>, i32, String)> = vec![
        // spead-send: numbers.
        (SEND, s(&["--packet", "7", &out]), 2, "invalid value '7' for '--packet <PACKET>': 7 bytes is too small: a SPEAD packet needs at least 56".into()),
        (SEND, s(&["--packet", "70000", &out]), 2, "70000 bytes is more than a UDP datagram holds (65507)".into()),
        (SEND, s(&["--packet", "many", &out]), 2, "many is not a packet size in bytes".into()),
        (SEND, s(&["--max-heaps", "0", &out]), 2, "invalid value '0' for '--max-heaps <MAX_HEAPS>': 0 is not in 1..=65536".into()),
        (SEND, s(&["--items", "0", &out]), 2, "invalid value '0' for '--items <ITEMS>'".into()),
        (SEND, s(&["--heap-size", "0", &out]), 2, "invalid value '0' for '--heap-size <HEAP_SIZE>'".into()),
        (SEND, s(&["--items", "9", "--heap-size", "8", &out]), 2, "--items 9 is more than --heap-size 8".into()),
        (SEND, s(&["--burst", "0", &out]), 2, "invalid value '0' for '--burst <BURST>'".into()),
        (SEND, s(&["--buffer", "0", &out]), 2, "invalid value '0' for '--buffer <BUFFER>'".into()),
        (SEND, s(&["--substreams", "0", &out]), 2, "invalid value '0' for '--substreams <SUBSTREAMS>'".into()),
        (SEND, s(&["--rate", "-1", &out]), 2, "-1 must be a finite number >= 0".into()),
        (SEND, s(&["--rate", "inf", &out]), 2, "inf must be a finite number >= 0".into()),
        (SEND, s(&["--ttl", "256", &out]), 2, "invalid value '256' for '--ttl <TTL>'".into()),
        (SEND, s(&["--addr-bits", "44", &out]), 2, "invalid value '44' for '--addr-bits <ADDR_BITS>' [possible values: 40, 48]".into()),
        (SEND, s(&["--addr-bits", "40", "--heap-cnt-start", "1099511627775", &out]), 2, "goes past the largest heap counter of 40-bit addresses".into()),
        // spead-send: destinations and interfaces.
        (SEND, s(&[]), 2, "the following required arguments were not provided: <DESTS>...".into()),
        (SEND, s(&["nowhere"]), 2, "endpoint \"nowhere\" must start with udp:, tcp: or file:".into()),
        (SEND, s(&["udp:127.0.0.1"]), 2, "cannot resolve \"127.0.0.1\"".into()),
        (SEND, s(&["file:"]), 2, "no path after file:".into()),
        (SEND, s(&["udp:127.0.0.1:9", &out]), 2, "give several udp: destinations, several ibv: destinations, or one tcp: or file: destination".into()),
        (SEND, s(&["udp:127.0.0.1:9", "ibv:239.1.1.1:9"]), 2, "give several udp: destinations, several ibv: destinations".into()),
        (SEND, s(&["ibv:239.1.1.1"]), 2, "239.1.1.1: not an IPv4 GROUP:PORT".into()),
        (SEND, s(&["ibv:[::1]:7148"]), 2, "IPv6 endpoints are not supported".into()),
        (SEND, s(&["--ibv-interface", "eth0", "ibv:239.1.1.1:9"]), 2, "invalid value 'eth0' for '--ibv-interface <IBV_INTERFACE>'".into()),
        (SEND, s(&["--backend", "sim", "ibv:239.1.1.1:9"]), 2, "--backend sim: a simulated sender has no network outside its process".into()),
        (SEND, s(&["--ibv-mode", "rc", "ibv:239.1.1.1:9"]), 2, "invalid value 'rc' for '--ibv-mode <IBV_MODE>'".into()),
        (SEND, s(&["ibv:239.1.1.1:9"]), 1, "the hw backend is not compiled in".into()),
        (SEND, s(&["--bind", "eth0", "udp:239.1.1.1:9"]), 2, "invalid value 'eth0' for '--bind <BIND>'".into()),
        (SEND, s(&["--bind", "192.0.2.1", "udp:239.1.1.1:9"]), 1, "udp:239.1.1.1:9 (--bind 192.0.2.1): Cannot assign requested address".into()),
        (SEND, s(&["tcp:127.0.0.1:1"]), 1, "tcp:127.0.0.1:1: Connection refused".into()),
        (SEND, s(&["--heaps", "1", &f.arg("file:", "no-such-dir/out")]), 1, format!("{}: No such file or directory", f.arg("file:", "no-such-dir/out"))),
        // spead-send: JSON heap files.
        (SEND, s(&["--json", &f.arg("", "missing.json"), &out]), 1, format!("{}: No such file or directory", f.arg("", "missing.json"))),
        (SEND, s(&["--json", &f.arg("", "empty"), &out]), 1, format!("{}: no heaps", f.arg("", "empty"))),
        (SEND, s(&["--json", &f.arg("", "stats-only.json"), &out]), 1, format!("{}: no heaps", f.arg("", "stats-only.json"))),
        (SEND, s(&["--json", &f.arg("", "a-directory"), &out]), 1, format!("{}: Is a directory", f.arg("", "a-directory"))),
        (SEND, s(&["--json", &f.arg("", "garbage"), &out]), 1, format!("{}:1:1: expected value", f.arg("", "garbage"))),
        (SEND, s(&["--json", &f.arg("", "binary.json"), &out]), 1, format!("{}:1:1: expected value", f.arg("", "binary.json"))),
        (SEND, s(&["--json", &f.arg("", "not-json.json"), &out]), 1, format!("{}:2:2: expected ident", f.arg("", "not-json.json"))),
        (SEND, s(&["--json", &f.arg("", "cut.json"), &out]), 1, format!("{}:2:30: EOF while parsing", f.arg("", "cut.json"))),
        (SEND, s(&["--json", &f.arg("", "no-items.json"), &out]), 1, format!("{}:1:22: missing field `items`", f.arg("", "no-items.json"))),
        (SEND, s(&["--json", &f.arg("", "bad-hex.json"), &out]), 1, format!("{}:1: item 0x1000: bad hex", f.arg("", "bad-hex.json"))),
        (SEND, s(&["--json", &f.arg("", "bad-flavour.json"), &out]), 1, format!("{}:1: unsupported flavour 44", f.arg("", "bad-flavour.json"))),
        // spead-recv: numbers.
        (RECV, s(&["--max-heaps", "0", &f.arg("file:", "good.spead")]), 2, "invalid value '0' for '--max-heaps <MAX_HEAPS>': 0 is not in 1..=65536".into()),
        (RECV, s(&["--packet", "0", &f.arg("file:", "good.spead")]), 2, "invalid value '0' for '--packet <PACKET>': 0 is not in 40..=65536".into()),
        (RECV, s(&["--substreams", "0", &f.arg("file:", "good.spead")]), 2, "invalid value '0' for '--substreams <SUBSTREAMS>'".into()),
        (RECV, s(&["--heaps", "0", &f.arg("file:", "good.spead")]), 2, "invalid value '0' for '--heaps <HEAPS>'".into()),
        (RECV, s(&["--ring-heaps", "0", &f.arg("file:", "good.spead")]), 2, "invalid value '0' for '--ring-heaps <RING_HEAPS>'".into()),
        (RECV, s(&["--max-heap-size", "0", &f.arg("file:", "good.spead")]), 2, "invalid value '0' for '--max-heap-size <MAX_HEAP_SIZE>'".into()),
        (RECV, s(&["--buffer", "-5", &f.arg("file:", "good.spead")]), 2, "unexpected argument '-5' found".into()),
        (RECV, s(&["--replay", &f.arg("", "good.pcap"), "--loss", "2"]), 2, "2 is not a probability (0 to 1)".into()),
        (RECV, s(&["--replay", &f.arg("", "good.pcap"), "--dup", "x"]), 2, "x is not a number".into()),
        (RECV, s(&["--replay", &f.arg("", "good.pcap"), "--ibv-max-poll", "0"]), 2, "invalid value '0' for '--ibv-max-poll <IBV_MAX_POLL>'".into()),
        // spead-recv: sources and interfaces.
        (RECV, s(&[]), 2, "the following required arguments were not provided: <SOURCES>...".into()),
        (RECV, s(&["nowhere"]), 2, "endpoint \"nowhere\" must start with udp:, tcp: or file:".into()),
        (RECV, s(&["pcap:"]), 2, "pcap source needs a path".into()),
        (RECV, s(&[&f.arg("pcap:", "good.pcap?1.2.3:7148")]), 2, "filter address \"1.2.3\" is neither an IPv4 address nor *".into()),
        (RECV, s(&["ibv:239.1.1.1"]), 2, "239.1.1.1: not an IPv4 GROUP:PORT".into()),
        (RECV, s(&["ibv:[::1]:7148"]), 2, "IPv6 endpoints are not supported".into()),
        (RECV, s(&["--replay", &f.arg("", "good.pcap"), "--ibv-interface", "::1"]), 2, "interface address ::1 is not an IPv4 address".into()),
        (RECV, s(&["--replay", &f.arg("", "good.pcap"), "--ibv-interface", "eth0"]), 2, "interface \"eth0\" is not an IPv4 address".into()),
        (RECV, s(&["--replay", &f.arg("", "good.pcap"), "--ibv-interface", "10.9.9.9"]), 1, "no RDMA device has interface address 10.9.9.9".into()),
        (RECV, s(&["--replay", &f.arg("", "good.pcap"), "ibv:10.0.0.1:7148"]), 1, "no network interface has address 10.0.0.1 (the device's interface is 10.77.0.2)".into()),
        (RECV, s(&["--replay", &f.arg("", "good.pcap"), "--ibv-mode", "ud", "ibv:10.0.0.1:7148"]), 1, "endpoint 10.0.0.1:7148 is not an IPv4 multicast address".into()),
        (RECV, s(&["--replay", &f.arg("", "good.pcap"), "--backend", "hw"]), 1, "--replay runs on the simulator: drop --backend hw".into()),
        (RECV, s(&["ibv:239.1.1.1:7148", "--backend", "sim"]), 1, "give --replay".into()),
        // The tools are built without the `hw` feature here.
        (RECV, s(&["ibv:239.1.1.1:7148"]), 1, "the hw backend is not compiled in".into()),
        (RECV, s(&["udp:192.0.2.1:7148"]), 1, "udp:192.0.2.1:7148: Cannot assign requested address".into()),
        (RECV, s(&["--bind", "192.0.2.1", "udp:239.1.1.1:7148"]), 1, "udp:239.1.1.1:7148 (--bind 192.0.2.1): No such device".into()),
        // spead-recv: files.
        (RECV, s(&[&f.arg("file:", "missing")]), 1, format!("{}: No such file or directory", f.arg("file:", "missing"))),
        (RECV, s(&[&f.arg("file:", "empty")]), 1, format!("{}: empty file", f.arg("file:", "empty"))),
        (RECV, s(&[&f.arg("file:", "garbage")]), 1, format!("{}: no SPEAD packet at byte 0", f.arg("file:", "garbage"))),
        (RECV, s(&[&f.arg("file:", "cut.spead")]), 1, format!("{}: truncated: the stream ends inside the packet at byte", f.arg("file:", "cut.spead"))),
        (RECV, s(&[&f.arg("file:", "a-directory")]), 1, format!("{}: Is a directory", f.arg("file:", "a-directory"))),
        (RECV, s(&[&f.arg("pcap:", "missing")]), 1, format!("{}: I/O error at byte 0: No such file or directory", f.arg("pcap:", "missing"))),
        (RECV, s(&[&f.arg("pcap:", "empty")]), 1, format!("{}: file truncated at byte 0", f.arg("pcap:", "empty"))),
        (RECV, s(&[&f.arg("pcap:", "garbage")]), 1, format!("{}: not a pcap or pcapng file", f.arg("pcap:", "garbage"))),
        (RECV, s(&[&f.arg("pcap:", "cut.pcap")]), 1, format!("{}: file truncated at byte", f.arg("pcap:", "cut.pcap"))),
        (RECV, s(&[&f.arg("pcap:", "a-directory")]), 1, f.arg("pcap:", "a-directory")),
        (RECV, s(&["--replay", &f.arg("", "missing")]), 1, format!("{}: I/O error at byte 0: No such file or directory", f.arg("", "missing"))),
        (RECV, s(&["--replay", &f.arg("", "empty")]), 1, format!("{}: file truncated at byte 0", f.arg("", "empty"))),
        (RECV, s(&["--replay", &f.arg("", "garbage")]), 1, format!("{}: not a pcap or pcapng file", f.arg("", "garbage"))),
        (RECV, s(&["--replay", &f.arg("", "cut.pcap")]), 1, format!("{}: file truncated at byte", f.arg("", "cut.pcap"))),
        (RECV, s(&["--replay", &f.arg("", "a-directory")]), 1, f.arg("", "a-directory")),
        // spead-capture: numbers, endpoints, interfaces.
        (CAPTURE, s(&[&pcap_out, "--replay", &f.arg("", "good.pcap"), "--count", "0"]), 2, "invalid value '0' for '--count <COUNT>'".into()),
        (CAPTURE, s(&[&pcap_out, "--replay", &f.arg("", "good.pcap"), "--duration", "0"]), 2, "0 must be a finite number > 0".into()),
        (CAPTURE, s(&[&pcap_out, "--replay", &f.arg("", "good.pcap"), "--max-size", "0"]), 2, "invalid value '0' for '--max-size <MAX_SIZE>'".into()),
        (CAPTURE, s(&[&pcap_out, "--replay", &f.arg("", "good.pcap"), "--reorder", "1.5"]), 2, "1.5 is not a probability (0 to 1)".into()),
        (CAPTURE, s(&[&pcap_out, "239.1.1.1"]), 2, "239.1.1.1: not an IPv4 GROUP:PORT".into()),
        (CAPTURE, s(&[&pcap_out, "--ibv-interface", "::1", "--replay", &f.arg("", "good.pcap")]), 2, "interface address ::1 is not an IPv4 address".into()),
        (CAPTURE, s(&[&pcap_out, "--ibv-interface", "10.9.9.9", "--replay", &f.arg("", "good.pcap")]), 1, "no RDMA device has interface address 10.9.9.9".into()),
        (CAPTURE, s(&[&pcap_out, "10.0.0.9:7148", "--replay", &f.arg("", "good.pcap")]), 1, "no network interface has address 10.0.0.9 (the device's interface is 10.77.0.2)".into()),
        (CAPTURE, s(&[&pcap_out, "239.1.1.1:7148"]), 1, "the hw backend is not compiled in".into()),
        (CAPTURE, s(&[&pcap_out, "--backend", "sim", "239.1.1.1:7148"]), 1, "give --replay".into()),
        // spead-capture: files.
        (CAPTURE, s(&[&f.arg("", "no-such-dir/out.pcap"), "--replay", &f.arg("", "good.pcap")]), 1, format!("{}: No such file or directory", f.arg("", "no-such-dir/out.pcap"))),
        (CAPTURE, s(&[&f.arg("", "a-directory"), "--replay", &f.arg("", "good.pcap")]), 1, format!("{}: Is a directory", f.arg("", "a-directory"))),
        (CAPTURE, s(&[&pcap_out, "--replay", &f.arg("", "missing")]), 1, format!("{}: I/O error at byte 0: No such file or directory", f.arg("", "missing"))),
        (CAPTURE, s(&[&pcap_out, "--replay", &f.arg("", "empty")]), 1, format!("{}: file truncated at byte 0", f.arg("", "empty"))),
        (CAPTURE, s(&[&pcap_out, "--replay", &f.arg("", "garbage")]), 1, format!("{}: not a pcap or pcapng file", f.arg("", "garbage"))),
        (CAPTURE, s(&[&pcap_out, "--replay", &f.arg("", "cut.pcap")]), 1, format!("{}: file truncated at byte", f.arg("", "cut.pcap"))),
        (CAPTURE, s(&[&pcap_out, "--replay", &f.arg("", "a-directory")]), 1, f.arg("", "a-directory")),
    ];
    let mut table = Refusals::new();
    for (tool, args, status, words) in &rows {
        let out = run(tool, args);
        let tool = name(tool);
        table.check(
            &format!("{tool} {args:?}"),
            &out,
            *status,
            &format!("{tool}: "),
            words,
        );
    }
    table.assert_all_refused();
    println!(
        "{} rows of bad input, each refused as the table says",
        rows.len()
    );
}

#[test]
fn heaps_before_a_fault_are_still_written_out() {
    let f = Files::new("written");
    // spead-send: the heap on the line before the cut is sent.
    let out = f.path("from-cut-json.spead");
    let r = run(
        SEND,
        &[
            "--json".into(),
            f.arg("", "cut.json"),
            format!("file:{}", out.display()),
        ],
    );
    assert_eq!(r.status.code(), Some(1));
    let r = run(RECV, &["--json".into(), format!("file:{}", out.display())]);
    let text = String::from_utf8_lossy(&r.stdout);
    let cnts: Vec<&str> = text.lines().filter(|l| l.starts_with("{\"cnt\"")).collect();
    assert_eq!(cnts.len(), 1, "{text}");
    assert!(cnts[0].contains("\"hex\":\"00010203\""), "{text}");
    // spead-recv: a stream cut inside heap 3 gives heaps 1 and 2, then the counters.
    let r = run(RECV, &["--json".into(), f.arg("file:", "cut.spead")]);
    assert_eq!(r.status.code(), Some(1));
    let text = String::from_utf8_lossy(&r.stdout);
    let cnts: Vec<u64> = text
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["cnt"].as_u64())
        .collect();
    assert_eq!(cnts, [1, 2], "{text}");
    assert!(
        text.lines().last().unwrap().starts_with("{\"stats\""),
        "{text}"
    );
    // spead-capture: a capture cut in its last frame is replayed up to the cut, and
    // every frame before it is in the output.
    let whole = capture_datagrams(&f.path("good.pcap"));
    let out = f.path("from-cut.pcap");
    let r = run(
        CAPTURE,
        &[
            out.display().to_string(),
            "--replay".into(),
            f.arg("", "cut.pcap"),
        ],
    );
    assert_eq!(r.status.code(), Some(1));
    let got = capture_datagrams(&out);
    assert_eq!(got.len(), whole.len() - 1);
    assert!(got.iter().zip(&whole).all(|(a, b)| a.1 == b.1));
}
