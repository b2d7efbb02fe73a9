//! Completion channels: `ibv_create_comp_channel`, `ibv_destroy_comp_channel`.

use std::ffi::c_int;
use std::ptr::null_mut;
use std::sync::Arc;

use verbs_api::Context;

use crate::base::boundary::boundary;
use crate::base::boundary::Null;
use crate::base::boundary::ReturnsErrno;
use crate::base::errno::errno_of;
use crate::base::errno::set_errno;
use crate::base::ffi;
use crate::base::pointer::try_ref_from_ptr;
use crate::objects::handles::hand_out;
use crate::objects::handles::take_back;
use crate::objects::handles::EmuChannel;
use crate::objects::handles::EmuContext;
use crate::runtime::delivery::ChannelState;
use crate::runtime::host::emu as emulator;

/// `ibv_create_comp_channel`: its `fd` is an eventfd that becomes readable when an
/// armed CQ gets a completion.
///
/// # Safety
/// `ctx` is a live context of ours.
pub unsafe extern "C" fn ibv_create_comp_channel(
    ctx: *mut ffi::ibv_context,
) -> *mut ffi::ibv_comp_channel {
    boundary(Null, move || {
        // SAFETY: NULL or a live context of ours.
        let c: &EmuContext = unsafe {
            try_ref_from_ptr!(ctx, {
                set_errno(libc::EINVAL);
                null_mut()
            })
        };
        let Ok(e) = emulator() else {
            set_errno(libc::ENODEV);
            return null_mut();
        };
        let sim = match c.sim().create_comp_channel() {
            Ok(s) => s,
            Err(err) => {
                set_errno(errno_of(&err));
                return null_mut();
            }
        };
        let state = match ChannelState::new(sim) {
            Ok(s) => Arc::new(s),
            Err(err) => {
                set_errno(err.raw_os_error().unwrap_or(libc::EMFILE));
                return null_mut();
            }
        };
        e.register_channel(&state);
        let raw = ffi::ibv_comp_channel {
            context: ctx,
            fd: state.raw_fd(),
            refcnt: 0,
        };
        hand_out(Box::new(EmuChannel { raw, state }))
    })
}

/// `ibv_destroy_comp_channel`: EBUSY while CQs still use it.
///
/// # Safety
/// `channel` came from `ibv_create_comp_channel` and is destroyed once.
pub unsafe extern "C" fn ibv_destroy_comp_channel(channel: *mut ffi::ibv_comp_channel) -> c_int {
    boundary(ReturnsErrno, move || {
        // SAFETY: NULL or a live channel of ours.
        let ch: &EmuChannel = unsafe { try_ref_from_ptr!(channel, libc::EINVAL) };
        if ch.state.cq_count() > 0 {
            return libc::EBUSY;
        }
        // SAFETY: the caller's contract.
        drop(unsafe { take_back::<EmuChannel, _>(channel) });
        0
    })
}
