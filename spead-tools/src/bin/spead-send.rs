//! `spead-send DEST...`: send SPEAD heaps (like spead2's `spead2_send`).
//!
//! Destinations: `udp:HOST:PORT` (several make substreams), `tcp:HOST:PORT`,
//! `file:PATH`, or `ibv:GROUP:PORT` (several make substreams) through spead2's ibverbs
//! writer (`spead::verbs::Sender`; `--backend hw`, in builds with the `hw` feature) on
//! the interface `--ibv-interface`, as RAW_PACKET Ethernet frames (`--ibv-mode raw`, as
//! spead2) or UD multicast messages (`--ibv-mode ud`, for rxe). Either generates `--heaps` heaps of `--heap-size` bytes, or with
//! `--json FILE|-` sends the heaps of a `spead-recv --json` capture, items in the listed
//! (wire) order. As in spead2_send, heap `i` goes to substream `i % substreams`, the
//! first heap of each substream carries the descriptors, up to `--max-heaps` heaps are
//! in flight (read or generated, queued for the sending thread), and a stop heap ends
//! each substream unless `--no-stop`, each with a heap counter of its own.
//!
//! A bad option, number or destination exits with status 2; a JSON file that cannot be
//! read or holds something other than heaps exits with status 1 naming the file, line
//! and column, after the heaps before it were sent.

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;

use clap::error::ErrorKind;
use clap::Parser;
use spead::descriptor::Descriptor;
use spead::json::{send_heap, HeapJson};
use spead::send::{
    CntSequence, GroupMode, Heap, HeapReference, RateLimiter, DEFAULT_BURST_RATE_RATIO, PREFIX_SIZE,
};
use spead::transport::{Endpoint, PacketSink, PacketWriter, Sender, UdpSendConfig, UdpSender};
use spead::wire::Flavour;
use spead_tools::cli;
use spead_tools::ibv::{parse_endpoint, Backend, IbvMode};

const TOOL: &str = "spead-send";

/// The smallest packet a heap can be sent in: the header, the four special item
/// pointers and two more (spead2's rule).
const MIN_PACKET: usize = PREFIX_SIZE + 16;
/// The largest UDP payload over IPv4.
const MAX_PACKET: usize = 65_507;

fn packet_size(s: &str) -> Result<usize, String> {
    let n: usize = s
        .parse()
        .map_err(|_| format!("{s} is not a packet size in bytes"))?;
    if n < MIN_PACKET {
        Err(format!(
            "{n} bytes is too small: a SPEAD packet needs at least {MIN_PACKET} (the header \
             and six item pointers)"
        ))
    } else if n > MAX_PACKET {
        Err(format!(
            "{n} bytes is more than a UDP datagram holds ({MAX_PACKET})"
        ))
    } else {
        Ok(n)
    }
}

