//! The RC state machine fed arbitrary packets: the driver of the `rc_frames` fuzz target
//! (`fuzz/fuzz_targets/rc_frames.rs`), here so that a test can check that running
//! inputs one after another on one [`Rig`] gives what each gives on a fresh one.
//!
//! Two simulated hosts with a connected RC pair (receives posted, a SEND, an RDMA WRITE
//! and a READ in flight), and the input's records injected as RoCEv2 packets from either
//! host's port to the other's QP, with a valid ICRC so that they reach the transport.
//! Each record: a direction byte, then a length byte and that many bytes of BTH,
//! extension headers and payload; the BTH's destination QP is set to the real QP so that
//! the packet is not just dropped. The simulation runs between records and the CQs are
//! drained; nothing may panic.
//!
//! The hosts are set up once ([`Rig::new`], which takes a [`Snapshot`] at the end) and
//! each input starts from that snapshot ([`Rig::run`] restores it when the input is
//! done), so an input costs its own packets only, not two hosts' set-up.

use std::net::Ipv4Addr;

use backend_sim::{HostId, Personality, PortId, Sim, SimVerbs, Snapshot};
use netwire::eth::{EthHeader, Mac, ETHERTYPE_IPV4};
use netwire::ipv4::{Ipv4Header, PROTO_UDP};
use netwire::roce::{compute_icrc, BTH_LEN, ROCEV2_UDP_PORT};
use netwire::udp::{UdpHeader, UDP_HEADER_LEN};
use verbs_api::helpers::transition::{bring_up, ConnectParams, RemoteQp};
use verbs_api::{
    AccessFlags, AhAttr, Completion, CompletionQueue, Context, Gid, MemoryRegion, QpCap,
    QpInitAttr, QpState, QpType, QueuePair, RecvWr, SendWr, Sge, Verbs,
};

/// The simulator's device context.
type Ctx = <SimVerbs as Verbs>::Context;

/// At most this many records of an input are injected.
pub const MAX_RECORDS: usize = 64;

/// Bytes of each host's registered region.
const MR_LEN: usize = 16384;

fn ip(n: u8) -> Ipv4Addr {
    Ipv4Addr::new(10, 7, 0, n)
}

fn mac(n: u8) -> Mac {
    Mac([0x02, 0, 10, 7, 0, n])
}

/// An Ethernet/IPv4/UDP frame around `roce` (BTH onwards) with its ICRC.
fn frame(from: u8, to: u8, roce: &[u8]) -> Vec<u8> {
    let udp_len = roce.len() + 4;
    let mut out = Vec::with_capacity(64 + roce.len());
    EthHeader::write_untagged(mac(to), mac(from), ETHERTYPE_IPV4, &mut out);
    Ipv4Header::write(
        &mut out,
        0,
        UDP_HEADER_LEN + udp_len,
        0,
        true,
        64,
        PROTO_UDP,
        ip(from),
        ip(to),
    );
    UdpHeader::write(&mut out, 49152, ROCEV2_UDP_PORT, udp_len);
    out.extend_from_slice(roce);
    let icrc = compute_icrc(&out[14..]);
    out.extend_from_slice(&icrc.to_le_bytes());
    out
}

/// What one input did: every completion polled, the trace hash and the bytes of both
/// regions at the end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The completions, in the order polled.
    pub completions: Vec<Completion>,
    /// The simulation's trace hash at the end.
    pub trace_hash: u64,
    /// Both regions' bytes at the end.
    pub memory: Vec<Vec<u8>>,
}

/// Two hosts with a connected RC pair, as every input finds them.
pub struct Rig {
    // Declared in drop order: QPs before their CQs, PDs and regions, contexts last.
    _qps: Vec<<Ctx as Context>::Qp>,
    cqs: Vec<<Ctx as Context>::Cq>,
    mrs: Vec<<Ctx as Context>::Mr>,
    _pds: Vec<<Ctx as Context>::Pd>,
    _ctxs: Vec<Ctx>,
    ports: [Option<PortId>; 2],
    qpns: [u32; 2],
    sim: Sim,
    start: Snapshot,
}

impl std::fmt::Debug for Rig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rig").field("qpns", &self.qpns).finish()
    }
}

