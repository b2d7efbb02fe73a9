//! `Sim::live_objects` counts every verbs object while it exists and none after the
//! program drops them (the fault swarm's leak check relies on it).

mod common;
use backend_sim::{LiveObjects, Personality, Sim};
use common::*;
use verbs_api::{
    Context, QpInitAttr, QpType, RxHashConf, RxHashFields, WqInitAttr, RX_HASH_FUNC_TOEPLITZ,
};

#[test]
fn objects_are_counted_while_alive_and_gone_after_drop() {
    let sim = Sim::new(3);
    assert_eq!(sim.live_objects(), LiveObjects::default());
    let n = node(&sim, 1, Personality::Mlx5);
    let channel = n.ctx.create_comp_channel().unwrap();
    let qp = n
        .ctx
        .create_qp(&n.pd, &QpInitAttr::new(QpType::Ud, &n.cq, cap()))
        .unwrap();
    let raw = raw_qp(&n);
    assert_eq!(
        sim.live_objects(),
        LiveObjects {
            contexts: 1,
            pds: 1,
            mrs: 1,
            cqs: 1,
            channels: 1,
            srqs: 0,
            qps: 2,
            flows: 0,
            wqs: 0,
            ind_tables: 0,
        }
    );
    assert_eq!(sim.live_objects().total(), 7);
    drop((qp, raw, channel));
    assert_eq!(sim.live_objects().qps, 0);
    // A WQ, its table and an RSS QP over it; the QP keeps the table, the table the WQ.
    let wq = n
        .ctx
        .create_wq(
            &n.pd,
            &n.cq,
            &WqInitAttr {
                max_wr: 4,
                max_sge: 1,
                striding: None,
            },
        )
        .unwrap();
    let table = n.ctx.create_rwq_ind_table(&[&wq]).unwrap();
    let hash = RxHashConf {
        function: RX_HASH_FUNC_TOEPLITZ,
        key: vec![0; 40],
        fields: RxHashFields::empty(),
    };
    let rss = n.ctx.create_rss_qp(&n.pd, &table, &hash).unwrap();
    let live = sim.live_objects();
    assert_eq!((live.wqs, live.ind_tables, live.qps), (1, 1, 1));
    drop((wq, table));
    assert_eq!(sim.live_objects().wqs, 1, "the RSS QP keeps them");
    drop(rss);
    let live = sim.live_objects();
    assert_eq!((live.wqs, live.ind_tables, live.qps), (0, 0, 0));
    drop(n);
    assert_eq!(sim.live_objects(), LiveObjects::default());
}
