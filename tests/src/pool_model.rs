//! The slot pool driven by an arbitrary sequence of operations, checked against a model
//! after every step. The same driver runs as a proptest (`tests/pool_model.rs`), as a
//! cargo-fuzz target (`fuzz/fuzz_targets/slot_pool.rs`) and under Miri.
//!
//! Two simulated hosts carry UD multicast: a sender pool on one, a receiver pool on the
//! other. The model tracks every slot's owner (free, held by the test, posted) and the
//! bytes written into held send slots; after each operation the pool's counts must equal
//! the model's, a completion must hand back exactly the slots that were posted (never
//! one twice), a forged completion must be refused, and every received message must
//! carry the bytes its send slot held.
//!
//! The hosts, their QPs and the address handle are set up once ([`Hosts`], which takes a
//! [`Snapshot`] then); each run gets its own seed ([`Sim::reseed`]), its own pools, and
//! ends by restoring the snapshot, so a fuzz target does not build two hosts per input.
//! [`Rig::run`] sets up fresh hosts for its one run.
//!
//! [`Sim::reseed`]: backend_sim::Sim::reseed

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use backend_sim::Snapshot;

use verbs_api::helpers::builder::{ContextBuilder, Endpoint};
use verbs_api::helpers::transition::{bring_up, ConnectParams};
use verbs_api::pool::{SendParams, SlotPool, SlotPoolConfig, SlotToken};
use verbs_api::{
    AhAttr, Completion, CompletionQueue, Context, Gid, QpState, QpType, QueuePair, Verbs, WrDetail,
};

/// The simulator's device context.
type Ctx = <backend_sim::SimVerbs as Verbs>::Context;

/// Slots in each pool.
pub const SLOTS: usize = 8;
/// Bytes in each slot.
pub const SLOT_SIZE: usize = 64;

/// One step of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Take a free send slot and fill its first bytes with a tag.
    TakeSend,
    /// Release the `n`th held send slot unused.
    ReleaseSend(u8),
    /// Post the `n`th held send slot (its tag, `len` bytes).
    PostSend(u8, u8),
    /// Post every held send slot as one batch.
    PostSendBatch,
    /// Take up to `n` free receive slots and post them.
    PostRecv(u8),
    /// Run the fabric until idle and poll both CQs, handing slots back.
    Progress,
    /// Hand the pools a completion with this `wr_id`, which they never posted.
    Forge(u64),
}

impl Op {
    /// The operation a fuzzer's byte pair stands for.
    pub fn from_bytes(code: u8, arg: u8) -> Self {
        match code % 7 {
            0 => Op::TakeSend,
            1 => Op::ReleaseSend(arg),
            2 => Op::PostSend(arg, code),
            3 => Op::PostSendBatch,
            4 => Op::PostRecv(arg % 4 + 1),
            5 => Op::Progress,
            _ => Op::Forge(u64::from(arg) << 40 | u64::from(code)),
        }
    }
}

/// Where one slot is, in the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owner {
    Free,
    Held,
    Posted,
}

/// Two hosts on a loss-free simulated fabric, a UD QP each, the receiver attached to one
/// multicast group, and the sender's address handle for the group: what every run starts
/// from.
#[derive(Debug)]
pub struct Hosts {
    tx: Endpoint<Ctx>,
    rx: Endpoint<Ctx>,
    ah: <Ctx as Context>::Ah,
    sim: backend_sim::Sim,
    start: Snapshot,
}

/// What a run did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// Messages received intact.
    pub received: u64,
    /// The simulation's trace hash at the end.
    pub trace_hash: u64,
}

/// The pools on [`Hosts`], and the model.
#[derive(Debug)]
pub struct Rig<'h> {
    h: &'h Hosts,
    tpool: SlotPool<Ctx>,
    rpool: SlotPool<Ctx>,
    held: Vec<SlotToken>,
    send_owner: [Owner; SLOTS],
    recv_owner: [Owner; SLOTS],
    /// Messages sent and not yet received, by tag: the bytes of each.
    in_flight: BTreeMap<u8, Vec<u8>>,
    next_tag: u8,
    /// Messages received intact.
    pub received: u64,
}

