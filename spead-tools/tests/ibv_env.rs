//! `SPEAD2_IBV_INTERFACE` in `spead-recv` as in `spead2_recv`: in a build without
//! libibverbs (no `hw` feature) a set variable only draws spead2's warning, once, and
//! `udp:` sources stay kernel sockets that receive as usual; an empty one is unset.
#![cfg(not(feature = "hw"))]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

const SEND: &str = env!("CARGO_BIN_EXE_spead-send");
const RECV: &str = env!("CARGO_BIN_EXE_spead-recv");

/// Runs `spead-recv --heaps 3 udp:127.0.0.1:0` with `SPEAD2_IBV_INTERFACE=value`, sends
/// it three heaps with `spead-send`, and returns its stderr.
fn receive_with(value: &str) -> String {
    let mut rx = Command::new(RECV)
        .args(["--heaps", "3", "udp:127.0.0.1:0"])
        .env("SPEAD2_IBV_INTERFACE", value)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run spead-recv");
    let mut err = BufReader::new(rx.stderr.take().unwrap());
    let mut text = String::new();
    let port = loop {
        let mut line = String::new();
        assert!(err.read_line(&mut line).unwrap() > 0, "spead-recv: {text}");
        text.push_str(&line);
        if let Some(addr) = line.trim().strip_prefix("spead-recv: listening on udp:") {
            break addr.rsplit(':').next().unwrap().to_string();
        }
    };
    let sent = Command::new(SEND)
        .args(["--heaps", "3", "--heap-size", "4096"])
        .arg(format!("udp:127.0.0.1:{port}"))
        .output()
        .expect("run spead-send");
    assert!(
        sent.status.success(),
        "{}",
        String::from_utf8_lossy(&sent.stderr)
    );
    let status = rx.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).unwrap();
    text.push_str(&rest);
    assert!(status.success(), "spead-recv: {text}");
    text
}

#[test]
fn without_ibverbs_the_variable_only_warns() {
    let warning = "SPEAD2_IBV_INTERFACE found, but ibverbs support not compiled in";
    for value in ["10.0.0.1", "not-an-address"] {
        let err = receive_with(value);
        assert_eq!(err.matches(warning).count(), 1, "{value}: {err}");
    }
    assert!(!receive_with("").contains("SPEAD2_IBV_INTERFACE"));
}
