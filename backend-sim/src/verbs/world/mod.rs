//! The simulated NICs of every host, over one [`Fabric`]: the object tables (contexts,
//! PDs, MRs, CQs, channels, SRQs, QPs, flow rules) here, and in files of their own the
//! operations on them: [`completions`] (CQEs, async events, the send completer),
//! [`qp_state`] (modify, ERR and its flushes), [`recv_queue`] (receive WQEs and delivery),
//! [`datapath`] (frames in and out: RAW and UD sends, RoCE and steering dispatch),
//! [`membership`] (multicast groups, flow rules) and [`rc_nic`] (the RC/UC machines'
//! view of the world). The sans-IO machines ([`super::rc`], [`super::ud`], [`super::raw`],
//! [`super::steering`]) decide; this driver frames and routes what they decide and feeds
//! them what the fabric delivers. Everything runs under one lock, driven by the
//! application's calls: time moves only in [`World::advance`].

mod completions;
mod datapath;
mod membership;
mod qp_state;
mod rc_nic;
mod recv_queue;
mod wq_rx;

use super::memory::MrTable;
use super::personality::Personality;
use crate::clock::Nanos;
use crate::fabric::{Fabric, Output};
use crate::frame::eth::Mac;
use crate::ids::{HostId, PortId};
use rustc_hash::FxHashMap as HashMap;
use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use verbs_api::WcStatus;

pub(crate) use super::records::{Arm, Channel, Cq, Cqe, Ctx, Device, FlowRule, NicStats, Qp, Srq};
pub(crate) use super::wqe::{completion, RecvWqe, SgeList, UdDest, WrCopy};

/// Trace tags of the verbs layer.
pub(crate) mod vtag {
    use crate::trace::tag::USER;
    pub const POST_SEND: u8 = USER;
    pub const POST_RECV: u8 = USER + 1;
    pub const COMPLETION: u8 = USER + 2;
    pub const ASYNC: u8 = USER + 3;
    pub const MODIFY: u8 = USER + 4;
    pub const RX_DROP: u8 = USER + 5;
}

/// Result of handling a send WR at once (RAW, UD).
pub(crate) struct Posted {
    pub status: WcStatus,
    pub byte_len: u32,
}

/// Everything simulated.
#[derive(Debug)]
pub(crate) struct World {
    pub(crate) fabric: Fabric,
    pub(crate) devices: Vec<Device>,
    pub(crate) port_owner: Vec<Option<usize>>,
    pub(crate) ctxs: HashMap<u32, Ctx>,
    pub(crate) pds: HashMap<u32, usize>,
    pub(crate) mrs: MrTable,
    pub(crate) cqs: HashMap<u32, Cq>,
    pub(crate) channels: HashMap<u32, Channel>,
    pub(crate) srqs: HashMap<u32, Srq>,
    pub(crate) qps: HashMap<u32, Qp>,
    pub(crate) flows: HashMap<u32, FlowRule>,
    pub(crate) wqs: HashMap<u32, super::records::Wq>,
    pub(crate) ind_tables: HashMap<u32, super::records::IndTable>,
    next_handle: u32,
    next_qpn: u32,
    scratch: Vec<u8>,
    steer_scratch: Vec<u32>,
    sniff_scratch: Vec<u32>,
    /// QPs whose completer has work for the next step (sends completed after the post).
    due: Vec<u32>,
    due_scratch: Vec<u32>,
}

impl World {
    pub fn new(seed: u64) -> Self {
        World {
            fabric: Fabric::new(seed),
            devices: Vec::new(),
            port_owner: Vec::new(),
            ctxs: HashMap::default(),
            pds: HashMap::default(),
            mrs: MrTable::default(),
            cqs: HashMap::default(),
            channels: HashMap::default(),
            srqs: HashMap::default(),
            qps: HashMap::default(),
            flows: HashMap::default(),
            wqs: HashMap::default(),
            ind_tables: HashMap::default(),
            next_handle: 0,
            next_qpn: 0x10,
            scratch: Vec::new(),
            steer_scratch: Vec::new(),
            sniff_scratch: Vec::new(),
            due: Vec::new(),
            due_scratch: Vec::new(),
        }
    }

