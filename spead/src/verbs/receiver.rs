//! The verbs receive transport (raw Ethernet or UD multicast), feeding a
//! [`crate::recv::Stream`]. Generic over the verbs backend.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::time::Duration;

use verbs_api::helpers::{bring_up, ConnectParams, ContextBuilder, Endpoint};
use verbs_api::pool::{SlotPool, SlotPoolConfig, SlotToken};
use verbs_api::{
    ipv4_multicast_mac, Completion, Context, DeviceCapFlags, EthFilter, FlowAttr, FlowSpec, Gid,
    Ipv4Filter, QpState, QpType, QueuePair, Verbs, WcFlags, GRH_LEN,
};

use super::config::ud_qkey;
use super::config::{find_device, wait_timeout, IbvConfig};
use super::error::VerbsError;
use super::frame::{self, FrameDrop, HEADERS};
use super::iface::interface_mac;
use crate::recv::sink::HeapSink;
use crate::recv::Stream;

/// Completions taken per poll.
const BATCH: usize = 64;

/// What a receiver saw, below the SPEAD layer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReceiverStats {
    /// Frames (raw) or messages (UD) received.
    pub frames: u64,
    /// Datagrams handed to the stream.
    pub delivered: u64,
    /// Frames dropped, by cause.
    pub dropped: BTreeMap<FrameDrop, u64>,
    /// Receive completions with an error status (their slots are not reposted).
    pub completion_errors: u64,
    /// Polls that returned completions.
    pub batches: u64,
    /// Waits that ended with nothing.
    pub timeouts: u64,
}

impl ReceiverStats {
    /// Frames dropped, all causes.
    pub fn dropped_total(&self) -> u64 {
        self.dropped.values().sum()
    }
}

enum Mode<C: Context> {
    /// `verify`: [`IbvConfig::verify_checksums`]. `nic_checksums`: with it, the device
    /// verifies IPv4 and UDP checksums on receive and reports the result as
    /// IBV_WC_IP_CSUM_OK (it has IBV_DEVICE_RAW_IP_CSUM).
    Raw {
        flows: Vec<C::Flow>,
        verify: bool,
        nic_checksums: bool,
    },
    Ud {
        groups: Vec<Ipv4Addr>,
    },
}

/// A verbs receive transport; see the module docs of [`super`].
pub struct Receiver<C: Context> {
    mode: Mode<C>,
    pool: SlotPool<C>,
    ep: Endpoint<C>,
    endpoints: Vec<SocketAddrV4>,
    wcs: Box<[Completion]>,
    tokens: Vec<SlotToken>,
    stats: ReceiverStats,
    busy: bool,
    max_poll: u32,
    /// The host's membership of the groups (real devices only; see
    /// [`Verbs::joins_host_multicast`]), held for the receiver's life.
    _igmp: Option<UdpSocket>,
}

impl<C: Context> std::fmt::Debug for Receiver<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Receiver")
            .field("endpoints", &self.endpoints)
            .field("slots", &self.pool.len())
            .field("stats", &self.stats)
            .finish()
    }
}

/// Slot count: buffer_size / slot size, bounded by the device's queue and CQ limits.
fn slot_count(attr: &verbs_api::DeviceAttr, cfg: &IbvConfig, slot: usize) -> usize {
    (cfg.buffer_size / slot)
        .max(1)
        .min(attr.max_qp_wr as usize)
        .min(attr.max_cqe as usize)
}

/// On a real network a switch forwards a group only after an IGMP join: a socket joined
/// to every endpoint's group on the interface makes the host's kernel send it, as
/// spead2's ibverbs reader does. The membership lasts as long as the socket.
///
/// # Errors
/// [`VerbsError::HostJoin`] naming the group and interface the kernel refused.
fn join_on_host(groups: &[SocketAddrV4], iface: Ipv4Addr) -> Result<UdpSocket, VerbsError> {
    let join_error = |group: Ipv4Addr, e: std::io::Error| VerbsError::HostJoin {
        group,
        iface,
        reason: e.to_string(),
    };
    let socket =
        UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).map_err(|e| join_error(*groups[0].ip(), e))?;
    for e in groups {
        socket
            .join_multicast_v4(e.ip(), &iface)
            .map_err(|err| join_error(*e.ip(), err))?;
    }
    Ok(socket)
}

