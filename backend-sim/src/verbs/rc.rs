//! Reliable and unreliable connected transport (RC, UC): placeholder until the engine lands.

use super::world::World;
use std::net::Ipv4Addr;
use verbs_api::WcOpcode;

/// Per-QP RC/UC protocol state.
#[derive(Debug, Default)]
pub(crate) struct RcState {}

impl RcState {
    pub fn take_outstanding(&mut self) -> Vec<(u64, WcOpcode)> {
        Vec::new()
    }
    pub fn reset(&mut self) {}
    pub fn set_rq_psn(&mut self, _psn: u32) {}
    pub fn set_sq_psn(&mut self, _psn: u32) {}
}

impl World {
    pub(crate) fn rc_rx(
        &mut self,
        _dev: usize,
        _src: Ipv4Addr,
        _pkt: &crate::frame::roce::RocePacket<'_>,
    ) {
    }
    pub(crate) fn on_timer(&mut self, _token: u64) {}
}

impl World {
    pub(crate) fn rc_post(
        &mut self,
        _qpn: u32,
        _wr: super::world::WrCopy,
    ) -> verbs_api::Result<()> {
        Err(verbs_api::Error::new(
            verbs_api::ErrorKind::Unsupported,
            "ibv_post_send",
            "RC not yet",
        ))
    }
}
