//! The verbs send transport (raw Ethernet frames or UD multicast messages), after
//! spead2's `udp_ibv_writer` (src/send_udp_ibv.cpp).
//!
//! Packets live in a ring of registered slots. The packetizer writes each SPEAD header
//! and its item pointers straight into a slot behind the prebuilt Ethernet/IPv4/UDP
//! headers; item bytes that lie in a memory region the user registered
//! ([`Sender::add_memory_region`]) are not copied but gathered by the NIC from there
//! (one SGE each, up to 4 SGEs a packet, merged when contiguous), the others are copied
//! into the slot. Packets are posted in batches, only the last request of a batch
//! signaled, its `wr_id` the batch's length; a completion frees that many slots.
//!
//! Heaps go through [`Sender::send_heaps`] with spead2's stream semantics: up to
//! `max_heaps` heaps in flight (queued and not yet completed; a group that does not fit
//! is refused, as spead2's `async_send_heaps` refuses it with `would_block`), packets
//! paced by the shared [`RateLimiter`] on a [`Clock`] (virtual time on the simulator),
//! each heap reported once all its packets completed ([`Sender::take_completed`]).

use std::collections::VecDeque;
use std::net::SocketAddrV4;
use std::time::Duration;

use verbs_api::helpers::{bring_up, ConnectParams, ContextBuilder, Endpoint};
use verbs_api::pool::{SlotPool, SlotPoolConfig, SlotToken};
use verbs_api::{
    ipv4_multicast_mac, AccessFlags, AhAttr, Completion, CompletionQueue, Context, DeviceCapFlags,
    Gid, MemoryRegion, QpState, QpType, QueuePair, RawPacketCaps, SendFlags, SendOpcode, SendWr,
    Sge, Verbs, WrDetail, MULTICAST_QPN,
};

use super::config::{find_device, IbvConfig};
use super::frame::{HeaderTemplate, HEADERS};
use super::{ud_qkey, VerbsError};
use crate::send::{
    Clock, GroupMode, HeapGroup, HeapReference, Part, RateLimiter, SendError,
    DEFAULT_BURST_RATE_RATIO, DEFAULT_BURST_SIZE,
};

/// SGEs per packet (spead2's `max_sge`): the slot (headers, SPEAD header, pointers and
/// copied bytes) and up to three pieces of registered memory.
pub const MAX_SGE: usize = 4;
/// Most requests in one post call.
const MAX_CHUNK: usize = 64;
/// Tag in the high half of a signaled request's `wr_id` (the low half counts the batch).
const WR_TAG: u64 = 0x5350_4541 << 32;
/// A slot not holding a packet of a heap of [`Sender::send_heaps`].
const NO_HEAP: u64 = u64::MAX;
/// How long a wait for send completions may last before the sender gives up.
const COMPLETION_WAIT: Duration = Duration::from_secs(10);

/// What a sender did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SenderStats {
    /// Packets posted.
    pub packets: u64,
    /// SPEAD bytes posted (without Ethernet/IP/UDP headers).
    pub bytes: u64,
    /// Of those, bytes the NIC gathered from registered memory regions (not copied).
    pub gathered_bytes: u64,
    /// Post calls.
    pub batches: u64,
    /// Send completions with an error status.
    pub completion_errors: u64,
    /// Heaps queued by [`Sender::send_heaps`].
    pub heaps: u64,
    /// Heaps whose every packet completed.
    pub heaps_completed: u64,
    /// Times the rate limiter made the sender wait.
    pub rate_waits: u64,
}

/// spead2's `send::stream_config` as far as the verbs writer uses it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SendStreamConfig {
    /// Heaps in flight: queued by [`Sender::send_heaps`] and not yet completed.
    pub max_heaps: usize,
    /// Bytes per second (SPEAD packet bytes); 0 is unlimited.
    pub rate: f64,
    /// Bytes sent back to back before the rate limiter is asked.
    pub burst_size: usize,
    /// How much faster than `rate` the sender may catch up after falling behind.
    pub burst_rate_ratio: f64,
}

impl Default for SendStreamConfig {
    /// spead2's defaults: 4 heaps, unlimited rate, 64 KiB bursts, ratio 1.05.
    fn default() -> Self {
        SendStreamConfig {
            max_heaps: 4,
            rate: 0.0,
            burst_size: DEFAULT_BURST_SIZE,
            burst_rate_ratio: DEFAULT_BURST_RATE_RATIO,
        }
    }
}

/// A heap whose packets all completed, as [`Sender::take_completed`] reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeapSent {
    /// Its HEAP_CNT.
    pub cnt: u64,
    /// Its substream.
    pub substream: usize,
    /// SPEAD bytes of its packets that completed successfully (spead2's `bytes_sent`).
    pub bytes: u64,
    /// False when a packet's completion had an error status.
    pub ok: bool,
}

