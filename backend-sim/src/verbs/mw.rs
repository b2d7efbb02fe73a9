//! Memory windows: the application's side (`struct ibv_mw`); the device's side is in the
//! key table ([`super::memory::MrTable`]), binds and invalidations run on the send queue.

use crate::verbs::objects::{lock, Res, Shared};
use std::sync::Arc;
use verbs_api::{MemoryWindow, MwType};

/// A memory window; dropping it deallocates it (unbinding it).
#[derive(Debug)]
pub struct SimMw {
    pub(crate) world: Shared,
    /// The window's index in the key table (its rkey's upper 24 bits).
    pub(crate) index: u32,
    pub(crate) handle: u32,
    pub(crate) mw_type: MwType,
    pub(crate) _pd: Arc<Res>,
}

impl Drop for SimMw {
    fn drop(&mut self) {
        lock(&self.world).mrs.dealloc_mw(self.index);
    }
}

impl SimMw {
    /// Sets the rkey the application's side holds, as a program writing `ibv_mw.rkey`
    /// does (after a type 2 bind completes, or to undo a failed bind): the next bind
    /// names the window by it, and a stale one fails that bind.
    pub fn set_rkey(&self, rkey: u32) {
        if let Some(m) = lock(&self.world).mrs.mw_mut(self.index) {
            m.user_rkey = rkey;
        }
    }
}

impl MemoryWindow for SimMw {
    fn handle(&self) -> u32 {
        self.handle
    }

    fn mw_type(&self) -> MwType {
        self.mw_type
    }

    fn rkey(&self) -> u32 {
        lock(&self.world)
            .mrs
            .mw(self.index)
            .map_or(0, |m| m.user_rkey)
    }
}
