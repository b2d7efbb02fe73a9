//! The QP state machine, exactly as the Linux kernel's `qp_state_table`
//! (drivers/infiniband/core/verbs.c, `ib_modify_qp_is_ok`).
//!
//! Both backends check every modify here first, so the simulator and real hardware reject
//! the same mistakes with the same [`ErrorKind`]: an invalid transition is
//! [`ErrorKind::InvalidState`]; a missing required attribute or an attribute the
//! transition does not take is [`ErrorKind::InvalidArgument`] (the kernel says EINVAL for
//! all three).

use crate::error::{Error, ErrorKind, Result};
use crate::qp::{QpAttrMask as M, QpState, QpType};

/// The attribute rules of one valid transition for one QP type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransitionRule {
    /// Attributes that must be in the mask (besides STATE).
    pub required: M,
    /// Attributes that may be in the mask.
    pub optional: M,
}

const NONE: M = M::empty();

/// Required and optional masks per QP type, in the order RC, UC, UD, RAW_PACKET.
struct Cell {
    from: QpState,
    to: QpState,
    req: [M; 4],
    opt: [M; 4],
}

const fn or(a: M, b: M) -> M {
    M::from_bits_retain(a.bits() | b.bits())
}

const RC_UC_INIT: M = or(or(M::PKEY_INDEX, M::PORT), M::ACCESS_FLAGS);
const UD_INIT: M = or(or(M::PKEY_INDEX, M::PORT), M::QKEY);
const UC_RTR_REQ: M = or(or(M::AV, M::PATH_MTU), or(M::DEST_QPN, M::RQ_PSN));
const RC_RTR_REQ: M = or(UC_RTR_REQ, or(M::MAX_DEST_RD_ATOMIC, M::MIN_RNR_TIMER));
const RC_UC_RTR_OPT: M = or(or(M::ALT_PATH, M::ACCESS_FLAGS), M::PKEY_INDEX);
const UD_QKEY_PKEY: M = or(M::PKEY_INDEX, M::QKEY);
const RC_RTS_REQ: M = or(
    or(or(M::TIMEOUT, M::RETRY_CNT), or(M::RNR_RETRY, M::SQ_PSN)),
    M::MAX_QP_RD_ATOMIC,
);
const CUR_QKEY: M = or(M::CUR_STATE, M::QKEY);
const UC_RTS_OPT: M = or(
    or(M::CUR_STATE, M::ALT_PATH),
    or(M::ACCESS_FLAGS, M::PATH_MIG_STATE),
);
const RC_RTS_OPT: M = or(UC_RTS_OPT, M::MIN_RNR_TIMER);
const UC_SQD_SQD_OPT: M = or(
    or(or(M::AV, M::ALT_PATH), or(M::ACCESS_FLAGS, M::PKEY_INDEX)),
    M::PATH_MIG_STATE,
);
const RC_SQD_SQD_OPT: M = or(
    or(or(M::PORT, M::AV), or(M::TIMEOUT, M::RETRY_CNT)),
    or(
        or(
            or(M::RNR_RETRY, M::MAX_QP_RD_ATOMIC),
            or(M::MAX_DEST_RD_ATOMIC, M::ALT_PATH),
        ),
        or(
            or(M::ACCESS_FLAGS, M::PKEY_INDEX),
            or(M::MIN_RNR_TIMER, M::PATH_MIG_STATE),
        ),
    ),
);

use QpState::{
    Err as ERR, Init as INIT, Reset as RESET, Rtr as RTR, Rts as RTS, Sqd as SQD, Sqe as SQE,
};

const fn plain(from: QpState, to: QpState) -> Cell {
    Cell {
        from,
        to,
        req: [NONE; 4],
        opt: [NONE; 4],
    }
}

