//! `ibv_rc_pingpong` on verbs-api: RC SEND/RECV ping-pong, interoperating with
//! rdma-core's `ibv_rc_pingpong` (same options, same TCP exchange, same traffic).
//!
//! ```text
//! rc_pingpong -d rxe0 -g 1                 # server
//! rc_pingpong -d rxe0 -g 1 127.0.0.1       # client
//! ```

mod common;

use std::process::ExitCode;

use common::{Args, Dest};
use verbs_api::{
    AccessFlags, CompletionQueue, Context, Error, ErrorKind, LinkLayer, MemoryRegion, QpModify,
    QpState, QpType, QueuePair, QueuePairExt, Result, SendWr, Sge,
};

fn run(args: &Args) -> Result<()> {
    let ctx = common::open_device("rc_pingpong", args)?;
    let channel = if args.events {
        Some(ctx.create_comp_channel()?)
    } else {
        None
    };
    let pd = ctx.alloc_pd()?;
    let mr = ctx.alloc_mr(&pd, args.size.max(1), AccessFlags::LOCAL_WRITE)?;
    // rdma-core fills its buffer with 0x7b.
    mr.write(0, &vec![0x7b; args.size])?;
    let (cq, qp, send_flags) = common::queues(&ctx, &pd, channel.as_ref(), args, QpType::Rc)?;
    qp.modify_with(
        &QpModify::to(QpState::Init)
            .pkey_index(0)
            .port(args.ib_port)
            .access(AccessFlags::empty()),
    )?;
    let sge = Sge {
        addr: mr.addr(),
        length: u32::try_from(args.size).unwrap_or(u32::MAX),
        lkey: mr.lkey(),
    };
    let routs = common::post_initial_recvs("rc_pingpong", &qp, &sge, args)?;
    if args.events {
        cq.req_notify(false)?;
    }
    let port = ctx.query_port(args.ib_port)?;
    if port.link_layer != LinkLayer::Ethernet && port.lid == 0 {
        return Err(Error::new(
            ErrorKind::InvalidState,
            "rc_pingpong",
            "Couldn't get local LID",
        ));
    }
    let mine = common::local_dest(&ctx, args, port.lid, qp.qp_num())?;
    common::print_address("local address: ", &mine, ',');
    let connect = |rem: &Dest| -> Result<()> {
        let av = common::av_to(args, rem);
        qp.modify_with(
            &QpModify::to(QpState::Rtr)
                .av(av)
                .path_mtu(args.mtu)
                .dest_qpn(rem.qpn)
                .rq_psn(rem.psn)
                .max_dest_rd_atomic(1)
                .min_rnr_timer(12),
        )?;
        qp.modify_with(
            &QpModify::to(QpState::Rts)
                .timeout(14)
                .retry_cnt(7)
                .rnr_retry(7)
                .sq_psn(mine.psn)
                .max_rd_atomic(1),
        )
    };
    let remote = common::exchange(args, &mine, connect)?;
    common::print_address("remote address:", &remote, ',');
    let list = [sge];
    let post_send = || {
        let wr = SendWr::send(common::SEND_WRID, &list).flags(send_flags);
        // SAFETY: the MR lives until the end of `run`, after every completion is polled.
        unsafe { qp.post_send(&[wr]) }
    };
    common::run_loop(args, &qp, &cq, channel.as_ref(), &sge, post_send, routs)
}

fn main() -> ExitCode {
    common::main("rc_pingpong", 4096, run)
}
