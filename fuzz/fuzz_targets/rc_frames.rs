//! The RC state machine fed arbitrary packets: two simulated hosts with a connected RC
//! pair, and the input's records injected as RoCEv2 packets with valid ICRCs (see
//! `workspace_tests::rc_frames` for the record format). The hosts are set up once per
//! process; each input starts from a snapshot of that set-up, restored exactly
//! (`tests/tests/rc_frames.rs` checks that inputs run in sequence give what they give on
//! fresh hosts). Nothing may panic.
#![no_main]

use std::cell::RefCell;

use libfuzzer_sys::fuzz_target;
use workspace_tests::rc_frames::Rig;

thread_local! {
    static RIG: RefCell<Rig> = RefCell::new(Rig::new());
}

fuzz_target!(|data: &[u8]| {
    RIG.with(|rig| rig.borrow_mut().run(data));
});
