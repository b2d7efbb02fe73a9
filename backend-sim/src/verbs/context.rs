//! [`SimContext`]: an open simulated device and the factory of every resource on it,
//! with address handles and flow rules (protection domains are [`SimPd`]).

use crate::verbs::ah::SimAh;
use crate::verbs::cq::{SimChannel, SimCq};
use crate::verbs::mr::{alloc_owned, register, SimMr};
use crate::verbs::mw::SimMw;
use crate::verbs::objects::{err, lock, Kind, Res};
use crate::verbs::pd::SimPd;
use crate::verbs::personality::Personality;
use crate::verbs::qp::SimQp;
use crate::verbs::rc::RcState;
use crate::verbs::roce_addr;
use crate::verbs::send_queue::SendQueue;
use crate::verbs::srq::SimSrq;
use crate::verbs::world::{Arm, Channel, Cq, FlowRule, Qp, Srq, World};
use crate::verbs::wq::{SimRwqIndTable, SimWq};
use std::collections::VecDeque;

/// The errno libibverbs gives for a GID table entry that holds no GID.
const ENODATA: i32 = 61;
use crate::frame::ipv6::link_local_of_mac;
use std::sync::{Arc, MutexGuard};
use verbs_api::{
    inc_rkey, AccessFlags, AhAttr, AsyncEvent, Context, DeviceAttr, DeviceInfo, ErrorKind, Flow,
    FlowAttr, FlowRuleType, FlowSpec, Gid, LinkLayer, MwBind, MwType, PortAttr, PortState, QpAttr,
    QpInitAttr, QpState, QpType, QueuePair, Result, RxHashConf, SendWr, SrqAttr, SrqInitAttr,
    WqInitAttr,
};

/// An open simulated device.
#[derive(Debug)]
pub struct SimContext {
    pub(crate) res: Arc<Res>,
    pub(crate) dev: usize,
}

impl SimContext {
    pub(crate) fn world(&self) -> MutexGuard<'_, World> {
        lock(&self.res.world)
    }
    pub(crate) fn new_res(&self, id: u32, kind: Kind) -> Arc<Res> {
        Arc::new(Res {
            world: self.res.world.clone(),
            id,
            kind,
        })
    }
    /// The device's personality (rxe or mlx5).
    #[must_use]
    pub fn personality(&self) -> Personality {
        self.world().devices[self.dev].personality
    }

    /// Whether GID `index` of the device's port is a RoCE v1 GID, else RoCE v2 (what
    /// `ibv_query_gid_type` tells; see [`Personality::roce_v1_gid`]).
    #[must_use]
    pub fn roce_v1_gid(&self, index: u32) -> bool {
        self.personality().roce_v1_gid(index)
    }
}

/// A flow steering rule; dropping it removes the rule.
#[derive(Debug)]
pub struct SimFlow {
    pub(crate) _res: Arc<Res>,
    pub(crate) attr: FlowAttr,
}

impl Flow for SimFlow {
    fn attr(&self) -> FlowAttr {
        self.attr.clone()
    }
}

impl Context for SimContext {
    type Pd = SimPd;
    type Mr = SimMr;
    type Mw = SimMw;
    type CompChannel = SimChannel;
    type Cq = SimCq;
    type Srq = SimSrq;
    type Qp = SimQp;
    type Ah = SimAh;
    type Flow = SimFlow;
    type Wq = SimWq;
    type RwqIndTable = SimRwqIndTable;

    fn device(&self) -> DeviceInfo {
        self.world().devices[self.dev].info()
    }

    fn query_device(&self) -> Result<DeviceAttr> {
        let w = self.world();
        let d = &w.devices[self.dev];
        Ok(d.personality.device_attr(d.guid))
    }

    fn query_port(&self, port_num: u8) -> Result<PortAttr> {
        if port_num != 1 {
            return Err(err(
                ErrorKind::InvalidArgument,
                "ibv_query_port",
                format!("no port {port_num}"),
            ));
        }
        let p = self.personality();
        Ok(PortAttr {
            state: PortState::Active,
            max_mtu: verbs_api::Mtu::Mtu4096,
            active_mtu: p.active_mtu(),
            gid_tbl_len: p.gid_tbl_len(),
            port_cap_flags: 0x0401_0000,
            max_msg_sz: p.max_msg_sz(),
            pkey_tbl_len: 1,
            active_width: 2,
            active_speed: 64,
            phys_state: 5,
            link_layer: LinkLayer::Ethernet,
            ..PortAttr::default()
        })
    }

