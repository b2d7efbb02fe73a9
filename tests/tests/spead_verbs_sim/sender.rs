//! The verbs sender on the simulator: registered items gathered by SGE, packets cut into
//! parts, pacing on virtual time, `max_heaps` in flight, groups longer than the ring.

use super::*;

/// The simulator's virtual time as the sender's clock; records every wait.
struct SimClock<'a> {
    sim: &'a Sim,
    waits: Vec<u64>,
}

impl spead::send::Clock for SimClock<'_> {
    fn now_ns(&mut self) -> u64 {
        self.sim.now()
    }

    fn sleep_until(&mut self, ns: u64) {
        self.waits.push(ns);
        let now = self.sim.now();
        if ns > now {
            self.sim.run_for(ns - now);
        }
    }
}

/// The UDP datagrams of a pcap capture: (destination, payload).
fn datagrams(pcap: &[u8]) -> Vec<(std::net::SocketAddrV4, Vec<u8>)> {
    let mut src =
        spead::pcap::PcapSource::new(std::io::Cursor::new(pcap), spead::pcap::Filter::default())
            .unwrap();
    let mut out = Vec::new();
    while let Some(d) = src.next_datagram().unwrap() {
        out.push((d.dst, d.payload.to_vec()));
    }
    out
}

/// The packets spead2's packet generator makes of `heap` (cnt `cnt`, packets of at most
/// `max` bytes).
fn packets_of(heap: &spead::send::Heap, cnt: u64, max: usize) -> Vec<Vec<u8>> {
    let mut p = spead::send::Packetizer::new(heap, cnt, max).unwrap();
    let mut buf = vec![0u8; max];
    let mut out = Vec::new();
    while let Some(n) = p.next_packet(&mut buf).unwrap() {
        out.push(buf[..n].to_vec());
    }
    out
}

