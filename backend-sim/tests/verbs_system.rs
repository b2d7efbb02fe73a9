//! Whole-system properties: determinism (trace hash), scale (1,000 hosts, 10,000 QPs),
//! a pcap that tshark decodes, and a recorded pcap replayed into a RAW receiver.

mod common;
use backend_sim::frame::eth::Mac;
use backend_sim::frame::UdpFrameSpec;
use backend_sim::pcap::PcapFile;
use backend_sim::{FaultPlan, LinkFaults, Personality, ReplayOptions, Sim};
use common::*;
use std::net::Ipv4Addr;
use verbs_api::{
    AccessFlags, AhAttr, Context, FlowAttr, Gid, MemoryRegion, Mtu, QpInitAttr, QpModify, QpState,
    QpType, QueuePair, QueuePairExt, SendFlags, SendWr, Verbs,
};

fn rc_pair(
    a: &Node,
    b: &Node,
    ia: u8,
    ib: u8,
) -> (backend_sim::verbs::SimQp, backend_sim::verbs::SimQp) {
    let mk = |n: &Node| {
        n.ctx
            .create_qp(&n.pd, &QpInitAttr::new(QpType::Rc, &n.cq, cap()))
            .unwrap()
    };
    let (qa, qb) = (mk(a), mk(b));
    let access = AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE | AccessFlags::REMOTE_READ;
    for (q, peer, pq) in [(&qa, ia, qb.qp_num()), (&qb, ib, qa.qp_num())] {
        q.modify_with(
            &QpModify::to(QpState::Init)
                .port(1)
                .pkey_index(0)
                .access(access),
        )
        .unwrap();
        q.modify_with(
            &QpModify::to(QpState::Rtr)
                .av(AhAttr::roce(Gid::from_ipv4(ip(peer)), 1, 1))
                .path_mtu(Mtu::Mtu1024)
                .dest_qpn(pq)
                .rq_psn(0)
                .max_dest_rd_atomic(4)
                .min_rnr_timer(1),
        )
        .unwrap();
        q.modify_with(
            &QpModify::to(QpState::Rts)
                .sq_psn(0)
                .timeout(12)
                .retry_cnt(7)
                .rnr_retry(7)
                .max_rd_atomic(4),
        )
        .unwrap();
    }
    (qa, qb)
}

