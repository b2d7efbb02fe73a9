//! Our SPEAD tools (`spead-send`, `spead-recv`, built with `--features hw`) on emulated
//! hosts and kernel sockets: the heaps every run sends, what they read back as, and the
//! exact checks on what a receiver printed.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use super::fabric::{Ran, DEADLINE};

/// The heaps every SPEAD run sends.
pub const HEAP_ARGS: [&str; 6] = ["--heaps", "20", "--heap-size", "30000", "--items", "3"];

/// The arguments that put `spead-send` or `spead-recv` on the emulated NIC of the host
/// at `ip` (spead2's RAW_PACKET reader or writer), on `endpoint` (`ibv:GROUP:PORT`).
pub fn on_nic<'a>(ip: &'a str, endpoint: &'a str) -> [&'a str; 5] {
    ["--backend", "hw", "--ibv-interface", ip, endpoint]
}

/// The line `spead-recv` prints on stderr once it receives on the emulated NIC at `ip`.
pub fn nic_ready(ip: &str, endpoint: &str) -> String {
    format!("spead-recv: receiving on {endpoint} (raw, interface {ip})")
}

/// The heap lines of `spead-recv --json` output (its counters line left out).
pub fn heaps(json: &str) -> Vec<&str> {
    json.lines().filter(|l| l.starts_with("{\"cnt\"")).collect()
}

/// What `spead-recv --json` prints for the heaps of [`HEAP_ARGS`]: the same sender into
/// a file, read back.
pub fn reference_heaps(tools: &Path, dir: &Path) -> String {
    let file = dir.join("heaps.spead");
    let wrote = Command::new(tools.join("spead-send"))
        .args(HEAP_ARGS)
        .arg(format!("file:{}", file.display()))
        .output()
        .expect("spead-send to a file");
    assert!(wrote.status.success(), "{wrote:?}");
    let read = Command::new(tools.join("spead-recv"))
        .arg(format!("file:{}", file.display()))
        .arg("--json")
        .output()
        .expect("spead-recv from the file");
    assert!(read.status.success(), "{read:?}");
    let want = String::from_utf8(read.stdout).expect("JSON is text");
    assert_eq!(
        heaps(&want).len(),
        20,
        "the 20 heaps (the stop heap prints none)"
    );
    want
}

/// Waits until `file` holds `line` (a receiver's readiness line).
pub fn wait_for(file: &Path, line: &str) {
    let begin = Instant::now();
    while !std::fs::read_to_string(file)
        .unwrap_or_default()
        .contains(line)
    {
        assert!(begin.elapsed() < DEADLINE, "never printed {line:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The packet count of `spead-send`'s summary (`spead-send: 422 packets, ...`).
pub fn packets_sent(sent: &Ran) -> u64 {
    assert!(sent.status.success(), "spead-send: {}", sent.err);
    sent.err
        .trim()
        .strip_prefix("spead-send: ")
        .and_then(|t| t.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("spead-send's summary: {}", sent.err))
}

/// Checks that a receiver got exactly the heaps of `want`.
pub fn assert_heaps(who: &str, got: &Ran, want: &str) {
    assert!(got.status.success(), "{who}: {}", got.err);
    let (g, w) = (heaps(&got.out), heaps(want));
    assert_eq!(g.len(), w.len(), "{who}'s heaps: {}", got.err);
    for (i, (g, w)) in g.iter().zip(&w).enumerate() {
        assert!(g == w, "{who}: heap {i} differs from the file's");
    }
}

/// Checks that a receiver on the emulated NIC counted `packets` frames on `endpoint`, all
/// delivered.
pub fn assert_all_delivered(got: &Ran, endpoint: &str, packets: u64) {
    assert!(
        got.err.contains(&format!(
            "spead-recv: {endpoint}: {packets} frames, {packets} delivered, 0 dropped"
        )),
        "{}",
        got.err
    );
}
