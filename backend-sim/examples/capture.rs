//! Writes a pcap of a short simulated session — a RAW_PACKET UDP frame, a UD send, an RC
//! SEND of three packets with its ACKs, an RDMA WRITE and an RDMA READ — for Wireshark or
//! tshark. Run: `cargo run -p backend-sim --example capture -- OUT.pcap`.

use backend_sim::frame::eth::Mac;
use backend_sim::frame::UdpFrameSpec;
use backend_sim::{CaptureFilter, Personality, Sim};
use std::net::Ipv4Addr;
use verbs_api::helpers::{bring_up, ConnectParams, RemoteQp};
use verbs_api::{
    AccessFlags, AhAttr, Context, FlowAttr, Gid, MemoryRegion, QpCap, QpInitAttr, QpModify,
    QpState, QpType, QueuePair, QueuePairExt, RecvWr, SendFlags, SendWr, Sge, Verbs,
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = std::env::args().nth(1).unwrap_or_else(|| "sim.pcap".into());
    let sim = Sim::new(1);
    let ips = [Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2)];
    let hosts = [
        sim.add_host("a", ips[0], Personality::Mlx5)?,
        sim.add_host("b", ips[1], Personality::Mlx5)?,
    ];
    sim.with_fabric(|f| f.capture_to_file(&out, CaptureFilter::All))?;
    let ctx: Vec<_> = hosts
        .iter()
        .map(|&h| sim.verbs(h).open("mlx5_0"))
        .collect::<Result<_, _>>()?;
    let pd: Vec<_> = ctx.iter().map(|c| c.alloc_pd()).collect::<Result<_, _>>()?;
    let cq: Vec<_> = ctx
        .iter()
        .map(|c| c.create_cq(64, None, 0))
        .collect::<Result<_, _>>()?;
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ;
    let mr: Vec<_> = (0..2)
        .map(|i| ctx[i].alloc_mr(&pd[i], 1 << 16, access))
        .collect::<Result<_, _>>()?;
    let cap = QpCap::new(16, 16, 1, 1);
    let qp = |i: usize, t: QpType| ctx[i].create_qp(&pd[i], &QpInitAttr::new(t, &cq[i], cap));
    let sge = |i: usize, off: u64, len: u32| Sge {
        addr: mr[i].addr() + off,
        length: len,
        lkey: mr[i].lkey(),
    };

    // RAW_PACKET: a UDP frame steered by a flow rule.
    let (ra, rb) = (qp(0, QpType::RawPacket)?, qp(1, QpType::RawPacket)?);
    for q in [&ra, &rb] {
        q.modify_with(&QpModify::to(QpState::Init).port(1))?;
        q.modify_with(&QpModify::to(QpState::Rtr))?;
        q.modify_with(&QpModify::to(QpState::Rts))?;
    }
    let bmac = Mac([2, 0, 10, 0, 0, 2]);
    let _flow = ctx[1].create_flow(&rb, &FlowAttr::udp_endpoint(1, bmac.0, ips[1], 7148))?;
    let frame = UdpFrameSpec::new(
        Mac([2, 0, 10, 0, 0, 1]),
        bmac,
        (ips[0], 7148),
        (ips[1], 7148),
    )
    .build(b"a RAW_PACKET UDP frame");
    mr[0].write(0, &frame)?;
    // SAFETY: every SGE lies in `mr`, which outlives the session.
    unsafe {
        rb.post_recv(&[RecvWr::new(0, &[sge(1, 0, 9000)])])?;
        ra.post_send(&[
            SendWr::send(0, &[sge(0, 0, frame.len() as u32)]).flags(SendFlags::IP_CSUM)
        ])?;
    }

    // UD send.
    let (ua, ub) = (qp(0, QpType::Ud)?, qp(1, QpType::Ud)?);
    for q in [&ua, &ub] {
        q.modify_with(
            &QpModify::to(QpState::Init)
                .port(1)
                .pkey_index(0)
                .qkey(0x1111_1111),
        )?;
        q.modify_with(&QpModify::to(QpState::Rtr))?;
        q.modify_with(&QpModify::to(QpState::Rts).sq_psn(0))?;
    }
    let ah = ctx[0].create_ah(&pd[0], &AhAttr::roce(Gid::from_ipv4(ips[1]), 1, 1))?;
    // SAFETY: every SGE lies in `mr`, which outlives the session.
    unsafe {
        ub.post_recv(&[RecvWr::new(1, &[sge(1, 9000, 9000)])])?;
        ua.post_send(&[SendWr::ud_send(
            1,
            &[sge(0, 0, 64)],
            &ah,
            ub.qp_num(),
            0x1111_1111,
        )])?;
    }

    // RC: SEND (3 packets at MTU 1024), RDMA WRITE, RDMA READ.
    let (ca, cb) = (qp(0, QpType::Rc)?, qp(1, QpType::Rc)?);
    for (q, peer, pq) in [(&ca, ips[1], cb.qp_num()), (&cb, ips[0], ca.qp_num())] {
        let params = ConnectParams {
            access,
            remote: Some(RemoteQp {
                qpn: pq,
                psn: 0,
                av: AhAttr::roce(Gid::from_ipv4(peer), 1, 1),
            }),
            min_rnr_timer: 1,
            ..ConnectParams::default()
        };
        bring_up(q, QpState::Rts, &params)?;
    }
    // SAFETY: every SGE lies in `mr`, which outlives the session.
    unsafe {
        cb.post_recv(&[RecvWr::new(2, &[sge(1, 20000, 9000)])])?;
        ca.post_send(&[SendWr::send(2, &[sge(0, 0, 3000)])])?;
        ca.post_send(&[SendWr::rdma_write(
            3,
            &[sge(0, 0, 256)],
            mr[1].addr() + 40000,
            mr[1].rkey(),
        )])?;
        ca.post_send(&[SendWr::rdma_read(
            4,
            &[sge(0, 4096, 256)],
            mr[1].addr() + 40000,
            mr[1].rkey(),
        )
        .signaled()])?;
    }
    sim.run_until_idle();
    sim.with_fabric(|f| f.finish_capture())?;
    println!("wrote {out}");
    Ok(())
}
