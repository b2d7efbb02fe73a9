//! `spead-recv SOURCE...`: receive SPEAD heaps (like spead2's `spead2_recv`).
//!
//! Sources: `udp:HOST:PORT` (multicast when the address is), `tcp:HOST:PORT` (listen,
//! accept one connection), `file:PATH` (packets back to back), `pcap:PATH[?GROUP:PORT]`
//! (the UDP payloads of a pcap or pcapng capture, optionally only those sent to
//! GROUP:PORT, either of which may be `*`). With `--json`, prints one JSON object per
//! heap and the counters at exit.

use std::fs::File;
use std::io::{self, BufReader, Write};
use std::net::{Ipv4Addr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use spead::json::{heap_json, stats_json};
use spead::pcap::{PcapSource, PcapSpec};
use spead::recv::{MemoryPool, Stream, StreamConfig};
use spead::transport::{ByteStreamReader, Endpoint, ThreadedReceiver, UdpReceiver, UdpRecvConfig};

#[derive(Parser, Debug, Clone)]
#[command(about = "Receive SPEAD heaps (spead2-compatible)")]
struct Args {
    /// Sources: udp:HOST:PORT, tcp:HOST:PORT, file:PATH, or pcap:PATH[?GROUP:PORT] for
    /// the UDP payloads of a pcap/pcapng capture (Ethernet, Linux SLL/SLL2 or raw IPv4;
    /// IPv4 only), optionally only those sent to GROUP:PORT (either may be *, e.g.
    /// pcap:obs.pcap?*:7148). Frames dropped by the pcap reader are reported on stderr.
    #[arg(required = true)]
    sources: Vec<String>,
    /// Print heaps and counters as JSON lines.
    #[arg(long)]
    json: bool,
    /// Maximum packet size accepted.
    #[arg(long, default_value_t = 9200)]
    packet: usize,
    /// Socket receive buffer size in bytes.
    #[arg(long, default_value_t = 8 << 20)]
    buffer: usize,
    /// Live heaps per substream.
    #[arg(long = "max-heaps", default_value_t = 4)]
    max_heaps: usize,
    /// Substreams.
    #[arg(long, default_value_t = 1)]
    substreams: usize,
    /// Interface address for multicast.
    #[arg(long)]
    bind: Option<Ipv4Addr>,
    /// Stop after this many heaps.
    #[arg(long)]
    heaps: Option<u64>,
    /// Accept packets of a heap out of order.
    #[arg(long = "allow-out-of-order")]
    allow_out_of_order: bool,
    /// Deliver incomplete heaps.
    #[arg(long)]
    incomplete: bool,
    /// Keep going after a stop heap.
    #[arg(long = "ignore-stop")]
    ignore_stop: bool,
    /// Largest heap accepted, in bytes.
    #[arg(long = "max-heap-size", default_value_t = 256 << 20)]
    max_heap_size: u64,
    /// Heaps queued between the receive worker and the printer.
    #[arg(long = "ring-heaps", default_value_t = 4)]
    ring_heaps: usize,
    /// Heap buffers kept in the memory pool.
    #[arg(long = "mem-pool", default_value_t = 16)]
    mem_pool: usize,
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);
/// A pcap source failed part way (the heaps before the failure were still delivered).
static PCAP_FAILED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::Relaxed);
}

/// One source named on the command line.
enum SourceSpec {
    Endpoint(Endpoint),
    Pcap(PcapSpec),
}

impl std::str::FromStr for SourceSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.strip_prefix("pcap:") {
            Some(rest) => rest
                .parse()
                .map(Self::Pcap)
                .map_err(|e| format!("{s}: {e}")),
            None => s.parse().map(Self::Endpoint).map_err(|e| e.to_string()),
        }
    }
}

/// One opened source.
enum Source {
    Udp(UdpReceiver),
    Bytes(ByteStreamReader<Box<dyn io::Read>>),
    Pcap(Box<PcapSource<BufReader<File>>>, String),
}

