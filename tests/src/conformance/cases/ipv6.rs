//! RoCEv2 over IPv6: rxe's GID 0 is its port's link-local IPv6 address, a RoCE v2 GID
//! (`ibv_devinfo -v` in the Soft-RoCE VM: `GID[0] fe80::…, RoCE v2`), what `-g 0` in
//! rdma-core's tools uses.

use super::prelude::*;

/// The port's GID 0 and that it is link-local IPv6.
fn link_local_gid<C: Context>(rig: &Rig<C>) -> Gid {
    let g = rig.ctx.query_gid(rig.port, 0).expect("query_gid 0");
    assert_eq!(
        g.0[..8],
        [0xfe, 0x80, 0, 0, 0, 0, 0, 0],
        "GID 0 is link-local: {g:?}"
    );
    assert!(g.to_ipv4().is_none());
    g
}

/// An address vector to this port's GID 0 from GID 0, hop limit 1 (as the pingpongs ask).
fn av_on_gid0<C: Context>(rig: &Rig<C>, gid: Gid) -> verbs_api::AhAttr {
    let mut av = verbs_api::AhAttr::roce(gid, 0, rig.port);
    av.grh.hop_limit = 1;
    av
}

/// RC and UD over the link-local GID 0: an RC SEND arrives, and a UD receive's GRH is the
/// IPv6 header itself: version 6, the source and destination GIDs, and hop limit 64,
/// the route's, not the 1 the address vector asked for (the kernel resolves a RoCE v2
/// unicast address through the IP route: `ib_resolve_unicast_gid_dmac`).
pub fn rc_and_ud_over_the_link_local_gid<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let gid = link_local_gid(&rig);
    let c = rig.cq(32);
    let a = rig.qp(QpType::Rc, &c.cq, 64);
    let b = rig.qp(QpType::Rc, &c.cq, 64);
    let params = |remote: u32| {
        let mut p = rig.connect_params(remote, AccessFlags::LOCAL_WRITE);
        if let Some(r) = p.remote.as_mut() {
            r.av = av_on_gid0(&rig, gid);
        }
        p
    };
    verbs_api::helpers::bring_up(&a, QpState::Rts, &params(b.qp_num())).expect("bring up a");
    verbs_api::helpers::bring_up(&b, QpState::Rts, &params(a.qp_num())).expect("bring up b");
    let mr = rig.mr(8192, AccessFlags::empty());
    fill(&mr, 0, b"over IPv6");
    post_recv(&b, 7, &[sge(&mr, 4096, 64)]);
    post_send(&a, SendWr::send(1, &[sge(&mr, 0, 9)]).signaled());
    let wcs = poll_n(&c.cq, 2);
    let recv = wcs.iter().find(|w| w.is_recv()).expect("a receive");
    expect_wc(recv, 7, WcStatus::Success, Some(WcOpcode::Recv));
    assert_eq!(recv.byte_len, 9);
    assert_eq!(read(&mr, 4096, 9), b"over IPv6");
    let send = wcs.iter().find(|w| !w.is_recv()).expect("a send");
    expect_wc(send, 1, WcStatus::Success, Some(WcOpcode::Send));

    let ua = rig.ud_qp(&c.cq, QKEY);
    let ub = rig.ud_qp(&c.cq, QKEY);
    let ah = rig
        .ctx
        .create_ah(&rig.pd, &av_on_gid0(&rig, gid))
        .expect("create_ah on GID 0");
    post_recv(&ub, 8, &[sge(&mr, 4096, (GRH_LEN + 64) as u32)]);
    post_send(&ua, ud_send(2, &[sge(&mr, 0, 9)], &ah, ub.qp_num()));
    let wcs = poll_n(&c.cq, 2);
    let recv = wcs.iter().find(|w| w.is_recv()).expect("a receive");
    expect_wc(recv, 8, WcStatus::Success, Some(WcOpcode::Recv));
    assert_eq!(recv.byte_len as usize, GRH_LEN + 9);
    assert!(recv.wc_flags.contains(WcFlags::GRH));
    let grh = read(&mr, 4096, GRH_LEN);
    assert_eq!(
        grh[0] >> 4,
        6,
        "RoCEv2 over IPv6: the GRH is the IPv6 header: {grh:02x?}"
    );
    assert_eq!(grh[6], 17, "next header UDP");
    assert_eq!(grh[7], 64, "the route's hop limit");
    assert_eq!(grh[8..24], gid.0, "source GID");
    assert_eq!(grh[24..40], gid.0, "destination GID");
    assert_eq!(read(&mr, 4096 + GRH_LEN, 9), b"over IPv6");
}
