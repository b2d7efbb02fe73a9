//! Work requests: scatter-gather entries, send and receive requests
//! (`ibv_sge`, `ibv_send_wr`, `ibv_recv_wr`, `ibv_wr_opcode`, `ibv_send_flags`).

use bitflags::bitflags;

use crate::access::AccessFlags;
use crate::macros::verbs_enum;

/// `struct ibv_sge`: one piece of registered memory. Same layout as libibverbs', so the
/// hardware backend passes slices of these straight through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(C)]
pub struct Sge {
    /// Virtual address of the first byte (inside a memory region).
    pub addr: u64,
    /// Length in bytes.
    pub length: u32,
    /// The memory region's local key.
    pub lkey: u32,
}

verbs_enum! {
    /// `enum ibv_wr_opcode`: what a send work request does.
    pub enum SendOpcode: u32 {
        /// Write local memory into remote memory.
        RdmaWrite = 0 => "RDMA_WRITE",
        /// RDMA WRITE that also consumes a receive at the responder and carries an immediate.
        RdmaWriteWithImm = 1 => "RDMA_WRITE_WITH_IMM",
        /// A message that consumes a receive at the responder.
        Send = 2 => "SEND",
        /// SEND with a 32-bit immediate.
        SendWithImm = 3 => "SEND_WITH_IMM",
        /// Read remote memory into local memory.
        RdmaRead = 4 => "RDMA_READ",
        /// 8-byte atomic compare-and-swap on remote memory.
        AtomicCmpAndSwp = 5 => "ATOMIC_CMP_AND_SWP",
        /// 8-byte atomic fetch-and-add on remote memory.
        AtomicFetchAndAdd = 6 => "ATOMIC_FETCH_AND_ADD",
        /// Invalidate a local rkey (a type 2 memory window's), with
        /// [`WrDetail::Invalidate`]; no data moves.
        LocalInv = 7 => "LOCAL_INV",
        /// Bind a memory window (type 2 through `ibv_post_send`; type 1 through
        /// [`crate::Context::bind_mw`], which posts one), with [`WrDetail::BindMw`].
        BindMw = 8 => "BIND_MW",
        /// A SEND that also invalidates an rkey at the responder, with
        /// [`WrDetail::Invalidate`].
        SendWithInv = 9 => "SEND_WITH_INV",
    }
}

impl SendOpcode {
    /// Whether this opcode carries an immediate.
    pub const fn has_imm(self) -> bool {
        matches!(self, SendOpcode::SendWithImm | SendOpcode::RdmaWriteWithImm)
    }

    /// Whether this opcode needs [`WrDetail::Rdma`].
    pub const fn is_rdma(self) -> bool {
        matches!(
            self,
            SendOpcode::RdmaWrite | SendOpcode::RdmaWriteWithImm | SendOpcode::RdmaRead
        )
    }

    /// Whether this opcode needs [`WrDetail::Atomic`].
    pub const fn is_atomic(self) -> bool {
        matches!(
            self,
            SendOpcode::AtomicCmpAndSwp | SendOpcode::AtomicFetchAndAdd
        )
    }

    /// Whether this opcode runs on the local device only (no packet is sent):
    /// LOCAL_INV and BIND_MW.
    pub const fn is_local(self) -> bool {
        matches!(self, SendOpcode::LocalInv | SendOpcode::BindMw)
    }

    /// Whether this opcode consumes a receive at the responder like a SEND does.
    pub const fn is_send(self) -> bool {
        matches!(
            self,
            SendOpcode::Send | SendOpcode::SendWithImm | SendOpcode::SendWithInv
        )
    }

    /// The completion opcode a requester sees for it.
    pub const fn completion_opcode(self) -> crate::WcOpcode {
        use crate::WcOpcode as W;
        match self {
            SendOpcode::RdmaWrite | SendOpcode::RdmaWriteWithImm => W::RdmaWrite,
            SendOpcode::Send | SendOpcode::SendWithImm => W::Send,
            SendOpcode::RdmaRead => W::RdmaRead,
            SendOpcode::AtomicCmpAndSwp => W::CompSwap,
            SendOpcode::AtomicFetchAndAdd => W::FetchAdd,
            SendOpcode::LocalInv => W::LocalInv,
            SendOpcode::BindMw => W::BindMw,
            SendOpcode::SendWithInv => W::Send,
        }
    }
}

