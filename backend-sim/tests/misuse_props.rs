//! Bad input never panics: random sequences of verbs calls — any QP type, any transition
//! with any attribute mask, SGEs with wrong keys, lengths and addresses, flows, multicast,
//! faults — return errors or error completions, and the simulation keeps running.

mod common;
use backend_sim::verbs::{SimAh, SimQp};
use backend_sim::{FaultPlan, LinkFaults, Personality, Sim};
use common::*;
use proptest::prelude::*;
use verbs_api::{
    AccessFlags, AhAttr, Completion, CompletionQueue, Context, FlowAttr, FlowRuleType, FlowSpec,
    Gid, MemoryRegion, Mtu, QpAttr, QpAttrMask, QpInitAttr, QpState, QpType, QueuePair,
    QueuePairExt, RecvWr, SendFlags, SendOpcode, SendWr, Sge, WrDetail,
};

#[derive(Debug, Clone)]
enum Op {
    CreateQp {
        node: usize,
        t: u8,
    },
    Modify {
        qp: usize,
        state: u8,
        mask: u32,
        dest: usize,
        port: u8,
    },
    Send {
        qp: usize,
        op: u8,
        key: u8,
        off: u32,
        len: u32,
        flags: u8,
        dest: usize,
    },
    Recv {
        qp: usize,
        key: u8,
        off: u32,
        len: u32,
    },
    Flow {
        qp: usize,
        kind: u8,
        prio: u16,
    },
    Attach {
        qp: usize,
        group: u8,
        detach: bool,
    },
    BringUp {
        qp: usize,
        dest: usize,
        to: u8,
    },
    Step {
        n: u8,
    },
    Poll,
    Faults {
        loss: u8,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => (0..2usize, 0..4u8).prop_map(|(node, t)| Op::CreateQp { node, t }),
        1 => (0..8usize, 0..7u8, any::<u32>(), 0..8usize, 0..3u8).prop_map(
            |(qp, state, mask, dest, port)| Op::Modify {
                qp,
                state,
                mask,
                dest,
                port
            }
        ),
        6 => (
            0..8usize,
            0..7u8,
            0..3u8,
            0..70_000u32,
            0..5000u32,
            any::<u8>(),
            0..8usize
        )
            .prop_map(|(qp, op, key, off, len, flags, dest)| Op::Send {
                qp,
                op,
                key,
                off,
                len,
                flags,
                dest
            }),
        3 => (0..8usize, 0..3u8, 0..70_000u32, 0..5000u32).prop_map(|(qp, key, off, len)| Op::Recv {
            qp,
            key,
            off,
            len
        }),
        1 => (0..8usize, 0..4u8, 0..4u16).prop_map(|(qp, kind, prio)| Op::Flow { qp, kind, prio }),
        1 => (0..8usize, 0..3u8, any::<bool>()).prop_map(|(qp, group, detach)| Op::Attach {
            qp,
            group,
            detach
        }),
        1 => (0..8usize, 0..8usize, 1..4u8).prop_map(|(qp, dest, to)| Op::BringUp { qp, dest, to }),
        1 => (0..8usize, 0..8usize, 1..4u8).prop_map(|(qp, dest, to)| Op::BringUp { qp, dest, to }),
        1 => (0..20u8).prop_map(|n| Op::Step { n }),
        1 => Just(Op::Poll),
        1 => (0..4u8).prop_map(|loss| Op::Faults { loss }),
    ]
}

/// An SGE at `off` (`len` bytes) in node `n`'s MR, under the key `key` draws: the MR's
/// own lkey (0), the made-up `bad` (1), or the other node's MR's lkey (2).
fn drawn_sge(nodes: &[Node; 2], n: usize, key: u8, bad: u32, off: u32, len: u32) -> Sge {
    let lkey = [nodes[n].mr.lkey(), bad, nodes[1 - n].mr.lkey()][usize::from(key)];
    Sge {
        addr: nodes[n].mr.addr() + u64::from(off),
        length: len,
        lkey,
    }
}

