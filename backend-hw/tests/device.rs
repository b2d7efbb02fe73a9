//! Tests on a real RDMA device: the one named by `RDMA_DEVICE` (rxe0 in the Soft-RoCE VM
//! of `cargo xtask test --backend hw --vm`, or a NIC). Built only with the `device-tests`
//! feature; with it, every test FAILS (never skips) when the variable is unset or the
//! device does not work.
//!
//! ```text
//! RDMA_DEVICE=rxe0 cargo test -p backend-hw --features device-tests
//! ```
//!
//! All QPs live on one device and talk to each other through it (loopback), as Soft-RoCE
//! requires.

use std::time::{Duration, Instant};

use backend_hw::{HwContext, HwCq, HwMr, HwPd, HwQp, HwVerbs, DEVICE_ENV};
use verbs_api::helpers::transition::RemoteQp;
use verbs_api::helpers::{bring_up, ConnectParams};
use verbs_api::{
    AccessFlags, AhAttr, Completion, CompletionChannel, CompletionQueue, Context, DeviceCapFlags,
    ErrorKind, FlowAttr, Gid, MemoryRegion, QpAttr, QpAttrMask, QpCap, QpInitAttr, QpModify,
    QpState, QpType, QueuePair, QueuePairExt, RecvWr, SendWr, Sge, Verbs, WcFlags, WcOpcode,
    WcStatus, GRH_LEN, MULTICAST_QPN,
};

const DEADLINE: Duration = Duration::from_secs(20);
const QKEY: u32 = 0x1111_1111;

fn device() -> String {
    match std::env::var(DEVICE_ENV) {
        Ok(d) if !d.is_empty() => d,
        _ => panic!(
            "the device tests need {DEVICE_ENV}=<device> (e.g. rxe0): run them through \
             `cargo xtask test --backend hw [--vm]`, or set {DEVICE_ENV} yourself"
        ),
    }
}

struct Rig {
    pd: HwPd,
    port: u8,
    gid_index: u8,
    gid: Gid,
    ctx: HwContext,
}

fn rig() -> Rig {
    let name = device();
    let ctx = HwVerbs::new()
        .open(&name)
        .unwrap_or_else(|e| panic!("open {name}: {e}"));
    let port = 1;
    let pa = ctx.query_port(port).expect("query_port");
    let (gid_index, gid) = (0..pa.gid_tbl_len.min(256))
        .find_map(|i| {
            let g = ctx.query_gid(port, i).ok()?;
            g.to_ipv4()
                .is_some_and(|a| !a.is_unspecified())
                .then_some((u8::try_from(i).ok()?, g))
        })
        .unwrap_or_else(|| panic!("{name} port {port} has no IPv4-mapped GID (RoCEv2)"));
    let pd = ctx.alloc_pd().expect("alloc_pd");
    Rig {
        pd,
        port,
        gid_index,
        gid,
        ctx,
    }
}

impl Rig {
    fn cq(&self, n: u32) -> HwCq {
        self.ctx.create_cq(n, None, 0).expect("create_cq")
    }

    fn qp(&self, t: QpType, cq: &HwCq) -> HwQp {
        let cap = QpCap::new(16, 16, 2, 2);
        self.ctx
            .create_qp(&self.pd, &QpInitAttr::new(t, cq, cap))
            .expect("create_qp")
    }

    fn mr(&self, len: usize) -> HwMr {
        self.ctx
            .alloc_mr(
                &self.pd,
                len,
                AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ,
            )
            .expect("alloc_mr")
    }

    fn av(&self) -> AhAttr {
        AhAttr::roce(self.gid, self.gid_index, self.port)
    }

    fn connect(&self, qp: &HwQp, remote: u32) {
        let p = ConnectParams {
            port: self.port,
            access: AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ,
            remote: Some(RemoteQp {
                qpn: remote,
                psn: 0,
                av: self.av(),
            }),
            ..ConnectParams::default()
        };
        bring_up(qp, QpState::Rts, &p).expect("bring up RC");
    }

