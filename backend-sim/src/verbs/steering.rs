//! Managed flow steering (mlx5), sans-IO: given a port's rules (sorted by priority) and a
//! frame, which QPs get a copy. Sniffers see everything; then the matching normal rules of
//! the best (lowest) priority, each of their QPs once; failing that the multicast default
//! (for group frames) and then the all-default rules.

use super::records::FlowRule;
use rustc_hash::FxHashMap;
use verbs_api::{FlowFields, FlowRuleType};

/// The sniffer QPs among `list` (a port's rule ids) in rule order, into `out`.
pub(crate) fn sniffers(rules: &FxHashMap<u32, FlowRule>, list: &[u32], out: &mut Vec<u32>) {
    out.clear();
    out.extend(
        list.iter()
            .filter_map(|id| rules.get(id))
            .filter(|r| r.attr.rule_type == FlowRuleType::Sniffer)
            .map(|r| r.qpn),
    );
}

/// Steers a received `frame` through the rules `list` (a port's rule ids, sorted by
/// priority): the sniffer QPs into `sniffers`, the receiving QPs into `targets` (both
/// cleared first; `targets` empty when no rule wants the frame).
pub(crate) fn steer(
    rules: &FxHashMap<u32, FlowRule>,
    list: &[u32],
    frame: &[u8],
    sniffers: &mut Vec<u32>,
    targets: &mut Vec<u32>,
) {
    sniffers.clear();
    targets.clear();
    let multicast = frame[0] & 1 != 0;
    let fields = FlowFields::parse(frame);
    let mut best: Option<u16> = None;
    let mut mc_default: Vec<u32> = Vec::new();
    let mut all_default: Vec<u32> = Vec::new();
    for id in list {
        let Some(r) = rules.get(id) else {
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
    if targets.is_empty() {
        targets.extend(if multicast && !mc_default.is_empty() {
            mc_default
        } else {
            all_default
        });
    }
}