const GROUP: Ipv4Addr = Ipv4Addr::new(239, 9, 9, 9);

impl Hosts {
    /// Sets the hosts up and takes the snapshot every run starts from.
    ///
    /// # Panics
    /// When the simulator refuses the set-up (a bug).
    #[must_use]
    pub fn new() -> Self {
        let sim = backend_sim::Sim::new(0);
        let personality = backend_sim::Personality::Mlx5;
        let ha = sim.add_host("tx", Ipv4Addr::new(10, 9, 0, 1), personality);
        let hb = sim.add_host("rx", Ipv4Addr::new(10, 9, 0, 2), personality);
        let (ha, hb) = (ha.expect("host"), hb.expect("host"));
        let tx = ContextBuilder::new(QpType::Ud)
            .queues(SLOTS as u32, SLOTS as u32, 1, 1)
            .build(&sim.verbs(ha))
            .expect("sender endpoint");
        let rx = ContextBuilder::new(QpType::Ud)
            .queues(SLOTS as u32, SLOTS as u32, 1, 1)
            .build(&sim.verbs(hb))
            .expect("receiver endpoint");
        let p = ConnectParams::default();
        bring_up(&tx.qp, QpState::Rts, &p).expect("sender to RTS");
        bring_up(&rx.qp, QpState::Rts, &p).expect("receiver to RTS");
        rx.qp
            .attach_mcast(&Gid::from_ipv4(GROUP), 0)
            .expect("attach");
        let ah = tx
            .ctx
            .create_ah(&tx.pd, &AhAttr::roce(Gid::from_ipv4(GROUP), 1, 1))
            .expect("address handle");
        let start = sim.snapshot().expect("snapshot of the set-up");
        Hosts {
            tx,
            rx,
            ah,
            sim,
            start,
        }
    }

    /// Runs `ops` with the simulation's draws from `seed` on new pools, then lets
    /// everything in flight complete, checking after each step; then puts the hosts back
    /// as they were set up (the pools' memory is gone with them), so that each run gives
    /// what it would give on fresh hosts.
    ///
    /// # Errors
    /// The step that disagreed with the model, and how.
    ///
    /// # Panics
    /// When the simulator cannot reseed or restore the set-up (a bug).
    pub fn run(&self, seed: u64, ops: &[Op]) -> Result<Outcome, String> {
        self.sim
            .reseed(seed)
            .expect("the set-up draws nothing at random");
        let result = Rig::new(self).steps(ops);
        // The pools are dropped (their regions deregistered) before the restore, so the
        // objects alive are the set-up's again; no step runs in between.
        self.sim.restore(&self.start).expect("restore the set-up");
        result
    }
}

impl Default for Hosts {
    fn default() -> Self {
        Self::new()
    }
}

impl<'h> Rig<'h> {
    /// New pools on `h`.
    ///
    /// # Panics
    /// When the simulator refuses them (a bug).
    #[must_use]
    pub fn new(h: &'h Hosts) -> Self {
        let tpool = SlotPool::new(&h.tx.ctx, &h.tx.pd, &SlotPoolConfig::new(SLOT_SIZE, SLOTS))
            .expect("send pool");
        let rpool = SlotPool::new(
            &h.rx.ctx,
            &h.rx.pd,
            &SlotPoolConfig::new(SLOT_SIZE, SLOTS).with_padding(verbs_api::GRH_LEN),
        )
        .expect("receive pool");
        Rig {
            h,
            tpool,
            rpool,
            held: Vec::new(),
            send_owner: [Owner::Free; SLOTS],
            recv_owner: [Owner::Free; SLOTS],
            in_flight: BTreeMap::new(),
            next_tag: 0,
            received: 0,
        }
    }