/// Every valid transition. A pair of states not listed here is invalid for every type.
const TABLE: &[Cell] = &[
    plain(RESET, RESET),
    Cell {
        from: RESET,
        to: INIT,
        req: [RC_UC_INIT, RC_UC_INIT, UD_INIT, M::PORT],
        opt: [NONE; 4],
    },
    plain(INIT, RESET),
    plain(INIT, ERR),
    Cell {
        from: INIT,
        to: INIT,
        req: [NONE; 4],
        opt: [RC_UC_INIT, RC_UC_INIT, UD_INIT, NONE],
    },
    Cell {
        from: INIT,
        to: RTR,
        req: [RC_RTR_REQ, UC_RTR_REQ, NONE, NONE],
        opt: [RC_UC_RTR_OPT, RC_UC_RTR_OPT, UD_QKEY_PKEY, NONE],
    },
    plain(RTR, RESET),
    plain(RTR, ERR),
    Cell {
        from: RTR,
        to: RTS,
        req: [RC_RTS_REQ, M::SQ_PSN, M::SQ_PSN, NONE],
        opt: [RC_RTS_OPT, UC_RTS_OPT, CUR_QKEY, M::RATE_LIMIT],
    },
    plain(RTS, RESET),
    plain(RTS, ERR),
    Cell {
        from: RTS,
        to: RTS,
        req: [NONE; 4],
        opt: [RC_RTS_OPT, UC_RTS_OPT, CUR_QKEY, M::RATE_LIMIT],
    },
    Cell {
        from: RTS,
        to: SQD,
        req: [NONE; 4],
        opt: [
            M::EN_SQD_ASYNC_NOTIFY,
            M::EN_SQD_ASYNC_NOTIFY,
            M::EN_SQD_ASYNC_NOTIFY,
            NONE,
        ],
    },
    plain(SQD, RESET),
    plain(SQD, ERR),
    Cell {
        from: SQD,
        to: RTS,
        req: [NONE; 4],
        opt: [RC_RTS_OPT, UC_RTS_OPT, CUR_QKEY, NONE],
    },
    Cell {
        from: SQD,
        to: SQD,
        req: [NONE; 4],
        opt: [RC_SQD_SQD_OPT, UC_SQD_SQD_OPT, UD_QKEY_PKEY, NONE],
    },
    plain(SQE, RESET),
    plain(SQE, ERR),
    Cell {
        from: SQE,
        to: RTS,
        req: [NONE; 4],
        opt: [NONE, or(M::CUR_STATE, M::ACCESS_FLAGS), CUR_QKEY, NONE],
    },
    plain(ERR, RESET),
    plain(ERR, ERR),
];

const fn type_index(t: QpType) -> usize {
    match t {
        QpType::Rc => 0,
        QpType::Uc => 1,
        QpType::Ud => 2,
        QpType::RawPacket => 3,
    }
}

/// The rule for `from -> to` on a QP of type `qp_type`, or `None` if the transition is
/// not in the kernel's table.
pub fn transition_rule(qp_type: QpType, from: QpState, to: QpState) -> Option<TransitionRule> {
    let i = type_index(qp_type);
    TABLE
        .iter()
        .find(|c| c.from == from && c.to == to)
        .map(|c| TransitionRule {
            required: c.req[i],
            optional: c.opt[i],
        })
}

/// Checks a modify exactly as `ib_modify_qp_is_ok` does.
///
/// `current` is the QP's state (or the caller's `cur_qp_state` when `mask` has CUR_STATE);
/// `target` is the requested state (the current one when `mask` lacks STATE).
///
/// # Errors
/// - [`ErrorKind::InvalidState`] when `current -> target` is not a valid transition (or
///   either state is UNKNOWN);
/// - [`ErrorKind::InvalidArgument`] when CUR_STATE is given outside RTR/RTS/SQD/SQE, when a
///   required attribute is missing, or when the mask has an attribute the transition does
///   not accept.
pub fn check_modify(qp_type: QpType, current: QpState, target: QpState, mask: M) -> Result<()> {
    const OP: &str = "ibv_modify_qp";
    let invalid = |msg: String| Err(Error::new(ErrorKind::InvalidArgument, OP, msg).with_errno(22));
    if mask.contains(M::CUR_STATE) && !matches!(current, RTR | RTS | SQD | SQE) {
        return invalid(format!(
            "CUR_STATE is only accepted in RTR, RTS, SQD or SQE, not in {current}"
        ));
    }
    let Some(rule) = transition_rule(qp_type, current, target) else {
        return Err(Error::new(
            ErrorKind::InvalidState,
            OP,
            format!("{qp_type} QP cannot move from {current} to {target}"),
        )
        .with_errno(22));
    };
    let missing = rule.required - mask;
    if !missing.is_empty() {
        return invalid(format!(
            "{qp_type} {current}->{target} requires attributes {} that the mask lacks",
            mask_names(missing)
        ));
    }
    let extra = mask - (rule.required | rule.optional | M::STATE);
    if !extra.is_empty() {
        return invalid(format!(
            "{qp_type} {current}->{target} does not accept attributes {}",
            mask_names(extra)
        ));
    }
    Ok(())
}