/// Whether a datagram to `dst` belongs to `endpoint` (what its flow rule steers): the
/// port always, the address unless the endpoint is `0.0.0.0`.
pub(crate) fn endpoint_matches(endpoint: &SocketAddrV4, dst: &SocketAddrV4) -> bool {
    endpoint.port() == dst.port() && (endpoint.ip().is_unspecified() || endpoint.ip() == dst.ip())
}

/// The MAC decoded from a modified EUI-64 link-local GID (fe80::/64 with ff:fe in the
/// middle of the interface id), as RoCE devices list their port's MAC at GID index 0.
fn mac_of_link_local(gid: &Gid) -> Option<[u8; 6]> {
    let g = gid.0;
    (g[..8] == [0xfe, 0x80, 0, 0, 0, 0, 0, 0] && g[11] == 0xff && g[12] == 0xfe)
        .then(|| [g[8] ^ 2, g[9], g[10], g[13], g[14], g[15]])
}

/// The MAC of the interface with address `ip`, for the flow rule of a unicast endpoint
/// (spead2: `interface_mac(endpoint.address())`, read from the host). A device on the
/// host's network ([`Verbs::joins_host_multicast`]) asks the host, as spead2 does; a
/// simulated or emulated device is the only interface there is, so `ip` must be its
/// address, and its MAC is read from the link-local GID at index 0.
fn unicast_mac<V: Verbs>(
    verbs: &V,
    ctx: &V::Context,
    port: u8,
    iface: Ipv4Addr,
    ip: Ipv4Addr,
) -> Result<[u8; 6], VerbsError> {
    if verbs.joins_host_multicast() {
        return interface_mac(ip);
    }
    if ip != iface {
        return Err(VerbsError::Config(format!(
            "no network interface has address {ip} (the device's interface is {iface})"
        )));
    }
    let gid = ctx.query_gid(port, 0)?;
    mac_of_link_local(&gid).ok_or_else(|| {
        VerbsError::Config(format!(
            "the MAC of interface {iface} is unknown: GID 0 of port {port} ({gid}) is not a \
             link-local EUI-64 GID"
        ))
    })
}

/// The MAC a raw sender on the interface with address `iface` sends from: the host's
/// (spead2's `interface_mac`) for a device on the host's network, else the device's port
/// MAC from its link-local GID 0 (a simulated or emulated device).
///
/// # Errors
/// [`VerbsError::NoInterface`] when no device has the address; [`VerbsError::Config`]
/// when the MAC cannot be found.
pub fn source_mac<V: Verbs>(verbs: &V, iface: Ipv4Addr) -> Result<[u8; 6], VerbsError> {
    if verbs.joins_host_multicast() {
        return interface_mac(iface);
    }
    let dev = find_device(verbs, iface)?;
    let ctx = verbs.open(&dev.device)?;
    unicast_mac(verbs, &ctx, dev.port, iface, iface)
}

/// spead2's flow rule for an endpoint (`create_flow` in common_ibv.cpp): Ethernet, IPv4
/// and UDP specs; for `0.0.0.0` only the UDP destination port is matched (the other two
/// specs have empty masks); otherwise also the destination address and the destination
/// MAC: the group's 01:00:5e MAC for multicast, the interface's MAC for unicast.
fn endpoint_flow(port: u8, e: &SocketAddrV4, unicast_mac: [u8; 6]) -> FlowAttr {
    if e.ip().is_unspecified() {
        return FlowAttr::normal(
            port,
            vec![
                FlowSpec::Eth {
                    val: EthFilter::default(),
                    mask: EthFilter::default(),
                },
                FlowSpec::Ipv4 {
                    val: Ipv4Filter::default(),
                    mask: Ipv4Filter::default(),
                },
                FlowSpec::udp_dst(e.port()),
            ],
        );
    }
    let mac = if e.ip().is_multicast() {
        ipv4_multicast_mac(*e.ip())
    } else {
        unicast_mac
    };
    FlowAttr::udp_endpoint(port, mac, *e.ip(), e.port())
}

