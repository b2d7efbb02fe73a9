//! Shared receive queues (`ibv_srq_init_attr`, `ibv_srq_attr`, `ibv_srq_attr_mask`).

use bitflags::bitflags;

/// `struct ibv_srq_attr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SrqAttr {
    /// Outstanding work requests.
    pub max_wr: u32,
    /// SGEs per work request.
    pub max_sge: u32,
    /// The limit: when armed and the number of posted receives drops below it, the SRQ
    /// raises [`crate::EventType::SrqLimitReached`] once and disarms. 0 = not armed.
    pub srq_limit: u32,
}

/// `struct ibv_srq_init_attr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SrqInitAttr {
    /// Sizes and initial limit.
    pub attr: SrqAttr,
}

impl SrqInitAttr {
    /// An SRQ of `max_wr` receives of `max_sge` SGEs each, its limit not armed.
    #[must_use]
    pub const fn new(max_wr: u32, max_sge: u32) -> Self {
        SrqInitAttr {
            attr: SrqAttr {
                max_wr,
                max_sge,
                srq_limit: 0,
            },
        }
    }
}

bitflags! {
    /// `enum ibv_srq_attr_mask`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct SrqAttrMask: u32 {
        /// Resize `max_wr`.
        const MAX_WR = 1 << 0;
        /// Arm the limit `srq_limit`.
        const LIMIT = 1 << 1;
    }
}