    fn ud(&self, cq: &HwCq) -> HwQp {
        let qp = self.qp(QpType::Ud, cq);
        let p = ConnectParams {
            port: self.port,
            qkey: QKEY,
            ..ConnectParams::default()
        };
        bring_up(&qp, QpState::Rts, &p).expect("bring up UD");
        qp
    }
}

fn poll_n(cq: &HwCq, n: usize) -> Vec<Completion> {
    let start = Instant::now();
    let mut out = Vec::new();
    let mut buf = [Completion::default(); 8];
    while out.len() < n {
        let got = cq.poll(&mut buf).expect("poll");
        out.extend_from_slice(&buf[..got]);
        assert!(
            start.elapsed() < DEADLINE,
            "waited for {n} completions, got {out:?}"
        );
    }
    out
}

fn sge(mr: &HwMr, offset: usize, len: u32) -> Sge {
    Sge {
        addr: mr.addr() + offset as u64,
        length: len,
        lkey: mr.lkey(),
    }
}

#[test]
fn lists_and_queries_the_device() {
    let name = device();
    let verbs = HwVerbs::new();
    let devices = verbs.devices().expect("devices");
    assert!(
        devices.iter().any(|d| d.name == name),
        "{name} not in {devices:?}"
    );
    let r = rig();
    assert_eq!(r.ctx.device().name, name);
    let attr = r.ctx.query_device().expect("query_device");
    assert!(attr.phys_port_cnt >= 1);
    assert!(attr.max_qp > 0 && attr.max_cqe > 0 && attr.max_qp_wr > 0);
    assert!(attr.num_comp_vectors >= 1);
    let port = r.ctx.query_port(1).expect("query_port");
    assert_eq!(port.state, verbs_api::PortState::Active, "{port:?}");
    assert!(r.gid.to_ipv4().is_some());
    let e = r.ctx.query_port(attr.phys_port_cnt + 1).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
}

#[test]
fn unknown_device_lists_the_real_ones() {
    let name = device();
    let e = HwVerbs::new().open("no_such_dev9").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NoDevice, "{e}");
    assert!(e.message().contains(&name), "{e}");
}

#[test]
fn memory_regions_own_zeroed_memory_and_check_arguments() {
    let r = rig();
    let mr = r.mr(10_000);
    assert_eq!(mr.len(), 10_000);
    assert_eq!(mr.addr() % 4096, 0, "page-aligned");
    let mut buf = [1u8; 16];
    mr.read(9_984, &mut buf).expect("read");
    assert_eq!(buf, [0; 16]);
    mr.write(5, b"hello").expect("write");
    mr.read(5, &mut buf[..5]).expect("read");
    assert_eq!(&buf[..5], b"hello");
    let e = r
        .ctx
        .alloc_mr(&r.pd, 0, AccessFlags::LOCAL_WRITE)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    let e = r
        .ctx
        .alloc_mr(&r.pd, 64, AccessFlags::REMOTE_WRITE)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
}

#[test]
fn rc_send_recv_loopback_with_sgl_and_imm() {
    let r = rig();
    let cq = r.cq(32);
    let (a, b) = (r.qp(QpType::Rc, &cq), r.qp(QpType::Rc, &cq));
    let mr = r.mr(8192);
    let (src, dst) = (0usize, 4096usize);
    mr.write(src, b"0123456789abcdefghij").expect("fill");
    // Receives may be posted from INIT on; a receive into two SGEs.
    bring_up(
        &b,
        QpState::Init,
        &ConnectParams {
            port: r.port,
            ..ConnectParams::default()
        },
    )
    .expect("B to INIT");
    let rsg = [sge(&mr, dst, 8), sge(&mr, dst + 100, 64)];
    // SAFETY: the MR outlives the completion, polled below; no Rust reference to it exists.
    unsafe { b.post_recv(&[RecvWr::new(7, &rsg)]) }.expect("post_recv");
    r.connect(&a, b.qp_num());
    r.connect(&b, a.qp_num());
    let ssg = [sge(&mr, src, 10), sge(&mr, src + 10, 10)];
    let wr = SendWr::send_with_imm(3, &ssg, 0xdead_beef).signaled();
    // SAFETY: as above.
    unsafe { a.post_send(&[wr]) }.expect("post_send");
    let mut wcs = poll_n(&cq, 2);
    wcs.sort_by_key(|w| w.is_recv());
    let (s, rcv) = (wcs[0], wcs[1]);
    assert_eq!(
        (s.wr_id, s.status, s.opcode),
        (3, WcStatus::Success, WcOpcode::Send),
        "{s:?}"
    );
    assert_eq!(s.qp_num, a.qp_num());
    assert_eq!(
        (rcv.wr_id, rcv.status, rcv.opcode, rcv.byte_len),
        (7, WcStatus::Success, WcOpcode::Recv, 20),
        "{rcv:?}"
    );
    assert_eq!(rcv.imm(), Some(0xdead_beef), "imm in host order: {rcv:?}");
    assert_eq!(rcv.qp_num, b.qp_num());
    let mut got = [0u8; 20];
    mr.read(dst, &mut got[..8]).expect("read");
    mr.read(dst + 100, &mut got[8..]).expect("read");
    assert_eq!(&got, b"0123456789abcdefghij");
    assert_eq!(a.state().expect("state"), QpState::Rts);
}

