//! What `rc_pingpong` and `ud_pingpong` share, compatible with rdma-core's
//! `ibv_rc_pingpong` and `ibv_ud_pingpong`: the options, the out-of-band exchange of
//! `LID:QPN:PSN:GID` over TCP, and the ping-pong loop.

#![allow(dead_code)] // each example uses its own part

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::ExitCode;
use std::time::Instant;

use backend_hw::{HwCompChannel, HwContext, HwCq, HwPd, HwQp, HwVerbs};
use verbs_api::{
    AhAttr, Completion, CompletionChannel, CompletionQueue, Context, Error, ErrorKind, Gid,
    GlobalRoute, Mtu, QpCap, QpInitAttr, QpType, QueuePair, RecvWr, Result, SendFlags, Sge, Verbs,
};

/// The work request id of receives, as rdma-core's examples use.
pub const RECV_WRID: u64 = 1;
/// The work request id of sends.
pub const SEND_WRID: u64 = 2;

/// The options of rdma-core's pingpong examples.
#[derive(Debug, Clone)]
pub struct Args {
    /// TCP port of the exchange (`-p`).
    pub port: u16,
    /// Device (`-d`); the first device when absent.
    pub device: Option<String>,
    /// Device port (`-i`).
    pub ib_port: u8,
    /// Message size (`-s`).
    pub size: usize,
    /// Path MTU (`-m`, RC only).
    pub mtu: Mtu,
    /// Receives posted at a time (`-r`).
    pub rx_depth: u32,
    /// Exchanges (`-n`).
    pub iters: u32,
    /// Service level (`-l`).
    pub sl: u8,
    /// Sleep on CQ events instead of polling (`-e`).
    pub events: bool,
    /// Local GID index (`-g`); none sends a zero GID (InfiniBand without GRH).
    pub gid_index: Option<u8>,
    /// The server to connect to; none makes this side the server.
    pub server: Option<String>,
}

fn usage(prog: &str, default_size: usize) -> String {
    format!(
        "Usage:\n  {prog}            start a server and wait for connection\n  {prog} <host>     \
         connect to server at <host>\n\nOptions:\n  -p, --port=<port>      listen on/connect to \
         port <port> (default 18515)\n  -d, --ib-dev=<dev>     use IB device <dev> (default \
         first device found)\n  -i, --ib-port=<port>   use port <port> of IB device (default \
         1)\n  -s, --size=<size>      size of message to exchange (default {default_size})\n  \
         -m, --mtu=<size>       path MTU (default 1024)\n  -r, --rx-depth=<dep>   number of \
         receives to post at a time (default 500)\n  -n, --iters=<iters>    number of exchanges \
         (default 1000)\n  -l, --sl=<sl>          service level value\n  -e, --events        \
         sleep on CQ events (default poll)\n  -g, --gid-idx=<gid index> local port gid index\n"
    )
}

fn num<T: std::str::FromStr>(opt: &str, v: &str) -> std::result::Result<T, String> {
    let parsed = if let Some(hex) = v.strip_prefix("0x") {
        u64::from_str_radix(hex, 16)
            .ok()
            .and_then(|n| n.to_string().parse().ok())
    } else {
        v.parse().ok()
    };
    parsed.ok_or_else(|| format!("{opt}: bad value `{v}`"))
}

