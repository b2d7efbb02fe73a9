//! `spead-recv SOURCE...`: receive SPEAD heaps (like spead2's `spead2_recv`).
//!
//! Sources: `udp:HOST:PORT` (multicast when the address is), `tcp:HOST:PORT` (listen,
//! accept one connection), `file:PATH` (packets back to back), `pcap:PATH[?GROUP:PORT]`
//! (the UDP payloads of a pcap or pcapng capture, optionally only those sent to
//! GROUP:PORT, either of which may be `*`), `ibv:ADDRESS:PORT` (an IPv4 endpoint through
//! the verbs receiver, raw or UD, on real verbs or the simulator: a multicast group, or
//! with raw also a unicast address of the interface or `0.0.0.0`). As in `spead2_recv`,
//! `SPEAD2_IBV_INTERFACE` set to an IPv4 address turns `udp:` sources of IPv4 endpoints
//! into ibverbs readers on that interface (`--bind` wins), in builds with `hw`. With `--json`, prints
//! one JSON object per heap and the counters at exit.
//!
//! `--replay PATH` builds a simulated fabric (mlx5 for raw, rxe for UD), injects the
//! capture at its recorded times as if a sender host sent it, and runs the unchanged
//! verbs receiver on a receiver host (10.77.0.2) for the `ibv:` endpoints given, or for
//! every destination of the capture (unicast ones moved to group 239.x.y.z), with
//! optional faults on the receiver's link (`--seed`, `--loss`, `--reorder`, `--dup`).
//!
//! A bad option, number, source or interface exits with status 2 before anything runs.
//! A source that fails (a missing, empty, garbage or truncated file or capture, a socket
//! that cannot be bound) is named on stderr; the heaps before the fault are still
//! printed, then the counters, and the exit status is 1.