fn run(ops: &[Op]) {
    let sim = Sim::new(3);
    let nodes = [
        node(&sim, 1, Personality::Mlx5),
        node(&sim, 2, Personality::Rxe),
    ];
    let mut qps: Vec<(usize, SimQp)> = Vec::new();
    // Start from working pairs (RC, UC, UD across the two hosts; RAW on the mlx5 one) with
    // receives posted, so that the random calls below meet live traffic.
    for t in [QpType::Rc, QpType::Uc, QpType::Ud] {
        let a = nodes[0]
            .ctx
            .create_qp(&nodes[0].pd, &QpInitAttr::new(t, &nodes[0].cq, cap()))
            .unwrap();
        let b = nodes[1]
            .ctx
            .create_qp(&nodes[1].pd, &QpInitAttr::new(t, &nodes[1].cq, cap()))
            .unwrap();
        for (q, peer, n) in [(&a, b.qp_num(), 0u8), (&b, a.qp_num(), 1)] {
            let p = verbs_api::helpers::transition::ConnectParams {
                qkey: QKEY,
                access: AccessFlags::LOCAL_WRITE
                    | AccessFlags::REMOTE_WRITE
                    | AccessFlags::REMOTE_READ
                    | AccessFlags::REMOTE_ATOMIC,
                remote: Some(verbs_api::helpers::transition::RemoteQp {
                    qpn: peer,
                    psn: 0,
                    av: AhAttr::roce(Gid::from_ipv4(ip(2 - n)), 1, 1),
                }),
                timeout: 8,
                retry_cnt: 2,
                rnr_retry: 2,
                min_rnr_timer: 1,
                ..Default::default()
            };
            verbs_api::helpers::transition::bring_up(q, QpState::Rts, &p).unwrap();
            post_recvs(&nodes[usize::from(n)], q, 0..4);
        }
        qps.push((0, a));
        qps.push((1, b));
    }
    qps.push((0, raw_qp(&nodes[0])));
    let mut flows = Vec::new();
    let ahs: Vec<SimAh> = vec![ah(&nodes[0], ip(2)), ah(&nodes[1], ip(1))];
    let types = [QpType::Rc, QpType::Uc, QpType::Ud, QpType::RawPacket];
    let states = [
        QpState::Reset,
        QpState::Init,
        QpState::Rtr,
        QpState::Rts,
        QpState::Sqd,
        QpState::Sqe,
        QpState::Err,
    ];
    for o in ops {
        match o.clone() {
            Op::CreateQp { node: n, t } => {
                let nd = &nodes[n];
                if let Ok(q) = nd.ctx.create_qp(
                    &nd.pd,
                    &QpInitAttr::new(types[usize::from(t)], &nd.cq, cap()),
                ) {
                    qps.push((n, q));
                }
            }
            Op::Modify {
                qp,
                state,
                mask,
                dest,
                port,
            } => {
                let Some((n, q)) = qps.get(qp) else { continue };
                let peer = qps.get(dest).map_or(0, |p| p.1.qp_num());
                let attr = QpAttr {
                    qp_state: states[usize::from(state)],
                    port_num: port,
                    qkey: QKEY,
                    dest_qp_num: peer,
                    path_mtu: Mtu::Mtu1024,
                    ah_attr: AhAttr::roce(Gid::from_ipv4(ip(2 - *n as u8)), 1, 1),
                    qp_access_flags: AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_WRITE,
                    timeout: 8,
                    retry_cnt: 2,
                    rnr_retry: 2,
                    min_rnr_timer: 1,
                    ..QpAttr::default()
                };
                let _ = q.modify(&attr, QpAttrMask::from_bits_truncate(mask));
            }
            Op::Send {
                qp,
                op,
                key,
                off,
                len,
                flags,
                dest,
            } => {
                let Some((n, q)) = qps.get(qp) else { continue };
                let nd = &nodes[*n];
                let sge = [drawn_sge(&nodes, *n, key, 0xdead, off, len)];
                let opcode = [
                    SendOpcode::Send,
                    SendOpcode::SendWithImm,
                    SendOpcode::RdmaWrite,
                    SendOpcode::RdmaWriteWithImm,
                    SendOpcode::RdmaRead,
                    SendOpcode::AtomicCmpAndSwp,
                    SendOpcode::AtomicFetchAndAdd,
                ][usize::from(op)];
                let remote = nodes[1 - n].mr.addr() + u64::from(off);
                let rkey = nodes[1 - n].mr.rkey();
                let detail = match opcode {
                    SendOpcode::Send | SendOpcode::SendWithImm if q.qp_type() == QpType::Ud => {
                        WrDetail::Ud {
                            ah: &ahs[*n],
                            remote_qpn: qps.get(dest).map_or(1, |p| p.1.qp_num()),
                            remote_qkey: QKEY,
                        }
                    }
                    SendOpcode::Send | SendOpcode::SendWithImm => WrDetail::None,
                    SendOpcode::AtomicCmpAndSwp | SendOpcode::AtomicFetchAndAdd => {
                        WrDetail::Atomic {
                            remote_addr: remote,
                            compare_add: 1,
                            swap: 2,
                            rkey,
                        }
                    }
                    _ => WrDetail::Rdma {
                        remote_addr: remote,
                        rkey,
                    },
                };
                // Inline data must be readable memory: keep it inside the node's MR.
                let mut flags = SendFlags::from_bits_truncate(u32::from(flags));
                if flags.contains(SendFlags::INLINE)
                    && (key != 0 || u64::from(off) + u64::from(len) > nd.mr.len() as u64)
                {
                    flags.remove(SendFlags::INLINE);
                }
                let wr = SendWr {
                    wr_id: 1,
                    sg_list: &sge,
                    opcode,
                    send_flags: flags,
                    imm_data: 5,
                    detail,
                };
                // SAFETY: SGEs name either memory inside a live MR, or keys/ranges the
                // simulated NIC rejects before touching memory; inline data stays in the MR.
                let _ = unsafe { q.post_send(&[wr]) };
            }
            Op::Recv { qp, key, off, len } => {
                let Some((n, q)) = qps.get(qp) else { continue };
                let sge = [drawn_sge(&nodes, *n, key, 0xbeef, off, len)];
                // SAFETY: as above: the NIC checks key and bounds before it writes.
                let _ = unsafe { q.post_recv(&[RecvWr::new(2, &sge)]) };
            }
            Op::Flow { qp, kind, prio } => {
                let Some((n, q)) = qps.get(qp) else { continue };
                let rule_type = [
                    FlowRuleType::Normal,
                    FlowRuleType::AllDefault,
                    FlowRuleType::McDefault,
                    FlowRuleType::Sniffer,
                ][usize::from(kind)];
                let attr = FlowAttr {
                    rule_type,
                    priority: prio,
                    ..FlowAttr::normal(1, vec![FlowSpec::udp_dst(7148)])
                };
                if let Ok(f) = nodes[*n].ctx.create_flow(q, &attr) {
                    flows.push(f);
                }
            }
            Op::Attach { qp, group, detach } => {
                let Some((_, q)) = qps.get(qp) else { continue };
                let gid = Gid::from_ipv4(std::net::Ipv4Addr::new(239, 0, 0, group));
                let _ = if detach {
                    q.detach_mcast(&gid, 0)
                } else {
                    q.attach_mcast(&gid, 0)
                };
            }
            Op::BringUp { qp, dest, to } => {
                let Some((n, q)) = qps.get(qp) else { continue };
                let remote = qps
                    .get(dest)
                    .map(|p| verbs_api::helpers::transition::RemoteQp {
                        qpn: p.1.qp_num(),
                        psn: 0,
                        av: AhAttr::roce(Gid::from_ipv4(ip(2 - *n as u8)), 1, 1),
                    });
                let p = verbs_api::helpers::transition::ConnectParams {
                    qkey: QKEY,
                    access: AccessFlags::LOCAL_WRITE
                        | AccessFlags::REMOTE_WRITE
                        | AccessFlags::REMOTE_READ
                        | AccessFlags::REMOTE_ATOMIC,
                    remote,
                    timeout: 8,
                    retry_cnt: 2,
                    rnr_retry: 2,
                    min_rnr_timer: 1,
                    ..Default::default()
                };
                let _ = verbs_api::helpers::transition::bring_up(q, states[usize::from(to)], &p);
            }
            Op::Step { n } => {
                for _ in 0..n {
                    sim.step();
                }
            }
            Op::Poll => {
                let mut wc = [Completion::default(); 8];
                for nd in &nodes {
                    let _ = nd.cq.poll(&mut wc);
                }
            }
            Op::Faults { loss } => {
                let plan = FaultPlan {
                    default_link: LinkFaults {
                        loss: f64::from(loss) / 4.0,
                        duplicate: 0.1,
                        ..LinkFaults::default()
                    },
                    ..FaultPlan::default()
                };
                sim.set_faults(plan).unwrap();
            }
        }
    }
    sim.run_for(50_000_000);
    drop(flows);
    drop(qps);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn random_call_sequences_never_panic(ops in prop::collection::vec(op(), 1..60)) {
        run(&ops);
    }
}
