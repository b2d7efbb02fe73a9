//! Multi-group runs from a [`Plan`]: the traffic, the receivers' specs, and every
//! invariant checked on what each receiver got.

use std::net::{Ipv4Addr, SocketAddrV4};

use spead::recv::{Heap as RecvHeap, Stats, Stream, StreamConfig};
use spead::send::{Heap, Packetizer};
use spead::verbs::{IbvConfig, Receiver, ReceiverStats, Sender};
use spead::wire::Flavour;
use verbs_api::Verbs;

use super::basic::{payload, receive_heaps, Mode};

/// One host as a test body sees it: its verbs provider, interface address and MAC (the
/// source MAC of raw frames).
#[derive(Debug)]
pub struct Node<'a, V> {
    /// The host's verbs provider.
    pub verbs: &'a V,
    /// The interface address (selects the device).
    pub iface: Ipv4Addr,
    /// The interface's MAC.
    pub mac: [u8; 6],
}

impl<V> Clone for Node<'_, V> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<V> Copy for Node<'_, V> {}

/// One receiver of a [`Plan`]: where it runs, which groups (indices into
/// [`Plan::groups`]) it joins, its receive buffer and its stream configuration.
#[derive(Debug)]
pub struct RecvSpec<'a, V> {
    /// The host.
    pub node: Node<'a, V>,
    /// Indices of the groups it receives.
    pub groups: Vec<usize>,
    /// Receive buffer in bytes (with the packet size, it sets the slot count).
    pub buffer_size: usize,
    /// How its stream assembles heaps.
    pub stream: StreamConfig,
    /// [`IbvConfig::verify_checksums`] (off, as spead2, unless a test asks).
    pub verify_checksums: bool,
}

/// Traffic of a multi-group run: the sender sends `heaps` heaps to every group, one
/// group after the other per round (group `g`'s heap `k` has cnt `(g + 1) * 1000 + k`),
/// flushing after each heap so that the n-th packet sent is the fabric's n-th frame.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The multicast endpoints (UD: one port for all).
    pub groups: Vec<SocketAddrV4>,
    /// Heaps per group.
    pub heaps: u64,
    /// Bytes of each heap's one item (0x1000).
    pub heap_size: usize,
    /// SPEAD packet size.
    pub packet: usize,
    /// Packets (global send order, from 0) the sender skips: loss made at the sender,
    /// which also runs on hardware.
    pub skip: Vec<u64>,
}

impl Plan {
    /// `groups` groups 239.77.2.(1..) on port 7150, with a packet size that fits UD on
    /// rxe (1024) or raw Ethernet (1472).
    pub fn new(mode: Mode, groups: u8, heaps: u64, heap_size: usize) -> Self {
        Plan {
            groups: (1..=groups)
                .map(|g| SocketAddrV4::new(Ipv4Addr::new(239, 77, 2, g), 7150))
                .collect(),
            heaps,
            heap_size,
            packet: if mode == Mode::Ud { 1024 } else { 1472 },
            skip: Vec::new(),
        }
    }

    /// The cnt of group `g`'s heap `k` (from 1).
    pub fn cnt(g: usize, k: u64) -> u64 {
        (g as u64 + 1) * 1000 + k
    }

    /// The group a cnt belongs to.
    pub fn group_of(cnt: u64) -> usize {
        (cnt / 1000 - 1) as usize
    }

    /// Heaps in send order.
    pub fn send_order(&self) -> Vec<u64> {
        (1..=self.heaps)
            .flat_map(|k| (0..self.groups.len()).map(move |g| Plan::cnt(g, k)))
            .collect()
    }

    /// The packets of heap `cnt`, as the sender makes them.
    pub fn packets_of(&self, cnt: u64) -> Vec<Vec<u8>> {
        let mut heap = Heap::new(Flavour::SPEAD_64_48);
        heap.add_item(0x1000, payload(cnt, self.heap_size), false);
        let mut p = Packetizer::new(&heap, cnt, self.packet).expect("packetizer");
        let mut out = Vec::new();
        let mut buf = vec![0u8; self.packet];
        while let Some(n) = p.next_packet(&mut buf).expect("packet") {
            out.push(buf[..n].to_vec());
        }
        out
    }

    /// Packets per heap (every heap has the same size).
    pub fn packets_per_heap(&self) -> u64 {
        self.packets_of(Plan::cnt(0, 1)).len() as u64
    }