    /// A copy of everything simulated, for [`crate::Sim::snapshot`] (refused as
    /// [`Fabric::duplicate`] refuses). The spare frame buffers are not copied: they are
    /// handed out cleared ([`World::frame_buffer`]), so only their capacity differs.
    pub(crate) fn duplicate(&self) -> Result<World, &'static str> {
        Ok(World {
            fabric: self.fabric.duplicate()?,
            devices: self.devices.clone(),
            port_owner: self.port_owner.clone(),
            ctxs: self.ctxs.clone(),
            pds: self.pds.clone(),
            mrs: self.mrs.clone(),
            cqs: self.cqs.clone(),
            channels: self.channels.clone(),
            srqs: self.srqs.clone(),
            qps: self.qps.clone(),
            flows: self.flows.clone(),
            wqs: self.wqs.clone(),
            ind_tables: self.ind_tables.clone(),
            next_handle: self.next_handle,
            next_qpn: self.next_qpn,
            scratch: self.scratch.clone(),
            steer_scratch: self.steer_scratch.clone(),
            sniff_scratch: self.sniff_scratch.clone(),
            due: self.due.clone(),
            due_scratch: self.due_scratch.clone(),
        })
    }

    /// What the application holds handles to: every object's id by kind, every region's
    /// key, address and length, every window, and the hosts, ports and devices. Equal
    /// for two worlds when the same handles are valid in both.
    pub(crate) fn objects(&self) -> Vec<Vec<u64>> {
        fn keys<V>(m: &HashMap<u32, V>) -> Vec<u64> {
            let mut k: Vec<u64> = m.keys().map(|&k| u64::from(k)).collect();
            k.sort_unstable();
            k
        }
        vec![
            keys(&self.ctxs),
            keys(&self.pds),
            keys(&self.cqs),
            keys(&self.channels),
            keys(&self.srqs),
            keys(&self.qps),
            keys(&self.flows),
            keys(&self.wqs),
            keys(&self.ind_tables),
            self.mrs.regions(),
            self.mrs.windows(),
            vec![
                self.devices.len() as u64,
                self.fabric.hosts().len() as u64,
                self.fabric.port_count() as u64,
            ],
        ]
    }

    pub fn handle(&mut self) -> u32 {
        self.next_handle += 1;
        self.next_handle
    }

    pub fn qpn(&mut self) -> u32 {
        self.next_qpn += 1;
        self.next_qpn & 0x00ff_ffff
    }

    pub fn add_device(&mut self, host: HostId, personality: Personality, port: PortId) -> usize {
        let cfg = self
            .fabric
            .port_config(port)
            .map_or((Mac::default(), Ipv4Addr::UNSPECIFIED), |c| (c.mac, c.ipv4));
        let index = self
            .devices
            .iter()
            .filter(|d| d.host == host && d.personality == personality)
            .count();
        let m = cfg.0 .0;
        let guid = u64::from_be_bytes(crate::frame::ipv6::eui64(m));
        self.devices.push(Device {
            host,
            name: personality.name(index),
            personality,
            port,
            mac: cfg.0,
            ip: cfg.1,
            guid,
            mcast: BTreeMap::new(),
            flows: Vec::new(),
            stats: NicStats::default(),
        });
        if self.port_owner.len() <= port.0 as usize {
            self.port_owner.resize(port.0 as usize + 1, None);
        }
        self.port_owner[port.0 as usize] = Some(self.devices.len() - 1);
        self.devices.len() - 1
    }

    /// An empty frame buffer: a used one from the fabric's pool when there is one (the
    /// pool of frames received and sent, [`crate::fabric::Fabric::spare_frame`]).
    pub fn frame_buffer(&mut self) -> Vec<u8> {
        self.fabric.spare_frame()
    }

    /// Gives a frame buffer back to the fabric's pool: the next frame built or taken in
    /// reuses it (a host that receives most of its frames builds few, and the reverse).
    pub fn recycle(&mut self, v: Vec<u8>) {
        if v.capacity() <= 16384 {
            self.fabric.recycle_frame(v);
        }
    }

    /// Takes the next event (at most `deadline`) and lets the NICs handle it: first the
    /// completers' work left by posts (at the current time), then the fabric's next
    /// event. False when nothing was due by then (the clock then stands at `deadline`,
    /// unless it is MAX).
    pub fn advance(&mut self, deadline: Nanos) -> bool {
        if !self.due.is_empty() {
            self.run_completers();
            return true;
        }
        match self.fabric.step_until(deadline) {
            Some(Output::Frame {
                port,
                frame,
                sealed,
                ..
            }) => {
                self.on_frame(port, frame, sealed);
                true
            }
            Some(Output::Timer { token }) => {
                self.on_timer(token);
                true
            }
            None => false,
        }
    }
}
