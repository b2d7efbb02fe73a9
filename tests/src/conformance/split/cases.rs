//! The split cases (see the module above). Each is one function holding both halves:
//! the active side (QP `a`) posts, the passive side (QP `b`) answers, and they meet at
//! barriers so that a side posts only when the other is ready for it. No case holds
//! expected lines: the outcome with both sides on rxe is the reference the other runs
//! must equal. The cases whose name starts with `lossy_` move enough packets that a
//! fabric losing 2% of its frames makes both stacks retransmit, and their outcome must
//! not change.

use std::time::Duration;

use verbs_api::{AccessFlags, Context, Gid, MemoryRegion, SendWr, GRH_LEN};

use super::{pattern, Session, Side};
use crate::conformance::cases::prelude::{post_recv, post_send, read_u64, sge, ALL_REMOTE, QKEY};

/// Every case, by name, in the order the step runs them.
pub fn all<C: Context>() -> Vec<(&'static str, super::CaseFn<C>)> {
    vec![
        ("rc_send_with_imm", rc_send_with_imm::<C>),
        ("rc_write_with_imm", rc_write_with_imm::<C>),
        ("rc_read", rc_read::<C>),
        ("rc_atomics", rc_atomics::<C>),
        ("ud_send_with_grh", ud_send_with_grh::<C>),
        ("rnr_retry_exceeded", rnr_retry_exceeded::<C>),
        ("rnr_nak_then_success", rnr_nak_then_success::<C>),
        ("bad_rkey_write_with_imm", bad_rkey_write_with_imm::<C>),
        ("send_larger_than_receive", send_larger_than_receive::<C>),
        ("ud_larger_than_receive", ud_larger_than_receive::<C>),
        (
            "read_past_the_remote_region",
            read_past_the_remote_region::<C>,
        ),
        (
            "responder_without_remote_write",
            responder_without_remote_write::<C>,
        ),
        ("lossy_rc_sends", lossy_rc_sends::<C>),
        ("lossy_rc_writes", lossy_rc_writes::<C>),
        ("lossy_rc_reads", lossy_rc_reads::<C>),
        ("lossy_rc_atomics", lossy_rc_atomics::<C>),
    ]
}

/// A SEND into two SGEs (12 bytes), then a SEND_WITH_IMM of 3000 bytes (three packets at
/// MTU 1024).
pub fn rc_send_with_imm<C: Context>(s: &mut Session<'_, C>) {
    let e = s.rc(8192, AccessFlags::empty(), |_| {});
    let (short, long) = (pattern(1, 12), pattern(2, 3000));
    match s.side {
        Side::Passive => {
            post_recv(&e.qp, 7, &[sge(&e.mr, 0, 3), sge(&e.mr, 1000, 100)]);
            post_recv(&e.qp, 8, &[sge(&e.mr, 4096, 4096)]);
            s.barrier("ready");
            s.barrier("done");
            s.collect(&e.cq, 2);
            s.bytes("b[0..3]", &e.mr, 0, &short[..3]);
            s.bytes("b[1000..1009]", &e.mr, 1000, &short[3..]);
            s.bytes("b[1009..1100]", &e.mr, 1009, &[0; 91]);
            s.bytes("b[4096..7096]", &e.mr, 4096, &long);
        }
        Side::Active => {
            e.mr.write(0, &short).expect("write MR");
            e.mr.write(4096, &long).expect("write MR");
            s.barrier("ready");
            post_send(
                &e.qp,
                SendWr::send(1, &[sge(&e.mr, 0, 5), sge(&e.mr, 5, 7)]).signaled(),
            );
            post_send(
                &e.qp,
                SendWr::send_with_imm(2, &[sge(&e.mr, 4096, 3000)], 0x1234_5678).signaled(),
            );
            s.collect(&e.cq, 2);
            s.barrier("done");
        }
    }
    s.state(&e.qp);
}

