//! The simplest bodies: heaps from one sender to one or two receivers of a group.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use spead::recv::{Heap as RecvHeap, Stream, StreamConfig};
use spead::send::{Heap, Packetizer};
use spead::verbs::{IbvConfig, Receiver, Sender};
use spead::wire::Flavour;
use verbs_api::Verbs;

/// Which verbs transport a body uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// RAW_PACKET QPs and flow steering.
    Raw,
    /// UD multicast.
    Ud,
}

/// The payload of heap `cnt` (deterministic, distinct per heap).
pub fn payload(cnt: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u64).wrapping_mul(31).wrapping_add(cnt * 7) as u8)
        .collect()
}

/// Sends `heaps` heaps (cnt 1..=heaps, one item 0x1000 of `heap_size` bytes) in
/// `packet`-byte packets through `sender`, then drains it.
///
/// # Panics
/// On any transport error.
pub fn send_heaps<C: verbs_api::Context>(
    sender: &mut Sender<C>,
    heaps: u64,
    heap_size: usize,
    packet: usize,
) {
    for cnt in 1..=heaps {
        let mut heap = Heap::new(Flavour::SPEAD_64_48);
        heap.add_item(0x1000, payload(cnt, heap_size), false);
        let mut p = Packetizer::new(&heap, cnt, packet).expect("packetizer");
        while sender
            .send_with(|buf| p.next_packet(buf))
            .expect("send")
            .is_some()
        {}
    }
    sender.drain().expect("drain");
}

/// Polls `receiver` into `stream` until `heaps` heaps came out or `idle` empty waits in a
/// row passed; returns the heaps.
pub fn receive_heaps<C: verbs_api::Context>(
    receiver: &mut Receiver<C>,
    stream: &mut Stream,
    heaps: usize,
    idle: u32,
) -> Vec<RecvHeap> {
    let mut out = Vec::new();
    let mut quiet = 0;
    while out.len() < heaps && quiet < idle {
        let n = receiver
            .poll_into(stream, Some(Duration::from_millis(20)))
            .expect("poll");
        quiet = if n == 0 { quiet + 1 } else { 0 };
        while let Some(h) = stream.pop_heap() {
            out.push(h);
        }
    }
    out
}

/// Checks that `got` holds heaps 1..=heaps, complete, in order, with exactly the bytes
/// sent.
///
/// # Panics
/// On the first difference.
pub fn assert_all_complete(got: &[RecvHeap], heaps: u64, heap_size: usize) {
    let cnts: Vec<u64> = got.iter().map(|h| h.cnt).collect();
    assert_eq!(cnts, (1..=heaps).collect::<Vec<_>>(), "heaps arrived");
    for h in got {
        assert!(h.complete, "heap {} incomplete", h.cnt);
        let items = h.items();
        assert_eq!(items.len(), 1);
        assert_eq!(items[0].id, 0x1000);
        assert_eq!(
            items[0].bytes(),
            &payload(h.cnt, heap_size)[..],
            "bytes of heap {}",
            h.cnt
        );
    }
}

/// One sender and two receivers of one multicast group on `verbs`' device with
/// interface address `iface` (loopback through the device): every heap arrives complete
/// at both receivers, with the right bytes.
///
/// # Panics
/// On any difference.
pub fn multicast_to_two_receivers<V: Verbs>(
    verbs: &V,
    iface: Ipv4Addr,
    mode: Mode,
    src_mac: [u8; 6],
) {
    let group = SocketAddrV4::new(Ipv4Addr::new(239, 77, 1, 1), 7148);
    let packet = if mode == Mode::Ud { 1024 } else { 1472 };
    let mut cfg = IbvConfig::new(vec![group], iface);
    cfg.max_size = packet;
    cfg.buffer_size = 256 * packet;
    let mut receivers: Vec<_> = (0..2)
        .map(|_| match mode {
            Mode::Raw => Receiver::raw(verbs, &cfg).expect("raw receiver"),
            Mode::Ud => Receiver::ud(verbs, &cfg).expect("UD receiver"),
        })
        .collect();
    let mut sender = match mode {
        Mode::Raw => Sender::raw(verbs, &cfg, src_mac).expect("raw sender"),
        Mode::Ud => Sender::ud(verbs, &cfg).expect("UD sender"),
    };
    // 12 heaps of 16 KiB: 192 KiB, within each receiver's 256 slots.
    let (heaps, size) = (12, 16 * 1024);
    send_heaps(&mut sender, heaps, size, packet);
    let stats = sender.stats();
    assert_eq!(stats.completion_errors, 0);
    for r in &mut receivers {
        let mut stream = Stream::new(StreamConfig::default());
        let got = receive_heaps(r, &mut stream, heaps as usize, 50);
        assert_all_complete(&got, heaps, size);
        assert_eq!(
            r.stats().delivered,
            stats.packets,
            "every packet reached every receiver"
        );
        assert_eq!(r.stats().dropped_total(), 0);
        assert_eq!(stream.stats().packets, stats.packets);
    }
}