bitflags! {
    /// `enum ibv_send_flags`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct SendFlags: u32 {
        /// Wait for earlier RDMA READs and atomics to finish first.
        const FENCE = 1 << 0;
        /// Generate a completion (needed unless the QP has `sq_sig_all`).
        const SIGNALED = 1 << 1;
        /// Set the solicited-event bit: wakes a responder armed with solicited-only.
        const SOLICITED = 1 << 2;
        /// Copy the data into the work request at post time; lkeys are not checked.
        const INLINE = 1 << 3;
        /// Offload the IPv4 header checksum (RAW_PACKET; UD on some devices).
        const IP_CSUM = 1 << 4;
    }
}

/// The opcode-specific part of a send work request (the union in `ibv_send_wr`).
#[derive(Debug, PartialEq, Eq)]
pub enum WrDetail<'a, Ah> {
    /// No remote part: SEND on connected QPs, and RAW_PACKET.
    None,
    /// RDMA READ/WRITE target.
    Rdma {
        /// Remote virtual address.
        remote_addr: u64,
        /// Remote key of the target memory region.
        rkey: u32,
    },
    /// Atomic target and operands.
    Atomic {
        /// Remote virtual address (8-byte aligned).
        remote_addr: u64,
        /// Value to compare with (CAS) or to add (FAA).
        compare_add: u64,
        /// Value to store if equal (CAS).
        swap: u64,
        /// Remote key.
        rkey: u32,
    },
    /// The rkey a LOCAL_INV invalidates on this device, or a SEND_WITH_INV at the
    /// responder (`ibv_send_wr`'s `invalidate_rkey`).
    Invalidate {
        /// The rkey to invalidate.
        rkey: u32,
    },
    /// A memory window bind (`ibv_send_wr`'s `bind_mw`).
    BindMw {
        /// The window ([`crate::MemoryWindow::handle`]).
        mw: u32,
        /// The rkey the window has once bound: [`crate::MemoryWindow::rkey`] with its low
        /// 8 bits (the key) changed, as `ibv_inc_rkey` does; devices keep the upper 24.
        rkey: u32,
        /// The region, range and rights.
        bind_info: MwBindInfo,
    },
    /// UD destination.
    Ud {
        /// Address handle of the destination.
        ah: &'a Ah,
        /// Destination QP number (0xFFFFFF for multicast).
        remote_qpn: u32,
        /// Q_Key (must match the receiver's).
        remote_qkey: u32,
    },
}

/// `struct ibv_mw_bind_info`: what a memory window is bound to. The region is named by
/// its lkey (the key that identifies it to the device, as rxe's WQE does).
///
/// A `length` of 0 unbinds a type 1 window (`ibv_bind_mw(3)`); a type 2 window refuses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MwBindInfo {
    /// The lkey of the memory region the window covers part of.
    pub mr_lkey: u32,
    /// First byte of the window (an address inside the region).
    pub addr: u64,
    /// Bytes the window spans.
    pub length: u64,
    /// The remote rights the window grants (REMOTE_READ, REMOTE_WRITE, REMOTE_ATOMIC,
    /// ZERO_BASED).
    pub mw_access_flags: AccessFlags,
}

impl MwBindInfo {
    /// A window over `addr..addr+length` of `mr`, granting `access`.
    pub fn new<M: crate::MemoryRegion + ?Sized>(
        mr: &M,
        addr: u64,
        length: u64,
        access: AccessFlags,
    ) -> Self {
        MwBindInfo {
            mr_lkey: mr.lkey(),
            addr,
            length,
            mw_access_flags: access,
        }
    }
}

/// `struct ibv_mw_bind`: a type 1 bind for [`crate::Context::bind_mw`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MwBind {
    /// Caller's identifier, returned in the bind's completion.
    pub wr_id: u64,
    /// SIGNALED and FENCE.
    pub send_flags: SendFlags,
    /// What to bind to.
    pub bind_info: MwBindInfo,
}

// Manual impls: the derives would demand `Ah: Copy`, but only `&Ah` is held.
impl<Ah> Clone for WrDetail<'_, Ah> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<Ah> Copy for WrDetail<'_, Ah> {}

/// `struct ibv_send_wr`, without the `next` pointer: posts take slices.
#[derive(Debug, PartialEq, Eq)]
pub struct SendWr<'a, Ah> {
    /// Caller's identifier, returned in the completion.
    pub wr_id: u64,
    /// Local memory to send from (or to read into, for RDMA READ and atomics).
    pub sg_list: &'a [Sge],
    /// The operation.
    pub opcode: SendOpcode,
    /// Flags.
    pub send_flags: SendFlags,
    /// Immediate value in host order (used by the `*_WITH_IMM` opcodes).
    pub imm_data: u32,
    /// Opcode-specific part.
    pub detail: WrDetail<'a, Ah>,
}

impl<Ah> Clone for SendWr<'_, Ah> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<Ah> Copy for SendWr<'_, Ah> {}

