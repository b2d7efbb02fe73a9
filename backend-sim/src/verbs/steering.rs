//! Managed flow steering (mlx5): rules with priorities, the all-default, mc-default and
//! sniffer rule types, and the switch memberships that multicast rules register.

use super::flow_match::Fields;
use super::world::{FlowRule, World};
use verbs_api::{FlowRuleType, QpState, WcFlags, WcOpcode};

impl World {
    /// Copies a frame a port sends to its sniffer QPs (mlx5 sniffer rules see both ways).
    pub(crate) fn sniff(&mut self, dev: usize, frame: &[u8]) {
        if self.devices[dev].flows.is_empty() {
            return;
        }
        let sniffers: Vec<u32> = self.devices[dev]
            .flows
            .iter()
            .filter_map(|id| self.flows.get(id))
            .filter(|r| r.attr.rule_type == FlowRuleType::Sniffer)
            .map(|r| r.qpn)
            .collect();
        for q in sniffers {
            self.raw_deliver(q, frame);
        }
    }

    /// Managed flow steering: sniffers get a copy; then the matching normal rules of the
    /// best (lowest) priority, each of their QPs once; failing that the multicast default
    /// (for group frames) and then the all-default rules.
    pub(crate) fn steer(&mut self, dev: usize, frame: &[u8]) {
        let d = &self.devices[dev];
        if d.flows.is_empty() {
            self.devices[dev].stats.rx_unclaimed += 1;
            return;
        }
        let multicast = frame[0] & 1 != 0;
        let fields = Fields::parse(frame);
        let mut targets = std::mem::take(&mut self.steer_scratch);
        targets.clear();
        let mut best: Option<u16> = None;
        let mut mc_default: Vec<u32> = Vec::new();
        let mut all_default: Vec<u32> = Vec::new();
        let mut sniffers: Vec<u32> = Vec::new();
        for id in &d.flows {
            let Some(r) = self.flows.get(id) else {
                continue;
            };
            match r.attr.rule_type {
                FlowRuleType::Sniffer => sniffers.push(r.qpn),
                FlowRuleType::McDefault => mc_default.push(r.qpn),
                FlowRuleType::AllDefault => all_default.push(r.qpn),
                FlowRuleType::Normal => {
                    if best.is_some_and(|b| r.attr.priority > b) {
                        continue;
                    }
                    if r.matcher.matches(&fields) {
                        best = Some(r.attr.priority);
                        if !targets.contains(&r.qpn) {
                            targets.push(r.qpn);
                        }
                    }
                }
            }
        }
        for q in sniffers {
            self.raw_deliver(q, frame);
        }
        if targets.is_empty() {
            targets.extend(if multicast && !mc_default.is_empty() {
                mc_default
            } else {
                all_default
            });
        }
        if targets.is_empty() {
            self.devices[dev].stats.rx_unclaimed += 1;
        }
        for &q in &targets {
            self.raw_deliver(q, frame);
        }
        self.steer_scratch = targets;
    }

    pub(crate) fn raw_deliver(&mut self, qpn: u32, frame: &[u8]) {
        let Some(qp) = self.qps.get(&qpn) else { return };
        if !matches!(
            qp.state,
            QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe
        ) {
            return;
        }
        let csum_ok = frame.len() >= 34 && frame[12] == 0x08 && frame[13] == 0x00;
        let flags = if csum_ok {
            WcFlags::IP_CSUM_OK
        } else {
            WcFlags::empty()
        };
        self.deliver(qpn, &[frame], WcOpcode::Recv, 0, None, flags, false);
    }

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
