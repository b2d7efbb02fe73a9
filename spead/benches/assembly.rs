//! Report benchmark: heap assembly from memory on an out-of-cache working set, the UDP
//! loopback pair, and a chunk-stream group over reader threads; ours beside spead2 and
//! beside the memcpy bound, all measured in the same run.
//!
//! One file (about 1000 lines) on purpose: it is one report program whose three parts
//! (memory, UDP, chunk group) share its arguments, shapes, medians and spead2 driver, and
//! the loops it times (the memcpy bounds, our feeding loops, the group's readers) stay in
//! the one module they were measured in so far; spread over modules they could be
//! compiled differently (other codegen units, other inlining) and the numbers would no
//! longer compare with earlier runs.
//!
//! `cargo bench -p spead --bench assembly -- [--runs N] [--mib M] [--shape S]
//! [--skip-udp] [--skip-group] [--skip-mem] [--profile]`
//!
//! - `--runs N` (default 5): passes per contender; each run measures every contender
//!   once, in turn, so background load hits them alike; medians and ranges are printed,
//!   and each ratio is taken within a run (then its median and range).
//! - `--mib M` (default 256): MiB of heap payload per pass (at least 256 heaps of
//!   1 MiB, far beyond any cache).
//! - `--shape S`: `8k`, `1472`, `256` or `64` (repeatable); default all four:
//!   1 MiB heaps / 8 KiB payload, 1 MiB / 1472 B, 16 KiB / 256 B, 4 KiB / 64 B
//!   (payload bytes per packet; each packet adds 40 bytes of header and pointers).
//! - `--profile`: ours only, from memory, for a profiler.
//!
//! Contenders from memory: the bound (one `memcpy` of every payload into its heap's
//! place, from a table of offsets made beforehand: no decoding, no bookkeeping), ours
//! (`decode_packet` + `Stream::add_decoded`, heaps popped and dropped as they finish),
//! and spead2 4.5.1 (`recv.Stream.add_buffer_reader`, heaps taken from the ring in
//! Python) with its default allocator and with a `MemoryPool` of heap-sized buffers.
//! spead2 comes from `target/spead2-venv`, which `cargo test -p workspace-tests`
//! creates; without it only our numbers and the bound print.
//!
//! UDP loopback: ours sender and receiver against spead2's sender and receiver, each
//! pair's lossless rate: the highest send rate at which every heap arrives complete
//! (unthrottled first; if that loses heaps, a bisection on the sender's rate limit).
//!
//! Chunk-stream group (lossless, 4 chunks of 16 MiB live, 6 recycled): one stream per
//! reader thread (1, 2 and all cores), each fed from memory with its share of the heaps
//! (heap `cnt` goes to stream `cnt % n`, so the streams fill the same chunks at once),
//! all placing heaps into the group's chunks; each reader feeds its stream as a memory
//! reader does (`add_packets`, 64 packets at a time) and, in a second set of rows, one
//! decoded packet at a time (`add_decoded`, as a datagram transport does). Beside them,
//! the bound for as many threads: each copies the payloads of its share of the heaps to
//! where the group places them, in one set of chunk buffers; the ratio to it is taken
//! within each run.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{feed_all, heap};
use spead::recv::sink::copy_payload;
use spead::recv::{
    Chunk, ChunkStreamConfig, ChunkStreamGroup, ChunkStreamGroupConfig, EvictionMode, PlaceData,
    Stream, StreamConfig,
};
use spead::send::{heap_to_bytes, GroupMode, Heap, HeapReference, RateLimiter};
use spead::transport::{Sender, UdpReceiver, UdpRecvConfig, UdpSendConfig, UdpSender};
use spead::wire::{decode_packet, Flavour};

/// Bytes of header and the four special pointers in every packet.
const OVERHEAD: usize = 40;

#[derive(Debug, Clone, Copy)]
struct Shape {
    name: &'static str,
    heap: usize,
    payload: usize,
}

const SHAPES: [Shape; 4] = [
    Shape {
        name: "8k",
        heap: 1 << 20,
        payload: 8192,
    },
    Shape {
        name: "1472",
        heap: 1 << 20,
        payload: 1472,
    },
    Shape {
        name: "256",
        heap: 16 << 10,
        payload: 256,
    },
    Shape {
        name: "64",
        heap: 4 << 10,
        payload: 64,
    },
];

impl Shape {
    fn packet(&self) -> usize {
        self.payload + OVERHEAD
    }