impl<C: Context> Receiver<C> {
    /// spead2's ibverbs reader: a RAW_PACKET QP with one flow rule per endpoint on the
    /// device that owns `cfg.interface`. Endpoints may be multicast groups, unicast
    /// addresses (of the interface) or `0.0.0.0` (every address, that port).
    ///
    /// # Errors
    /// [`VerbsError::Config`] for arguments spead2 rejects, or a unicast endpoint whose
    /// interface MAC cannot be found (on a simulated or emulated device: one that is not
    /// the interface's address); [`VerbsError::NoInterface`] when no device has the
    /// interface address; [`VerbsError::Verbs`] when the device lacks RAW_PACKET or flow
    /// steering (Unsupported) or a call fails;
    /// [`VerbsError::HostJoin`] when a backend on the host's network
    /// ([`Verbs::joins_host_multicast`]) cannot join a group on the interface.
    pub fn raw<V: Verbs<Context = C>>(verbs: &V, cfg: &IbvConfig) -> Result<Self, VerbsError> {
        Self::new(verbs, cfg, QpType::RawPacket)
    }

    /// The UD multicast reader: a UD QP attached to every endpoint's group.
    ///
    /// # Errors
    /// As [`Receiver::raw`]; also [`VerbsError::Config`] when an endpoint is not a
    /// multicast group or the endpoints do not share one UDP port (it selects the Q_Key).
    pub fn ud<V: Verbs<Context = C>>(verbs: &V, cfg: &IbvConfig) -> Result<Self, VerbsError> {
        Self::new(verbs, cfg, QpType::Ud)
    }

    fn new<V: Verbs<Context = C>>(
        verbs: &V,
        cfg: &IbvConfig,
        qp_type: QpType,
    ) -> Result<Self, VerbsError> {
        let iface = if qp_type == QpType::Ud {
            cfg.validate_multicast()?
        } else {
            cfg.validate()?
        };
        let port0 = cfg.endpoints[0].port();
        if qp_type == QpType::Ud && cfg.endpoints.iter().any(|e| e.port() != port0) {
            return Err(VerbsError::Config(
                "a UD receiver's endpoints must share one UDP port (it selects the Q_Key)".into(),
            ));
        }
        let dev = find_device(verbs, iface)?;
        let probe = verbs.open(&dev.device)?;
        let attr = probe.query_device()?;
        drop(probe);
        let (slot, padding) = match qp_type {
            QpType::Ud => (cfg.max_size, GRH_LEN),
            _ => (cfg.max_size + HEADERS, 0),
        };
        let slots = slot_count(&attr, cfg, slot + padding);
        let ep = ContextBuilder::new(qp_type)
            .device(&dev.device)
            .port(dev.port)
            .queues(1, slots as u32, 1, 1)
            .cq_size(slots as u32)
            .notification(cfg.notification())
            .comp_vector(cfg.comp_vector)
            .build(verbs)?;
        let params = ConnectParams {
            port: dev.port,
            qkey: ud_qkey(port0),
            ..ConnectParams::default()
        };
        let pool = SlotPool::new(
            &ep.ctx,
            &ep.pd,
            &SlotPoolConfig::new(slot, slots).with_padding(padding),
        )?;
        let mode = match qp_type {
            QpType::Ud => {
                bring_up(&ep.qp, QpState::Rts, &params)?;
                let mut groups = Vec::new();
                for e in &cfg.endpoints {
                    if !groups.contains(e.ip()) {
                        ep.qp.attach_mcast(&Gid::from_ipv4(*e.ip()), 0)?;
                        groups.push(*e.ip());
                    }
                }
                Mode::Ud { groups }
            }
            _ => {
                bring_up(&ep.qp, QpState::Rtr, &params)?;
                let mut flows = Vec::new();
                for e in &cfg.endpoints {
                    let mac = if e.ip().is_unspecified() || e.ip().is_multicast() {
                        [0; 6]
                    } else {
                        unicast_mac(verbs, &ep.ctx, dev.port, iface, *e.ip())?
                    };
                    let rule = endpoint_flow(dev.port, e, mac);
                    flows.push(ep.ctx.create_flow(&ep.qp, &rule)?);
                }
                Mode::Raw {
                    flows,
                    verify: cfg.verify_checksums,
                    nic_checksums: cfg.verify_checksums
                        && attr.device_cap_flags.contains(DeviceCapFlags::RAW_IP_CSUM),
                }
            }
        };
        // Post every slot before traffic can arrive.
        pool.post_recv_batch(&ep.qp, pool.take_n(slots))
            .map_err(verbs_api::Error::from)?;
        // As spead2, only the multicast endpoints are joined.
        let groups: Vec<SocketAddrV4> = cfg
            .endpoints
            .iter()
            .filter(|e| e.ip().is_multicast())
            .copied()
            .collect();
        let igmp = if verbs.joins_host_multicast() && !groups.is_empty() {
            Some(join_on_host(&groups, iface)?)
        } else {
            None
        };
        Ok(Receiver {
            mode,
            pool,
            ep,
            endpoints: cfg.endpoints.clone(),
            wcs: vec![Completion::default(); BATCH].into_boxed_slice(),
            tokens: Vec::with_capacity(BATCH),
            stats: ReceiverStats::default(),
            busy: !cfg.uses_channel(),
            max_poll: cfg.max_poll,
            _igmp: igmp,
        })
    }

