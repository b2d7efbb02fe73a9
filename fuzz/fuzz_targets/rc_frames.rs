//! The RC state machine fed arbitrary packets: two simulated hosts with a connected RC
//! pair (receives posted, a SEND, an RDMA WRITE and a READ in flight), and the input's
//! records injected as RoCEv2 packets from either host's port to the other's QP, with a
//! valid ICRC so that they reach the transport. Each record: a direction byte, then a
//! length byte and that many bytes of BTH, extension headers and payload; the BTH's
//! destination QP is set to the real QP so that the packet is not just dropped. The
//! simulation runs between records and the CQs are drained; nothing may panic.
#![no_main]

use std::net::Ipv4Addr;

use backend_sim::{Personality, Sim};
use libfuzzer_sys::fuzz_target;
use netwire::eth::{EthHeader, Mac, ETHERTYPE_IPV4};
use netwire::ipv4::{Ipv4Header, PROTO_UDP};
use netwire::roce::{compute_icrc, BTH_LEN, ROCEV2_UDP_PORT};
use netwire::udp::{UdpHeader, UDP_HEADER_LEN};
use verbs_api::helpers::transition::{bring_up, ConnectParams, RemoteQp};
use verbs_api::{
    AccessFlags, AhAttr, Completion, CompletionQueue, Context, Gid, MemoryRegion, QpCap,
    QpInitAttr, QpState, QpType, QueuePair, RecvWr, SendWr, Sge, Verbs,
};

fn ip(n: u8) -> Ipv4Addr {
    Ipv4Addr::new(10, 7, 0, n)
}

fn mac(n: u8) -> Mac {
    Mac([0x02, 0, 10, 7, 0, n])
}

/// An Ethernet/IPv4/UDP frame around `roce` (BTH onwards) with its ICRC.
fn frame(from: u8, to: u8, roce: &[u8]) -> Vec<u8> {
    let udp_len = roce.len() + 4;
    let mut out = Vec::with_capacity(64 + roce.len());
    EthHeader::write_untagged(mac(to), mac(from), ETHERTYPE_IPV4, &mut out);
    Ipv4Header::write(
        &mut out,
        0,
        UDP_HEADER_LEN + udp_len,
        0,
        true,
        64,
        PROTO_UDP,
        ip(from),
        ip(to),
    );
    UdpHeader::write(&mut out, 49152, ROCEV2_UDP_PORT, udp_len);
    out.extend_from_slice(roce);
    let icrc = compute_icrc(&out[14..]);
    out.extend_from_slice(&icrc.to_le_bytes());
    out
}

fuzz_target!(|data: &[u8]| {
    let sim = Sim::new(1);
    let hosts = [
        sim.add_host("a", ip(1), Personality::Rxe).expect("host a"),
        sim.add_host("b", ip(2), Personality::Mlx5).expect("host b"),
    ];
    let verbs = [sim.verbs(hosts[0]), sim.verbs(hosts[1])];
    let ctxs: Vec<_> = verbs
        .iter()
        .map(|v| {
            let name = v.devices().expect("devices")[0].name.clone();
            v.open(&name).expect("open")
        })
        .collect();
    let pds: Vec<_> = ctxs.iter().map(|c| c.alloc_pd().expect("pd")).collect();
    let cqs: Vec<_> = ctxs
        .iter()
        .map(|c| c.create_cq(64, None, 0).expect("cq"))
        .collect();
    let access = AccessFlags::LOCAL_WRITE
        | AccessFlags::REMOTE_WRITE
        | AccessFlags::REMOTE_READ
        | AccessFlags::REMOTE_ATOMIC;
    let mrs: Vec<_> = ctxs
        .iter()
        .zip(&pds)
        .map(|(c, pd)| c.alloc_mr(pd, 16384, access).expect("mr"))
        .collect();
    let cap = QpCap::new(16, 16, 1, 1);
    let qps: Vec<_> = (0..2)
        .map(|i| {
            ctxs[i]
                .create_qp(&pds[i], &QpInitAttr::new(QpType::Rc, &cqs[i], cap))
                .expect("qp")
        })
        .collect();
    for i in 0..2 {
        let peer = 1 - i;
        let p = ConnectParams {
            access,
            remote: Some(RemoteQp {
                qpn: qps[peer].qp_num(),
                psn: 0,
                av: AhAttr::roce(Gid::from_ipv4(ip(peer as u8 + 1)), 1, 1),
            }),
            timeout: 8,
            retry_cnt: 2,
            rnr_retry: 2,
            min_rnr_timer: 1,
            ..ConnectParams::default()
        };
        bring_up(&qps[i], QpState::Rts, &p).expect("bring up");
        let sge = |k: u64| Sge {
            addr: mrs[i].addr() + k * 1024,
            length: 1024,
            lkey: mrs[i].lkey(),
        };
        for k in 0..4 {
            let sges = [sge(k)];
            // SAFETY: the SGEs lie in `mrs[i]`, which outlives the QP's use of them
            // (everything is dropped together at the end of this input).
            unsafe { qps[i].post_recv(&[RecvWr::new(k, &sges)]) }.expect("post recv");
        }
    }
    let local = [Sge {
        addr: mrs[0].addr() + 8192,
        length: 512,
        lkey: mrs[0].lkey(),
    }];
    let remote_addr = mrs[1].addr() + 8192;
    let rkey = mrs[1].rkey();
    let wrs = [
        SendWr::send(10, &local).signaled(),
        SendWr::rdma_write(11, &local, remote_addr, rkey).signaled(),
        SendWr::rdma_read(12, &local, remote_addr, rkey).signaled(),
    ];
    // SAFETY: the SGEs lie in `mrs[0]`, alive until the end of this input.
    let _ = unsafe { qps[0].post_send(&wrs) };
    let qpns = [qps[0].qp_num(), qps[1].qp_num()];
    let ports = [sim.port_of(hosts[0]), sim.port_of(hosts[1])];
    let mut wc = [Completion::default(); 16];
    let mut rest = data;
    let mut records = 0;
    while let [dir, len, tail @ ..] = rest {
        let n = usize::from(*len).min(tail.len());
        let (body, next) = tail.split_at(n);
        rest = next;
        records += 1;
        if records > 64 {
            break;
        }
        let from = usize::from(dir & 1);
        let to = 1 - from;
        let mut roce = body.to_vec();
        if roce.len() >= BTH_LEN {
            roce[5..8].copy_from_slice(&qpns[to].to_be_bytes()[1..]);
            // P_Key 0xffff, version 0: the default partition.
            roce[2..4].copy_from_slice(&[0xff, 0xff]);
            roce[1] &= 0xf0;
        }
        let f = frame(from as u8 + 1, to as u8 + 1, &roce);
        if let Some(port) = ports[from] {
            let _ = sim.with_fabric(|fab| fab.transmit(port, f));
        }
        sim.run_for(u64::from(*dir) * 1_000);
        for cq in &cqs {
            while cq.poll(&mut wc).map_or(0, |n| n) > 0 {}
        }
    }
    sim.run_until_idle();
    for cq in &cqs {
        while cq.poll(&mut wc).map_or(0, |n| n) > 0 {}
    }
});
