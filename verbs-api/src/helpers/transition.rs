//! Bringing a QP up RESET → INIT → RTR → RTS with exactly the attributes its type
//! requires (per the kernel's state table), and posting with automatic transition.

use crate::pool::{BatchRejected, Rejected, SendParams, SlotPool, SlotToken};
use crate::traits::{Context, QueuePair, QueuePairExt};
use crate::{
    AccessFlags, AhAttr, Error, ErrorKind, Mtu, QpModify, QpState, QpType, Result, WrDetail,
};

/// The remote end of a connected (RC/UC) QP, as exchanged out of band.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteQp {
    /// Its QP number.
    pub qpn: u32,
    /// Its starting send PSN (our receive PSN).
    pub psn: u32,
    /// How to reach it.
    pub av: AhAttr,
}

/// Everything any QP type needs on its way to RTS; each transition takes what its type
/// requires. Defaults are those of rdma-core's pingpong examples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectParams {
    /// Port (1-based).
    pub port: u8,
    /// P_Key index.
    pub pkey_index: u16,
    /// Q_Key (UD).
    pub qkey: u32,
    /// Remote access allowed (RC, UC).
    pub access: AccessFlags,
    /// The peer (RC, UC).
    pub remote: Option<RemoteQp>,
    /// Path MTU (RC, UC).
    pub path_mtu: Mtu,
    /// Our starting send PSN.
    pub sq_psn: u32,
    /// Minimum RNR NAK timer code (RC).
    pub min_rnr_timer: u8,
    /// ACK timeout code (RC).
    pub timeout: u8,
    /// Transport retries (RC).
    pub retry_cnt: u8,
    /// RNR retries (RC; 7 = infinite).
    pub rnr_retry: u8,
    /// Outstanding RDMA READ/atomic as requester (RC).
    pub max_rd_atomic: u8,
    /// Outstanding RDMA READ/atomic as responder (RC).
    pub max_dest_rd_atomic: u8,
}

impl Default for ConnectParams {
    fn default() -> Self {
        ConnectParams {
            port: 1,
            pkey_index: 0,
            qkey: 0x1111_1111,
            access: AccessFlags::empty(),
            remote: None,
            path_mtu: Mtu::Mtu1024,
            sq_psn: 0,
            min_rnr_timer: 12,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            max_rd_atomic: 1,
            max_dest_rd_atomic: 1,
        }
    }
}

/// The modify that takes a QP of `qp_type` from the state before `to` to `to`.
///
/// # Errors
/// [`ErrorKind::InvalidArgument`] when an RC/UC QP goes to RTR without
/// [`ConnectParams::remote`]; [`ErrorKind::InvalidState`] for a target other than INIT,
/// RTR or RTS.
pub fn step(qp_type: QpType, to: QpState, p: &ConnectParams) -> Result<QpModify> {
    let connected = matches!(qp_type, QpType::Rc | QpType::Uc);
    Ok(match to {
        QpState::Init => {
            let m = QpModify::to(QpState::Init).port(p.port);
            match qp_type {
                QpType::RawPacket => m,
                QpType::Ud => m.pkey_index(p.pkey_index).qkey(p.qkey),
                QpType::Rc | QpType::Uc => m.pkey_index(p.pkey_index).access(p.access),
            }
        }
        QpState::Rtr if connected => {
            let r = p.remote.ok_or_else(|| {
                Error::new(
                    ErrorKind::InvalidArgument,
                    "bring_up",
                    format!("{qp_type} QP needs the remote QP to reach RTR"),
                )
            })?;
            let m = QpModify::to(QpState::Rtr)
                .av(r.av)
                .path_mtu(p.path_mtu)
                .dest_qpn(r.qpn)
                .rq_psn(r.psn);
            if qp_type == QpType::Rc {
                m.max_dest_rd_atomic(p.max_dest_rd_atomic)
                    .min_rnr_timer(p.min_rnr_timer)
            } else {
                m
            }
        }
        QpState::Rtr => QpModify::to(QpState::Rtr),
        QpState::Rts => match qp_type {
            QpType::RawPacket => QpModify::to(QpState::Rts),
            QpType::Ud | QpType::Uc => QpModify::to(QpState::Rts).sq_psn(p.sq_psn),
            QpType::Rc => QpModify::to(QpState::Rts)
                .sq_psn(p.sq_psn)
                .timeout(p.timeout)
                .retry_cnt(p.retry_cnt)
                .rnr_retry(p.rnr_retry)
                .max_rd_atomic(p.max_rd_atomic),
        },
        other => {
            return Err(Error::new(
                ErrorKind::InvalidState,
                "bring_up",
                format!("bring_up goes to INIT, RTR or RTS, not {other}"),
            ))
        }
    })
}

