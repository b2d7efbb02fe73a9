//! `ibv_ud_pingpong` on verbs-api: UD SEND/RECV ping-pong (receives carry the 40-byte
//! GRH), interoperating with rdma-core's `ibv_ud_pingpong` (same options, same TCP
//! exchange, same traffic).
//!
//! ```text
//! ud_pingpong -d rxe0 -g 1 -s 1000                 # server
//! ud_pingpong -d rxe0 -g 1 -s 1000 127.0.0.1       # client
//! ```

mod common;

use std::process::ExitCode;

use common::{Args, Dest};
use verbs_api::{
    AccessFlags, CompletionQueue, Context, Error, ErrorKind, MemoryRegion, QpModify, QpState,
    QpType, QueuePair, QueuePairExt, Result, SendWr, Sge, GRH_LEN,
};

/// The Q_Key rdma-core's example uses.
const QKEY: u32 = 0x1111_1111;

fn run(args: &Args) -> Result<()> {
    let ctx = common::open_device("ud_pingpong", args)?;
    let port = ctx.query_port(args.ib_port)?;
    let mtu = port.active_mtu.bytes() as usize;
    if args.size > mtu {
        return Err(Error::new(
            ErrorKind::InvalidArgument,
            "ud_pingpong",
            format!("Requested size larger than port MTU ({mtu})"),
        ));
    }
    let channel = if args.events {
        Some(ctx.create_comp_channel()?)
    } else {
        None
    };
    let pd = ctx.alloc_pd()?;
    let mr = ctx.alloc_mr(&pd, args.size + GRH_LEN, AccessFlags::LOCAL_WRITE)?;
    mr.write(0, &vec![0x7b; args.size + GRH_LEN])?;
    let (cq, qp, send_flags) = common::queues(&ctx, &pd, channel.as_ref(), args, QpType::Ud)?;
    qp.modify_with(
        &QpModify::to(QpState::Init)
            .pkey_index(0)
            .port(args.ib_port)
            .qkey(QKEY),
    )?;
    let recv_sge = Sge {
        addr: mr.addr(),
        length: u32::try_from(args.size + GRH_LEN).unwrap_or(u32::MAX),
        lkey: mr.lkey(),
    };
    let routs = common::post_initial_recvs("ud_pingpong", &qp, &recv_sge, args)?;
    if args.events {
        cq.req_notify(false)?;
    }
    let mine = common::local_dest(&ctx, args, port.lid, qp.qp_num())?;
    common::print_address("local address: ", &mine, ':');
    let ah_slot = std::cell::RefCell::new(None);
    let connect = |rem: &Dest| -> Result<()> {
        qp.modify_with(&QpModify::to(QpState::Rtr))?;
        qp.modify_with(&QpModify::to(QpState::Rts).sq_psn(mine.psn))?;
        let av = common::av_to(args, rem);
        *ah_slot.borrow_mut() = Some(ctx.create_ah(&pd, &av)?);
        Ok(())
    };
    let remote = common::exchange(args, &mine, connect)?;
    common::print_address("remote address:", &remote, ',');
    let ah = ah_slot
        .into_inner()
        .ok_or_else(|| Error::new(ErrorKind::InvalidState, "ud_pingpong", "no address handle"))?;
    let list = [Sge {
        addr: mr.addr() + GRH_LEN as u64,
        length: u32::try_from(args.size).unwrap_or(u32::MAX),
        lkey: mr.lkey(),
    }];
    let post_send = || {
        let wr = SendWr::ud_send(common::SEND_WRID, &list, &ah, remote.qpn, QKEY).flags(send_flags);
        // SAFETY: the MR and the AH live until the end of `run`, after every completion.
        unsafe { qp.post_send(&[wr]) }
    };
    common::run_loop(
        args,
        &qp,
        &cq,
        channel.as_ref(),
        &recv_sge,
        post_send,
        routs,
    )
}

fn main() -> ExitCode {
    common::main("ud_pingpong", 2048, run)
}