#[test]
fn rdma_write_and_read_loopback() {
    let r = rig();
    let cq = r.cq(32);
    let (a, b) = (r.qp(QpType::Rc, &cq), r.qp(QpType::Rc, &cq));
    r.connect(&a, b.qp_num());
    r.connect(&b, a.qp_num());
    let local = r.mr(4096);
    let remote = r.mr(4096);
    local.write(0, b"written by RDMA").expect("fill");
    let s = [sge(&local, 0, 15)];
    let wr = SendWr::rdma_write(1, &s, remote.addr() + 64, remote.rkey()).signaled();
    // SAFETY: both MRs outlive the completions polled below.
    unsafe { a.post_send(&[wr]) }.expect("write");
    let w = poll_n(&cq, 1)[0];
    assert_eq!(
        (w.wr_id, w.status, w.opcode),
        (1, WcStatus::Success, WcOpcode::RdmaWrite)
    );
    let mut got = [0u8; 15];
    remote.read(64, &mut got).expect("read");
    assert_eq!(&got, b"written by RDMA");
    let s = [sge(&local, 1000, 15)];
    let wr = SendWr::rdma_read(2, &s, remote.addr() + 64, remote.rkey()).signaled();
    // SAFETY: as above.
    unsafe { a.post_send(&[wr]) }.expect("read");
    let w = poll_n(&cq, 1)[0];
    assert_eq!(
        (w.wr_id, w.status, w.opcode, w.byte_len),
        (2, WcStatus::Success, WcOpcode::RdmaRead, 15)
    );
    local.read(1000, &mut got).expect("read");
    assert_eq!(&got, b"written by RDMA");
}

#[test]
fn ud_send_recv_with_the_40_byte_grh() {
    let r = rig();
    let cq = r.cq(32);
    let (a, b) = (r.ud(&cq), r.ud(&cq));
    let mr = r.mr(8192);
    let payload = b"a UD datagram over rxe";
    mr.write(0, payload).expect("fill");
    let rsg = [sge(&mr, 4096, (GRH_LEN + 256) as u32)];
    // SAFETY: the MR outlives the completion polled below.
    unsafe { b.post_recv(&[RecvWr::new(11, &rsg)]) }.expect("post_recv");
    let ah = r.ctx.create_ah(&r.pd, &r.av()).expect("create_ah");
    let ssg = [sge(&mr, 0, payload.len() as u32)];
    let wr = SendWr::ud_send(12, &ssg, &ah, b.qp_num(), QKEY).signaled();
    // SAFETY: the MR and AH outlive the completion polled below.
    unsafe { a.post_send(&[wr]) }.expect("post_send");
    let mut wcs = poll_n(&cq, 2);
    wcs.sort_by_key(|w| w.is_recv());
    let (s, rcv) = (wcs[0], wcs[1]);
    assert_eq!(
        (s.wr_id, s.status, s.opcode),
        (12, WcStatus::Success, WcOpcode::Send),
        "{s:?}"
    );
    assert_eq!(
        (rcv.wr_id, rcv.status, rcv.opcode),
        (11, WcStatus::Success, WcOpcode::Recv),
        "{rcv:?}"
    );
    assert_eq!(rcv.byte_len as usize, GRH_LEN + payload.len(), "{rcv:?}");
    assert!(rcv.wc_flags.contains(WcFlags::GRH), "{rcv:?}");
    assert_eq!(rcv.src_qp, a.qp_num());
    let mut got = vec![0u8; payload.len()];
    mr.read(4096 + GRH_LEN, &mut got).expect("read");
    assert_eq!(&got, payload);
    // RoCEv2 over IPv4: the last 20 bytes of the GRH hold the IPv4 header.
    let mut ip = [0u8; 20];
    mr.read(4096 + 20, &mut ip).expect("read");
    assert_eq!(ip[0] >> 4, 4, "IPv4 header in the GRH: {ip:?}");
    assert_eq!(&ip[16..20], &r.gid.to_ipv4().expect("v4").octets());
}