/// The error of [`Sender::send_heaps`].
#[derive(Debug, thiserror::Error)]
pub enum SendHeapsError {
    /// The queue had no room for the group: `max_heaps` heaps are in flight (spead2's
    /// `would_block`). Nothing of the group was sent.
    #[error(
        "the send queue is full: {in_flight} heaps in flight, {asked} more asked, max_heaps {max_heaps}"
    )]
    QueueFull {
        /// Heaps in flight.
        in_flight: usize,
        /// Heaps in the refused group.
        asked: usize,
        /// The limit.
        max_heaps: usize,
    },
    /// A heap cannot be packetized, or names a substream the sender does not have.
    #[error(transparent)]
    Packetize(#[from] SendError),
    /// The transport failed.
    #[error(transparent)]
    Verbs(#[from] VerbsError),
}

enum Mode<A> {
    /// One header template per endpoint (substream).
    Raw {
        templates: Vec<HeaderTemplate>,
        offload: bool,
    },
    /// One address handle and Q_Key per endpoint.
    Ud { dests: Vec<(A, u32)> },
}

/// What a slot holds while it is queued or posted.
#[derive(Debug, Clone, Copy)]
struct SlotMeta {
    sge: [Sge; MAX_SGE],
    nsge: usize,
    substream: usize,
    /// SPEAD bytes of the packet.
    bytes: usize,
    /// Sequence number of its heap, or [`NO_HEAP`].
    heap: u64,
}

/// A heap of [`Sender::send_heaps`] not yet completed.
#[derive(Debug, Clone, Copy)]
struct InFlight {
    sent: HeapSent,
    /// Packets posted or queued and not completed.
    outstanding: usize,
    /// Every packet of the heap has been cut.
    cut: bool,
    done: bool,
}

/// A memory region the user registered for zero-copy sends.
struct Region<M> {
    start: usize,
    len: usize,
    mr: M,
}

/// A verbs send transport to one or more multicast endpoints (one substream each); see
/// the module docs.
pub struct Sender<C: Context> {
    mode: Mode<C::Ah>,
    pool: SlotPool<C>,
    /// The pool's slots, by ring position.
    tokens: Vec<SlotToken>,
    meta: Vec<SlotMeta>,
    /// Oldest posted slot.
    head: usize,
    /// Slots posted and not completed.
    posted: usize,
    /// Slots filled and not posted yet (they follow the posted ones).
    pending: usize,
    /// User regions; dropped (deregistered) before the endpoint's PD, like the pool.
    regions: Vec<Region<C::Mr>>,
    ep: Endpoint<C>,
    wcs: Box<[Completion]>,
    headers: usize,
    max_size: usize,
    /// Packets per signaled request.
    target_batch: usize,
    config: SendStreamConfig,
    limiter: RateLimiter,
    in_flight: VecDeque<InFlight>,
    /// Sequence number of `in_flight[0]`.
    first_seq: u64,
    heaps_in_flight: usize,
    completed: Vec<HeapSent>,
    stats: SenderStats,
}

impl<C: Context> std::fmt::Debug for Sender<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sender")
            .field("stats", &self.stats)
            .field("slots", &self.tokens.len())
            .field("regions", &self.regions.len())
            .finish()
    }
}

impl<C: Context> Sender<C> {
    /// A raw sender: Ethernet frames from `src_mac` (the interface's MAC:
    /// [`super::interface_mac`] on hardware, `02:00` + the address on the simulator)
    /// to `cfg.endpoints` (substream `i` to endpoint `i`), with TTL `cfg.ttl`.
    ///
    /// # Errors
    /// [`VerbsError::Config`] for arguments spead2 rejects (no endpoint, one not
    /// multicast); as [`super::Receiver::raw`] otherwise.
    pub fn raw<V: Verbs<Context = C>>(
        verbs: &V,
        cfg: &IbvConfig,
        src_mac: [u8; 6],
    ) -> Result<Self, VerbsError> {
        let (ep, pool, iface) = Self::setup(verbs, cfg, QpType::RawPacket, HEADERS)?;
        let attr = ep.ctx.query_device()?;
        let offload = attr.device_cap_flags.contains(DeviceCapFlags::RAW_IP_CSUM)
            || attr.raw_packet_caps.contains(RawPacketCaps::IP_CSUM);
        let templates = cfg
            .endpoints
            .iter()
            .map(|dst| {
                HeaderTemplate::new(
                    src_mac,
                    SocketAddrV4::new(iface, dst.port()),
                    ipv4_multicast_mac(*dst.ip()),
                    *dst,
                    cfg.ttl,
                )
            })
            .collect();
        Ok(Self::finish(
            Mode::Raw { templates, offload },
            pool,
            ep,
            cfg,
            HEADERS,
        ))
    }