/// An RDMA WRITE of 16 bytes, then a WRITE_WITH_IMM of 2000 bytes, which consumes a
/// receive at the passive side.
pub fn rc_write_with_imm<C: Context>(s: &mut Session<'_, C>) {
    let e = s.rc(8192, ALL_REMOTE, |_| {});
    let (small, big) = (pattern(3, 16), pattern(4, 2000));
    match s.side {
        Side::Passive => {
            post_recv(&e.qp, 50, &[sge(&e.mr, 6000, 64)]);
            s.barrier("ready");
            s.barrier("done");
            s.collect(&e.cq, 1);
            s.bytes("b[64..80]", &e.mr, 64, &small);
            s.bytes("b[1024..3024]", &e.mr, 1024, &big);
            s.bytes("b[6000..6064]", &e.mr, 6000, &[0; 64]);
        }
        Side::Active => {
            e.mr.write(0, &small).expect("write MR");
            e.mr.write(1024, &big).expect("write MR");
            s.barrier("ready");
            let (addr, rkey) = (e.peer.addr, e.peer.rkey);
            post_send(
                &e.qp,
                SendWr::rdma_write(1, &[sge(&e.mr, 0, 16)], addr + 64, rkey).signaled(),
            );
            post_send(
                &e.qp,
                SendWr::rdma_write_with_imm(2, &[sge(&e.mr, 1024, 2000)], addr + 1024, rkey, 77)
                    .signaled(),
            );
            s.collect(&e.cq, 2);
            s.barrier("done");
        }
    }
    s.state(&e.qp);
}

/// An RDMA READ of 12 bytes and one of 3000 bytes (three response packets).
pub fn rc_read<C: Context>(s: &mut Session<'_, C>) {
    let e = s.rc(8192, ALL_REMOTE, |_| {});
    let (small, big) = (pattern(5, 12), pattern(6, 3000));
    match s.side {
        Side::Passive => {
            e.mr.write(100, &small).expect("write MR");
            e.mr.write(4096, &big).expect("write MR");
            s.barrier("ready");
            s.barrier("done");
            s.collect(&e.cq, 0);
        }
        Side::Active => {
            s.barrier("ready");
            let (addr, rkey) = (e.peer.addr, e.peer.rkey);
            post_send(
                &e.qp,
                SendWr::rdma_read(1, &[sge(&e.mr, 0, 12)], addr + 100, rkey).signaled(),
            );
            post_send(
                &e.qp,
                SendWr::rdma_read(2, &[sge(&e.mr, 4096, 3000)], addr + 4096, rkey).signaled(),
            );
            s.collect(&e.cq, 2);
            s.bytes("a[0..12]", &e.mr, 0, &small);
            s.bytes("a[4096..7096]", &e.mr, 4096, &big);
            s.barrier("done");
        }
    }
    s.state(&e.qp);
}

/// Logs the u64 at `offset` of `mr` as `NAME: VALUE`.
fn log_u64<C: Context>(s: &mut Session<'_, C>, name: &str, mr: &C::Mr, offset: usize) {
    let v = read_u64(mr, offset);
    s.log.line(format!("{name}: {v}"));
}

