//! Memory regions: keys, protection domains, bounds, deregistration; handles are Send+Sync.

mod common;
use backend_sim::{Personality, Sim};
use common::*;
use verbs_api::{AccessFlags, Context, MemoryRegion, QueuePair, RecvWr, SendWr, Sge, WcStatus};

#[test]
fn an_mr_of_another_pd_is_a_protection_error() {
    for (p, want) in [
        (Personality::Mlx5, WcStatus::LocProtErr),
        (Personality::Rxe, WcStatus::LocQpOpErr),
    ] {
        let sim = Sim::new(1);
        let a = node(&sim, 1, p);
        let b = node(&sim, 2, p);
        let (qa, qb) = (ud_qp(&a), ud_qp(&b));
        let other_pd = a.ctx.alloc_pd().unwrap();
        let foreign = a
            .ctx
            .alloc_mr(&other_pd, 4096, AccessFlags::LOCAL_WRITE)
            .unwrap();
        post_recvs(&b, &qb, 0..1);
        let ah = ah(&a, ip(2));
        let sge = [Sge {
            addr: foreign.addr(),
            length: 16,
            lkey: foreign.lkey(),
        }];
        // SAFETY: the SGE lies in `foreign`, alive until the end of the test.
        unsafe {
            qa.post_send(&[SendWr::ud_send(1, &sge, &ah, qb.qp_num(), QKEY).signaled()])
                .unwrap()
        };
        assert_eq!(wait(&sim, &a.cq, 1)[0].status, want, "{p:?}");
    }
}

#[test]
fn a_deregistered_region_is_never_touched_again() {
    let sim = Sim::new(1);
    let a = node(&sim, 1, Personality::Mlx5);
    let b = node(&sim, 2, Personality::Mlx5);
    let (qa, qb) = (ud_qp(&a), ud_qp(&b));
    let mr = b
        .ctx
        .alloc_mr(&b.pd, 4096, AccessFlags::LOCAL_WRITE)
        .unwrap();
    let sge = [Sge {
        addr: mr.addr(),
        length: 4096,
        lkey: mr.lkey(),
    }];
    // SAFETY: the SGE lies in `mr`; dropping `mr` below deregisters its key first, and the
    // simulated NIC checks keys at every access, so the freed memory is never written.
    unsafe { qb.post_recv(&[RecvWr::new(7, &sge)]).unwrap() };
    drop(mr);
    let ah = ah(&a, ip(2));
    let s = [slot_sge(&a, 0, 16)];
    // SAFETY: SGE in a.mr.
    unsafe {
        qa.post_send(&[SendWr::ud_send(1, &s, &ah, qb.qp_num(), QKEY)])
            .unwrap()
    };
    let r = wait(&sim, &b.cq, 1);
    assert_eq!((r[0].wr_id, r[0].status), (7, WcStatus::LocProtErr));
}

#[test]
fn keys_are_distinct_and_ranges_are_checked() {
    let sim = Sim::new(1);
    let a = node(&sim, 1, Personality::Mlx5);
    let m1 = a
        .ctx
        .alloc_mr(&a.pd, 100, AccessFlags::LOCAL_WRITE)
        .unwrap();
    let m2 = a
        .ctx
        .alloc_mr(&a.pd, 100, AccessFlags::LOCAL_WRITE)
        .unwrap();
    assert_ne!(m1.lkey(), m2.lkey());
    assert_eq!(m1.addr() % 4096, 0, "page aligned");
    assert!(m1.write(90, &[0; 11]).is_err());
    assert!(m1.write(90, &[1; 10]).is_ok());
    let mut buf = [0u8; 10];
    m1.read(90, &mut buf).unwrap();
    assert_eq!(buf, [1; 10]);
    let mut user = vec![0u8; 256];
    // SAFETY: `user` outlives `r` and is not referenced while `r` exists.
    let r = unsafe {
        a.ctx.reg_mr(
            &a.pd,
            user.as_mut_ptr(),
            user.len(),
            AccessFlags::LOCAL_WRITE,
        )
    }
    .unwrap();
    assert_eq!(r.len(), 256);
    drop(r);
    user[0] = 1;
}

#[test]
fn handles_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<backend_sim::Sim>();
    check::<backend_sim::verbs::SimVerbs>();
    check::<backend_sim::verbs::SimContext>();
    check::<backend_sim::verbs::SimQp>();
    check::<backend_sim::verbs::SimCq>();
    check::<backend_sim::verbs::SimMr>();
    check::<backend_sim::verbs::SimChannel>();
    check::<backend_sim::verbs::SimSrq>();
    check::<backend_sim::verbs::SimAh>();
    check::<backend_sim::verbs::SimFlow>();
}

/// `ibv_rereg_mr` changes a region in place on mlx5 (its keys kept); rxe in Linux 6.1
/// cannot (EOPNOTSUPP, as `ibv_rereg_mr` fails in the Soft-RoCE VM) and leaves it as
/// it was.
#[test]
fn rereg_changes_access_on_mlx5_and_is_unsupported_on_rxe() {
    for p in [Personality::Mlx5, Personality::Rxe] {
        let sim = Sim::new(1);
        let mut a = node(&sim, 1, p);
        let keys = (a.mr.lkey(), a.mr.rkey());
        // SAFETY: no new range: the region keeps its memory, the simulator's.
        let r = unsafe { a.mr.rereg(None, None, Some(AccessFlags::LOCAL_WRITE)) };
        assert_eq!((a.mr.lkey(), a.mr.rkey()), keys, "{p:?}: keys kept");
        match p {
            Personality::Mlx5 => r.unwrap(),
            Personality::Rxe => {
                let e = r.unwrap_err();
                assert_eq!(e.kind(), verbs_api::ErrorKind::Unsupported, "{e}");
            }
        }
    }
}
