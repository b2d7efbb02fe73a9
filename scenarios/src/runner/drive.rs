//! The backend-independent drive loop.

use std::collections::BTreeMap;

use spead::recv::{Stream, StreamConfig};
use spead::send::{
    Cursor, Heap, ItemValue, Packetizer, Part, RateLimiter, SendError, DEFAULT_BURST_RATE_RATIO,
};
use std::net::{Ipv4Addr, SocketAddrV4};

use spead::verbs::{IbvConfig, Receiver, SendWithError, Sender};
use spead::wire::Flavour;
use verbs_api::{Context, Verbs};

use crate::model::{Scenario, Transport};
use crate::outcome::{Outcome, ReceivedHeap, ReceiverReport, SentHeap};
use crate::payload::{item_layout, Digest, SenderPayloads};

/// Why a scenario could not run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The scenario is invalid.
    #[error(transparent)]
    Scenario(#[from] crate::model::ScenarioError),
    /// The backend cannot run this scenario (e.g. the UDP transport on the simulator).
    #[error("unsupported here: {0}")]
    Unsupported(String),
    /// A transport failed.
    #[error(transparent)]
    Verbs(#[from] spead::verbs::VerbsError),
    /// The backend failed.
    #[error("backend: {0}")]
    Backend(String),
    /// A file the run reads or writes (a capture to replay, an output folder): the
    /// message names it.
    #[error("{0}")]
    File(String),
}

/// How the drive loop sees time: virtual on the simulator, wall-clock on hardware.
pub trait Clock {
    /// Now, in ns since the run started.
    fn now(&self) -> u64;
    /// Lets the next thing happen (the simulator takes its next event; hardware yields);
    /// false when nothing will ever happen again without new input.
    fn step(&self) -> bool;
    /// Lets `ns` pass.
    fn advance(&self, ns: u64);
}

/// One sender at run time.
pub struct SenderRt<C: Context> {
    /// Its transports (raw and/or UD, depending on its group's receivers).
    pub transports: Vec<Sender<C>>,
    /// Index in the scenario.
    pub index: usize,
    /// Packet size used.
    pub packet_size: usize,
}

impl<C: Context> std::fmt::Debug for SenderRt<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SenderRt")
            .field("index", &self.index)
            .field("packet_size", &self.packet_size)
            .finish()
    }
}

/// One receiver at run time.
pub struct ReceiverRt<C: Context> {
    /// The transport.
    pub transport: Receiver<C>,
    /// Registered receive memory, bytes.
    pub slot_bytes: u64,
}

impl<C: Context> std::fmt::Debug for ReceiverRt<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReceiverRt")
            .field("transport", &self.transport)
            .finish()
    }
}

/// Everything the loop drives.
pub struct Drive<C: Context> {
    /// Senders, in scenario order.
    pub senders: Vec<SenderRt<C>>,
    /// Receivers, in scenario order.
    pub receivers: Vec<ReceiverRt<C>>,
}

impl<C: Context> std::fmt::Debug for Drive<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Drive")
            .field("senders", &self.senders.len())
            .field("receivers", &self.receivers.len())
            .finish()
    }
}

