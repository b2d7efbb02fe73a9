//! The verbs send transport (raw Ethernet frames or UD multicast messages). The
//! packetizer writes each SPEAD packet straight into a registered slot, behind the
//! prebuilt headers, so the payload is never copied again; a batch of packets is
//! posted with one signaled work request.

use std::net::SocketAddrV4;

use verbs_api::helpers::{bring_up, ConnectParams, ContextBuilder, Endpoint, Notification};
use verbs_api::pool::{SendParams, SlotPool, SlotPoolConfig, SlotToken};
use verbs_api::{
    ipv4_multicast_mac, AhAttr, Completion, Context, DeviceCapFlags, Gid, QpState, QpType,
    RawPacketCaps, SendFlags, Verbs, WrDetail, MULTICAST_QPN,
};

use super::config::{find_device, IbvConfig};
use super::frame::{HeaderTemplate, HEADERS};
use super::{ud_qkey, VerbsError};

/// Packets per post call (and per signaled completion).
const BATCH: usize = 32;

/// What a sender did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SenderStats {
    /// Packets posted.
    pub packets: u64,
    /// SPEAD bytes posted (without Ethernet/IP/UDP headers).
    pub bytes: u64,
    /// Post calls.
    pub batches: u64,
    /// Send completions with an error status.
    pub completion_errors: u64,
}

enum Mode<A> {
    Raw {
        template: HeaderTemplate,
        offload: bool,
    },
    Ud {
        ah: A,
        qkey: u32,
    },
}

/// A verbs send transport to one multicast endpoint; see [`super`].
pub struct Sender<C: Context> {
    mode: Mode<C::Ah>,
    pool: SlotPool<C>,
    ep: Endpoint<C>,
    pending: Vec<(SlotToken, usize)>,
    free: Vec<SlotToken>,
    wcs: Box<[Completion]>,
    max_size: usize,
    stats: SenderStats,
}

impl<C: Context> std::fmt::Debug for Sender<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sender")
            .field("stats", &self.stats)
            .field("slots", &self.pool.len())
            .finish()
    }
}

impl<C: Context> Sender<C> {
    /// A raw sender: Ethernet frames from `src_mac` (the interface's MAC:
    /// [`super::interface_mac`] on hardware, `02:00` + the address on the simulator)
    /// to `cfg.endpoints[0]`, with TTL `cfg.ttl`.
    ///
    /// # Errors
    /// As [`super::Receiver::raw`].
    pub fn raw<V: Verbs<Context = C>>(
        verbs: &V,
        cfg: &IbvConfig,
        src_mac: [u8; 6],
    ) -> Result<Self, VerbsError> {
        let (ep, pool, dst, iface) = Self::setup(verbs, cfg, QpType::RawPacket, HEADERS)?;
        let attr = ep.ctx.query_device()?;
        let offload = attr.device_cap_flags.contains(DeviceCapFlags::RAW_IP_CSUM)
            || attr.raw_packet_caps.contains(RawPacketCaps::IP_CSUM);
        let template = HeaderTemplate::new(
            src_mac,
            SocketAddrV4::new(iface, dst.port()),
            ipv4_multicast_mac(*dst.ip()),
            dst,
            cfg.ttl,
        );
        Ok(Self::finish(Mode::Raw { template, offload }, pool, ep, cfg))
    }

    /// A UD sender to the multicast GID of `cfg.endpoints[0]`. Packets must fit the
    /// port's active MTU (rxe silently drops larger UD messages).
    ///
    /// # Errors
    /// As [`super::Receiver::ud`]; [`VerbsError::Config`] when `max_size` exceeds the MTU.
    pub fn ud<V: Verbs<Context = C>>(verbs: &V, cfg: &IbvConfig) -> Result<Self, VerbsError> {
        let (ep, pool, dst, iface) = Self::setup(verbs, cfg, QpType::Ud, 0)?;
        let mtu = ep.ctx.query_port(ep.port)?.active_mtu.bytes() as usize;
        if cfg.max_size > mtu {
            return Err(VerbsError::Config(format!(
                "max_size {} exceeds the port's active MTU of {mtu}: UD messages must fit one MTU",
                cfg.max_size
            )));
        }
        let dev = find_device(verbs, iface)?;
        let mut av = AhAttr::roce(Gid::from_ipv4(*dst.ip()), dev.gid_index, dev.port);
        av.grh.hop_limit = cfg.ttl;
        let ah = ep.ctx.create_ah(&ep.pd, &av)?;
        Ok(Self::finish(
            Mode::Ud {
                ah,
                qkey: ud_qkey(dst.port()),
            },
            pool,
            ep,
            cfg,
        ))
    }

    #[allow(clippy::type_complexity)]
    fn setup<V: Verbs<Context = C>>(
        verbs: &V,
        cfg: &IbvConfig,
        qp_type: QpType,
        headers: usize,
    ) -> Result<(Endpoint<C>, SlotPool<C>, SocketAddrV4, std::net::Ipv4Addr), VerbsError> {
        let iface = cfg.validate_multicast()?;
        if cfg.endpoints.len() != 1 {
            return Err(VerbsError::Config(
                "a sender sends to exactly one endpoint".into(),
            ));
        }
        let dst = cfg.endpoints[0];
        let dev = find_device(verbs, iface)?;
        let probe = verbs.open(&dev.device)?;
        let attr = probe.query_device()?;
        drop(probe);
        let slot = cfg.max_size + headers;
        let slots =
            (cfg.buffer_size / slot).clamp(BATCH, attr.max_qp_wr.max(BATCH as u32) as usize);
        let depth = (slots as u32).min(attr.max_qp_wr);
        let notification = if cfg.uses_channel() {
            Notification::Channel {
                solicited_only: false,
            }
        } else {
            Notification::Poll
        };
        let ep = ContextBuilder::new(qp_type)
            .device(&dev.device)
            .port(dev.port)
            .queues(depth, 1, 1, 1)
            .cq_size(depth)
            .notification(notification)
            .comp_vector(cfg.comp_vector)
            .build(verbs)?;
        let params = ConnectParams {
            port: dev.port,
            qkey: ud_qkey(dst.port()),
            ..ConnectParams::default()
        };
        bring_up(&ep.qp, QpState::Rts, &params)?;
        let pool = SlotPool::new(&ep.ctx, &ep.pd, &SlotPoolConfig::new(slot, depth as usize))?;
        Ok((ep, pool, dst, iface))
    }

