//! Queue pairs: state, modify, and posting (RAW/UD execute at once and complete in a NIC
//! event after the post, RC/UC go to the connected-transport engine).

use crate::verbs::ah::SimAh;
use crate::verbs::memory::BindWqe;
use crate::verbs::objects::{err, lock, Res};
use crate::verbs::personality::Personality;
use crate::verbs::send_queue::Executed;
use crate::verbs::world::{completion, RecvWqe, SgeList, UdDest, World, WrCopy};
use std::sync::{Arc, MutexGuard};
use verbs_api::{
    ErrorKind, Gid, QpAttr, QpAttrMask, QpCap, QpState, QpType, QueuePair, RecvWr, Result,
    SendOpcode, SendWr, WcOpcode, WcStatus, WrDetail,
};

/// A queue pair.
#[derive(Debug)]
pub struct SimQp {
    pub(crate) res: Arc<Res>,
    pub(crate) qpn: u32,
    pub(crate) qp_type: QpType,
    pub(crate) _keep: Vec<Arc<Res>>,
}

impl SimQp {
    pub(crate) fn world(&self) -> MutexGuard<'_, World> {
        lock(&self.res.world)
    }
}

impl QueuePair for SimQp {
    type Ah = SimAh;

    fn qp_num(&self) -> u32 {
        self.qpn
    }

    fn qp_type(&self) -> QpType {
        self.qp_type
    }

    fn state(&self) -> Result<QpState> {
        Ok(self
            .world()
            .qps
            .get(&self.qpn)
            .map_or(QpState::Unknown, |q| q.state))
    }

    fn apply_modify(&self, attr: &QpAttr, mask: QpAttrMask) -> Result<()> {
        let mut w = self.world();
        // An RSS QP has no state machine: the kernel's `mlx5_ib_modify_qp` answers ENOSYS
        // for a QP with an indirection table.
        if w.qps.get(&self.qpn).is_some_and(|q| q.rss.is_some()) {
            return Err(err(ErrorKind::Unsupported, "ibv_modify_qp", "an RSS QP").with_errno(38));
        }
        w.modify(self.qpn, attr, mask)
    }

    fn query(&self, _mask: QpAttrMask) -> Result<(QpAttr, QpCap)> {
        let w = self.world();
        let qp = w
            .qps
            .get(&self.qpn)
            .ok_or_else(|| err(ErrorKind::InvalidState, "ibv_query_qp", "QP destroyed"))?;
        let mut a = qp.attr;
        a.qp_state = qp.state;
        a.cur_qp_state = qp.state;
        a.cap = qp.cap;
        if let Some(rc) = qp.rc.as_ref() {
            // The PSNs as they are now, once the transport uses them.
            let (sq, rq) = rc.psns();
            if matches!(
                qp.state,
                QpState::Rts | QpState::Sqd | QpState::Sqe | QpState::Err
            ) {
                a.sq_psn = sq;
            }
            if qp.state != QpState::Reset && qp.state != QpState::Init {
                a.rq_psn = rq;
            }
        }
        Ok((a, qp.cap))
    }