#[derive(Parser, Debug)]
#[command(about = "Send SPEAD heaps (spead2-compatible)")]
struct Args {
    /// Destinations: udp:HOST:PORT (one per substream), tcp:HOST:PORT, file:PATH, or
    /// ibv:GROUP:PORT (one per substream) through the verbs writer.
    #[arg(required = true, value_parser = parse_dest)]
    dests: Vec<DestSpec>,
    /// Verbs backend of ibv: destinations: hw (libibverbs: a NIC, Soft-RoCE or the
    /// emulated library; feature `hw`). The simulator has no network outside its
    /// process to send to: `scenario run` simulates senders and receivers together.
    #[arg(long, value_enum, default_value = "hw")]
    backend: Backend,
    /// ibv: transport: raw (RAW_PACKET Ethernet frames, as spead2) or ud (UD multicast,
    /// for rxe).
    #[arg(long = "ibv-mode", value_enum, default_value = "raw")]
    ibv_mode: IbvMode,
    /// IPv4 address of the interface ibv: destinations are sent from (its RDMA device
    /// sends them).
    #[arg(long = "ibv-interface", value_parser = cli::interface)]
    ibv_interface: Option<Ipv4Addr>,
    /// Send the heaps of a JSON capture (file, or - for stdin), items in the listed
    /// order.
    #[arg(long)]
    json: Option<String>,
    /// Maximum packet size, bytes (56 to 65507).
    #[arg(long, default_value_t = 1472, value_parser = packet_size)]
    packet: usize,
    /// Payload bytes per generated heap.
    #[arg(long = "heap-size", default_value_t = 4 << 20, value_parser = cli::ranged(1..=1 << 40))]
    heap_size: usize,
    /// Number of generated heaps.
    #[arg(long, default_value_t = 100)]
    heaps: u64,
    /// Items per generated heap.
    #[arg(long, default_value_t = 1, value_parser = cli::ranged(1..=65_536))]
    items: usize,
    /// Rate limit in Gb/s (0 = unlimited), as spead2_send.
    #[arg(long, default_value_t = 0.0, value_parser = cli::non_negative, allow_negative_numbers = true)]
    rate: f64,
    /// Burst size in bytes.
    #[arg(long, default_value_t = 65536, value_parser = cli::ranged(1..=1 << 30))]
    burst: usize,
    /// Maximum heaps in flight (queued for the sending thread), as spead2_send.
    #[arg(long = "max-heaps", default_value_t = 4, value_parser = cli::ranged(1..=65_536))]
    max_heaps: usize,
    /// Substreams (heap i goes to substream i % substreams, and substream s to
    /// destination s % destinations). Default: one per destination.
    #[arg(long, value_parser = cli::ranged(1..=65_536))]
    substreams: Option<usize>,
    /// Interface address (multicast) to send from.
    #[arg(long)]
    bind: Option<Ipv4Addr>,
    /// Socket send buffer in bytes.
    #[arg(long, default_value_t = 512 << 10, value_parser = cli::ranged(1..=1 << 31))]
    buffer: usize,
    /// TTL for multicast.
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=255))]
    ttl: Option<u32>,
    /// Heap address bits (40 or 48).
    #[arg(long = "addr-bits", default_value = "40", value_parser = cli::addr_bits())]
    addr_bits: u8,
    /// First heap counter.
    #[arg(long = "heap-cnt-start", default_value_t = 1)]
    cnt_start: u64,
    /// Do not send stop heaps at the end.
    #[arg(long = "no-stop")]
    no_stop: bool,
    /// Do not send descriptors in the first generated heap of each substream.
    #[arg(long = "no-descriptors")]
    no_descriptors: bool,
}

/// A destination as given.
#[derive(Debug, Clone)]
enum DestSpec {
    Transport(Endpoint),
    Ibv(SocketAddrV4),
}

fn parse_dest(s: &str) -> Result<DestSpec, String> {
    match s.strip_prefix("ibv:") {
        Some(rest) => parse_endpoint(rest).map(DestSpec::Ibv),
        None => cli::endpoint(s).map(DestSpec::Transport),
    }
}

enum AnySink {
    Udp(UdpSender),
    Stream(PacketWriter<BufWriter<Box<dyn io::Write>>>),
}

impl PacketSink for AnySink {
    fn send_packets(&mut self, packets: &[(&[u8], usize)]) -> io::Result<()> {
        match self {
            Self::Udp(s) => s.send_packets(packets),
            Self::Stream(s) => s.send_packets(packets),
        }
    }

    fn flush_packets(&mut self) -> io::Result<()> {
        match self {
            Self::Udp(s) => s.flush_packets(),
            Self::Stream(s) => s.flush_packets(),
        }
    }
}

/// Where packets go, as checked after parsing.
#[derive(Clone)]
enum Dest {
    Udp(Vec<SocketAddr>),
    Tcp(SocketAddr),
    File(std::path::PathBuf),
    Ibv(Vec<SocketAddrV4>),
}

