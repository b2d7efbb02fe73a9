//! Steady-state reception allocates nothing: after warm-up, feeding packets (multi-
//! packet heaps, single-packet heaps, in order and out of order) and dropping the heaps
//! makes no heap allocation on this thread.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use spead::recv::{Stream, StreamConfig};
use spead::send::{heap_to_bytes, Heap};
use spead::wire::{decode_packet, Flavour};

struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; the counter is a const-initialised
// thread-local Cell without a destructor, so touching it cannot allocate or recurse.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as our caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations() -> u64 {
    ALLOCS.with(Cell::get)
}

fn packets(cnt: u64, len: usize, packet: usize) -> Vec<Vec<u8>> {
    let mut h = Heap::new(Flavour::SPEAD_64_48);
    h.add_item(0x1000, vec![cnt as u8; len], false);
    h.add_item(0x1001, vec![1, 2], true);
    let bytes = heap_to_bytes(&h, cnt, packet).unwrap();
    let mut rest = &bytes[..];
    let mut out = Vec::new();
    while !rest.is_empty() {
        let n = decode_packet(rest).unwrap().size();
        out.push(rest[..n].to_vec());
        rest = &rest[n..];
    }
    out
}

fn check(ooo: bool) {
    let traffic: Vec<Vec<Vec<u8>>> = (1..=40)
        .map(|cnt| {
            let mut p = packets(cnt, if cnt % 3 == 0 { 500 } else { 100_000 }, 1472);
            if ooo {
                p.reverse();
            }
            p
        })
        .collect();
    let mut stream = Stream::new(StreamConfig {
        allow_out_of_order: ooo,
        ..StreamConfig::default()
    });
    let feed = |heaps: &[Vec<Vec<u8>>], stream: &mut Stream| {
        let mut complete = 0;
        for heap in heaps {
            for p in heap {
                stream.add_datagram(p).unwrap();
                while let Some(h) = stream.pop_heap() {
                    complete += u64::from(h.complete);
                }
            }
        }
        complete
    };
    assert_eq!(feed(&traffic[..10], &mut stream), 10); // warm-up
    let before = allocations();
    assert_eq!(feed(&traffic[10..], &mut stream), 30);
    assert_eq!(
        allocations() - before,
        0,
        "allocations in steady state (ooo {ooo})"
    );
}

#[test]
fn in_order_steady_state_allocates_nothing() {
    check(false);
}

#[test]
fn out_of_order_steady_state_allocates_nothing() {
    check(true);
}

/// A pcap source reads record after record through one buffer: once it has held the
/// largest record, finding and handing out datagrams allocates nothing, in either
/// container.
#[test]
fn pcap_source_allocates_nothing_per_record() {
    use netwire::pcap::{Container, PcapWriter, Resolution, WriteFormat};
    use spead::pcap::{Filter, PcapSource};
    use std::net::{Ipv4Addr, SocketAddrV4};

    let frame = |payload: &[u8]| {
        netwire::raw::udp_frame(
            [2, 0, 0, 0, 0, 1],
            SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 9000),
            [1, 0, 0x5e, 10, 0, 1],
            SocketAddrV4::new(Ipv4Addr::new(239, 10, 0, 1), 7148),
            64,
            payload,
        )
    };
    for container in [Container::Pcap, Container::PcapNg] {
        let format = WriteFormat {
            container,
            resolution: Resolution::Micro,
            ..WriteFormat::SIMULATOR
        };
        let mut w = PcapWriter::with_format(Vec::new(), format).unwrap();
        w.write(0, &frame(&[9; 8000])).unwrap();
        for i in 0..1000u64 {
            w.write(i * 1000, &frame(&[i as u8; 1472])).unwrap();
        }
        let file = w.finish().unwrap();
        let mut src = PcapSource::new(&file[..], Filter::ANY).unwrap();
        assert_eq!(src.next_datagram().unwrap().unwrap().payload.len(), 8000);
        let before = allocations();
        let mut n = 0u64;
        while let Some(d) = src.next_datagram().unwrap() {
            assert_eq!(d.payload[0], n as u8);
            n += 1;
        }
        assert_eq!(n, 1000, "{container:?}");
        assert_eq!(allocations() - before, 0, "{container:?}");
    }
}