    fn detail(&self) -> SendParams<'_, <Ctx as Context>::Ah> {
        SendParams::send(WrDetail::Ud {
            ah: &self.h.ah,
            remote_qpn: verbs_api::MULTICAST_QPN,
            remote_qkey: ConnectParams::default().qkey,
        })
    }

    fn message(tag: u8, len: usize) -> Vec<u8> {
        (0..len).map(|i| tag.wrapping_add(i as u8)).collect()
    }

    /// Applies one operation and checks the model.
    ///
    /// # Errors
    /// A description of the first disagreement between the pool and the model.
    pub fn apply(&mut self, op: Op) -> Result<(), String> {
        match op {
            Op::TakeSend => {
                let expect = self.send_owner.contains(&Owner::Free);
                match self.tpool.take() {
                    Some(mut t) if expect => {
                        let i = t.index();
                        if self.send_owner[i] != Owner::Free {
                            return Err(format!("take handed out slot {i}, which is not free"));
                        }
                        self.send_owner[i] = Owner::Held;
                        let tag = self.next_tag;
                        self.next_tag = self.next_tag.wrapping_add(1);
                        let bytes = Self::message(tag, SLOT_SIZE);
                        self.tpool.slot_mut(&mut t).copy_from_slice(&bytes);
                        self.held.push(t);
                    }
                    Some(t) => return Err(format!("take gave slot {} of a full pool", t.index())),
                    None if expect => return Err("take gave nothing, a slot is free".into()),
                    None => {}
                }
            }
            Op::ReleaseSend(n) => {
                if !self.held.is_empty() {
                    let t = self.held.swap_remove(usize::from(n) % self.held.len());
                    self.send_owner[t.index()] = Owner::Free;
                    self.tpool.release(t);
                }
            }
            Op::PostSend(n, len) => {
                if !self.held.is_empty() {
                    let t = self.held.swap_remove(usize::from(n) % self.held.len());
                    let len = usize::from(len) % SLOT_SIZE + 1;
                    let i = t.index();
                    let bytes = self.tpool.slot(&t)[..len].to_vec();
                    match self.tpool.post_send(&self.h.tx.qp, t, len, self.detail()) {
                        Ok(()) => {
                            self.send_owner[i] = Owner::Posted;
                            self.in_flight.insert(bytes[0], bytes);
                        }
                        Err(rejected) => {
                            // A full send queue hands the token back.
                            if rejected.token.index() != i {
                                return Err("a refused post handed back another slot".into());
                            }
                            self.held.push(rejected.token);
                        }
                    }
                }
            }
            Op::PostSendBatch => {
                let batch: Vec<(SlotToken, usize)> =
                    self.held.drain(..).map(|t| (t, SLOT_SIZE)).collect();
                for (t, _) in &batch {
                    let bytes = self.tpool.slot(t).to_vec();
                    self.send_owner[t.index()] = Owner::Posted;
                    self.in_flight.insert(bytes[0], bytes);
                }
                let detail = self.detail();
                if let Err(rejected) = self.tpool.post_send_batch(&self.h.tx.qp, batch, detail) {
                    // The tokens not posted come back to the test, and their messages
                    // were never sent.
                    for t in &rejected.tokens {
                        self.send_owner[t.index()] = Owner::Held;
                        self.in_flight.remove(&self.tpool.slot(t)[0]);
                    }
                    self.held.extend(rejected.tokens);
                }
            }
            Op::PostRecv(n) => {
                for t in self.rpool.take_n(usize::from(n)) {
                    let i = t.index();
                    if self.recv_owner[i] != Owner::Free {
                        return Err(format!("receive slot {i} handed out while not free"));
                    }
                    match self.rpool.post_recv(&self.h.rx.qp, t) {
                        Ok(()) => self.recv_owner[i] = Owner::Posted,
                        Err(rejected) => {
                            self.recv_owner[i] = Owner::Free;
                            self.rpool.release(rejected.token);
                        }
                    }
                }
            }
            Op::Progress => self.progress()?,
            Op::Forge(wr_id) => {
                let wc = Completion {
                    wr_id,
                    ..Completion::default()
                };
                for (name, pool, owner) in [
                    ("send", &self.tpool, &self.send_owner),
                    ("receive", &self.rpool, &self.recv_owner),
                ] {
                    let posted =
                        pool.owns(wr_id) && owner[(wr_id & 0xffff_ffff) as usize] == Owner::Posted;
                    if !posted {
                        if let Ok(t) = pool.complete(&wc) {
                            return Err(format!(
                                "the {name} pool accepted a forged completion for slot {}",
                                t.index()
                            ));
                        }
                    }
                }
            }
        }
        self.check_counts()
    }

    fn progress(&mut self) -> Result<(), String> {
        self.h.sim.run_until_idle();
        let mut wc = [Completion::default(); SLOTS * 2];
        let mut batch = Vec::new();
        let n = self.h.tx.cq.poll(&mut wc).map_err(|e| e.to_string())?;
        for c in &wc[..n] {
            batch.clear();
            self.tpool
                .complete_batch(c, &mut batch)
                .map_err(|e| format!("send completion {c:?}: {e}"))?;
            for t in batch.drain(..) {
                let i = t.index();
                if self.send_owner[i] != Owner::Posted {
                    return Err(format!("send slot {i} came back without being posted"));
                }
                self.send_owner[i] = Owner::Free;
                self.tpool.release(t);
            }
        }
        let n = self.h.rx.cq.poll(&mut wc).map_err(|e| e.to_string())?;
        for c in &wc[..n] {
            let t = self
                .rpool
                .complete(c)
                .map_err(|e| format!("receive completion {c:?}: {e}"))?;
            let i = t.index();
            if self.recv_owner[i] != Owner::Posted {
                return Err(format!("receive slot {i} came back without being posted"));
            }
            if !c.is_success() {
                return Err(format!("receive failed: {c:?}"));
            }
            let got = self.rpool.received(&t, c);
            match got.first().and_then(|tag| self.in_flight.remove(tag)) {
                Some(sent) if sent == got => self.received += 1,
                Some(sent) => {
                    return Err(format!(
                        "slot {i} received {} bytes that differ from the {} sent",
                        got.len(),
                        sent.len()
                    ))
                }
                None => return Err(format!("slot {i} received a message nobody sent")),
            }
            self.recv_owner[i] = Owner::Free;
            self.rpool.release(t);
        }
        Ok(())
    }

    fn check_counts(&self) -> Result<(), String> {
        for (name, pool, owner) in [
            ("send", &self.tpool, &self.send_owner),
            ("receive", &self.rpool, &self.recv_owner),
        ] {
            let free = owner.iter().filter(|o| **o == Owner::Free).count();
            let posted = owner.iter().filter(|o| **o == Owner::Posted).count();
            if pool.available() != free || pool.posted() != posted {
                return Err(format!(
                    "{name} pool: {} free and {} posted, the model says {free} and {posted}",
                    pool.available(),
                    pool.posted()
                ));
            }
        }
        Ok(())
    }

    /// Runs `ops` on fresh hosts whose draws come from `seed`, then lets everything in
    /// flight complete, checking after each step.
    ///
    /// # Errors
    /// The step that disagreed with the model, and how.
    pub fn run(seed: u64, ops: &[Op]) -> Result<Outcome, String> {
        Hosts::new().run(seed, ops)
    }

    /// Runs `ops`, then lets everything in flight complete, checking after each step.
    fn steps(mut self, ops: &[Op]) -> Result<Outcome, String> {
        for (k, op) in ops.iter().enumerate() {
            self.apply(*op)
                .map_err(|e| format!("step {k} ({op:?}): {e}"))?;
        }
        self.apply(Op::Progress)
            .map_err(|e| format!("final progress: {e}"))?;
        Ok(Outcome {
            received: self.received,
            trace_hash: self.h.sim.trace_hash(),
        })
    }
}