/// Builds the senders and receivers of `s`: host `h` reaches its device through
/// `verbs(h)`, has interface address `ip(h)` and MAC `mac(h)`. Raw receivers and senders
/// use RAW_PACKET QPs; UD ones UD multicast; a sender whose group has both kinds of
/// receivers sends every packet both ways. Packets of groups with UD receivers are cut
/// to the UD MTU.
///
/// # Errors
/// [`RunError::Unsupported`] for the UDP transport; transport errors.
pub fn build<V: Verbs>(
    s: &Scenario,
    verbs: impl Fn(usize) -> V,
    ip: impl Fn(usize) -> Ipv4Addr,
    mac: impl Fn(usize) -> [u8; 6],
) -> Result<Drive<V::Context>, RunError> {
    let host = |name: &str| s.host_index(name).unwrap_or(0);
    let packet_size = |i: usize| s.effective_packet_size(i);
    let mut receivers = Vec::new();
    for (r, spec) in s.receivers.iter().enumerate() {
        let h = host(&spec.host);
        let endpoints: Vec<SocketAddrV4> = spec
            .groups
            .iter()
            .map(|&g| SocketAddrV4::new(s.groups[g].addr, s.groups[g].port))
            .collect();
        let max_size = s
            .senders_of(r)
            .iter()
            .map(|&i| packet_size(i))
            .max()
            .unwrap_or(1472)
            .max(64);
        let mut cfg = IbvConfig::new(endpoints, ip(h));
        cfg.max_size = max_size;
        cfg.comp_vector = -1;
        // The runner's invariant that a complete heap carries the bytes sent needs the
        // NIC's checksum verdict on raw frames corrupted in the switch; spead2 (and the
        // receiver's default) checks none.
        cfg.verify_checksums = true;
        let slot = max_size
            + if spec.transport == Transport::Ud {
                verbs_api::GRH_LEN
            } else {
                42
            };
        cfg.buffer_size = spec.buffer_slots * slot;
        let transport = match spec.transport {
            Transport::Raw => Receiver::raw(&verbs(h), &cfg)?,
            Transport::Ud => Receiver::ud(&verbs(h), &cfg)?,
            Transport::Udp => {
                return Err(RunError::Unsupported(format!(
                    "receiver {r}: the UDP transport runs on real sockets only"
                )))
            }
        };
        let slot_bytes = (transport.slots() * slot) as u64;
        receivers.push(ReceiverRt {
            transport,
            slot_bytes,
        });
    }
    let mut senders = Vec::new();
    for (i, spec) in s.senders.iter().enumerate() {
        let h = host(&spec.host);
        let g = s.groups[spec.group];
        let size = packet_size(i);
        let mut cfg = IbvConfig::new(vec![SocketAddrV4::new(g.addr, g.port)], ip(h));
        cfg.max_size = size;
        // The slots hold only headers (payloads are gathered from the heap). A paced
        // sender posts every packet as it goes, so it has few in flight: 8 slots keep
        // them warm in the cache instead of cycling through cold memory. An unpaced one
        // posts in batches of a quarter of its ring (spead2's target batch): 64 slots,
        // whose batches interleave the senders' packets on the wire as before (what the
        // differential runs against hardware, all hosts on one device there, agree on).
        let slots = if spec.rate > 0.0 { 8 } else { 64 };
        cfg.buffer_size = slots * (size + 42);
        cfg.comp_vector = -1;
        let subscribed = |t: Transport| {
            s.receivers
                .iter()
                .any(|r| r.transport == t && r.groups.contains(&spec.group))
        };
        let mut transports = Vec::new();
        if subscribed(Transport::Raw) {
            transports.push(Sender::raw(&verbs(h), &cfg, mac(h))?);
        }
        if subscribed(Transport::Ud) {
            transports.push(Sender::ud(&verbs(h), &cfg)?);
        }
        senders.push(SenderRt {
            transports,
            index: i,
            packet_size: size,
        });
    }
    Ok(Drive { senders, receivers })
}

struct SenderState {
    heap: u32,
    /// Where the packetizer stands in the current heap (None before the first).
    cursor: Option<Cursor>,
    /// The current heap's record in the outcome.
    sent_index: usize,
    /// One packet, for packets sent other than once one way.
    scratch: Vec<u8>,
    /// The item bytes of one packet, as the transport gathers them (kept for its memory).
    parts: Vec<Part<'static>>,
    /// Whether `current`'s item buffers are registered with the transports.
    registered: bool,
    /// The sender's payloads, and the heap being sent (its item buffers kept too).
    payloads: SenderPayloads,
    layout: Vec<(u64, usize, usize)>,
    current: Heap,
    /// Paces every packet at the sender's rate (a burst of one byte), catching up after
    /// a late round as spead2 does, on the clock's nanoseconds.
    limiter: RateLimiter,
    /// When the limiter lets the next packet go (0: now).
    next_time: u64,
}

/// Makes `heap` sender `payloads`' heap `k` with items at `layout` ([`item_layout`]),
/// reusing its item buffers when it already has that layout; returns the payload's
/// digest.
fn fill_heap(
    payloads: &SenderPayloads,
    layout: &[(u64, usize, usize)],
    k: u32,
    heap: &mut Heap,
) -> u64 {
    if heap.items.len() != layout.len() {
        *heap = Heap::new(Flavour::SPEAD_64_48);
        for &(id, _, len) in layout {
            heap.add_item(id, vec![0; len], false);
        }
    }
    let mut digest = Digest::default();
    for (item, &(_, off, _)) in heap.items.iter_mut().zip(layout) {
        if let ItemValue::Bytes { data, .. } = &mut item.value {
            payloads.fill_digest(k, off, data, &mut digest);
        }
    }
    digest.finish()
}