    unsafe fn post_send<'a>(&self, wrs: &[SendWr<'a, SimAh>]) -> Result<()> {
        const OP: &str = "ibv_post_send";
        let mut w = self.world();
        for (i, wr) in wrs.iter().enumerate() {
            let Some(qp) = w.qps.get(&self.qpn) else {
                return Err(err(ErrorKind::InvalidState, OP, "QP destroyed").with_bad_wr(i));
            };
            let state = qp.state;
            // RTS sends; SQD queues (connected QPs) until the QP is back in RTS; ERR and SQE
            // flush.
            let connected = matches!(self.qp_type, QpType::Rc | QpType::Uc);
            let queues = state == QpState::Sqd && connected;
            if !matches!(state, QpState::Rts | QpState::Err | QpState::Sqe) && !queues {
                return Err(err(
                    ErrorKind::InvalidState,
                    OP,
                    format!("cannot post sends in {state}"),
                )
                .with_bad_wr(i));
            }
            if wr.sg_list.len() > qp.cap.max_send_sge as usize {
                return Err(err(ErrorKind::InvalidArgument, OP, "too many SGEs").with_bad_wr(i));
            }
            let inline = wr.send_flags.contains(verbs_api::SendFlags::INLINE);
            if inline && wr.total_len() > u64::from(qp.cap.max_inline_data) {
                return Err(err(
                    ErrorKind::InvalidArgument,
                    OP,
                    "inline data above max_inline_data",
                )
                .with_bad_wr(i));
            }
            let rxe = w.devices[qp.dev].personality == Personality::Rxe;
            let ok_op = match self.qp_type {
                QpType::RawPacket => wr.opcode == SendOpcode::Send,
                QpType::Ud => matches!(wr.opcode, SendOpcode::Send | SendOpcode::SendWithImm),
                // rxe's provider takes any opcode on UC; the WQE then fails.
                QpType::Uc => {
                    rxe || matches!(
                        wr.opcode,
                        SendOpcode::Send
                            | SendOpcode::SendWithImm
                            | SendOpcode::RdmaWrite
                            | SendOpcode::RdmaWriteWithImm
                            | SendOpcode::BindMw
                            | SendOpcode::LocalInv
                    )
                }
                _ => true,
            };
            if !ok_op {
                return Err(err(
                    ErrorKind::InvalidArgument,
                    OP,
                    format!("{} QPs do not take {}", self.qp_type, wr.opcode),
                )
                .with_bad_wr(i));
            }
            let mut copy = WrCopy {
                wr_id: wr.wr_id,
                opcode: wr.opcode,
                flags: wr.send_flags,
                imm: wr.imm_data,
                sges: SgeList::new(wr.sg_list),
                rdma: None,
                atomic: None,
                ud: None,
                inline: None,
                inv: None,
                bind: None,
            };
            match wr.detail {
                WrDetail::Rdma { remote_addr, rkey } => copy.rdma = Some((remote_addr, rkey)),
                WrDetail::Atomic {
                    remote_addr,
                    compare_add,
                    swap,
                    rkey,
                } => copy.atomic = Some((remote_addr, rkey, compare_add, swap)),
                WrDetail::Ud {
                    ah,
                    remote_qpn,
                    remote_qkey,
                } => {
                    copy.ud = Some(UdDest {
                        ah: ah.attr,
                        remote_qpn,
                        remote_qkey,
                    })
                }
                WrDetail::None => {}
                WrDetail::Invalidate { rkey } => copy.inv = Some(rkey),
                WrDetail::BindMw {
                    mw,
                    rkey,
                    bind_info,
                } => {
                    let Some((_, e)) = w.mrs.mw_by_handle(mw) else {
                        return Err(err(
                            ErrorKind::InvalidArgument,
                            OP,
                            format!("no memory window has handle {mw}"),
                        )
                        .with_bad_wr(i));
                    };
                    copy.bind = Some(BindWqe {
                        mw_rkey: e.user_rkey,
                        rkey,
                        info: bind_info,
                    });
                }
            }
            let needs_inv = matches!(wr.opcode, SendOpcode::LocalInv | SendOpcode::SendWithInv);
            if (needs_inv && copy.inv.is_none())
                || (wr.opcode == SendOpcode::BindMw && copy.bind.is_none())
            {
                return Err(err(
                    ErrorKind::InvalidArgument,
                    OP,
                    format!(
                        "{} needs its detail (WrDetail::Invalidate or BindMw)",
                        wr.opcode
                    ),
                )
                .with_bad_wr(i));
            }
            // rdma-core's rxe provider (`validate_send_wr`): a bind carries no data and no
            // immediate.
            if wr.opcode == SendOpcode::BindMw && (!wr.sg_list.is_empty() || wr.imm_data != 0) {
                return Err(err(
                    ErrorKind::InvalidArgument,
                    OP,
                    "a BIND_MW request takes no SGEs and no immediate",
                )
                .with_bad_wr(i));
            }
            // rdma-core's rxe provider refuses an atomic whose SGEs hold fewer than 8 bytes
            // or whose remote address is not 8-byte aligned (`validate_send_wr`).
            if let (Some((addr, ..)), Personality::Rxe) =
                (copy.atomic, w.devices[qp.dev].personality)
            {
                if wr.total_len() < 8 || addr & 7 != 0 {
                    return Err(err(
                        ErrorKind::InvalidArgument,
                        OP,
                        "an atomic needs 8 bytes at an 8-byte aligned remote address",
                    )
                    .with_bad_wr(i));
                }
            }
            if self.qp_type == QpType::Ud && copy.ud.is_none() {
                return Err(err(
                    ErrorKind::InvalidArgument,
                    OP,
                    "a UD send needs an address handle",
                )
                .with_bad_wr(i));
            }
            if (wr.opcode.is_rdma() && copy.rdma.is_none())
                || (wr.opcode.is_atomic() && copy.atomic.is_none())
            {
                return Err(err(
                    ErrorKind::InvalidArgument,
                    OP,
                    "RDMA and atomic requests need their remote address",
                )
                .with_bad_wr(i));
            }
            let sig_all = qp.sq_sig_all;
            // The ring holds max_send_wr WQEs; a request that finds it full fails (after
            // the checks above, as rdma-core's providers check) and the ones before it
            // stay posted.
            let in_use = qp.sq.in_use() + qp.rc.as_ref().map_or(0, |rc| rc.queued());
            if in_use >= qp.cap.max_send_wr as usize {
                return Err(err(ErrorKind::QueueFull, OP, "the send queue is full").with_bad_wr(i));
            }
            let stopped = qp.sq.stopped();
            if let (Some(b), WrDetail::BindMw { mw, .. }) = (copy.bind, wr.detail) {
                // The window's rkey is the new one from the post on (what ibv_bind_mw does,
                // and what a caller of ibv_post_send does for a type 2 window).
                if let Some((index, _)) = w.mrs.mw_by_handle(mw) {
                    if let Some(e) = w.mrs.mw_mut(index) {
                        e.user_rkey = b.rkey;
                    }
                }
            }
            let now = w.fabric.now();
            w.fabric.trace_event(
                super::world::vtag::POST_SEND,
                &[
                    now,
                    u64::from(self.qpn),
                    wr.wr_id,
                    u64::from(wr.opcode.as_raw()),
                ],
            );
            let wc_op = wr.opcode.completion_opcode();
            let ud_like = matches!(self.qp_type, QpType::RawPacket | QpType::Ud);
            if (state != QpState::Rts && !queues) || (ud_like && stopped) {
                // Flushed by the NIC, completed after the post as any send.
                let wc = completion(wr.wr_id, WcStatus::WrFlushErr, wc_op, self.qpn);
                w.queue_send(self.qpn, Executed { wc, reported: true });
                continue;
            }
            match self.qp_type {
                QpType::RawPacket | QpType::Ud => {
                    let posted = w.send_now(self.qpn, &copy);
                    let ok = posted.status.is_success();
                    let mut wc = completion(wr.wr_id, posted.status, wc_op, self.qpn);
                    wc.byte_len = posted.byte_len;
                    if ok && wr.opcode == verbs_api::SendOpcode::SendWithImm {
                        // rxe and mlx5 flag it (imm_data left 0).
                        wc.wc_flags |= verbs_api::WcFlags::WITH_IMM;
                    }
                    if !ok {
                        // The requester stops here; what follows is flushed, and the
                        // QP leaves RTS when this completion is made.
                        if let Some(q) = w.qps.get_mut(&self.qpn) {
                            q.sq.stop();
                        }
                    }
                    let signaled =
                        sig_all || wr.send_flags.contains(verbs_api::SendFlags::SIGNALED);
                    w.queue_send(
                        self.qpn,
                        Executed {
                            wc,
                            reported: signaled || !ok,
                        },
                    );
                }
                _ => {
                    if inline {
                        let mut data = Vec::new();
                        // SAFETY: inline SGEs point at memory the caller vouched for in
                        // post_send's contract; it is copied now, as the NIC copies inline
                        // data into the WQE at post time.
                        unsafe { super::memory::gather(wr.sg_list, &mut data) };
                        copy.inline = Some(data);
                    }
                    w.rc_post(self.qpn, copy).map_err(|e| e.with_bad_wr(i))?;
                }
            }
        }
        Ok(())
    }

    unsafe fn post_recv<'a>(&self, wrs: &[RecvWr<'a>]) -> Result<()> {
        const OP: &str = "ibv_post_recv";
        let mut w = self.world();
        for (i, wr) in wrs.iter().enumerate() {
            let now = w.fabric.now();
            let Some(qp) = w.qps.get_mut(&self.qpn) else {
                return Err(err(ErrorKind::InvalidState, OP, "QP destroyed").with_bad_wr(i));
            };
            if qp.srq.is_some() {
                return Err(err(
                    ErrorKind::InvalidArgument,
                    OP,
                    "the QP takes its receives from an SRQ",
                )
                .with_bad_wr(i));
            }
            if qp.state == QpState::Reset {
                return Err(
                    err(ErrorKind::InvalidState, OP, "cannot post receives in RESET")
                        .with_bad_wr(i),
                );
            }
            if wr.sg_list.len() > qp.cap.max_recv_sge as usize {
                return Err(err(ErrorKind::InvalidArgument, OP, "too many SGEs").with_bad_wr(i));
            }
            if qp.rq.len() >= qp.cap.max_recv_wr as usize {
                return Err(
                    err(ErrorKind::QueueFull, OP, "the receive queue is full").with_bad_wr(i)
                );
            }
            let dev = qp.dev;
            let flush_now = w.devices[dev].personality != Personality::Rxe;
            let Some(qp) = w.qps.get_mut(&self.qpn) else {
                return Err(err(ErrorKind::InvalidState, OP, "QP destroyed").with_bad_wr(i));
            };
            // rxe queues a receive posted in ERR without flushing it (it is flushed when
            // the QP is next flushed); mlx5 flushes it at once.
            if qp.state == QpState::Err && flush_now {
                let cq = qp.recv_cq;
                w.complete(
                    cq,
                    completion(wr.wr_id, WcStatus::WrFlushErr, WcOpcode::Recv, self.qpn),
                    false,
                );
                continue;
            }
            qp.rq.push_back(RecvWqe {
                wr_id: wr.wr_id,
                sges: SgeList::new(wr.sg_list),
            });
            w.fabric.trace_event(
                super::world::vtag::POST_RECV,
                &[now, u64::from(self.qpn), wr.wr_id],
            );
        }
        Ok(())
    }

    fn attach_mcast(&self, gid: &Gid, _lid: u16) -> Result<()> {
        const OP: &str = "ibv_attach_mcast";
        let Some(ip) = gid.to_ipv4().filter(|i| i.is_multicast()) else {
            return Err(err(
                ErrorKind::InvalidArgument,
                OP,
                format!("{gid} is not an IPv4 multicast GID"),
            ));
        };
        if self.qp_type != QpType::Ud {
            return Err(err(
                ErrorKind::InvalidArgument,
                OP,
                "only UD QPs attach to multicast groups",
            ));
        }
        self.world().attach(self.qpn, ip);
        Ok(())
    }

    fn detach_mcast(&self, gid: &Gid, _lid: u16) -> Result<()> {
        let ip = gid.to_ipv4().unwrap_or(std::net::Ipv4Addr::UNSPECIFIED);
        if self.world().detach(self.qpn, ip) {
            Ok(())
        } else {
            Err(err(
                ErrorKind::InvalidArgument,
                "ibv_detach_mcast",
                format!("QP not attached to {gid}"),
            ))
        }
    }
}