    fn label(&self) -> String {
        let heap = if self.heap >= 1 << 20 {
            format!("{} MiB", self.heap >> 20)
        } else {
            format!("{} KiB", self.heap >> 10)
        };
        let payload = if self.payload >= 8192 {
            format!("{} KiB", self.payload >> 10)
        } else {
            format!("{} B", self.payload)
        };
        format!("{heap} heaps / {payload} payload")
    }
}

#[derive(Debug)]
struct Args {
    runs: usize,
    mib: usize,
    shapes: Vec<Shape>,
    mem: bool,
    udp: bool,
    group: bool,
    profile: bool,
}

fn usage(msg: &str) -> ! {
    eprintln!("assembly bench: {msg}");
    eprintln!(
        "usage: cargo bench -p spead --bench assembly -- [--runs N] [--mib M] [--shape 8k|1472|256|64]... [--skip-mem] [--skip-udp] [--skip-group] [--profile]"
    );
    std::process::exit(2)
}

fn parse_args() -> Args {
    let mut a = Args {
        runs: 5,
        mib: 256,
        shapes: Vec::new(),
        mem: true,
        udp: true,
        group: true,
        profile: false,
    };
    let mut it = std::env::args().skip(1);
    let number = |flag: &str, v: Option<String>| -> usize {
        match v.as_deref().map(str::parse::<usize>) {
            Some(Ok(n)) if n > 0 => n,
            _ => usage(&format!("{flag} needs a positive integer")),
        }
    };
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--runs" => a.runs = number("--runs", it.next()),
            "--mib" => a.mib = number("--mib", it.next()),
            "--shape" => {
                let v = it.next().unwrap_or_default();
                match SHAPES.iter().find(|s| s.name == v) {
                    Some(s) => a.shapes.push(*s),
                    None => usage(&format!("unknown shape {v:?} (8k, 1472, 256 or 64)")),
                }
            }
            "--skip-mem" => a.mem = false,
            "--skip-udp" => a.udp = false,
            "--skip-group" => a.group = false,
            "--profile" => a.profile = true,
            // cargo bench passes --bench to every bench binary.
            "--bench" => {}
            other => usage(&format!("unknown argument {other:?}")),
        }
    }
    if a.shapes.is_empty() {
        a.shapes = SHAPES.to_vec();
    }
    a
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap_or(Path::new("."))
        .to_path_buf()
}

fn python() -> Option<PathBuf> {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"));
    let p = target.join("spead2-venv/bin/python");
    p.exists().then_some(p)
}

/// `mib` MiB of heaps of `shape`, packetized back to back.
fn make_bytes(shape: Shape, mib: usize) -> (Vec<u8>, u64) {
    let heaps = ((mib << 20) / shape.heap).max(1) as u64;
    let one = heap_to_bytes(&heap(shape.heap), 1, shape.packet()).expect("packetize");
    let mut out = Vec::with_capacity(one.len() * heaps as usize);
    for cnt in 1..=heaps {
        // The same packets with the heap cnt rewritten: packetizing each heap anew
        // would take longer than the benchmark.
        let start = out.len();
        out.extend_from_slice(&one);
        let mut pos = start;
        while pos < out.len() {
            let p = decode_packet(&out[pos..]).expect("packet");
            let size = p.size();
            let n = p.pointers.len() / 8;
            for k in 0..n {
                let at = pos + 8 + 8 * k;
                let raw = u64::from_be_bytes(out[at..at + 8].try_into().expect("8 bytes"));
                if raw >> 63 == 1 && (raw >> 48) & 0x7fff == 1 {
                    let v = (raw & !((1u64 << 48) - 1)) | cnt;
                    out[at..at + 8].copy_from_slice(&v.to_be_bytes());
                }
            }
            pos += size;
        }
    }
    let mut n = 0;
    let mut rest = &out[..];
    while !rest.is_empty() {
        let size = decode_packet(rest).expect("packet").size();
        rest = &rest[size..];
        n += 1;
    }
    (out, n)
}

#[derive(Debug, Clone, Copy)]
struct Rate {
    /// Wall-clock seconds.
    seconds: f64,
    /// CPU seconds (of the measuring thread; of the whole process for spead2, whose
    /// reader and consumer are separate threads).
    cpu: f64,
    heaps: u64,
    packets: u64,
}

impl Rate {
    fn mpps(&self) -> f64 {
        self.packets as f64 / self.seconds / 1e6
    }

