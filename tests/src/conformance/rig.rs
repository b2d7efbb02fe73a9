//! What every case starts from: a device opened through a backend, and small helpers to
//! make QPs, connect them, and wait for completions in a way that runs unchanged on
//! hardware (wall-clock deadline) and on the simulator (whose empty polls advance
//! virtual time).

use std::time::{Duration, Instant};

use verbs_api::helpers::{bring_up, transition::RemoteQp, ConnectParams};
use verbs_api::{
    AccessFlags, AhAttr, Completion, CompletionChannel, CompletionQueue, Context, DeviceAttr, Gid,
    MemoryRegion, QpCap, QpInitAttr, QpState, QpType, QueuePair, Verbs,
};

/// How long a case waits for something that should happen, in wall-clock time (the
/// simulator gets there in virtual time long before).
pub const DEADLINE: Duration = Duration::from_secs(20);

/// A backend and the device a case runs on.
#[derive(Debug)]
pub struct Env<V: Verbs> {
    /// The backend.
    pub verbs: V,
    /// The device to open.
    pub device: String,
    /// The port to use.
    pub port: u8,
    /// A second device behind a link that can lose packets, for the cases about loss
    /// (`None`: the backend has none, and those cases fail saying so).
    pub lossy: Option<super::loss::LossyLinks>,
}

impl<V: Verbs> Env<V> {
    /// Whether the device is Soft-RoCE (or the simulator's rxe personality), whose
    /// divergences from the man pages the cases expect on it.
    pub fn is_rxe(&self) -> bool {
        self.device.starts_with("rxe")
    }
}

/// An open device with one PD, its attributes, and the IPv4 GID of the port.
pub struct Rig<C: Context> {
    /// Protection domain.
    pub pd: C::Pd,
    /// Device attributes.
    pub attr: DeviceAttr,
    /// The port.
    pub port: u8,
    /// Index of the port's IPv4-mapped GID.
    pub gid_index: u8,
    /// That GID.
    pub gid: Gid,
    /// The context (dropped last).
    pub ctx: C,
}

impl<C: Context> std::fmt::Debug for Rig<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rig")
            .field("port", &self.port)
            .field("gid", &self.gid)
            .finish()
    }
}

/// Opens the env's device.
///
/// # Panics
/// When the device cannot be opened or has no IPv4 GID: the case cannot run.
pub fn open<V: Verbs>(env: &Env<V>) -> Rig<V::Context> {
    open_device(env, &env.device)
}

/// Opens the device `name` of the env's backend, at the env's port.
///
/// # Panics
/// As [`open`].
pub fn open_device<V: Verbs>(env: &Env<V>, name: &str) -> Rig<V::Context> {
    let ctx = env
        .verbs
        .open(name)
        .unwrap_or_else(|e| panic!("open {name}: {e}"));
    let attr = ctx.query_device().expect("query_device");
    let port_attr = ctx.query_port(env.port).expect("query_port");
    let mut found = None;
    for i in 0..port_attr.gid_tbl_len.min(256) {
        if let Ok(g) = ctx.query_gid(env.port, i) {
            if g.to_ipv4().is_some_and(|a| !a.is_unspecified()) {
                found = Some((i as u8, g));
                break;
            }
        }
    }
    let (gid_index, gid) = found.expect("the port has an IPv4-mapped GID (RoCEv2)");
    let pd = ctx.alloc_pd().expect("alloc_pd");
    Rig {
        pd,
        attr,
        port: env.port,
        gid_index,
        gid,
        ctx,
    }
}

/// A CQ with a completion channel, and the channel.
pub struct CqPair<C: Context> {
    /// The CQ.
    pub cq: C::Cq,
    /// Its channel.
    pub channel: C::CompChannel,
}

impl<C: Context> std::fmt::Debug for CqPair<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CqPair")
            .field("cq", &self.cq)
            .field("channel", &self.channel)
            .finish()
    }
}