use std::fs::File;
use std::io::{self, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use spead::json::{heap_json, stats_json};
use spead::pcap::{PcapSource, PcapSpec};
use spead::recv::{MemoryPool, Stream, StreamConfig};
use spead::send::PREFIX_SIZE;
use spead::transport::{ByteStreamReader, Endpoint, ThreadedReceiver, UdpReceiver, UdpRecvConfig};
use spead::verbs::{IbvConfig, Receiver};
use spead_tools::cli;
use spead_tools::ibv::{self, ibv_config, parse_endpoint, Backend, IbvMode};

#[derive(Parser, Debug, Clone)]
#[command(about = "Receive SPEAD heaps (spead2-compatible)")]
struct Args {
    /// Sources: udp:HOST:PORT, tcp:HOST:PORT, file:PATH, or pcap:PATH[?GROUP:PORT] for
    /// the UDP payloads of a pcap/pcapng capture (Ethernet, Linux SLL/SLL2 or raw IPv4;
    /// IPv4 only), optionally only those sent to GROUP:PORT (either may be *, e.g.
    /// pcap:obs.pcap?*:7148). Frames dropped by the pcap reader are reported on stderr.
    /// ibv:ADDRESS:PORT receives an IPv4 endpoint (a multicast group; with --ibv-mode raw
    /// also a unicast address of the interface, or 0.0.0.0 for the port on every
    /// address) through the verbs receiver.
    #[arg(required_unless_present = "replay", value_parser = parse_source)]
    sources: Vec<SourceSpec>,
    /// Print heaps and counters as JSON lines.
    #[arg(long)]
    json: bool,
    /// Maximum packet size accepted (40 to 65536).
    #[arg(long, default_value_t = 9200, value_parser = cli::ranged(PREFIX_SIZE as u64..=65_536))]
    packet: usize,
    /// Socket receive buffer size in bytes.
    #[arg(long, default_value_t = 8 << 20, value_parser = cli::ranged(1..=1 << 31))]
    buffer: usize,
    /// Live heaps per substream.
    #[arg(long = "max-heaps", default_value_t = 4, value_parser = cli::ranged(1..=65_536))]
    max_heaps: usize,
    /// Substreams.
    #[arg(long, default_value_t = 1, value_parser = cli::ranged(1..=65_536))]
    substreams: usize,
    /// Interface address for multicast.
    #[arg(long)]
    bind: Option<Ipv4Addr>,
    /// Stop after this many heaps.
    #[arg(long, value_parser = cli::ranged_u64(1..=u64::MAX))]
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
    #[arg(long = "max-heap-size", default_value_t = 256 << 20, value_parser = cli::ranged_u64(1..=u64::MAX))]
    max_heap_size: u64,
    /// Heaps queued between the receive worker and the printer.
    #[arg(long = "ring-heaps", default_value_t = 4, value_parser = cli::ranged(1..=65_536))]
    ring_heaps: usize,
    /// Heap buffers kept in the memory pool.
    #[arg(long = "mem-pool", default_value_t = 16, value_parser = cli::ranged(0..=65_536))]
    mem_pool: usize,
    /// Verbs backend of ibv: sources: hw (libibverbs, feature `hw`) or sim (the
    /// simulator, fed by --replay). Default: sim with --replay, else hw.
    #[arg(long, value_enum)]
    backend: Option<Backend>,
    /// ibv: transport: raw (RAW_PACKET QP and flow steering, as spead2) or ud (UD
    /// multicast, e.g. Soft-RoCE).
    #[arg(long = "ibv-mode", value_enum, default_value = "raw")]
    ibv_mode: IbvMode,
    /// IPv4 address of the interface for ibv: sources (or SPEAD2_IBV_INTERFACE); with
    /// --replay the simulated receiver host's 10.77.0.2.
    #[arg(long = "ibv-interface", value_parser = cli::interface)]
    ibv_interface: Option<Ipv4Addr>,
    /// Completion vector (>= 0: interrupts, < 0: busy polling; or
    /// SPEAD2_IBV_COMP_VECTOR). Default 0, or -1 with --replay.
    #[arg(long = "ibv-comp-vector", allow_hyphen_values = true)]
    ibv_comp_vector: Option<i32>,
    /// Polls before waiting on the completion channel.
    #[arg(long = "ibv-max-poll", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    ibv_max_poll: u32,
    #[command(flatten)]
    sim: spead_tools::capture::ReplayArgs,
}

const TOOL: &str = "spead-recv";

static INTERRUPTED: AtomicBool = AtomicBool::new(false);
/// A source failed part way or held nothing (the heaps before the failure were still
/// delivered); the exit status says so.
static SOURCE_FAILED: AtomicBool = AtomicBool::new(false);

/// Reports a source's failure on stderr and remembers it for the exit status.
fn source_failed(message: &str) {
    eprintln!("{TOOL}: {message}");
    SOURCE_FAILED.store(true, Ordering::Relaxed);
}

extern "C" fn on_sigint(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::Relaxed);
}

/// One source named on the command line.
#[derive(Debug, Clone)]
enum SourceSpec {
    Endpoint(Endpoint),
    Pcap(PcapSpec),
    Ibv(SocketAddrV4),
}

impl std::str::FromStr for SourceSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if let Some(rest) = s.strip_prefix("ibv:") {
            return parse_endpoint(rest).map(Self::Ibv);
        }
        match s.strip_prefix("pcap:") {
            Some(rest) => rest
                .parse()
                .map(Self::Pcap)
                .map_err(|e| format!("{s}: {e}")),
            None => cli::endpoint(s).map(Self::Endpoint),
        }
    }
}

fn parse_source(s: &str) -> Result<SourceSpec, String> {
    s.parse()
}

/// One opened source.
enum Source {
    Udp(UdpSource),
    /// A byte stream, its name, and whether it is a file (which must not be empty).
    Bytes(ByteStreamReader<Box<dyn io::Read>>, String, bool),
    Pcap(Box<PcapSource<BufReader<File>>>, String),
    Ibv(Box<dyn IbvPump>),
}

/// A UDP receiver and its endpoint's name: at the end it says how many datagrams the
/// kernel dropped because the socket's receive buffer was full (SO_RXQ_OVFL), if any.
struct UdpSource {
    rx: UdpReceiver,
    name: String,
}

