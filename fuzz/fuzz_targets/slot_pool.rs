//! The slot pool driven by arbitrary operation sequences against its model (see
//! `workspace_tests::pool_model`): byte pairs are operations, the first eight bytes the
//! simulator's seed.
#![no_main]

use libfuzzer_sys::fuzz_target;
use workspace_tests::pool_model::{Op, Rig};

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
    if let Err(e) = Rig::run(seed, &ops) {
        panic!("{e}");
    }
});