#[test]
fn ud_multicast_attach_send_detach() {
    let r = rig();
    let cq = r.cq(32);
    let (a, b, c) = (r.ud(&cq), r.ud(&cq), r.ud(&cq));
    let group = Gid::from_ipv4(std::net::Ipv4Addr::new(239, 77, 0, 9));
    b.attach_mcast(&group, 0).expect("attach b");
    c.attach_mcast(&group, 0).expect("attach c");
    c.attach_mcast(&group, 0)
        .expect("attaching twice is not an error");
    let mr = r.mr(8192);
    mr.write(0, b"to the group").expect("fill");
    let rb = [sge(&mr, 1024, 512)];
    let rc = [sge(&mr, 2048, 512)];
    // SAFETY: the MR outlives the completions polled below.
    unsafe {
        b.post_recv(&[RecvWr::new(21, &rb)]).expect("recv b");
        c.post_recv(&[RecvWr::new(22, &rc)]).expect("recv c");
    }
    let mut av = r.av();
    av.grh.dgid = group;
    let ah = r.ctx.create_ah(&r.pd, &av).expect("create_ah to the group");
    let ssg = [sge(&mr, 0, 12)];
    let wr = SendWr::ud_send(20, &ssg, &ah, MULTICAST_QPN, QKEY).signaled();
    // SAFETY: the MR and AH outlive the completions polled below.
    unsafe { a.post_send(&[wr]) }.expect("post_send");
    let wcs = poll_n(&cq, 3);
    let mut ids: Vec<u64> = wcs.iter().map(|w| w.wr_id).collect();
    ids.sort_unstable();
    assert_eq!(ids, [20, 21, 22], "{wcs:?}");
    assert!(wcs.iter().all(|w| w.status == WcStatus::Success), "{wcs:?}");
    b.detach_mcast(&group, 0).expect("detach b");
    // Detaching again is the kernel's refusal (EINVAL), as is a unicast GID.
    let e = b.detach_mcast(&group, 0).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    let e = a
        .attach_mcast(&Gid::from_ipv4(std::net::Ipv4Addr::new(10, 0, 0, 1)), 0)
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    // c is dropped while still attached: Drop detaches before destroying.
}

#[test]
fn invalid_transition_is_rejected_before_the_kernel() {
    let r = rig();
    let cq = r.cq(8);
    let qp = r.qp(QpType::Rc, &cq);
    let e = qp
        .modify_with(&QpModify::to(QpState::Rts).sq_psn(0))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidState, "{e}");
    assert!(
        e.message().contains("cannot move from RESET to RTS"),
        "rejected by verbs-api's state table, not the kernel: {e}"
    );
    assert_eq!(qp.state().expect("state"), QpState::Reset);
    // A missing required attribute: RESET -> INIT without PORT.
    let e = qp
        .modify(
            &QpAttr {
                qp_state: QpState::Init,
                ..QpAttr::default()
            },
            QpAttrMask::STATE | QpAttrMask::PKEY_INDEX | QpAttrMask::ACCESS_FLAGS,
        )
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    // Posting in RESET is refused with InvalidState.
    let mr = r.mr(64);
    let s = [sge(&mr, 0, 8)];
    // SAFETY: the post is refused; nothing is handed to the device.
    let e = unsafe { qp.post_recv(&[RecvWr::new(1, &s)]) }.unwrap_err();
    assert_eq!(
        (e.kind(), e.bad_wr()),
        (ErrorKind::InvalidState, Some(0)),
        "{e}"
    );
    // SAFETY: as above.
    let e = unsafe { qp.post_send(&[SendWr::send(1, &s)]) }.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidState, "{e}");
}