/// Registers the item buffers of `heap` with each transport, so that packets gather
/// their payload from there instead of copying it into a send slot.
fn register_items<C: Context>(heap: &Heap, transports: &mut [Sender<C>]) -> Result<(), RunError> {
    for item in &heap.items {
        if let ItemValue::Bytes { data, .. } = &item.value {
            if data.is_empty() {
                continue;
            }
            for t in transports.iter_mut() {
                // SAFETY: the buffers belong to the sender's `current` heap, which lives
                // as long as the drive's sender state, beyond the transports' use: the
                // drive drains every transport before the run ends. `fill_heap` keeps
                // the buffers in place (the sender's layout never changes), and the
                // drive drains the transports before it refills them, so nothing writes
                // bytes a posted packet still gathers from.
                unsafe { t.add_memory_region(data.as_ptr(), data.len()) }?;
            }
        }
    }
    Ok(())
}

/// An empty vector of parts on `v`'s memory, for parts of another heap borrow (the
/// in-place collect of an empty vector keeps its allocation).
fn reuse_parts<'b>(mut v: Vec<Part<'_>>) -> Vec<Part<'b>> {
    v.clear();
    v.into_iter()
        .map(|_| unreachable!("the vector is empty"))
        .collect()
}

/// The heap sender `i` sends as its `k`-th, exactly as [`crate::payload`] defines it.
pub fn build_heap(s: &Scenario, i: usize, k: u32) -> (Heap, Vec<u8>) {
    let snd = &s.senders[i];
    let payloads = SenderPayloads::new(s.seed, i, snd.heap_size);
    let mut heap = Heap::new(Flavour::SPEAD_64_48);
    fill_heap(
        &payloads,
        &item_layout(snd.heap_size, snd.items),
        k,
        &mut heap,
    );
    (heap, payloads.heap(k))
}

fn packetizer_error(e: SendError) -> RunError {
    RunError::Backend(format!("packetizer: {e}"))
}

/// The stream configuration of receiver `r`.
pub fn stream_config(s: &Scenario, r: usize) -> StreamConfig {
    let spec = &s.receivers[r];
    StreamConfig {
        max_heaps: spec.max_heaps,
        substreams: spec.substreams as usize,
        allow_out_of_order: true,
        deliver_incomplete: true,
        ..StreamConfig::default()
    }
}

impl<C: Context> Drive<C> {
    /// Runs the scenario to the end: every heap sent, then receivers polled until the
    /// clock says nothing more will arrive (or `quiet_rounds` empty rounds on hardware).
    ///
    /// # Errors
    /// A transport error.
    pub fn run(
        self,
        s: &Scenario,
        clock: &dyn Clock,
        quiet_rounds: u32,
    ) -> Result<Outcome, RunError> {
        self.run_with(s, clock, quiet_rounds, &mut AsReceived)
    }

