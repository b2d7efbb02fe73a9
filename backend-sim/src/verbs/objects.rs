//! The handles behind every verbs object: each holds the shared world and an id, and
//! removes its object from the world on drop. Also the verbs provider of a host.

use crate::ids::HostId;
use crate::verbs::context::SimContext;
use crate::verbs::world::{Ctx, World};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use verbs_api::{DeviceInfo, Error, ErrorKind, NodeType, Result, TransportType, Verbs};

pub(crate) type Shared = Arc<Mutex<World>>;

pub(crate) fn lock(w: &Shared) -> MutexGuard<'_, World> {
    w.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(crate) fn err(kind: ErrorKind, op: &'static str, msg: impl Into<String>) -> Error {
    let errno = match kind {
        ErrorKind::InvalidArgument | ErrorKind::InvalidState => 22,
        ErrorKind::QueueFull | ErrorKind::OutOfResources => 12,
        ErrorKind::Unsupported => 95,
        ErrorKind::NotFound => 2,
        ErrorKind::LimitExceeded => 22,
        ErrorKind::PermissionDenied => 1,
        ErrorKind::NoDevice => 19,
        _ => 5,
    };
    Error::new(kind, op, msg).with_errno(errno)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Ctx,
    Pd,
    Cq,
    Channel,
    Srq,
    Qp,
    Flow,
}

/// Ownership of one world object: removes it on drop.
#[derive(Debug)]
pub(crate) struct Res {
    pub(crate) world: Shared,
    pub(crate) id: u32,
    pub(crate) kind: Kind,
}

impl Drop for Res {
    fn drop(&mut self) {
        let mut w = lock(&self.world);
        match self.kind {
            Kind::Ctx => {
                w.ctxs.remove(&self.id);
            }
            Kind::Pd => {
                w.pds.remove(&self.id);
            }
            Kind::Cq => {
                w.cqs.remove(&self.id);
            }
            Kind::Channel => {
                w.channels.remove(&self.id);
            }
            Kind::Srq => {
                w.srqs.remove(&self.id);
            }
            Kind::Qp => w.destroy_qp(self.id),
            Kind::Flow => w.remove_flow(self.id),
        }
    }
}

/// The verbs provider of one simulated host: lists and opens that host's devices.
#[derive(Debug, Clone)]
pub struct SimVerbs {
    pub(crate) world: Shared,
    pub(crate) host: HostId,
}

pub(crate) fn device_info(w: &World, dev: usize) -> DeviceInfo {
    let d = &w.devices[dev];
    DeviceInfo {
        name: d.name.clone(),
        guid: d.guid,
        node_type: NodeType::Ca,
        transport_type: TransportType::Ib,
    }
}

impl Verbs for SimVerbs {
    type Context = SimContext;

    fn devices(&self) -> Result<Vec<DeviceInfo>> {
        let w = lock(&self.world);
        Ok((0..w.devices.len())
            .filter(|&i| w.devices[i].host == self.host)
            .map(|i| device_info(&w, i))
            .collect())
    }

    fn open(&self, name: &str) -> Result<SimContext> {
        let mut w = lock(&self.world);
        let Some(dev) = (0..w.devices.len())
            .find(|&i| w.devices[i].host == self.host && w.devices[i].name == name)
        else {
            return Err(err(
                ErrorKind::NoDevice,
                "ibv_open_device",
                format!("no device {name} on this host"),
            ));
        };
        let id = w.handle();
        w.ctxs.insert(
            id,
            Ctx {
                events: VecDeque::new(),
            },
        );
        drop(w);
        Ok(SimContext {
            res: Arc::new(Res {
                world: self.world.clone(),
                id,
                kind: Kind::Ctx,
            }),
            dev,
        })
    }
}
