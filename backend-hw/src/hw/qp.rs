//! Queue pairs and flow steering rules.

use std::fmt;
use std::net::{Ipv4Addr, UdpSocket};
use std::os::raw::c_int;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use verbs_api::{
    Context, Error, ErrorKind, Flow, FlowAttr, Gid, LinkLayer, MwBind, QpAttr, QpAttrMask, QpCap,
    QpInitAttr, QpState, QpType, QueuePair, RecvWr, Result, RxHashConf, SendOpcode, SendWr,
    WrDetail,
};

use super::convert;
use super::ctx::{invalid, null, os_error, Ctx, HwContext, CHUNK};
use super::resources::{
    self, post_error, post_recv_chunks, Cq, HwAh, HwCq, HwMw, HwPd, HwSrq, Pd, Srq,
};
use super::wq::{HwRwqIndTable, IndTable};
use crate::diagnose::{self, errno};
use crate::ffi;

pub(crate) struct Qp {
    ptr: NonNull<ffi::ibv_qp>,
    qp_num: u32,
    qp_type: QpType,
    cap: QpCap,
    /// The state of our last successful modify (the device may since have moved the QP to
    /// ERR or SQE by itself, never back to RESET, INIT or RTR).
    last_set: AtomicU32,
    /// Multicast groups attached, detached before the QP is destroyed, each with the
    /// socket that holds the host's IPv4 membership of the group (RoCEv2), if any.
    mcast: Mutex<Vec<(Gid, u16, Option<UdpSocket>)>>,
    _srq: Option<Arc<Srq>>,
    /// The CQs (none for an RSS QP, whose receives complete to its WQs' CQs).
    _cqs: Option<[Arc<Cq>; 2]>,
    /// An RSS QP's indirection table.
    _table: Option<Arc<IndTable>>,
    pd: Arc<Pd>,
}

// SAFETY: libibverbs QPs may be posted to, modified and queried from any thread; the
// Rust-side state is atomic or behind a Mutex.
unsafe impl Send for Qp {}
// SAFETY: as for Send.
unsafe impl Sync for Qp {}

impl Drop for Qp {
    fn drop(&mut self) {
        let groups = std::mem::take(self.mcast.get_mut().unwrap_or_else(|p| p.into_inner()));
        for (gid, lid, _membership) in groups {
            // SAFETY: the QP is alive and attached to `gid`.
            let _ = unsafe { ffi::shim_detach_mcast(self.ptr.as_ptr(), gid.0.as_ptr(), lid) };
        }
        // SAFETY: every flow on this QP holds an Arc<Qp>, so none is left; the QP is
        // destroyed once, before its CQs, SRQ, table and PD (whose Arcs drop after this).
        let _ = unsafe { ffi::shim_destroy_qp(self.ptr.as_ptr()) };
    }
}

/// A queue pair (`struct ibv_qp`).
#[derive(Clone)]
pub struct HwQp(pub(crate) Arc<Qp>);

impl fmt::Debug for HwQp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HwQp")
            .field("qp_num", &self.0.qp_num)
            .field("qp_type", &self.0.qp_type)
            .field("cap", &self.0.cap)
            .finish_non_exhaustive()
    }
}

