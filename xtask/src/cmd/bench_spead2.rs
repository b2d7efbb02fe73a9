//! The spead2 pair of `cargo xtask bench emu`: spead2's ibverbs sender (`UdpIbvStream`,
//! its Python API as the PyPI wheel ships it; the C++ tools need a build of spead2's
//! source) on emulated host h2, started as a user starts it (`verbs-emu run --host h2 --
//! python3 ...`, the release build), sends [`MIB`] MiB of 1 MiB heaps in 8 KiB packets,
//! unpaced, their payload cycling through a [`WORKSET_MIB`] MiB working set (out of
//! cache), to the multicast group 239.10.1.1 that spead2's ibverbs reader
//! (`add_udp_ibv_reader`) on h1 joins on 10.100.0.1. The same two
//! programs then run over kernel UDP loopback outside the emulator (`UdpStream` to
//! 127.0.0.1, `add_udp_reader` bound there), as the competitor. Both ends are
//! `emulator/bench/spead2_rate.py` (modes `recv` and `send`), the readers with spead2's
//! default buffers: 16 MiB of posted receive buffers for the ibverbs reader, 8 MiB of
//! socket buffer asked for the kernel's (which the kernel caps at `net.core.rmem_max`).
//!
//! The receiver checks each heap it completes (its length, and that its first and last
//! 64-bit words are those the sender put in the heap of that counter) and reports the
//! heaps complete and intact and those spead2 dropped incomplete; heaps neither never
//! reached it at all. The pair's rate is the intact heaps' payload over the time from the
//! sender's first packet to the receiver's last heap (both read the machine's wall clock).
//! Through the emulator, the fabric's summary gives the frames it delivered: those the
//! reader did not take, the receiving NIC dropped.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::common::{root, Error};

/// MiB sent per pair per run (one heap per MiB).
pub const MIB: u32 = 512;
/// The sender's working set (MiB), which the heaps' payload cycles through.
pub const WORKSET_MIB: u32 = 256;
/// How long the receiver may take to say it is ready (Python starting on a loaded
/// machine) before it is called hung. Not a measure: only a bound that ends a hang.
const READY_WAIT: Duration = Duration::from_secs(120);
/// How long the sender may take (its 512 MiB take seconds) before it is called hung.
const SEND_WAIT: Duration = Duration::from_secs(300);
/// How long the receiver may take to end after its sender has: past it, it is told to
/// stop (the end of the stream was lost).
const END_WAIT: Duration = Duration::from_secs(10);
/// How long a told receiver may take to print its counts before it is called hung.
const STOP_WAIT: Duration = Duration::from_secs(60);
/// The receiver's first line.
const READY: &str = r#"{"ready": true}"#;

/// What one pair moved in one run.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PairRun {
    /// Heaps the sender sent.
    pub sent: u64,
    /// Heaps the receiver completed, holding the sender's payload.
    pub complete: u64,
    /// Heaps spead2 dropped incomplete (some of their packets lost).
    pub incomplete: u64,
    /// Heaps completed with a payload that is not the sender's.
    pub bad: u64,
    /// The pair's rate, Gb/s (10^9 bits) of intact heaps' payload from the sender's start
    /// to the receiver's last heap; 0 when no heap arrived.
    pub gbps: f64,
    /// Packets the reader took (spead2's count).
    pub packets: u64,
    /// Frames the fabric process delivered (its summary), for the pair through the
    /// emulator: those beyond `packets` the receiving NIC dropped, its posted receive
    /// buffers full.
    pub delivered: Option<u64>,
}

impl PairRun {
    /// Heaps of which the receiver saw no packet.
    pub fn missing(&self) -> u64 {
        self.sent
            .saturating_sub(self.complete + self.incomplete + self.bad)
    }

    /// True when every heap sent arrived complete and intact.
    pub fn lossless(&self) -> bool {
        self.complete == self.sent && self.bad == 0
    }

