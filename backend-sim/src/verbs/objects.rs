//! The handles behind every verbs object: each holds the shared world and an id, and
//! removes its object from the world on drop.

use crate::verbs::world::World;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use verbs_api::{Error, ErrorKind};

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
    Wq,
    IndTable,
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
            Kind::Wq => {
                w.wqs.remove(&self.id);
            }
            Kind::IndTable => {
                w.ind_tables.remove(&self.id);
            }
        }
    }
}