impl Drop for UdpSource {
    fn drop(&mut self) {
        let drops = self.rx.kernel_drops();
        if drops > 0 {
            eprintln!(
                "{TOOL}: {}: the kernel dropped {drops} datagrams (the receive buffer was full; see --buffer)",
                self.name
            );
        }
    }
}

/// The verbs receivers of every `ibv:` endpoint (and, with `--replay`, the simulated
/// fabric that feeds them).
trait IbvPump {
    /// Feeds what arrived to `stream`; false once a replay is over.
    fn pump(&mut self, stream: &mut Stream, timeout: Duration) -> io::Result<bool>;
}

#[cfg_attr(not(any(feature = "sim", feature = "hw")), allow(dead_code))]
struct IbvSource<C: verbs_api::Context> {
    receivers: Vec<Receiver<C>>,
    /// True when no more traffic can come (the simulated fabric is idle).
    idle: Box<dyn Fn() -> bool>,
}

impl<C: verbs_api::Context> IbvPump for IbvSource<C> {
    fn pump(&mut self, stream: &mut Stream, timeout: Duration) -> io::Result<bool> {
        let mut got = 0;
        for r in &mut self.receivers {
            got += r
                .poll_into(stream, Some(timeout))
                .map_err(|e| io::Error::other(format!("ibv: {e}")))?;
        }
        Ok(got > 0 || !(self.idle)())
    }
}

impl<C: verbs_api::Context> Drop for IbvSource<C> {
    fn drop(&mut self) {
        for r in &self.receivers {
            let s = r.stats();
            let dropped: Vec<String> = s
                .dropped
                .iter()
                .map(|(cause, n)| format!("{n} {}", cause.name()))
                .collect();
            eprintln!(
                "spead-recv: ibv:{}: {} frames, {} delivered, {} dropped{}",
                r.endpoints()
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
                s.frames,
                s.delivered,
                s.dropped_total(),
                if dropped.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", dropped.join(", "))
                }
            );
        }
    }
}

/// Opens the verbs receivers of `endpoints` on the backend the arguments select.
fn open_ibv(endpoints: Vec<SocketAddrV4>, args: &Args) -> Result<Box<dyn IbvPump>, String> {
    let replay = args.sim.replay.is_some();
    match args
        .backend
        .unwrap_or(if replay { Backend::Sim } else { Backend::Hw })
    {
        Backend::Hw if replay => Err("--replay runs on the simulator: drop --backend hw".into()),
        Backend::Hw if !cfg!(feature = "hw") => Err(ibv::hw_missing()),
        Backend::Hw => open_hw(ibv_cfg(endpoints, args, None)?, args),
        Backend::Sim => open_sim(endpoints, args),
    }
}

fn ibv_cfg(
    endpoints: Vec<SocketAddrV4>,
    args: &Args,
    sim_default: Option<(Ipv4Addr, i32)>,
) -> Result<IbvConfig, String> {
    ibv_config(
        endpoints,
        args.ibv_interface.or(sim_default.map(|d| d.0)),
        args.ibv_comp_vector,
        sim_default.map_or(0, |d| d.1),
        args.ibv_max_poll,
        (args.packet, args.buffer.max(args.packet)),
    )
}

#[cfg(feature = "hw")]
fn open_hw(cfg: IbvConfig, args: &Args) -> Result<Box<dyn IbvPump>, String> {
    let verbs = backend_hw::HwVerbs::new();
    let receivers = ibv::open_receivers(&verbs, &cfg, args.ibv_mode).map_err(|e| e.to_string())?;
    // The flow rules or attachments are in place: what is sent from now on is received.
    eprintln!(
        "spead-recv: receiving on {} ({}, interface {})",
        cfg.endpoints
            .iter()
            .map(|e| format!("ibv:{e}"))
            .collect::<Vec<_>>()
            .join(", "),
        format!("{:?}", args.ibv_mode).to_lowercase(),
        cfg.interface.map_or_else(String::new, |i| i.to_string())
    );
    Ok(Box::new(IbvSource {
        receivers,
        idle: Box::new(|| false),
    }))
}