/// Compare-and-swap that swaps (10 to 99), one that does not (10 to 1, the value being
/// 99), and fetch-and-add of 5: the old values returned and the value left.
pub fn rc_atomics<C: Context>(s: &mut Session<'_, C>) {
    let e = s.rc(4096, ALL_REMOTE, |_| {});
    match s.side {
        Side::Passive => {
            e.mr.write(2048, &10u64.to_ne_bytes()).expect("write MR");
            s.barrier("ready");
            s.barrier("done");
            s.collect(&e.cq, 0);
            log_u64(s, "b[2048]", &e.mr, 2048);
        }
        Side::Active => {
            s.barrier("ready");
            let (addr, rkey) = (e.peer.addr + 2048, e.peer.rkey);
            post_send(
                &e.qp,
                SendWr::compare_swap(1, &[sge(&e.mr, 0, 8)], addr, rkey, 10, 99).signaled(),
            );
            post_send(
                &e.qp,
                SendWr::compare_swap(2, &[sge(&e.mr, 8, 8)], addr, rkey, 10, 1).signaled(),
            );
            post_send(
                &e.qp,
                SendWr::fetch_add(3, &[sge(&e.mr, 16, 8)], addr, rkey, 5).signaled(),
            );
            s.collect(&e.cq, 3);
            for (i, off) in [0usize, 8, 16].into_iter().enumerate() {
                log_u64(s, &format!("a[{off}] (old value {})", i + 1), &e.mr, off);
            }
            s.barrier("done");
        }
    }
    s.state(&e.qp);
}

/// The fields of a received GRH that do not depend on the sending stack's choices of
/// IPv4 identification (and so checksum): for RoCEv2 over IPv4, 20 zero bytes, then the
/// IPv4 header. The checksum is left out too: rxe leaves it 0 when it sends to its own
/// address (the baseline, both sides on rxe0), and fills it in over the wire; the
/// loopback case `ud_send_recv_with_grh` holds the former.
fn grh_line(grh: &[u8], me: Gid, peer: Gid) -> String {
    let name = |addr: &[u8], first: (Gid, &str), second: (Gid, &str)| {
        let g = Gid::from_ipv4(std::net::Ipv4Addr::new(addr[0], addr[1], addr[2], addr[3]));
        if g == first.0 {
            first.1.to_owned()
        } else if g == second.0 {
            second.1.to_owned()
        } else {
            format!("{}.{}.{}.{}", addr[0], addr[1], addr[2], addr[3])
        }
    };
    let ip = &grh[20..40];
    format!(
        "grh: zero {} ver/ihl {:#04x} tos {} len {} flags/frag {:#06x} ttl {} proto {} src {} dst {}",
        grh[..20].iter().all(|&b| b == 0),
        ip[0],
        ip[1],
        u16::from_be_bytes([ip[2], ip[3]]),
        u16::from_be_bytes([ip[6], ip[7]]),
        ip[8],
        ip[9],
        name(&ip[12..16], (peer, "peer"), (me, "self")),
        name(&ip[16..20], (me, "self"), (peer, "peer")),
    )
}

/// A UD SEND of 100 bytes with a GRH (the receive completion's source QP, flags and GRH),
/// then one with the wrong Q_Key, which the passive side drops.
pub fn ud_send_with_grh<C: Context>(s: &mut Session<'_, C>) {
    let e = s.ud(4096, QKEY);
    let payload = pattern(7, 100);
    let len = (GRH_LEN + 512) as u32;
    match s.side {
        Side::Passive => {
            post_recv(&e.qp, 1, &[sge(&e.mr, 1024, len)]);
            s.barrier("ready");
            s.collect(&e.cq, 1);
            let grh = super::super::rig::read(&e.mr, 1024, GRH_LEN);
            let line = grh_line(&grh, s.rig.gid, Gid(e.peer.gid));
            s.log.line(line);
            s.bytes("b[1064..1164]", &e.mr, 1024 + GRH_LEN, &payload);
            post_recv(&e.qp, 2, &[sge(&e.mr, 2048, len)]);
            s.barrier("ready again");
            s.barrier("sent");
            s.collect(&e.cq, 0);
        }
        Side::Active => {
            e.mr.write(0, &payload).expect("write MR");
            let ah = s
                .rig
                .ctx
                .create_ah(&s.rig.pd, &s.peer_av(&e.peer))
                .expect("create_ah");
            s.barrier("ready");
            post_send(
                &e.qp,
                SendWr::ud_send(3, &[sge(&e.mr, 0, 100)], &ah, e.peer.qpn, QKEY).signaled(),
            );
            s.collect(&e.cq, 1);
            s.barrier("ready again");
            post_send(
                &e.qp,
                SendWr::ud_send(4, &[sge(&e.mr, 0, 100)], &ah, e.peer.qpn, QKEY + 1).signaled(),
            );
            s.collect(&e.cq, 1);
            s.barrier("sent");
        }
    }
    s.state(&e.qp);
}

