//! `spead-capture OUTPUT GROUP:PORT...`: capture multicast groups (in raw mode, as
//! `mcdump`, also unicast addresses of the interface or `0.0.0.0`, by port) through the
//! verbs receive path into a pcap file (like spead2's `mcdump`), on real verbs
//! (`--backend hw`, feature `hw`) or on the simulator (`--backend sim`), where the
//! traffic comes from a capture replayed into the simulated fabric (`--replay PCAP`).
//!
//! Raw mode (RAW_PACKET QP, flow steering) writes whole frames as they arrived. UD mode
//! rebuilds an Ethernet/IPv4/UDP frame around each message from its GRH (source and
//! group) and the endpoint's port. The file is classic pcap with nanosecond timestamps
//! (virtual time on the simulator), link type Ethernet; `-` writes it to stdout. At the
//! end the packet and byte counts go to stderr. `--count N` and `--duration SECONDS`
//! (virtual seconds on the simulator) stop it; so do Ctrl-C and, with `--replay`, the
//! end of the replay.
//!
//! A bad option, number, endpoint or interface exits with status 2 before anything
//! runs; a failure at run time (an output that cannot be written, a replay capture that
//! cannot be read) with status 1, naming it. A replay capture damaged part way is
//! replayed up to the damage and what arrived is written out before the error.
// Built with neither backend, the tool only reports that it has none.
#![cfg_attr(
    not(any(feature = "sim", feature = "hw")),
    allow(dead_code, unused_imports)
)]

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clap::Parser;
use netwire::pcap::PcapWriter;
use spead::verbs::frame::udp_frame;
use spead::verbs::{IbvConfig, Receiver, RxFrame};
use spead_tools::cli;
use spead_tools::ibv::{self, ibv_config, open_receivers, parse_endpoint, Backend, IbvMode};
use verbs_api::Context;

#[derive(Parser, Debug)]
#[command(about = "Capture multicast groups through the verbs receive path to a pcap file")]
struct Args {
    /// Output pcap file, or - for stdout.
    output: String,
    /// Multicast endpoints GROUP:PORT (with --replay: default every destination in the
    /// capture, unicast ones moved to 239.x.y.z).
    #[arg(value_parser = parse_endpoint)]
    endpoints: Vec<SocketAddrV4>,
    /// Verbs backend: hw (libibverbs) or sim (needs --replay). Default: sim with
    /// --replay, else hw.
    #[arg(long, value_enum)]
    backend: Option<Backend>,
    /// raw: RAW_PACKET QP and flow steering (whole frames); ud: UD multicast.
    #[arg(long = "ibv-mode", value_enum, default_value = "raw")]
    mode: IbvMode,
    /// IPv4 address of the interface (or SPEAD2_IBV_INTERFACE). On the simulator the
    /// receiver host is 10.77.0.2, the default there.
    #[arg(long = "ibv-interface", value_parser = cli::interface)]
    interface: Option<Ipv4Addr>,
    /// Completion vector (>= 0: interrupts, < 0: busy polling; or
    /// SPEAD2_IBV_COMP_VECTOR). Default 0 on hw, -1 on the simulator.
    #[arg(long = "ibv-comp-vector", allow_hyphen_values = true)]
    comp_vector: Option<i32>,
    /// Polls before waiting on the completion channel.
    #[arg(long = "ibv-max-poll", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
    max_poll: u32,
    /// Largest UDP payload received (1 to 65507).
    #[arg(long = "max-size", default_value_t = 9200, value_parser = cli::ranged(1..=65_507))]
    max_size: usize,
    /// Receive buffer in bytes.
    #[arg(long, default_value_t = 16 << 20, value_parser = cli::ranged(1..=1 << 31))]
    buffer: usize,
    /// Stop after this many packets.
    #[arg(long, value_parser = cli::ranged_u64(1..=u64::MAX))]
    count: Option<u64>,
    /// Stop after this many seconds (virtual seconds on the simulator).
    #[arg(long, value_parser = cli::positive)]
    duration: Option<f64>,
    #[command(flatten)]
    sim: spead_tools::capture::ReplayArgs,
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::Relaxed);
}

