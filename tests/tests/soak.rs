//! Soak and overload, short forms (the long form: `cargo xtask soak --minutes 10`): the
//! UDP receiver on loopback and the verbs receivers on the simulator, fed faster than they
//! consume and flooded with malformed datagrams among good ones (see
//! `workspace_tests::soak`). Every complete heap is checked byte for byte as it comes
//! out; here the counts must add up exactly. Nothing about timing is asserted: on
//! loopback how many datagrams the kernel drops depends on the machine, only that each
//! one is counted.

use workspace_tests::soak::{self, Options, Report};
use workspace_tests::spead_verbs::Mode;

fn checked(r: Report) -> Report {
    if let Err(e) = r.check() {
        panic!("{e}: {}", r.line());
    }
    println!("{}", r.line());
    r
}

#[test]
fn udp_receiver_fed_faster_than_it_consumes_counts_every_kernel_drop() {
    let r = checked(soak::udp(&Options::new(400, true)));
    assert_eq!(r.heaps_sent, 400);
    assert!(r.dropped.contains_key("kernel"), "{}", r.line());
    // The stream's ready queue is emptied after every batch: it never holds more than
    // the heaps one batch of 64 datagrams can complete.
    assert!(r.max_ready <= 64, "{}", r.line());
}

#[test]
fn udp_receiver_under_a_malformed_flood_delivers_every_good_heap_exactly() {
    let r = checked(soak::udp(&Options::new(200, false)));
    assert_eq!(r.dropped_below(), 0, "{}", r.line());
    assert_eq!(r.received, r.sent);
    assert_eq!((r.heaps_sent, r.complete, r.incomplete), (200, 200, 0));
    assert_eq!(r.good, 200 * 12);
    assert_eq!(r.malformed, 800);
    assert_eq!(r.malformed_counted, r.malformed, "{}", r.line());
}

#[test]
fn verbs_receivers_fed_faster_than_they_consume_count_every_drop_at_the_nic() {
    for mode in [Mode::Raw, Mode::Ud] {
        let r = checked(soak::verbs(mode, &Options::new(200, true)));
        assert_eq!(r.heaps_sent, 200, "{mode:?}");
        let no_wqe = r.dropped["nic rx_no_wqe"];
        // Each round sends four times the slots before the receiver polls: the NIC
        // drops what finds no receive posted, the rest is received.
        assert!(no_wqe > 0 && r.received > 0, "{mode:?}: {}", r.line());
        assert_eq!(r.sent, r.received + no_wqe, "{mode:?}: {}", r.line());
        assert!(r.complete < r.heaps_sent, "{mode:?}: {}", r.line());
    }
}

#[test]
fn verbs_receivers_under_a_malformed_flood_deliver_every_good_heap_exactly() {
    for mode in [Mode::Raw, Mode::Ud] {
        let r = checked(soak::verbs(mode, &Options::new(100, false)));
        assert_eq!(r.dropped_below(), 0, "{mode:?}: {}", r.line());
        assert_eq!(
            (r.heaps_sent, r.complete, r.incomplete),
            (100, 100, 0),
            "{mode:?}"
        );
        assert_eq!(r.good % 100, 0, "{mode:?}: every heap has its packets");
        assert_eq!(r.malformed, r.good / 3, "{mode:?}");
        assert_eq!(r.malformed_counted, r.malformed, "{mode:?}: {}", r.line());
        let refused = |cause: &str| r.dropped.get(cause).copied().unwrap_or(0);
        match mode {
            Mode::Raw => {
                assert_eq!(r.bad_frames, 300);
                assert_eq!(refused("receiver Fragment"), 100, "{}", r.line());
                assert_eq!(refused("receiver IpChecksum"), 100, "{}", r.line());
                assert_eq!(refused("receiver Checksum"), 100, "{}", r.line());
            }
            Mode::Ud => assert_eq!(r.bad_frames, 0),
        }
    }
}
