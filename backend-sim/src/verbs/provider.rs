//! [`SimVerbs`]: the verbs provider of one simulated host, which lists and opens its
//! devices.

use crate::ids::HostId;
use crate::verbs::context::SimContext;
use crate::verbs::objects::{err, lock, Kind, Res, Shared};
use crate::verbs::world::Ctx;
use std::collections::VecDeque;
use std::sync::Arc;
use verbs_api::{DeviceInfo, ErrorKind, Result, Verbs};

/// The verbs provider of one simulated host: lists and opens that host's devices.
#[derive(Debug, Clone)]
pub struct SimVerbs {
    pub(crate) world: Shared,
    pub(crate) host: HostId,
}

impl Verbs for SimVerbs {
    type Context = SimContext;

    fn devices(&self) -> Result<Vec<DeviceInfo>> {
        let w = lock(&self.world);
        Ok((0..w.devices.len())
            .filter(|&i| w.devices[i].host == self.host)
            .map(|i| w.devices[i].info())
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