/// No receive posted at the passive side and rnr_retry 1 at the active side: the SEND
/// ends in RNR_RETRY_EXC_ERR.
pub fn rnr_retry_exceeded<C: Context>(s: &mut Session<'_, C>) {
    let side = s.side;
    let e = s.rc(4096, AccessFlags::empty(), |p| match side {
        Side::Active => p.rnr_retry = 1,
        Side::Passive => p.min_rnr_timer = 1,
    });
    match s.side {
        Side::Passive => {
            s.barrier("ready");
            s.barrier("done");
            s.collect(&e.cq, 0);
        }
        Side::Active => {
            s.barrier("ready");
            post_send(&e.qp, SendWr::send(5, &[sge(&e.mr, 0, 8)]).signaled());
            s.collect(&e.cq, 1);
            s.barrier("done");
        }
    }
    s.state(&e.qp);
}

/// A SEND before the passive side posts its receive (rnr_retry 7, infinite): the passive
/// side answers with RNR NAKs for 300 ms, then posts the receive, and the SEND completes.
pub fn rnr_nak_then_success<C: Context>(s: &mut Session<'_, C>) {
    let side = s.side;
    let e = s.rc(4096, AccessFlags::empty(), |p| {
        if side == Side::Passive {
            // 5.12 ms (IBA table 45).
            p.min_rnr_timer = 18;
        }
    });
    let data = pattern(8, 64);
    match s.side {
        Side::Passive => {
            s.barrier("posted");
            std::thread::sleep(Duration::from_millis(300));
            post_recv(&e.qp, 9, &[sge(&e.mr, 0, 256)]);
            s.collect(&e.cq, 1);
            s.bytes("b[0..64]", &e.mr, 0, &data);
            s.barrier("done");
        }
        Side::Active => {
            e.mr.write(0, &data).expect("write MR");
            post_send(&e.qp, SendWr::send(6, &[sge(&e.mr, 0, 64)]).signaled());
            s.barrier("posted");
            s.barrier("done");
            s.collect(&e.cq, 1);
        }
    }
    s.state(&e.qp);
}

/// A WRITE_WITH_IMM with a bad rkey: the requester's error, the responder's receives
/// (the one the write consumes, and the next) and both QPs' states.
pub fn bad_rkey_write_with_imm<C: Context>(s: &mut Session<'_, C>) {
    let e = s.rc(4096, ALL_REMOTE, |_| {});
    match s.side {
        Side::Passive => {
            post_recv(&e.qp, 7, &[sge(&e.mr, 512, 64)]);
            post_recv(&e.qp, 8, &[sge(&e.mr, 1024, 64)]);
            s.barrier("ready");
            s.barrier("done");
            s.collect(&e.cq, 2);
            s.bytes("b[0..64]", &e.mr, 0, &[0; 64]);
        }
        Side::Active => {
            e.mr.write(0, &pattern(9, 8)).expect("write MR");
            s.barrier("ready");
            let sg = [sge(&e.mr, 0, 8)];
            let wr = SendWr::rdma_write_with_imm(1, &sg, e.peer.addr, e.peer.rkey ^ 0x00ff_ff00, 9);
            post_send(&e.qp, wr.signaled());
            post_send(&e.qp, SendWr::send(2, &[sge(&e.mr, 0, 8)]).signaled());
            s.collect(&e.cq, 2);
            s.barrier("done");
        }
    }
    s.state(&e.qp);
}