/// spead2's `memory_regions`: item bytes inside a registered region go out by SGE from
/// there (no copy), the others are copied into the slot; every packet on the wire is
/// what the packet generator makes, to the heap's substream's endpoint; each heap is
/// reported once with spead2's `bytes_sent`.
#[test]
fn raw_sender_gathers_registered_items_and_sends_substreams() {
    use backend_sim::CaptureFilter;
    use spead::send::{GroupMode, Heap, HeapReference, ItemValue};
    use spead::verbs::{HeapSent, IbvConfig, Sender, MAX_SGE};
    use spead::wire::Flavour;
    use std::net::SocketAddrV4;

    let net = Net::new(34, Mode::Raw, 1);
    let g0 = SocketAddrV4::new(Ipv4Addr::new(239, 77, 6, 1), 7400);
    let g1 = SocketAddrV4::new(Ipv4Addr::new(239, 77, 6, 2), 7401);
    let mut cfg = IbvConfig::new(vec![g0, g1], net.hosts[0].1);
    cfg.max_size = 1024;
    cfg.buffer_size = 64 * 1024;
    let mut big = Heap::new(Flavour::SPEAD_64_48);
    big.add_item(
        0x1000,
        (0..5000u32).map(|i| (i * 7) as u8).collect::<Vec<_>>(),
        false,
    );
    big.add_item(0x1001, vec![0xab; 10], false);
    let mut small = Heap::new(Flavour::SPEAD_64_48);
    small.add_item(0x1002, vec![0xcd; 1500], false);
    let mut four = Heap::new(Flavour::SPEAD_64_48);
    for k in 0..4u8 {
        four.add_item(0x1010 + u64::from(k), vec![k; 100], false);
    }
    let mut tx = Sender::raw(&net.verbs[0], &cfg, sim_mac(net.hosts[0].1)).unwrap();
    assert_eq!(tx.substreams(), 2);
    let ItemValue::Bytes { data, .. } = &big.items[0].value else {
        unreachable!()
    };
    // SAFETY: `big`, declared before the sender, outlives it, and nothing writes it.
    unsafe { tx.add_memory_region(data.as_ptr(), data.len()) }.unwrap();
    // SAFETY: as above (inside `big`'s item); refused anyway.
    let e = unsafe { tx.add_memory_region(data.as_ptr().add(100), 10) }.unwrap_err();
    assert_eq!(e.to_string(), "memory regions overlap");
    // SAFETY: as above; refused anyway.
    let e = unsafe { tx.add_memory_region(data.as_ptr(), 0) }.unwrap_err();
    assert_eq!(e.to_string(), "memory region must have non-zero size");
    net.sim
        .with_fabric(|f| f.capture_to_memory(CaptureFilter::All))
        .unwrap();
    let mut clock = SimClock {
        sim: &net.sim,
        waits: Vec::new(),
    };
    let refs = [
        HeapReference {
            heap: &big,
            cnt: 1,
            substream: 0,
        },
        HeapReference {
            heap: &small,
            cnt: 2,
            substream: 1,
        },
    ];
    let (p1, p2) = (packets_of(&big, 1, 1024), packets_of(&small, 2, 1024));
    tx.send_heaps(&refs, GroupMode::Serial, &mut clock).unwrap();
    tx.drain().unwrap();
    let pcap = net.capture_when_idle();
    let want: Vec<_> = p1
        .iter()
        .map(|p| (g0, p.clone()))
        .chain(p2.iter().map(|p| (g1, p.clone())))
        .collect();
    assert_eq!(
        datagrams(&pcap),
        want,
        "the wire carries the generator's packets"
    );
    let len = |ps: &[Vec<u8>]| ps.iter().map(|p| p.len() as u64).sum::<u64>();
    let done: Vec<HeapSent> = tx.take_completed().collect();
    assert_eq!(
        done,
        [
            HeapSent {
                cnt: 1,
                substream: 0,
                bytes: len(&p1),
                ok: true
            },
            HeapSent {
                cnt: 2,
                substream: 1,
                bytes: len(&p2),
                ok: true
            }
        ]
    );
    let s = tx.stats();
    assert_eq!(
        s.gathered_bytes, 5000,
        "the registered item is never copied"
    );
    assert_eq!(s.packets, (p1.len() + p2.len()) as u64);
    assert_eq!((s.heaps, s.heaps_completed, s.completion_errors), (2, 2, 0));
    assert_eq!(tx.heaps_in_flight(), 0);
    assert!(clock.waits.is_empty(), "no rate limit set");
    assert_eq!(MAX_SGE, 4);
    // Four registered items in one packet: with the slot's SGE that is five, more than
    // MAX_SGE, so spead2 copies them all (it decides before merging).
    for item in &four.items {
        let ItemValue::Bytes { data, .. } = &item.value else {
            unreachable!()
        };
        // SAFETY: `four`, declared before the sender, outlives it; nothing writes it.
        unsafe { tx.add_memory_region(data.as_ptr(), data.len()) }.unwrap();
    }
    net.sim
        .with_fabric(|f| f.capture_to_memory(CaptureFilter::All))
        .unwrap();
    let refs = [HeapReference {
        heap: &four,
        cnt: 3,
        substream: 1,
    }];
    tx.send_heaps(&refs, GroupMode::Serial, &mut clock).unwrap();
    tx.drain().unwrap();
    let pcap = net.capture_when_idle();
    let p3 = packets_of(&four, 3, 1024);
    assert_eq!(p3.len(), 1);
    assert_eq!(datagrams(&pcap), [(g1, p3[0].clone())]);
    assert_eq!(tx.stats().gathered_bytes, 5000, "copied, not gathered");
    drop(tx);
    assert_eq!(
        net.sim.live_objects().total(),
        0,
        "every verbs object released, the regions' MRs before the PD"
    );
}