    /// `512/512`, or with loss e.g. `505/512 (3 incomplete, 4 missing)`; for the pair
    /// through the emulator with what the receiving NIC dropped, e.g. `419/512 (2
    /// incomplete, 91 missing; NIC dropped 11870 of 66049 frames)`.
    pub fn heaps(&self) -> String {
        let mut s = format!("{}/{}", self.complete, self.sent);
        let mut lost = Vec::new();
        if self.incomplete > 0 {
            lost.push(format!("{} incomplete", self.incomplete));
        }
        if self.bad > 0 {
            lost.push(format!("{} wrong payload", self.bad));
        }
        if self.missing() > 0 {
            lost.push(format!("{} missing", self.missing()));
        }
        let mut lost = lost.join(", ");
        if let Some(d) = self.delivered.filter(|&d| d != self.packets) {
            let dropped = if d > self.packets {
                format!("NIC dropped {} of {d} frames", d - self.packets)
            } else {
                format!("reader took {} packets of {d} frames", self.packets)
            };
            lost = if lost.is_empty() {
                dropped
            } else {
                format!("{lost}; {dropped}")
            };
        }
        if !lost.is_empty() {
            s += &format!(" ({lost})");
        }
        s
    }
}

/// The JSON object of the last line of `text` that parses as one holding `key`.
fn last_json_with(text: &str, key: &str) -> Option<Value> {
    text.lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<Value>(l.trim()).ok())
        .find(|v| v.get(key).is_some())
}

fn count(v: &Value, key: &str, who: &str) -> Result<u64, Error> {
    v.get(key)
        .and_then(Value::as_u64)
        .ok_or_else(|| format!("spead2 {who}: no count {key:?} in {v}"))
}

/// A time of day (seconds since the epoch, as Python's `time.time()`).
fn clock(v: &Value, key: &str, who: &str) -> Result<f64, Error> {
    v.get(key)
        .and_then(Value::as_f64)
        .filter(|s| s.is_finite() && *s >= 0.0)
        .ok_or_else(|| format!("spead2 {who}: no time {key:?} in {v}"))
}

/// What the sender says of its run.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Sent {
    /// Heaps sent.
    heaps: u64,
    /// When it began sending (wall clock, seconds).
    start: f64,
}

/// The sender's line `{"elapsed": .., "bytes": .., "heaps": N, "start": T}`.
fn parse_sender(text: &str) -> Result<Sent, Error> {
    let v = last_json_with(text, "heaps")
        .ok_or_else(|| format!("spead2 sender: no result line in {text:?}"))?;
    Ok(Sent {
        heaps: count(&v, "heaps", "sender")?,
        start: clock(&v, "start", "sender")?,
    })
}

/// The receiver's result line (`{"heaps", "bad", "incomplete", "packets", "bytes",
/// "last", ...}`, after its `{"ready": true}`) for what the sender sent. The rate is the
/// intact heaps' payload from the sender's start to the receiver's last heap (both on
/// the machine's clock); 0 when no heap arrived or the clocks give no time between them.
fn parse_receiver(text: &str, sent: Sent) -> Result<PairRun, Error> {
    let v = last_json_with(text, "last")
        .ok_or_else(|| format!("spead2 receiver: no result line in {text:?}"))?;
    let bytes = count(&v, "bytes", "receiver")?;
    let took = clock(&v, "last", "receiver")? - sent.start;
    Ok(PairRun {
        sent: sent.heaps,
        complete: count(&v, "heaps", "receiver")?,
        incomplete: count(&v, "incomplete", "receiver")?,
        bad: count(&v, "bad", "receiver")?,
        gbps: if bytes > 0 && took > 0.0 {
            bytes as f64 * 8.0 / took / 1e9
        } else {
            0.0
        },
        packets: count(&v, "packets", "receiver")?,
        delivered: None,
    })
}

/// The frames delivered, from the fabric's summary line in `log` (`verbs-emu-fabric: N
/// frames from hosts, M delivered, lost: ...`, `emulator/src/fabric/server.rs`).
fn fabric_delivered(log: &str) -> Option<u64> {
    let line = log
        .lines()
        .rev()
        .find(|l| l.contains(" frames from hosts, "))?;
    let after = line.split(" frames from hosts, ").nth(1)?;
    let (n, rest) = after.split_once(' ')?;
    if rest.starts_with("delivered") {
        n.parse().ok()
    } else {
        None
    }
}

