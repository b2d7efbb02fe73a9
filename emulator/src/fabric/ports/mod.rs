//! The fabric's ports to real networks (issue 24): a [`vxlan`] tunnel to another fabric
//! process or a Linux `vxlan` interface, and a [`qemu_stream`] socket a virtual machine's
//! NIC connects to. Each is an uplink of the fabric's switch (see backend-sim's
//! `Fabric::add_uplink`): the switch learns the MACs beyond it, sends it unicast for MACs
//! it does not know and all multicast; the topology's `faults` of the port act on what
//! the switch sends out of it, and the capture records what comes in (as it records what
//! a host sends). What arrives malformed is counted and dropped. The fabric answers ARP
//! for its hosts ([`arp`]) and IPv6 neighbour solicitations ([`nd`]), and speaks the
//! connection manager's MADs for them to the hosts beyond its ports ([`cm_mad`],
//! [`cm_frame`], [`cm_bridge`], SIDR in [`cm_sidr`]), resending them as the kernel's CM
//! does ([`cm_resend`]).
//! A port's `drop_cm_mads` drops the first CM MADs it would send (a fault that picks
//! its frames, for the tests of those resends).

pub mod arp;
pub mod cm_bridge;
pub mod cm_frame;
pub mod cm_mad;
pub mod cm_resend;
pub mod cm_sidr;
pub mod nd;
pub mod qemu_stream;
pub mod vxlan;

use std::fmt::Write as _;

use backend_sim::frame::eth::Mac;
use backend_sim::{Direction, Fabric, LinkFaultRule, PortConfig, PortId};

use crate::topology::{PortKind, PortSpec};
use qemu_stream::QemuStream;
use vxlan::Vxlan;

/// Counters of one port.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortStats {
    /// Frames that came in from the network and entered the switch.
    pub frames_in: u64,
    /// Frames sent out to the network.
    pub frames_out: u64,
    /// Datagrams or stream frames dropped as malformed (see [`vxlan::Malformed`], and
    /// stream frames too short or too long).
    pub malformed: u64,
    /// Frames for the network that could not be sent (a full socket, no peer).
    pub unsent: u64,
    /// CM MADs dropped by the port's `drop_cm_mads`.
    pub cm_dropped: u64,
}

#[derive(Debug)]
enum Io {
    Vxlan(Vxlan),
    Stream(QemuStream),
}

#[derive(Debug)]
struct Port {
    id: PortId,
    name: String,
    io: Io,
    stats: PortStats,
    /// CM MADs still to drop (`drop_cm_mads`), and whether there were any.
    drop_cm: (u32, bool),
}

/// The fabric's ports to real networks.
#[derive(Debug, Default)]
pub struct Ports {
    ports: Vec<Port>,
    /// The largest frame a port takes (the switch's ports' maximum).
    max_frame: usize,
    buf: Vec<u8>,
}

/// Most datagrams read from one port in one round.
const READ_BATCH: usize = 256;

impl Ports {
    /// Adds a port of `fabric` for each of `specs` (uplinks on a host of their own,
    /// after every host's port) and opens its socket; returns them with the fault rules
    /// of their links.
    ///
    /// # Errors
    /// A one-line reason naming the port: its socket cannot be made.
    pub fn open(
        fabric: &mut Fabric,
        specs: &[PortSpec],
    ) -> Result<(Ports, Vec<LinkFaultRule>), String> {
        let mut ports = Vec::new();
        let mut rules = Vec::new();
        let mut max_frame = 0;
        for (i, spec) in specs.iter().enumerate() {
            let (name, io) = match &spec.kind {
                PortKind::Vxlan { local, remote, vni } => {
                    let name = format!("vxlan {local} -> {remote} vni {vni}");
                    let v = Vxlan::bind(*local, *remote, *vni)
                        .map_err(|e| format!("port {name}: cannot bind {local}: {e}"))?;
                    (name, Io::Vxlan(v))
                }
                PortKind::QemuStream { path } => {
                    let name = format!("qemu-stream {}", path.display());
                    let s = QemuStream::listen(path)
                        .map_err(|e| format!("port {name}: cannot listen: {e}"))?;
                    (name, Io::Stream(s))
                }
            };
            let host = fabric.add_host(format!("port {}", i + 1));
            let n = u8::try_from(i + 1).map_err(|_| "more than 255 ports")?;
            let config = PortConfig {
                // A MAC no host port has (theirs are 02:00:...): it names the links'
                // random streams only.
                mac: Mac([0x02, 0xff, 0, 0, 0, n]),
                multicast_loopback: false,
                verify_checksums: false,
                ..PortConfig::with_ip(std::net::Ipv4Addr::UNSPECIFIED)
            };
            max_frame = config.max_frame;
            let id = fabric
                .add_uplink(host, config)
                .map_err(|e| format!("port {name}: {e}"))?;
            if !spec.faults.is_clean() {
                rules.push(LinkFaultRule {
                    port: id,
                    direction: Direction::FromSwitch,
                    faults: spec.faults.clone(),
                });
            }
            ports.push(Port {
                id,
                name,
                io,
                stats: PortStats::default(),
                drop_cm: (spec.drop_cm_mads, spec.drop_cm_mads > 0),
            });
        }
        Ok((
            Ports {
                ports,
                max_frame,
                buf: vec![0; 65536],
            },
            rules,
        ))
    }

