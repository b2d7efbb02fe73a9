//! The `rc_frames` fuzz target's driver: inputs run one after another on one rig (each
//! restoring the set-up's snapshot) give exactly what each gives on a rig of its own, as
//! in a fresh process: the same completions, trace hash and memory.

use workspace_tests::rc_frames::Rig;

/// The stored corpus, and inputs made to reach the transport: requests of each opcode,
/// duplicates, acknowledgements and garbage, from both sides.
fn inputs() -> Vec<Vec<u8>> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/rc_frames");
    let mut out: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .expect("the stored corpus")
        .map(|e| std::fs::read(e.expect("entry").path()).expect("corpus file"))
        .collect();
    out.sort();
    assert!(!out.is_empty());
    // BTH: opcode, flags, P_Key, reserved, dest QP (set by the driver), A bit and PSN.
    let bth = |op: u8, psn: u8| [op, 0, 0xff, 0xff, 0, 0, 0, 0, 0x80, 0, 0, psn];
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for k in 0..48u8 {
        let mut input = Vec::new();
        for r in 0..(k % 6 + 1) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let op =
                [0x00, 0x04, 0x06, 0x0a, 0x0c, 0x10, 0x11, 0x0d, 0x13, 0x14][(x % 10) as usize];
            let mut body = bth(op, r.wrapping_add(k % 3)).to_vec();
            // RETH or AETH-sized extension and some payload, from the generator.
            body.extend((0..(x >> 8) % 40).map(|i| (x >> (i % 56)) as u8));
            input.push((x >> 16) as u8 % 8);
            input.push(body.len() as u8);
            input.extend(body);
        }
        out.push(input);
    }
    out
}

#[test]
fn inputs_in_sequence_give_what_fresh_rigs_give() {
    let inputs = inputs();
    let fresh: Vec<_> = inputs.iter().map(|i| Rig::new().run_outcome(i)).collect();
    let mut rig = Rig::new();
    for (k, (input, want)) in inputs.iter().zip(&fresh).enumerate() {
        assert_eq!(&rig.run_outcome(input), want, "input {k} after {k} others");
    }
    // And again in reverse order, on the same rig.
    for (k, (input, want)) in inputs.iter().zip(&fresh).enumerate().rev() {
        assert_eq!(&rig.run_outcome(input), want, "input {k}, second pass");
    }
    // The inputs do different things (the test would prove little otherwise).
    let hashes: std::collections::BTreeSet<u64> = fresh.iter().map(|o| o.trace_hash).collect();
    assert!(
        hashes.len() > inputs.len() / 2,
        "{} distinct outcomes",
        hashes.len()
    );
    assert!(fresh.iter().any(|o| !o.completions.is_empty()));
}