impl<C: Context> Rig<C> {
    /// A CQ of `cqe` entries with its own completion channel.
    pub fn cq(&self, cqe: u32) -> CqPair<C> {
        let channel = self.ctx.create_comp_channel().expect("create_comp_channel");
        let cq = self
            .ctx
            .create_cq(cqe, Some(&channel), 0)
            .expect("create_cq");
        CqPair { cq, channel }
    }

    /// A QP of `qp_type` on `cq` with small queues.
    pub fn qp(&self, qp_type: QpType, cq: &C::Cq, inline: u32) -> C::Qp {
        let cap = QpCap::new(32, 32, 2, 2).with_inline(inline);
        self.ctx
            .create_qp(&self.pd, &QpInitAttr::new(qp_type, cq, cap))
            .expect("create_qp")
    }

    /// A QP of `qp_type` whose receives come from `srq`.
    pub fn qp_on_srq(&self, qp_type: QpType, cq: &C::Cq, srq: &C::Srq) -> C::Qp {
        let cap = QpCap::new(32, 0, 1, 1);
        let mut init = QpInitAttr::new(qp_type, cq, cap);
        init.srq = Some(srq);
        self.ctx
            .create_qp(&self.pd, &init)
            .expect("create_qp on srq")
    }

    /// Registered memory of `len` bytes.
    pub fn mr(&self, len: usize, access: AccessFlags) -> C::Mr {
        self.ctx
            .alloc_mr(&self.pd, len, access | AccessFlags::LOCAL_WRITE)
            .expect("alloc_mr")
    }

    /// The address vector to this port's own GID (loopback).
    pub fn self_av(&self) -> AhAttr {
        AhAttr::roce(self.gid, self.gid_index, self.port)
    }

    /// Connection parameters for an RC/UC QP talking to `remote_qpn` on this device.
    pub fn connect_params(&self, remote_qpn: u32, access: AccessFlags) -> ConnectParams {
        ConnectParams {
            port: self.port,
            access,
            remote: Some(RemoteQp {
                qpn: remote_qpn,
                psn: 0,
                av: self.self_av(),
            }),
            sq_psn: 0,
            ..ConnectParams::default()
        }
    }

    /// A QP of `qp_type` with the given queue sizes; the receive side completes to
    /// `recv_cq`.
    pub fn qp_with(&self, qp_type: QpType, send_cq: &C::Cq, recv_cq: &C::Cq, cap: QpCap) -> C::Qp {
        let mut init = QpInitAttr::new(qp_type, send_cq, cap);
        init.recv_cq = recv_cq;
        self.ctx.create_qp(&self.pd, &init).expect("create_qp")
    }

    /// Two connected QPs of `qp_type` (RC or UC) in RTS, `a` completing to `cq_a` and `b`
    /// to `cq_b`, after `tweak` adjusted each side's parameters (`tweak(false, ..)` for
    /// `a`, `tweak(true, ..)` for `b`).
    pub fn pair_with(
        &self,
        qp_type: QpType,
        cq_a: &C::Cq,
        cq_b: &C::Cq,
        access: AccessFlags,
        mut tweak: impl FnMut(bool, &mut ConnectParams),
    ) -> (C::Qp, C::Qp) {
        let a = self.qp(qp_type, cq_a, 64);
        let b = self.qp(qp_type, cq_b, 64);
        let mut pa = self.connect_params(b.qp_num(), access);
        let mut pb = self.connect_params(a.qp_num(), access);
        tweak(false, &mut pa);
        tweak(true, &mut pb);
        bring_up(&a, QpState::Rts, &pa).expect("bring up A");
        bring_up(&b, QpState::Rts, &pb).expect("bring up B");
        (a, b)
    }

    /// Two RC QPs on `cq`, connected to each other, in RTS, allowing `access`.
    pub fn rc_pair(&self, cq: &C::Cq, access: AccessFlags) -> (C::Qp, C::Qp) {
        self.rc_pair_on(cq, cq, access)
    }

    /// Two connected RC QPs in RTS: the first completes to `cq_a`, the second to `cq_b`.
    pub fn rc_pair_on(&self, cq_a: &C::Cq, cq_b: &C::Cq, access: AccessFlags) -> (C::Qp, C::Qp) {
        let a = self.qp(QpType::Rc, cq_a, 64);
        let b = self.qp(QpType::Rc, cq_b, 64);
        self.connect(&a, &b, access);
        (a, b)
    }

