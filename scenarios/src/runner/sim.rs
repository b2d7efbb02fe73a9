//! Scenarios on the simulator: the fabric from the scenario's hosts, its faults as the
//! simulator's fault plan (exact drops and duplicates are applied at the senders, as on
//! hardware), raw receivers on mlx5 hosts, UD on any.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::Path;

use backend_sim::{FaultPlan, LinkFaults, Partition, Personality, Sim, SimVerbs};
use spead::verbs::{IbvConfig, Receiver, Sender};

use super::drive::{Clock, Drive, ReceiverRt, RunError, SenderRt};
use crate::model::{Nic, Scenario, Transport};
use crate::outcome::Outcome;

/// The largest UD message (the simulated ports' active MTU).
pub const UD_MTU: usize = 1024;

/// A finished simulator run: the outcome and the simulation (for its trace hash,
/// capture and statistics).
#[derive(Debug)]
pub struct SimRun {
    /// What happened.
    pub outcome: Outcome,
    /// The simulation after the run.
    pub sim: Sim,
}

struct SimClock<'a>(&'a Sim);

impl Clock for SimClock<'_> {
    fn now(&self) -> u64 {
        self.0.now()
    }
    fn step(&self) -> bool {
        self.0.step()
    }
    fn advance(&self, ns: u64) {
        self.0.run_for(ns);
    }
}

fn mac(ip: Ipv4Addr) -> [u8; 6] {
    let o = ip.octets();
    [0x02, 0x00, o[0], o[1], o[2], o[3]]
}

/// The simulator's fault plan for a scenario's fabric faults.
pub fn fault_plan(s: &Scenario, ports: &[backend_sim::PortId]) -> FaultPlan {
    let f = &s.faults;
    FaultPlan {
        default_link: LinkFaults {
            loss: f.loss,
            duplicate: f.dup,
            corrupt: f.corrupt,
            delay_ns: f.delay_ns,
            jitter_ns: f.jitter_ns,
            reorder: if f.reorder_window > 0 { 0.25 } else { 0.0 },
            reorder_window_ns: u64::from(f.reorder_window) * 2_000,
            buffer_frames: None,
        },
        links: Vec::new(),
        drop_packets: Vec::new(),
        partitions: f
            .partitions
            .iter()
            .filter_map(|p| {
                let h = s.host_index(&p.host)?;
                Some(Partition {
                    side_a: vec![ports[h]],
                    side_b: Vec::new(),
                    start_ns: p.start_ns,
                    end_ns: p.end_ns,
                })
            })
            .collect(),
    }
}

/// Runs `s` on the simulator.
///
/// # Errors
/// [`RunError`] for an invalid scenario, a transport the simulator lacks (UDP), or a
/// failing transport.
pub fn run_sim(s: &Scenario) -> Result<Outcome, RunError> {
    run_sim_with(s, None).map(|r| r.outcome)
}

/// Runs `s` on the simulator, capturing every frame to `capture` if given.
///
/// # Errors
/// As [`run_sim`].
pub fn run_sim_with(s: &Scenario, capture: Option<&Path>) -> Result<SimRun, RunError> {
    s.validate()?;
    let sim = Sim::new(s.seed);
    let mut hosts = Vec::new();
    let mut ports = Vec::new();
    for h in &s.hosts {
        let personality = match h.nic {
            Nic::Mlx5 => Personality::Mlx5,
            Nic::Rxe => Personality::Rxe,
        };
        let id = sim
            .add_host(&h.name, h.ip, personality)
            .map_err(|e| RunError::Backend(e.to_string()))?;
        ports.push(
            sim.port_of(id)
                .ok_or_else(|| RunError::Backend("host without port".into()))?,
        );
        hosts.push(id);
    }
    sim.set_faults(fault_plan(s, &ports))
        .map_err(|e| RunError::Backend(e.to_string()))?;
    if let Some(path) = capture {
        sim.capture_to_file(path, backend_sim::CaptureFilter::All)
            .map_err(|e| RunError::Backend(e.to_string()))?;
    }
    let verbs = |name: &str| -> SimVerbs { sim.verbs(hosts[s.host_index(name).unwrap_or(0)]) };
    let ip = |name: &str| s.hosts[s.host_index(name).unwrap_or(0)].ip;
    let packet_size = |i: usize| -> usize {
        let snd = &s.senders[i];
        let ud = s
            .receivers
            .iter()
            .any(|r| r.transport == Transport::Ud && r.groups.contains(&snd.group));
        if ud {
            snd.packet_size.min(UD_MTU) & !7
        } else {
            snd.packet_size & !7
        }
    };
    let mut receivers = Vec::new();
    for (r, spec) in s.receivers.iter().enumerate() {
        let endpoints: Vec<SocketAddrV4> = spec
            .groups
            .iter()
            .map(|&g| SocketAddrV4::new(s.groups[g].addr, s.groups[g].port))
            .collect();
        let max_size = s
            .senders_of(r)
            .iter()
            .map(|&i| packet_size(i))
            .max()
            .unwrap_or(1472)
            .max(64);
        let mut cfg = IbvConfig::new(endpoints, ip(&spec.host));
        cfg.max_size = max_size;
        cfg.comp_vector = -1;
        let slot = max_size
            + if spec.transport == Transport::Ud {
                verbs_api::GRH_LEN
            } else {
                42
            };
        cfg.buffer_size = spec.buffer_slots * slot;
        let transport = match spec.transport {
            Transport::Raw => Receiver::raw(&verbs(&spec.host), &cfg)?,
            Transport::Ud => Receiver::ud(&verbs(&spec.host), &cfg)?,
            Transport::Udp => {
                return Err(RunError::Unsupported(format!(
                    "receiver {r}: the UDP transport runs on real sockets only"
                )))
            }
        };
        let slot_bytes = (transport.slots() * slot) as u64;
        receivers.push(ReceiverRt {
            transport,
            slot_bytes,
        });
    }
    let mut senders = Vec::new();
    for (i, spec) in s.senders.iter().enumerate() {
        let g = s.groups[spec.group];
        let size = packet_size(i);
        let mut cfg = IbvConfig::new(vec![SocketAddrV4::new(g.addr, g.port)], ip(&spec.host));
        cfg.max_size = size;
        cfg.buffer_size = 256 * (size + 42);
        cfg.comp_vector = -1;
        let subscribed = |t: Transport| {
            s.receivers
                .iter()
                .any(|r| r.transport == t && r.groups.contains(&spec.group))
        };
        let mut transports = Vec::new();
        if subscribed(Transport::Raw) {
            transports.push(Sender::raw(&verbs(&spec.host), &cfg, mac(ip(&spec.host)))?);
        }
        if subscribed(Transport::Ud) {
            transports.push(Sender::ud(&verbs(&spec.host), &cfg)?);
        }
        senders.push(SenderRt {
            transports,
            index: i,
            packet_size: size,
        });
    }
    let outcome = Drive { senders, receivers }.run(s, &SimClock(&sim), 64)?;
    let mut outcome = outcome;
    outcome.trace_hash = Some(sim.trace_hash());
    if capture.is_some() {
        sim.finish_capture()
            .map_err(|e| RunError::Backend(e.to_string()))?;
    }
    Ok(SimRun { outcome, sim })
}