/// `Sender::send_parts_with`, one packet at a time as the scenario drive sends: the
/// packetizer's header goes into the slot, a registered item's bytes are gathered from
/// the heap (counted in `gathered_bytes`), an unregistered one's copied; the wire carries
/// exactly the generator's packets. A cut longer than `max_size` is refused with the
/// slot given back, and a cut of nothing sends nothing.
#[test]
fn raw_sender_sends_packets_cut_into_parts_gathering_registered_items() {
    use backend_sim::CaptureFilter;
    use spead::send::{ItemValue, Packetizer, Part, SendError};
    use spead::verbs::{IbvConfig, SendWithError, Sender};
    use spead::wire::Flavour;
    use std::net::SocketAddrV4;

    let net = Net::new(35, Mode::Raw, 1);
    let g0 = SocketAddrV4::new(Ipv4Addr::new(239, 77, 6, 3), 7402);
    let mut cfg = IbvConfig::new(vec![g0], net.hosts[0].1);
    cfg.max_size = 1024;
    cfg.buffer_size = 8 * 1024;
    let mut heap = spead::send::Heap::new(Flavour::SPEAD_64_48);
    heap.add_item(
        0x1000,
        (0..3000u32).map(|i| (i * 13) as u8).collect::<Vec<_>>(),
        false,
    );
    heap.add_item(0x1001, vec![0x5a; 700], false);
    let mut tx = Sender::raw(&net.verbs[0], &cfg, sim_mac(net.hosts[0].1)).unwrap();
    let ItemValue::Bytes { data, .. } = &heap.items[0].value else {
        unreachable!()
    };
    // SAFETY: `heap`, declared before the sender, outlives it, and nothing writes it.
    unsafe { tx.add_memory_region(data.as_ptr(), data.len()) }.unwrap();
    net.sim
        .with_fabric(|f| f.capture_to_memory(CaptureFilter::All))
        .unwrap();
    let want = packets_of(&heap, 9, 1024);
    let mut p = Packetizer::new(&heap, 9, 1024).unwrap();
    let mut parts: Vec<Part<'_>> = Vec::new();
    let mut sent = 0;
    while let Some(n) = tx
        .send_parts_with(&mut parts, |buf, parts| p.next_packet_parts(buf, parts))
        .unwrap()
    {
        assert_eq!(n, want[sent].len(), "packet {sent}'s length");
        sent += 1;
    }
    assert_eq!(sent, want.len());
    // Too long: refused, nothing sent, the slot back in the ring.
    let big = [0u8; 1000];
    let e = tx
        .send_parts_with(&mut parts, |buf, parts| {
            buf[..40].fill(0);
            parts.push(Part::Data(&big));
            Ok::<_, SendError>(Some(40))
        })
        .unwrap_err();
    assert!(
        matches!(&e, SendWithError::Verbs(v) if v.to_string().contains("a packet of 1040 bytes exceeds max_size 1024")),
        "{e}"
    );
    let none = tx
        .send_parts_with(&mut parts, |_, _| Ok::<_, SendError>(Some(0)))
        .unwrap();
    assert_eq!(none, None, "an empty cut sends nothing");
    tx.drain().unwrap();
    let pcap = net.capture_when_idle();
    let on_wire: Vec<_> = want.iter().map(|p| (g0, p.clone())).collect();
    assert_eq!(
        datagrams(&pcap),
        on_wire,
        "the wire carries the generator's packets"
    );
    let s = tx.stats();
    assert_eq!(
        s.gathered_bytes, 3000,
        "the registered item is gathered, never copied"
    );
    assert_eq!(s.packets, want.len() as u64);
}

