//! Multicast attachments and flow rules, with the switch memberships they hold.

use super::FlowRule;
use super::World;
use std::net::Ipv4Addr;

impl World {
    /// Attaches a UD QP to a multicast group (one switch membership per QP).
    pub(crate) fn attach(&mut self, qpn: u32, group: Ipv4Addr) {
        let Some(qp) = self.qps.get_mut(&qpn) else {
            return;
        };
        if qp.groups.contains(&group) {
            return;
        }
        qp.groups.push(group);
        let d = &mut self.devices[qp.dev];
        let v = d.mcast.entry(group).or_default();
        if let Err(i) = v.binary_search(&qpn) {
            v.insert(i, qpn);
        }
        let _ = self.fabric.join_group(d.port, group);
    }

    /// Detaches a QP from a group; false if it was not attached.
    pub(crate) fn detach(&mut self, qpn: u32, group: Ipv4Addr) -> bool {
        let Some(qp) = self.qps.get_mut(&qpn) else {
            return false;
        };
        let Some(i) = qp.groups.iter().position(|g| *g == group) else {
            return false;
        };
        qp.groups.remove(i);
        let d = &mut self.devices[qp.dev];
        if let Some(v) = d.mcast.get_mut(&group) {
            v.retain(|&q| q != qpn);
            if v.is_empty() {
                d.mcast.remove(&group);
            }
        }
        let _ = self.fabric.leave_group(d.port, group);
        true
    }

    /// Installs a flow rule on its device (in priority order) and joins the switch groups
    /// it asks for.
    pub(crate) fn add_flow(&mut self, id: u32, rule: FlowRule) {
        let dev = rule.dev;
        let port = self.devices[dev].port;
        for g in &rule.groups {
            let _ = self.fabric.join_group(port, *g);
        }
        for m in &rule.mac_groups {
            let _ = self.fabric.join_mac_group(port, *m);
        }
        let prio = rule.attr.priority;
        self.flows.insert(id, rule);
        let flows = &self.flows;
        let list = &mut self.devices[dev].flows;
        let pos = list.partition_point(|f| flows.get(f).map_or(0, |r| r.attr.priority) <= prio);
        list.insert(pos, id);
    }

    /// Removes a flow rule and the switch memberships it held.
    pub(crate) fn remove_flow(&mut self, id: u32) {
        let Some(rule) = self.flows.remove(&id) else {
            return;
        };
        let port = self.devices[rule.dev].port;
        for g in &rule.groups {
            let _ = self.fabric.leave_group(port, *g);
        }
        for m in &rule.mac_groups {
            let _ = self.fabric.leave_mac_group(port, *m);
        }
        self.devices[rule.dev].flows.retain(|&f| f != id);
    }
}
