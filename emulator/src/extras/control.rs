//! The emulator's own controls: what a lab does to a real network with `tc` or `rdma link`,
//! for tests that run unmodified on rdma-core's library and on this one. Exported as
//! `verbs_emu_*` at the version node `VERBS_EMU_1.0`; a program finds them with
//! `dlsym(RTLD_DEFAULT, ...)`, and finds none on rdma-core's library, so it can tell
//! which library it runs on.

use std::ffi::c_int;

use crate::base::boundary::{boundary, ReturnsErrno};
use crate::runtime::host::emu;

crate::base::symver::symbol_versions! {
    verbs_emu_lose_next_frame = verbs_emu_lose_next_frame => "VERBS_EMU_1.0",
}

/// Loses the next frame any NIC of this process hands to the network (a RoCE packet, or
/// a RAW_PACKET or UD frame), as the simulator's fault plan does. 0 on success; `ENOTSUP`
/// when this host joined a fabric process (the network, and the frame order, are that
/// process's); `ENODEV` when the emulator could not start. Prints why on stderr.
pub extern "C" fn verbs_emu_lose_next_frame() -> c_int {
    boundary(ReturnsErrno, move || {
        let e = match emu() {
            Ok(e) => e,
            Err(_) => return libc::ENODEV,
        };
        match e.lose_next_frame() {
            Ok(()) => 0,
            Err(msg) => {
                eprintln!("verbs-emu: verbs_emu_lose_next_frame: {msg}");
                libc::ENOTSUP
            }
        }
    })
}