    /// Packets the sender hands to the transport (all groups, skips excluded).
    pub fn packets_sent(&self) -> u64 {
        self.heaps * self.groups.len() as u64 * self.packets_per_heap()
            - self
                .skip
                .iter()
                .collect::<std::collections::BTreeSet<_>>()
                .len() as u64
    }

    /// For an exact list of lost packets (global send order), the expected outcome of a
    /// receiver of every group in out-of-order mode with incomplete heaps delivered:
    /// `(complete cnts in send order, incomplete (cnt, received bytes), lost cnts)`.
    pub fn expect_with_lost(&self, lost: &[u64]) -> (Vec<u64>, Vec<(u64, u64)>, Vec<u64>) {
        let per = self.packets_per_heap();
        let (mut complete, mut incomplete, mut gone) = (Vec::new(), Vec::new(), Vec::new());
        for (i, cnt) in self.send_order().into_iter().enumerate() {
            let pkts = self.packets_of(cnt);
            let mut received = 0u64;
            let mut n = 0;
            for (j, p) in pkts.iter().enumerate() {
                if !lost.contains(&(i as u64 * per + j as u64)) {
                    n += 1;
                    let d = spead::wire::decode_packet(p).expect("decode");
                    received += d.payload.len() as u64;
                }
            }
            if n == pkts.len() {
                complete.push(cnt);
            } else if n == 0 {
                gone.push(cnt);
            } else {
                incomplete.push((cnt, received));
            }
        }
        incomplete.sort_unstable();
        (complete, incomplete, gone)
    }
}

/// What one receiver of a [`Plan`] got, after every invariant was checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    /// Complete heaps, in delivery order.
    pub complete: Vec<u64>,
    /// Incomplete heaps delivered: (cnt, bytes received), sorted by cnt.
    pub incomplete: Vec<(u64, u64)>,
    /// Heaps sent to its groups and never seen, sorted.
    pub lost: Vec<u64>,
    /// Further incomplete deliveries of a heap already delivered (a duplicate or late
    /// packet that arrived after its heap completed or was evicted starts the heap
    /// again, as in spead2): (cnt, bytes received), sorted.
    pub fragments: Vec<(u64, u64)>,
    /// Transport counters.
    pub transport: ReceiverStats,
    /// Stream counters.
    pub stream: Stats,
}