/// A SEND of 32 bytes into a receive of 16: the responder's error on that receive, the
/// flush of the next, the requester's error, and both QPs' states.
pub fn send_larger_than_receive<C: Context>(s: &mut Session<'_, C>) {
    let e = s.rc(4096, AccessFlags::empty(), |_| {});
    match s.side {
        Side::Passive => {
            post_recv(&e.qp, 7, &[sge(&e.mr, 512, 16)]);
            post_recv(&e.qp, 8, &[sge(&e.mr, 768, 64)]);
            s.barrier("ready");
            s.barrier("done");
            s.collect(&e.cq, 2);
        }
        Side::Active => {
            e.mr.write(0, &pattern(10, 32)).expect("write MR");
            s.barrier("ready");
            post_send(&e.qp, SendWr::send(1, &[sge(&e.mr, 0, 32)]).signaled());
            s.collect(&e.cq, 1);
            s.barrier("done");
        }
    }
    s.state(&e.qp);
}

/// A UD SEND of 200 bytes into a receive of 40 + 100: the receive's error, the next
/// receive's flush, the passive QP's state; the sender completes.
pub fn ud_larger_than_receive<C: Context>(s: &mut Session<'_, C>) {
    let e = s.ud(4096, QKEY);
    match s.side {
        Side::Passive => {
            post_recv(&e.qp, 1, &[sge(&e.mr, 0, (GRH_LEN + 100) as u32)]);
            post_recv(&e.qp, 2, &[sge(&e.mr, 1024, (GRH_LEN + 512) as u32)]);
            s.barrier("ready");
            s.barrier("sent");
            s.collect(&e.cq, 2);
        }
        Side::Active => {
            e.mr.write(0, &pattern(14, 200)).expect("write MR");
            let ah = s
                .rig
                .ctx
                .create_ah(&s.rig.pd, &s.peer_av(&e.peer))
                .expect("create_ah");
            s.barrier("ready");
            post_send(
                &e.qp,
                SendWr::ud_send(3, &[sge(&e.mr, 0, 200)], &ah, e.peer.qpn, QKEY).signaled(),
            );
            s.collect(&e.cq, 1);
            s.barrier("sent");
        }
    }
    s.state(&e.qp);
}

/// An RDMA READ of 16 bytes starting 8 bytes before the end of the passive side's
/// region: the requester's error, the passive side's posted receive and both states.
pub fn read_past_the_remote_region<C: Context>(s: &mut Session<'_, C>) {
    let e = s.rc(256, ALL_REMOTE, |_| {});
    match s.side {
        Side::Passive => {
            post_recv(&e.qp, 7, &[sge(&e.mr, 0, 64)]);
            s.barrier("ready");
            s.barrier("done");
            s.collect(&e.cq, 1);
        }
        Side::Active => {
            s.barrier("ready");
            let sg = [sge(&e.mr, 0, 16)];
            post_send(
                &e.qp,
                SendWr::rdma_read(1, &sg, e.peer.addr + 248, e.peer.rkey).signaled(),
            );
            s.collect(&e.cq, 1);
            s.barrier("done");
        }
    }
    s.state(&e.qp);
}

/// A WRITE to a passive QP that allows remote reads only (its memory allows writes),
/// then a SEND: the requester's errors, the passive side's receive and both states.
pub fn responder_without_remote_write<C: Context>(s: &mut Session<'_, C>) {
    let side = s.side;
    let e = s.rc(256, ALL_REMOTE, |p| {
        if side == Side::Passive {
            p.access = AccessFlags::REMOTE_READ;
        }
    });
    match s.side {
        Side::Passive => {
            post_recv(&e.qp, 7, &[sge(&e.mr, 128, 64)]);
            s.barrier("ready");
            s.barrier("done");
            s.collect(&e.cq, 1);
            s.bytes("b[0..8]", &e.mr, 0, &[0; 8]);
        }
        Side::Active => {
            e.mr.write(0, &pattern(15, 8)).expect("write MR");
            s.barrier("ready");
            let sg = [sge(&e.mr, 0, 8)];
            post_send(
                &e.qp,
                SendWr::rdma_write(1, &sg, e.peer.addr, e.peer.rkey).signaled(),
            );
            post_send(&e.qp, SendWr::send(2, &sg).signaled());
            s.collect(&e.cq, 2);
            s.barrier("done");
        }
    }
    s.state(&e.qp);
}