fn rank(s: QpState) -> Option<u8> {
    match s {
        QpState::Reset => Some(0),
        QpState::Init => Some(1),
        QpState::Rtr => Some(2),
        QpState::Rts => Some(3),
        _ => None,
    }
}

/// Moves `qp` forward through RESET → INIT → RTR → RTS until it reaches `target`; does
/// nothing if it is already there or beyond.
///
/// # Errors
/// [`ErrorKind::InvalidState`] when the QP is in SQD, SQE or ERR (move it to RESET
/// first) or `target` is not INIT, RTR or RTS; the modify's errors.
pub fn bring_up<Q: QueuePair>(qp: &Q, target: QpState, p: &ConnectParams) -> Result<()> {
    let want = rank(target).filter(|&r| r > 0).ok_or_else(|| {
        Error::new(
            ErrorKind::InvalidState,
            "bring_up",
            format!("bring_up goes to INIT, RTR or RTS, not {target}"),
        )
    })?;
    let now = qp.state()?;
    let mut have = rank(now).ok_or_else(|| {
        Error::new(
            ErrorKind::InvalidState,
            "bring_up",
            format!("QP {} is in {now}; move it to RESET first", qp.qp_num()),
        )
    })?;
    while have < want {
        have += 1;
        let next = [QpState::Reset, QpState::Init, QpState::Rtr, QpState::Rts][usize::from(have)];
        qp.modify_with(&step(qp.qp_type(), next, p)?)?;
    }
    Ok(())
}

/// Posts receives into `tokens`, first moving a QP in RESET to INIT (receives may be
/// posted from INIT on).
///
/// # Errors
/// The transition's error (with every token handed back), or the post's.
pub fn post_recv_ready<C: Context>(
    pool: &SlotPool<C>,
    qp: &C::Qp,
    tokens: Vec<SlotToken>,
    p: &ConnectParams,
) -> Result<usize, BatchRejected> {
    if let Err(error) = bring_up(qp, QpState::Init, p) {
        return Err(BatchRejected {
            error,
            posted: 0,
            tokens,
        });
    }
    pool.post_recv_batch(qp, tokens)
}

/// Sends the first `len` bytes of `token` (signaled), first moving the QP to RTS.
///
/// # Errors
/// The transition's error or the post's, with the token handed back.
pub fn post_send_ready<C: Context>(
    pool: &SlotPool<C>,
    qp: &C::Qp,
    token: SlotToken,
    len: usize,
    detail: WrDetail<'_, C::Ah>,
    p: &ConnectParams,
) -> Result<(), Rejected> {
    if let Err(error) = bring_up(qp, QpState::Rts, p) {
        return Err(Rejected { error, token });
    }
    pool.post_send(qp, token, len, SendParams::send(detail))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state_table::check_modify;

    /// Every step this helper builds passes the kernel's table, for every type.
    #[test]
    fn steps_satisfy_the_state_table() {
        let remote = RemoteQp {
            qpn: 5,
            psn: 7,
            av: AhAttr::default(),
        };
        let p = ConnectParams {
            remote: Some(remote),
            ..ConnectParams::default()
        };
        for t in [QpType::Rc, QpType::Uc, QpType::Ud, QpType::RawPacket] {
            let path = [QpState::Reset, QpState::Init, QpState::Rtr, QpState::Rts];
            for w in path.windows(2) {
                let m = step(t, w[1], &p).unwrap();
                check_modify(t, w[0], w[1], m.mask).unwrap_or_else(|e| panic!("{t} {}: {e}", w[1]));
            }
        }
        let e = step(QpType::Rc, QpState::Rtr, &ConnectParams::default()).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert_eq!(
            step(QpType::Ud, QpState::Err, &p).unwrap_err().kind(),
            ErrorKind::InvalidState
        );
    }
}
