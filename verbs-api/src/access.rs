//! Memory access rights (`enum ibv_access_flags`), for memory regions and QPs.

use bitflags::bitflags;

bitflags! {
    /// `enum ibv_access_flags`: who may touch a memory region, and how.
    ///
    /// Local read is always allowed. Remote write and remote atomic require local write
    /// too (libibverbs rejects the combination with EINVAL; [`AccessFlags::validate`]
    /// checks it).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct AccessFlags: u32 {
        /// The local device may write (needed for receives and RDMA READ targets).
        const LOCAL_WRITE = 1 << 0;
        /// Remote peers may RDMA WRITE.
        const REMOTE_WRITE = 1 << 1;
        /// Remote peers may RDMA READ.
        const REMOTE_READ = 1 << 2;
        /// Remote peers may perform atomics.
        const REMOTE_ATOMIC = 1 << 3;
        /// Memory windows may be bound.
        const MW_BIND = 1 << 4;
        /// Addresses are offsets from the region's start.
        const ZERO_BASED = 1 << 5;
        /// On-demand paging.
        const ON_DEMAND = 1 << 6;
        /// Huge pages back the region.
        const HUGETLB = 1 << 7;
        /// Global flush target.
        const FLUSH_GLOBAL = 1 << 8;
        /// Persistent flush target.
        const FLUSH_PERSISTENT = 1 << 9;
        /// Relaxed PCIe ordering is allowed.
        const RELAXED_ORDERING = 1 << 20;
    }
}

impl AccessFlags {
    /// Checks the rule of `ibv_reg_mr(3)`: REMOTE_WRITE or REMOTE_ATOMIC need LOCAL_WRITE.
    ///
    /// # Errors
    /// [`crate::ErrorKind::InvalidArgument`] when the rule is broken.
    pub fn validate(self, op: &'static str) -> crate::Result<()> {
        if self.intersects(Self::REMOTE_WRITE | Self::REMOTE_ATOMIC)
            && !self.contains(Self::LOCAL_WRITE)
        {
            return Err(crate::Error::new(
                crate::ErrorKind::InvalidArgument,
                op,
                "REMOTE_WRITE and REMOTE_ATOMIC access require LOCAL_WRITE",
            )
            .with_errno(22));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_match_libibverbs() {
        assert_eq!(AccessFlags::REMOTE_ATOMIC.bits(), 8);
        assert_eq!(AccessFlags::RELAXED_ORDERING.bits(), 1 << 20);
    }

    #[test]
    fn remote_write_needs_local_write() {
        let e = AccessFlags::REMOTE_WRITE
            .validate("ibv_reg_mr")
            .unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::InvalidArgument);
        assert!((AccessFlags::REMOTE_WRITE | AccessFlags::LOCAL_WRITE)
            .validate("x")
            .is_ok());
        assert!(AccessFlags::REMOTE_READ.validate("x").is_ok());
    }
}