    fn finish(mode: Mode<C::Ah>, pool: SlotPool<C>, ep: Endpoint<C>, cfg: &IbvConfig) -> Self {
        let free = pool.take_n(pool.len());
        Sender {
            mode,
            pool,
            ep,
            pending: Vec::with_capacity(BATCH),
            free,
            wcs: vec![Completion::default(); BATCH].into_boxed_slice(),
            max_size: cfg.max_size,
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

    /// Sends one packet that `fill` writes into a buffer of [`Sender::max_size`] bytes
    /// and whose length it returns (`None` or 0: nothing to send). Packets are posted in
    /// batches; call [`Sender::flush`] to post a partial batch.
    ///
    /// # Errors
    /// [`VerbsError::Config`] when `fill` claims more than the buffer; verbs errors.
    pub fn send_with<E>(
        &mut self,
        fill: impl FnOnce(&mut [u8]) -> Result<Option<usize>, E>,
    ) -> Result<Option<usize>, SendWithError<E>> {
        let mut token = self.take_slot().map_err(SendWithError::Verbs)?;
        let headers = if matches!(self.mode, Mode::Raw { .. }) {
            HEADERS
        } else {
            0
        };
        let slot = self.pool.slot_mut(&mut token);
        let len = match fill(&mut slot[headers..headers + self.max_size]) {
            Ok(Some(len)) if len > 0 => len,
            Ok(_) => {
                self.free.push(token);
                return Ok(None);
            }
            Err(e) => {
                self.free.push(token);
                return Err(SendWithError::Fill(e));
            }
        };
        if len > self.max_size {
            self.free.push(token);
            return Err(SendWithError::Verbs(VerbsError::Config(format!(
                "a packet of {len} bytes exceeds max_size {}",
                self.max_size
            ))));
        }
        if let Mode::Raw { template, offload } = &mut self.mode {
            template.write(slot, len, *offload);
        }
        self.stats.packets += 1;
        self.stats.bytes += len as u64;
        self.pending.push((token, headers + len));
        if self.pending.len() == BATCH {
            self.flush().map_err(SendWithError::Verbs)?;
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

    /// Posts the packets queued so far (one signaled request per post call).
    ///
    /// # Errors
    /// Verbs errors from the post.
    pub fn flush(&mut self) -> Result<(), VerbsError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let mut flags = SendFlags::empty();
        if let Mode::Raw { offload: true, .. } = self.mode {
            flags |= SendFlags::IP_CSUM;
        }
        let detail = match &self.mode {
            Mode::Raw { .. } => WrDetail::None,
            Mode::Ud { ah, qkey } => WrDetail::Ud {
                ah,
                remote_qpn: MULTICAST_QPN,
                remote_qkey: *qkey,
            },
        };
        let params = SendParams {
            flags,
            ..SendParams::send(detail)
        };
        self.stats.batches += 1;
        match self
            .pool
            .post_send_batch(&self.ep.qp, self.pending.drain(..), params)
        {
            Ok(_) => Ok(()),
            Err(rejected) => {
                self.free.extend(rejected.tokens);
                Err(rejected.error.into())
            }
        }
    }

    /// Flushes and waits until every posted packet has completed.
    ///
    /// # Errors
    /// Verbs errors.
    pub fn drain(&mut self) -> Result<(), VerbsError> {
        self.flush()?;
        while self.free.len() < self.pool.len() {
            if self.reap(Some(std::time::Duration::from_secs(10)))? == 0 {
                return Err(VerbsError::Config(
                    "send completions stopped arriving".into(),
                ));
            }
        }
        Ok(())
    }

    fn take_slot(&mut self) -> Result<SlotToken, VerbsError> {
        loop {
            if let Some(t) = self.free.pop() {
                return Ok(t);
            }
            if !self.pending.is_empty() {
                self.flush()?;
            }
            if self.reap(Some(std::time::Duration::from_secs(10)))? == 0 {
                return Err(VerbsError::Config(
                    "no send slot came back: completions stopped".into(),
                ));
            }
        }
    }

    /// Takes send completions and returns their batches' slots to the free list.
    fn reap(&mut self, timeout: Option<std::time::Duration>) -> Result<usize, VerbsError> {
        let n = self.ep.wait(&mut self.wcs, 10, timeout)?;
        for wc in &self.wcs[..n] {
            if !wc.is_success() {
                self.stats.completion_errors += 1;
            }
            self.pool.complete_batch(wc, &mut self.free)?;
        }
        Ok(n)
    }
}

/// The error of [`Sender::send_with`]: the fill function's, or the transport's.
#[derive(Debug, thiserror::Error)]
pub enum SendWithError<E> {
    /// The fill function failed.
    #[error("filling the packet failed: {0}")]
    Fill(E),
    /// The transport failed.
    #[error(transparent)]
    Verbs(VerbsError),
}