impl Dest {
    fn of(dests: &[DestSpec]) -> Option<Dest> {
        let udp: Vec<SocketAddr> = dests
            .iter()
            .filter_map(|e| match e {
                DestSpec::Transport(Endpoint::Udp(a)) => Some(*a),
                _ => None,
            })
            .collect();
        let ibv: Vec<SocketAddrV4> = dests
            .iter()
            .filter_map(|e| match e {
                DestSpec::Ibv(a) => Some(*a),
                DestSpec::Transport(_) => None,
            })
            .collect();
        match dests {
            _ if udp.len() == dests.len() => Some(Dest::Udp(udp)),
            _ if ibv.len() == dests.len() => Some(Dest::Ibv(ibv)),
            [DestSpec::Transport(Endpoint::Tcp(a))] => Some(Dest::Tcp(*a)),
            [DestSpec::Transport(Endpoint::File(p))] => Some(Dest::File(p.clone())),
            _ => None,
        }
    }

    fn open(&self, args: &SinkArgs) -> Result<AnySink, String> {
        let writer: Box<dyn io::Write> = match self {
            Dest::Udp(dests) => {
                let mut cfg = UdpSendConfig::new(dests.clone());
                cfg.buffer_size = args.buffer;
                cfg.ttl = args.ttl;
                cfg.interface = args.bind;
                let sender = UdpSender::new(&cfg).map_err(|e| {
                    let names: Vec<String> = dests.iter().map(|d| format!("udp:{d}")).collect();
                    match args.bind {
                        Some(b) => format!("{} (--bind {b}): {e}", names.join(", ")),
                        None => format!("{}: {e}", names.join(", ")),
                    }
                })?;
                return Ok(AnySink::Udp(sender));
            }
            Dest::Ibv(_) => unreachable!("ibv: destinations are sent by send_ibv"),
            Dest::Tcp(a) => Box::new(TcpStream::connect(a).map_err(|e| format!("tcp:{a}: {e}"))?),
            Dest::File(p) => {
                Box::new(File::create(p).map_err(|e| format!("file:{}: {e}", p.display()))?)
            }
        };
        Ok(AnySink::Stream(PacketWriter::new(
            BufWriter::with_capacity(1 << 20, writer),
        )))
    }
}

/// What the sending thread needs to open its sink (sockets are made on the thread that
/// uses them).
#[derive(Clone)]
struct SinkArgs {
    buffer: usize,
    ttl: Option<u32>,
    bind: Option<Ipv4Addr>,
    packet: usize,
    rate: f64,
    burst: usize,
    /// The ibv: writer's options (read only by builds with `hw`).
    #[cfg_attr(not(feature = "hw"), allow(dead_code))]
    max_heaps: usize,
    #[cfg_attr(not(feature = "hw"), allow(dead_code))]
    ibv_mode: IbvMode,
    #[cfg_attr(not(feature = "hw"), allow(dead_code))]
    ibv_interface: Option<Ipv4Addr>,
}

/// One heap queued for the sending thread.
struct Job {
    heap: Arc<Heap>,
    cnt: u64,
    substream: usize,
    /// Where it came from, for errors: `FILE:LINE` or `generated heap N`.
    origin: String,
}

/// The sending thread's handle: packets and bytes sent, or what went wrong.
type SendingThread = JoinHandle<Result<(u64, u64), String>>;

/// The sending thread: opens the sink, reports whether that worked, then sends each
/// queued heap in turn until the queue closes. Returns packets and bytes sent.
fn spawn_sender(
    dest: Dest,
    args: SinkArgs,
    queue: Receiver<Job>,
) -> (Receiver<Result<(), String>>, SendingThread) {
    let (opened_tx, opened) = sync_channel(1);
    let worker = std::thread::spawn(move || {
        if let Dest::Ibv(endpoints) = &dest {
            return send_ibv(endpoints, &args, &queue, &opened_tx);
        }
        let sink = match dest.open(&args) {
            Ok(s) => {
                let _ = opened_tx.send(Ok(()));
                s
            }
            Err(e) => {
                let _ = opened_tx.send(Err(e.clone()));
                return Err(e);
            }
        };
        let limiter = RateLimiter::new(args.rate * 1e9 / 8.0, args.burst, DEFAULT_BURST_RATE_RATIO);
        let mut sender = Sender::new(sink, args.packet, limiter, GroupMode::Serial);
        for job in queue {
            sender
                .send_heaps(&[HeapReference {
                    heap: &job.heap,
                    cnt: job.cnt,
                    substream: job.substream,
                }])
                .map_err(|e| format!("{} (heap {}): {e}", job.origin, job.cnt))?;
        }
        Ok((sender.packets, sender.bytes))
    });
    (opened, worker)
}