    /// Brings the RC or UC QPs `a` and `b` (still in RESET) up to RTS, each connected to
    /// the other with the default parameters and allowing `access`.
    pub fn connect(&self, a: &C::Qp, b: &C::Qp, access: AccessFlags) {
        bring_up(a, QpState::Rts, &self.connect_params(b.qp_num(), access)).expect("bring up A");
        bring_up(b, QpState::Rts, &self.connect_params(a.qp_num(), access)).expect("bring up B");
    }

    /// A UD QP on `cq` in RTS with Q_Key `qkey`.
    pub fn ud_qp(&self, cq: &C::Cq, qkey: u32) -> C::Qp {
        let qp = self.qp(QpType::Ud, cq, 0);
        let p = ConnectParams {
            port: self.port,
            qkey,
            ..ConnectParams::default()
        };
        bring_up(&qp, QpState::Rts, &p).expect("bring up UD");
        qp
    }
}

/// Polls `cq` until `n` completions arrived; fails after [`DEADLINE`] or if more come.
///
/// # Panics
/// When fewer than `n` arrive in time.
pub fn poll_n<Q: CompletionQueue>(cq: &Q, n: usize) -> Vec<Completion> {
    let mut out = Vec::new();
    let start = Instant::now();
    let mut buf = [Completion::default(); 16];
    while out.len() < n {
        let got = cq.poll(&mut buf).expect("poll_cq");
        out.extend_from_slice(&buf[..got]);
        if got == 0 {
            assert!(
                start.elapsed() < DEADLINE,
                "waited for {n} completions, got {out:?}"
            );
            std::thread::yield_now();
        }
    }
    assert_eq!(out.len(), n, "more completions than expected: {out:?}");
    out
}

/// Polls `cq` a few hundred times (each empty poll advances the simulator's clock) and
/// returns what arrived; used to show that nothing arrives.
pub fn poll_quiet<Q: CompletionQueue>(cq: &Q) -> Vec<Completion> {
    let mut out = Vec::new();
    let mut buf = [Completion::default(); 16];
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(300) {
        let got = cq.poll(&mut buf).expect("poll_cq");
        out.extend_from_slice(&buf[..got]);
        std::thread::sleep(Duration::from_millis(1));
    }
    out
}

/// Waits for one CQ event on `channel` (arming must be done by the caller).
pub fn wait_event<Ch: CompletionChannel>(channel: &Ch) -> Option<u32> {
    channel.get_cq_event(Some(DEADLINE)).expect("get_cq_event")
}

/// Polls the context's async events until one satisfies `want`, or the deadline.
pub fn wait_async<C: Context>(
    ctx: &C,
    cq_to_drive: Option<&C::Cq>,
    mut want: impl FnMut(&verbs_api::AsyncEvent) -> bool,
) -> verbs_api::AsyncEvent {
    let start = Instant::now();
    let mut seen = Vec::new();
    loop {
        while let Some(ev) = ctx.poll_async_event().expect("poll_async_event") {
            if want(&ev) {
                return ev;
            }
            seen.push(ev);
        }
        assert!(
            start.elapsed() < DEADLINE,
            "async event not raised; saw {seen:?}"
        );
        if let Some(cq) = cq_to_drive {
            // An empty poll lets the simulator's clock move; on hardware it is harmless.
            let mut none = [];
            let _ = cq.poll(&mut none);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Writes `data` at the start of `mr`.
pub fn fill<M: MemoryRegion>(mr: &M, offset: usize, data: &[u8]) {
    mr.write(offset, data).expect("write MR");
}

/// Reads `len` bytes of `mr` at `offset`.
pub fn read<M: MemoryRegion>(mr: &M, offset: usize, len: usize) -> Vec<u8> {
    let mut v = vec![0; len];
    mr.read(offset, &mut v).expect("read MR");
    v
}