impl<'a, Ah> SendWr<'a, Ah> {
    /// A SEND of `sg_list`.
    pub fn send(wr_id: u64, sg_list: &'a [Sge]) -> Self {
        SendWr {
            wr_id,
            sg_list,
            opcode: SendOpcode::Send,
            send_flags: SendFlags::empty(),
            imm_data: 0,
            detail: WrDetail::None,
        }
    }

    /// A SEND_WITH_IMM of `sg_list` carrying `imm`.
    pub fn send_with_imm(wr_id: u64, sg_list: &'a [Sge], imm: u32) -> Self {
        SendWr {
            opcode: SendOpcode::SendWithImm,
            imm_data: imm,
            ..Self::send(wr_id, sg_list)
        }
    }

    /// A UD SEND to `ah`, `remote_qpn`, `remote_qkey`.
    pub fn ud_send(
        wr_id: u64,
        sg_list: &'a [Sge],
        ah: &'a Ah,
        remote_qpn: u32,
        remote_qkey: u32,
    ) -> Self {
        SendWr {
            detail: WrDetail::Ud {
                ah,
                remote_qpn,
                remote_qkey,
            },
            ..Self::send(wr_id, sg_list)
        }
    }

    /// An RDMA WRITE of `sg_list` to `remote_addr` under `rkey`.
    pub fn rdma_write(wr_id: u64, sg_list: &'a [Sge], remote_addr: u64, rkey: u32) -> Self {
        SendWr {
            opcode: SendOpcode::RdmaWrite,
            detail: WrDetail::Rdma { remote_addr, rkey },
            ..Self::send(wr_id, sg_list)
        }
    }

    /// An RDMA WRITE_WITH_IMM.
    pub fn rdma_write_with_imm(
        wr_id: u64,
        sg_list: &'a [Sge],
        remote_addr: u64,
        rkey: u32,
        imm: u32,
    ) -> Self {
        SendWr {
            opcode: SendOpcode::RdmaWriteWithImm,
            imm_data: imm,
            ..Self::rdma_write(wr_id, sg_list, remote_addr, rkey)
        }
    }

    /// An RDMA READ from `remote_addr` into `sg_list`.
    pub fn rdma_read(wr_id: u64, sg_list: &'a [Sge], remote_addr: u64, rkey: u32) -> Self {
        SendWr {
            opcode: SendOpcode::RdmaRead,
            ..Self::rdma_write(wr_id, sg_list, remote_addr, rkey)
        }
    }

    /// An atomic compare-and-swap: if `*remote == compare` then `*remote = swap`; the old
    /// value lands in `sg_list` (8 bytes).
    pub fn compare_swap(
        wr_id: u64,
        sg_list: &'a [Sge],
        remote_addr: u64,
        rkey: u32,
        compare: u64,
        swap: u64,
    ) -> Self {
        SendWr {
            opcode: SendOpcode::AtomicCmpAndSwp,
            detail: WrDetail::Atomic {
                remote_addr,
                compare_add: compare,
                swap,
                rkey,
            },
            ..Self::send(wr_id, sg_list)
        }
    }

    /// An atomic fetch-and-add of `add`; the old value lands in `sg_list` (8 bytes).
    pub fn fetch_add(
        wr_id: u64,
        sg_list: &'a [Sge],
        remote_addr: u64,
        rkey: u32,
        add: u64,
    ) -> Self {
        SendWr {
            opcode: SendOpcode::AtomicFetchAndAdd,
            detail: WrDetail::Atomic {
                remote_addr,
                compare_add: add,
                swap: 0,
                rkey,
            },
            ..Self::send(wr_id, sg_list)
        }
    }

    /// A BIND_MW of the type 2 window with handle `mw` ([`crate::MemoryWindow::handle`]),
    /// which gets `rkey` once bound (see [`WrDetail::BindMw`]).
    pub fn bind_mw(wr_id: u64, mw: u32, rkey: u32, bind_info: MwBindInfo) -> Self {
        SendWr {
            opcode: SendOpcode::BindMw,
            detail: WrDetail::BindMw {
                mw,
                rkey,
                bind_info,
            },
            ..Self::send(wr_id, &[])
        }
    }

    /// A LOCAL_INV of `rkey` (a type 2 window's on this device).
    pub fn local_inv(wr_id: u64, rkey: u32) -> Self {
        SendWr {
            opcode: SendOpcode::LocalInv,
            detail: WrDetail::Invalidate { rkey },
            ..Self::send(wr_id, &[])
        }
    }