    /// As [`Drive::run`], with each heap the receivers deliver turned into its record by
    /// `recorder` (a test wraps [`AsReceived`] to play a broken receiver).
    ///
    /// # Errors
    /// A transport error.
    pub fn run_with(
        mut self,
        s: &Scenario,
        clock: &dyn Clock,
        quiet_rounds: u32,
        recorder: &mut dyn Recorder,
    ) -> Result<Outcome, RunError> {
        let _span = tracing::debug_span!("drive", senders = self.senders.len()).entered();
        let mut outcome = Outcome {
            receivers: vec![ReceiverReport::default(); self.receivers.len()],
            ..Outcome::default()
        };
        let mut streams: Vec<Stream> = (0..self.receivers.len())
            .map(|r| Stream::new(stream_config(s, r)))
            .collect();
        let mut busy_until = vec![0u64; self.receivers.len()];
        let mut states: Vec<SenderState> = self
            .senders
            .iter()
            .map(|snd| SenderState {
                heap: 0,
                cursor: None,
                sent_index: 0,
                scratch: Vec::new(),
                parts: Vec::new(),
                registered: false,
                payloads: SenderPayloads::new(s.seed, snd.index, s.senders[snd.index].heap_size),
                layout: item_layout(s.senders[snd.index].heap_size, s.senders[snd.index].items),
                current: Heap::new(Flavour::SPEAD_64_48),
                limiter: RateLimiter::new(s.senders[snd.index].rate, 1, DEFAULT_BURST_RATE_RATIO),
                next_time: 0,
            })
            .collect();
        // Declared after `states`, so dropped before it: the transports, which register
        // the item buffers of the states' heaps, go first (`add_memory_region`'s
        // contract), on every way out of this function.
        let mut senders = std::mem::take(&mut self.senders);
        let drops: std::collections::BTreeSet<u64> = s.faults.drop.iter().copied().collect();
        let dups: std::collections::BTreeSet<u64> = s.faults.duplicate.iter().copied().collect();
        let mut global = 0u64;
        let mut quiet = 0;
        let max_heap: Vec<u64> = (0..self.receivers.len())
            .map(|r| {
                s.senders_of(r)
                    .iter()
                    .map(|&i| s.senders[i].heap_size as u64)
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        loop {
            let mut progressed = false;
            // Sending moves no time on the simulator; on hardware the round's start is
            // close enough for pacing (the limiter catches up as spead2's does).
            let round_start = clock.now();
            // Senders, one packet each per round.
            for (si, snd) in senders.iter_mut().enumerate() {
                let spec = &s.senders[snd.index];
                let st = &mut states[si];
                if !st.cursor.is_some_and(|c| c.has_next()) {
                    if st.heap >= spec.heaps {
                        continue;
                    }
                    let cnt = s.heap_cnt(snd.index, st.heap);
                    if st.registered {
                        // The last heap's packets gather from the buffers about to be
                        // refilled: they must have left first.
                        for t in &mut snd.transports {
                            t.drain()?;
                        }
                    }
                    let digest = fill_heap(&st.payloads, &st.layout, st.heap, &mut st.current);
                    if !st.registered {
                        register_items(&st.current, &mut snd.transports)?;
                        st.registered = true;
                    }
                    let p = Packetizer::new(&st.current, cnt, snd.packet_size)
                        .map_err(packetizer_error)?;
                    st.cursor = Some(p.pause());
                    st.sent_index = outcome.sent.len();
                    outcome.sent.push(SentHeap {
                        sender: snd.index,
                        cnt,
                        len: st.payloads.len(),
                        digest,
                        packets: 0,
                    });
                    st.heap += 1;
                }
                if let Some(t) = st.limiter.wait_until(round_start) {
                    st.next_time = t;
                    continue;
                }
                let Some(cursor) = st.cursor else {
                    continue;
                };
                let mut p = Packetizer::resume(&st.current, cursor).map_err(packetizer_error)?;
                let copies = if drops.contains(&global) {
                    0
                } else if dups.contains(&global) {
                    2
                } else {
                    1
                };
                global += 1;
                let len = if let ([t], 1) = (snd.transports.as_mut_slice(), copies) {
                    // The usual case: the packet's header is cut straight into the send
                    // slot, and the NIC gathers its payload from the heap's registered
                    // item buffers (spead2's zero-copy send).
                    let mut parts = reuse_parts(std::mem::take(&mut st.parts));
                    let n = t
                        .send_parts_with(&mut parts, |buf, parts| p.next_packet_parts(buf, parts))
                        .map_err(|e| match e {
                            SendWithError::Fill(e) => packetizer_error(e),
                            SendWithError::Verbs(e) => e.into(),
                        });
                    st.parts = reuse_parts(parts);
                    outcome.packets_sent += 1;
                    n?
                } else {
                    // Dropped, duplicated or sent both ways: cut once, copy to each.
                    st.scratch.resize(snd.packet_size, 0);
                    let n = p.next_packet(&mut st.scratch).map_err(packetizer_error)?;
                    if let Some(n) = n {
                        for _ in 0..copies {
                            for t in &mut snd.transports {
                                t.send(&st.scratch[..n])?;
                                outcome.packets_sent += 1;
                            }
                        }
                    }
                    n
                };
                let Some(len) = len else {
                    return Err(RunError::Backend(
                        "packetizer: no packet where one was due".into(),
                    ));
                };
                st.limiter.sent(len);
                outcome.sent[st.sent_index].packets += 1;
                let heap_done = !p.has_next();
                st.cursor = Some(p.pause());
                // A heap's last packet goes out at once (spead2 sends heaps promptly);
                // holding it for the batch would let later heaps overtake it.
                if heap_done {
                    for t in &mut snd.transports {
                        t.flush()?;
                    }
                }
                if !st.limiter.is_unlimited() {
                    for t in &mut snd.transports {
                        t.flush()?;
                    }
                }
                progressed = true;
            }
            let senders_done = states.iter().zip(&senders).all(|(st, snd)| {
                st.heap >= s.senders[snd.index].heaps && !st.cursor.is_some_and(|c| c.has_next())
            });
            if senders_done {
                for snd in &mut senders {
                    for t in &mut snd.transports {
                        t.flush()?;
                    }
                }
            }
            // Receivers.
            for (r, rt) in self.receivers.iter_mut().enumerate() {
                if clock.now() < busy_until[r] {
                    continue;
                }
                let n = rt
                    .transport
                    .poll_into(&mut streams[r], Some(std::time::Duration::ZERO))?;
                if n > 0 {
                    progressed = true;
                }
                let delay = s.receivers[r].consumer_delay_ns;
                while let Some(h) = streams[r].pop_heap() {
                    let rec = recorder.record(&h, clock.now(), &outcome.sent);
                    outcome.receivers[r].heaps.push(rec);
                    // The consumer spends `delay` on each heap, one after another.
                    busy_until[r] = busy_until[r].max(clock.now()) + delay;
                }
                let pool = streams[r].stats().pool;
                let alive = pool.allocated.saturating_sub(pool.released);
                let rep = &mut outcome.receivers[r];
                rep.peak_memory = rep.peak_memory.max(rt.slot_bytes + alive * max_heap[r]);
            }
            if progressed {
                quiet = 0;
            } else if let Some(t) = busy_until
                .iter()
                .copied()
                .filter(|&t| senders_done && t > clock.now())
                .min()
            {
                // A slow consumer has not polled since its last heap: let its time pass
                // (frames may be waiting in its receive buffers) before calling it quiet.
                clock.advance(t - clock.now());
            } else if senders_done {
                // Wait for what is still in flight: on the simulator until nothing is
                // left to happen, on hardware until `quiet_rounds` empty rounds.
                quiet += 1;
                let more = clock.step();
                if (!more && quiet >= 2) || quiet >= quiet_rounds {
                    break;
                }
            } else {
                // Senders wait for their rate: let time pass up to the earliest send time
                // (what falls due before it happens on the way), never past it, or the
                // senders fall behind their rate.
                let next = states
                    .iter()
                    .map(|st| st.next_time)
                    .filter(|&t| t > clock.now())
                    .min();
                match next {
                    Some(t) => clock.advance(t - clock.now()),
                    None => {
                        if !clock.step() {
                            clock.advance(1_000);
                        }
                    }
                }
            }
        }
        for snd in &mut senders {
            for t in &mut snd.transports {
                t.drain()?;
            }
        }
        for (r, rt) in self.receivers.iter().enumerate() {
            streams[r].flush();
            while let Some(h) = streams[r].pop_heap() {
                let rec = recorder.record(&h, clock.now(), &outcome.sent);
                outcome.receivers[r].heaps.push(rec);
            }
            let st = rt.transport.stats();
            let rep = &mut outcome.receivers[r];
            rep.packets_received = st.frames;
            rep.packets_accepted = st.delivered;
            rep.dropped = st
                .dropped
                .iter()
                .map(|(k, v)| (k.name().to_string(), *v))
                .collect::<BTreeMap<_, _>>();
            let spec = &s.receivers[r];
            rep.memory_bound = rt.slot_bytes
                + (spec.max_heaps as u64 * u64::from(spec.substreams) + 17) * max_heap[r];
        }
        Ok(outcome)
    }
}

/// How the receiving application records each heap its stream delivers.
pub trait Recorder {
    /// The record of `heap`, delivered at `now` ns; `sent` is every heap sent so far.
    fn record(&mut self, heap: &spead::recv::Heap, now: u64, sent: &[SentHeap]) -> ReceivedHeap;
}

/// Records each heap as it was received: its counter, completeness, the digest of its
/// items' bytes in id order (complete heaps only) and its lengths.
#[derive(Debug, Clone, Copy, Default)]
pub struct AsReceived;

impl Recorder for AsReceived {
    fn record(&mut self, h: &spead::recv::Heap, now: u64, _sent: &[SentHeap]) -> ReceivedHeap {
        let digest = h.complete.then(|| {
            let mut items = h.items();
            items.sort_by_key(|i| i.id);
            // The items' bytes in id order, without copying them.
            crate::payload::digest_chunks(items.iter().map(|i| i.bytes()))
        });
        ReceivedHeap {
            cnt: h.cnt,
            complete: h.complete,
            digest,
            received: h.received_length,
            heap_len: h.heap_length.unwrap_or(h.received_length),
            at_ns: now,
        }
    }
}