    fn query_gid(&self, port_num: u8, index: u32) -> Result<Gid> {
        let w = self.world();
        let d = &w.devices[self.dev];
        match (port_num, index) {
            (1, 0) => Ok(Gid(link_local_of_mac(d.mac.0).octets())),
            (1, 1) => Ok(Gid::from_ipv4(d.ip)),
            // Entries of the table that hold no GID read as zero (as ibv_query_gid gives
            // them on rxe).
            (1, i) if i < d.personality.gid_tbl_len() => Ok(Gid::default()),
            _ => Err(err(
                ErrorKind::InvalidArgument,
                "ibv_query_gid",
                format!("no GID {index} on port {port_num}"),
            )),
        }
    }

    fn alloc_mw(&self, pd: &SimPd, mw_type: MwType) -> Result<SimMw> {
        let mut w = self.world();
        if w.pds.get(&pd.res.id) != Some(&self.dev) {
            return Err(err(
                ErrorKind::InvalidArgument,
                "ibv_alloc_mw",
                "the PD belongs to another device context",
            ));
        }
        let handle = w.handle();
        let rkey = w.mrs.alloc_mw(pd.res.id, mw_type, handle);
        drop(w);
        Ok(SimMw {
            world: self.res.world.clone(),
            index: rkey >> 8,
            handle,
            mw_type,
            _pd: pd.res.clone(),
        })
    }

    fn bind_mw(&self, qp: &SimQp, mw: &SimMw, bind: &MwBind) -> Result<u32> {
        const OP: &str = "ibv_bind_mw";
        let w = self.world();
        // libibverbs' inline ibv_bind_mw: only type 1, and the region in the window's PD.
        if mw.mw_type != MwType::Type1 {
            return Err(err(
                ErrorKind::InvalidArgument,
                OP,
                "ibv_bind_mw binds type 1 windows only",
            )
            .with_bad_wr(0));
        }
        let region = w.mrs.region(bind.bind_info.mr_lkey);
        if region.is_none() && bind.bind_info.length > 0 {
            return Err(err(
                ErrorKind::InvalidArgument,
                OP,
                format!("no memory region has lkey {:#x}", bind.bind_info.mr_lkey),
            )
            .with_bad_wr(0));
        }
        // (No region and length 0: libibverbs' unbind with a NULL region.)
        if region.is_some_and(|r| r.pd != mw._pd.id) {
            return Err(err(
                ErrorKind::PermissionDenied,
                OP,
                "the region and the window are on different protection domains",
            )
            .with_bad_wr(0));
        }
        // The providers (rxe_bind_mw, mlx5_bind_mw): a type 1 window cannot be zero based.
        if bind
            .bind_info
            .mw_access_flags
            .contains(AccessFlags::ZERO_BASED)
        {
            return Err(err(
                ErrorKind::InvalidArgument,
                OP,
                "a type 1 window cannot be ZERO_BASED",
            )
            .with_bad_wr(0));
        }
        let rkey = inc_rkey(w.mrs.mw(mw.index).map_or(0, |m| m.user_rkey));
        drop(w);
        let wr = SendWr::<'_, SimAh>::bind_mw(bind.wr_id, mw.handle, rkey, bind.bind_info)
            .flags(bind.send_flags);
        // SAFETY: a BIND_MW request has no scatter-gather list: it names no memory.
        unsafe { qp.post_send(&[wr]) }?;
        Ok(rkey)
    }

    fn alloc_pd(&self) -> Result<SimPd> {
        let mut w = self.world();
        let id = w.handle();
        w.pds.insert(id, self.dev);
        drop(w);
        Ok(SimPd {
            res: self.new_res(id, Kind::Pd),
            _ctx: self.res.clone(),
        })
    }

    fn alloc_mr(&self, pd: &SimPd, len: usize, access: AccessFlags) -> Result<SimMr> {
        if len == 0 {
            return Err(err(
                ErrorKind::InvalidArgument,
                "ibv_reg_mr",
                "zero-length region",
            ));
        }
        access.validate("ibv_reg_mr")?;
        let owned = alloc_owned(len)?;
        let ptr = owned.ptr.as_ptr();
        register(&self.res.world, &pd.res, ptr, len, access, Some(owned))
    }

    unsafe fn reg_mr(
        &self,
        pd: &SimPd,
        addr: *mut u8,
        len: usize,
        access: AccessFlags,
    ) -> Result<SimMr> {
        if len == 0 || addr.is_null() {
            return Err(err(
                ErrorKind::InvalidArgument,
                "ibv_reg_mr",
                "null or zero-length region",
            ));
        }
        access.validate("ibv_reg_mr")?;
        register(&self.res.world, &pd.res, addr, len, access, None)
    }

    fn create_comp_channel(&self) -> Result<SimChannel> {
        let mut w = self.world();
        let id = w.handle();
        w.channels.insert(id, Channel::default());
        drop(w);
        Ok(SimChannel {
            res: self.new_res(id, Kind::Channel),
        })
    }