    /// A SEND_WITH_INV of `sg_list` that invalidates `rkey` at the responder.
    pub fn send_with_inv(wr_id: u64, sg_list: &'a [Sge], rkey: u32) -> Self {
        SendWr {
            opcode: SendOpcode::SendWithInv,
            detail: WrDetail::Invalidate { rkey },
            ..Self::send(wr_id, sg_list)
        }
    }

    /// The same request with `flags` added.
    #[must_use]
    pub fn flags(mut self, flags: SendFlags) -> Self {
        self.send_flags |= flags;
        self
    }

    /// The same request, signaled.
    #[must_use]
    pub fn signaled(self) -> Self {
        self.flags(SendFlags::SIGNALED)
    }

    /// Total bytes of the scatter-gather list.
    pub fn total_len(&self) -> u64 {
        self.sg_list.iter().map(|s| u64::from(s.length)).sum()
    }
}

/// `struct ibv_recv_wr`, without the `next` pointer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RecvWr<'a> {
    /// Caller's identifier, returned in the completion.
    pub wr_id: u64,
    /// Where incoming data lands, in order.
    pub sg_list: &'a [Sge],
}

impl<'a> RecvWr<'a> {
    /// A receive into `sg_list`.
    pub fn new(wr_id: u64, sg_list: &'a [Sge]) -> Self {
        RecvWr { wr_id, sg_list }
    }

    /// Total bytes the request can take.
    pub fn total_len(&self) -> u64 {
        self.sg_list.iter().map(|s| u64::from(s.length)).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_match_libibverbs() {
        assert_eq!(SendOpcode::RdmaWrite.as_raw(), 0);
        assert_eq!(SendOpcode::Send.as_raw(), 2);
        assert_eq!(SendOpcode::AtomicFetchAndAdd.as_raw(), 6);
        assert_eq!(SendOpcode::LocalInv.as_raw(), 7);
        assert_eq!(SendOpcode::BindMw.as_raw(), 8);
        assert_eq!(SendOpcode::SendWithInv.as_raw(), 9);
        assert_eq!(SendFlags::SIGNALED.bits(), 2);
        assert_eq!(SendFlags::INLINE.bits(), 8);
        assert_eq!(SendFlags::IP_CSUM.bits(), 16);
        assert_eq!(std::mem::size_of::<Sge>(), 16);
    }

    #[test]
    fn constructors_set_opcode_and_detail() {
        let sge = [
            Sge {
                addr: 0x1000,
                length: 8,
                lkey: 1,
            },
            Sge {
                addr: 0x2000,
                length: 4,
                lkey: 1,
            },
        ];
        let w: SendWr<'_, ()> = SendWr::fetch_add(9, &sge[..1], 0x40, 7, 5).signaled();
        assert_eq!(w.opcode, SendOpcode::AtomicFetchAndAdd);
        assert!(w.send_flags.contains(SendFlags::SIGNALED));
        assert_eq!(
            w.detail,
            WrDetail::Atomic {
                remote_addr: 0x40,
                compare_add: 5,
                swap: 0,
                rkey: 7
            }
        );
        assert_eq!(w.opcode.completion_opcode(), crate::WcOpcode::FetchAdd);
        let w: SendWr<'_, ()> = SendWr::rdma_write_with_imm(1, &sge, 0, 2, 0xabcd);
        assert!(w.opcode.has_imm() && w.opcode.is_rdma());
        assert_eq!(w.total_len(), 12);
        assert_eq!(RecvWr::new(3, &sge).total_len(), 12);
    }

    #[test]
    fn window_requests() {
        let info = MwBindInfo {
            mr_lkey: 5,
            addr: 0x1000,
            length: 64,
            mw_access_flags: AccessFlags::REMOTE_READ,
        };
        let w: SendWr<'_, ()> = SendWr::bind_mw(1, 7, 0x0100_0109, info).signaled();
        assert_eq!(w.opcode, SendOpcode::BindMw);
        assert!(w.opcode.is_local() && w.sg_list.is_empty());
        assert_eq!(
            w.detail,
            WrDetail::BindMw {
                mw: 7,
                rkey: 0x0100_0109,
                bind_info: info
            }
        );
        assert_eq!(w.opcode.completion_opcode(), crate::WcOpcode::BindMw);
        let w: SendWr<'_, ()> = SendWr::local_inv(2, 9);
        assert_eq!(w.detail, WrDetail::Invalidate { rkey: 9 });
        assert_eq!(w.opcode.completion_opcode(), crate::WcOpcode::LocalInv);
        let sge = [Sge::default()];
        let w: SendWr<'_, ()> = SendWr::send_with_inv(3, &sge, 9);
        assert!(w.opcode.is_send() && !w.opcode.is_local());
        assert_eq!(w.opcode.completion_opcode(), crate::WcOpcode::Send);
    }
}
