//! The UDP datagrams of a pcap/pcapng capture, as `--replay` feeds them to the
//! simulated fabric.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;

use crate::cli;

/// The options of a simulated replay, shared by `spead-recv` and `spead-capture`.
#[derive(Debug, Clone, clap::Args)]
pub struct ReplayArgs {
    /// Replay this capture (pcap or pcapng) at its recorded times through a simulated
    /// fabric into the verbs receivers.
    #[arg(long)]
    pub replay: Option<PathBuf>,
    /// Seed of the simulation (--replay).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Loss probability on the simulated receiver's link (--replay).
    #[arg(long, default_value_t = 0.0, value_parser = cli::probability)]
    pub loss: f64,
    /// Reorder probability on the simulated receiver's link, frames held back up to
    /// 20 us (--replay; 0.1 when given alone).
    #[arg(long, num_args = 0..=1, default_missing_value = "0.1", default_value_t = 0.0, value_parser = cli::probability)]
    pub reorder: f64,
    /// Duplication probability on the simulated receiver's link (--replay).
    #[arg(long, default_value_t = 0.0, value_parser = cli::probability)]
    pub dup: f64,
}

/// Where the simulated fabric's receiver host sits; `--ibv-interface` must name it.
pub const SIM_RX_IP: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 2);
/// The simulated host that sends the replayed capture.
pub const SIM_TX_IP: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);

/// The multicast group a unicast destination of a capture is moved to (verbs receivers
/// take multicast only): 239 and the address's low 24 bits (127.0.0.1 -> 239.0.0.1).
pub fn group_for(ip: Ipv4Addr) -> Ipv4Addr {
    if ip.is_multicast() {
        ip
    } else {
        let o = ip.octets();
        Ipv4Addr::new(239, o[1], o[2], o[3])
    }
}

/// The UDP datagrams of a capture, destinations moved to multicast.
#[derive(Debug, Default)]
pub struct CaptureFile {
    /// (timestamp ns, source, destination (multicast), payload), in file order.
    pub datagrams: Vec<(u64, SocketAddrV4, SocketAddrV4, Vec<u8>)>,
    /// Destinations, first-seen order.
    pub endpoints: Vec<SocketAddrV4>,
    /// Unicast destinations that were moved: (from, to).
    pub moved: Vec<(Ipv4Addr, Ipv4Addr)>,
    /// Why the file ended before its end (a truncated or damaged capture), naming the
    /// file: the datagrams before the fault are in `datagrams`.
    pub broken: Option<String>,
}

/// Reads every UDP datagram of a pcap/pcapng capture (the link types of
/// [`spead::pcap`]). A capture damaged part way gives the datagrams before the damage,
/// and says what it was in [`CaptureFile::broken`].
///
/// # Errors
/// A message naming the file and the problem, when it cannot be opened or is not a
/// capture at all, or holds no UDP datagram.
pub fn read_capture(path: &std::path::Path) -> Result<CaptureFile, String> {
    let name = path.display();
    let mut src = spead::pcap::PcapSource::open(path, spead::pcap::Filter::ANY)
        .map_err(|e| format!("{name}: {e}"))?;
    let mut out = CaptureFile::default();
    loop {
        let d = match src.next_datagram() {
            Ok(Some(d)) => d,
            Ok(None) => break,
            Err(e) => {
                out.broken = Some(format!("{name}: {e}"));
                break;
            }
        };
        let g = group_for(*d.dst.ip());
        if g != *d.dst.ip() && !out.moved.iter().any(|m| m.0 == *d.dst.ip()) {
            out.moved.push((*d.dst.ip(), g));
        }
        let dst = SocketAddrV4::new(g, d.dst.port());
        if !out.endpoints.contains(&dst) {
            out.endpoints.push(dst);
        }
        out.datagrams
            .push((d.ts_ns, d.src, dst, d.payload.to_vec()));
    }
    if out.datagrams.is_empty() {
        return Err(match out.broken {
            Some(e) => e,
            None => format!("{name}: no UDP datagrams to replay"),
        });
    }
    Ok(out)
}
