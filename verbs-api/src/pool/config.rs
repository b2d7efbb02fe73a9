//! What a pool is made with, and how a slot is sent: plain settings, apart from the
//! tokens and slot states the pool's soundness rests on.

use crate::wr::{SendFlags, SendOpcode, WrDetail};
use crate::AccessFlags;

/// The shape of a pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotPoolConfig {
    /// Bytes of data per slot (must be > 0).
    pub slot_size: usize,
    /// Number of slots (must be > 0).
    pub slots: usize,
    /// Bytes in front of each slot's data that receives also fill (e.g. [`crate::GRH_LEN`]).
    pub padding: usize,
    /// Alignment of each slot's start (a power of two; 64 keeps slots on cache lines).
    pub align: usize,
    /// Access of the memory region; LOCAL_WRITE is always added (receives need it).
    pub access: AccessFlags,
}

impl SlotPoolConfig {
    /// `slots` slots of `slot_size` bytes, no padding, cache-line aligned.
    pub fn new(slot_size: usize, slots: usize) -> Self {
        SlotPoolConfig {
            slot_size,
            slots,
            padding: 0,
            align: 64,
            access: AccessFlags::LOCAL_WRITE,
        }
    }

    /// The same with `padding` bytes in front of each slot.
    #[must_use]
    pub fn with_padding(mut self, padding: usize) -> Self {
        self.padding = padding;
        self
    }
}

/// How a slot is sent: everything of a send work request but its memory.
#[derive(Debug, PartialEq, Eq)]
pub struct SendParams<'a, Ah> {
    /// The operation.
    pub opcode: SendOpcode,
    /// Flags.
    pub flags: SendFlags,
    /// Immediate value (host order) for the `*_WITH_IMM` opcodes.
    pub imm_data: u32,
    /// Opcode-specific part (UD destination, RDMA target...).
    pub detail: WrDetail<'a, Ah>,
}

impl<Ah> Clone for SendParams<'_, Ah> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<Ah> Copy for SendParams<'_, Ah> {}

impl<'a, Ah> SendParams<'a, Ah> {
    /// A signaled SEND with `detail` (`WrDetail::None` on connected and raw QPs).
    pub fn send(detail: WrDetail<'a, Ah>) -> Self {
        SendParams {
            opcode: SendOpcode::Send,
            flags: SendFlags::SIGNALED,
            imm_data: 0,
            detail,
        }
    }
}