/// The shared rate limiter on the simulator's virtual time: with a burst of one byte,
/// spead2's limiter makes the sender wait after every packet until `bytes / rate` has
/// passed since the last bound, so with 1024-byte packets at 1.024 GB/s packet `k`
/// waits for t0 + 1000 k ns, exactly; the wire carries every packet, each sent no
/// earlier than its bound.
#[test]
fn raw_sender_paces_packets_on_virtual_time() {
    use backend_sim::CaptureFilter;
    use spead::send::{GroupMode, Heap, HeapReference};
    use spead::verbs::{IbvConfig, SendStreamConfig};
    use spead::wire::Flavour;
    use std::net::SocketAddrV4;

    let net = Net::new(35, Mode::Raw, 1);
    let g = SocketAddrV4::new(Ipv4Addr::new(239, 77, 7, 1), 7500);
    let mut tx = net.raw_sender(IbvConfig::new(vec![g], net.hosts[0].1), 64 * 1024);
    tx.set_stream_config(SendStreamConfig {
        rate: 1.024e9,
        burst_size: 1,
        burst_rate_ratio: 1.0,
        ..SendStreamConfig::default()
    })
    .unwrap();
    // Pointers repeated in every packet: each carries 48 bytes of header and pointers
    // and 976 of payload, 1024 in all.
    let mut heap = Heap::new(Flavour::SPEAD_64_48);
    heap.repeat_pointers = true;
    heap.add_item(0x1000, vec![5u8; 976 * 8], false);
    let packets = packets_of(&heap, 9, 1024);
    assert!(packets.iter().all(|p| p.len() == 1024) && packets.len() == 8);
    net.sim
        .with_fabric(|f| f.capture_to_memory(CaptureFilter::All))
        .unwrap();
    net.sim.run_for(5_000);
    let t0 = net.sim.now();
    let mut clock = SimClock {
        sim: &net.sim,
        waits: Vec::new(),
    };
    let refs = [HeapReference {
        heap: &heap,
        cnt: 9,
        substream: 0,
    }];
    tx.send_heaps(&refs, GroupMode::RoundRobin, &mut clock)
        .unwrap();
    tx.drain().unwrap();
    let want: Vec<u64> = (1..8).map(|k| t0 + 1000 * k).collect();
    assert_eq!(clock.waits, want);
    assert_eq!(tx.stats().rate_waits, 7);
    let pcap = net.capture_when_idle();
    let mut src =
        spead::pcap::PcapSource::new(std::io::Cursor::new(pcap), spead::pcap::Filter::default())
            .unwrap();
    let mut k = 0;
    while let Some(d) = src.next_datagram().unwrap() {
        assert_eq!(d.payload, &packets[k][..]);
        assert!(d.ts_ns >= t0 + 1000 * k as u64, "packet {k} at {}", d.ts_ns);
        k += 1;
    }
    assert_eq!(k, 8);
    // A second heap after idling: the limiter does not make up for the idle time.
    net.sim.run_for(1_000_000);
    let t1 = net.sim.now();
    clock.waits.clear();
    let refs = [HeapReference {
        heap: &heap,
        cnt: 10,
        substream: 0,
    }];
    tx.send_heaps(&refs, GroupMode::RoundRobin, &mut clock)
        .unwrap();
    tx.drain().unwrap();
    assert_eq!(clock.waits.len(), 7);
    assert_eq!(clock.waits[0], t1 + 1000, "{:?}", clock.waits);
}

