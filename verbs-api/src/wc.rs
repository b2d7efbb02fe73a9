//! Work completions: what a poll of a completion queue returns.
//!
//! A completion's status is data, never an `Err`: generic code inspects
//! [`Completion::status`] and decides, exactly as with `struct ibv_wc`.

use bitflags::bitflags;

use crate::macros::verbs_enum;

verbs_enum! {
    /// `enum ibv_wc_status`: the outcome of one work request.
    pub enum WcStatus: u32 {
        /// The work request completed successfully.
        Success = 0 => "success",
        /// Local length error: a receive buffer too small, or a message too long.
        LocLenErr = 1 => "local length error",
        /// Local QP operation error: an internal inconsistency of the QP.
        LocQpOpErr = 2 => "local QP operation error",
        /// Local EE context operation error (RD only).
        LocEecOpErr = 3 => "local EE context operation error",
        /// Local protection error: bad lkey, or an SGE outside its memory region.
        LocProtErr = 4 => "local protection error",
        /// The QP entered the error state and flushed this outstanding request.
        WrFlushErr = 5 => "Work Request Flushed Error",
        /// Memory window bind error.
        MwBindErr = 6 => "memory management operation error",
        /// Unexpected transport response.
        BadRespErr = 7 => "bad response error",
        /// Local access error (e.g. a protection error on an incoming RDMA write with immediate).
        LocAccessErr = 8 => "local access error",
        /// The responder detected an invalid request (bad opcode, message too long).
        RemInvReqErr = 9 => "remote invalid request error",
        /// The responder detected an access violation: bad rkey, missing access, out of bounds.
        RemAccessErr = 10 => "remote access error",
        /// The responder could not complete the operation.
        RemOpErr = 11 => "remote operation error",
        /// The transport retry counter was exceeded (no ACK in time, retry_cnt times).
        RetryExcErr = 12 => "transport retry counter exceeded",
        /// The RNR NAK retry counter was exceeded (no receive posted at the responder).
        RnrRetryExcErr = 13 => "RNR retry counter exceeded",
        /// Local RDD violation (RD only).
        LocRddViolErr = 14 => "local RDD violation error",
        /// Remote invalid RD request (RD only).
        RemInvRdReqErr = 15 => "remote invalid RD request",
        /// The operation was aborted by the remote side.
        RemAbortErr = 16 => "aborted error",
        /// Invalid EE context number (RD only).
        InvEecnErr = 17 => "invalid EE context number",
        /// Invalid EE context state (RD only).
        InvEecStateErr = 18 => "invalid EE context state",
        /// Fatal error.
        FatalErr = 19 => "fatal error",
        /// Response timeout.
        RespTimeoutErr = 20 => "response timeout error",
        /// Any other error.
        GeneralErr = 21 => "general error",
        /// Tag matching error.
        TmErr = 22 => "TM error",
        /// Tag matching rendezvous incomplete.
        TmRndvIncomplete = 23 => "TM software rendezvous",
    }
}

impl WcStatus {
    /// True for [`WcStatus::Success`].
    pub const fn is_success(self) -> bool {
        matches!(self, WcStatus::Success)
    }
}

#[allow(clippy::derivable_impls)] // the enum is declared by verbs_enum!
impl Default for WcStatus {
    fn default() -> Self {
        WcStatus::Success
    }
}

verbs_enum! {
    /// `enum ibv_wc_opcode`: which operation a completion is for.
    pub enum WcOpcode: u32 {
        /// A SEND or SEND_WITH_IMM completed at the requester.
        Send = 0 => "SEND",
        /// An RDMA WRITE (with or without immediate) completed at the requester.
        RdmaWrite = 1 => "RDMA_WRITE",
        /// An RDMA READ completed at the requester.
        RdmaRead = 2 => "RDMA_READ",
        /// An atomic compare-and-swap completed at the requester.
        CompSwap = 3 => "COMP_SWAP",
        /// An atomic fetch-and-add completed at the requester.
        FetchAdd = 4 => "FETCH_ADD",
        /// A memory window bind completed.
        BindMw = 5 => "BIND_MW",
        /// A local invalidate completed.
        LocalInv = 6 => "LOCAL_INV",
        /// A TCP segmentation offload send completed.
        Tso = 7 => "TSO",
        /// A receive completed (a SEND or SEND_WITH_IMM arrived).
        Recv = 128 => "RECV",
        /// An RDMA WRITE with immediate consumed a receive.
        RecvRdmaWithImm = 129 => "RECV_RDMA_WITH_IMM",
    }
}

#[allow(clippy::derivable_impls)] // the enum is declared by verbs_enum!
impl Default for WcOpcode {
    fn default() -> Self {
        WcOpcode::Send
    }
}