impl HwQp {
    pub(crate) fn create(pd: &HwPd, init: &QpInitAttr<'_, HwCq, HwSrq>) -> Result<Self> {
        const OP: &str = "ibv_create_qp";
        let mut attr = ffi::shim_qp_init_attr {
            send_cq: init.send_cq.0.ptr.as_ptr(),
            recv_cq: init.recv_cq.0.ptr.as_ptr(),
            srq: init.srq.map_or(std::ptr::null_mut(), |s| s.0.ptr.as_ptr()),
            cap: convert::cap_to_shim(&init.cap),
            qp_type: init.qp_type.as_raw(),
            sq_sig_all: u32::from(init.sq_sig_all),
        };
        let mut ptr = std::ptr::null_mut();
        let mut qp_num = 0;
        // SAFETY: the PD, CQs and SRQ are alive; `attr` and the outputs are valid.
        let ret =
            unsafe { ffi::shim_create_qp(pd.0.ptr.as_ptr(), &mut attr, &mut ptr, &mut qp_num) };
        if ret != 0 {
            if ret == errno::EPERM && init.qp_type == QpType::RawPacket {
                return Err(diagnose::raw_packet_permission());
            }
            return Err(os_error(
                OP,
                ret,
                format!(
                    "{} QP with {:?} on {}",
                    init.qp_type,
                    init.cap,
                    pd.0.ctx.name()
                ),
            ));
        }
        let ptr = NonNull::new(ptr).ok_or_else(|| null(OP))?;
        Ok(HwQp(Arc::new(Qp {
            ptr,
            qp_num,
            qp_type: init.qp_type,
            cap: convert::cap_from_shim(&attr.cap),
            last_set: AtomicU32::new(QpState::Reset.as_raw()),
            mcast: Mutex::new(Vec::new()),
            _srq: init.srq.map(|s| s.0.clone()),
            _cqs: Some([init.send_cq.0.clone(), init.recv_cq.0.clone()]),
            _table: None,
            pd: pd.0.clone(),
        })))
    }

    /// An RSS QP: a RAW_PACKET QP with no queues of its own over `table`, hashing with
    /// `hash` (`ibv_create_qp_ex` with `IBV_QP_INIT_ATTR_IND_TABLE | _RX_HASH`).
    pub(crate) fn create_rss(pd: &HwPd, table: &HwRwqIndTable, hash: &RxHashConf) -> Result<Self> {
        const OP: &str = "ibv_create_qp_ex";
        let key_len = u8::try_from(hash.key.len())
            .map_err(|_| invalid(OP, format!("a hash key of {} bytes", hash.key.len())))?;
        let mut ptr = std::ptr::null_mut();
        let mut qp_num = 0;
        // SAFETY: the context, PD and table are alive; the key is valid for the call (the
        // device copies it); the outputs are valid.
        let ret = unsafe {
            ffi::shim_create_rss_qp(
                pd.0.ctx.ptr.as_ptr(),
                pd.0.ptr.as_ptr(),
                table.0.ptr.as_ptr(),
                hash.function,
                hash.key.as_ptr(),
                key_len,
                hash.fields.bits(),
                &mut ptr,
                &mut qp_num,
            )
        };
        if ret != 0 {
            if ret == errno::EPERM {
                return Err(diagnose::raw_packet_permission());
            }
            return Err(os_error(
                OP,
                ret,
                format!("RSS QP with {hash:?} on {}", pd.0.ctx.name()),
            ));
        }
        let ptr = NonNull::new(ptr).ok_or_else(|| null(OP))?;
        Ok(HwQp(Arc::new(Qp {
            ptr,
            qp_num,
            qp_type: QpType::RawPacket,
            cap: QpCap::default(),
            last_set: AtomicU32::new(QpState::Reset.as_raw()),
            mcast: Mutex::new(Vec::new()),
            _srq: None,
            _cqs: None,
            _table: Some(table.0.clone()),
            pd: pd.0.clone(),
        })))
    }

    pub(crate) fn ctx(&self) -> &Arc<Ctx> {
        &self.0.pd.ctx
    }

    pub(crate) fn raw(&self) -> *mut ffi::ibv_qp {
        self.0.ptr.as_ptr()
    }

    /// The queue sizes the device gave the QP (at least what was asked for).
    pub fn cap(&self) -> QpCap {
        self.0.cap
    }