impl Args {
    /// Parses the command line like rdma-core's examples (short and long options).
    ///
    /// # Errors
    /// The usage text, or what is wrong with an option.
    pub fn parse(default_size: usize) -> std::result::Result<Args, String> {
        let argv: Vec<String> = std::env::args().collect();
        let prog = argv.first().cloned().unwrap_or_default();
        let mut a = Args {
            port: 18515,
            device: None,
            ib_port: 1,
            size: default_size,
            mtu: Mtu::Mtu1024,
            rx_depth: 500,
            iters: 1000,
            sl: 0,
            events: false,
            gid_index: None,
            server: None,
        };
        let mut it = argv.into_iter().skip(1);
        while let Some(arg) = it.next() {
            let (key, inline) = match arg.split_once('=') {
                Some((k, v)) if k.starts_with("--") => (k.to_string(), Some(v.to_string())),
                _ if arg.starts_with('-') && !arg.starts_with("--") && arg.len() > 2 => {
                    (arg[..2].to_string(), Some(arg[2..].to_string()))
                }
                _ => (arg.clone(), None),
            };
            let mut value = |name: &str| -> std::result::Result<String, String> {
                inline
                    .clone()
                    .or_else(|| it.next())
                    .ok_or_else(|| format!("{name} needs a value\n{}", usage(&prog, default_size)))
            };
            match key.as_str() {
                "-p" | "--port" => a.port = num(&key, &value(&key)?)?,
                "-d" | "--ib-dev" => a.device = Some(value(&key)?),
                "-i" | "--ib-port" => a.ib_port = num(&key, &value(&key)?)?,
                "-s" | "--size" => a.size = num(&key, &value(&key)?)?,
                "-m" | "--mtu" => {
                    let bytes: u32 = num(&key, &value(&key)?)?;
                    a.mtu = Mtu::ALL
                        .iter()
                        .copied()
                        .find(|m| m.bytes() == bytes)
                        .ok_or_else(|| usage(&prog, default_size))?;
                }
                "-r" | "--rx-depth" => a.rx_depth = num(&key, &value(&key)?)?,
                "-n" | "--iters" => a.iters = num(&key, &value(&key)?)?,
                "-l" | "--sl" => a.sl = num(&key, &value(&key)?)?,
                "-e" | "--events" => a.events = true,
                "-g" | "--gid-idx" => a.gid_index = Some(num(&key, &value(&key)?)?),
                "-h" | "--help" => return Err(usage(&prog, default_size)),
                s if s.starts_with('-') => return Err(usage(&prog, default_size)),
                _ if a.server.is_none() => a.server = Some(arg),
                _ => return Err(usage(&prog, default_size)),
            }
        }
        if a.ib_port == 0 || a.rx_depth == 0 {
            return Err(usage(&prog, default_size));
        }
        Ok(a)
    }
}

/// One side's address: what the examples exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dest {
    /// Port LID (0 on RoCE).
    pub lid: u16,
    /// QP number.
    pub qpn: u32,
    /// Starting PSN.
    pub psn: u32,
    /// GID (zero without `-g`).
    pub gid: Gid,
}

/// The size of the exchange message, with rdma-core's terminating NUL.
pub const MSG_LEN: usize = "0000:000000:000000:00000000000000000000000000000000".len() + 1;

impl Dest {
    /// `LLLL:QQQQQQ:PPPPPP:GGGG...` with the GID as 32 hex digits of its bytes in order,
    /// NUL-terminated, as rdma-core's `gid_to_wire_gid` writes it.
    pub fn to_wire(self) -> [u8; MSG_LEN] {
        let mut gid = String::with_capacity(32);
        for b in self.gid.0 {
            gid.push_str(&format!("{b:02x}"));
        }
        let s = format!("{:04x}:{:06x}:{:06x}:{gid}", self.lid, self.qpn, self.psn);
        let mut out = [0u8; MSG_LEN];
        out[..s.len()].copy_from_slice(s.as_bytes());
        out
    }

