//! `spead-recv --replay`: a capture injected into a simulated fabric reaches the
//! unchanged verbs receiver (raw on mlx5, UD on rxe) and yields exactly the heaps that
//! `spead-recv pcap:` reads from the same file: the spead2 recordings in tests/data, and
//! a capture of small packets for UD. Faults on the receiver's link are seeded (the same
//! seed gives the same heaps) and never make a complete heap that differs. Bad
//! arguments give clear errors.

use std::path::PathBuf;
use std::process::Command;

use workspace_tests::data;
use workspace_tests::spead_verbs::synthetic_capture;

const RECV: &str = env!("CARGO_BIN_EXE_spead-recv");

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("spead-replay-{}-{name}", std::process::id()))
}

/// Runs spead-recv --json; returns the heap lines (the counters line left out) and
/// stderr.
fn recv(args: &[&str]) -> (Vec<String>, String) {
    let out = Command::new(RECV)
        .args(args)
        .arg("--json")
        .output()
        .expect("run spead-recv");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "spead-recv {args:?}: {err}");
    let heaps = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with("{\"stats\""))
        .map(str::to_string)
        .collect();
    (heaps, err)
}

#[test]
fn raw_replay_of_spead2_recordings_yields_the_pcap_heaps() {
    for file in [
        "spead2_lo_eth.pcap",
        "spead2_any_sll.pcap",
        "spead2_any_sll2.pcap",
        "spead2_lo.pcapng",
    ] {
        let path = data(file);
        let p = path.to_str().unwrap();
        let (want, _) = recv(&[&format!("pcap:{p}")]);
        assert!(want.len() >= 5, "{file}: {want:?}");
        let (got, err) = recv(&["--replay", p]);
        assert_eq!(got, want, "{file}");
        assert!(err.contains("0 dropped"), "{file}: {err}");
        // Naming the endpoint selects its datagrams only, as a pcap filter does.
        let (got, _) = recv(&["--replay", p, "ibv:239.0.0.1:7149"]);
        let (want, _) = recv(&[&format!("pcap:{p}?*:7149")]);
        assert_eq!(got, want, "{file} port 7149");
    }
}

#[test]
fn ud_and_raw_replay_yield_the_pcap_heaps() {
    let path = tmp("small.pcap");
    synthetic_capture(&path);
    let p = path.to_str().unwrap();
    let (want, _) = recv(&[&format!("pcap:{p}")]);
    assert_eq!(want.len(), 6);
    for mode in ["raw", "ud"] {
        let (got, err) = recv(&["--replay", p, "--ibv-mode", mode]);
        assert_eq!(got, want, "{mode}: {err}");
        // Interrupt-driven receivers (completion channel) too.
        let (got, _) = recv(&["--replay", p, "--ibv-mode", mode, "--ibv-comp-vector", "0"]);
        assert_eq!(got, want, "{mode}, comp vector 0");
    }
    std::fs::remove_file(&path).ok();
}

#[test]
fn replay_faults_are_seeded_and_never_corrupt_a_complete_heap() {
    let path = data("spead2_lo_eth.pcap");
    let p = path.to_str().unwrap();
    let (clean, _) = recv(&[&format!("pcap:{p}"), "--ignore-stop"]);
    let cnt = |l: &str| -> u64 {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        v["cnt"].as_u64().unwrap()
    };
    for (fault, value) in [("--loss", "0.15"), ("--dup", "0.3"), ("--reorder", "0.3")] {
        let args = [
            "--replay",
            p,
            fault,
            value,
            "--seed",
            "5",
            "--ignore-stop",
            "--incomplete",
            "--allow-out-of-order",
        ];
        let (a, err) = recv(&args);
        let (b, _) = recv(&args);
        assert_eq!(a, b, "{fault}: the same seed gives the same heaps");
        for line in &a {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            if v["complete"] == true {
                let same = clean.iter().find(|c| cnt(c) == cnt(line));
                assert_eq!(Some(line), same, "{fault}: complete heap {}", cnt(line));
            }
        }
        assert!(!a.is_empty(), "{fault}: {err}");
    }
}