/// The capture file (netwire's writer: classic pcap, nanosecond timestamps, Ethernet)
/// and what went into it. A write error stops further writes and is reported at the end.
struct PcapOut {
    out: PcapWriter<BufWriter<Box<dyn Write>>>,
    packets: u64,
    bytes: u64,
    error: Option<io::Error>,
}

impl PcapOut {
    fn new(out: Box<dyn Write>) -> io::Result<Self> {
        Ok(PcapOut {
            out: PcapWriter::new(BufWriter::with_capacity(1 << 20, out))?,
            packets: 0,
            bytes: 0,
            error: None,
        })
    }

    fn write(&mut self, ts_ns: u64, frame: &[u8]) {
        if self.error.is_some() {
            return;
        }
        if let Err(e) = self.out.write(ts_ns, frame) {
            self.error = Some(e);
            return;
        }
        self.packets += 1;
        self.bytes += frame.len() as u64;
    }
}

/// The frame to write for one received frame: raw frames as they are, UD messages
/// inside a rebuilt Ethernet/IPv4/UDP frame.
fn frame_of(f: &RxFrame<'_>, raw: bool, port: u16, scratch: &mut Vec<u8>) -> bool {
    scratch.clear();
    if raw {
        scratch.extend_from_slice(f.bytes);
        return true;
    }
    let Some((src, dst)) = f.grh_addrs() else {
        return false;
    };
    let o = src.octets();
    let src_mac = [0x02, 0x00, o[0], o[1], o[2], o[3]];
    let d = dst.octets();
    let dst_mac = [0x01, 0x00, 0x5e, d[1] & 0x7f, d[2], d[3]];
    let ttl = f.grh.get(28).copied().unwrap_or(64);
    *scratch = udp_frame(
        src_mac,
        SocketAddrV4::new(src, port),
        dst_mac,
        SocketAddrV4::new(dst, port),
        ttl,
        f.bytes,
    );
    true
}

struct Limits {
    count: Option<u64>,
    duration_ns: Option<u64>,
}

/// Captures from `receivers` until a limit, Ctrl-C or (`idle() == true` after an empty
/// round) the end of the traffic.
fn capture<C: Context>(
    receivers: &mut [Receiver<C>],
    out: &mut PcapOut,
    now: &dyn Fn() -> u64,
    idle: &dyn Fn() -> bool,
    limits: &Limits,
) -> Result<(), String> {
    let start = now();
    let mut scratch = Vec::new();
    let timeout = Some(Duration::from_millis(100));
    loop {
        let mut got = 0;
        for r in receivers.iter_mut() {
            let raw = r.is_raw();
            let port = r.endpoints()[0].port();
            got += r
                .poll_frames(timeout, |f| {
                    if limits.count.is_some_and(|n| out.packets >= n) {
                        return;
                    }
                    if frame_of(f, raw, port, &mut scratch) {
                        out.write(now(), &scratch);
                    }
                })
                .map_err(|e| e.to_string())?;
        }
        if let Some(e) = out.error.take() {
            return Err(format!("writing the capture: {e}"));
        }
        if limits.count.is_some_and(|n| out.packets >= n)
            || limits
                .duration_ns
                .is_some_and(|d| now().saturating_sub(start) >= d)
            || INTERRUPTED.load(Ordering::Relaxed)
            || (got == 0 && idle())
        {
            return Ok(());
        }
    }
}

