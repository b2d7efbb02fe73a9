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

use backend_hw::HwVerbs;
use common::{Args, Dest};
use verbs_api::{
    AccessFlags, AhAttr, CompletionQueue, Context, Error, ErrorKind, GlobalRoute, MemoryRegion,
    QpCap, QpInitAttr, QpModify, QpState, QpType, QueuePair, QueuePairExt, Result, SendFlags,
    SendWr, Sge, Verbs, GRH_LEN,
};

/// The Q_Key rdma-core's example uses.
const QKEY: u32 = 0x1111_1111;

fn run(args: &Args) -> Result<()> {
    let verbs = HwVerbs::new();
    let name = match &args.device {
        Some(d) => d.clone(),
        None => verbs
            .devices()?
            .into_iter()
            .next()
            .map(|d| d.name)
            .ok_or_else(|| Error::new(ErrorKind::NoDevice, "ud_pingpong", "No IB devices found"))?,
    };
    let ctx = verbs.open(&name)?;
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
    let cq = ctx.create_cq(args.rx_depth + 1, channel.as_ref(), 0)?;
    let cap = QpCap::new(1, args.rx_depth, 1, 1);
    let qp = ctx.create_qp(&pd, &QpInitAttr::new(QpType::Ud, &cq, cap))?;
    let mut send_flags = SendFlags::SIGNALED;
    if qp.cap().max_inline_data as usize >= args.size {
        send_flags |= SendFlags::INLINE;
    }
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
    let routs = common::post_recvs(&qp, &recv_sge, args.rx_depth);
    if routs < args.rx_depth {
        return Err(Error::new(
            ErrorKind::QueueFull,
            "ud_pingpong",
            format!("Couldn't post receive ({routs})"),
        ));
    }
    if args.events {
        cq.req_notify(false)?;
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
        "  local address:  LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}: GID {}",
        mine.lid,
        mine.qpn,
        mine.psn,
        common::gid_text(&mine.gid)
    );
    let ah_slot = std::cell::RefCell::new(None);
    let connect = |rem: &Dest| -> Result<()> {
        qp.modify_with(&QpModify::to(QpState::Rtr))?;
        qp.modify_with(&QpModify::to(QpState::Rts).sq_psn(mine.psn))?;
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
        *ah_slot.borrow_mut() = Some(ctx.create_ah(&pd, &av)?);
        Ok(())
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
        args.server.is_some(),
        routs,
    )
}

fn main() -> ExitCode {
    common::main("ud_pingpong", 2048, run)
}
