//! Event channels come and go: `rdma_create_event_channel`, `rdma_destroy_event_channel`,
//! and the channel of its own that a synchronous id gets.

use std::ffi::c_int;
use std::ptr::null_mut;
use std::sync::Arc;

use crate::base::boundary::{boundary, Nothing, Null};
use crate::base::ffi;
use crate::rdmacm::core::event_queue::EventChannel;
use crate::rdmacm::core::id_state::{CmId, IdInner};
use crate::rdmacm::core::manager::cm;

/// `rdma_create_event_channel`: a channel whose `fd` is a real descriptor.
pub extern "C" fn rdma_create_event_channel() -> *mut ffi::rdma_event_channel {
    boundary(Null, move || {
        if let Err(e) = cm() {
            crate::base::errno::set_errno(e);
            return null_mut();
        }
        match EventChannel::boxed() {
            Ok(b) => Box::into_raw(b).cast(),
            Err(e) => {
                crate::base::errno::set_errno(e.raw_os_error().unwrap_or(libc::EMFILE));
                null_mut()
            }
        }
    })
}

/// `rdma_destroy_event_channel`: closes the descriptor. Ids still on it keep their
/// events (the man page asks for every id to be destroyed first).
///
/// # Safety
/// `channel` is NULL or a live channel of ours, destroyed once.
pub unsafe extern "C" fn rdma_destroy_event_channel(channel: *mut ffi::rdma_event_channel) {
    boundary(Nothing, move || {
        if !channel.is_null() {
            // SAFETY: every channel we hand out is a leaked EventChannel box.
            drop(unsafe { Box::from_raw(channel.cast::<EventChannel>()) });
        }
    })
}

/// The QP type of a port space (the kernel's `ucma_get_qp_type`); None for an unknown one.
/// A channel an id owns (made for a synchronous id).
#[derive(Debug)]
pub struct NonNullChannel(pub *mut ffi::rdma_event_channel);

impl NonNullChannel {
    /// A new channel, or None (errno says why).
    pub fn new() -> Option<Self> {
        let p = rdma_create_event_channel();
        (!p.is_null()).then_some(NonNullChannel(p))
    }

    /// Its queue of events.
    pub fn shared(&self) -> Arc<crate::rdmacm::core::event_queue::ChannelShared> {
        // SAFETY: a live channel just made.
        Arc::clone(&unsafe { EventChannel::of(self.0) }.shared)
    }
}

/// Gives a passive id of a synchronous listener its own channel (librdmacm's
/// `rdma_migrate_id(id, NULL)` in `ucma_process_conn_req`).
///
/// # Errors
/// The errno of making the channel.
pub fn make_sync(cid: &mut CmId, g: &mut IdInner) -> Result<(), c_int> {
    let own = NonNullChannel::new().ok_or_else(crate::base::errno::last_errno)?;
    g.channel = own.shared();
    g.sync = true;
    cid.raw.channel = own.0;
    Ok(())
}