    /// For an IPv4-mapped group GID on an Ethernet (RoCEv2) port, joins the IPv4 group on
    /// the port's interface with a UDP socket, as librdmacm's `rdma_join_multicast` does:
    /// without the host's membership the kernel neither loops the group's packets back to
    /// local QPs nor asks switches (IGMP) for them. `None` for other GIDs and ports, and
    /// for a device that is not the kernel's (an emulated NIC, whose hosts' addresses are
    /// the fabric's, so there is no host network stack to subscribe).
    fn join_ipv4_group(&self, gid: &Gid) -> Result<Option<UdpSocket>> {
        const OP: &str = "ibv_attach_mcast";
        let Some(group) = gid.to_ipv4() else {
            return Ok(None);
        };
        if !self.0.pd.ctx.on_host_network {
            return Ok(None);
        }
        let ctx = HwContext {
            inner: self.0.pd.ctx.clone(),
        };
        let port = match self.query(QpAttrMask::PORT) {
            Ok((a, _)) if a.port_num != 0 => a.port_num,
            _ => 1,
        };
        let pa = ctx.query_port(port)?;
        if pa.link_layer != LinkLayer::Ethernet {
            return Ok(None);
        }
        let Some(iface) = (0..pa.gid_tbl_len).find_map(|i| {
            let g = ctx.query_gid(port, i).ok()?;
            g.to_ipv4()
                .filter(|a| !a.is_unspecified() && !a.is_multicast())
        }) else {
            return Err(Error::new(
                ErrorKind::InvalidArgument,
                OP,
                format!(
                    "port {port} of {} has no IPv4 address (no IPv4-mapped GID) to join {group} \
                     on: give its network interface an IPv4 address",
                    ctx.inner.name()
                ),
            ));
        };
        let sock = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))
            .and_then(|s| s.join_multicast_v4(&group, &iface).map(|()| s))
            .map_err(|e| {
                Error::new(
                    ErrorKind::from_errno(e.raw_os_error().unwrap_or(errno::EIO)),
                    OP,
                    format!("joining IPv4 group {group} on the interface of {iface}: {e}"),
                )
            })?;
        Ok(Some(sock))
    }

    fn last_set(&self) -> QpState {
        QpState::from_raw(self.0.last_set.load(Ordering::Acquire)).unwrap_or(QpState::Unknown)
    }

    /// The one check made before the device sees a send: a UD send must carry an address
    /// handle, because the provider reads the AH through the pointer (rdma-core's rxe
    /// `init_send_wqe` dereferences it unchecked), so a null one would crash the process.
    /// Everything else (SGE count, inline size, opcode, atomic alignment) is the device's
    /// decision.
    fn check_send(&self, i: usize, wr: &SendWr<'_, HwAh>) -> Result<()> {
        if self.0.qp_type == QpType::Ud && !matches!(wr.detail, WrDetail::Ud { .. }) {
            return Err(invalid(
                "ibv_post_send",
                "a UD send needs an address handle (WrDetail::Ud)",
            )
            .with_bad_wr(i));
        }
        Ok(())
    }
}

fn send_wr(ctx: &Ctx, wr: &SendWr<'_, HwAh>) -> Result<ffi::shim_send_wr> {
    let mut o = ffi::shim_send_wr {
        wr_id: wr.wr_id,
        sg_list: wr.sg_list.as_ptr(),
        num_sge: u32::try_from(wr.sg_list.len()).unwrap_or(u32::MAX),
        opcode: wr.opcode.as_raw(),
        send_flags: wr.send_flags.bits(),
        imm_data: wr.imm_data,
        ..ffi::shim_send_wr::default()
    };
    match wr.detail {
        WrDetail::None => {}
        WrDetail::Rdma { remote_addr, rkey } => {
            o.remote_addr = remote_addr;
            o.rkey = rkey;
        }
        WrDetail::Atomic {
            remote_addr,
            compare_add,
            swap,
            rkey,
        } => {
            o.remote_addr = remote_addr;
            o.compare_add = compare_add;
            o.swap = swap;
            o.rkey = rkey;
        }
        WrDetail::Ud {
            ah,
            remote_qpn,
            remote_qkey,
        } => {
            o.ah = ah.0.ptr.as_ptr();
            o.remote_qpn = remote_qpn;
            o.remote_qkey = remote_qkey;
        }
        WrDetail::Invalidate { rkey } => o.invalidate_rkey = rkey,
        WrDetail::BindMw {
            mw,
            rkey,
            bind_info,
        } => {
            o.mw = resources::mw_ptr(ctx, mw, "ibv_post_send")?;
            o.mr = resources::mr_ptr(ctx, bind_info.mr_lkey, "ibv_post_send")?;
            o.rkey = rkey;
            o.bind_addr = bind_info.addr;
            o.bind_length = bind_info.length;
            o.bind_access = bind_info.mw_access_flags.bits();
        }
    }
    Ok(o)
}