/// The active side's first PSN in the lossy SEND case: 0x80 packets before the 24-bit
/// PSN wraps, so the wrap happens mid-transfer, under loss.
const NEAR_WRAP: u32 = 0xff_ff80;

/// 16 SENDs of 16 KiB (every other one with an immediate; 256 packets), the PSN wrapping
/// from 0xffffff to 0 among them.
pub fn lossy_rc_sends<C: Context>(s: &mut Session<'_, C>) {
    const N: usize = 16;
    const LEN: usize = 16 * 1024;
    let side = s.side;
    let e = s.rc(N * LEN, AccessFlags::empty(), |p| match side {
        Side::Active => p.sq_psn = NEAR_WRAP,
        Side::Passive => p.remote.as_mut().expect("remote").psn = NEAR_WRAP,
    });
    let data = pattern(11, N * LEN);
    match s.side {
        Side::Passive => {
            for i in 0..N {
                post_recv(&e.qp, 100 + i as u64, &[sge(&e.mr, i * LEN, LEN as u32)]);
            }
            s.barrier("ready");
            s.collect(&e.cq, N);
            s.bytes("b[all]", &e.mr, 0, &data);
            s.barrier("done");
        }
        Side::Active => {
            e.mr.write(0, &data).expect("write MR");
            s.barrier("ready");
            for i in 0..N {
                let sg = [sge(&e.mr, i * LEN, LEN as u32)];
                let wr = if i % 2 == 0 {
                    SendWr::send(i as u64, &sg)
                } else {
                    SendWr::send_with_imm(i as u64, &sg, 0x1000 + i as u32)
                };
                post_send(&e.qp, wr.signaled());
            }
            s.collect(&e.cq, N);
            s.barrier("done");
        }
    }
    s.state(&e.qp);
}

/// An RDMA WRITE of 64 KiB, then a WRITE_WITH_IMM of 64 KiB (128 packets).
pub fn lossy_rc_writes<C: Context>(s: &mut Session<'_, C>) {
    const LEN: usize = 64 * 1024;
    let e = s.rc(2 * LEN + 4096, ALL_REMOTE, |_| {});
    let data = pattern(12, 2 * LEN);
    match s.side {
        Side::Passive => {
            post_recv(&e.qp, 60, &[sge(&e.mr, 2 * LEN, 64)]);
            s.barrier("ready");
            s.collect(&e.cq, 1);
            s.bytes("b[0..128K]", &e.mr, 0, &data);
            s.barrier("done");
        }
        Side::Active => {
            e.mr.write(0, &data).expect("write MR");
            s.barrier("ready");
            let (addr, rkey) = (e.peer.addr, e.peer.rkey);
            post_send(
                &e.qp,
                SendWr::rdma_write(1, &[sge(&e.mr, 0, LEN as u32)], addr, rkey).signaled(),
            );
            let sg = [sge(&e.mr, LEN, LEN as u32)];
            post_send(
                &e.qp,
                SendWr::rdma_write_with_imm(2, &sg, addr + LEN as u64, rkey, 0xabcd).signaled(),
            );
            s.collect(&e.cq, 2);
            s.barrier("done");
        }
    }
    s.state(&e.qp);
}