/// spead2's send queue: `max_heaps` heaps in flight (queued, and their completions not
/// yet taken); a group that does not fit is refused whole (spead2's `would_block`) and
/// nothing of it is sent; completions taken make room again. Impossible settings are
/// refused.
#[test]
fn raw_sender_keeps_max_heaps_in_flight() {
    use spead::send::{GroupMode, Heap, HeapReference};
    use spead::verbs::{IbvConfig, SendHeapsError, SendStreamConfig};
    use spead::wire::Flavour;
    use std::net::SocketAddrV4;

    let net = Net::new(36, Mode::Raw, 1);
    let g = SocketAddrV4::new(Ipv4Addr::new(239, 77, 8, 1), 7600);
    let mut tx = net.raw_sender(IbvConfig::new(vec![g], net.hosts[0].1), 256 * 1024);
    let e = tx
        .set_stream_config(SendStreamConfig {
            max_heaps: 0,
            ..SendStreamConfig::default()
        })
        .unwrap_err();
    assert_eq!(e.to_string(), "max_heaps must be at least 1");
    tx.set_stream_config(SendStreamConfig {
        max_heaps: 2,
        ..SendStreamConfig::default()
    })
    .unwrap();
    let mut heap = Heap::new(Flavour::SPEAD_64_48);
    heap.add_item(0x1000, vec![1u8; 20 * 1024], false);
    let r = |cnt: u64| HeapReference {
        heap: &heap,
        cnt,
        substream: 0,
    };
    let mut clock = SimClock {
        sim: &net.sim,
        waits: Vec::new(),
    };
    tx.send_heaps(&[r(1), r(2)], GroupMode::RoundRobin, &mut clock)
        .unwrap();
    assert_eq!(tx.heaps_in_flight(), 2, "posted, completions not taken");
    assert_eq!(tx.take_completed().count(), 0);
    let sent = tx.stats().packets;
    let e = tx
        .send_heaps(&[r(3), r(4), r(5)], GroupMode::RoundRobin, &mut clock)
        .unwrap_err();
    assert!(
        matches!(
            e,
            SendHeapsError::QueueFull {
                asked: 3,
                max_heaps: 2,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(
        e.to_string(),
        "the send queue is full: 0 heaps in flight, 3 more asked, max_heaps 2"
    );
    assert_eq!(
        tx.stats().packets,
        sent,
        "nothing of a refused group is sent"
    );
    // The completions of heaps 1 and 2 were taken before the refusal: room for two.
    tx.send_heaps(&[r(3), r(4)], GroupMode::Serial, &mut clock)
        .unwrap();
    assert_eq!(tx.heaps_in_flight(), 2);
    let e = tx
        .send_heaps(
            &[HeapReference {
                heap: &heap,
                cnt: 7,
                substream: 1,
            }],
            GroupMode::Serial,
            &mut clock,
        )
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "substream index 1 is out of range for 1 substreams"
    );
    tx.wait_heaps(0).unwrap();
    let cnts: Vec<u64> = tx.take_completed().map(|h| h.cnt).collect();
    assert_eq!(cnts, [1, 2, 3, 4]);
    assert_eq!(tx.heaps_in_flight(), 0);
    assert_eq!(tx.stats().heaps_completed, 4);
}

#[test]
fn gathered_heaps_reach_their_substreams_on_the_simulator() {
    for mode in MODES {
        let net = Net::new(37, mode, 1);
        workspace_tests::spead_verbs::gathered_heaps_reach_their_substreams(
            net.node(0),
            net.node(1),
            mode,
            || {
                net.sim.run_until_idle();
            },
        );
    }
}

/// A group longer than the ring of slots: the sender takes completions to refill it
/// while it cuts, so the group's first heap is reported (and leaves the queue) before
/// the group is fully posted; every packet reaches the wire in order.
#[test]
fn raw_sender_group_longer_than_its_ring() {
    use backend_sim::CaptureFilter;
    use spead::send::{GroupMode, Heap, HeapReference};
    use spead::verbs::IbvConfig;
    use spead::wire::Flavour;
    use std::net::SocketAddrV4;

    let net = Net::new(38, Mode::Raw, 1);
    let g = SocketAddrV4::new(Ipv4Addr::new(239, 77, 10, 1), 7800);
    let mut small = Heap::new(Flavour::SPEAD_64_48);
    small.add_item(0x1000, vec![3u8; 100], false);
    let mut big = Heap::new(Flavour::SPEAD_64_48);
    big.add_item(0x1001, vec![4u8; 64 * 1024], false);
    let mut tx = net.raw_sender(IbvConfig::new(vec![g], net.hosts[0].1), 16 * (1024 + 42));
    assert_eq!(tx.slots(), 16);
    let mut clock = SimClock {
        sim: &net.sim,
        waits: Vec::new(),
    };
    net.sim
        .with_fabric(|f| f.capture_to_memory(CaptureFilter::All))
        .unwrap();
    let refs = [
        HeapReference {
            heap: &small,
            cnt: 1,
            substream: 0,
        },
        HeapReference {
            heap: &big,
            cnt: 2,
            substream: 0,
        },
    ];
    tx.send_heaps(&refs, GroupMode::Serial, &mut clock).unwrap();
    let early: Vec<u64> = tx.take_completed().map(|h| h.cnt).collect();
    assert_eq!(
        early,
        [1],
        "the small heap completed while the big one was cut"
    );
    tx.drain().unwrap();
    assert_eq!(tx.take_completed().map(|h| h.cnt).collect::<Vec<_>>(), [2]);
    let pcap = net.capture_when_idle();
    let want: Vec<_> = packets_of(&small, 1, 1024)
        .into_iter()
        .chain(packets_of(&big, 2, 1024))
        .map(|p| (g, p))
        .collect();
    assert!(want.len() > 64);
    assert_eq!(datagrams(&pcap), want);
    assert_eq!(tx.heaps_in_flight(), 0);
}