    /// Whether there are none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.ports.is_empty()
    }

    /// Whether `port` is one of these.
    #[must_use]
    pub fn owns(&self, port: PortId) -> bool {
        self.ports.iter().any(|p| p.id == port)
    }

    /// Sends `frame`, which the switch sent out of `port`, to the network (unless the
    /// port's `drop_cm_mads` takes it).
    pub fn send(&mut self, port: PortId, frame: &[u8]) {
        let Some(p) = self.ports.iter_mut().find(|p| p.id == port) else {
            return;
        };
        if p.drop_cm.0 > 0 && is_cm_mad(frame) {
            p.drop_cm.0 -= 1;
            p.stats.cm_dropped += 1;
            return;
        }
        let sent = match &mut p.io {
            Io::Vxlan(v) => v.send(frame).is_ok(),
            Io::Stream(s) => s.send(frame),
        };
        if sent {
            p.stats.frames_out += 1;
        } else {
            p.stats.unsent += 1;
        }
    }

    /// Pushes the descriptors to poll.
    pub fn poll_fds(&self, out: &mut Vec<libc::pollfd>) {
        for p in &self.ports {
            match &p.io {
                Io::Vxlan(v) => out.push(super::sys::pollin(v.fd())),
                Io::Stream(s) => s.poll_fds(out),
            }
        }
    }

    /// Takes in what every port received (whether or not its descriptor was ready: a
    /// read that finds nothing costs one system call) and hands it to the switch at its
    /// port, now. Returns how many datagrams and stream frames it read.
    pub fn receive(&mut self, fabric: &mut Fabric) -> usize {
        let max_frame = self.max_frame;
        let mut read = 0;
        for p in &mut self.ports {
            match &mut p.io {
                Io::Vxlan(v) => {
                    for _ in 0..READ_BATCH {
                        let n = match v.recv(&mut self.buf) {
                            Ok(Some(n)) => n,
                            Ok(None) | Err(_) => break,
                        };
                        read += 1;
                        match vxlan::decapsulate(v.vni(), max_frame, &self.buf[..n]) {
                            Ok(inner) => {
                                if fabric.transmit(p.id, inner.to_vec()).is_ok() {
                                    p.stats.frames_in += 1;
                                } else {
                                    p.stats.malformed += 1;
                                }
                            }
                            Err(_) => p.stats.malformed += 1,
                        }
                    }
                }
                Io::Stream(s) => {
                    let got = s.serve(max_frame);
                    read += got.frames.len() + usize::try_from(got.skipped).unwrap_or(0);
                    p.stats.malformed += got.skipped;
                    for f in got.frames {
                        if fabric.transmit(p.id, f).is_ok() {
                            p.stats.frames_in += 1;
                        } else {
                            p.stats.malformed += 1;
                        }
                    }
                }
            }
        }
        read
    }

    /// The counters of each port, in order.
    #[must_use]
    pub fn stats(&self) -> Vec<PortStats> {
        self.ports.iter().map(|p| p.stats).collect()
    }

    /// One clause per port for the fabric's summary (empty without ports): `; port
    /// vxlan 127.0.0.1:4789 -> 127.0.0.1:4790 vni 42: 10 frames in, 12 out, 0 malformed,
    /// 0 unsent` (and `, 1 CM MADs dropped` for a port with `drop_cm_mads`).
    #[must_use]
    pub fn summary(&self) -> String {
        let mut s = String::new();
        for p in &self.ports {
            let t = p.stats;
            let _ = write!(
                s,
                "; port {}: {} frames in, {} out, {} malformed, {} unsent",
                p.name, t.frames_in, t.frames_out, t.malformed, t.unsent
            );
            if p.drop_cm.1 {
                let _ = write!(s, ", {} CM MADs dropped", t.cm_dropped);
            }
            if let Io::Stream(q) = &p.io {
                let _ = write!(
                    s,
                    " ({} peers connected, {} turned away, {} hung up on)",
                    q.stats.connected, q.stats.turned_away, q.stats.broken
                );
            }
        }
        s
    }
}

/// Whether `frame` is a CM MAD (a RoCE v2 datagram to QP1 of management class 0x07).
fn is_cm_mad(frame: &[u8]) -> bool {
    cm_frame::parse_frame(frame).is_some_and(|(_, _, _, mad)| mad.get(1) == Some(&cm_mad::CLASS_CM))
}