    /// Counters.
    pub fn stats(&self) -> &ReceiverStats {
        &self.stats
    }

    /// Receive slots.
    pub fn slots(&self) -> usize {
        self.pool.len()
    }

    /// The endpoint (QP, CQ, context) underneath.
    pub fn endpoint(&self) -> &Endpoint<C> {
        &self.ep
    }

    /// The endpoints this receiver listens on.
    pub fn endpoints(&self) -> &[SocketAddrV4] {
        &self.endpoints
    }

    /// True for a RAW_PACKET receiver (whole Ethernet frames), false for UD.
    pub fn is_raw(&self) -> bool {
        matches!(self.mode, Mode::Raw { .. })
    }

    /// Waits up to `timeout` (busy-polling receivers do not wait) for frames, feeds each
    /// SPEAD datagram to `stream`, and reposts the slots. Returns the number of
    /// completions handled (0 on a timeout). Allocates nothing.
    ///
    /// # Errors
    /// [`VerbsError::Verbs`] when polling, waiting or reposting fails.
    pub fn poll_into<H: HeapSink>(
        &mut self,
        stream: &mut Stream<H>,
        timeout: Option<Duration>,
    ) -> Result<usize, VerbsError> {
        let mut delivered = 0;
        let n = self.poll_frames(timeout, |f| {
            if let Ok(payload) = f.verdict {
                delivered += 1;
                // A malformed SPEAD packet is counted by the stream itself.
                let _ = stream.add_datagram(payload);
            }
        })?;
        if n > 0 {
            stream.note_batch(delivered);
        }
        Ok(n)
    }

    /// As [`Receiver::poll_into`], but hands every received frame to `on_frame` (what a
    /// capture tool needs) instead of to a stream; the counters are kept the same way.
    ///
    /// # Errors
    /// As [`Receiver::poll_into`].
    pub fn poll_frames(
        &mut self,
        timeout: Option<Duration>,
        mut on_frame: impl FnMut(&RxFrame<'_>),
    ) -> Result<usize, VerbsError> {
        let n = self.ep.wait(
            &mut self.wcs,
            self.max_poll,
            wait_timeout(self.busy, timeout),
        )?;
        if n == 0 {
            self.stats.timeouts += 1;
            return Ok(0);
        }
        self.stats.batches += 1;
        for wc in &self.wcs[..n] {
            if !self.pool.owns(wc.wr_id) {
                continue;
            }
            let token = self.pool.complete(wc)?;
            if !wc.is_success() {
                self.stats.completion_errors += 1;
                self.pool.release(token);
                continue;
            }
            self.stats.frames += 1;
            let bytes = self.pool.received(&token, wc);
            let (verdict, grh) = match &self.mode {
                Mode::Raw {
                    verify,
                    nic_checksums,
                    ..
                } => (
                    match frame::parse(bytes, *verify) {
                        // A bit flipped where the FCS could not see it (in a switch):
                        // the NIC's checksum verdict is the only one that covers the
                        // UDP payload. Asked for only: spead2 checks no checksum.
                        Ok(_) if *nic_checksums && !wc.wc_flags.contains(WcFlags::IP_CSUM_OK) => {
                            Err(FrameDrop::Checksum)
                        }
                        Ok(d) if self.endpoints.iter().any(|e| endpoint_matches(e, &d.dst)) => {
                            Ok(d.payload)
                        }
                        Ok(_) => Err(FrameDrop::WrongEndpoint),
                        Err(cause) => Err(cause),
                    },
                    &[][..],
                ),
                Mode::Ud { groups } => {
                    // The GRH's last 20 bytes are the IPv4 header (RoCEv2): check the group.
                    let grh = self.pool.padding(&token);
                    let dst = Ipv4Addr::new(grh[36], grh[37], grh[38], grh[39]);
                    if groups.contains(&dst) {
                        (Ok(bytes), grh)
                    } else {
                        (Err(FrameDrop::WrongEndpoint), grh)
                    }
                }
            };
            match verdict {
                Ok(_) => self.stats.delivered += 1,
                Err(cause) => *self.stats.dropped.entry(cause).or_default() += 1,
            }
            on_frame(&RxFrame {
                bytes,
                grh,
                verdict,
            });
            self.tokens.push(token);
        }
        self.pool
            .post_recv_batch(&self.ep.qp, self.tokens.drain(..))
            .map_err(verbs_api::Error::from)?;
        Ok(n)
    }
}

/// One received frame, as [`Receiver::poll_frames`] hands it over.
#[derive(Debug, Clone, Copy)]
pub struct RxFrame<'a> {
    /// Raw: the whole Ethernet frame. UD: the message (the SPEAD packet).
    pub bytes: &'a [u8],
    /// UD: the 40-byte GRH area (for RoCEv2, the IPv4 header is its last 20 bytes).
    /// Raw: empty.
    pub grh: &'a [u8],
    /// The SPEAD datagram inside, or why the receiver dropped the frame.
    pub verdict: Result<&'a [u8], FrameDrop>,
}

