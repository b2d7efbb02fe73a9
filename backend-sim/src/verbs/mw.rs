//! Memory windows.

use verbs_api::{MemoryWindow, MwType};

/// A memory window.
#[derive(Debug)]
pub struct SimMw {
    pub(crate) handle: u32,
    pub(crate) mw_type: MwType,
}

impl MemoryWindow for SimMw {
    fn handle(&self) -> u32 {
        self.handle
    }
    fn mw_type(&self) -> MwType {
        self.mw_type
    }
    fn rkey(&self) -> u32 {
        0
    }
}
