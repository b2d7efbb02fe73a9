//! Work requests as the NIC keeps them once posted: scatter-gather lists, receive WQEs,
//! send WRs with their address handle resolved, and the plain completion they end in.

use crate::verbs::memory::BindWqe;
use verbs_api::{AhAttr, Completion, SendFlags, SendOpcode, Sge, WcOpcode, WcStatus};

/// Scatter-gather lists of posted work, inline for the common short case.
#[derive(Debug, Clone)]
pub(crate) enum SgeList {
    Inline([Sge; 2], u8),
    Heap(Box<[Sge]>),
}

impl SgeList {
    pub fn new(s: &[Sge]) -> Self {
        if s.len() <= 2 {
            let mut a = [Sge::default(); 2];
            a[..s.len()].copy_from_slice(s);
            SgeList::Inline(a, s.len() as u8)
        } else {
            SgeList::Heap(s.into())
        }
    }
    pub fn as_slice(&self) -> &[Sge] {
        match self {
            SgeList::Inline(a, n) => &a[..usize::from(*n)],
            SgeList::Heap(b) => b,
        }
    }
}

/// A posted receive.
#[derive(Debug, Clone)]
pub(crate) struct RecvWqe {
    pub wr_id: u64,
    pub sges: SgeList,
}

/// The parts of a send WR the engine keeps (the AH resolved to its attributes).
#[derive(Debug, Clone)]
pub(crate) struct WrCopy {
    pub wr_id: u64,
    pub opcode: SendOpcode,
    pub flags: SendFlags,
    pub imm: u32,
    pub sges: SgeList,
    pub rdma: Option<(u64, u32)>,
    pub atomic: Option<(u64, u32, u64, u64)>,
    pub ud: Option<UdDest>,
    /// Inline data captured at post time (RC keeps it for retransmission).
    pub inline: Option<Vec<u8>>,
    /// LOCAL_INV and SEND_WITH_INV: the rkey to invalidate.
    pub inv: Option<u32>,
    /// BIND_MW: the bind.
    pub bind: Option<BindWqe>,
}

/// Where a UD send goes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct UdDest {
    pub ah: AhAttr,
    pub remote_qpn: u32,
    pub remote_qkey: u32,
}

/// A completion with the fields every completion has; the rest zero. An error
/// completion's opcode is undefined (man ibv_poll_cq): rxe leaves it 0 (SEND), mlx5 does
/// not set it, so it is 0 here.
pub(crate) fn completion(wr_id: u64, status: WcStatus, opcode: WcOpcode, qpn: u32) -> Completion {
    Completion {
        wr_id,
        status,
        opcode: if status.is_success() {
            opcode
        } else {
            WcOpcode::Send
        },
        qp_num: qpn,
        ..Completion::default()
    }
}
