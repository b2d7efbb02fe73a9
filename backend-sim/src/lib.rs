//! # backend-sim
//!
//! A deterministic, in-process simulator of RDMA devices, queue pairs, completion queues,
//! memory regions, multicast and flow steering on a switched Ethernet fabric. It implements
//! the traits of [`verbs_api`] so that verbs code (and the SPEAD transports built on it) runs
//! in CI with no NIC, and so that a lost-packet bug can be replayed from a seed.
//!
//! The layers, bottom up:
//! - [`frame`]: real Ethernet/IPv4/UDP/RoCEv2 bytes (BTH, DETH, RETH, AETH, AtomicETH,
//!   AtomicAckETH, ImmDt, ICRC), builders and parsers;
//! - [`Fabric`]: a small event loop over hosts' ports and one switch with IPv4 multicast: a
//!   virtual clock, one seeded RNG, one event queue ordered by (time, sequence). Each
//!   direction of a port's link is a stack in the manner of smoltcp's phy layer (a wire
//!   with latency and bandwidth inside a fault injector applying the [`fault`]s, plain
//!   values); observers see every hop (the trace hash and `tracing` events, a [`pcap`]
//!   capture), and a pcap replay is a frame source at a port;
//! - [`verbs`]: simulated NICs with the `rxe` and `mlx5` [`Personality`], implementing every
//!   verbs-api trait: RAW_PACKET with flow steering, UD with multicast, RC/UC with PSNs,
//!   ACKs, retransmission and RNR (a sans-IO state machine per QP, tested as a pair in
//!   virtual time), SRQs, completion channels and async events.
//!
//! Nothing is logged unless a `tracing` subscriber listens: under one that reads
//! `RUST_LOG`, `RUST_LOG=backend_sim=trace` shows every fabric event, `=debug` the runs,
//! fault plans and replays.
//!
//! Time is virtual: it moves only when the application waits on a completion channel,
//! polls an empty CQ (which takes the next event), or calls [`Sim::step`],
//! [`Sim::run_for`] or [`Sim::run_until_idle`]. The same seed and the same calls give the
//! same [`Sim::trace_hash`].
//!
//! ```
//! use backend_sim::{Personality, Sim};
//! use std::net::Ipv4Addr;
//! use verbs_api::*;
//!
//! let sim = Sim::new(42);
//! let a = sim.add_host("a", Ipv4Addr::new(10, 0, 0, 1), Personality::Rxe).unwrap();
//! let b = sim.add_host("b", Ipv4Addr::new(10, 0, 0, 2), Personality::Rxe).unwrap();
//! let (ca, cb) = (sim.verbs(a).open("rxe0").unwrap(), sim.verbs(b).open("rxe0").unwrap());
//! let (pa, pb) = (ca.alloc_pd().unwrap(), cb.alloc_pd().unwrap());
//! let (qa_cq, qb_cq) = (ca.create_cq(16, None, 0).unwrap(), cb.create_cq(16, None, 0).unwrap());
//! let mr_a = ca.alloc_mr(&pa, 4096, AccessFlags::LOCAL_WRITE).unwrap();
//! let mr_b = cb.alloc_mr(&pb, 4096, AccessFlags::LOCAL_WRITE).unwrap();
//! let cap = QpCap { max_send_wr: 4, max_recv_wr: 4, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
//! let ud = |ctx: &backend_sim::verbs::SimContext, pd, cq| {
//!     let qp = ctx.create_qp(pd, &QpInitAttr::new(QpType::Ud, cq, cap)).unwrap();
//!     qp.modify_with(&QpModify::to(QpState::Init).port(1).pkey_index(0).qkey(7)).unwrap();
//!     qp.modify_with(&QpModify::to(QpState::Rtr)).unwrap();
//!     qp.modify_with(&QpModify::to(QpState::Rts).sq_psn(0)).unwrap();
//!     qp
//! };
//! let (qa, qb) = (ud(&ca, &pa, &qa_cq), ud(&cb, &pb, &qb_cq));
//! mr_a.write(0, b"hello").unwrap();
//! let ah = ca.create_ah(&pa, &AhAttr::roce(Gid::from_ipv4(Ipv4Addr::new(10, 0, 0, 2)), 1, 1)).unwrap();
//! let rx = [Sge { addr: mr_b.addr(), length: 4096, lkey: mr_b.lkey() }];
//! let tx = [Sge { addr: mr_a.addr(), length: 5, lkey: mr_a.lkey() }];
//! // SAFETY: both SGEs lie in registered regions that outlive the work requests.
//! unsafe {
//!     qb.post_recv(&[RecvWr::new(1, &rx)]).unwrap();
//!     qa.post_send(&[SendWr::ud_send(2, &tx, &ah, qb.qp_num(), 7)]).unwrap();
//! }
//! let mut wc = [Completion::default(); 1];
//! while qb_cq.poll(&mut wc).unwrap() == 0 {} // each empty poll takes the next event
//! assert_eq!(wc[0].byte_len as usize, GRH_LEN + 5); // UD: the 40-byte GRH comes first
//! let mut got = [0u8; 5];
//! mr_b.read(GRH_LEN, &mut got).unwrap();
//! assert_eq!(&got, b"hello");
//! println!("seed {} trace {:016x}", sim.seed(), sim.trace_hash());
//! ```

pub mod clock;
pub mod fabric;
pub mod fault;
pub mod frame;
pub mod ids;
pub mod pcap;
pub mod rng;
pub mod trace;
pub use fabric::link;

pub use clock::Nanos;
pub use fabric::{
    CaptureFilter, Fabric, FabricError, FabricStats, Host, Output, PayloadCorruption, PortConfig,
    PortStats, ReplayOptions, ReplaySummary, UndetectedCorruption,
};
pub use fault::{
    BurstLoss, Direction, DropReason, FaultPlan, LinkFaultRule, LinkFaults, Partition,
};
pub use ids::{HostId, PortId};
pub use link::LinkConfig;
pub mod verbs;
pub use verbs::{LiveObjects, Personality, Sim, SimVerbs, Snapshot, SnapshotError};