bitflags! {
    /// `enum ibv_wc_flags`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct WcFlags: u32 {
        /// A GRH is present: the first 40 bytes of the receive buffer hold it (UD).
        const GRH = 1 << 0;
        /// `imm_data` is valid.
        const WITH_IMM = 1 << 1;
        /// The device checked the IP checksum and it is correct.
        const IP_CSUM_OK = 1 << 2;
        /// `invalidated_rkey` is valid.
        const WITH_INV = 1 << 3;
        /// Tag matching: a sync request.
        const TM_SYNC_REQ = 1 << 4;
        /// Tag matching: the message matched a tag.
        const TM_MATCH = 1 << 5;
        /// Tag matching: the data is complete.
        const TM_DATA_VALID = 1 << 6;
    }
}

/// One work completion, the plain-data counterpart of `struct ibv_wc`.
///
/// `Copy` and `Default` so callers poll into a reusable slice with no allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Completion {
    /// The caller's identifier of the work request.
    pub wr_id: u64,
    /// Its outcome. Only `wr_id`, `status`, `qp_num` and `vendor_err` are valid when this is
    /// not [`WcStatus::Success`] (as in libibverbs).
    pub status: WcStatus,
    /// The operation.
    pub opcode: WcOpcode,
    /// A vendor-specific error code.
    pub vendor_err: u32,
    /// Bytes transferred (for receives: bytes written, including a UD GRH).
    pub byte_len: u32,
    /// The immediate value, in host order (libibverbs gives it big-endian; backends
    /// convert), valid when `wc_flags` has [`WcFlags::WITH_IMM`]. As in libibverbs' union,
    /// the same field holds the invalidated rkey when `wc_flags` has
    /// [`WcFlags::WITH_INV`] (see [`Completion::invalidated_rkey`]).
    pub imm_data: u32,
    /// The local QP number the work request belonged to.
    pub qp_num: u32,
    /// The remote QP number (UD receives).
    pub src_qp: u32,
    /// Flags qualifying the completion.
    pub wc_flags: WcFlags,
    /// P_Key index (GSI QPs).
    pub pkey_index: u16,
    /// Source LID (InfiniBand link layer).
    pub slid: u16,
    /// Service level.
    pub sl: u8,
    /// Destination LID path bits.
    pub dlid_path_bits: u8,
}

impl Completion {
    /// True when the status is success.
    pub fn is_success(&self) -> bool {
        self.status.is_success()
    }

    /// The immediate value when the completion carries one.
    pub fn imm(&self) -> Option<u32> {
        self.wc_flags
            .contains(WcFlags::WITH_IMM)
            .then_some(self.imm_data)
    }

    /// The rkey a SEND_WITH_INV invalidated, when the completion says so.
    pub fn invalidated_rkey(&self) -> Option<u32> {
        self.wc_flags
            .contains(WcFlags::WITH_INV)
            .then_some(self.imm_data)
    }

    /// True for receive-side completions (opcode has bit 7 set, as in libibverbs).
    pub fn is_recv(&self) -> bool {
        self.opcode.as_raw() & WcOpcode::Recv.as_raw() != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_values_and_names_match_libibverbs() {
        assert_eq!(WcStatus::ALL.len(), 24);
        for (i, s) in WcStatus::ALL.iter().enumerate() {
            assert_eq!(s.as_raw() as usize, i);
            assert_eq!(WcStatus::from_raw(i as u32), Some(*s));
        }
        assert_eq!(WcStatus::WrFlushErr.as_str(), "Work Request Flushed Error");
        assert_eq!(
            WcStatus::RnrRetryExcErr.to_string(),
            "RNR retry counter exceeded"
        );
        assert_eq!(WcStatus::from_raw(24), None);
    }

    #[test]
    fn opcodes_and_flags_match_libibverbs() {
        assert_eq!(WcOpcode::Recv.as_raw(), 128);
        assert_eq!(WcOpcode::RecvRdmaWithImm.as_raw(), 129);
        assert_eq!(WcOpcode::FetchAdd.as_raw(), 4);
        assert_eq!(WcFlags::IP_CSUM_OK.bits(), 4);
        let wc = Completion {
            opcode: WcOpcode::RecvRdmaWithImm,
            wc_flags: WcFlags::WITH_IMM,
            imm_data: 7,
            ..Completion::default()
        };
        assert!(wc.is_recv());
        assert_eq!(wc.imm(), Some(7));
        assert!(!Completion::default().is_recv());
        let inv = Completion {
            wc_flags: WcFlags::WITH_INV,
            imm_data: 0x0100_0142,
            ..Completion::default()
        };
        assert_eq!(inv.invalidated_rkey(), Some(0x0100_0142));
        assert_eq!(inv.imm(), None);
        assert_eq!(Completion::default().imm(), None);
    }
}