    fn create_cq(&self, cqe: u32, channel: Option<&SimChannel>, comp_vector: u32) -> Result<SimCq> {
        const OP: &str = "ibv_create_cq";
        let mut w = self.world();
        let d = &w.devices[self.dev];
        let attr = d.personality.device_attr(d.guid);
        if cqe == 0 {
            return Err(err(
                ErrorKind::InvalidArgument,
                OP,
                "cqe must be at least 1",
            ));
        }
        if cqe > attr.max_cqe {
            return Err(err(
                ErrorKind::InvalidArgument,
                OP,
                format!("cqe {cqe} above max_cqe {}", attr.max_cqe),
            ));
        }
        if comp_vector >= attr.num_comp_vectors {
            return Err(err(
                ErrorKind::InvalidArgument,
                OP,
                format!("no completion vector {comp_vector}"),
            ));
        }
        let personality = d.personality;
        let cqe = Personality::queue_depth(cqe);
        let id = w.handle();
        let ctx = self.res.id;
        w.cqs.insert(
            id,
            Cq {
                ctx,
                personality,
                cqe,
                entries: VecDeque::new(),
                channel: channel.map(|c| c.res.id),
                arm: Arm::None,
                unacked: 0,
                broken: false,
            },
        );
        drop(w);
        Ok(SimCq {
            res: self.new_res(id, Kind::Cq),
            cqe: cqe.into(),
            _channel: channel.map(|c| c.res.clone()),
        })
    }

    fn create_srq(&self, pd: &SimPd, init: &SrqInitAttr) -> Result<SimSrq> {
        const OP: &str = "ibv_create_srq";
        let mut w = self.world();
        let d = &w.devices[self.dev];
        let attr = d.personality.device_attr(d.guid);
        // rxe refuses an SRQ without receives (`rxe_srq_chk_init`); mlx5 makes one whose
        // single ring entry is kept free (`align_queue_size(0 + 1)`), so it holds none.
        if (init.attr.max_wr == 0 && d.personality == Personality::Rxe)
            || init.attr.max_wr > attr.max_srq_wr
            || init.attr.max_sge > attr.max_srq_sge
        {
            return Err(err(
                ErrorKind::InvalidArgument,
                OP,
                "SRQ sizes beyond the device's",
            ));
        }
        let id = w.handle();
        let ctx = self.res.id;
        w.srqs.insert(
            id,
            Srq {
                ctx,
                pd: pd.res.id,
                attr: SrqAttr {
                    srq_limit: 0,
                    max_wr: Personality::queue_depth(init.attr.max_wr),
                    ..init.attr
                },
                queue: VecDeque::new(),
            },
        );
        drop(w);
        Ok(SimSrq {
            res: self.new_res(id, Kind::Srq),
            _pd: pd.res.clone(),
        })
    }

