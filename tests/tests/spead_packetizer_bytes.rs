//! Our packetizer's bytes equal spead2's (BytesStream) for a varied set of heaps.

use workspace_tests::spead2::{generate_specs, spead2_bytes, HeapSpec};

fn check(specs: &[HeapSpec]) {
    let theirs = spead2_bytes(specs);
    assert_eq!(theirs.len(), specs.len());
    for (spec, theirs) in specs.iter().zip(&theirs) {
        let ours = spec.our_bytes();
        assert!(
            ours == *theirs,
            "bytes differ for {spec:?}\nours:   {}\nspead2: {}",
            spead::json::to_hex(&ours),
            spead::json::to_hex(theirs)
        );
    }
}

#[test]
fn matches_spead2_for_generated_heaps() {
    let specs = generate_specs(
        0x5eed,
        96,
        &[56, 64, 72, 100, 200, 333, 1000, 1472, 4096, 9000],
    );
    check(&specs);
}

#[test]
fn matches_spead2_for_small_packets_and_many_pointers() {
    let specs = generate_specs(42, 48, &[56, 64, 80]);
    check(&specs);
}