    /// Parses a message [`Dest::to_wire`] (or rdma-core) wrote.
    ///
    /// # Errors
    /// [`ErrorKind::InvalidArgument`] for a malformed message.
    pub fn from_wire(msg: &[u8]) -> Result<Dest> {
        let bad = || {
            Error::new(
                ErrorKind::InvalidArgument,
                "pingpong exchange",
                format!(
                    "malformed address message {:?}",
                    String::from_utf8_lossy(msg)
                ),
            )
        };
        let text = std::str::from_utf8(msg).map_err(|_| bad())?;
        let text = text.trim_end_matches('\0');
        let mut parts = text.split(':');
        let mut field = |w: usize| -> Result<u32> {
            let f = parts.next().ok_or_else(bad)?;
            if f.len() > w {
                return Err(bad());
            }
            u32::from_str_radix(f, 16).map_err(|_| bad())
        };
        let lid = u16::try_from(field(4)?).map_err(|_| bad())?;
        let qpn = field(6)?;
        let psn = field(6)?;
        let g = parts.next().ok_or_else(bad)?;
        if g.len() != 32 {
            return Err(bad());
        }
        let mut gid = [0u8; 16];
        for (i, b) in gid.iter_mut().enumerate() {
            *b = u8::from_str_radix(&g[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
        }
        Ok(Dest {
            lid,
            qpn,
            psn,
            gid: Gid(gid),
        })
    }
}

fn io_err(what: &str, e: std::io::Error) -> Error {
    Error::new(ErrorKind::Io, "pingpong exchange", format!("{what}: {e}"))
}

/// The client's exchange: send ours, read theirs, write "done".
///
/// # Errors
/// Connection and protocol errors.
pub fn client_exchange(server: &str, port: u16, mine: &Dest) -> Result<Dest> {
    let mut s = TcpStream::connect((server, port))
        .map_err(|e| io_err(&format!("cannot connect to {server}:{port}"), e))?;
    s.write_all(&mine.to_wire())
        .map_err(|e| io_err("cannot send the local address", e))?;
    let mut msg = [0u8; MSG_LEN];
    s.read_exact(&mut msg)
        .map_err(|e| io_err("cannot read the remote address", e))?;
    s.write_all(b"done\0")
        .map_err(|e| io_err("cannot write done", e))?;
    Dest::from_wire(&msg)
}

/// The server's exchange: read theirs, `connect` (to RTR/RTS, before answering, as
/// rdma-core's server does), send ours, read "done".
///
/// # Errors
/// Connection and protocol errors, and `connect`'s.
pub fn server_exchange(
    port: u16,
    mine: &Dest,
    connect: impl FnOnce(&Dest) -> Result<()>,
) -> Result<Dest> {
    let listener = TcpListener::bind(("::", port))
        .or_else(|_| TcpListener::bind(("0.0.0.0", port)))
        .map_err(|e| io_err(&format!("cannot listen on port {port}"), e))?;
    let (mut s, _) = listener.accept().map_err(|e| io_err("accept failed", e))?;
    drop(listener);
    let mut msg = [0u8; MSG_LEN];
    s.read_exact(&mut msg)
        .map_err(|e| io_err("cannot read the remote address", e))?;
    let remote = Dest::from_wire(&msg)?;
    connect(&remote)?;
    s.write_all(&mine.to_wire())
        .map_err(|e| io_err("cannot send the local address", e))?;
    // rdma-core reads sizeof msg but the client writes only "done\0": read what comes.
    let mut done = [0u8; MSG_LEN];
    let _ = s.read(&mut done);
    Ok(remote)
}

/// A PSN like rdma-core's `lrand48() & 0xffffff`.
pub fn random_psn() -> u32 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let x = (t as u64) ^ (u64::from(std::process::id()) << 17);
    let x = x.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    u32::try_from((x >> 40) & 0x00ff_ffff).unwrap_or(0)
}

/// Opens the device `-d` names, or the first device, as rdma-core's examples do.
///
/// # Errors
/// No device, or the device's open failing.
pub fn open_device(name: &'static str, args: &Args) -> Result<HwContext> {
    let verbs = HwVerbs::new();
    let device = match &args.device {
        Some(d) => d.clone(),
        None => verbs
            .devices()?
            .into_iter()
            .next()
            .map(|d| d.name)
            .ok_or_else(|| Error::new(ErrorKind::NoDevice, name, "No IB devices found"))?,
    };
    verbs.open(&device)
}

/// The CQ (`rx_depth + 1` entries, on `channel` with `-e`) and the QP of `qp_type` (one
/// send, `rx_depth` receives, one SGE each) of rdma-core's examples, and the flags of
/// their sends: signaled, and inline when the QP takes `-s` bytes inline.
///
/// # Errors
/// The CQ's or the QP's creation failing.
pub fn queues(
    ctx: &HwContext,
    pd: &HwPd,
    channel: Option<&HwCompChannel>,
    args: &Args,
    qp_type: QpType,
) -> Result<(HwCq, HwQp, SendFlags)> {
    let cq = ctx.create_cq(args.rx_depth + 1, channel, 0)?;
    let cap = QpCap::new(1, args.rx_depth, 1, 1);
    let qp = ctx.create_qp(pd, &QpInitAttr::new(qp_type, &cq, cap))?;
    let mut send_flags = SendFlags::SIGNALED;
    if qp.cap().max_inline_data as usize >= args.size {
        send_flags |= SendFlags::INLINE;
    }
    Ok((cq, qp, send_flags))
}

/// Posts `args.rx_depth` receives of `sge`; returns how many were posted.
///
/// # Errors
/// [`ErrorKind::QueueFull`] when fewer were posted, as rdma-core's "Couldn't post receive".
pub fn post_initial_recvs(name: &'static str, qp: &HwQp, sge: &Sge, args: &Args) -> Result<u32> {
    let routs = post_recvs(qp, sge, args.rx_depth);
    if routs < args.rx_depth {
        return Err(Error::new(
            ErrorKind::QueueFull,
            name,
            format!("Couldn't post receive ({routs})"),
        ));
    }
    Ok(routs)
}

/// This side's address: the port's LID, `qpn`, a random PSN, and the GID at `-g` (zero
/// without it).
///
/// # Errors
/// The GID query failing.
pub fn local_dest(ctx: &HwContext, args: &Args, lid: u16, qpn: u32) -> Result<Dest> {
    let gid = match args.gid_index {
        Some(i) => ctx.query_gid(args.ib_port, i.into())?,
        None => Gid::ZERO,
    };
    Ok(Dest {
        lid,
        qpn,
        psn: random_psn(),
        gid,
    })
}

/// Prints an address line as rdma-core's examples do: `label` is `local address: ` or
/// `remote address:`, `gid_sep` what comes before `GID` (ud_pingpong's local line has a
/// colon there, every other line a comma).
pub fn print_address(label: &str, d: &Dest, gid_sep: char) {
    println!(
        "  {label} LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}{gid_sep} GID {}",
        d.lid,
        d.qpn,
        d.psn,
        gid_text(&d.gid)
    );
}

/// The exchange of addresses: the client (`args.server` set) sends first and then calls
/// `connect`; the server calls `connect` before it answers. Returns the peer's address.
///
/// # Errors
/// Connection and protocol errors, and `connect`'s.
pub fn exchange(
    args: &Args,
    mine: &Dest,
    connect: impl FnOnce(&Dest) -> Result<()>,
) -> Result<Dest> {
    match &args.server {
        Some(server) => {
            let r = client_exchange(server, args.port, mine)?;
            connect(&r)?;
            Ok(r)
        }
        None => server_exchange(args.port, mine, connect),
    }
}

/// The address vector to the peer `rem`: its LID, with a GRH to its GID when it has one
/// (sent from the GID at `-g`), at service level `-l`.
pub fn av_to(args: &Args, rem: &Dest) -> AhAttr {
    let mut av = AhAttr {
        dlid: rem.lid,
        sl: args.sl,
        port_num: args.ib_port,
        ..AhAttr::default()
    };
    if rem.gid.interface_id() != 0 {
        av.is_global = true;
        av.grh = GlobalRoute {
            dgid: rem.gid,
            hop_limit: 1,
            sgid_index: args.gid_index.unwrap_or(0),
            ..GlobalRoute::default()
        };
    }
    av
}

/// Posts `n` receives of `sge` with [`RECV_WRID`]; returns how many were posted.
pub fn post_recvs(qp: &HwQp, sge: &Sge, n: u32) -> u32 {
    let list = [*sge];
    let wr = RecvWr::new(RECV_WRID, &list);
    let mut posted = 0;
    for _ in 0..n {
        // SAFETY: the caller's MR outlives the QP's use of it (the example keeps it to the
        // end); the pingpong examples read no data, so no Rust reference aliases it.
        if unsafe { qp.post_recv(&[wr]) }.is_err() {
            break;
        }
        posted += 1;
    }
    posted
}

/// The ping-pong loop of rdma-core's examples: each side sends after its previous send
/// completed and a message arrived, until `iters` were sent and received. Receives are
/// reposted when at most one is left. Prints the throughput lines rdma-core prints.
///
/// # Errors
/// A failed completion, post or poll.
pub fn run_loop(
    args: &Args,
    qp: &HwQp,
    cq: &HwCq,
    channel: Option<&HwCompChannel>,
    recv_sge: &Sge,
    mut post_send: impl FnMut() -> Result<()>,
    mut routs: u32,
) -> Result<()> {
    let mut pending = RECV_WRID;
    // The client (`args.server` set) sends first.
    if args.server.is_some() {
        post_send()?;
        pending |= SEND_WRID;
    }
    let start = Instant::now();
    let (mut scnt, mut rcnt) = (0u32, 0u32);
    let mut events = 0u32;
    let mut wc = [Completion::default(); 2];
    while rcnt < args.iters || scnt < args.iters {
        let n = if let Some(ch) = channel {
            ch.get_cq_event(None)?;
            events += 1;
            cq.req_notify(false)?;
            cq.poll(&mut wc)?
        } else {
            loop {
                let n = cq.poll(&mut wc)?;
                if n > 0 {
                    break n;
                }
            }
        };
        for w in &wc[..n] {
            if !w.is_success() {
                return Err(Error::new(
                    ErrorKind::Io,
                    "pingpong",
                    format!(
                        "Failed status {} ({}) for wr_id {}",
                        w.status,
                        w.status.as_raw(),
                        w.wr_id
                    ),
                ));
            }
            match w.wr_id {
                SEND_WRID => scnt += 1,
                RECV_WRID => {
                    routs -= 1;
                    if routs <= 1 {
                        routs += post_recvs(qp, recv_sge, args.rx_depth - routs);
                        if routs < args.rx_depth {
                            return Err(Error::new(
                                ErrorKind::QueueFull,
                                "pingpong",
                                format!("Couldn't post receive ({routs})"),
                            ));
                        }
                    }
                    rcnt += 1;
                }
                other => {
                    return Err(Error::new(
                        ErrorKind::Io,
                        "pingpong",
                        format!("Completion for unknown wr_id {other}"),
                    ))
                }
            }
            pending &= !w.wr_id;
            if scnt < args.iters && pending == 0 {
                post_send()?;
                pending = RECV_WRID | SEND_WRID;
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let bytes = args.size as u64 * u64::from(args.iters) * 2;
    println!(
        "{bytes} bytes in {secs:.2} seconds = {:.2} Mbit/sec",
        bytes as f64 * 8.0 / (secs * 1e6)
    );
    println!(
        "{} iters in {secs:.2} seconds = {:.2} usec/iter",
        args.iters,
        secs * 1e6 / f64::from(args.iters.max(1))
    );
    cq.ack_events(events);
    Ok(())
}

/// Formats a GID as `inet_ntop(AF_INET6)` does in rdma-core's "local address" line.
pub fn gid_text(g: &Gid) -> String {
    std::net::Ipv6Addr::from(g.0).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_format_matches_rdma_core() {
        let d = Dest {
            lid: 0,
            qpn: 0x11,
            psn: 0xabcdef,
            gid: Gid::from_ipv4(std::net::Ipv4Addr::new(10, 77, 0, 1)),
        };
        let w = d.to_wire();
        assert_eq!(
            std::str::from_utf8(&w[..MSG_LEN - 1]).expect("ascii"),
            "0000:000011:abcdef:00000000000000000000ffff0a4d0001"
        );
        assert_eq!(w[MSG_LEN - 1], 0);
        assert_eq!(Dest::from_wire(&w).expect("parse"), d);
    }
}

/// A pingpong's `main`: parses the arguments (`default_size` bytes unless `-s` says
/// otherwise), runs `run`, and prints a usage or a failure as `name: error`.
pub fn main(name: &str, default_size: usize, run: impl FnOnce(&Args) -> Result<()>) -> ExitCode {
    let args = match Args::parse(default_size) {
        Ok(a) => a,
        Err(usage) => {
            eprintln!("{usage}");
            return ExitCode::FAILURE;
        }
    };
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{name}: {e}");
            ExitCode::FAILURE
        }
    }
}