    fn create_qp<'a>(&self, pd: &SimPd, init: &QpInitAttr<'a, SimCq, SimSrq>) -> Result<SimQp> {
        const OP: &str = "ibv_create_qp";
        let mut w = self.world();
        let d = &w.devices[self.dev];
        let p = d.personality;
        let attr = p.device_attr(d.guid);
        if init.qp_type == QpType::RawPacket && !p.raw_packet() {
            return Err(err(
                ErrorKind::Unsupported,
                OP,
                format!("{} has no RAW_PACKET QPs", d.name),
            ));
        }
        let c = init.cap;
        if c.max_send_wr > attr.max_qp_wr
            || c.max_recv_wr > attr.max_qp_wr
            || c.max_send_sge > attr.max_sge
            || c.max_recv_sge > attr.max_sge
            || c.max_inline_data > attr.max_inline_data
        {
            return Err(err(
                ErrorKind::InvalidArgument,
                OP,
                "queue sizes beyond the device's",
            ));
        }
        let qpn = w.qpn();
        let ctx = self.res.id;
        let rc =
            matches!(init.qp_type, QpType::Rc | QpType::Uc).then(|| Box::new(RcState::default()));
        let qp = Qp {
            ctx,
            dev: self.dev,
            qp_type: init.qp_type,
            pd: pd.res.id,
            send_cq: init.send_cq.res.id,
            recv_cq: init.recv_cq.res.id,
            srq: init.srq.map(|s| s.res.id),
            cap: p.qp_cap(c),
            sq_sig_all: init.sq_sig_all,
            state: QpState::Reset,
            attr: QpAttr {
                port_num: 1,
                ..QpAttr::default()
            },
            rq: VecDeque::new(),
            groups: Vec::new(),
            ud_psn: 0,
            rc,
            sq: SendQueue::default(),
            rss: None,
        };
        w.qps.insert(qpn, qp);
        drop(w);
        let mut keep = vec![
            pd.res.clone(),
            init.send_cq.res.clone(),
            init.recv_cq.res.clone(),
        ];
        if let Some(s) = init.srq {
            keep.push(s.res.clone());
        }
        Ok(SimQp {
            res: self.new_res(qpn, Kind::Qp),
            qpn,
            qp_type: init.qp_type,
            _keep: keep,
        })
    }

    fn create_ah(&self, _pd: &SimPd, attr: &AhAttr) -> Result<SimAh> {
        const OP: &str = "ibv_create_ah";
        if attr.port_num != 1 {
            return Err(err(
                ErrorKind::InvalidArgument,
                OP,
                format!("no port {}", attr.port_num),
            ));
        }
        if !attr.is_global {
            return Err(err(
                ErrorKind::InvalidArgument,
                OP,
                "a RoCE address needs a GRH",
            ));
        }
        {
            let w = self.world();
            let d = &w.devices[self.dev];
            if roce_addr::roce_ips(d.mac, d.ip, d.personality, &attr.grh).is_none() {
                return Err(err(
                    ErrorKind::InvalidArgument,
                    OP,
                    roce_addr::not_carried(&attr.grh),
                ));
            }
        }
        if attr.grh.sgid_index > 1 {
            // The provider looks the source GID up first (`rxe_create_av`), and an empty
            // entry gives ENODATA.
            return Err(err(
                ErrorKind::Io,
                OP,
                format!("source GID {} is empty", attr.grh.sgid_index),
            )
            .with_errno(ENODATA));
        }
        Ok(SimAh { attr: *attr })
    }

    fn create_flow(&self, qp: &SimQp, attr: &FlowAttr) -> Result<SimFlow> {
        const OP: &str = "ibv_create_flow";
        if !self.personality().raw_packet() {
            return Err(err(
                ErrorKind::Unsupported,
                OP,
                "the device has no managed flow steering",
            ));
        }
        if attr.port != 1 {
            return Err(err(
                ErrorKind::InvalidArgument,
                OP,
                format!("no port {}", attr.port),
            ));
        }
        if qp.qp_type != QpType::RawPacket {
            return Err(err(
                ErrorKind::InvalidArgument,
                OP,
                "flow rules steer to RAW_PACKET QPs",
            ));
        }
        if attr.rule_type == FlowRuleType::Normal && attr.specs.is_empty() {
            return Err(err(
                ErrorKind::InvalidArgument,
                OP,
                "a normal rule needs at least one spec",
            ));
        }
        // IGMP-less membership: a rule for an exact IPv4 multicast destination joins it.
        let groups = attr
            .specs
            .iter()
            .filter_map(|s| match s {
                FlowSpec::Ipv4 { val, mask }
                    if val.dst_ip.is_multicast()
                        && mask.dst_ip == std::net::Ipv4Addr::BROADCAST =>
                {
                    Some(val.dst_ip)
                }
                _ => None,
            })
            .collect();
        let mac_groups = attr
            .specs
            .iter()
            .filter_map(|s| match s {
                FlowSpec::Eth { val, mask }
                    if val.dst_mac[0] & 1 != 0 && mask.dst_mac == [0xff; 6] =>
                {
                    Some(crate::frame::eth::Mac(val.dst_mac))
                }
                _ => None,
            })
            .collect();
        let mut w = self.world();
        let id = w.handle();
        w.add_flow(
            id,
            FlowRule {
                qpn: qp.qpn,
                dev: self.dev,
                attr: attr.clone(),
                matcher: verbs_api::FlowMatcher::new(attr),
                groups,
                mac_groups,
            },
        );
        drop(w);
        Ok(SimFlow {
            _res: self.new_res(id, Kind::Flow),
            attr: attr.clone(),
        })
    }

    fn poll_async_event(&self) -> Result<Option<AsyncEvent>> {
        Ok(self
            .world()
            .ctxs
            .get_mut(&self.res.id)
            .and_then(|c| c.events.pop_front()))
    }

    fn create_wq(&self, pd: &SimPd, cq: &SimCq, attr: &WqInitAttr) -> Result<SimWq> {
        self.create_wq_impl(pd, cq, attr)
    }

    fn create_rwq_ind_table(&self, wqs: &[&SimWq]) -> Result<SimRwqIndTable> {
        self.create_ind_table_impl(wqs)
    }

    fn create_rss_qp(
        &self,
        pd: &SimPd,
        table: &SimRwqIndTable,
        hash: &RxHashConf,
    ) -> Result<SimQp> {
        self.create_rss_qp_impl(pd, table, hash)
    }
}
