//! Scenarios on the simulator: the fabric from the scenario's hosts, its faults as the
//! simulator's fault plan (exact drops and duplicates are applied at the senders, as on
//! hardware), raw receivers on mlx5 hosts, UD on any.

use std::collections::BTreeSet;
use std::path::Path;

use backend_sim::{BurstLoss, FaultPlan, HostId, LinkFaults, Partition, Personality, PortId, Sim};

use super::drive::{build, Clock, RunError};
use crate::model::{Nic, Scenario};
use crate::outcome::Outcome;

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

/// The heaps corruption nothing below the application could see touched in `sim` (see
/// [`Outcome::tainted`]): the heap counter of each SPEAD packet a sender corrupted, as
/// sent and as it left, and of each packet flipped in the switch that the receiving
/// NIC's checks passed, as it arrived; where they decode.
pub fn tainted(sim: &Sim) -> BTreeSet<u64> {
    use backend_sim::frame::{roce, FrameView};
    let spead_cnt = |frame: &[u8]| -> Option<u64> {
        let view = FrameView::parse(frame).ok()?;
        let udp = &frame[view.udp_payload()?];
        let packet = if view.is_roce() {
            roce::parse_roce(udp).ok()?.payload
        } else {
            udp
        };
        spead::wire::decode_packet(packet).ok().map(|p| p.heap_cnt)
    };
    sim.with_fabric(|f| {
        let mut out = BTreeSet::new();
        for c in f.payload_corruptions() {
            let mut meant = c.frame.clone();
            meant[c.bit / 8] ^= 0x80 >> (c.bit % 8);
            out.extend(spead_cnt(&c.frame));
            out.extend(spead_cnt(&meant));
        }
        for c in f.undetected_corruptions() {
            out.extend(spead_cnt(&c.frame));
        }
        out
    })
}

/// The simulator's fault plan for a scenario's fabric faults.
pub fn fault_plan(s: &Scenario, ports: &[backend_sim::PortId]) -> FaultPlan {
    let f = &s.faults;
    FaultPlan {
        default_link: LinkFaults {
            loss: f.loss,
            burst: f.burst.map(|b| BurstLoss {
                enter: b.enter,
                leave: b.leave,
                loss: b.loss,
            }),
            duplicate: f.dup,
            corrupt: f.corrupt,
            corrupt_switch: f.corrupt_switch,
            corrupt_payload: f.corrupt_payload,
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
    let _span = run_span(s).entered();
    let SimHosts {
        sim, hosts, macs, ..
    } = SimHosts::new(s)?;
    if let Some(path) = capture {
        sim.capture_to_file(path, backend_sim::CaptureFilter::All)
            .map_err(backend)?;
    }
    let drive = build(s, |h| sim.verbs(hosts[h]), |h| s.hosts[h].ip, |h| macs[h])?;
    let mut outcome = drive.run(s, &SimClock(&sim), u32::MAX)?;
    finish(&sim, &mut outcome);
    if capture.is_some() {
        sim.finish_capture().map_err(backend)?;
    }
    Ok(SimRun { outcome, sim })
}

/// The `tracing` span of one run of `s` (`RUST_LOG=scenarios=debug`).
pub fn run_span(s: &Scenario) -> tracing::Span {
    tracing::debug_span!(
        "run_sim",
        scenario = %s.name,
        seed = s.seed,
        hosts = s.hosts.len(),
        senders = s.senders.len(),
        receivers = s.receivers.len()
    )
}

/// Fills in what only the simulation knows once a run has ended: the trace hash and the
/// tainted heaps.
pub fn finish(sim: &Sim, outcome: &mut Outcome) {
    outcome.trace_hash = Some(sim.trace_hash());
    outcome.tainted = tainted(sim);
    tracing::debug!(
        virtual_ns = sim.now(),
        trace_hash = %format!("{:016x}", sim.trace_hash()),
        "run finished"
    );
}

/// The simulation of a scenario's hosts, its fault plan installed.
#[derive(Debug)]
pub struct SimHosts {
    /// The simulation.
    pub sim: Sim,
    /// Each scenario host's id, in the scenario's order.
    pub hosts: Vec<HostId>,
    /// Each host's port.
    pub ports: Vec<PortId>,
    /// Each port's MAC address.
    pub macs: Vec<[u8; 6]>,
}

impl SimHosts {
    /// Builds the hosts of `s` (after validating it) on a simulation seeded with its seed.
    ///
    /// # Errors
    /// An invalid scenario, or a host the fabric refuses.
    pub fn new(s: &Scenario) -> Result<Self, RunError> {
        s.validate()?;
        let sim = Sim::new(s.seed);
        let mut hosts = Vec::new();
        let mut ports = Vec::new();
        for h in &s.hosts {
            let personality = match h.nic {
                Nic::Mlx5 => Personality::Mlx5,
                Nic::Rxe => Personality::Rxe,
            };
            let id = sim.add_host(&h.name, h.ip, personality).map_err(backend)?;
            ports.push(
                sim.port_of(id)
                    .ok_or_else(|| backend("host without a port"))?,
            );
            hosts.push(id);
        }
        sim.set_faults(fault_plan(s, &ports)).map_err(backend)?;
        let macs = ports
            .iter()
            .map(|&p| sim.with_fabric(|f| f.port_config(p).map(|c| c.mac.0)))
            .collect::<Result<_, _>>()
            .map_err(backend)?;
        Ok(SimHosts {
            sim,
            hosts,
            ports,
            macs,
        })
    }
}

/// A backend failure as a run error.
pub fn backend(e: impl std::fmt::Display) -> RunError {
    RunError::Backend(e.to_string())
}
