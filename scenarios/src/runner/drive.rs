//! The backend-independent drive loop.

use std::collections::BTreeMap;

use spead::recv::{Stream, StreamConfig};
use spead::send::{Heap, Packetizer, RateLimiter, DEFAULT_BURST_RATE_RATIO};
use std::net::{Ipv4Addr, SocketAddrV4};

use spead::verbs::{IbvConfig, Receiver, Sender};
use spead::wire::Flavour;
use verbs_api::{Context, Verbs};

use crate::model::{Scenario, Transport};
use crate::outcome::{Outcome, ReceivedHeap, ReceiverReport, SentHeap};
use crate::payload::{digest, heap_payload, item_layout};

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
        cfg.buffer_size = 256 * (size + 42);
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
    packets: Vec<Vec<u8>>,
    next: usize,
    /// Paces every packet at the sender's rate (a burst of one byte), catching up after
    /// a late round as spead2 does, on the clock's nanoseconds.
    limiter: RateLimiter,
    /// When the limiter lets the next packet go (0: now).
    next_time: u64,
}

/// The heap sender `i` sends as its `k`-th, exactly as [`crate::payload`] defines it.
pub fn build_heap(s: &Scenario, i: usize, k: u32) -> (Heap, Vec<u8>) {
    let snd = &s.senders[i];
    let payload = heap_payload(s.seed, i, k, snd.heap_size);
    let mut heap = Heap::new(Flavour::SPEAD_64_48);
    for (id, off, len) in item_layout(snd.heap_size, snd.items) {
        heap.add_item(id, payload[off..off + len].to_vec(), false);
    }
    (heap, payload)
}

fn packetize(heap: &Heap, cnt: u64, size: usize) -> Result<Vec<Vec<u8>>, RunError> {
    let mut p = Packetizer::new(heap, cnt, size)
        .map_err(|e| RunError::Backend(format!("packetizer: {e:?}")))?;
    let mut out = Vec::new();
    let mut buf = vec![0u8; size];
    while let Some(n) = p
        .next_packet(&mut buf)
        .map_err(|e| RunError::Backend(format!("packetizer: {e:?}")))?
    {
        out.push(buf[..n].to_vec());
    }
    Ok(out)
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
                packets: Vec::new(),
                next: 0,
                limiter: RateLimiter::new(s.senders[snd.index].rate, 1, DEFAULT_BURST_RATE_RATIO),
                next_time: 0,
            })
            .collect();
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
            // Senders, one packet each per round.
            for (si, snd) in self.senders.iter_mut().enumerate() {
                let spec = &s.senders[snd.index];
                let st = &mut states[si];
                if st.next >= st.packets.len() {
                    if st.heap >= spec.heaps {
                        continue;
                    }
                    let cnt = s.heap_cnt(snd.index, st.heap);
                    let (heap, payload) = build_heap(s, snd.index, st.heap);
                    st.packets = packetize(&heap, cnt, snd.packet_size)?;
                    st.next = 0;
                    outcome.sent.push(SentHeap {
                        sender: snd.index,
                        cnt,
                        len: payload.len(),
                        digest: digest(&payload),
                        packets: st.packets.len() as u32,
                    });
                    st.heap += 1;
                }
                if let Some(t) = st.limiter.wait_until(clock.now()) {
                    st.next_time = t;
                    continue;
                }
                let pkt = &st.packets[st.next];
                st.limiter.sent(pkt.len());
                st.next += 1;
                let copies = if drops.contains(&global) {
                    0
                } else if dups.contains(&global) {
                    2
                } else {
                    1
                };
                global += 1;
                for _ in 0..copies {
                    for t in &mut snd.transports {
                        t.send(pkt)?;
                        outcome.packets_sent += 1;
                    }
                }
                // A heap's last packet goes out at once (spead2 sends heaps promptly);
                // holding it for the batch would let later heaps overtake it.
                if st.next == st.packets.len() {
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
            let senders_done = states.iter().zip(&self.senders).all(|(st, snd)| {
                st.heap >= s.senders[snd.index].heaps && st.next >= st.packets.len()
            });
            if senders_done {
                for snd in &mut self.senders {
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
        for snd in &mut self.senders {
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
