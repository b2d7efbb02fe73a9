//! What `spead-recv` and `spead-capture` share: the verbs backends (`--backend hw|sim`),
//! the verbs receivers of a set of endpoints (`--ibv-mode raw|ud`), and a simulated
//! fabric into which a pcap is replayed (`--replay PATH`) so that the unchanged verbs
//! receivers consume it. Each binary uses part of it.
#![allow(dead_code)]

use std::net::{Ipv4Addr, SocketAddrV4};

use clap::ValueEnum;
use spead::verbs::{parse_interface, IbvConfig, Receiver, VerbsError};
use verbs_api::Verbs;

/// Which verbs implementation runs the receivers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    /// libibverbs: a real device or Soft-RoCE (feature `hw`).
    Hw,
    /// The deterministic simulator (feature `sim`); its traffic comes from `--replay`.
    Sim,
}

/// Which verbs transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum IbvMode {
    /// RAW_PACKET QP with flow steering (mlx5), whole Ethernet frames.
    Raw,
    /// UD multicast (rxe, InfiniBand).
    Ud,
}

/// Parses `GROUP:PORT` (IPv4 only).
///
/// # Errors
/// A message naming the text.
pub fn parse_endpoint(s: &str) -> Result<SocketAddrV4, String> {
    s.parse::<SocketAddrV4>().map_err(|_| {
        if s.parse::<std::net::SocketAddrV6>().is_ok() {
            format!("{s}: IPv6 endpoints are not supported (IPv4 multicast only)")
        } else {
            format!("{s}: not an IPv4 GROUP:PORT")
        }
    })
}

/// The receive configuration: `endpoints` on `interface` (or `SPEAD2_IBV_INTERFACE`),
/// completion vector `comp_vector` if given, else `SPEAD2_IBV_COMP_VECTOR`, else
/// `default_vector`; checked as spead2 does.
///
/// # Errors
/// A message for a bad interface, environment variable or endpoint.
pub fn ibv_config(
    endpoints: Vec<SocketAddrV4>,
    interface: Option<&str>,
    comp_vector: Option<i32>,
    default_vector: i32,
    max_poll: u32,
    (max_size, buffer_size): (usize, usize),
) -> Result<IbvConfig, String> {
    let mut cfg = IbvConfig {
        endpoints,
        max_size,
        buffer_size,
        max_poll,
        comp_vector: default_vector,
        ..IbvConfig::default()
    };
    if let Some(i) = interface {
        cfg.interface = Some(parse_interface(i).map_err(|e| e.to_string())?);
    }
    cfg.apply_env().map_err(|e| e.to_string())?;
    if let Some(v) = comp_vector {
        cfg.comp_vector = v;
    }
    cfg.validate().map_err(|e| e.to_string())?;
    Ok(cfg)
}

/// The receivers of `cfg`'s endpoints: one RAW_PACKET receiver for all, or one UD
/// receiver per UDP port (a UD receiver's port selects its Q_Key).
///
/// # Errors
/// The receivers' errors.
pub fn open_receivers<V: Verbs>(
    verbs: &V,
    cfg: &IbvConfig,
    mode: IbvMode,
) -> Result<Vec<Receiver<V::Context>>, VerbsError> {
    match mode {
        IbvMode::Raw => Ok(vec![Receiver::raw(verbs, cfg)?]),
        IbvMode::Ud => {
            let mut ports: Vec<u16> = cfg.endpoints.iter().map(|e| e.port()).collect();
            ports.dedup();
            ports.sort_unstable();
            ports.dedup();
            ports
                .into_iter()
                .map(|p| {
                    let mut c = cfg.clone();
                    c.endpoints.retain(|e| e.port() == p);
                    Receiver::ud(verbs, &c)
                })
                .collect()
        }
    }
}

/// The error for `--backend hw` in a build without the `hw` feature.
pub fn hw_missing() -> String {
    "the hw backend is not compiled in: rebuild with `--features spead/hw` (needs \
     libibverbs-dev), or use --backend sim with --replay PATH"
        .to_string()
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
}