/// Sends a [`Plan`] from `sender` to receivers built from `specs` and returns each
/// receiver's [`Outcome`], after checking for every receiver: every heap of its groups is
/// complete, incomplete or lost, and none twice; no heap of another group arrives; every
/// complete heap has exactly the bytes sent, and so does every received range of an
/// incomplete heap; frames = delivered + dropped by cause; delivered datagrams = packets
/// assembled + malformed; heaps out of the stream = complete + incomplete.
///
/// `before_send` runs once the receivers exist (the simulator installs faults there);
/// `after_send` once every packet is posted, before the receivers poll (the simulator
/// lets the fabric run idle there, so frames find only the slots posted up front).
///
/// # Panics
/// On any violated invariant or transport error.
pub fn run_plan<V: Verbs>(
    sender: Node<'_, V>,
    specs: &[RecvSpec<'_, V>],
    mode: Mode,
    plan: &Plan,
    before_send: impl FnOnce(),
    after_send: impl FnOnce(),
) -> Vec<Outcome> {
    let mut receivers: Vec<_> = specs
        .iter()
        .map(|s| {
            let mut cfg = IbvConfig::new(
                s.groups.iter().map(|&g| plan.groups[g]).collect(),
                s.node.iface,
            );
            cfg.max_size = plan.packet;
            cfg.buffer_size = s.buffer_size;
            cfg.verify_checksums = s.verify_checksums;
            let r = match mode {
                Mode::Raw => Receiver::raw(s.node.verbs, &cfg).expect("raw receiver"),
                Mode::Ud => Receiver::ud(s.node.verbs, &cfg).expect("UD receiver"),
            };
            (r, Stream::new(s.stream.clone()))
        })
        .collect();
    let mut senders: Vec<_> = plan
        .groups
        .iter()
        .map(|&g| {
            let mut cfg = IbvConfig::new(vec![g], sender.iface);
            cfg.max_size = plan.packet;
            cfg.buffer_size = 64 * plan.packet;
            match mode {
                Mode::Raw => Sender::raw(sender.verbs, &cfg, sender.mac).expect("raw sender"),
                Mode::Ud => Sender::ud(sender.verbs, &cfg).expect("UD sender"),
            }
        })
        .collect();
    before_send();
    let mut index = 0u64;
    for cnt in plan.send_order() {
        let s = &mut senders[Plan::group_of(cnt)];
        for p in plan.packets_of(cnt) {
            if !plan.skip.contains(&index) {
                s.send(&p).expect("send");
            }
            index += 1;
        }
        s.flush().expect("flush");
    }
    let mut posted = 0;
    for s in &mut senders {
        s.drain().expect("drain");
        assert_eq!(s.stats().completion_errors, 0, "send completion errors");
        posted += s.stats().packets;
    }
    assert_eq!(posted, plan.packets_sent(), "packets posted");
    after_send();
    let mut out = Vec::new();
    for ((r, stream), spec) in receivers.iter_mut().zip(specs) {
        let mut got = receive_heaps(r, stream, usize::MAX, 50);
        stream.flush();
        while let Some(h) = stream.pop_heap() {
            got.push(h);
        }
        out.push(check_outcome(&got, r.stats(), stream.stats(), spec, plan));
    }
    out
}

fn check_outcome<V>(
    got: &[RecvHeap],
    transport: &ReceiverStats,
    stream: Stats,
    spec: &RecvSpec<'_, V>,
    plan: &Plan,
) -> Outcome {
    let mut o = Outcome {
        transport: transport.clone(),
        stream: stream.clone(),
        ..Outcome::default()
    };
    let mut seen = std::collections::BTreeSet::new();
    let mut parts = Vec::new();
    for h in got {
        let first = seen.insert(h.cnt);
        assert!(
            h.cnt >= 1000 && spec.groups.contains(&Plan::group_of(h.cnt)),
            "heap {} is not of a joined group",
            h.cnt
        );
        let want = payload(h.cnt, plan.heap_size);
        if h.complete {
            assert_eq!(h.heap_length, Some(plan.heap_size as u64));
            let items = h.items();
            assert_eq!(items.len(), 1, "heap {} items", h.cnt);
            assert_eq!(items[0].id, 0x1000);
            assert!(
                items[0].bytes() == &want[..],
                "heap {} delivered complete with wrong bytes",
                h.cnt
            );
            assert!(
                !o.complete.contains(&h.cnt),
                "heap {} delivered complete twice",
                h.cnt
            );
            o.complete.push(h.cnt);
        } else {
            let bytes = h.payload();
            if h.payload_ranges.is_empty() && h.contiguous {
                let n = h.received_length as usize;
                assert!(
                    bytes[..n] == want[..n],
                    "incomplete heap {} has wrong bytes",
                    h.cnt
                );
            }
            let mut total = 0;
            for &(s, e) in &h.payload_ranges {
                let (s, e) = (s as usize, e as usize);
                assert!(
                    bytes[s..e] == want[s..e],
                    "incomplete heap {} has wrong bytes in {s}..{e}",
                    h.cnt
                );
                total += (e - s) as u64;
            }
            if !h.payload_ranges.is_empty() {
                assert_eq!(total, h.received_length, "ranges of heap {}", h.cnt);
            }
            if first {
                o.incomplete.push((h.cnt, h.received_length));
            } else {
                o.fragments.push((h.cnt, h.received_length));
            }
        }
        if !first && h.complete {
            parts.push(h.cnt);
        }
    }
    // A heap delivered incomplete first and complete later counts as complete; its
    // earlier part becomes a fragment.
    for cnt in parts {
        if let Some(i) = o.incomplete.iter().position(|x| x.0 == cnt) {
            o.fragments.push(o.incomplete.remove(i));
        }
    }
    o.incomplete.sort_unstable();
    o.fragments.sort_unstable();
    o.lost = plan
        .send_order()
        .into_iter()
        .filter(|c| spec.groups.contains(&Plan::group_of(*c)) && !seen.contains(c))
        .collect();
    let t = transport;
    assert_eq!(
        t.frames,
        t.delivered + t.dropped_total(),
        "frames = delivered + dropped"
    );
    assert_eq!(
        t.delivered,
        stream.packets + stream.packets_malformed,
        "every delivered datagram reached heap assembly or was malformed"
    );
    assert_eq!(
        stream.heaps,
        (o.complete.len() + o.incomplete.len() + o.fragments.len()) as u64
            + stream.incomplete_heaps_dropped,
        "heaps out of the stream"
    );
    o
}

/// Asserts the fault-free outcome: every heap of the receiver's groups complete, in send
/// order, every frame delivered, nothing dropped.
///
/// # Panics
/// On any difference.
pub fn assert_clean<V>(o: &Outcome, spec: &RecvSpec<'_, V>, plan: &Plan) {
    let want: Vec<u64> = plan
        .send_order()
        .into_iter()
        .filter(|c| spec.groups.contains(&Plan::group_of(*c)))
        .collect();
    assert_eq!(o.complete, want, "complete heaps, in order");
    assert!(o.incomplete.is_empty() && o.lost.is_empty() && o.fragments.is_empty());
    let frames = want.len() as u64 * plan.packets_per_heap();
    assert_eq!(o.transport.frames, frames, "frames");
    assert_eq!(o.transport.dropped_total(), 0);
    assert_eq!(o.stream.packets, frames);
    assert_eq!(
        o.stream.packets_dropped_in_order + o.stream.packets_duplicate,
        0
    );
}

/// The stream configuration that shows incomplete heaps (out of order, delivered).
pub fn lenient() -> StreamConfig {
    StreamConfig {
        deliver_incomplete: true,
        allow_out_of_order: true,
        ..StreamConfig::default()
    }
}

/// Three groups, three receivers (all groups; groups 0 and 1; group 2), no faults:
/// everything arrives complete and in order.
///
/// # Panics
/// On any difference.
pub fn groups_to_receivers<V: Verbs>(sender: Node<'_, V>, receivers: [Node<'_, V>; 3], mode: Mode) {
    let plan = Plan::new(mode, 3, 6, 16 * 1024);
    let specs = receiver_specs(&receivers, &plan, StreamConfig::default());
    let out = run_plan(sender, &specs, mode, &plan, || {}, || {});
    for (o, s) in out.iter().zip(&specs) {
        assert_clean(o, s, &plan);
    }
}

