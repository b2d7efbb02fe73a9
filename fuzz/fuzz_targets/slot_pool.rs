//! The slot pool driven by arbitrary operation sequences against its model (see
//! `workspace_tests::pool_model`): byte pairs are operations, the first eight bytes the
//! simulator's seed. The hosts are set up once per process; each input reseeds them,
//! gets new pools and ends by restoring the set-up's snapshot
//! (`tests/tests/pool_model.rs` checks that runs in sequence give what fresh hosts give).
#![no_main]

use libfuzzer_sys::fuzz_target;
use workspace_tests::pool_model::{Hosts, Op};

thread_local! {
    static HOSTS: Hosts = Hosts::new();
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 8 {
        return;
    }
    let (seed, rest) = data.split_at(8);
    let seed = u64::from_le_bytes(seed.try_into().expect("eight bytes"));
    let ops: Vec<Op> = rest
        .chunks_exact(2)
        .take(256)
        .map(|p| Op::from_bytes(p[0], p[1]))
        .collect();
    if let Err(e) = HOSTS.with(|h| h.run(seed, &ops)) {
        panic!("{e}");
    }
});