/// RC both ways, UD multicast and RAW traffic over a lossy, duplicating, reordering
/// fabric; returns the trace hash and how many completions there were.
fn busy_workload(seed: u64) -> (u64, usize) {
    let sim = Sim::new(seed);
    let a = node(&sim, 1, Personality::Mlx5);
    let b = node(&sim, 2, Personality::Mlx5);
    let c = node(&sim, 3, Personality::Rxe);
    sim.with_fabric(|f| {
        f.set_faults(FaultPlan {
            default_link: LinkFaults {
                loss: 0.05,
                duplicate: 0.05,
                reorder: 0.1,
                reorder_window_ns: 2_000,
                jitter_ns: 100,
                ..LinkFaults::default()
            },
            ..FaultPlan::default()
        })
    })
    .unwrap();
    let (ab, ba) = rc_pair(&a, &b, 2, 1);
    let (ac, ca) = rc_pair(&a, &c, 3, 1);
    let g = Ipv4Addr::new(239, 1, 1, 1);
    let (ua, ub, uc) = (ud_qp(&a), ud_qp(&b), ud_qp(&c));
    ub.attach_mcast(&Gid::from_ipv4(g), 0).unwrap();
    uc.attach_mcast(&Gid::from_ipv4(g), 0).unwrap();
    let (ra, rb) = (raw_qp(&a), raw_qp(&b));
    let bmac = Mac([2, 0, 10, 0, 0, 2]);
    let _flow = b
        .ctx
        .create_flow(&rb, &FlowAttr::udp_endpoint(1, bmac.0, ip(2), 7148))
        .unwrap();
    post_recvs(&b, &ba, 0..40);
    post_recvs(&c, &ca, 0..40);
    post_recvs(&b, &ub, 40..80);
    post_recvs(&c, &uc, 40..80);
    post_recvs(&b, &rb, 80..120);
    let raw = UdpFrameSpec::new(Mac([2, 0, 10, 0, 0, 1]), bmac, (ip(1), 1), (ip(2), 7148))
        .build(&[5u8; 900]);
    write_slot(&a, 100, &raw);
    let gah = ah(&a, g);
    let mut total = 0;
    for i in 0..40usize {
        write_slot(&a, i, &vec![i as u8; 700 + 37 * i]);
        let sge = [slot_sge(&a, i, 700 + 37 * i)];
        let rsge = [slot_sge(&a, 100, raw.len())];
        // SAFETY: every SGE lies in a.mr; the AH outlives the posts.
        unsafe {
            ab.post_send(&[SendWr::send(i as u64, &sge).signaled()])
                .unwrap();
            ac.post_send(&[SendWr::send(i as u64, &sge).signaled()])
                .unwrap();
            ua.post_send(&[SendWr::ud_send(
                i as u64,
                &[slot_sge(&a, i, 200)],
                &gah,
                verbs_api::MULTICAST_QPN,
                QKEY,
            )
            .flags(SendFlags::SIGNALED)])
                .unwrap();
            ra.post_send(&[SendWr::send(i as u64, &rsge)]).unwrap();
        }
        sim.run_for(3_000);
    }
    for n in [&a, &b, &c] {
        total += wait(&sim, &n.cq, 10_000).len();
    }
    sim.run_until_idle();
    (sim.trace_hash(), total)
}

#[test]
fn same_seed_gives_the_same_trace_and_another_seed_does_not() {
    let one = busy_workload(2024);
    let two = busy_workload(2024);
    assert_eq!(one, two, "seed 2024 must replay exactly");
    let other = busy_workload(2025);
    assert_ne!(one.0, other.0, "a different seed draws different faults");
    assert!(one.1 > 150, "the workload completed work: {}", one.1);
}

#[test]
fn a_thousand_hosts_and_ten_thousand_qps() {
    let sim = Sim::new(3);
    let mut hosts = Vec::new();
    for i in 0..1000u32 {
        let ipa = Ipv4Addr::new(10, 1, (i / 250) as u8, (i % 250) as u8 + 1);
        let p = if i % 2 == 0 {
            Personality::Mlx5
        } else {
            Personality::Rxe
        };
        let h = sim.add_host(&format!("h{i}"), ipa, p).unwrap();
        let v = sim.verbs(h);
        let name = v.devices().unwrap()[0].name.clone();
        let ctx = v.open(&name).unwrap();
        let pd = ctx.alloc_pd().unwrap();
        let cq = ctx.create_cq(64, None, 0).unwrap();
        let mr = ctx.alloc_mr(&pd, 4096, AccessFlags::LOCAL_WRITE).unwrap();
        let small = verbs_api::QpCap::new(4, 4, 1, 1);
        let mut qps = Vec::new();
        for _ in 0..10 {
            let q = ctx
                .create_qp(&pd, &QpInitAttr::new(QpType::Ud, &cq, small))
                .unwrap();
            q.modify_with(&QpModify::to(QpState::Init).port(1).pkey_index(0).qkey(QKEY))
                .unwrap();
            q.modify_with(&QpModify::to(QpState::Rtr)).unwrap();
            q.modify_with(&QpModify::to(QpState::Rts).sq_psn(0))
                .unwrap();
            qps.push(q);
        }
        hosts.push((ipa, ctx, pd, cq, mr, qps));
    }
    // Host i's QP 0 sends to host i+1's QP 9.
    for i in 0..1000 {
        let (_, ctx, pd, _, mr, qps) = &hosts[i];
        let (next_ip, _, _, _, nmr, nqps) = &hosts[(i + 1) % 1000];
        let sge = [verbs_api::Sge {
            addr: nmr.addr(),
            length: 4096,
            lkey: nmr.lkey(),
        }];
        // SAFETY: the SGE lies in the next host's MR.
        unsafe {
            nqps[9]
                .post_recv(&[verbs_api::RecvWr::new(i as u64, &sge)])
                .unwrap()
        };
        let ah = ctx
            .create_ah(pd, &AhAttr::roce(Gid::from_ipv4(*next_ip), 1, 1))
            .unwrap();
        let sge = [verbs_api::Sge {
            addr: mr.addr(),
            length: 64,
            lkey: mr.lkey(),
        }];
        // SAFETY: the SGE lies in this host's MR.
        unsafe {
            qps[0]
                .post_send(&[SendWr::ud_send(i as u64, &sge, &ah, nqps[9].qp_num(), QKEY)])
                .unwrap()
        };
    }
    sim.run_until_idle();
    let mut received = 0;
    for (_, _, _, cq, _, _) in &hosts {
        let mut wc = [verbs_api::Completion::default(); 8];
        received += verbs_api::CompletionQueue::poll(cq, &mut wc).unwrap();
    }
    assert_eq!(received, 1000);
    assert_eq!(hosts.iter().map(|h| h.5.len()).sum::<usize>(), 10_000);
}

