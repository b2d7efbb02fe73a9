//! `ibv_rc_pingpong` on verbs-api: RC SEND/RECV ping-pong, interoperating with
//! rdma-core's `ibv_rc_pingpong` (same options, same TCP exchange, same traffic).
//!
//! ```text
//! rc_pingpong -d rxe0 -g 1                 # server
//! rc_pingpong -d rxe0 -g 1 127.0.0.1       # client
//! ```

mod common;

use std::process::ExitCode;

use backend_hw::HwVerbs;
use common::{Args, Dest};
use verbs_api::{
    AccessFlags, AhAttr, CompletionQueue, Context, Error, ErrorKind, GlobalRoute, LinkLayer,
    MemoryRegion, QpCap, QpInitAttr, QpModify, QpState, QpType, QueuePair, QueuePairExt, Result,
    SendFlags, SendWr, Sge, Verbs,
};

fn run(args: &Args) -> Result<()> {
    let verbs = HwVerbs::new();
    let name = match &args.device {
        Some(d) => d.clone(),
        None => verbs
            .devices()?
            .into_iter()
            .next()
            .map(|d| d.name)
            .ok_or_else(|| Error::new(ErrorKind::NoDevice, "rc_pingpong", "No IB devices found"))?,
    };
    let ctx = verbs.open(&name)?;
    let channel = if args.events {
        Some(ctx.create_comp_channel()?)
    } else {
        None
    };
    let pd = ctx.alloc_pd()?;
    let mr = ctx.alloc_mr(&pd, args.size.max(1), AccessFlags::LOCAL_WRITE)?;
    // rdma-core fills its buffer with 0x7b.
    mr.write(0, &vec![0x7b; args.size])?;
    let cq = ctx.create_cq(args.rx_depth + 1, channel.as_ref(), 0)?;
    let cap = QpCap::new(1, args.rx_depth, 1, 1);
    let qp = ctx.create_qp(&pd, &QpInitAttr::new(QpType::Rc, &cq, cap))?;
    let mut send_flags = SendFlags::SIGNALED;
    if qp.cap().max_inline_data as usize >= args.size {
        send_flags |= SendFlags::INLINE;
    }
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
    let routs = common::post_recvs(&qp, &sge, args.rx_depth);
    if routs < args.rx_depth {
        return Err(Error::new(
            ErrorKind::QueueFull,
            "rc_pingpong",
            format!("Couldn't post receive ({routs})"),
        ));
    }
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
    let gid = match args.gid_index {
        Some(i) => ctx.query_gid(args.ib_port, i.into())?,
        None => verbs_api::Gid::ZERO,
    };
    let mine = Dest {
        lid: port.lid,
        qpn: qp.qp_num(),
        psn: common::random_psn(),
        gid,
    };
    println!(
        "  local address:  LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}, GID {}",
        mine.lid,
        mine.qpn,
        mine.psn,
        common::gid_text(&mine.gid)
    );
    let connect = |rem: &Dest| -> Result<()> {
        let mut av = AhAttr {
            dlid: rem.lid,
            sl: args.sl,
            port_num: args.ib_port,
            ..AhAttr::default()
        };
        if rem.gid.interface_id() != 0 {
            av.is_global = true;
            av.grh = GlobalRoute {
                dgid: rem.gid,
                hop_limit: 1,
                sgid_index: args.gid_index.unwrap_or(0),
                ..GlobalRoute::default()
            };
        }
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
    let remote = match &args.server {
        Some(server) => {
            let r = common::client_exchange(server, args.port, &mine)?;
            connect(&r)?;
            r
        }
        None => common::server_exchange(args.port, &mine, connect)?,
    };
    println!(
        "  remote address: LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}, GID {}",
        remote.lid,
        remote.qpn,
        remote.psn,
        common::gid_text(&remote.gid)
    );
    let list = [sge];
    let post_send = || {
        let wr = SendWr::send(common::SEND_WRID, &list).flags(send_flags);
        // SAFETY: the MR lives until the end of `run`, after every completion is polled.
        unsafe { qp.post_send(&[wr]) }
    };
    common::run_loop(
        args,
        &qp,
        &cq,
        channel.as_ref(),
        &sge,
        post_send,
        args.server.is_some(),
        routs,
    )
}

fn main() -> ExitCode {
    common::main("rc_pingpong", 4096, run)
}