fn open(spec: &SourceSpec, args: &Args, many: bool) -> io::Result<Source> {
    let ep = match spec {
        SourceSpec::Endpoint(ep) => ep,
        SourceSpec::Pcap(p) => {
            let name = format!("pcap:{}", p.path.display());
            let source = PcapSource::open(&p.path, p.filter).map_err(|e| {
                let msg = format!("{name}: {e}");
                io::Error::new(io::Error::from(e).kind(), msg)
            })?;
            return Ok(Source::Pcap(Box::new(source), name));
        }
    };
    Ok(match ep {
        Endpoint::Udp(addr) => {
            let mut cfg = UdpRecvConfig::new(*addr);
            cfg.buffer_size = args.buffer;
            cfg.max_packet_size = args.packet;
            cfg.interface = args.bind;
            if many {
                cfg.read_timeout = Some(Duration::from_millis(5));
            }
            let rx = UdpReceiver::bind(&cfg)?;
            eprintln!("spead-recv: listening on udp:{}", rx.local_addr()?);
            Source::Udp(rx)
        }
        Endpoint::Tcp(addr) => {
            let listener = TcpListener::bind(addr)?;
            eprintln!("spead-recv: listening on tcp:{}", listener.local_addr()?);
            let (conn, _) = listener.accept()?;
            Source::Bytes(ByteStreamReader::new(Box::new(conn), args.packet))
        }
        Endpoint::File(path) => Source::Bytes(ByteStreamReader::new(
            Box::new(BufReader::new(File::open(path)?)),
            args.packet,
        )),
    })
}

fn print_heap(out: &mut impl Write, heap: &spead::recv::Heap, json: bool) -> io::Result<()> {
    if json {
        let line = serde_json::to_string(&heap_json(heap)).map_err(io::Error::other)?;
        writeln!(out, "{line}")
    } else {
        writeln!(
            out,
            "Received heap {} ({}, {} items, {} bytes)",
            heap.cnt,
            if heap.complete {
                "complete"
            } else {
                "incomplete"
            },
            heap.items().len(),
            heap.received_length
        )
    }
}

fn main() {
    let args = Args::parse();
    let endpoints: Vec<SourceSpec> = match args.sources.iter().map(|s| s.parse()).collect() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("spead-recv: {e}");
            std::process::exit(2);
        }
    };
    // SAFETY: installs a handler that only stores to an atomic (async-signal-safe).
    unsafe {
        libc::signal(
            libc::SIGINT,
            on_sigint as extern "C" fn(libc::c_int) as libc::sighandler_t,
        );
    }
    let config = StreamConfig {
        max_heaps: args.max_heaps,
        substreams: args.substreams,
        allow_out_of_order: args.allow_out_of_order,
        stop_on_stop_item: !args.ignore_stop,
        deliver_incomplete: args.incomplete,
        max_heap_size: args.max_heap_size,
        pool: MemoryPool::new(args.mem_pool),
        ..StreamConfig::default()
    };
    let stop = Arc::new(AtomicBool::new(false));
    let worker_stop = Arc::clone(&stop);
    let worker_args = args.clone();
    let receiver = ThreadedReceiver::spawn(config, args.ring_heaps, move || {
        let many = endpoints.len() > 1;
        let mut sources = endpoints
            .iter()
            .map(|ep| open(ep, &worker_args, many))
            .collect::<io::Result<Vec<Source>>>()?;
        Ok(move |stream: &mut Stream| -> io::Result<bool> {
            if INTERRUPTED.load(Ordering::Relaxed) || worker_stop.load(Ordering::Relaxed) {
                return Ok(false);
            }
            let mut alive = false;
            for source in &mut sources {
                match source {
                    Source::Udp(rx) => {
                        rx.pump(stream)?;
                        alive = true;
                    }
                    Source::Bytes(reader) => {
                        if !reader.is_done() {
                            reader.pump(stream)?;
                            alive = true;
                        }
                    }
                    Source::Pcap(pcap, name) => {
                        if !pcap.is_done() {
                            // A broken file ends this source only: heaps assembled so
                            // far are still delivered, and the exit status says so.
                            if let Err(e) = pcap.pump(stream, 64) {
                                eprintln!("spead-recv: {name}: {e}");
                                PCAP_FAILED.store(true, Ordering::Relaxed);
                            }
                            if pcap.is_done() {
                                eprintln!("spead-recv: {name}: {}", pcap.stats());
                            }
                            alive = true;
                        }
                    }
                }
            }
            Ok(alive)
        })
    });
    let mut out = io::stdout().lock();
    let mut printed = 0u64;
    let mut status = 0;
    while let Some(heap) = receiver.next_heap() {
        if print_heap(&mut out, &heap, args.json).is_err() {
            status = 1;
            break;
        }
        printed += 1;
        if args.heaps.is_some_and(|n| printed >= n) {
            stop.store(true, Ordering::Relaxed);
            break;
        }
    }
    let stats = match receiver.join() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("spead-recv: {e}");
            std::process::exit(1);
        }
    };
    if args.json {
        let _ = writeln!(out, "{}", stats_json(&stats));
    } else if let Some(obj) = stats_json(&stats).get("stats").and_then(|v| v.as_object()) {
        for (k, v) in obj {
            let _ = writeln!(out, "{k}: {v}");
        }
    }
    let _ = out.flush();
    if PCAP_FAILED.load(Ordering::Relaxed) {
        status = 1;
    }
    std::process::exit(status);
}