    /// A UD sender to the multicast GIDs of `cfg.endpoints`. Packets must fit the port's
    /// active MTU (rxe silently drops larger UD messages).
    ///
    /// # Errors
    /// As [`Sender::raw`]; [`VerbsError::Config`] when `max_size` exceeds the MTU.
    pub fn ud<V: Verbs<Context = C>>(verbs: &V, cfg: &IbvConfig) -> Result<Self, VerbsError> {
        let (ep, pool, iface) = Self::setup(verbs, cfg, QpType::Ud, 0)?;
        let mtu = ep.ctx.query_port(ep.port)?.active_mtu.bytes() as usize;
        if cfg.max_size > mtu {
            return Err(VerbsError::Config(format!(
                "max_size {} exceeds the port's active MTU of {mtu}: UD messages must fit one MTU",
                cfg.max_size
            )));
        }
        let dev = find_device(verbs, iface)?;
        let mut dests = Vec::with_capacity(cfg.endpoints.len());
        for dst in &cfg.endpoints {
            let mut av = AhAttr::roce(Gid::from_ipv4(*dst.ip()), dev.gid_index, dev.port);
            av.grh.hop_limit = cfg.ttl;
            dests.push((ep.ctx.create_ah(&ep.pd, &av)?, ud_qkey(dst.port())));
        }
        Ok(Self::finish(Mode::Ud { dests }, pool, ep, cfg, 0))
    }

    fn setup<V: Verbs<Context = C>>(
        verbs: &V,
        cfg: &IbvConfig,
        qp_type: QpType,
        headers: usize,
    ) -> Result<(Endpoint<C>, SlotPool<C>, std::net::Ipv4Addr), VerbsError> {
        let iface = cfg.validate_multicast()?;
        let dev = find_device(verbs, iface)?;
        let probe = verbs.open(&dev.device)?;
        let attr = probe.query_device()?;
        drop(probe);
        let slot = cfg.max_size + headers;
        // spead2: buffer_size / slot size, at least one.
        let slots = (cfg.buffer_size / slot)
            .max(1)
            .min(attr.max_qp_wr as usize)
            .min(attr.max_cqe as usize);
        let sges = (MAX_SGE as u32).min(attr.max_sge.max(1));
        let ep = ContextBuilder::new(qp_type)
            .device(&dev.device)
            .port(dev.port)
            .queues(slots as u32, 1, sges, 1)
            .cq_size(slots as u32)
            .notification(cfg.notification())
            .comp_vector(cfg.comp_vector)
            .build(verbs)?;
        let params = ConnectParams {
            port: dev.port,
            qkey: ud_qkey(cfg.endpoints[0].port()),
            ..ConnectParams::default()
        };
        bring_up(&ep.qp, QpState::Rts, &params)?;
        let pool = SlotPool::new(&ep.ctx, &ep.pd, &SlotPoolConfig::new(slot, slots))?;
        Ok((ep, pool, iface))
    }

    fn finish(
        mode: Mode<C::Ah>,
        pool: SlotPool<C>,
        ep: Endpoint<C>,
        cfg: &IbvConfig,
        headers: usize,
    ) -> Self {
        let tokens = pool.take_n(pool.len());
        let n = tokens.len();
        // spead2's calc_target_batch: a quarter of the slots, at most 256 KiB a batch.
        let target_batch = (n / 4)
            .max(1)
            .min((262_144 / (cfg.max_size + HEADERS)).max(1))
            .min(MAX_CHUNK);
        let config = SendStreamConfig::default();
        Sender {
            mode,
            pool,
            tokens,
            meta: vec![
                SlotMeta {
                    sge: [Sge::default(); MAX_SGE],
                    nsge: 0,
                    substream: 0,
                    bytes: 0,
                    heap: NO_HEAP,
                };
                n
            ],
            head: 0,
            posted: 0,
            pending: 0,
            regions: Vec::new(),
            ep,
            wcs: vec![Completion::default(); MAX_CHUNK].into_boxed_slice(),
            headers,
            max_size: cfg.max_size,
            target_batch,
            limiter: limiter_of(&config),
            in_flight: VecDeque::with_capacity(config.max_heaps),
            config,
            first_seq: 0,
            heaps_in_flight: 0,
            completed: Vec::new(),
            stats: SenderStats::default(),
        }
    }

    /// Counters.
    pub fn stats(&self) -> SenderStats {
        self.stats
    }

    /// Largest SPEAD packet this sender takes.
    pub fn max_size(&self) -> usize {
        self.max_size
    }

