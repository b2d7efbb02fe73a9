//! The fault plan in force, compiled for the event loop: the drop list as a set and the
//! partitions. Per-link faults live in each link's [`super::injector::FaultInjector`].

use crate::clock::Nanos;
use crate::fault::FaultPlan;
use crate::ids::PortId;
use rustc_hash::FxHashSet;

/// The installed plan.
#[derive(Debug, Default, Clone)]
pub(crate) struct Plan {
    pub plan: FaultPlan,
    drop_set: FxHashSet<u64>,
}

impl Plan {
    pub fn new(plan: FaultPlan) -> Self {
        Plan {
            drop_set: plan.drop_packets.iter().copied().collect(),
            plan,
        }
    }

    /// True if the drop list names the frame with global index `index`.
    pub fn drops(&self, index: u64) -> bool {
        !self.drop_set.is_empty() && self.drop_set.contains(&index)
    }

    /// True if a partition cuts `from` off from `to` at `now`.
    pub fn cuts(&self, now: Nanos, from: PortId, to: PortId) -> bool {
        self.plan.partitions.iter().any(|p| p.cuts(now, from, to))
    }
}