fn run(args: &Args) -> Result<(u64, u64), String> {
    let mut endpoints = args.endpoints.clone();
    let backend = args.backend.unwrap_or(if args.sim.replay.is_some() {
        Backend::Sim
    } else {
        Backend::Hw
    });
    let limits = Limits {
        count: args.count,
        duration_ns: args.duration.map(|s| (s * 1e9) as u64),
    };
    let open_out = || -> Result<PcapOut, String> {
        let w: Box<dyn Write> = if args.output == "-" {
            Box::new(io::stdout())
        } else {
            Box::new(File::create(&args.output).map_err(|e| format!("{}: {e}", args.output))?)
        };
        PcapOut::new(w).map_err(|e| format!("{}: {e}", args.output))
    };
    let mut out;
    match backend {
        Backend::Hw => {
            if !cfg!(feature = "hw") {
                return Err(ibv::hw_missing());
            }
            if args.sim.replay.is_some() {
                return Err("--replay needs --backend sim".into());
            }
            if endpoints.is_empty() {
                return Err("give at least one GROUP:PORT endpoint".into());
            }
            let cfg = config(args, endpoints, None)?;
            out = capture_hw(args, &cfg, open_out, &limits)?;
        }
        Backend::Sim => {
            #[cfg(feature = "sim")]
            {
                let Some(path) = &args.sim.replay else {
                    return Err(
                        "the sim backend has no traffic of its own: give --replay PCAP".into(),
                    );
                };
                let cap = spead_tools::capture::read_capture(path)?;
                for (from, to) in &cap.moved {
                    eprintln!("spead-capture: unicast destination {from} replayed to group {to}");
                }
                if endpoints.is_empty() {
                    endpoints = cap.endpoints.clone();
                }
                let cfg = config(args, endpoints, Some(-1))?;
                let faults = spead_tools::sim::SimFaults::of(&args.sim);
                let mut net = spead_tools::sim::SimNet::new(args.mode, &faults)?;
                let verbs = net.verbs();
                let mut receivers =
                    open_receivers(&verbs, &cfg, args.mode).map_err(|e| e.to_string())?;
                net.inject(&cap)?;
                if net.too_long > 0 {
                    eprintln!(
                        "spead-capture: {} datagrams longer than the UD MTU were not replayed",
                        net.too_long
                    );
                }
                out = open_out()?;
                let captured = capture(
                    &mut receivers,
                    &mut out,
                    &|| net.now(),
                    &|| net.idle(),
                    &limits,
                );
                // What was captured is written out whatever happens next.
                let flushed = out.out.get_mut().flush();
                captured?;
                flushed.map_err(|e| format!("writing the capture: {e}"))?;
                if let Some(broken) = &cap.broken {
                    return Err(format!(
                        "{broken} (the {} datagrams before it were replayed: {} packets, {} \
                         bytes captured)",
                        cap.datagrams.len(),
                        out.packets,
                        out.bytes
                    ));
                }
            }
            #[cfg(not(feature = "sim"))]
            {
                let _ = &mut endpoints;
                return Err("the sim backend is not compiled in (feature `sim`)".into());
            }
        }
    }
    out.out
        .get_mut()
        .flush()
        .map_err(|e| format!("writing the capture: {e}"))?;
    Ok((out.packets, out.bytes))
}

fn config(
    args: &Args,
    endpoints: Vec<SocketAddrV4>,
    default_vector: Option<i32>,
) -> Result<IbvConfig, String> {
    // On the simulator (a default vector given) the receiver host is the default.
    let iface = args
        .interface
        .or(default_vector.map(|_| spead_tools::capture::SIM_RX_IP));
    ibv_config(
        endpoints,
        iface,
        args.comp_vector,
        default_vector.unwrap_or(0),
        args.max_poll,
        (args.max_size, args.buffer),
    )
}

#[cfg(feature = "hw")]
fn capture_hw(
    args: &Args,
    cfg: &IbvConfig,
    open_out: impl FnOnce() -> Result<PcapOut, String>,
    limits: &Limits,
) -> Result<PcapOut, String> {
    let verbs = backend_hw::HwVerbs::new();
    let mut receivers = open_receivers(&verbs, cfg, args.mode).map_err(|e| e.to_string())?;
    let mut out = open_out()?;
    let wall = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    };
    capture(&mut receivers, &mut out, &wall, &|| false, limits)?;
    Ok(out)
}

#[cfg(not(feature = "hw"))]
fn capture_hw(
    _args: &Args,
    _cfg: &IbvConfig,
    _open_out: impl FnOnce() -> Result<PcapOut, String>,
    _limits: &Limits,
) -> Result<PcapOut, String> {
    Err(ibv::hw_missing())
}

fn main() {
    let args: Args = cli::parse("spead-capture");
    // SAFETY: installs a handler that only stores to an atomic (async-signal-safe).
    unsafe {
        libc::signal(
            libc::SIGINT,
            on_sigint as extern "C" fn(libc::c_int) as libc::sighandler_t,
        );
    }
    match run(&args) {
        Ok((packets, bytes)) => {
            eprintln!("spead-capture: {packets} packets, {bytes} bytes");
        }
        Err(e) => cli::fail("spead-capture", &e),
    }
}
