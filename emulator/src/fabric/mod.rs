//! The fabric process and the link to it: how two emulated processes on one machine talk
//! to each other as two hosts would.
//!
//! The fabric process ([`server`], the `verbs-emu-fabric` binary) owns the switch, the
//! links with the topology's faults (drawn from its seed) and the pcap capture; it has a
//! port per host of the topology and no NICs. Each emulated process keeps only its own
//! host's NIC (it DMAs into the program's memory), whose port's link leads out of the
//! process's simulation (backend-sim's external links): the process joins the fabric over
//! a `SOCK_SEQPACKET` Unix socket ([`client`]: a hello naming its host, then multicast
//! joins and leaves, doorbells and the connection manager's messages, see [`wire`]; the
//! frames travel in shared-memory rings, [`ring`]), and its progress thread injects the
//! frames that come back at the current virtual time ([`spacing`] notes when frames
//! left and came, for the connection manager). The fabric holds what a full ring
//! has no room for, up to [`server::BACKLOG_BYTES`]. Two processes whose hosts' links
//! have no faults, when nothing is captured, send each other their unicast frames
//! through a ring pair of their own ([`direct`]), the fabric keeping control. Both sides run on the
//! wall clock. With [`FABRIC_ENV`] unset a process simulates every host itself, as
//! before.
//!
//! The fabric process may also have [`ports`] to real networks (a VXLAN tunnel to another
//! fabric process or a Linux `vxlan` interface, a QEMU `-netdev stream` socket): uplinks
//! of its switch, configured in the topology's `[[port]]` tables or by flags.

pub mod client;
pub mod direct;
pub mod member;
pub mod ports;
pub mod ring;
pub mod server;
pub mod spacing;
pub mod stall;
pub mod sys;
pub mod wire;

use backend_sim::{Direction, FaultPlan, LinkFaultRule, PortId};

use crate::topology::Topology;

/// Environment variable naming the fabric's socket: a process joins that fabric as its
/// host (`VERBS_EMU_HOST`) instead of simulating every host itself.
pub const FABRIC_ENV: &str = "VERBS_EMU_FABRIC";

/// The topology's link faults as a fault plan: each host's faults act on the frames the
/// switch sends to it (`ports[i]` is the port of the topology's `i`-th host that is not
/// `remote`).
#[must_use]
pub fn fault_plan(topology: &Topology, ports: &[PortId]) -> FaultPlan {
    let mut plan = FaultPlan::none();
    let local = topology.hosts.iter().filter(|h| !h.remote);
    for (h, &port) in local.zip(ports) {
        if !h.faults.is_clean() {
            plan.links.push(LinkFaultRule {
                port,
                direction: Direction::FromSwitch,
                faults: h.faults.clone(),
            });
        }
    }
    plan
}
