//! [`SimPd`]: a protection domain of a simulated device.

use crate::verbs::objects::Res;
use std::sync::Arc;
use verbs_api::ProtectionDomain;

/// A protection domain. A clone is the same domain (what a parent domain wraps).
#[derive(Debug, Clone)]
pub struct SimPd {
    pub(crate) res: Arc<Res>,
    pub(crate) _ctx: Arc<Res>,
}

impl ProtectionDomain for SimPd {
    fn handle(&self) -> u32 {
        self.res.id
    }
}