impl RxFrame<'_> {
    /// UD: the IPv4 source and destination from the GRH (RoCEv2).
    pub fn grh_addrs(&self) -> Option<(Ipv4Addr, Ipv4Addr)> {
        let g = self.grh;
        (g.len() >= 40).then(|| {
            (
                Ipv4Addr::new(g[32], g[33], g[34], g[35]),
                Ipv4Addr::new(g[36], g[37], g[38], g[39]),
            )
        })
    }
}

impl<C: Context> Drop for Receiver<C> {
    fn drop(&mut self) {
        // Flow rules go before the QP (the Endpoint drops after this); multicast
        // attachments are detached explicitly, as libibverbs expects before destroy.
        if let Mode::Raw { flows, .. } = &mut self.mode {
            flows.clear();
        }
        if let Mode::Ud { groups } = &self.mode {
            for g in groups {
                let _ = self.ep.qp.detach_mcast(&Gid::from_ipv4(*g), 0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flow_rules_are_spead2s() {
        let group = SocketAddrV4::new(Ipv4Addr::new(239, 1, 2, 3), 7148);
        let uni = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 5), 7149);
        let any = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 7150);
        let mac = [2, 0, 10, 0, 0, 5];
        assert_eq!(
            endpoint_flow(1, &group, mac),
            FlowAttr::udp_endpoint(1, [1, 0, 0x5e, 1, 2, 3], *group.ip(), 7148)
        );
        assert_eq!(
            endpoint_flow(1, &uni, mac),
            FlowAttr::udp_endpoint(1, mac, *uni.ip(), 7149)
        );
        let w = endpoint_flow(2, &any, mac);
        assert_eq!(w.port, 2);
        assert_eq!(w.specs.len(), 3, "Ethernet and IPv4 specs with empty masks");
        assert_eq!(w.specs[2], FlowSpec::udp_dst(7150));
        for s in &w.specs[..2] {
            match s {
                FlowSpec::Eth { mask, .. } => assert_eq!(*mask, EthFilter::default()),
                FlowSpec::Ipv4 { mask, .. } => assert_eq!(*mask, Ipv4Filter::default()),
                other => panic!("{other:?}"),
            }
        }
        assert!(endpoint_matches(
            &any,
            &SocketAddrV4::new(Ipv4Addr::new(1, 2, 3, 4), 7150)
        ));
        assert!(!endpoint_matches(
            &any,
            &SocketAddrV4::new(Ipv4Addr::new(1, 2, 3, 4), 7151)
        ));
        assert!(!endpoint_matches(
            &uni,
            &SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 6), 7149)
        ));
    }

    #[test]
    fn macs_come_from_link_local_gids() {
        let mut g = [0u8; 16];
        g[..2].copy_from_slice(&[0xfe, 0x80]);
        g[8..].copy_from_slice(&[0x00, 0x00, 0x0a, 0xff, 0xfe, 0x00, 0x00, 0x05]);
        assert_eq!(mac_of_link_local(&Gid(g)), Some([2, 0, 10, 0, 0, 5]));
        assert_eq!(
            mac_of_link_local(&Gid::from_ipv4(Ipv4Addr::new(10, 0, 0, 5))),
            None
        );
    }
}