/// The frames the fabric of the launcher's state folder `dir` delivered, once it has
/// stopped and written its summary to `fabric.log` (waiting up to 10 s for it).
fn delivered_when_stopped(dir: &Path) -> Option<u64> {
    let start = Instant::now();
    loop {
        let log = std::fs::read_to_string(dir.join("fabric.log")).unwrap_or_default();
        if let Some(n) = fabric_delivered(&log) {
            return Some(n);
        }
        if start.elapsed() > Duration::from_secs(10) {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Reads a child's pipe to its end on a thread of its own (spead2 names each heap it
/// drops on stderr: a full pipe would stop the receiver).
fn drain(r: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = BufReader::new(r).read_to_end(&mut v);
        String::from_utf8_lossy(&v).into_owned()
    })
}

/// Waits up to `limit` for `child` (`who`) to end.
fn ended_within(child: &mut Child, limit: Duration, who: &str) -> Result<bool, Error> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if child
            .try_wait()
            .map_err(|e| format!("spead2 {who}: {e}"))?
            .is_some()
        {
            return Ok(true);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(false)
}

/// Starts `c` (`who`) with its stdout and stderr piped.
fn spawn(c: &mut Command, stdin: Stdio, who: &str) -> Result<Child, Error> {
    c.stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start the spead2 {who} {c:?}: {e}"))
}

/// spead2's sender and reader, and how to start them.
pub struct Spead2 {
    python: PathBuf,
    script: PathBuf,
}

impl Spead2 {
    /// spead2 from `target/spead2-venv` (installed there if missing).
    ///
    /// # Errors
    /// spead2 cannot be installed.
    pub fn new() -> Result<Self, Error> {
        Ok(Self {
            python: super::spead2::python()?,
            script: root().join("emulator/bench/spead2_rate.py"),
        })
    }

    fn args(&self, mode: &str, transport: &str, iface: &str) -> Vec<String> {
        let mut v = vec![
            self.python.display().to_string(),
            self.script.display().to_string(),
            mode.to_owned(),
            transport.to_owned(),
            iface.to_owned(),
        ];
        if mode == "send" {
            v.extend([MIB.to_string(), WORKSET_MIB.to_string(), "0".to_owned()]);
        } else {
            // The reader's buffer as spead2 sizes it by default (16 MiB of posted receive
            // buffers for ibverbs, 8 MiB asked for the socket, capped by the kernel).
            v.extend([WORKSET_MIB.to_string(), "default".to_owned()]);
        }
        v
    }

    /// The ibverbs pair between two emulated hosts: `launcher` is `verbs-emu`, run with
    /// `runtime` as `XDG_RUNTIME_DIR` (the fabric's state folder goes under it) on the
    /// fabric named `fabric`.
    ///
    /// # Errors
    /// A program fails or prints no result.
    pub fn emulated(
        &self,
        launcher: &Path,
        runtime: &Path,
        fabric: &str,
    ) -> Result<PairRun, Error> {
        let host = |h: &str, args: Vec<String>| {
            let mut c = Command::new(launcher);
            c.env("XDG_RUNTIME_DIR", runtime)
                .args(["run", "--fabric", fabric, "--host", h, "--"])
                .args(args);
            c
        };
        let run = pair(
            host("h1", self.args("recv", "emu", "10.100.0.1")),
            host("h2", self.args("send", "emu", "10.100.0.2")),
        )?;
        // The last run has left: the fabric stops and writes its summary.
        Ok(PairRun {
            delivered: delivered_when_stopped(&runtime.join("verbs-emu").join(fabric)),
            ..run
        })
    }

    /// The same programs over kernel UDP loopback (127.0.0.1), outside the emulator.
    ///
    /// # Errors
    /// A program fails or prints no result.
    pub fn kernel(&self) -> Result<PairRun, Error> {
        let program = |args: Vec<String>| {
            let mut c = Command::new(&args[0]);
            c.args(&args[1..]);
            c
        };
        pair(
            program(self.args("recv", "kernel", "127.0.0.1")),
            program(self.args("send", "kernel", "127.0.0.1")),
        )
    }
}

/// Starts the receiver, waits until it is ready, runs the sender, and collects the
/// receiver's counts (telling it to stop if the end of the stream was lost). A
/// program past its bound (`READY_WAIT`, `SEND_WAIT`, `STOP_WAIT`) is killed and
/// named in the error.
fn pair(mut recv: Command, mut send: Command) -> Result<PairRun, Error> {
    let mut receiver = spawn(&mut recv, Stdio::piped(), "receiver")?;
    let err = drain(receiver.stderr.take().ok_or("spead2 receiver: no stderr")?);
    let out = receiver.stdout.take().ok_or("spead2 receiver: no stdout")?;
    // Its first line comes through a channel, so that a receiver that never gets
    // ready is ended; the rest is read to its end on the same thread.
    let (first, ready) = std::sync::mpsc::channel();
    let out = std::thread::spawn(move || {
        let mut out = BufReader::new(out);
        let mut line = String::new();
        let _ = out.read_line(&mut line);
        let _ = first.send(line);
        let mut rest = Vec::new();
        let _ = out.read_to_end(&mut rest);
        String::from_utf8_lossy(&rest).into_owned()
    });
    let ready = ready.recv_timeout(READY_WAIT).unwrap_or_default();
    if ready.trim() != READY {
        let _ = receiver.kill();
        let status = receiver.wait().map_err(|e| e.to_string())?;
        return Err(format!(
            "the spead2 receiver did not start ({status}): {ready}{}",
            last_lines(&err.join().unwrap_or_default(), 5)
        ));
    }
    let mut sender = spawn(&mut send, Stdio::null(), "sender")?;
    let sent_out = drain(sender.stdout.take().ok_or("spead2 sender: no stdout")?);
    let sent_err = drain(sender.stderr.take().ok_or("spead2 sender: no stderr")?);
    let sender_hung = !ended_within(&mut sender, SEND_WAIT, "sender")?;
    if sender_hung {
        let _ = sender.kill();
    }
    let sender_status = sender.wait().map_err(|e| format!("spead2 sender: {e}"))?;
    let mut told = false;
    if !ended_within(&mut receiver, END_WAIT, "receiver")? {
        // The end of the stream was lost: the receiver reads "stop" from its stdin.
        told = true;
        if let Some(mut stdin) = receiver.stdin.take() {
            let _ = stdin.write_all(b"stop\n");
        }
    }
    let receiver_hung = !ended_within(&mut receiver, STOP_WAIT, "receiver")?;
    if receiver_hung {
        let _ = receiver.kill();
    }
    drop(receiver.stdin.take());
    let status = receiver
        .wait()
        .map_err(|e| format!("spead2 receiver: {e}"))?;
    let join = |h: std::thread::JoinHandle<String>| h.join().unwrap_or_default();
    let (out, err) = (join(out), join(err));
    let (sent_text, sent_err) = (join(sent_out), join(sent_err));
    if !sender_status.success() || !status.success() {
        let hung = |h: bool, limit: Duration| {
            if h {
                format!(", killed after {limit:?}")
            } else {
                String::new()
            }
        };
        return Err(format!(
            "spead2: sender {sender_status}{} ({sent_text}{}), receiver {status}{}{} \
                 ({out}{})",
            hung(sender_hung, SEND_WAIT),
            last_lines(&sent_err, 5),
            if told {
                " after being told to stop"
            } else {
                ""
            },
            hung(receiver_hung, STOP_WAIT),
            last_lines(&err, 5)
        ));
    }
    parse_receiver(&out, parse_sender(&sent_text)?)
}

/// The last `n` lines of `text`.
fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// The launcher's state folder of the bench (its `XDG_RUNTIME_DIR`: the fabric's socket,
/// log and library links go under it), removed when dropped (each emulated pair has
/// waited for its fabric to stop by then).
pub struct Runtime(PathBuf);

impl Runtime {
    /// Makes a folder (0700) named for this process in the temporary folder (short: the
    /// fabric's socket path must fit a Unix socket's 108 bytes). It must exist: the
    /// launcher takes `XDG_RUNTIME_DIR` only when it is a folder.
    ///
    /// # Errors
    /// The folder cannot be made.
    pub fn new() -> Result<Self, Error> {
        use std::os::unix::fs::DirBuilderExt;
        let dir = std::env::temp_dir().join(format!("xtask-bench-emu-{}", std::process::id()));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        Ok(Self(dir))
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sender of 512 heaps that began at 1000 s.
    const SENT: Sent = Sent {
        heaps: 512,
        start: 1000.0,
    };

    #[test]
    fn a_receiver_that_got_everything() {
        let text = "{\"ready\": true}\n\
            {\"heaps\": 512, \"bad\": 0, \"incomplete\": 0, \"packets\": 66048, \
             \"mprq\": true, \"bytes\": 536870912, \"last\": 1000.5}\n";
        let r = parse_receiver(text, SENT).unwrap();
        assert_eq!(
            (r.sent, r.complete, r.incomplete, r.bad, r.missing()),
            (512, 512, 0, 0, 0)
        );
        // 512 MiB in half a second.
        assert!((r.gbps - 8.589_934_592).abs() < 1e-9, "{}", r.gbps);
        assert!(r.lossless());
        assert_eq!(r.heaps(), "512/512");
        assert_eq!(r.packets, 66048);
        // Through the emulator: the fabric delivered what the reader took.
        let emu = PairRun {
            delivered: Some(66048),
            ..r
        };
        assert_eq!(emu.heaps(), "512/512");
    }

    #[test]
    fn frames_the_receiving_nic_dropped_are_named() {
        let r = PairRun {
            sent: 512,
            complete: 419,
            incomplete: 2,
            packets: 54179,
            delivered: Some(66049),
            ..PairRun::default()
        };
        assert_eq!(
            r.heaps(),
            "419/512 (2 incomplete, 91 missing; NIC dropped 11870 of 66049 frames)"
        );
        let odd = PairRun {
            complete: 512,
            incomplete: 0,
            packets: 66050,
            ..r
        };
        assert_eq!(
            odd.heaps(),
            "512/512 (reader took 66050 packets of 66049 frames)"
        );
    }

    #[test]
    fn the_fabric_summary_gives_the_frames_delivered() {
        let log = "verbs-emu-fabric: hosts h1, h2, h3, h4 at /x/fabric.sock (seed 1)\n\
            verbs-emu-fabric: 66049 frames from hosts, 66040 delivered, lost: none; 0 \
            duplicated, 0 corrupted in the switch, senders paused 348 times\n";
        assert_eq!(fabric_delivered(log), Some(66040));
        assert_eq!(fabric_delivered("verbs-emu-fabric: hosts h1"), None);
        assert_eq!(
            fabric_delivered("verbs-emu-fabric: 5 frames from hosts, x delivered"),
            None
        );
    }

    #[test]
    fn a_receiver_that_lost_heaps_says_which_way() {
        let text = "{\"ready\": true}\n\
            {\"heaps\": 505, \"bad\": 0, \"incomplete\": 3, \"packets\": 65595, \
             \"mprq\": false, \"bytes\": 529530880, \"last\": 1002.0}\n";
        let r = parse_receiver(text, SENT).unwrap();
        assert_eq!((r.complete, r.incomplete, r.missing()), (505, 3, 4));
        // 505 MiB in 2 s: the intact heaps only.
        assert!((r.gbps - 2.118_123_52).abs() < 1e-9, "{}", r.gbps);
        assert!(!r.lossless());
        assert_eq!(r.heaps(), "505/512 (3 incomplete, 4 missing)");
        let bad = PairRun {
            bad: 2,
            complete: 510,
            ..r
        };
        assert_eq!(bad.heaps(), "510/512 (3 incomplete, 2 wrong payload)");
        assert!(!PairRun {
            incomplete: 0,
            ..bad
        }
        .lossless());
    }

    #[test]
    fn no_heap_or_no_time_gives_no_rate() {
        let none = "{\"heaps\": 0, \"bad\": 0, \"incomplete\": 2, \"packets\": 128, \
                    \"mprq\": true, \"bytes\": 0, \"last\": 0.0}";
        let r = parse_receiver(none, SENT).unwrap();
        assert_eq!((r.complete, r.missing(), r.gbps), (0, 510, 0.0));
        assert_eq!(r.heaps(), "0/512 (2 incomplete, 510 missing)");
        // A receiver's clock before the sender's start gives no time between them.
        let early = "{\"heaps\": 1, \"bad\": 0, \"incomplete\": 0, \"packets\": 129, \
                     \"mprq\": true, \"bytes\": 1048576, \"last\": 999.0}";
        assert_eq!(parse_receiver(early, SENT).unwrap().gbps, 0.0);
    }

    #[test]
    fn output_without_a_result_is_an_error_naming_it() {
        let e = parse_receiver("{\"ready\": true}\nTraceback ...\n", SENT).unwrap_err();
        assert!(e.starts_with("spead2 receiver: no result line"), "{e}");
        let e = parse_receiver("{\"heaps\": 3, \"bytes\": 8, \"last\": 1001.0}", SENT).unwrap_err();
        assert!(e.contains("no count \"incomplete\""), "{e}");
        let e = parse_receiver("{\"heaps\": 3, \"bytes\": 8, \"last\": -1}", SENT).unwrap_err();
        assert!(e.contains("no time \"last\""), "{e}");
        assert!(parse_sender("").is_err());
        let e = parse_sender("{\"heaps\": 512}").unwrap_err();
        assert!(e.contains("no time \"start\""), "{e}");
    }

    #[test]
    fn the_sender_says_how_many_heaps_it_sent() {
        let text = "{\"elapsed\": 0.147, \"bytes\": 536870912, \"heaps\": 512, \
                    \"start\": 1764340000.25}\n";
        assert_eq!(
            parse_sender(text),
            Ok(Sent {
                heaps: 512,
                start: 1_764_340_000.25
            })
        );
    }

    #[test]
    fn the_programs_get_the_pair_arguments() {
        let s = Spead2 {
            python: PathBuf::from("/v/bin/python"),
            script: PathBuf::from("/r/spead2_rate.py"),
        };
        assert_eq!(
            s.args("send", "emu", "10.100.0.2"),
            [
                "/v/bin/python",
                "/r/spead2_rate.py",
                "send",
                "emu",
                "10.100.0.2",
                "512",
                "256",
                "0"
            ]
        );
        assert_eq!(
            s.args("recv", "kernel", "127.0.0.1"),
            [
                "/v/bin/python",
                "/r/spead2_rate.py",
                "recv",
                "kernel",
                "127.0.0.1",
                "256",
                "default"
            ]
        );
    }

    /// A receiver and a sender as shell scripts, the receiver ending once the sender has
    /// written to a FIFO (`mkfifo`, from coreutils) in a folder of the test's own.
    fn scripts(name: &str, receiver: &str, sender: &str) -> (Command, Command, PathBuf) {
        let dir =
            std::env::temp_dir().join(format!("xtask-bench-spead2-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("fifo");
        assert!(Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        let sh = |script: &str| {
            let mut c = Command::new("sh");
            c.args(["-c", script, "sh"]).arg(&fifo);
            c
        };
        (sh(receiver), sh(sender), dir)
    }

    const RECEIVER_OK: &str = r#"echo '{"ready": true}'; cat "$1" >/dev/null; echo '{"heaps": 511, "bad": 0, "incomplete": 1, "packets": 65920, "mprq": true, "bytes": 535822336, "last": 1001.0}'"#;

    #[test]
    fn a_pair_gives_the_receivers_counts_against_the_senders() {
        let (recv, send, dir) = scripts(
            "ok",
            RECEIVER_OK,
            r#"echo go > "$1"; echo '{"elapsed": 0.9, "bytes": 536870912, "heaps": 512, "start": 1000.0}'"#,
        );
        let r = pair(recv, send).unwrap();
        assert_eq!(
            (r.sent, r.complete, r.incomplete, r.missing(), r.packets),
            (512, 511, 1, 0, 65920)
        );
        // 511 MiB in 1 s.
        assert!((r.gbps - 4.286_578_688).abs() < 1e-9, "{}", r.gbps);
        assert_eq!(r.heaps(), "511/512 (1 incomplete)");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_failing_sender_is_named_with_its_stderr() {
        let (recv, send, dir) = scripts(
            "sender-fails",
            RECEIVER_OK,
            r#"echo go > "$1"; echo 'no device' >&2; exit 3"#,
        );
        let e = pair(recv, send).unwrap_err();
        assert!(
            e.starts_with("spead2: sender exit status: 3 (no device), receiver exit status: 0"),
            "{e}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_receiver_that_does_not_get_ready_is_named() {
        let (recv, send, dir) = scripts(
            "not-ready",
            r#"echo 'set_option: No such device' >&2; exit 1"#,
            "exit 0",
        );
        let e = pair(recv, send).unwrap_err();
        assert_eq!(
            e,
            "the spead2 receiver did not start (exit status: 1): set_option: No such device"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn last_lines_keeps_the_end() {
        assert_eq!(last_lines("a\nb\nc\n", 2), "b\nc");
        assert_eq!(last_lines("a", 5), "a");
    }
}