#[test]
fn error_state_flushes_outstanding_receives() {
    let r = rig();
    let cq = r.cq(8);
    let qp = r.qp(QpType::Rc, &cq);
    bring_up(
        &qp,
        QpState::Init,
        &ConnectParams {
            port: r.port,
            ..ConnectParams::default()
        },
    )
    .expect("INIT");
    let mr = r.mr(256);
    let s = [sge(&mr, 0, 64)];
    // SAFETY: the MR outlives the flushed completions polled below.
    unsafe { qp.post_recv(&[RecvWr::new(5, &s), RecvWr::new(6, &s)]) }.expect("post_recv");
    qp.modify_with(&QpModify::to(QpState::Err)).expect("to ERR");
    let wcs = poll_n(&cq, 2);
    assert_eq!(
        wcs.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        [(5, WcStatus::WrFlushErr), (6, WcStatus::WrFlushErr)]
    );
    assert_eq!(qp.state().expect("state"), QpState::Err);
}

#[test]
fn cq_events_arm_wait_ack_and_time_out() {
    let r = rig();
    let ch = r.ctx.create_comp_channel().expect("channel");
    let cq = r.ctx.create_cq(16, Some(&ch), 0).expect("create_cq");
    let (a, b) = (r.ud(&cq), r.ud(&cq));
    let none = ch
        .get_cq_event(Some(Duration::from_millis(50)))
        .expect("wait");
    assert_eq!(none, None, "no event before arming");
    cq.req_notify(false).expect("arm");
    let mr = r.mr(4096);
    let rs = [sge(&mr, 1024, 512)];
    // SAFETY: the MR outlives the completions polled below.
    unsafe { b.post_recv(&[RecvWr::new(1, &rs)]) }.expect("recv");
    let ah = r.ctx.create_ah(&r.pd, &r.av()).expect("ah");
    let ss = [sge(&mr, 0, 8)];
    // SAFETY: as above.
    unsafe { a.post_send(&[SendWr::ud_send(2, &ss, &ah, b.qp_num(), QKEY).signaled()]) }
        .expect("send");
    let ev = ch.get_cq_event(Some(DEADLINE)).expect("wait");
    assert_eq!(ev, Some(cq.handle()));
    cq.ack_events(1);
    poll_n(&cq, 2);
    assert_eq!(ch.get_cq_event(Some(Duration::ZERO)).expect("wait"), None);
    // A CQ with no channel may be armed: the kernel accepts it (no event can come).
    let plain = r.cq(4);
    plain.req_notify(false).expect("arm a CQ without a channel");
    // An event got but not acked: dropping the CQ acks it (ibv_destroy_cq would hang).
    cq.req_notify(false).expect("arm");
    // SAFETY: as above.
    unsafe { b.post_recv(&[RecvWr::new(3, &rs)]) }.expect("recv");
    // SAFETY: as above.
    unsafe { a.post_send(&[SendWr::ud_send(4, &ss, &ah, b.qp_num(), QKEY).signaled()]) }
        .expect("send");
    assert_eq!(
        ch.get_cq_event(Some(DEADLINE)).expect("wait"),
        Some(cq.handle())
    );
    drop((a, b));
    drop(cq);
}