/// The sending thread of `ibv:` destinations: spead2's ibverbs writer on the interface's
/// device, one substream per endpoint, up to `max_heaps` heaps in flight (it waits for
/// completions before queueing more, as spead2_send does), paced at the rate. Returns
/// packets and bytes sent once every heap has completed.
#[cfg(feature = "hw")]
fn send_ibv(
    endpoints: &[SocketAddrV4],
    args: &SinkArgs,
    queue: &Receiver<Job>,
    opened: &SyncSender<Result<(), String>>,
) -> Result<(u64, u64), String> {
    use spead::verbs::{source_mac, IbvConfig, SendStreamConfig, Sender};
    let names = || {
        endpoints
            .iter()
            .map(|e| format!("ibv:{e}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let open = || -> Result<Sender<backend_hw::HwContext>, String> {
        let iface = args
            .ibv_interface
            .ok_or("ibv: destinations need --ibv-interface (the sending interface's address)")?;
        let verbs = backend_hw::HwVerbs::new();
        let mut cfg = IbvConfig::new_sender(endpoints.to_vec(), iface);
        cfg.max_size = args.packet;
        cfg.buffer_size = args.buffer.max(args.packet);
        if let Some(ttl) = args.ttl {
            cfg.ttl = u8::try_from(ttl).unwrap_or(u8::MAX);
        }
        let mut sender = match args.ibv_mode {
            IbvMode::Raw => Sender::raw(
                &verbs,
                &cfg,
                source_mac(&verbs, iface).map_err(|e| e.to_string())?,
            ),
            IbvMode::Ud => Sender::ud(&verbs, &cfg),
        }
        .map_err(|e| e.to_string())?;
        sender
            .set_stream_config(SendStreamConfig {
                max_heaps: args.max_heaps,
                rate: args.rate * 1e9 / 8.0,
                burst_size: args.burst,
                ..SendStreamConfig::default()
            })
            .map_err(|e| e.to_string())?;
        Ok(sender)
    };
    let mut sender = match open() {
        Ok(s) => {
            let _ = opened.send(Ok(()));
            s
        }
        Err(e) => {
            let e = format!("{}: {e}", names());
            let _ = opened.send(Err(e.clone()));
            return Err(e);
        }
    };
    let mut clock = spead::send::WallClock::new();
    for job in queue {
        let at = |e: &dyn std::fmt::Display| format!("{} (heap {}): {e}", job.origin, job.cnt);
        sender.wait_heaps(args.max_heaps - 1).map_err(|e| at(&e))?;
        let heap = HeapReference {
            heap: &job.heap,
            cnt: job.cnt,
            substream: job.substream,
        };
        sender
            .send_heaps(&[heap], GroupMode::Serial, &mut clock)
            .map_err(|e| at(&e))?;
    }
    sender.drain().map_err(|e| format!("{}: {e}", names()))?;
    let stats = sender.stats();
    Ok((stats.packets, stats.bytes))
}

#[cfg(not(feature = "hw"))]
fn send_ibv(
    _endpoints: &[SocketAddrV4],
    _args: &SinkArgs,
    _queue: &Receiver<Job>,
    opened: &SyncSender<Result<(), String>>,
) -> Result<(u64, u64), String> {
    let e = spead_tools::ibv::hw_missing();
    let _ = opened.send(Err(e.clone()));
    Err(e)
}

/// The generated heaps: with descriptors (first heap of each substream) and without.
fn generated_heaps(args: &Args, flavour: Flavour) -> (Arc<Heap>, Arc<Heap>) {
    let per_item = args.heap_size / args.items;
    let mut first = Heap::new(flavour);
    let mut plain = Heap::new(flavour);
    for i in 0..args.items {
        let id = 0x1000 + i as u64;
        let data: Vec<u8> = (0..per_item)
            .map(|b| (b as u8).wrapping_add(i as u8))
            .collect();
        if !args.no_descriptors {
            first.add_descriptor(&Descriptor {
                id,
                name: format!("item{i}").into_bytes(),
                description: b"generated by spead-send".to_vec(),
                format: vec![(b'u', 8)],
                shape: vec![Some(per_item as u64)],
                dtype: None,
            });
        }
        first.add_item(id, data.clone(), false);
        plain.add_item(id, data, false);
    }
    (Arc::new(first), Arc::new(plain))
}

/// Why producing heaps stopped early.
enum Stop {
    /// The sending thread has gone (its error says why).
    SenderGone,
    /// The input was bad: a message naming it.
    Input(String),
}

/// Queues `job`; `Stop::SenderGone` if the sending thread has stopped.
fn queue(tx: &SyncSender<Job>, job: Job) -> Result<(), Stop> {
    tx.send(job).map_err(|_| Stop::SenderGone)
}

/// The heaps of a JSON capture, queued in order. Returns the last heap's counter and
/// flavour.
fn queue_json(
    src: &str,
    subs: usize,
    tx: &SyncSender<Job>,
) -> Result<Option<(u64, Flavour)>, Stop> {
    let name = if src == "-" { "<stdin>" } else { src };
    let mut reader: Box<dyn BufRead> = if src == "-" {
        Box::new(BufReader::new(io::stdin()))
    } else {
        Box::new(BufReader::new(
            File::open(src).map_err(|e| Stop::Input(format!("{name}: {e}")))?,
        ))
    };
    let mut last = None;
    let mut index = 0usize;
    let mut line = Vec::new();
    for lineno in 1.. {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .map_err(|e| Stop::Input(format!("{name}: {e}")))?;
        if n == 0 {
            break;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let at = |e: serde_json::Error| {
            let text = e.to_string();
            let text = text
                .rsplit_once(" at line ")
                .map_or(text.as_str(), |(msg, _)| msg);
            Stop::Input(format!("{name}:{lineno}:{}: {text}", e.column()))
        };
        let value: serde_json::Value = serde_json::from_slice(&line).map_err(at)?;
        if value.get("stats").is_some() {
            continue;
        }
        let hj: HeapJson = serde_json::from_slice(&line).map_err(at)?;
        let heap = send_heap(&hj).map_err(|e| Stop::Input(format!("{name}:{lineno}: {e}")))?;
        last = Some((hj.cnt, heap.flavour));
        queue(
            tx,
            Job {
                heap: Arc::new(heap),
                cnt: hj.cnt,
                substream: index % subs,
                origin: format!("{name}:{lineno}"),
            },
        )?;
        index += 1;
    }
    if last.is_none() {
        return Err(Stop::Input(format!("{name}: no heaps")));
    }
    Ok(last)
}

/// The generated heaps, queued in order. Returns the last heap's counter.
fn queue_generated(
    args: &Args,
    flavour: Flavour,
    subs: usize,
    tx: &SyncSender<Job>,
) -> Result<Option<u64>, Stop> {
    let (first, plain) = generated_heaps(args, flavour);
    let mut cnts = CntSequence::new(args.cnt_start, 1);
    let mut last = None;
    for i in 0..args.heaps {
        let cnt = cnts.next_cnt();
        let heap = if (i as usize) < subs { &first } else { &plain };
        queue(
            tx,
            Job {
                heap: Arc::clone(heap),
                cnt,
                substream: (i % subs as u64) as usize,
                origin: format!("generated heap {i}"),
            },
        )?;
        last = Some(cnt);
    }
    Ok(last)
}

fn main() {
    let args: Args = cli::parse(TOOL);
    let Some(dest) = Dest::of(&args.dests) else {
        cli::usage::<Args>(
            TOOL,
            ErrorKind::ArgumentConflict,
            "give several udp: destinations, several ibv: destinations, or one tcp: or \
             file: destination",
        )
    };
    if args.backend == Backend::Sim {
        cli::usage::<Args>(
            TOOL,
            ErrorKind::InvalidValue,
            "--backend sim: a simulated sender has no network outside its process to send \
             to (`scenario run FILE` simulates senders and receivers together)",
        );
    }
    let flavour = Flavour::new(args.addr_bits).expect("40 or 48, checked by clap");
    let subs = args.substreams.unwrap_or(args.dests.len());
    if args.json.is_none() && args.items > args.heap_size {
        cli::usage::<Args>(
            TOOL,
            ErrorKind::ValueValidation,
            &format!(
                "--items {} is more than --heap-size {}: each item needs at least one byte",
                args.items, args.heap_size
            ),
        );
    }
    let last_cnt = args
        .cnt_start
        .checked_add(args.heaps)
        .and_then(|c| c.checked_add(subs as u64));
    if args.json.is_none() && last_cnt.map_or(true, |c| c - 1 > flavour.value_mask()) {
        cli::usage::<Args>(
            TOOL,
            ErrorKind::ValueValidation,
            &format!(
                "--heap-cnt-start {} with {} heaps and {subs} stop heaps goes past the largest \
                 heap counter of {}-bit addresses ({})",
                args.cnt_start,
                args.heaps,
                args.addr_bits,
                flavour.value_mask()
            ),
        );
    }
    let sink_args = SinkArgs {
        buffer: args.buffer,
        ttl: args.ttl,
        bind: args.bind,
        packet: args.packet,
        rate: args.rate,
        burst: args.burst,
        max_heaps: args.max_heaps,
        ibv_mode: args.ibv_mode,
        ibv_interface: args.ibv_interface,
    };
    // Up to max_heaps heaps in flight: max_heaps - 1 queued and one being sent.
    let (tx, rx) = sync_channel(args.max_heaps - 1);
    let (opened, worker) = spawn_sender(dest, sink_args, rx);
    if let Ok(Err(e)) = opened.recv() {
        let _ = worker.join();
        cli::fail(TOOL, &e);
    }
    let produced = match &args.json {
        Some(src) => queue_json(src, subs, &tx),
        None => queue_generated(&args, flavour, subs, &tx).map(|c| c.map(|c| (c, flavour))),
    };
    let input_error = match produced {
        Ok(last) if !args.no_stop => {
            // One stop heap per substream, each with a counter of its own.
            let (base, stop_flavour) =
                last.map_or((args.cnt_start, flavour), |(c, f)| (c.wrapping_add(1), f));
            let mut stop = Heap::new(stop_flavour);
            stop.add_end();
            let stop = Arc::new(stop);
            (0..subs)
                .try_for_each(|s| {
                    queue(
                        &tx,
                        Job {
                            heap: Arc::clone(&stop),
                            cnt: base.wrapping_add(s as u64),
                            substream: s,
                            origin: "stop heap".into(),
                        },
                    )
                })
                .err()
        }
        Ok(_) => None,
        Err(stop) => Some(stop),
    };
    // The heaps already queued are sent before anything is reported.
    drop(tx);
    let sent = worker
        .join()
        .unwrap_or_else(|_| Err("the sending thread panicked".into()));
    match (sent, input_error) {
        (Err(e), _) => cli::fail(TOOL, &e),
        (Ok(_), Some(Stop::Input(e))) => cli::fail(TOOL, &e),
        (Ok(_), Some(Stop::SenderGone)) => cli::fail(TOOL, "the sending thread stopped"),
        (Ok((packets, bytes)), None) => eprintln!("{TOOL}: {packets} packets, {bytes} bytes"),
    }
}
