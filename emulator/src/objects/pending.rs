//! The work requests an extended QP's session (`ibv_wr_start` .. `ibv_wr_complete`) has
//! built and not yet posted.

use std::ffi::c_int;

use verbs_api::{MwBindInfo, SendOpcode, Sge};

/// One work request being built.
#[derive(Debug)]
pub struct PendingWr {
    pub wr_id: u64,
    pub flags: u32,
    pub opcode: SendOpcode,
    pub imm: u32,
    pub remote: Remote,
    /// `(AH address, remote QPN, remote Q_Key)` of a UD request.
    pub ud: Option<(usize, u32, u32)>,
    pub sges: Vec<Sge>,
    /// Inline data, copied when set (the program may reuse its buffer at once).
    pub inline: Option<Vec<u8>>,
}

/// Where a request reaches on the remote side, by kind.
#[derive(Debug, Clone, Copy)]
pub enum Remote {
    None,
    Rdma {
        addr: u64,
        rkey: u32,
    },
    Atomic {
        addr: u64,
        rkey: u32,
        compare_add: u64,
        swap: u64,
    },
    /// LOCAL_INV and SEND_WITH_INV.
    Invalidate {
        rkey: u32,
    },
    /// BIND_MW: the window's handle, its new rkey, what it binds to.
    Bind {
        mw: u32,
        rkey: u32,
        info: MwBindInfo,
    },
}

/// The work requests of a session, and the first misuse seen (reported by complete).
#[derive(Debug, Default)]
pub struct Pending {
    pub wrs: Vec<PendingWr>,
    pub error: Option<c_int>,
}