    /// Packets per CPU-second, in millions: what the work costs, whatever else the
    /// machine is doing.
    fn mpps_cpu(&self) -> f64 {
        self.packets as f64 / self.cpu / 1e6
    }
}

/// Prefetches the cache line at the start of `data`.
fn prefetch(data: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    if !data.is_empty() {
        // SAFETY: PREFETCHT0 is a hint that never faults and changes no memory; the
        // address is inside `data`.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                data.as_ptr().cast(),
            );
        }
    }
}

/// CPU time of the calling thread, in seconds.
fn thread_cpu() -> f64 {
    cpu_clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU time of the whole process (every thread), in seconds.
fn process_cpu() -> f64 {
    cpu_clock(libc::CLOCK_PROCESS_CPUTIME_ID)
}

fn cpu_clock(clock: libc::clockid_t) -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a pointer to a live local.
    let r = unsafe { libc::clock_gettime(clock, &mut ts) };
    if r != 0 {
        return f64::NAN;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// "median (min-max)" of a series.
fn summary(v: &[f64], digits: usize) -> String {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if s.is_empty() {
        return "-".into();
    }
    let m = median(&mut s);
    format!(
        "{m:.digits$} ({:.digits$}-{:.digits$})",
        s[0],
        s[s.len() - 1]
    )
}

/// Ours from memory: `Stream::add_packets` 64 packets at a time (decode, assemble),
/// then the finished heaps popped and dropped (their buffers return to the pool).
fn ours_from_memory(bytes: &[u8]) -> Rate {
    let mut stream = Stream::new(StreamConfig::default());
    let start = Instant::now();
    let cpu = thread_cpu();
    let heaps = feed_all(&mut stream, bytes);
    let cpu = thread_cpu() - cpu;
    let seconds = start.elapsed().as_secs_f64();
    if std::env::var_os("SPEAD_BENCH_POOL").is_some() {
        eprintln!("{:?}", stream.stats().pool);
    }
    Rate {
        seconds,
        cpu,
        heaps,
        packets: stream.raw_stats().packets,
    }
}

/// Where each payload is and where it goes: (source offset, heap, offset in heap, length).
fn copy_table(bytes: &[u8]) -> Vec<(usize, u32, u32)> {
    let mut t = Vec::new();
    let mut pos = 0;
    while let Ok(p) = decode_packet(&bytes[pos..]) {
        let src = pos + p.size() - p.payload.len();
        t.push((src, p.payload_offset as u32, p.payload.len() as u32));
        pos += p.size();
    }
    t
}

/// The bound for any receiver that copies payload once: the copies alone, each
/// payload into its place in a heap buffer (reused, as ours reuses its pool's), with
/// the same prefetching and small-copy code as ours.
fn memcpy_bound(
    bytes: &[u8],
    table: &[(usize, u32, u32)],
    heap_size: usize,
    dest: &mut [u8],
) -> Rate {
    let start = Instant::now();
    let cpu = thread_cpu();
    let mut heaps = 0;
    let mut fetched = 0;
    for &(src, off, len) in table {
        let (off, len) = (off as usize, len as usize);
        // The same prefetch as ours (`Stream::add_packets`): 4 KiB ahead, for
        // packets up to 4 KiB.
        if len <= 4096 {
            let to = (src + 4096).min(bytes.len());
            while fetched < to {
                prefetch(&bytes[fetched.max(src)..]);
                fetched = (fetched.max(src) + 64).min(to);
            }
        }
        copy_payload(&mut dest[off..off + len], &bytes[src..src + len]);
        heaps += u64::from(off + len == heap_size);
    }
    std::hint::black_box(&dest);
    let cpu = thread_cpu() - cpu;
    Rate {
        seconds: start.elapsed().as_secs_f64(),
        cpu,
        heaps,
        packets: table.len() as u64,
    }
}

fn rate_from_json(v: &serde_json::Value) -> Rate {
    Rate {
        seconds: v["seconds"].as_f64().unwrap_or(f64::NAN),
        cpu: v["cpu"].as_f64().unwrap_or(f64::NAN),
        heaps: v["heaps"].as_u64().unwrap_or(0),
        packets: v["packets"].as_u64().unwrap_or(0),
    }
}

/// A long-lived spead2 helper process answering one JSON line per request line.
struct Py {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Py {
    fn spawn(py: &Path, args: &[&str]) -> Option<Self> {
        let mut child = Command::new(py)
            .arg(root().join("tests/py/spead2_tool.py"))
            .args(args)
            .env("OPENBLAS_NUM_THREADS", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .ok()?;
        let stdin = child.stdin.take()?;
        let stdout = BufReader::new(child.stdout.take()?);
        Some(Self {
            child,
            stdin,
            stdout,
        })
    }

    fn ask(&mut self, line: &str) -> Option<serde_json::Value> {
        writeln!(self.stdin, "{line}").ok()?;
        self.stdin.flush().ok()?;
        self.read()
    }

    fn read(&mut self) -> Option<serde_json::Value> {
        let mut line = String::new();
        self.stdout.read_line(&mut line).ok()?;
        serde_json::from_str(&line).ok()
    }
}

impl Drop for Py {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin);
        let _ = self.child.wait();
    }
}

fn mem_report(args: &Args, py: Option<&Path>) {
    println!(
        "Heap assembly from memory: {} MiB of heaps per pass, {} runs, each run every contender in turn; Mpkt/s median (min-max)",
        args.mib, args.runs
    );
    for &shape in &args.shapes {
        let (bytes, packets) = make_bytes(shape, args.mib);
        let table = copy_table(&bytes);
        let mut dest = vec![0u8; shape.heap];
        let heaps = (args.mib << 20) / shape.heap;
        println!(
            " {}: {heaps} heaps, {packets} packets, {:.0} MiB of packets",
            shape.label(),
            bytes.len() as f64 / (1 << 20) as f64
        );
        let mut server = py.and_then(|py| {
            let mut s = Py::spawn(py, &["bench-mem-serve", "4", &shape.heap.to_string()])?;
            writeln!(s.stdin, "{}", bytes.len()).ok()?;
            s.stdin.write_all(&bytes).ok()?;
            s.stdin.flush().ok()?;
            s.read()?;
            Some(s)
        });
        // Per contender: wall-clock and per-CPU-second rates; ratios within each run.
        let names = [
            "bound: one memcpy per payload",
            "ours",
            "spead2 4.5.1",
            "spead2 4.5.1 + MemoryPool",
        ];
        let mut wall: [Vec<f64>; 4] = Default::default();
        let mut cpu: [Vec<f64>; 4] = Default::default();
        let mut bad = false;
        for _ in 0..args.runs {
            let mut got = vec![
                Some(memcpy_bound(&bytes, &table, shape.heap, &mut dest)),
                Some(ours_from_memory(&bytes)),
            ];
            if let Some(s) = server.as_mut() {
                for pool in ["0", "1"] {
                    got.push(s.ask(pool).map(|v| rate_from_json(&v)));
                }
            }
            for (k, r) in got.iter().enumerate() {
                if let Some(r) = r {
                    bad |= r.heaps != heaps as u64;
                    wall[k].push(r.mpps());
                    cpu[k].push(r.mpps_cpu());
                }
            }
        }
        if bad {
            println!("  WARNING: a contender did not assemble every heap");
        }
        println!(
            "  {:<30} {:>22} {:>22}",
            "Mpkt/s", "wall clock", "per CPU-second"
        );
        for k in 0..4 {
            if !wall[k].is_empty() {
                println!(
                    "  {:<30} {:>22} {:>22}",
                    names[k],
                    summary(&wall[k], 2),
                    summary(&cpu[k], 2)
                );
            }
        }
        let ratio =
            |a: &[f64], b: &[f64]| -> Vec<f64> { a.iter().zip(b).map(|(x, y)| x / y).collect() };
        for (k, name) in [
            (0, "ours/bound"),
            (2, "ours/spead2"),
            (3, "ours/spead2+pool"),
        ] {
            if wall[k].len() == wall[1].len() {
                println!(
                    "  ratio {:<24} {:>22} {:>22}",
                    name,
                    summary(&ratio(&wall[1], &wall[k]), 3),
                    summary(&ratio(&cpu[1], &cpu[k]), 3)
                );
            }
        }
    }
}

/// Our sender (rate in bytes/s, 0 = unlimited) to `dest`: `heaps` heaps, then stops.
fn udp_send(dest: SocketAddr, shape: Shape, heaps: u64, first: u64, rate: f64) -> f64 {
    let mut cfg = UdpSendConfig::new(vec![dest]);
    cfg.buffer_size = 4 << 20;
    let mut sender = Sender::new(
        UdpSender::new(&cfg).expect("socket"),
        shape.packet(),
        RateLimiter::new(rate, 65536, 1.05),
        GroupMode::Serial,
    );
    let h = heap(shape.heap);
    let start = Instant::now();
    for cnt in first..first + heaps {
        sender
            .send_heaps(&[HeapReference {
                heap: &h,
                cnt,
                substream: 0,
            }])
            .expect("send");
    }
    let sent = start.elapsed().as_secs_f64();
    let mut stop = Heap::new(Flavour::SPEAD_64_48);
    stop.add_end();
    for _ in 0..5 {
        std::thread::sleep(Duration::from_millis(50));
        let _ = sender.send_heaps(&[HeapReference {
            heap: &stop,
            cnt: first + heaps,
            substream: 0,
        }]);
    }
    sent
}

/// Our pair: receiver thread, sender here.
fn ours_udp_pair(shape: Shape, heaps: u64, rate: f64) -> Rate {
    let (tx, rx) = std::sync::mpsc::channel();
    let recv = std::thread::spawn(move || {
        let mut cfg = UdpRecvConfig::new("127.0.0.1:0".parse().expect("addr"));
        cfg.buffer_size = 32 << 20;
        cfg.max_packet_size = shape.packet() + 64;
        let mut rx = UdpReceiver::bind(&cfg).expect("bind");
        let _ = tx.send(rx.local_addr().expect("addr"));
        let mut stream = Stream::new(StreamConfig::default());
        let (mut first, mut last) = (None, Instant::now());
        let mut complete = 0;
        let mut idle = 0;
        while !stream.is_stopped() && idle < 30 {
            let n = rx.pump(&mut stream).expect("recv");
            idle = if n == 0 { idle + 1 } else { 0 };
            while let Some(h) = stream.pop_heap() {
                first.get_or_insert_with(Instant::now);
                last = Instant::now();
                complete += u64::from(h.complete);
            }
        }
        Rate {
            seconds: first.map_or(f64::NAN, |f| (last - f).as_secs_f64()),
            cpu: f64::NAN,
            heaps: complete,
            packets: stream.raw_stats().packets,
        }
    });
    let dest = rx.recv().expect("receiver address");
    let cpu = process_cpu();
    udp_send(dest, shape, heaps, 1, rate);
    let mut r = recv.join().expect("receiver");
    r.cpu = process_cpu() - cpu;
    r
}

/// A pair's lossless rate in bytes of heap payload per second: unthrottled if that
/// loses nothing, else the best passing rate of a bisection on the send rate; with the
/// payload bytes per CPU-second of that trial (sender, receiver and the kernel's work
/// for them, as the processes were charged).
fn lossless(
    mut trial: impl FnMut(f64) -> Option<Rate>,
    heaps: u64,
    heap_size: usize,
) -> Option<(f64, f64)> {
    let ok = |r: &Rate| r.heaps == heaps && r.seconds.is_finite() && r.seconds > 0.0;
    let payload = |r: &Rate| r.heaps as f64 * heap_size as f64 / r.seconds;
    let per_cpu = |r: &Rate| r.heaps as f64 * heap_size as f64 / r.cpu;
    let verbose = std::env::var_os("SPEAD_BENCH_VERBOSE").is_some();
    let mut trial = |rate: f64| {
        let r = trial(rate);
        if verbose {
            eprintln!("    trial at {:.2} GB/s: {r:?}", rate / 1e9);
        }
        r
    };
    let first = trial(0.0)?;
    if ok(&first) {
        return Some((payload(&first), per_cpu(&first)));
    }
    // The unthrottled receive rate is an upper bound on what passes.
    let mut hi = if first.seconds.is_finite() && first.heaps > 0 {
        payload(&first) * 1.2
    } else {
        10e9
    };
    let mut lo = 0.0;
    let mut best: Option<(f64, f64)> = None;
    for _ in 0..6 {
        let mid = (lo + hi) / 2.0;
        let r = trial(mid)?;
        if ok(&r) {
            lo = mid;
            if best.map_or(true, |b| payload(&r) > b.0) {
                best = Some((payload(&r), per_cpu(&r)));
            }
        } else {
            hi = mid;
        }
    }
    best.or(Some((0.0, f64::NAN)))
}

fn udp_report(args: &Args, py: Option<&Path>) {
    println!(
        "UDP loopback, sender and receiver pairs: lossless rate (every heap complete) in GB/s of heap payload, and GB of payload per CPU-second of the pair's process; {} runs",
        args.runs
    );
    for &shape in args.shapes.iter().filter(|s| s.heap == 1 << 20) {
        let heaps = 256u64;
        println!(" {}: {heaps} heaps per trial", shape.label());
        let mut server = py.and_then(|py| Py::spawn(py, &["bench-udp-pair-serve"]));
        let mut wall: [Vec<f64>; 2] = Default::default();
        let mut cpu: [Vec<f64>; 2] = Default::default();
        for _ in 0..args.runs {
            let o = lossless(
                |rate| Some(ours_udp_pair(shape, heaps, rate)),
                heaps,
                shape.heap,
            );
            let t = server.as_mut().and_then(|s| {
                lossless(
                    |rate| {
                        s.ask(&format!("{rate} {heaps} {} {}", shape.heap, shape.packet()))
                            .map(|v| rate_from_json(&v))
                    },
                    heaps,
                    shape.heap,
                )
            });
            // Ratios need both in the same run.
            if let (Some(o), Some(t)) = (o, t) {
                for (k, r) in [o, t].iter().enumerate() {
                    wall[k].push(r.0 / 1e9);
                    cpu[k].push(r.1 / 1e9);
                }
            } else if let Some(o) = o {
                wall[0].push(o.0 / 1e9);
                cpu[0].push(o.1 / 1e9);
            }
        }
        println!(
            "  {:<30} {:>22} {:>22}",
            "GB/s", "lossless", "per CPU-second"
        );
        for (k, name) in ["ours pair", "spead2 4.5.1 pair"].iter().enumerate() {
            if !wall[k].is_empty() {
                println!(
                    "  {:<30} {:>22} {:>22}",
                    name,
                    summary(&wall[k], 2),
                    summary(&cpu[k], 2)
                );
            }
        }
        if wall[1].len() == wall[0].len() && !wall[1].is_empty() {
            let ratio = |a: &[f64], b: &[f64]| -> Vec<f64> {
                a.iter().zip(b).map(|(x, y)| x / y).collect()
            };
            println!(
                "  {:<30} {:>22} {:>22}",
                "ratio ours/spead2",
                summary(&ratio(&wall[0], &wall[1]), 3),
                summary(&ratio(&cpu[0], &cpu[1]), 3)
            );
        }
    }
}

fn group_report(args: &Args) {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut counts = vec![1, 2, cores];
    counts.sort_unstable();
    counts.dedup();
    println!(
        "Chunk-stream group (lossless, 4 chunks of 16 MiB), one stream per reader thread fed from memory, {} MiB of heaps per pass split among the streams, {} runs; Mpkt/s median (min-max)",
        args.mib, args.runs
    );
    for &shape in &args.shapes {
        println!(" {}:", shape.label());
        let inputs: Vec<Vec<Vec<u8>>> = counts
            .iter()
            .map(|&n| group_inputs(shape, args.mib, n))
            .collect();
        let mut bounds: Vec<GroupBound<'_>> = counts
            .iter()
            .zip(&inputs)
            .map(|(&n, input)| GroupBound::new(shape, input, n))
            .collect();
        // The bound: each thread copies its payloads into chunk-sized buffers as the
        // group places them. Each reader feeds its stream as a memory reader does
        // (`add_packets`, 64 packets at a time) and, for comparison, one decoded
        // packet at a time (`add_decoded`, as a datagram transport does).
        let modes = [
            "bound: one memcpy per payload",
            "add_packets",
            "add_decoded",
        ];
        let rows = counts.len() * modes.len();
        let (mut wall, mut cpu, mut ratio) =
            (vec![vec![]; rows], vec![vec![]; rows], vec![vec![]; rows]);
        for _ in 0..args.runs {
            for (k, &n) in counts.iter().enumerate() {
                let bound = bounds[k].run();
                for (m, _) in modes.iter().enumerate() {
                    let (w, c) = match m {
                        0 => bound,
                        _ => group_run(shape, args.mib, &inputs[k], n, m == 1),
                    };
                    let row = m * counts.len() + k;
                    wall[row].push(w);
                    cpu[row].push(c);
                    ratio[row].push(w / bound.0);
                }
            }
        }
        println!(
            "  {:<45} {:>20} {:>20} {:>18}",
            "Mpkt/s", "wall clock", "per CPU-second", "/ bound (same n)"
        );
        for (m, mode) in modes.iter().enumerate() {
            for (k, &n) in counts.iter().enumerate() {
                let row = m * counts.len() + k;
                println!(
                    "  {:<45} {:>20} {:>20} {:>18}",
                    format!("{n} thread(s), {mode}"),
                    summary(&wall[row], 2),
                    summary(&cpu[row], 2),
                    if m == 0 {
                        "-".into()
                    } else {
                        summary(&ratio[row], 2)
                    }
                );
            }
        }
    }
}

/// The bound for a group of `n` readers: `n` threads, each copying the payloads of
/// its share of the heaps to where the group places them, in one set of chunk-sized
/// buffers (as many as the group cycles through, touched beforehand), each thread
/// writing its own heaps of them as the group's streams do.
struct GroupBound<'a> {
    inputs: &'a [Vec<u8>],
    heap: usize,
    /// Per thread: (source offset, heap slot of the thread's, offset in the heap,
    /// length) of each payload.
    tables: Vec<Vec<(usize, usize, usize, usize)>>,
    dest: Vec<u8>,
}

impl<'a> GroupBound<'a> {
    fn new(shape: Shape, inputs: &'a [Vec<u8>], n: usize) -> Self {
        let hpc = GROUP_CHUNK_BYTES / shape.heap;
        let tables = inputs
            .iter()
            .map(|input| {
                let mut t = Vec::new();
                let mut pos = 0;
                while let Ok(p) = decode_packet(&input[pos..]) {
                    let cnt = (p.heap_cnt - 1) as usize;
                    // Heap slot `s` of the buffers belongs to thread `s % n` (the
                    // thread whose heaps go there: `hpc` is a multiple of `n`).
                    let slot = (cnt / hpc) % GROUP_CHUNKS * hpc + cnt % hpc;
                    let src = pos + p.size() - p.payload.len();
                    t.push((src, slot / n, p.payload_offset as usize, p.payload.len()));
                    pos += p.size();
                }
                t
            })
            .collect();
        Self {
            inputs,
            heap: shape.heap,
            tables,
            dest: vec![1u8; shape.heap * hpc * GROUP_CHUNKS],
        }
    }

    /// Wall-clock and per-CPU-second Mpkt/s of one pass.
    fn run(&mut self) -> (f64, f64) {
        let n = self.tables.len();
        let mut slots: Vec<Vec<&mut [u8]>> = (0..n).map(|_| Vec::new()).collect();
        for (s, heap) in self.dest.chunks_mut(self.heap).enumerate() {
            slots[s % n].push(heap);
        }
        let start = Instant::now();
        let cpu = process_cpu();
        let packets: usize = std::thread::scope(|scope| {
            let handles: Vec<_> = self
                .tables
                .iter()
                .zip(self.inputs)
                .zip(slots)
                .map(|((table, bytes), mut heaps)| {
                    scope.spawn(move || {
                        let mut fetched = 0;
                        for &(src, slot, off, len) in table {
                            // The same prefetch as `memcpy_bound` and ours.
                            if len <= 4096 {
                                let to = (src + 4096).min(bytes.len());
                                while fetched < to {
                                    prefetch(&bytes[fetched.max(src)..]);
                                    fetched = (fetched.max(src) + 64).min(to);
                                }
                            }
                            copy_payload(&mut heaps[slot][off..off + len], &bytes[src..src + len]);
                        }
                        std::hint::black_box(&heaps);
                        table.len()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap_or(0)).sum()
        });
        let seconds = start.elapsed().as_secs_f64();
        let cpu = process_cpu() - cpu;
        (packets as f64 / seconds / 1e6, packets as f64 / cpu / 1e6)
    }
}

/// Chunks a group pass cycles through.
const GROUP_CHUNKS: usize = 6;

/// Payload bytes of a chunk in the group benchmark (16 heaps of 1 MiB, 4096 of 4 KiB).
const GROUP_CHUNK_BYTES: usize = 16 << 20;

/// The packets of stream `k` of `n`: heaps `cnt` with `cnt % n == k`.
fn group_inputs(shape: Shape, mib: usize, n: usize) -> Vec<Vec<u8>> {
    let (all, _) = make_bytes(shape, mib);
    let mut out = vec![Vec::with_capacity(all.len() / n + 1); n];
    let mut rest = &all[..];
    while let Ok(p) = decode_packet(rest) {
        let size = p.size();
        out[(p.heap_cnt % n as u64) as usize].extend_from_slice(&rest[..size]);
        rest = &rest[size..];
    }
    out
}

/// Packets per second a lossless group of `n` streams, each on its own thread, placed
/// into chunks (recycled through a free list, as a ring would).
fn group_run(shape: Shape, mib: usize, inputs: &[Vec<u8>], n: usize, batched: bool) -> (f64, f64) {
    let hpc = (GROUP_CHUNK_BYTES / shape.heap) as u64;
    let chunk_size = shape.heap * hpc as usize;
    // The chunks the group will cycle through, allocated and touched beforehand: the
    // pass measures steady-state reception, not first-touch page faults.
    let free: Arc<Mutex<Vec<Chunk>>> = Arc::new(Mutex::new(
        (0..GROUP_CHUNKS)
            .map(|_| {
                let mut c = Chunk::new(chunk_size, hpc as usize, 0);
                c.data.fill(1);
                c
            })
            .collect(),
    ));
    let complete = Arc::new(AtomicU64::new(0));
    let (f1, f2, c2) = (Arc::clone(&free), Arc::clone(&free), Arc::clone(&complete));
    let mut cfg = ChunkStreamGroupConfig::new(
        move |_, _| {
            let c = f1.lock().ok().and_then(|mut f| f.pop());
            Some(c.unwrap_or_else(|| Chunk::new(chunk_size, hpc as usize, 0)))
        },
        move |mut c: Chunk, _| {
            let whole = c.present.iter().filter(|&&p| p != 0).count();
            c2.fetch_add(whole as u64, Ordering::Relaxed);
            c.present.fill(0);
            if let Ok(mut f) = f2.lock() {
                f.push(c);
            }
        },
    );
    cfg.max_chunks = 4;
    cfg.eviction_mode = EvictionMode::Lossless;
    let group = ChunkStreamGroup::new(cfg).expect("group");
    let streams: Vec<_> = (0..n)
        .map(|k| {
            let mut cc = ChunkStreamConfig::new(move |d: &mut PlaceData<'_>| {
                let cnt = d.packet.heap_cnt - 1;
                d.chunk_id = (cnt / hpc) as i64;
                d.heap_index = (cnt % hpc) as usize;
                d.heap_offset = d.heap_index * shape.heap;
            });
            cc.max_chunks = 4;
            let config = StreamConfig {
                stream_id: k,
                ..StreamConfig::default()
            };
            group.add_stream(config, cc).expect("stream")
        })
        .collect();
    let start = Instant::now();
    let cpu = process_cpu();
    let packets: u64 = std::thread::scope(|scope| {
        let handles: Vec<_> = streams
            .into_iter()
            .zip(inputs)
            .map(|(mut s, input)| {
                scope.spawn(move || {
                    let mut rest = &input[..];
                    if batched {
                        while !rest.is_empty() {
                            let used = s.add_packets(rest, 64);
                            if used == 0 {
                                break;
                            }
                            rest = &rest[used..];
                        }
                    } else {
                        while let Ok(p) = decode_packet(rest) {
                            rest = &rest[p.size()..];
                            let _ = s.add_decoded(&p);
                        }
                    }
                    s.stop();
                    s.raw_stats().packets
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or(0)).sum()
    });
    let seconds = start.elapsed().as_secs_f64();
    let cpu = process_cpu() - cpu;
    let expected = ((mib << 20) / shape.heap) as u64;
    if complete.load(Ordering::Relaxed) != expected {
        println!(
            "  WARNING: {} of {expected} heaps complete in the chunks",
            complete.load(Ordering::Relaxed)
        );
    }
    drop(group);
    (packets as f64 / seconds / 1e6, packets as f64 / cpu / 1e6)
}

fn main() {
    let args = parse_args();
    if args.profile {
        for &shape in &args.shapes {
            let (bytes, _) = make_bytes(shape, args.mib);
            for _ in 0..args.runs {
                let r = ours_from_memory(&bytes);
                println!(
                    "{}: ours {:.2} Mpkt/s, {:.2} per CPU-second",
                    shape.label(),
                    r.mpps(),
                    r.mpps_cpu()
                );
            }
        }
        return;
    }
    let py = python();
    if py.is_none() {
        println!(
            "spead2 venv not found: run `cargo test -p workspace-tests` first for spead2 numbers"
        );
    }
    if args.mem {
        mem_report(&args, py.as_deref());
    }
    if args.udp {
        udp_report(&args, py.as_deref());
    }
    if args.group {
        group_report(&args);
    }
}
