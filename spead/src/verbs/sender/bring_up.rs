//! Bringing a sender up: the device, the queue pair, the slot pool, and the frame
//! headers (raw) or address handles (UD) of its endpoints.

use std::collections::VecDeque;
use std::net::SocketAddrV4;

use verbs_api::helpers::{bring_up, ConnectParams, ContextBuilder, Endpoint};
use verbs_api::pool::{SlotPool, SlotPoolConfig};
use verbs_api::{
    ipv4_multicast_mac, AhAttr, Completion, Context, DeviceCapFlags, Gid, QpState, QpType,
    RawPacketCaps, Sge, Verbs,
};

use super::state::{Mode, Sender, SlotMeta, MAX_CHUNK, NO_HEAP};
use super::types::{limiter_of, SendStreamConfig, SenderStats, MAX_SGE};
use crate::verbs::config::{find_device, ud_qkey, IbvConfig};
use crate::verbs::error::VerbsError;
use crate::verbs::frame::{HeaderTemplate, HEADERS};

impl<C: Context> Sender<C> {
    /// A raw sender: Ethernet frames from `src_mac` (the interface's MAC:
    /// [`crate::verbs::interface_mac`] on hardware, `02:00` + the address on the simulator)
    /// to `cfg.endpoints` (substream `i` to endpoint `i`), with TTL `cfg.ttl`.
    ///
    /// # Errors
    /// [`VerbsError::Config`] for arguments spead2 rejects (no endpoint, one not
    /// multicast); as [`crate::verbs::Receiver::raw`] otherwise.
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
}
