//! A simulated fabric of two hosts into which a capture is replayed (`--replay PATH`),
//! so that the unchanged verbs receivers consume it.

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

use crate::capture::{CaptureFile, SIM_RX_IP, SIM_TX_IP};
use crate::ibv::IbvMode;

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

impl SimFaults {
    /// The faults `--replay`'s options ask for; reordered frames are held back up to
    /// 20 us.
    pub fn of(args: &crate::capture::ReplayArgs) -> Self {
        SimFaults {
            seed: args.seed,
            loss: args.loss,
            reorder: args.reorder,
            reorder_window_ns: 20_000,
            dup: args.dup,
        }
    }
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
        ip_id: psn as u16,
        ..RoceRoute::new((Mac(src_mac), SIM_TX_IP), (Mac(dst_mac), *dst.ip()))
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
