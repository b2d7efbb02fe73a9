//! Shared set-up for the verbs tests: hosts, contexts, registered memory, QPs in RTS.
#![allow(dead_code)]

use backend_sim::verbs::{SimContext, SimCq, SimMr, SimPd, SimQp};
use backend_sim::{HostId, Personality, Sim};
use std::net::Ipv4Addr;
use verbs_api::{
    AccessFlags, AhAttr, Completion, Context, Gid, MemoryRegion, QpCap, QpInitAttr, QpModify,
    QpState, QpType, QueuePair, QueuePairExt, RecvWr, Sge, Verbs,
};

pub const SLOT: usize = 16384;

pub fn ip(n: u8) -> Ipv4Addr {
    Ipv4Addr::new(10, 0, 0, n)
}

pub struct Node {
    pub host: HostId,
    pub ctx: SimContext,
    pub pd: SimPd,
    pub cq: SimCq,
    pub mr: SimMr,
}

pub fn node(sim: &Sim, n: u8, p: Personality) -> Node {
    let host = sim.add_host(&format!("h{n}"), ip(n), p).unwrap();
    let v = sim.verbs(host);
    let name = v.devices().unwrap()[0].name.clone();
    let ctx = v.open(&name).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(4096, None, 0).unwrap();
    let access = AccessFlags::LOCAL_WRITE
        | AccessFlags::REMOTE_WRITE
        | AccessFlags::REMOTE_READ
        | AccessFlags::REMOTE_ATOMIC;
    let mr = ctx.alloc_mr(&pd, 256 * SLOT, access).unwrap();
    Node {
        host,
        ctx,
        pd,
        cq,
        mr,
    }
}

pub fn cap() -> QpCap {
    QpCap::new(1024, 1024, 4, 4).with_inline(256)
}

pub fn raw_qp(n: &Node) -> SimQp {
    let qp = n
        .ctx
        .create_qp(&n.pd, &QpInitAttr::new(QpType::RawPacket, &n.cq, cap()))
        .unwrap();
    qp.modify_with(&QpModify::to(QpState::Init).port(1))
        .unwrap();
    qp.modify_with(&QpModify::to(QpState::Rtr)).unwrap();
    qp.modify_with(&QpModify::to(QpState::Rts)).unwrap();
    qp
}

pub const QKEY: u32 = 0x1111_1111;

pub fn ud_qp(n: &Node) -> SimQp {
    let qp = n
        .ctx
        .create_qp(&n.pd, &QpInitAttr::new(QpType::Ud, &n.cq, cap()))
        .unwrap();
    qp.modify_with(&QpModify::to(QpState::Init).port(1).pkey_index(0).qkey(QKEY))
        .unwrap();
    qp.modify_with(&QpModify::to(QpState::Rtr)).unwrap();
    qp.modify_with(&QpModify::to(QpState::Rts).sq_psn(0))
        .unwrap();
    qp
}

pub fn ah(n: &Node, dst: Ipv4Addr) -> backend_sim::verbs::SimAh {
    n.ctx
        .create_ah(&n.pd, &AhAttr::roce(Gid::from_ipv4(dst), 1, 1))
        .unwrap()
}

pub fn slot_sge(n: &Node, slot: usize, len: usize) -> Sge {
    Sge {
        addr: n.mr.addr() + (slot * SLOT) as u64,
        length: len as u32,
        lkey: n.mr.lkey(),
    }
}

/// Posts receives for slots `slots` (wr_id = slot).
pub fn post_recvs(n: &Node, qp: &SimQp, slots: std::ops::Range<usize>) {
    for s in slots {
        let sge = [slot_sge(n, s, SLOT)];
        // SAFETY: the SGE lies in n.mr, which outlives the test's QPs.
        unsafe { qp.post_recv(&[RecvWr::new(s as u64, &sge)]).unwrap() };
    }
}

/// Polls `cq` until `n` completions arrived or the simulation has nothing left to do.
pub fn wait(sim: &Sim, cq: &SimCq, n: usize) -> Vec<Completion> {
    use verbs_api::CompletionQueue;
    let mut out = Vec::new();
    let mut wc = [Completion::default(); 64];
    loop {
        let k = cq.poll(&mut wc).unwrap();
        out.extend_from_slice(&wc[..k]);
        if out.len() >= n {
            return out;
        }
        if k == 0 && !sim.step() {
            // One more look: the last step may have produced completions.
            let k = cq.poll(&mut wc).unwrap();
            out.extend_from_slice(&wc[..k]);
            if k == 0 {
                return out;
            }
        }
    }
}

pub fn read_slot(n: &Node, slot: usize, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    n.mr.read(slot * SLOT, &mut v).unwrap();
    v
}

pub fn write_slot(n: &Node, slot: usize, data: &[u8]) {
    n.mr.write(slot * SLOT, data).unwrap();
}