/// Needs tshark: built with the `tshark` feature, which `cargo xtask ci` enables after
/// installing it (the simulator suite itself needs no system package).
#[cfg(feature = "tshark")]
#[test]
fn captured_pcap_decodes_in_tshark() {
    use backend_sim::CaptureFilter;
    let sim = Sim::new(4);
    let a = node(&sim, 1, Personality::Mlx5);
    let b = node(&sim, 2, Personality::Mlx5);
    let dir = std::env::temp_dir().join(format!("backend-sim-tshark-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("sim.pcap");
    sim.with_fabric(|f| f.capture_to_file(&path, CaptureFilter::All))
        .unwrap();
    let (ab, ba) = rc_pair(&a, &b, 2, 1);
    let (ua, ub) = (ud_qp(&a), ud_qp(&b));
    let (ra, rb) = (raw_qp(&a), raw_qp(&b));
    let bmac = Mac([2, 0, 10, 0, 0, 2]);
    let _flow = b
        .ctx
        .create_flow(&rb, &FlowAttr::udp_endpoint(1, bmac.0, ip(2), 7148))
        .unwrap();
    post_recvs(&b, &ba, 0..2);
    post_recvs(&b, &ub, 2..4);
    post_recvs(&b, &rb, 4..6);
    let raw = UdpFrameSpec::new(Mac([2, 0, 10, 0, 0, 1]), bmac, (ip(1), 5555), (ip(2), 7148))
        .build(b"raw spead packet");
    write_slot(&a, 0, &raw);
    let bah = ah(&a, ip(2));
    // SAFETY: SGEs in a.mr.
    unsafe {
        ra.post_send(&[SendWr::send(1, &[slot_sge(&a, 0, raw.len())]).flags(SendFlags::IP_CSUM)])
            .unwrap();
        ua.post_send(&[SendWr::ud_send(
            2,
            &[slot_sge(&a, 1, 100)],
            &bah,
            ub.qp_num(),
            QKEY,
        )])
        .unwrap();
        ab.post_send(&[SendWr::send(3, &[slot_sge(&a, 2, 3000)])])
            .unwrap();
        ab.post_send(&[SendWr::rdma_write(
            4,
            &[slot_sge(&a, 2, 100)],
            b.mr.addr(),
            b.mr.rkey(),
        )])
        .unwrap();
    }
    sim.run_until_idle();
    sim.with_fabric(|f| f.finish_capture()).unwrap();
    let pcap = PcapFile::read(&path).unwrap();
    assert!(pcap.records.len() >= 8, "{} frames", pcap.records.len());
    let out = std::process::Command::new("tshark")
        .args(["-r"])
        .arg(&path)
        .args([
            "-T",
            "fields",
            "-e",
            "frame.protocols",
            "-e",
            "_ws.expert.severity",
        ])
        .output()
        .expect("tshark is needed with the tshark feature (apt-get install -y tshark)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "tshark failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), pcap.records.len());
    assert!(
        lines[0].starts_with("eth:ethertype:ip:udp"),
        "RAW frame: {}",
        lines[0]
    );
    let ib = lines.iter().filter(|l| l.contains("infiniband")).count();
    assert_eq!(
        ib,
        lines.len() - 1,
        "every RoCE frame decodes as InfiniBand: {text}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn recorded_pcap_replays_into_a_raw_receiver() {
    let g = Ipv4Addr::new(239, 9, 0, 1);
    let frames: Vec<Vec<u8>> = (0..5u8)
        .map(|i| {
            UdpFrameSpec::new(
                Mac([2, 9, 9, 9, 9, 9]),
                Mac::for_ipv4_multicast(g),
                (Ipv4Addr::new(192, 168, 1, 5), 7000),
                (g, 7148),
            )
            .build(&[i; 1000])
        })
        .collect();
    let mut w = backend_sim::pcap::PcapWriter::new(Vec::new()).unwrap();
    for (i, f) in frames.iter().enumerate() {
        w.write(1_700_000_000_000_000_000 + i as u64 * 10_000, f)
            .unwrap();
    }
    let file = PcapFile::parse(&w.finish().unwrap()).unwrap();
    let sim = Sim::new(5);
    let src = node(&sim, 1, Personality::Mlx5);
    let b = node(&sim, 2, Personality::Mlx5);
    let rb = raw_qp(&b);
    let _flow = b
        .ctx
        .create_flow(
            &rb,
            &FlowAttr::udp_endpoint(1, Mac::for_ipv4_multicast(g).0, g, 7148),
        )
        .unwrap();
    post_recvs(&b, &rb, 0..8);
    let port = sim.port_of(src.host).unwrap();
    sim.with_fabric(|f| f.replay(port, &file, ReplayOptions::default()))
        .unwrap();
    let got = wait(&sim, &b.cq, 5);
    assert_eq!(got.len(), 5);
    for (i, c) in got.iter().enumerate() {
        assert_eq!(
            read_slot(&b, c.wr_id as usize, c.byte_len as usize),
            frames[i]
        );
    }
}

/// RDMA WRITE/READ and atomics carry virtual addresses, which depend on where memory
/// happens to be mapped; the trace must not.
fn rdma_workload(seed: u64, shift_memory: bool) -> u64 {
    let sim = Sim::new(seed);
    // Registered memory of another simulation, alive meanwhile, moves this one's MRs.
    let other = Sim::new(0);
    let _spacer = shift_memory.then(|| node(&other, 9, Personality::Mlx5));
    let a = node(&sim, 1, Personality::Mlx5);
    let b = node(&sim, 2, Personality::Mlx5);
    let (ab, _ba) = rc_pair(&a, &b, 2, 1);
    for i in 0..10u64 {
        let sge = [slot_sge(&a, i as usize, 2000)];
        let remote = b.mr.addr() + i * 4096;
        // SAFETY: SGEs in a.mr; remote addresses inside b.mr.
        unsafe {
            ab.post_send(&[SendWr::rdma_write(i, &sge, remote, b.mr.rkey()).signaled()])
                .unwrap();
            ab.post_send(&[SendWr::rdma_read(100 + i, &sge, remote, b.mr.rkey()).signaled()])
                .unwrap();
        }
    }
    assert_eq!(wait(&sim, &a.cq, 20).len(), 20);
    sim.trace_hash()
}

#[test]
fn the_trace_does_not_depend_on_where_memory_is_mapped() {
    assert_eq!(rdma_workload(7, false), rdma_workload(7, true));
}