impl QueuePair for HwQp {
    type Ah = HwAh;

    fn qp_num(&self) -> u32 {
        self.0.qp_num
    }

    fn qp_type(&self) -> QpType {
        self.0.qp_type
    }

    fn state(&self) -> Result<QpState> {
        Ok(self.query(QpAttrMask::STATE)?.0.qp_state)
    }

    fn apply_modify(&self, attr: &QpAttr, mask: QpAttrMask) -> Result<()> {
        const OP: &str = "ibv_modify_qp";
        let raw = convert::qp_attr_to_shim(attr);
        let mask_c = c_int::try_from(mask.bits())
            .map_err(|_| invalid(OP, format!("attribute mask {mask:?} out of range")))?;
        // SAFETY: the QP is alive; `raw` is valid for the call.
        let ret = unsafe { ffi::shim_modify_qp(self.0.ptr.as_ptr(), &raw, mask_c) };
        if ret != 0 {
            let target = if mask.contains(QpAttrMask::STATE) {
                attr.qp_state.as_str()
            } else {
                "the same state"
            };
            return Err(os_error(
                OP,
                ret,
                format!(
                    "QP {} ({}) to {target} with {mask:?}: the device rejected an attribute \
                     value (port, GID index, path MTU above the port's, unreachable \
                     destination...)",
                    self.0.qp_num, self.0.qp_type
                ),
            ));
        }
        if mask.contains(QpAttrMask::STATE) {
            self.0
                .last_set
                .store(attr.qp_state.as_raw(), Ordering::Release);
        }
        Ok(())
    }

    fn query(&self, mask: QpAttrMask) -> Result<(QpAttr, QpCap)> {
        let mut raw = ffi::shim_qp_attr::default();
        let mut cap = ffi::shim_qp_cap::default();
        let mask_c = c_int::try_from(mask.bits()).unwrap_or(0);
        // SAFETY: the QP is alive; outputs are valid.
        let ret = unsafe { ffi::shim_query_qp(self.0.ptr.as_ptr(), mask_c, &mut raw, &mut cap) };
        if ret != 0 {
            return Err(os_error(
                "ibv_query_qp",
                ret,
                format!("QP {}", self.0.qp_num),
            ));
        }
        Ok((
            convert::qp_attr_from_shim(&raw),
            convert::cap_from_shim(&cap),
        ))
    }