#[cfg(not(feature = "hw"))]
fn open_hw(_cfg: IbvConfig, _args: &Args) -> Result<Box<dyn IbvPump>, String> {
    Err(ibv::hw_missing())
}

#[cfg(feature = "sim")]
fn open_sim(mut endpoints: Vec<SocketAddrV4>, args: &Args) -> Result<Box<dyn IbvPump>, String> {
    let Some(path) = &args.sim.replay else {
        return Err("the sim backend has no traffic of its own: give --replay PATH".into());
    };
    let cap = spead_tools::capture::read_capture(path)?;
    if let Some(broken) = &cap.broken {
        source_failed(&format!(
            "{broken} (replaying the {} datagrams before it)",
            cap.datagrams.len()
        ));
    }
    for (from, to) in &cap.moved {
        eprintln!("spead-recv: unicast destination {from} replayed to group {to}");
    }
    if endpoints.is_empty() {
        endpoints = cap.endpoints.clone();
    }
    if endpoints.is_empty() {
        return Err(format!("{}: no UDP datagrams to replay", path.display()));
    }
    let cfg = ibv_cfg(endpoints, args, Some((spead_tools::capture::SIM_RX_IP, -1)))?;
    let faults = spead_tools::sim::SimFaults::of(&args.sim);
    let mut net = spead_tools::sim::SimNet::new(args.ibv_mode, &faults)?;
    let receivers =
        ibv::open_receivers(&net.verbs(), &cfg, args.ibv_mode).map_err(|e| e.to_string())?;
    net.inject(&cap)?;
    if net.too_long > 0 {
        eprintln!(
            "spead-recv: {} datagrams longer than the UD MTU were not replayed",
            net.too_long
        );
    }
    Ok(Box::new(IbvSource {
        receivers,
        idle: Box::new(move || net.idle()),
    }))
}

#[cfg(not(feature = "sim"))]
fn open_sim(_endpoints: Vec<SocketAddrV4>, _args: &Args) -> Result<Box<dyn IbvPump>, String> {
    Err("the sim backend is not compiled in (feature `sim`)".into())
}

/// A `udp:` source rerouted by `SPEAD2_IBV_INTERFACE` to the ibverbs reader (raw, on
/// libibverbs), as spead2's UDP reader factory does; `None` when it stays a socket.
#[cfg(feature = "hw")]
fn reroute_udp(udp: &UdpRecvConfig, name: &str) -> Option<io::Result<Source>> {
    let cfg = spead::verbs::EnvOverride::from_env().reader_config(udp)?;
    let verbs = backend_hw::HwVerbs::new();
    Some(match Receiver::raw(&verbs, &cfg) {
        Ok(receiver) => {
            eprintln!(
                "{TOOL}: {name} uses ibverbs on {} (SPEAD2_IBV_INTERFACE)",
                cfg.interface.unwrap_or(Ipv4Addr::UNSPECIFIED)
            );
            Ok(Source::Ibv(Box::new(IbvSource {
                receivers: vec![receiver],
                idle: Box::new(|| false),
            })))
        }
        Err(e) => Err(io::Error::other(format!("{name}: ibverbs: {e}"))),
    })
}

/// Without libibverbs, spead2's warning when the variable is set (whatever its value),
/// once; the source stays a socket.
#[cfg(not(feature = "hw"))]
fn reroute_udp(_udp: &UdpRecvConfig, _name: &str) -> Option<io::Result<Source>> {
    static WARNED: std::sync::Once = std::sync::Once::new();
    if std::env::var_os(spead::verbs::ENV_INTERFACE).is_some_and(|v| !v.is_empty()) {
        WARNED.call_once(|| {
            eprintln!(
                "{TOOL}: warning: SPEAD2_IBV_INTERFACE found, but ibverbs support not compiled in"
            );
        });
    }
    None
}

