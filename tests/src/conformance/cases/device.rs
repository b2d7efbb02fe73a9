//! Device, port and GID queries and the device limits.

use super::prelude::*;

/// Device, port and GID queries.
pub fn device_and_port_queries<V: Verbs>(env: &Env<V>) {
    let devices = env.verbs.devices().expect("devices");
    assert!(
        devices.iter().any(|d| d.name == env.device),
        "{} not in {devices:?}",
        env.device
    );
    let rig = open(env);
    assert_eq!(rig.ctx.device().name, env.device);
    let a = &rig.attr;
    assert!(
        a.max_qp_wr > 0 && a.max_cqe > 0 && a.max_sge > 0 && a.max_mr_size > 0,
        "{a:?}"
    );
    assert!(a.phys_port_cnt >= 1);
    let p = rig.ctx.query_port(rig.port).expect("query_port");
    assert_eq!(p.state, verbs_api::PortState::Active);
    assert_eq!(p.link_layer, verbs_api::LinkLayer::Ethernet);
    assert!(p.gid_tbl_len > 0);
    let g = rig
        .ctx
        .query_gid(rig.port, u32::from(rig.gid_index))
        .expect("query_gid");
    assert_eq!(g, rig.gid);
    assert!(g.to_ipv4().is_some());
    let e = rig
        .ctx
        .query_port(a.phys_port_cnt + 1)
        .expect_err("a port past the last");
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
}

/// The limits rxe reports (Linux 6.1, `rxe_param.h`), checked on the rxe personality and
/// on Soft-RoCE; other devices report their own.
pub fn device_limits<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let a = &rig.attr;
    let p = rig.ctx.query_port(rig.port).expect("query_port");
    let mut log = Log::new();
    log.line(format!(
        "qp_wr {:#x} sge {} sge_rd {} cqe {:#x} srq_wr {:#x} srq_sge {}",
        a.max_qp_wr, a.max_sge, a.max_sge_rd, a.max_cqe, a.max_srq_wr, a.max_srq_sge
    ));
    log.line(format!(
        "qp_rd_atom {} qp_init_rd_atom {} atomic {:?} mcast_grp {} mcast_qp_attach {}",
        a.max_qp_rd_atom,
        a.max_qp_init_rd_atom,
        a.atomic_cap,
        a.max_mcast_grp,
        a.max_mcast_qp_attach
    ));
    log.line(format!(
        "port: gid_tbl_len {} max_msg_sz {:#x} active_mtu {:?} max_mtu {:?}",
        p.gid_tbl_len, p.max_msg_sz, p.active_mtu, p.max_mtu
    ));
    log.check(&[
        "qp_wr 0x100000 sge 32 sge_rd 32 cqe 0x7fff srq_wr 0x100000 srq_sge 27",
        "qp_rd_atom 128 qp_init_rd_atom 128 atomic Hca mcast_grp 8192 mcast_qp_attach 56",
        "port: gid_tbl_len 1024 max_msg_sz 0x800000 active_mtu Mtu1024 max_mtu Mtu4096",
    ]);
}

/// Port 0 does not exist; nor does a GID index past the table.
pub fn query_port_and_gid_out_of_range<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    log.result("query_port 0", &rig.ctx.query_port(0));
    let len = rig
        .ctx
        .query_port(rig.port)
        .expect("query_port")
        .gid_tbl_len;
    log.result(
        "query_gid past the table",
        &rig.ctx.query_gid(rig.port, len),
    );
    log.result("query_gid port 2", &rig.ctx.query_gid(2, 0));
    log.check(&[
        "query_port 0: InvalidArgument",
        "query_gid past the table: InvalidArgument",
        "query_gid port 2: InvalidArgument",
    ]);
}

/// Opening a device that does not exist names the problem.
pub fn open_unknown_device<V: Verbs>(env: &Env<V>) {
    let mut log = Log::new();
    log.result("open", &env.verbs.open("nodev9"));
    log.check(&["open: NoDevice"]);
}

/// The device list names the device with its node and transport type (RoCE: an IB CA
/// over the InfiniBand transport), and its GUID matches the attributes' node GUID.
pub fn device_list_entry<V: Verbs>(env: &Env<V>) {
    let mut log = Log::new();
    let devices = env.verbs.devices().expect("devices");
    let d = devices
        .iter()
        .find(|d| d.name == env.device)
        .expect("the device is listed");
    log.line(format!("{:?} {:?}", d.node_type, d.transport_type));
    let rig = open(env);
    log.line(format!("guid matches: {}", rig.attr.node_guid == d.guid));
    log.line(format!("ports {}", rig.attr.phys_port_cnt));
    log.check(&["Ca Ib", "guid matches: true", "ports 1"]);
}

/// rxe has no RAW_PACKET QPs and no flow steering: both are refused as unsupported (its
/// refusals of work queues and indirection tables are checked by the cases of
/// [`super::wq`], which check what mlx5 does with them).
pub fn raw_packet_and_flow_steering_unsupported<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let c = rig.cq(8);
    let mut log = Log::new();
    let cap = cap(8, 8, 1, 1, 0);
    log.result(
        "RAW_PACKET QP",
        &rig.ctx.create_qp(
            &rig.pd,
            &verbs_api::QpInitAttr::new(QpType::RawPacket, &c.cq, cap),
        ),
    );
    let u = rig.ud_qp(&c.cq, QKEY);
    let rule = verbs_api::FlowAttr::udp_endpoint(
        rig.port,
        [1, 0, 94, 0, 0, 1],
        Ipv4Addr::new(239, 77, 0, 1),
        7148,
    );
    log.result("flow", &rig.ctx.create_flow(&u, &rule));
    log.check(&["RAW_PACKET QP: Unsupported", "flow: Unsupported"]);
}

/// Address handles keep their attributes; one whose source GID index names an empty
/// entry of the GID table is refused with ENODATA (the provider looks that GID up
/// first), while ibv_query_gid reads such an entry as the zero GID.
pub fn address_handles<V: Verbs>(env: &Env<V>) {
    let rig = open(env);
    let mut log = Log::new();
    let av = rig.self_av();
    let ah = rig.ctx.create_ah(&rig.pd, &av).expect("ah");
    log.line(format!(
        "unicast attr kept: {}",
        verbs_api::AddressHandle::attr(&ah) == av
    ));
    let mut bad = av;
    bad.grh.sgid_index = 255;
    let r = rig.ctx.create_ah(&rig.pd, &bad);
    log.result("sgid index 255", &r);
    log.line(format!("errno {:?}", r.err().and_then(|e| e.errno())));
    let g = rig.ctx.query_gid(rig.port, 255).expect("query_gid 255");
    log.line(format!("GID 255 is zero: {}", g == Gid::default()));
    log.check(&[
        "unicast attr kept: true",
        "sgid index 255: Io",
        "errno Some(61)",
        "GID 255 is zero: true",
    ]);
}