    unsafe fn post_send(&self, wrs: &[SendWr<'_, HwAh>]) -> Result<()> {
        const OP: &str = "ibv_post_send";
        let state = self.last_set();
        if matches!(state, QpState::Reset | QpState::Init | QpState::Rtr) && !wrs.is_empty() {
            return Err(Error::new(
                ErrorKind::InvalidState,
                OP,
                format!("QP {} is in {state}: sends need RTS", self.0.qp_num),
            )
            .with_bad_wr(0));
        }
        let mut buf = [ffi::shim_send_wr::default(); CHUNK];
        for (c, chunk) in wrs.chunks(CHUNK).enumerate() {
            for (i, (dst, wr)) in buf.iter_mut().zip(chunk).enumerate() {
                self.check_send(c * CHUNK + i, wr)?;
                *dst = send_wr(self.ctx(), wr).map_err(|e| e.with_bad_wr(c * CHUNK + i))?;
            }
            let mut bad = 0usize;
            // SAFETY: the QP is alive; `buf[..len]` is valid; the SGE lists and AHs it
            // points to live in `wrs` for this call, and the caller vouches for the memory
            // they name and for the AHs outliving the sends (the trait's contract).
            let ret = unsafe {
                ffi::shim_post_send(self.0.ptr.as_ptr(), buf.as_ptr(), chunk.len(), &mut bad)
            };
            let posted = if ret == 0 {
                chunk.len()
            } else {
                bad.min(chunk.len())
            };
            for w in &buf[..posted] {
                if w.opcode == SendOpcode::BindMw.as_raw() {
                    // As a caller of ibv_post_send does for a type 2 window (and
                    // ibv_bind_mw for type 1): the window's rkey is the new one from now.
                    // SAFETY: `w.mw` came from the registry of live windows just above.
                    unsafe { resources::set_mw_rkey(w.mw, w.rkey) };
                }
            }
            if ret != 0 {
                return Err(post_error(OP, ret).with_bad_wr(c * CHUNK + bad.min(chunk.len())));
            }
        }
        Ok(())
    }

    unsafe fn post_recv(&self, wrs: &[RecvWr<'_>]) -> Result<()> {
        const OP: &str = "ibv_post_recv";
        if wrs.is_empty() {
            return Ok(());
        }
        if self.last_set() == QpState::Reset {
            return Err(Error::new(
                ErrorKind::InvalidState,
                OP,
                format!(
                    "QP {} is in RESET: receives need INIT or later",
                    self.0.qp_num
                ),
            )
            .with_bad_wr(0));
        }
        let qp = self.0.ptr.as_ptr();
        post_recv_chunks(OP, wrs, |chunk, bad| {
            // SAFETY: the QP is alive; `chunk` is valid for its length; the SGE lists it
            // points to live in `wrs` for this call, and the caller vouches for the
            // memory they name (the trait's contract).
            unsafe { ffi::shim_post_recv(qp, chunk.as_ptr(), chunk.len(), bad) }
        })
    }

    fn attach_mcast(&self, gid: &Gid, lid: u16) -> Result<()> {
        const OP: &str = "ibv_attach_mcast";
        // The device decides what may be attached (the kernel refuses a non-multicast GID
        // and non-UD QPs with EINVAL); only then is the host's IPv4 membership taken.
        // SAFETY: the QP is alive; `gid` has 16 bytes.
        let ret = unsafe { ffi::shim_attach_mcast(self.0.ptr.as_ptr(), gid.0.as_ptr(), lid) };
        if ret != 0 {
            return Err(os_error(OP, ret, format!("QP {} to {gid}", self.0.qp_num)));
        }
        let mut groups = self.0.mcast.lock().unwrap_or_else(|p| p.into_inner());
        if groups.iter().any(|(g, l, _)| g == gid && *l == lid) {
            return Ok(());
        }
        match self.join_ipv4_group(gid) {
            Ok(membership) => {
                groups.push((*gid, lid, membership));
                Ok(())
            }
            Err(e) => {
                // SAFETY: the QP is alive and was attached to `gid` just above.
                let _ = unsafe { ffi::shim_detach_mcast(self.0.ptr.as_ptr(), gid.0.as_ptr(), lid) };
                Err(e)
            }
        }
    }

    fn detach_mcast(&self, gid: &Gid, lid: u16) -> Result<()> {
        const OP: &str = "ibv_detach_mcast";
        let mut groups = self.0.mcast.lock().unwrap_or_else(|p| p.into_inner());
        // SAFETY: the QP is alive; `gid` has 16 bytes. The device decides whether the QP
        // is attached (rxe: EINVAL when it is not).
        let ret = unsafe { ffi::shim_detach_mcast(self.0.ptr.as_ptr(), gid.0.as_ptr(), lid) };
        if ret != 0 {
            return Err(os_error(
                OP,
                ret,
                format!("QP {} from {gid}", self.0.qp_num),
            ));
        }
        groups.retain(|(g, l, _)| !(g == gid && *l == lid));
        Ok(())
    }
}

// ---------------------------------------------------------------- flow

/// The most specs one rule may have (the shim's buffer).
const MAX_FLOW_SPECS: usize = 8;

/// A flow steering rule (`struct ibv_flow`); dropping it removes the rule.
pub struct HwFlow {
    ptr: NonNull<ffi::ibv_flow>,
    attr: FlowAttr,
    qp: Arc<Qp>,
}

// SAFETY: a flow is only destroyed (in Drop), which libibverbs allows from any thread.
unsafe impl Send for HwFlow {}
// SAFETY: as for Send; HwFlow has no interior mutability.
unsafe impl Sync for HwFlow {}

impl fmt::Debug for HwFlow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HwFlow")
            .field("qp_num", &self.qp.qp_num)
            .field("attr", &self.attr)
            .finish()
    }
}