    /// Send slots.
    pub fn slots(&self) -> usize {
        self.tokens.len()
    }

    /// Substreams (endpoints).
    pub fn substreams(&self) -> usize {
        match &self.mode {
            Mode::Raw { templates, .. } => templates.len(),
            Mode::Ud { dests } => dests.len(),
        }
    }

    /// The stream settings in use.
    pub fn stream_config(&self) -> SendStreamConfig {
        self.config
    }

    /// Sets `max_heaps` and the rate (spead2's `stream_config`), with a fresh rate
    /// limiter.
    ///
    /// # Errors
    /// [`VerbsError::Config`] for `max_heaps` 0 ("max_heaps must be at least 1", as
    /// spead2), a negative or non-finite rate, a burst of 0 or a ratio below 1; or when
    /// heaps are in flight.
    pub fn set_stream_config(&mut self, config: SendStreamConfig) -> Result<(), VerbsError> {
        let bad = |m: String| Err(VerbsError::Config(m));
        if config.max_heaps == 0 {
            return bad("max_heaps must be at least 1".into());
        }
        if !config.rate.is_finite() || config.rate < 0.0 {
            return bad(format!(
                "rate {} is not a finite non-negative number",
                config.rate
            ));
        }
        if config.burst_size == 0 {
            return bad("burst_size must be at least 1".into());
        }
        if !config.burst_rate_ratio.is_finite() || config.burst_rate_ratio < 1.0 {
            return bad(format!(
                "burst_rate_ratio {} is below 1",
                config.burst_rate_ratio
            ));
        }
        if self.heaps_in_flight > 0 {
            return bad("the stream settings cannot change while heaps are in flight".into());
        }
        self.config = config;
        self.limiter = limiter_of(&config);
        Ok(())
    }

    /// Registers `len` bytes at `ptr` with the device, so that heap items lying inside
    /// are sent from there without a copy (spead2's `udp_ibv_config::memory_regions`).
    ///
    /// # Safety
    /// The `len` bytes at `ptr` must stay allocated for as long as the sender lives, and
    /// must not be written while a packet gathering from them is in flight (after
    /// [`Sender::send_heaps`] returned, until [`Sender::drain`], or until the heap is
    /// reported by [`Sender::take_completed`]): the NIC reads them then, by DMA.
    ///
    /// # Errors
    /// [`VerbsError::Config`] for an empty region ("memory region must have non-zero
    /// size") or one overlapping a registered one ("memory regions overlap"), as spead2;
    /// the registration's error.
    pub unsafe fn add_memory_region(
        &mut self,
        ptr: *const u8,
        len: usize,
    ) -> Result<(), VerbsError> {
        if len == 0 {
            return Err(VerbsError::Config(
                "memory region must have non-zero size".into(),
            ));
        }
        let start = ptr as usize;
        let end = start.checked_add(len).ok_or_else(|| {
            VerbsError::Config(format!("memory region of {len} bytes at {ptr:p} wraps"))
        })?;
        let at = self.regions.partition_point(|r| r.start < start);
        let overlaps_prev = at > 0 && {
            let p = &self.regions[at - 1];
            p.start + p.len > start
        };
        let overlaps_next = self.regions.get(at).is_some_and(|n| n.start < end);
        if overlaps_prev || overlaps_next {
            return Err(VerbsError::Config("memory regions overlap".into()));
        }
        // SAFETY: the caller keeps the bytes allocated for the sender's life (the
        // registration's), and sending needs no write access: the NIC only reads them.
        let mr = unsafe {
            self.ep
                .ctx
                .reg_mr(&self.ep.pd, ptr.cast_mut(), len, AccessFlags::empty())?
        };
        self.regions.insert(at, Region { start, len, mr });
        Ok(())
    }

    /// Heaps queued by [`Sender::send_heaps`] whose packets have not all completed.
    pub fn heaps_in_flight(&self) -> usize {
        self.heaps_in_flight
    }