impl Rig {
    /// Sets the hosts up: RC QPs in RTS, four receives posted on each, and a SEND, an
    /// RDMA WRITE and an RDMA READ posted by host a; then takes the snapshot every input
    /// starts from.
    ///
    /// # Panics
    /// When the simulator refuses the set-up (a bug).
    #[must_use]
    pub fn new() -> Self {
        let sim = Sim::new(1);
        let hosts: [HostId; 2] = [
            sim.add_host("a", ip(1), Personality::Rxe).expect("host a"),
            sim.add_host("b", ip(2), Personality::Mlx5).expect("host b"),
        ];
        let verbs = [sim.verbs(hosts[0]), sim.verbs(hosts[1])];
        let ctxs: Vec<Ctx> = verbs
            .iter()
            .map(|v| {
                let name = v.devices().expect("devices")[0].name.clone();
                v.open(&name).expect("open")
            })
            .collect();
        let pds: Vec<_> = ctxs.iter().map(|c| c.alloc_pd().expect("pd")).collect();
        let cqs: Vec<_> = ctxs
            .iter()
            .map(|c| c.create_cq(64, None, 0).expect("cq"))
            .collect();
        let access = AccessFlags::LOCAL_WRITE
            | AccessFlags::REMOTE_WRITE
            | AccessFlags::REMOTE_READ
            | AccessFlags::REMOTE_ATOMIC;
        let mrs: Vec<_> = ctxs
            .iter()
            .zip(&pds)
            .map(|(c, pd)| c.alloc_mr(pd, MR_LEN, access).expect("mr"))
            .collect();
        let cap = QpCap::new(16, 16, 1, 1);
        let qps: Vec<_> = (0..2)
            .map(|i| {
                ctxs[i]
                    .create_qp(&pds[i], &QpInitAttr::new(QpType::Rc, &cqs[i], cap))
                    .expect("qp")
            })
            .collect();
        for i in 0..2 {
            let peer = 1 - i;
            let p = ConnectParams {
                access,
                remote: Some(RemoteQp {
                    qpn: qps[peer].qp_num(),
                    psn: 0,
                    av: AhAttr::roce(Gid::from_ipv4(ip(peer as u8 + 1)), 1, 1),
                }),
                timeout: 8,
                retry_cnt: 2,
                rnr_retry: 2,
                min_rnr_timer: 1,
                ..ConnectParams::default()
            };
            bring_up(&qps[i], QpState::Rts, &p).expect("bring up");
            let sge = |k: u64| Sge {
                addr: mrs[i].addr() + k * 1024,
                length: 1024,
                lkey: mrs[i].lkey(),
            };
            for k in 0..4 {
                let sges = [sge(k)];
                // SAFETY: the SGEs lie in `mrs[i]`, which the rig keeps as long as the QP.
                unsafe { qps[i].post_recv(&[RecvWr::new(k, &sges)]) }.expect("post recv");
            }
        }
        let local = [Sge {
            addr: mrs[0].addr() + 8192,
            length: 512,
            lkey: mrs[0].lkey(),
        }];
        let remote_addr = mrs[1].addr() + 8192;
        let rkey = mrs[1].rkey();
        let wrs = [
            SendWr::send(10, &local).signaled(),
            SendWr::rdma_write(11, &local, remote_addr, rkey).signaled(),
            SendWr::rdma_read(12, &local, remote_addr, rkey).signaled(),
        ];
        // SAFETY: the SGEs lie in `mrs[0]`, which the rig keeps as long as the QP.
        let _ = unsafe { qps[0].post_send(&wrs) };
        let qpns = [qps[0].qp_num(), qps[1].qp_num()];
        let ports = [sim.port_of(hosts[0]), sim.port_of(hosts[1])];
        let start = sim.snapshot().expect("snapshot of the set-up");
        Rig {
            _qps: qps,
            cqs,
            mrs,
            _pds: pds,
            _ctxs: ctxs,
            ports,
            qpns,
            sim,
            start,
        }
    }

    /// Runs one input from the set-up's state.
    ///
    /// # Panics
    /// When the simulator does (what the fuzz target looks for), or cannot restore the
    /// set-up (a bug).
    pub fn run(&mut self, data: &[u8]) {
        self.drive(data, None);
        self.reset();
    }

    /// Runs one input from the set-up's state and says what it did.
    ///
    /// # Panics
    /// As [`Rig::run`].
    pub fn run_outcome(&mut self, data: &[u8]) -> Outcome {
        let mut completions = Vec::new();
        self.drive(data, Some(&mut completions));
        let memory = self
            .mrs
            .iter()
            .map(|m| {
                // SAFETY: the region is the rig's own, alive, and nothing writes to it
                // now (the simulation only runs inside `drive`).
                unsafe { std::slice::from_raw_parts(m.addr() as *const u8, MR_LEN) }.to_vec()
            })
            .collect();
        let outcome = Outcome {
            completions,
            trace_hash: self.sim.trace_hash(),
            memory,
        };
        self.reset();
        outcome
    }

    /// Back to the set-up's state. Done at the end of an input rather than the start, so
    /// that an input frees as many allocations as it makes (the world it grew is dropped
    /// and a copy of the same snapshot made every time): libFuzzer suspects a leak in an
    /// input that makes more, and runs it again to look.
    fn reset(&mut self) {
        self.sim.restore(&self.start).expect("restore the set-up");
    }

    fn drive(&mut self, data: &[u8], mut out: Option<&mut Vec<Completion>>) {
        let mut wc = [Completion::default(); 16];
        let mut drain = |cqs: &[<Ctx as Context>::Cq], out: &mut Option<&mut Vec<Completion>>| {
            for cq in cqs {
                while let Ok(n @ 1..) = cq.poll(&mut wc) {
                    if let Some(out) = out.as_deref_mut() {
                        out.extend_from_slice(&wc[..n]);
                    }
                }
            }
        };
        let mut rest = data;
        let mut records = 0;
        while let [dir, len, tail @ ..] = rest {
            let n = usize::from(*len).min(tail.len());
            let (body, next) = tail.split_at(n);
            rest = next;
            records += 1;
            if records > MAX_RECORDS {
                break;
            }
            let from = usize::from(dir & 1);
            let to = 1 - from;
            let mut roce = body.to_vec();
            if roce.len() >= BTH_LEN {
                roce[5..8].copy_from_slice(&self.qpns[to].to_be_bytes()[1..]);
                // P_Key 0xffff, version 0: the default partition.
                roce[2..4].copy_from_slice(&[0xff, 0xff]);
                roce[1] &= 0xf0;
            }
            let f = frame(from as u8 + 1, to as u8 + 1, &roce);
            if let Some(port) = self.ports[from] {
                let _ = self.sim.with_fabric(|fab| fab.transmit(port, f));
            }
            self.sim.run_for(u64::from(*dir) * 1_000);
            drain(&self.cqs, &mut out);
        }
        self.sim.run_until_idle();
        drain(&self.cqs, &mut out);
    }
}

impl Default for Rig {
    fn default() -> Self {
        Self::new()
    }
}
