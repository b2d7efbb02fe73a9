//! `spead-capture` on the simulator: a capture replayed into the simulated fabric
//! (`--replay`) comes out of the verbs receive path into a pcap whose UDP datagrams are
//! exactly the ones sent (count, order and payload bytes), raw (mlx5) and UD (rxe), and
//! which tshark decodes as that many UDP packets.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::process::Command;

use workspace_tests::spead_verbs::{capture_datagrams, synthetic_capture};

const CAPTURE: &str = env!("CARGO_BIN_EXE_spead-capture");

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("spead-capture-{}-{name}", std::process::id()))
}

/// Runs spead-capture; returns its stderr.
fn capture(args: &[&str]) -> String {
    let out = Command::new(CAPTURE)
        .args(args)
        .output()
        .expect("run spead-capture");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "spead-capture {args:?}: {err}");
    err
}

/// tshark's view of a capture: the protocol stack of every frame.
fn tshark_protocols(path: &Path) -> Vec<String> {
    let out = Command::new("tshark")
        .args(["-r"])
        .arg(path)
        .args(["-T", "fields", "-e", "frame.protocols"])
        .output()
        .unwrap_or_else(|e| {
            panic!("tshark is needed for this test (apt-get install -y tshark): {e}")
        });
    assert!(
        out.status.success(),
        "tshark: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn check(out: &Path, want: &[(SocketAddrV4, Vec<u8>)], stderr: &str) {
    let got = capture_datagrams(out);
    assert_eq!(got.len(), want.len(), "datagram count");
    for (i, ((gd, gp), (wd, wp))) in got.iter().zip(want).enumerate() {
        assert_eq!(gd, wd, "destination of datagram {i}");
        assert!(gp == wp, "payload of datagram {i}");
    }
    let frames: u64 = got.iter().map(|(_, p)| 42 + p.len() as u64).sum();
    assert!(
        stderr.contains(&format!("{} packets, {frames} bytes", want.len())),
        "counts in {stderr:?}"
    );
    if cfg!(feature = "tshark") {
        check_with_tshark(out, want.len());
    }
}

/// tshark decodes every frame of the capture as Ethernet/IPv4/UDP (feature `tshark`).
fn check_with_tshark(out: &Path, frames: usize) {
    let protos = tshark_protocols(out);
    assert_eq!(protos.len(), frames, "tshark frame count");
    for p in &protos {
        assert!(
            p.starts_with("eth:ethertype:ip:udp"),
            "tshark decodes {p:?}"
        );
    }
}

#[test]
fn raw_capture_of_a_replayed_spead2_recording() {
    let input = workspace_tests::data("spead2_lo_eth.pcap");
    // spead2 sent to 127.0.0.1; the replay moves unicast destinations to 239.0.0.1.
    let want: Vec<_> = capture_datagrams(&input)
        .into_iter()
        .map(|(d, p)| (SocketAddrV4::new(Ipv4Addr::new(239, 0, 0, 1), d.port()), p))
        .collect();
    assert!(want.len() > 40);
    let out = tmp("recording.pcap");
    let err = capture(&[out.to_str().unwrap(), "--replay", input.to_str().unwrap()]);
    assert!(
        err.contains("127.0.0.1 replayed to group 239.0.0.1"),
        "{err}"
    );
    check(&out, &want, &err);
    std::fs::remove_file(&out).ok();
}

#[test]
fn raw_and_ud_capture_of_named_groups() {
    let input = tmp("synthetic.pcap");
    let sent = synthetic_capture(&input);
    for mode in ["raw", "ud"] {
        let out = tmp(&format!("groups-{mode}.pcap"));
        let err = capture(&[
            out.to_str().unwrap(),
            "239.10.0.1:7148",
            "239.10.0.2:7148",
            "--ibv-mode",
            mode,
            "--replay",
            input.to_str().unwrap(),
        ]);
        check(&out, &sent, &err);
        // One group only: the other group's frames are not steered to the receiver.
        let err = capture(&[
            out.to_str().unwrap(),
            "239.10.0.2:7148",
            "--ibv-mode",
            mode,
            "--replay",
            input.to_str().unwrap(),
        ]);
        let one: Vec<_> = sent
            .iter()
            .filter(|(d, _)| *d.ip() == Ipv4Addr::new(239, 10, 0, 2))
            .cloned()
            .collect();
        check(&out, &one, &err);
        std::fs::remove_file(&out).ok();
    }
    std::fs::remove_file(&input).ok();
}

#[test]
fn count_and_stdout() {
    let input = tmp("count-in.pcap");
    let sent = synthetic_capture(&input);
    let out = Command::new(CAPTURE)
        .args(["-", "--count", "7", "--replay"])
        .arg(&input)
        .output()
        .unwrap();
    assert!(out.status.success());
    let path = tmp("count-out.pcap");
    std::fs::write(&path, &out.stdout).unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    check(&path, &sent[..7], &err);
    // 10 virtual microseconds of a capture with one packet per microsecond.
    let out = Command::new(CAPTURE)
        .args(["-", "--duration", "0.00001", "--replay"])
        .arg(&input)
        .output()
        .unwrap();
    assert!(out.status.success());
    std::fs::write(&path, &out.stdout).unwrap();
    let n = capture_datagrams(&path).len();
    assert!(n > 5 && n < 15, "{n} packets in 10 us");
    check(&path, &sent[..n], &String::from_utf8_lossy(&out.stderr));
    std::fs::remove_file(&path).ok();
    std::fs::remove_file(&input).ok();
}
