//! Memory windows (`ibv_alloc_mw(3)`, `ibv_bind_mw(3)`): remote access to part of a
//! memory region, granted and revoked without re-registering it.
//!
//! A window is allocated unbound on a PD ([`crate::Context::alloc_mw`]). A type 1 window
//! is bound (and unbound, with length 0) by [`crate::Context::bind_mw`], which posts a
//! BIND_MW request on a QP as libibverbs' inline `ibv_bind_mw` does; a type 2 window is
//! bound by posting [`crate::SendWr::bind_mw`] and invalidated by
//! [`crate::SendWr::local_inv`] or a peer's [`crate::SendWr::send_with_inv`]. The region
//! must have been registered with [`crate::AccessFlags::MW_BIND`]. Dropping a window
//! deallocates it (`ibv_dealloc_mw`), unbinding it first.

use crate::macros::verbs_enum;

verbs_enum! {
    /// `enum ibv_mw_type`.
    pub enum MwType: u32 {
        /// Bound by `ibv_bind_mw`; its rkey changes at each bind.
        Type1 = 1 => "IBV_MW_TYPE_1",
        /// Bound by a BIND_MW work request, invalidated by LOCAL_INV or SEND_WITH_INV;
        /// usable only through the QP that bound it (type 2B, the kind rxe has).
        Type2 = 2 => "IBV_MW_TYPE_2",
    }
}

/// `ibv_inc_rkey`: the rkey with its low 8 bits (the key a bind may change) incremented.
pub const fn inc_rkey(rkey: u32) -> u32 {
    (rkey & !0xff) | (rkey.wrapping_add(1) & 0xff)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_match_libibverbs() {
        assert_eq!(MwType::Type1.as_raw(), 1);
        assert_eq!(MwType::Type2.as_raw(), 2);
        assert_eq!(MwType::from_raw(3), None);
        assert_eq!(inc_rkey(0x0100_01ff), 0x0100_0100);
        assert_eq!(inc_rkey(0x0100_0107), 0x0100_0108);
    }
}