#[test]
fn raw_packet_and_flow_steering_need_the_device_caps() {
    let r = rig();
    let attr = r.ctx.query_device().expect("query_device");
    let cq = r.cq(8);
    let has_flows = attr
        .device_cap_flags
        .contains(DeviceCapFlags::MANAGED_FLOW_STEERING);
    let raw = r.ctx.create_qp(
        &r.pd,
        &QpInitAttr::new(QpType::RawPacket, &cq, QpCap::new(4, 4, 1, 1)),
    );
    if attr.max_raw_ethy_qp == 0 && attr.raw_packet_caps.is_empty() && !has_flows {
        let e = raw.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
        assert!(e.message().contains("RAW_PACKET"), "{e}");
    } else if let Err(e) = raw {
        // A NIC with raw QPs: only a missing CAP_NET_RAW may refuse it.
        assert_eq!(e.kind(), ErrorKind::PermissionDenied, "{e}");
    }
    let qp = r.ud(&cq);
    let rule = FlowAttr::udp_endpoint(
        1,
        verbs_api::ipv4_multicast_mac(std::net::Ipv4Addr::new(239, 1, 2, 3)),
        std::net::Ipv4Addr::new(239, 1, 2, 3),
        7148,
    );
    if !has_flows {
        let e = r.ctx.create_flow(&qp, &rule).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
        assert!(e.message().contains("flow steering"), "{e}");
    }
}

#[test]
fn async_events_poll_without_blocking() {
    let r = rig();
    let start = Instant::now();
    // Nothing happened on this fresh context (port events may be pending; drain them).
    while r
        .ctx
        .poll_async_event()
        .expect("poll_async_event")
        .is_some()
    {}
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "polling must not block"
    );
}

#[test]
fn srq_feeds_several_qps_and_raises_the_limit_event() {
    use verbs_api::{
        EventElement, EventType, SharedReceiveQueue, SrqAttr, SrqAttrMask, SrqInitAttr,
    };
    let r = rig();
    let cq = r.cq(64);
    let srq = r
        .ctx
        .create_srq(&r.pd, &SrqInitAttr::new(16, 1))
        .expect("create_srq");
    let on_srq = |t: QpType| {
        let mut init = QpInitAttr::new(t, &cq, QpCap::new(8, 0, 1, 1));
        init.srq = Some(&srq);
        r.ctx.create_qp(&r.pd, &init).expect("create_qp on SRQ")
    };
    let (b1, b2) = (on_srq(QpType::Ud), on_srq(QpType::Ud));
    for qp in [&b1, &b2] {
        bring_up(
            qp,
            QpState::Rts,
            &ConnectParams {
                port: r.port,
                qkey: QKEY,
                ..ConnectParams::default()
            },
        )
        .expect("bring up");
    }
    let a = r.ud(&cq);
    let mr = r.mr(16 * 1024);
    let recv: Vec<[Sge; 1]> = (0..4).map(|i| [sge(&mr, 1024 * (i + 1), 512)]).collect();
    let wrs: Vec<RecvWr<'_>> = recv
        .iter()
        .enumerate()
        .map(|(i, s)| RecvWr::new(100 + i as u64, s))
        .collect();
    // SAFETY: the MR outlives every completion polled below.
    unsafe { srq.post_recv(&wrs) }.expect("post_srq_recv");
    // SAFETY: refused by the provider (the QP has no receive queue of its own).
    let e = unsafe { b1.post_recv(&wrs[..1]) }.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    srq.modify(
        &SrqAttr {
            srq_limit: 2,
            ..SrqAttr::default()
        },
        SrqAttrMask::LIMIT,
    )
    .expect("arm the limit");
    assert_eq!(srq.query().expect("query_srq").srq_limit, 2);
    while r.ctx.poll_async_event().expect("drain").is_some() {}
    let ah = r.ctx.create_ah(&r.pd, &r.av()).expect("ah");
    let s = [sge(&mr, 0, 32)];
    for (i, dst) in [&b1, &b2, &b1].into_iter().enumerate() {
        let wr = SendWr::ud_send(i as u64, &s, &ah, dst.qp_num(), QKEY).signaled();
        // SAFETY: the MR and AH outlive the completions polled below.
        unsafe { a.post_send(&[wr]) }.expect("send");
    }
    let wcs = poll_n(&cq, 6);
    let recvs: Vec<_> = wcs.iter().filter(|w| w.is_recv()).collect();
    assert_eq!(recvs.len(), 3, "{wcs:?}");
    assert!(
        recvs.iter().all(|w| w.status == WcStatus::Success),
        "{wcs:?}"
    );
    let mut ids: Vec<u64> = recvs.iter().map(|w| w.wr_id).collect();
    ids.sort_unstable();
    assert_eq!(ids, [100, 101, 102], "the SRQ's receives in order");
    let start = Instant::now();
    let ev = loop {
        if let Some(ev) = r.ctx.poll_async_event().expect("poll_async_event") {
            if ev.event_type == EventType::SrqLimitReached {
                break ev;
            }
        }
        assert!(start.elapsed() < DEADLINE, "no SRQ limit event");
        std::thread::sleep(Duration::from_millis(1));
    };
    assert_eq!(ev.element, EventElement::Srq(srq.handle()));
}

