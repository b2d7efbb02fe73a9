//! What the fabric's external ports hand outside (see [`super::external`]): the messages,
//! the sink that may take them at once, and the outbox that holds them otherwise.

use crate::clock::Nanos;
use crate::frame::eth::Mac;
use crate::ids::PortId;
use std::collections::VecDeque;
use std::net::Ipv4Addr;

/// What an external port hands to the outside, in the order it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExternalMsg {
    /// A frame the port transmitted (Ethernet header first, no FCS), with its global
    /// packet index in this fabric.
    Frame {
        /// The frame.
        frame: Vec<u8>,
        /// Its index ([`FabricStats::transmitted`](super::FabricStats) before it).
        index: u64,
        /// Its sender sealed it ([`Output::Frame`](super::Output)`::sealed`): a receiver
        /// that gets its bytes unchanged may take it sealed
        /// ([`Fabric::arrive_now`](super::Fabric::arrive_now)).
        sealed: bool,
    },
    /// The port joined an IPv4 multicast group (one more reference).
    JoinGroup(Ipv4Addr),
    /// The port dropped one reference to an IPv4 multicast group.
    LeaveGroup(Ipv4Addr),
    /// The port joined an Ethernet multicast group (one more reference).
    JoinMac(Mac),
    /// The port dropped one reference to an Ethernet multicast group.
    LeaveMac(Mac),
}

/// Takes each message of an external port as it happens, instead of the outbox (the
/// layer above sends it on at once: a frame a NIC sent is then on its way before the send
/// completes, as on a wire). It runs inside the simulation's call, so it must not call
/// back into the simulation. It may take a frame's buffer (`std::mem::take`, to keep the
/// frame without a copy); a buffer it leaves is kept for reuse afterwards. A sealed
/// RoCEv2 frame may reach it with its ICRC unwritten (four zero bytes, when nothing in the
/// simulation could read it: [`Fabric::may_leave_icrc`](super::Fabric::may_leave_icrc)):
/// the sink writes it ([`crate::frame::roce::fill_icrc`]) before the frame goes anywhere
/// but to a simulation that takes it sealed ([`super::unsummed::icrc_maybe_unwritten`]).
pub type ExternalSink = Box<dyn FnMut(PortId, &mut ExternalMsg) + Send>;

/// The fabric's external ports and their outbox.
#[derive(Default)]
pub(crate) struct External {
    pub(super) ports: Vec<PortId>,
    pub(super) outbox: VecDeque<(PortId, ExternalMsg)>,
    /// Frame buffers back from the layer above, reused by [`Fabric::inject`].
    pub(super) spare: Vec<Vec<u8>>,
    pub(super) sink: Option<ExternalSink>,
    /// The latest time a step may reach.
    pub horizon: Option<Nanos>,
}

impl std::fmt::Debug for External {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("External")
            .field("ports", &self.ports)
            .field("outbox", &self.outbox.len())
            .field("spare", &self.spare.len())
            .field("sink", &self.sink.is_some())
            .field("horizon", &self.horizon)
            .finish()
    }
}

/// Most spare buffers kept.
pub(super) const MAX_SPARE: usize = 1024;

impl External {
    /// True when the fabric has no external ports, no sink and nothing to tell outside.
    pub(crate) fn is_unused(&self) -> bool {
        self.ports.is_empty() && self.sink.is_none() && self.outbox.is_empty()
    }

    /// A copy of an unused one: its horizon.
    pub(crate) fn unused_copy(&self) -> Self {
        External {
            horizon: self.horizon,
            ..External::default()
        }
    }

    /// True if `port`'s link leads outside.
    #[inline]
    pub fn owns(&self, port: PortId) -> bool {
        !self.ports.is_empty() && self.ports.contains(&port)
    }

    /// Hands `msg` from `port` to the sink, or queues it in the outbox, if the port is
    /// external.
    pub fn tell(&mut self, port: PortId, msg: ExternalMsg) {
        if !self.owns(port) {
            return;
        }
        match &mut self.sink {
            None => self.outbox.push_back((port, msg)),
            Some(sink) => {
                let mut msg = msg;
                sink(port, &mut msg);
                if let ExternalMsg::Frame { frame, .. } = msg {
                    if frame.capacity() > 0 && self.spare.len() < MAX_SPARE {
                        self.spare.push(frame);
                    }
                }
            }
        }
    }
}