/// Four RDMA READs of 32 KiB, up to four outstanding (128 response packets).
pub fn lossy_rc_reads<C: Context>(s: &mut Session<'_, C>) {
    const N: usize = 4;
    const LEN: usize = 32 * 1024;
    let e = s.rc(N * LEN, ALL_REMOTE, |p| {
        p.max_rd_atomic = 4;
        p.max_dest_rd_atomic = 4;
    });
    let data = pattern(13, N * LEN);
    match s.side {
        Side::Passive => {
            e.mr.write(0, &data).expect("write MR");
            s.barrier("ready");
            s.barrier("done");
            s.collect(&e.cq, 0);
        }
        Side::Active => {
            s.barrier("ready");
            for i in 0..N {
                let off = (i * LEN) as u64;
                let sg = [sge(&e.mr, i * LEN, LEN as u32)];
                post_send(
                    &e.qp,
                    SendWr::rdma_read(i as u64, &sg, e.peer.addr + off, e.peer.rkey).signaled(),
                );
            }
            s.collect(&e.cq, N);
            s.bytes("a[all]", &e.mr, 0, &data);
            s.barrier("done");
        }
    }
    s.state(&e.qp);
}

/// 24 FETCH_ADDs of 1 (up to four outstanding) and a COMPARE_SWAP of the result: every
/// old value returned once, in order, the count left at the passive side. A lost
/// response makes the requester ask again, and the responder must answer from what it
/// did, not add again.
pub fn lossy_rc_atomics<C: Context>(s: &mut Session<'_, C>) {
    const N: usize = 24;
    let e = s.rc(4096, ALL_REMOTE, |p| {
        p.max_rd_atomic = 4;
        p.max_dest_rd_atomic = 4;
    });
    match s.side {
        Side::Passive => {
            s.barrier("ready");
            s.barrier("done");
            s.collect(&e.cq, 0);
            log_u64(s, "b[0]", &e.mr, 0);
        }
        Side::Active => {
            s.barrier("ready");
            for i in 0..N {
                let sg = [sge(&e.mr, 8 * i, 8)];
                post_send(
                    &e.qp,
                    SendWr::fetch_add(i as u64, &sg, e.peer.addr, e.peer.rkey, 1).signaled(),
                );
            }
            let sg = [sge(&e.mr, 8 * N, 8)];
            post_send(
                &e.qp,
                SendWr::compare_swap(N as u64, &sg, e.peer.addr, e.peer.rkey, N as u64, 1000)
                    .signaled(),
            );
            s.collect(&e.cq, N + 1);
            let olds: Vec<String> = (0..=N)
                .map(|i| read_u64(&e.mr, 8 * i).to_string())
                .collect();
            s.log.line(format!("a old values: {}", olds.join(" ")));
            s.barrier("done");
        }
    }
    s.state(&e.qp);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grh_line_names_the_addresses_and_leaves_out_id_and_checksum() {
        let me = Gid::from_ipv4("10.100.0.1".parse().unwrap());
        let peer = Gid::from_ipv4("10.100.0.20".parse().unwrap());
        let mut grh = [0u8; 40];
        let ip = [
            0x45, 0, 0, 128, 0x12, 0x34, 0x40, 0, 64, 17, 0xab, 0xcd, 10, 100, 0, 20, 10, 100, 0, 1,
        ];
        grh[20..].copy_from_slice(&ip);
        let line = "grh: zero true ver/ihl 0x45 tos 0 len 128 flags/frag 0x4000 ttl 64 proto 17 src peer dst self";
        assert_eq!(grh_line(&grh, me, peer), line);
        grh[24..26].fill(0);
        grh[30..32].fill(0);
        assert_eq!(grh_line(&grh, me, peer), line);
        // Loopback: both addresses are the same, the source is the peer, the destination self.
        assert!(grh_line(&grh, peer, peer).ends_with("src peer dst 10.100.0.1"));
    }

    #[test]
    fn case_names_are_unique() {
        let all = all::<<backend_sim::SimVerbs as verbs_api::Verbs>::Context>();
        let mut names: Vec<&str> = all.iter().map(|(n, _)| *n).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all.len());
    }
}