#[test]
fn inline_sends_up_to_the_probed_limit() {
    let r = rig();
    let attr = r.ctx.query_device().expect("query_device");
    assert!(
        attr.max_inline_data >= 64,
        "probed max_inline_data {}",
        attr.max_inline_data
    );
    let cq = r.cq(16);
    let cap = QpCap::new(4, 4, 1, 1).with_inline(64);
    let mk = || {
        r.ctx
            .create_qp(&r.pd, &QpInitAttr::new(QpType::Rc, &cq, cap))
            .expect("create_qp")
    };
    let (a, b) = (mk(), mk());
    assert!(a.cap().max_inline_data >= 64);
    r.connect(&a, b.qp_num());
    r.connect(&b, a.qp_num());
    let mr = r.mr(4096);
    let rs = [sge(&mr, 2048, 128)];
    // SAFETY: the MR outlives the completions polled below.
    unsafe { b.post_recv(&[RecvWr::new(1, &rs)]) }.expect("recv");
    // Inline data is copied at post time: the source need not be registered.
    let data = *b"inline data needs no registered memory..........................";
    let src = [Sge {
        addr: data.as_ptr() as u64,
        length: 64,
        lkey: 0,
    }];
    let wr = SendWr::send(2, &src)
        .flags(verbs_api::SendFlags::INLINE)
        .signaled();
    // SAFETY: INLINE: the device copies `data` during the call.
    unsafe { a.post_send(&[wr]) }.expect("inline send");
    let wcs = poll_n(&cq, 2);
    assert!(wcs.iter().all(|w| w.status == WcStatus::Success), "{wcs:?}");
    let mut got = [0u8; 64];
    mr.read(2048, &mut got).expect("read");
    assert_eq!(got, data);
    let big = vec![0u8; a.cap().max_inline_data as usize + 1];
    let src = [Sge {
        addr: big.as_ptr() as u64,
        length: big.len() as u32,
        lkey: 0,
    }];
    let wr = SendWr::send(3, &src).flags(verbs_api::SendFlags::INLINE);
    // SAFETY: refused by the provider (rdma-core's rxe `validate_send_wr`).
    let e = unsafe { a.post_send(&[wr]) }.unwrap_err();
    assert_eq!(
        (e.kind(), e.bad_wr()),
        (ErrorKind::InvalidArgument, Some(0)),
        "{e}"
    );
}

#[test]
fn resources_keep_what_they_use_alive_whatever_the_drop_order() {
    let Rig { pd, ctx, .. } = rig();
    let ch = ctx.create_comp_channel().expect("channel");
    let cq = ctx.create_cq(8, Some(&ch), 0).expect("cq");
    let qp = ctx
        .create_qp(
            &pd,
            &QpInitAttr::new(QpType::Ud, &cq, QpCap::new(2, 2, 1, 1)),
        )
        .expect("qp");
    let mr = ctx
        .alloc_mr(&pd, 4096, AccessFlags::LOCAL_WRITE)
        .expect("mr");
    // Drop the handles the QP and MR depend on first: they stay alive underneath.
    drop((ch, cq, pd, ctx));
    qp.modify_with(&QpModify::to(QpState::Init).pkey_index(0).port(1).qkey(QKEY))
        .expect("the QP still works");
    let s = [sge(&mr, 0, 64)];
    // SAFETY: the MR outlives the QP (dropped after it below, and the post is flushed
    // when the QP is destroyed).
    unsafe { qp.post_recv(&[RecvWr::new(1, &s)]) }.expect("post_recv");
    assert_eq!(qp.state().expect("state"), QpState::Init);
    drop(qp);
    drop(mr);
}