impl HwFlow {
    pub(crate) fn create(qp: &HwQp, attr: &FlowAttr) -> Result<Self> {
        const OP: &str = "ibv_create_flow";
        if attr.specs.len() > MAX_FLOW_SPECS {
            return Err(invalid(
                OP,
                format!(
                    "{} specs; a rule takes at most {MAX_FLOW_SPECS}",
                    attr.specs.len()
                ),
            ));
        }
        let specs: Vec<ffi::shim_flow_spec> = attr.specs.iter().map(convert::flow_spec).collect();
        let raw = ffi::shim_flow_attr {
            type_: attr.rule_type.as_raw(),
            flags: attr.flags.bits(),
            priority: attr.priority,
            port: attr.port,
            pad: 0,
        };
        let mut ptr = std::ptr::null_mut();
        // SAFETY: the QP is alive; `raw` and `specs` are valid for the call.
        let ret = unsafe {
            ffi::shim_create_flow(
                qp.0.ptr.as_ptr(),
                &raw,
                specs.as_ptr(),
                specs.len(),
                &mut ptr,
            )
        };
        if ret != 0 {
            if ret == errno::EPERM {
                return Err(Error::new(
                    ErrorKind::PermissionDenied,
                    OP,
                    "flow steering rules need CAP_NET_RAW: run as root or \
                     `setcap cap_net_raw+ep` on the binary",
                )
                .with_errno(ret));
            }
            return Err(os_error(
                OP,
                ret,
                format!("{} rule on QP {}", attr.rule_type, qp.0.qp_num),
            ));
        }
        let ptr = NonNull::new(ptr).ok_or_else(|| null(OP))?;
        Ok(HwFlow {
            ptr,
            attr: attr.clone(),
            qp: qp.0.clone(),
        })
    }
}

impl Drop for HwFlow {
    fn drop(&mut self) {
        // SAFETY: the flow exists and is destroyed once, before its QP (we hold an Arc).
        let _ = unsafe { ffi::shim_destroy_flow(self.ptr.as_ptr()) };
    }
}

impl Flow for HwFlow {
    fn attr(&self) -> FlowAttr {
        self.attr.clone()
    }
}

// ---------------------------------------------------------------- max inline probe

impl HwMw {
    /// Binds the window with a bind work request on `qp` (`ibv_bind_mw`); returns the new
    /// rkey.
    pub(crate) fn bind(&self, qp: &HwQp, bind: &MwBind) -> Result<u32> {
        const OP: &str = "ibv_bind_mw";
        let mr = resources::mr_ptr(&self.pd.ctx, bind.bind_info.mr_lkey, OP)?;
        let mut rkey = 0;
        let b = &bind.bind_info;
        // SAFETY: the QP, the window and the region are alive (the region's pointer comes
        // from the registry its Drop removes it from); `rkey` is a valid output.
        let ret = unsafe {
            ffi::shim_bind_mw(
                qp.raw(),
                self.ptr.as_ptr(),
                mr,
                bind.wr_id,
                bind.send_flags.bits(),
                b.addr,
                b.length,
                b.mw_access_flags.bits(),
                &mut rkey,
            )
        };
        if ret != 0 {
            return Err(os_error(OP, ret, format!("window {}", self.handle)).with_bad_wr(0));
        }
        Ok(rkey)
    }
}