/// Opens a source; an error names it.
fn open(spec: &SourceSpec, args: &Args, many: bool) -> io::Result<Source> {
    let named = |name: String| move |e: io::Error| io::Error::new(e.kind(), format!("{name}: {e}"));
    let ep = match spec {
        SourceSpec::Endpoint(ep) => ep,
        SourceSpec::Ibv(e) => {
            return Err(io::Error::other(format!(
                "ibv:{e} is opened with the other ibv: sources"
            )))
        }
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
            let name = match args.bind {
                Some(b) => format!("udp:{addr} (--bind {b})"),
                None => format!("udp:{addr}"),
            };
            if let Some(source) = reroute_udp(&cfg, &name) {
                return source;
            }
            let rx = UdpReceiver::bind(&cfg).map_err(named(name.clone()))?;
            eprintln!("{TOOL}: listening on udp:{}", rx.local_addr()?);
            Source::Udp(UdpSource { rx, name })
        }
        Endpoint::Tcp(addr) => {
            let name = format!("tcp:{addr}");
            let listener = TcpListener::bind(addr).map_err(named(name.clone()))?;
            eprintln!("{TOOL}: listening on tcp:{}", listener.local_addr()?);
            let (conn, _) = listener.accept().map_err(named(name.clone()))?;
            Source::Bytes(
                ByteStreamReader::new(Box::new(conn), args.packet),
                name,
                false,
            )
        }
        Endpoint::File(path) => {
            let name = format!("file:{}", path.display());
            let file = File::open(path).map_err(named(name.clone()))?;
            let file: Box<dyn io::Read> = Box::new(BufReader::new(file));
            Source::Bytes(ByteStreamReader::new(file, args.packet), name, true)
        }
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
    let args: Args = cli::parse(TOOL);
    let endpoints = args.sources.clone();
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
        let ibv: Vec<SocketAddrV4> = endpoints
            .iter()
            .filter_map(|s| match s {
                SourceSpec::Ibv(e) => Some(*e),
                _ => None,
            })
            .collect();
        let others: Vec<&SourceSpec> = endpoints
            .iter()
            .filter(|s| !matches!(s, SourceSpec::Ibv(_)))
            .collect();
        let with_ibv = !ibv.is_empty() || worker_args.sim.replay.is_some();
        let many = others.len() + usize::from(with_ibv) > 1;
        let mut sources = others
            .iter()
            .map(|ep| open(ep, &worker_args, many))
            .collect::<io::Result<Vec<Source>>>()?;
        if with_ibv {
            sources.push(Source::Ibv(
                open_ibv(ibv, &worker_args).map_err(io::Error::other)?,
            ));
        }
        let ibv_timeout = Duration::from_millis(if many { 5 } else { 100 });
        Ok(move |stream: &mut Stream| -> io::Result<bool> {
            if INTERRUPTED.load(Ordering::Relaxed) || worker_stop.load(Ordering::Relaxed) {
                return Ok(false);
            }
            let mut alive = false;
            for source in &mut sources {
                match source {
                    Source::Udp(udp) => {
                        udp.rx.pump(stream)?;
                        alive = true;
                    }
                    Source::Bytes(reader, name, file) => {
                        if !reader.is_done() {
                            reader
                                .pump(stream)
                                .map_err(|e| io::Error::new(e.kind(), format!("{name}: {e}")))?;
                            alive = true;
                            if let Some(problem) = reader.broken() {
                                source_failed(&format!("{name}: {problem}"));
                            } else if reader.is_done() && *file && reader.bytes_read() == 0 {
                                source_failed(&format!("{name}: empty file"));
                            }
                        }
                    }
                    Source::Pcap(pcap, name) => {
                        if !pcap.is_done() {
                            // A broken file ends this source only: heaps assembled so
                            // far are still delivered, and the exit status says so.
                            if let Err(e) = pcap.pump(stream, 64) {
                                source_failed(&format!("{name}: {e}"));
                            }
                            if pcap.is_done() {
                                eprintln!("spead-recv: {name}: {}", pcap.stats());
                            }
                            alive = true;
                        }
                    }
                    Source::Ibv(ibv) => alive |= ibv.pump(stream, ibv_timeout)?,
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
    if SOURCE_FAILED.load(Ordering::Relaxed) {
        status = 1;
    }
    std::process::exit(status);
}