/// The specs of [`groups_to_receivers`]: groups {0,1,2}, {0,1} and {2}, room for every
/// packet.
pub fn receiver_specs<'a, V>(
    receivers: &[Node<'a, V>],
    plan: &Plan,
    stream: StreamConfig,
) -> Vec<RecvSpec<'a, V>> {
    let sets = [vec![0, 1, 2], vec![0, 1], vec![2]];
    receivers
        .iter()
        .zip(sets.iter().cycle())
        .map(|(n, g)| RecvSpec {
            node: *n,
            groups: g
                .iter()
                .copied()
                .filter(|&g| g < plan.groups.len())
                .collect(),
            buffer_size: 1024 * plan.packet,
            stream: stream.clone(),
            verify_checksums: false,
        })
        .collect()
}

/// The drop list used by [`drop_at_sender`]: a first packet, a middle packet, a last
/// packet, and every packet of one heap.
pub fn drop_list(plan: &Plan) -> Vec<u64> {
    let per = plan.packets_per_heap();
    let mut v = vec![0, per + per / 2, 3 * per - 1];
    v.extend(5 * per..6 * per);
    v
}

/// Loses exactly [`drop_list`]'s packets at the sender (so it runs on hardware too) and
/// checks the exact outcome: which heaps are complete, incomplete (with how many bytes)
/// or lost, for a receiver of every group.
///
/// # Panics
/// On any difference.
pub fn drop_at_sender<V: Verbs>(sender: Node<'_, V>, receiver: Node<'_, V>, mode: Mode) {
    let mut plan = Plan::new(mode, 2, 5, 8 * 1024);
    plan.skip = drop_list(&plan);
    let specs = receiver_specs(&[receiver], &plan, lenient());
    let out = run_plan(sender, &specs, mode, &plan, || {}, || {});
    assert_exact_loss(&out[0], &plan, &plan.skip);
}

/// Asserts the outcome of losing exactly `lost` (global send order) for a receiver of
/// every group of `plan` with [`lenient`] assembly.
///
/// # Panics
/// On any difference.
pub fn assert_exact_loss(o: &Outcome, plan: &Plan, lost: &[u64]) {
    let (complete, incomplete, gone) = plan.expect_with_lost(lost);
    assert_eq!(o.complete, complete, "complete heaps");
    assert_eq!(o.incomplete, incomplete, "incomplete heaps");
    assert_eq!(o.lost, gone, "lost heaps");
    assert!(o.fragments.is_empty(), "fragments");
    let total = plan.heaps * plan.groups.len() as u64 * plan.packets_per_heap();
    assert_eq!(
        o.transport.frames,
        total - lost.len() as u64,
        "frames received"
    );
    assert_eq!(o.transport.dropped_total(), 0);
}