    /// The heaps completed since the last call, in the order they completed.
    pub fn take_completed(&mut self) -> std::vec::Drain<'_, HeapSent> {
        self.completed.drain(..)
    }

    /// Queues a group of heaps as spead2's `async_send_heaps` does and posts all their
    /// packets (interleaved per `mode`), paced by the rate limiter on `clock`. Returns
    /// once every packet is posted; the heaps stay in flight until their completions
    /// come back (see [`Sender::take_completed`], [`Sender::drain`]).
    ///
    /// # Errors
    /// [`SendHeapsError::QueueFull`] when the group does not fit beside the heaps in
    /// flight (nothing is sent); [`SendError::SubstreamOutOfRange`] and other
    /// packetizing errors (nothing is sent); verbs errors.
    pub fn send_heaps(
        &mut self,
        heaps: &[HeapReference<'_>],
        mode: GroupMode,
        clock: &mut dyn Clock,
    ) -> Result<(), SendHeapsError> {
        if heaps.is_empty() {
            return Ok(());
        }
        let substreams = self.substreams();
        if let Some(h) = heaps.iter().find(|h| h.substream >= substreams) {
            return Err(SendError::SubstreamOutOfRange {
                substream: h.substream,
                substreams,
            }
            .into());
        }
        let mut group = HeapGroup::new(heaps, self.max_size, mode)?;
        // What the CQ holds now frees its place in the queue (one poll, no wait).
        if self.posted > 0 {
            self.reap(None)?;
        }
        if self.heaps_in_flight + heaps.len() > self.config.max_heaps {
            return Err(SendHeapsError::QueueFull {
                in_flight: self.heaps_in_flight,
                asked: heaps.len(),
                max_heaps: self.config.max_heaps,
            });
        }
        if self.posted == 0 && self.pending == 0 {
            // As spead2 when its queue ran empty: idle time is not caught up.
            self.limiter.resume(clock.now_ns());
        }
        let seq0 = self.first_seq + self.in_flight.len() as u64;
        for h in heaps {
            self.in_flight.push_back(InFlight {
                sent: HeapSent {
                    cnt: h.cnt,
                    substream: h.substream,
                    bytes: 0,
                    ok: true,
                },
                outstanding: 0,
                cut: false,
                done: false,
            });
        }
        self.heaps_in_flight += heaps.len();
        self.stats.heaps += heaps.len() as u64;
        let cut = self.cut_group(&mut group, heaps, seq0, clock);
        // Heaps of the group already retired are gone from the front of the queue.
        for seq in seq0.max(self.first_seq)..seq0 + heaps.len() as u64 {
            let f = &mut self.in_flight[(seq - self.first_seq) as usize];
            f.cut = true;
            // A group cut short: its heaps are reported failed once what was posted
            // has completed.
            f.sent.ok &= cut.is_ok();
        }
        let posted = self.post_pending();
        // A heap whose completions all came back while it was being cut.
        self.retire(seq0, heaps.len());
        cut?;
        posted?;
        Ok(())
    }

    /// Cuts every packet of `group` into slots and posts them in batches, paced by the
    /// rate limiter.
    fn cut_group(
        &mut self,
        group: &mut HeapGroup<'_>,
        heaps: &[HeapReference<'_>],
        seq0: u64,
        clock: &mut dyn Clock,
    ) -> Result<(), SendHeapsError> {
        let mut parts: Vec<Part<'_>> = Vec::with_capacity(MAX_SGE);
        let group_len = heaps.len();
        loop {
            if (0..group_len).all(|i| group.is_done(i)) {
                break;
            }
            if let Some(at) = self.limiter.wait_until(clock.now_ns()) {
                self.stats.rate_waits += 1;
                self.post_pending()?;
                clock.sleep_until(at);
                continue;
            }
            let pos = self.take_slot()?;
            let (headers, max_size) = (self.headers, self.max_size);
            let slot = self.pool.slot_mut(&mut self.tokens[pos]);
            let Some((prefix, index)) =
                group.next_packet_parts(&mut slot[headers..headers + max_size], &mut parts)?
            else {
                self.give_back_slot();
                break;
            };
            let seq = seq0 + index as u64;
            let substream = heaps[index].substream;
            let (len, gathered) = self.gather(pos, prefix, &parts);
            self.finish_slot(pos, len, substream, seq);
            self.stats.gathered_bytes += gathered as u64;
            self.limiter.sent(len);
            let f = &mut self.in_flight[(seq - self.first_seq) as usize];
            f.outstanding += 1;
            f.cut = group.is_done(index);
            if self.pending >= self.target_batch {
                self.post_pending()?;
            }
        }
        Ok(())
    }

    /// Sends one packet that `fill` writes into a buffer of [`Sender::max_size`] bytes
    /// and whose length it returns (`None` or 0: nothing to send), to substream 0.
    /// Packets are posted in batches; call [`Sender::flush`] to post a partial batch.
    ///
    /// # Errors
    /// [`VerbsError::Config`] when `fill` claims more than the buffer; verbs errors.
    pub fn send_with<E>(
        &mut self,
        fill: impl FnOnce(&mut [u8]) -> Result<Option<usize>, E>,
    ) -> Result<Option<usize>, SendWithError<E>> {
        self.send_parts_with(&mut Vec::new(), |buf, _| fill(buf))
    }

    /// Sends one packet cut as [`Packetizer::next_packet_parts`] cuts it, to substream 0:
    /// `cut` writes the packet's first bytes (SPEAD header, item pointers) into a buffer
    /// of [`Sender::max_size`] bytes, returns their length (`None`: nothing to send),
    /// and appends the item bytes that follow to `parts` (cleared first). Parts lying
    /// in a region given to [`Sender::add_memory_region`] are gathered by the NIC from
    /// there, without a copy (when the packet needs at most [`MAX_SGE`] SGEs); the
    /// others are copied into the slot. The caller keeps `parts` to reuse its memory.
    /// Packets are posted in batches; call [`Sender::flush`] to post a partial batch,
    /// and [`Sender::drain`] before writing registered bytes a packet gathers from.
    ///
    /// # Errors
    /// [`VerbsError::Config`] when the packet exceeds [`Sender::max_size`]; verbs errors.
    ///
    /// [`Packetizer::next_packet_parts`]: crate::send::Packetizer::next_packet_parts
    pub fn send_parts_with<'h, E>(
        &mut self,
        parts: &mut Vec<Part<'h>>,
        cut: impl FnOnce(&mut [u8], &mut Vec<Part<'h>>) -> Result<Option<usize>, E>,
    ) -> Result<Option<usize>, SendWithError<E>> {
        let pos = self.take_slot().map_err(SendWithError::Verbs)?;
        let (headers, max_size) = (self.headers, self.max_size);
        let slot = self.pool.slot_mut(&mut self.tokens[pos]);
        parts.clear();
        let prefix = match cut(&mut slot[headers..headers + max_size], parts) {
            Ok(Some(len)) => len,
            Ok(None) => {
                self.give_back_slot();
                return Ok(None);
            }
            Err(e) => {
                self.give_back_slot();
                return Err(SendWithError::Fill(e));
            }
        };
        let total = prefix + parts.iter().map(Part::len).sum::<usize>();
        if total == 0 {
            self.give_back_slot();
            return Ok(None);
        }
        if total > self.max_size {
            self.give_back_slot();
            return Err(SendWithError::Verbs(VerbsError::Config(format!(
                "a packet of {total} bytes exceeds max_size {}",
                self.max_size
            ))));
        }
        let (len, gathered) = self.gather(pos, prefix, parts);
        self.finish_slot(pos, len, 0, NO_HEAP);
        self.stats.gathered_bytes += gathered as u64;
        if self.pending >= self.target_batch {
            self.post_pending().map_err(SendWithError::Verbs)?;
        }
        Ok(Some(len))
    }

    /// Sends a packet by copying `packet` (for callers that already have the bytes).
    ///
    /// # Errors
    /// As [`Sender::send_with`].
    pub fn send(&mut self, packet: &[u8]) -> Result<(), VerbsError> {
        self.send_with(|buf| {
            if packet.len() > buf.len() {
                return Err(VerbsError::Config(format!(
                    "a packet of {} bytes exceeds max_size {}",
                    packet.len(),
                    buf.len()
                )));
            }
            buf[..packet.len()].copy_from_slice(packet);
            Ok(Some(packet.len()))
        })
        .map(|_| ())
        .map_err(|e| match e {
            SendWithError::Fill(e) | SendWithError::Verbs(e) => e,
        })
    }

    /// Posts the packets queued so far.
    ///
    /// # Errors
    /// Verbs errors from the post.
    pub fn flush(&mut self) -> Result<(), VerbsError> {
        self.post_pending()
    }

    /// Flushes and waits until every posted packet (and so every heap) has completed.
    ///
    /// # Errors
    /// Verbs errors; [`VerbsError::Config`] when completions stop arriving.
    pub fn drain(&mut self) -> Result<(), VerbsError> {
        self.post_pending()?;
        while self.posted > 0 {
            if self.reap(Some(COMPLETION_WAIT))? == 0 {
                return Err(VerbsError::Config(
                    "send completions stopped arriving".into(),
                ));
            }
        }
        Ok(())
    }

    /// Waits until at most `heaps` heaps are in flight (what spead2_send does before
    /// queueing more when `max_heaps` are out).
    ///
    /// # Errors
    /// As [`Sender::drain`].
    pub fn wait_heaps(&mut self, heaps: usize) -> Result<(), VerbsError> {
        self.post_pending()?;
        while self.heaps_in_flight > heaps {
            if self.reap(Some(COMPLETION_WAIT))? == 0 {
                return Err(VerbsError::Config(
                    "send completions stopped arriving".into(),
                ));
            }
        }
        Ok(())
    }

    /// The ring position of a free slot, now counted as pending (waits for completions
    /// when every slot is out).
    fn take_slot(&mut self) -> Result<usize, VerbsError> {
        while self.posted + self.pending == self.tokens.len() {
            if self.pending > 0 {
                self.post_pending()?;
            }
            if self.reap(Some(COMPLETION_WAIT))? == 0 {
                return Err(VerbsError::Config(
                    "no send slot came back: completions stopped".into(),
                ));
            }
        }
        let pos = (self.head + self.posted + self.pending) % self.tokens.len();
        self.pending += 1;
        Ok(pos)
    }

    /// Returns the slot [`Sender::take_slot`] just gave out.
    fn give_back_slot(&mut self) {
        self.pending -= 1;
    }

    /// Builds the SGE list of the packet in slot `pos`: its first `prefix` SPEAD bytes
    /// are in the slot behind the headers; `parts` follow, gathered from a registered
    /// region when all fit in [`MAX_SGE`] SGEs, else copied into the slot. Returns the
    /// packet's SPEAD length and the bytes gathered.
    fn gather(&mut self, pos: usize, prefix: usize, parts: &[Part<'_>]) -> (usize, usize) {
        let pool_lkey = self.pool.mr().lkey();
        let mut meta = SlotMeta {
            sge: [Sge::default(); MAX_SGE],
            nsge: 1,
            substream: 0,
            bytes: 0,
            heap: NO_HEAP,
        };
        let mut copy_at = self.headers + prefix;
        meta.sge[0] = self.pool.send_sge(&self.tokens[pos], copy_at);
        let slot_addr = meta.sge[0].addr;
        // spead2: the slot's SGE and one per part must fit in MAX_SGE (before merging).
        let can_skip_copy = parts.len() < MAX_SGE;
        let mut len = prefix;
        let mut gathered = 0;
        for part in parts {
            let n = part.len();
            if n == 0 {
                continue;
            }
            let region = match part {
                Part::Data(d) if can_skip_copy => self.region_of(d),
                _ => None,
            };
            let cur = match (region, part) {
                (Some((addr, lkey)), _) => {
                    gathered += n;
                    Sge {
                        addr,
                        length: n as u32,
                        lkey,
                    }
                }
                (None, p) => {
                    let slot = self.pool.slot_mut(&mut self.tokens[pos]);
                    match p {
                        Part::Data(d) => slot[copy_at..copy_at + n].copy_from_slice(d),
                        Part::Zeros(_) => slot[copy_at..copy_at + n].fill(0),
                    }
                    let sge = Sge {
                        addr: slot_addr + copy_at as u64,
                        length: n as u32,
                        lkey: pool_lkey,
                    };
                    copy_at += n;
                    sge
                }
            };
            len += n;
            let prev = &mut meta.sge[meta.nsge - 1];
            if prev.lkey == cur.lkey && prev.addr + u64::from(prev.length) == cur.addr {
                prev.length += cur.length;
            } else {
                meta.sge[meta.nsge] = cur;
                meta.nsge += 1;
            }
        }
        meta.bytes = len;
        self.meta[pos] = meta;
        (len, gathered)
    }

    /// The address and lkey of `d` in a registered region, if it lies in one.
    fn region_of(&self, d: &[u8]) -> Option<(u64, u32)> {
        let start = d.as_ptr() as usize;
        let at = self.regions.partition_point(|r| r.start <= start);
        let r = self.regions.get(at.checked_sub(1)?)?;
        (start + d.len() <= r.start + r.len).then(|| (start as u64, r.mr.lkey()))
    }

    /// Writes the frame headers of slot `pos` for `substream` and records the packet.
    fn finish_slot(&mut self, pos: usize, len: usize, substream: usize, heap: u64) {
        if let Mode::Raw { templates, offload } = &mut self.mode {
            let slot = self.pool.slot_mut(&mut self.tokens[pos]);
            templates[substream].write(slot, len, *offload);
        }
        let m = &mut self.meta[pos];
        m.substream = substream;
        m.heap = heap;
        self.stats.packets += 1;
        self.stats.bytes += len as u64;
    }

    /// Posts the pending slots, in requests of at most `target_batch` packets, the
    /// last of each signaled with the request's packet count as its `wr_id`.
    fn post_pending(&mut self) -> Result<(), VerbsError> {
        let n = self.tokens.len();
        let mut flags = SendFlags::empty();
        if let Mode::Raw { offload: true, .. } = self.mode {
            flags |= SendFlags::IP_CSUM;
        }
        while self.pending > 0 {
            let count = self.pending.min(self.target_batch);
            let first = (self.head + self.posted) % n;
            // Requests are built on the stack, in an array no longer than the batch needs
            // (a paced sender posts one packet at a time).
            match count {
                1 => self.post_chunk::<1>(first, count, flags),
                2..=8 => self.post_chunk::<8>(first, count, flags),
                _ => self.post_chunk::<MAX_CHUNK>(first, count, flags),
            }?;
            self.stats.batches += 1;
            self.pending -= count;
            self.posted += count;
        }
        Ok(())
    }

    /// Posts the `count` (at most `N`) packets from ring position `first`, only the last
    /// signaled, its `wr_id` the count.
    fn post_chunk<const N: usize>(
        &self,
        first: usize,
        count: usize,
        flags: SendFlags,
    ) -> Result<(), VerbsError> {
        let n = self.tokens.len();
        let wrs: [SendWr<'_, C::Ah>; N] = std::array::from_fn(|k| {
            let m = &self.meta[(first + k.min(count - 1)) % n];
            let detail = match &self.mode {
                Mode::Raw { .. } => WrDetail::None,
                Mode::Ud { dests } => WrDetail::Ud {
                    ah: &dests[m.substream].0,
                    remote_qpn: MULTICAST_QPN,
                    remote_qkey: dests[m.substream].1,
                },
            };
            let last = k + 1 == count;
            SendWr {
                wr_id: if last { WR_TAG | count as u64 } else { 0 },
                sg_list: &m.sge[..m.nsge],
                opcode: SendOpcode::Send,
                send_flags: if last {
                    flags | SendFlags::SIGNALED
                } else {
                    flags
                },
                imm_data: 0,
                detail,
            }
        });
        // SAFETY: every SGE lies in the slot pool's registered memory (the slots
        // `first..first + count`, which nothing writes until their completion frees
        // them) or in a region the user registered, whose bytes `add_memory_region`'s
        // contract keeps allocated and unwritten until then.
        unsafe { self.ep.qp.post_send(&wrs[..count]) }?;
        Ok(())
    }

    /// Takes send completions (waiting up to `timeout`; `None`: one poll of the CQ, no
    /// wait), frees their batches' slots and retires the heaps whose packets are all
    /// done. Returns the completions taken.
    fn reap(&mut self, timeout: Option<Duration>) -> Result<usize, VerbsError> {
        let got = match timeout {
            Some(t) => self.ep.wait(&mut self.wcs, 10, Some(t))?,
            None => self.ep.cq.poll(&mut self.wcs)?,
        };
        let n = self.tokens.len();
        let mut lowest = None::<u64>;
        for i in 0..got {
            let wc = self.wcs[i];
            if wc.wr_id & !0xffff_ffff != WR_TAG {
                continue;
            }
            let ok = wc.is_success();
            if !ok {
                self.stats.completion_errors += 1;
            }
            let count = (wc.wr_id & 0xffff_ffff) as usize;
            for _ in 0..count.min(self.posted) {
                let m = self.meta[self.head];
                if m.heap != NO_HEAP {
                    let f = &mut self.in_flight[(m.heap - self.first_seq) as usize];
                    f.outstanding -= 1;
                    if ok {
                        f.sent.bytes += m.bytes as u64;
                    } else {
                        f.sent.ok = false;
                    }
                    lowest = Some(lowest.map_or(m.heap, |l| l.min(m.heap)));
                }
                self.head = (self.head + 1) % n;
                self.posted -= 1;
            }
        }
        if let Some(from) = lowest {
            let span = (self.first_seq + self.in_flight.len() as u64 - from) as usize;
            self.retire(from, span);
        }
        Ok(got)
    }

    /// Reports the heaps `from..from + count` (sequence numbers) that are cut and have
    /// nothing outstanding, and drops finished heaps from the front of the queue.
    fn retire(&mut self, from: u64, count: usize) {
        for seq in from.max(self.first_seq)..from + count as u64 {
            let Some(f) = self.in_flight.get_mut((seq - self.first_seq) as usize) else {
                break;
            };
            if !f.done && f.cut && f.outstanding == 0 {
                f.done = true;
                self.completed.push(f.sent);
                self.heaps_in_flight -= 1;
                self.stats.heaps_completed += 1;
            }
        }
        while self.in_flight.front().is_some_and(|f| f.done) {
            self.in_flight.pop_front();
            self.first_seq += 1;
        }
    }
}

fn limiter_of(c: &SendStreamConfig) -> RateLimiter {
    RateLimiter::new(c.rate, c.burst_size, c.burst_rate_ratio)
}

/// The error of [`Sender::send_with`] and [`Sender::send_parts_with`]: the fill (or cut)
/// function's, or the transport's.
#[derive(Debug, thiserror::Error)]
pub enum SendWithError<E> {
    /// The fill function failed.
    #[error("filling the packet failed: {0}")]
    Fill(E),
    /// The transport failed.
    #[error(transparent)]
    Verbs(VerbsError),
}
