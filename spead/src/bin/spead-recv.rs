//! `spead-recv SOURCE...`: receive SPEAD heaps (like spead2's `spead2_recv`).
//!
//! Sources: `udp:HOST:PORT` (multicast when the address is), `tcp:HOST:PORT` (listen,
//! accept one connection), `file:PATH` (packets back to back). With `--json`, prints
//! one JSON object per heap and the counters at exit.

use std::fs::File;
use std::io::{self, BufReader, Write};
use std::net::{Ipv4Addr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use clap::Parser;
use spead::json::{heap_json, stats_json};
use spead::recv::{MemoryPool, Stream, StreamConfig};
use spead::transport::{ByteStreamReader, Endpoint, UdpReceiver, UdpRecvConfig};

#[derive(Parser, Debug)]
#[command(about = "Receive SPEAD heaps (spead2-compatible)")]
struct Args {
    /// Sources: udp:HOST:PORT, tcp:HOST:PORT or file:PATH.
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
    /// Heap buffers kept in the memory pool.
    #[arg(long = "mem-pool", default_value_t = 16)]
    mem_pool: usize,
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::Relaxed);
}

struct Shared {
    stream: Stream,
    printed: u64,
    limit: Option<u64>,
    json: bool,
}

impl Shared {
    fn drain(&mut self, out: &mut impl Write) -> io::Result<()> {
        while let Some(heap) = self.stream.pop_heap() {
            self.printed += 1;
            if self.json {
                let line = serde_json::to_string(&heap_json(&heap)).map_err(io::Error::other)?;
                writeln!(out, "{line}")?;
            } else {
                let items = heap.items();
                writeln!(
                    out,
                    "Received heap {} ({}, {} items, {} bytes)",
                    heap.cnt,
                    if heap.complete {
                        "complete"
                    } else {
                        "incomplete"
                    },
                    items.len(),
                    heap.received_length
                )?;
            }
            if self.limit.is_some_and(|l| self.printed >= l) {
                self.stream.stop();
            }
        }
        Ok(())
    }

    fn done(&self) -> bool {
        self.stream.is_stopped() || INTERRUPTED.load(Ordering::Relaxed)
    }
}

fn lock(s: &Mutex<Shared>) -> std::sync::MutexGuard<'_, Shared> {
    s.lock().unwrap_or_else(PoisonError::into_inner)
}

fn run_source(ep: Endpoint, args: &Args, shared: &Mutex<Shared>) -> io::Result<()> {
    match ep {
        Endpoint::Udp(addr) => {
            let mut cfg = UdpRecvConfig::new(addr);
            cfg.buffer_size = args.buffer;
            cfg.max_packet_size = args.packet;
            cfg.interface = args.bind;
            let mut rx = UdpReceiver::bind(&cfg)?;
            eprintln!("spead-recv: listening on udp:{}", rx.local_addr()?);
            while !lock(shared).done() {
                let n = rx.recv_batch()?;
                let mut g = lock(shared);
                for i in 0..n {
                    match rx.datagram(i) {
                        Some(d) => {
                            let _ = g.stream.add_datagram(d);
                        }
                        None => g.stream.stats_mut().packets_malformed += 1,
                    }
                }
                g.stream.note_batch(n);
                g.drain(&mut io::stdout().lock())?;
            }
        }
        Endpoint::Tcp(addr) => {
            let listener = TcpListener::bind(addr)?;
            eprintln!("spead-recv: listening on tcp:{}", listener.local_addr()?);
            let (conn, _) = listener.accept()?;
            let mut reader = ByteStreamReader::new(conn, args.packet);
            while !reader.is_done() && !lock(shared).done() {
                let mut g = lock(shared);
                reader.pump(&mut g.stream)?;
                g.drain(&mut io::stdout().lock())?;
            }
        }
        Endpoint::File(path) => {
            let file = BufReader::new(File::open(path)?);
            let mut reader = ByteStreamReader::new(file, args.packet);
            while !reader.is_done() && !lock(shared).done() {
                let mut g = lock(shared);
                reader.pump(&mut g.stream)?;
                g.drain(&mut io::stdout().lock())?;
            }
        }
    }
    Ok(())
}

fn main() {
    let args = Args::parse();
    let endpoints: Vec<Endpoint> = match args.sources.iter().map(|s| s.parse()).collect() {
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
    let shared = Arc::new(Mutex::new(Shared {
        stream: Stream::new(config),
        printed: 0,
        limit: args.heaps,
        json: args.json,
    }));
    let mut status = 0;
    std::thread::scope(|scope| {
        let handles: Vec<_> = endpoints
            .into_iter()
            .map(|ep| {
                let shared = &shared;
                let args = &args;
                scope.spawn(move || run_source(ep, args, shared))
            })
            .collect();
        for h in handles {
            match h.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    eprintln!("spead-recv: {e}");
                    status = 1;
                }
                Err(_) => status = 1,
            }
            // One source ending (EOF) ends the run once all have.
        }
    });
    let mut g = lock(&shared);
    g.stream.stop();
    let mut out = io::stdout().lock();
    let _ = g.drain(&mut out);
    let stats = g.stream.stats();
    if args.json {
        let _ = writeln!(out, "{}", stats_json(&stats));
    } else if let Some(obj) = stats_json(&stats).get("stats").and_then(|v| v.as_object()) {
        for (k, v) in obj {
            let _ = writeln!(out, "{k}: {v}");
        }
    }
    let _ = out.flush();
    std::process::exit(status);
}