/// Reads every UDP datagram of a pcap/pcapng capture (the link types of
/// [`spead::pcap`]).
///
/// # Errors
/// A message naming the file and the problem.
pub fn read_capture(path: &std::path::Path) -> Result<CaptureFile, String> {
    let name = path.display();
    let mut src = spead::pcap::PcapSource::open(path, spead::pcap::Filter::ANY)
        .map_err(|e| format!("{name}: {e}"))?;
    let mut out = CaptureFile::default();
    while let Some(d) = src.next_datagram().map_err(|e| format!("{name}: {e}"))? {
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
    Ok(out)
}

#[cfg(feature = "sim")]
pub use self::sim::{SimFaults, SimNet};

#[cfg(feature = "sim")]
mod sim {
    use std::net::SocketAddrV4;

    use backend_sim::frame::eth::Mac;
    use backend_sim::frame::roce::{
        build_roce_frame, opcode, Bth, Deth, RoceHeaders, RoceRoute, DEFAULT_PKEY, MULTICAST_QPN,
    };
    use backend_sim::pcap::{PcapFile, PcapRecord, LINKTYPE_ETHERNET};
    use backend_sim::{
        Direction, FaultPlan, HostId, LinkFaultRule, LinkFaults, Personality, ReplayOptions, Sim,
        SimVerbs,
    };
    use spead::verbs::frame::udp_frame;
    use spead::verbs::ud_qkey;

    use super::{CaptureFile, IbvMode, SIM_RX_IP, SIM_TX_IP};

    /// Faults on the receiver's link (`--seed`, `--loss`, `--reorder`, `--dup`).
    #[derive(Debug, Clone, Default)]
    pub struct SimFaults {
        /// Seed of the simulation's random draws.
        pub seed: u64,
        /// Loss probability.
        pub loss: f64,
        /// Reorder probability.
        pub reorder: f64,
        /// Largest hold-back of a reordered frame, ns.
        pub reorder_window_ns: u64,
        /// Duplication probability.
        pub dup: f64,
    }

    /// A fabric of two simulated hosts (mlx5 for raw, rxe for UD): one replays a
    /// capture, the other runs the receivers.
    #[derive(Debug)]
    pub struct SimNet {
        sim: Sim,
        tx: HostId,
        rx: HostId,
        mode: IbvMode,
        /// Datagrams too long for a UD message (skipped).
        pub too_long: usize,
    }

    impl SimNet {
        /// The two hosts, with `faults` on the link into the receiver.
        ///
        /// # Errors
        /// A message when the fabric rejects the set-up.
        pub fn new(mode: IbvMode, faults: &SimFaults) -> Result<Self, String> {
            let sim = Sim::new(faults.seed);
            let p = match mode {
                IbvMode::Raw => Personality::Mlx5,
                IbvMode::Ud => Personality::Rxe,
            };
            let tx = sim
                .add_host("tx", SIM_TX_IP, p)
                .map_err(|e| e.to_string())?;
            let rx = sim
                .add_host("rx", SIM_RX_IP, p)
                .map_err(|e| e.to_string())?;
            let link = LinkFaults {
                loss: faults.loss,
                duplicate: faults.dup,
                reorder: faults.reorder,
                reorder_window_ns: faults.reorder_window_ns,
                ..LinkFaults::default()
            };
            if !link.is_clean() {
                let port = sim.port_of(rx).ok_or("the receiver host has no port")?;
                sim.set_faults(FaultPlan {
                    links: vec![LinkFaultRule {
                        port,
                        direction: Direction::FromSwitch,
                        faults: link,
                    }],
                    ..FaultPlan::default()
                })
                .map_err(|e| e.to_string())?;
            }
            Ok(SimNet {
                sim,
                tx,
                rx,
                mode,
                too_long: 0,
            })
        }

        /// The receiver host's verbs.
        pub fn verbs(&self) -> SimVerbs {
            self.sim.verbs(self.rx)
        }

        /// The simulation.
        pub fn sim(&self) -> &Sim {
            &self.sim
        }

        /// Schedules the capture's datagrams at their recorded spacing from now, as the
        /// sender host would send them: raw Ethernet/IPv4/UDP frames, or RoCEv2 UD
        /// messages to the group (Q_Key from the port) for UD, where datagrams longer
        /// than the port MTU cannot travel and are skipped (counted in `too_long`).
        /// Returns the frames scheduled.
        ///
        /// # Errors
        /// A message when the fabric rejects the replay.
        pub fn inject(&mut self, cap: &CaptureFile) -> Result<usize, String> {
            let o = SIM_TX_IP.octets();
            let tx_mac = [0x02, 0x00, o[0], o[1], o[2], o[3]];
            let mtu = Personality::Rxe.active_mtu().bytes() as usize;
            let mut records = Vec::with_capacity(cap.datagrams.len());
            for (i, (ts, src, dst, payload)) in cap.datagrams.iter().enumerate() {
                let group_mac = Mac::for_ipv4_multicast(*dst.ip()).0;
                let data = match self.mode {
                    IbvMode::Raw => udp_frame(
                        tx_mac,
                        SocketAddrV4::new(SIM_TX_IP, src.port()),
                        group_mac,
                        *dst,
                        64,
                        payload,
                    ),
                    IbvMode::Ud => {
                        if payload.len() > mtu {
                            self.too_long += 1;
                            continue;
                        }
                        ud_frame(tx_mac, group_mac, *dst, i as u32, payload)
                    }
                };
                records.push(PcapRecord {
                    ts_ns: *ts,
                    orig_len: data.len() as u32,
                    data,
                });
            }
            let file = PcapFile {
                link_type: LINKTYPE_ETHERNET,
                snaplen: 65_535,
                records,
            };
            let port = self
                .sim
                .port_of(self.tx)
                .ok_or("the sender host has no port")?;
            let summary = self
                .sim
                .with_fabric(|f| f.replay(port, &file, ReplayOptions::default()))
                .map_err(|e| e.to_string())?;
            Ok(summary.frames)
        }

        /// True when nothing is left to happen (the replay is over and every frame
        /// arrived).
        pub fn idle(&self) -> bool {
            self.sim.with_fabric(|f| f.pending_events()) == 0
        }

        /// Virtual time, ns.
        pub fn now(&self) -> u64 {
            self.sim.now()
        }
    }

    fn ud_frame(
        src_mac: [u8; 6],
        dst_mac: [u8; 6],
        dst: SocketAddrV4,
        psn: u32,
        payload: &[u8],
    ) -> Vec<u8> {
        let route = RoceRoute {
            src_mac: Mac(src_mac),
            dst_mac: Mac(dst_mac),
            src_ip: SIM_TX_IP,
            dst_ip: *dst.ip(),
            src_port: 0xc000,
            tos: 0,
            ttl: 64,
            ip_id: psn as u16,
        };
        let headers = RoceHeaders {
            bth: Bth {
                opcode: opcode::UD | opcode::SEND_ONLY,
                pkey: DEFAULT_PKEY,
                dest_qp: MULTICAST_QPN,
                psn: psn & 0x00ff_ffff,
                ..Bth::default()
            },
            deth: Some(Deth {
                qkey: ud_qkey(dst.port()),
                src_qp: 1,
            }),
            ..RoceHeaders::default()
        };
        build_roce_frame(&route, &headers, payload)
    }
}