/// The names of the bits of `mask`, joined by `|` (e.g. `PATH_MTU|DEST_QPN`).
pub fn mask_names(mask: M) -> String {
    let names: Vec<&str> = mask.iter_names().map(|(n, _)| n).collect();
    if names.is_empty() {
        "(none)".into()
    } else {
        names.join("|")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel's table written out independently, as text, one line per valid cell:
    /// `from to type required optional` (`-` for none). Every (type, from, to) not listed
    /// must be rejected.
    const EXPECTED: &str = "
RESET RESET RC - -
RESET RESET UC - -
RESET RESET UD - -
RESET RESET RAW_PACKET - -
RESET INIT RC PKEY_INDEX|PORT|ACCESS_FLAGS -
RESET INIT UC PKEY_INDEX|PORT|ACCESS_FLAGS -
RESET INIT UD PKEY_INDEX|PORT|QKEY -
RESET INIT RAW_PACKET PORT -
INIT RESET * - -
INIT ERR * - -
INIT INIT RC - PKEY_INDEX|PORT|ACCESS_FLAGS
INIT INIT UC - PKEY_INDEX|PORT|ACCESS_FLAGS
INIT INIT UD - PKEY_INDEX|PORT|QKEY
INIT INIT RAW_PACKET - -
INIT RTR RC AV|PATH_MTU|DEST_QPN|RQ_PSN|MAX_DEST_RD_ATOMIC|MIN_RNR_TIMER ALT_PATH|ACCESS_FLAGS|PKEY_INDEX
INIT RTR UC AV|PATH_MTU|DEST_QPN|RQ_PSN ALT_PATH|ACCESS_FLAGS|PKEY_INDEX
INIT RTR UD - PKEY_INDEX|QKEY
INIT RTR RAW_PACKET - -
RTR RESET * - -
RTR ERR * - -
RTR RTS RC TIMEOUT|RETRY_CNT|RNR_RETRY|SQ_PSN|MAX_QP_RD_ATOMIC CUR_STATE|ALT_PATH|ACCESS_FLAGS|MIN_RNR_TIMER|PATH_MIG_STATE
RTR RTS UC SQ_PSN CUR_STATE|ALT_PATH|ACCESS_FLAGS|PATH_MIG_STATE
RTR RTS UD SQ_PSN CUR_STATE|QKEY
RTR RTS RAW_PACKET - RATE_LIMIT
RTS RESET * - -
RTS ERR * - -
RTS RTS RC - CUR_STATE|ACCESS_FLAGS|ALT_PATH|PATH_MIG_STATE|MIN_RNR_TIMER
RTS RTS UC - CUR_STATE|ACCESS_FLAGS|ALT_PATH|PATH_MIG_STATE
RTS RTS UD - CUR_STATE|QKEY
RTS RTS RAW_PACKET - RATE_LIMIT
RTS SQD RC - EN_SQD_ASYNC_NOTIFY
RTS SQD UC - EN_SQD_ASYNC_NOTIFY
RTS SQD UD - EN_SQD_ASYNC_NOTIFY
RTS SQD RAW_PACKET - -
SQD RESET * - -
SQD ERR * - -
SQD RTS RC - CUR_STATE|ALT_PATH|ACCESS_FLAGS|MIN_RNR_TIMER|PATH_MIG_STATE
SQD RTS UC - CUR_STATE|ALT_PATH|ACCESS_FLAGS|PATH_MIG_STATE
SQD RTS UD - CUR_STATE|QKEY
SQD RTS RAW_PACKET - -
SQD SQD RC - PORT|AV|TIMEOUT|RETRY_CNT|RNR_RETRY|MAX_QP_RD_ATOMIC|MAX_DEST_RD_ATOMIC|ALT_PATH|ACCESS_FLAGS|PKEY_INDEX|MIN_RNR_TIMER|PATH_MIG_STATE
SQD SQD UC - AV|ALT_PATH|ACCESS_FLAGS|PKEY_INDEX|PATH_MIG_STATE
SQD SQD UD - PKEY_INDEX|QKEY
SQD SQD RAW_PACKET - -
SQE RESET * - -
SQE ERR * - -
SQE RTS RC - -
SQE RTS UC - CUR_STATE|ACCESS_FLAGS
SQE RTS UD - CUR_STATE|QKEY
SQE RTS RAW_PACKET - -
ERR RESET * - -
ERR ERR * - -
";

    fn parse_state(s: &str) -> QpState {
        *QpState::ALL
            .iter()
            .find(|q| q.as_str() == s)
            .expect("state name")
    }

    fn parse_mask(s: &str) -> M {
        if s == "-" {
            return M::empty();
        }
        s.split('|')
            .map(|n| M::from_name(n).expect("mask name"))
            .collect()
    }

    const TYPES: [QpType; 4] = [QpType::Rc, QpType::Uc, QpType::Ud, QpType::RawPacket];
    const STATES: [QpState; 7] = [RESET, INIT, RTR, RTS, SQD, SQE, ERR];

    fn expected(t: QpType, from: QpState, to: QpState) -> Option<(M, M)> {
        EXPECTED
            .lines()
            .filter(|l| !l.trim().is_empty())
            .find_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                let type_ok = f[2] == "*" || f[2] == t.as_str();
                (parse_state(f[0]) == from && parse_state(f[1]) == to && type_ok)
                    .then(|| (parse_mask(f[3]), parse_mask(f[4])))
            })
    }

    /// Every cell of every QP type: valid cells accept exactly their required mask plus
    /// any optional bits, reject each missing required bit and each foreign bit; invalid
    /// cells are rejected as InvalidState whatever the mask.
    #[test]
    fn every_cell_of_every_type_matches_the_kernel_table() {
        let all_bits = M::all();
        let mut valid_cells = 0;
        for t in TYPES {
            for from in STATES {
                for to in STATES {
                    let rule = transition_rule(t, from, to);
                    let exp = expected(t, from, to);
                    assert_eq!(
                        rule.map(|r| (r.required, r.optional)),
                        exp,
                        "{t} {from}->{to}"
                    );
                    let base = M::STATE;
                    match exp {
                        None => {
                            let e = check_modify(t, from, to, base).unwrap_err();
                            assert_eq!(e.kind(), ErrorKind::InvalidState, "{t} {from}->{to}");
                        }
                        Some((req, opt)) => {
                            valid_cells += 1;
                            let ok = base | req;
                            assert!(check_modify(t, from, to, ok).is_ok(), "{t} {from}->{to}");
                            assert!(
                                check_modify(t, from, to, ok | opt).is_ok(),
                                "{t} {from}->{to}"
                            );
                            for bit in opt.iter() {
                                assert!(
                                    check_modify(t, from, to, ok | bit).is_ok(),
                                    "{t} {from}->{to} opt {bit:?}"
                                );
                            }
                            for bit in req.iter() {
                                let e = check_modify(t, from, to, ok - bit).unwrap_err();
                                assert_eq!(e.kind(), ErrorKind::InvalidArgument);
                                assert!(e.message().contains("requires"), "{}", e.message());
                            }
                            for bit in (all_bits - req - opt - M::STATE).iter() {
                                let e = check_modify(t, from, to, ok | bit).unwrap_err();
                                assert_eq!(
                                    e.kind(),
                                    ErrorKind::InvalidArgument,
                                    "{t} {from}->{to} extra {bit:?}"
                                );
                            }
                        }
                    }
                }
            }
        }
        // 22 valid (from, to) pairs, each for 4 types.
        assert_eq!(valid_cells, 22 * 4);
    }

    #[test]
    fn cur_state_only_from_rtr_rts_sqd_sqe() {
        let e = check_modify(QpType::Ud, INIT, INIT, M::STATE | M::CUR_STATE).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
        assert!(check_modify(QpType::Ud, RTS, RTS, M::STATE | M::CUR_STATE).is_ok());
    }

    #[test]
    fn unknown_state_is_invalid() {
        let e = check_modify(QpType::Rc, QpState::Unknown, RESET, M::STATE).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidState);
    }

    #[test]
    fn messages_name_the_attributes() {
        let e = check_modify(QpType::Rc, INIT, RTR, M::STATE | M::AV).unwrap_err();
        assert!(e.message().contains("PATH_MTU"), "{}", e.message());
        assert_eq!(e.errno(), Some(22));
        let e = check_modify(QpType::Ud, RESET, INIT, M::STATE | UD_INIT | M::AV).unwrap_err();
        assert!(
            e.message().contains("does not accept attributes AV"),
            "{}",
            e.message()
        );
    }
}
