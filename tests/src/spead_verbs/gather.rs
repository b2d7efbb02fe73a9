//! spead2's writer features on one sender: registered memory gathered by the NIC, two
//! substreams, `max_heaps`, completed heaps.

use std::net::{Ipv4Addr, SocketAddrV4};

use spead::recv::{Stream, StreamConfig};
use spead::send::Heap;
use spead::verbs::{IbvConfig, Receiver, Sender};
use spead::wire::Flavour;
use verbs_api::Verbs;

use super::basic::{payload, receive_heaps, Mode};
use super::plan::Node;

/// spead2's writer features on one sender with two substreams (groups on different
/// ports): a heap whose big item lies in a registered memory region (gathered by the NIC,
/// never copied) and a small item (copied), round robin with a heap to the other
/// substream; `max_heaps` 2 and heaps reported when their packets completed. Each group's
/// receiver gets its heap complete with exactly the bytes sent. `settle` runs after the
/// send (the simulator runs its fabric idle there).
///
/// # Panics
/// On any difference.
pub fn gathered_heaps_reach_their_substreams<V: Verbs>(
    tx: Node<'_, V>,
    rx: Node<'_, V>,
    mode: Mode,
    settle: impl FnOnce(),
) {
    use spead::send::{GroupMode, HeapReference, ItemValue, WallClock};
    use spead::verbs::{HeapSent, SendStreamConfig};

    let groups = [
        SocketAddrV4::new(Ipv4Addr::new(239, 77, 9, 1), 7700),
        SocketAddrV4::new(Ipv4Addr::new(239, 77, 9, 2), 7701),
    ];
    let packet = if mode == Mode::Ud { 1024 } else { 1472 };
    let open_rx = |g: SocketAddrV4| {
        let mut cfg = IbvConfig::new(vec![g], rx.iface);
        cfg.max_size = packet;
        cfg.buffer_size = 128 * packet;
        match mode {
            Mode::Raw => Receiver::raw(rx.verbs, &cfg).expect("raw receiver"),
            Mode::Ud => Receiver::ud(rx.verbs, &cfg).expect("UD receiver"),
        }
    };
    let mut receivers = [open_rx(groups[0]), open_rx(groups[1])];
    let mut a = Heap::new(Flavour::SPEAD_64_48);
    a.add_item(0x1000, payload(1, 20 * 1024), false);
    a.add_item(0x1001, payload(2, 100), false);
    let mut b = Heap::new(Flavour::SPEAD_64_48);
    b.add_item(0x1002, payload(3, 3000), false);
    let mut cfg = IbvConfig::new(groups.to_vec(), tx.iface);
    cfg.max_size = packet;
    cfg.buffer_size = 64 * packet;
    let mut sender = match mode {
        Mode::Raw => Sender::raw(tx.verbs, &cfg, tx.mac).expect("raw sender"),
        Mode::Ud => Sender::ud(tx.verbs, &cfg).expect("UD sender"),
    };
    sender
        .set_stream_config(SendStreamConfig {
            max_heaps: 2,
            ..SendStreamConfig::default()
        })
        .expect("stream config");
    let ItemValue::Bytes { data, .. } = &a.items[0].value else {
        unreachable!("a bytes item")
    };
    // SAFETY: `a` is declared before `sender`, so it outlives it, and nothing writes it.
    unsafe { sender.add_memory_region(data.as_ptr(), data.len()) }.expect("region");
    let refs = [
        HeapReference {
            heap: &a,
            cnt: 1,
            substream: 0,
        },
        HeapReference {
            heap: &b,
            cnt: 2,
            substream: 1,
        },
    ];
    sender
        .send_heaps(&refs, GroupMode::RoundRobin, &mut WallClock::new())
        .expect("send_heaps");
    sender.drain().expect("drain");
    settle();
    let s = sender.stats();
    assert_eq!(s.completion_errors, 0);
    assert_eq!(
        s.gathered_bytes,
        20 * 1024,
        "the registered item is not copied"
    );
    let mut done: Vec<HeapSent> = sender.take_completed().collect();
    done.sort_by_key(|h| h.cnt);
    assert_eq!(done.len(), 2);
    assert!(done.iter().all(|h| h.ok));
    assert_eq!(done.iter().map(|h| h.bytes).sum::<u64>(), s.bytes);
    let want = [
        (
            1,
            vec![(0x1000, payload(1, 20 * 1024)), (0x1001, payload(2, 100))],
        ),
        (2, vec![(0x1002, payload(3, 3000))]),
    ];
    for (r, (cnt, items)) in receivers.iter_mut().zip(want) {
        let mut stream = Stream::new(StreamConfig::default());
        let got = receive_heaps(r, &mut stream, 1, 50);
        assert_eq!(got.len(), 1, "{mode:?}: heap {cnt}");
        let h = &got[0];
        assert!(h.complete && h.cnt == cnt, "{mode:?}: heap {}", h.cnt);
        let mut seen: Vec<(u64, Vec<u8>)> = h
            .items()
            .iter()
            .filter(|i| i.id >= 0x1000)
            .map(|i| (i.id, i.bytes().to_vec()))
            .collect();
        seen.sort_by_key(|i| i.0);
        assert_eq!(seen, items, "{mode:?}: heap {cnt}'s items");
    }
}
