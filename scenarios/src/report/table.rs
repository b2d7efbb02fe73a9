//! The per-receiver summary table. Every number comes from the simulated run (heaps the
//! receiver's stream delivered, the fabric's port counters, the NIC's drop counters and
//! the receiver transport's own), so the same scenario and seed print the same table.

use std::fmt::Write as _;

use backend_sim::FabricStats;

use super::simrun::Run;
use crate::model::{Scenario, Transport};

/// One receiver's line.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Receiver index.
    pub receiver: usize,
    /// Its host.
    pub host: String,
    /// Its transport.
    pub transport: Transport,
    /// Heaps sent to the groups it subscribes to (unknown for a recorded pcap).
    pub heaps_sent: Option<u64>,
    /// Heaps (distinct counters) delivered complete.
    pub complete: u64,
    /// Heaps (distinct counters) delivered incomplete and never complete.
    pub incomplete: u64,
    /// Deliveries beyond one per heap counter (a duplicate or late packet of a heap
    /// already delivered starts it again; spead2 does the same).
    pub extra: u64,
    /// Frames its host's port should have got from the senders (unknown for a pcap).
    pub frames_sent: Option<u64>,
    /// Frames the fabric delivered to its host's port.
    pub port_rx: u64,
    /// Frames its NIC dropped (no receive posted, unclaimed, malformed, Q_Key...).
    pub nic_dropped: u64,
    /// Frames the receiver transport got.
    pub rx_frames: u64,
    /// Frames the receiver dropped (bad checksum, not SPEAD...).
    pub rx_dropped: u64,
    /// Payload bytes of complete heaps.
    pub bytes_complete: u64,
    /// Simulated time of its last heap, ns.
    pub last_ns: u64,
}

impl Row {
    /// Heaps sent to it and never delivered (evicted without delivery, or every packet
    /// lost).
    pub fn missing(&self) -> Option<u64> {
        self.heaps_sent
            .map(|n| n.saturating_sub(self.complete + self.incomplete))
    }

    /// Frames sent to its host that its port never got (fabric loss, partitions,
    /// overruns, corruption caught at the port); negative with duplication.
    pub fn fabric_lost(&self) -> Option<i64> {
        self.frames_sent.map(|n| n as i64 - self.port_rx as i64)
    }

    /// Goodput in simulated time: complete heaps' payload over the time of the last heap,
    /// Gb/s.
    pub fn gbps(&self) -> f64 {
        if self.last_ns == 0 {
            0.0
        } else {
            self.bytes_complete as f64 * 8.0 / self.last_ns as f64
        }
    }
}

/// The rows of a run. With `known_sent`, `heaps_sent` and `frames_sent` come from the
/// outcome's sent heaps (exact drop/duplicate lists applied at the senders are not
/// subtracted or added).
pub fn rows(s: &Scenario, run: &Run, known_sent: bool) -> Vec<Row> {
    let o = &run.outcome;
    o.receivers
        .iter()
        .enumerate()
        .map(|(r, rep)| {
            let spec = &s.receivers[r];
            let h = s.host_index(&spec.host).unwrap_or(0);
            let senders = s.senders_of(r);
            let heaps_sent = known_sent.then(|| {
                o.sent
                    .iter()
                    .filter(|x| senders.contains(&x.sender))
                    .count() as u64
            });
            // Frames for the host: every group any receiver on the host subscribes to.
            let host_groups: Vec<usize> = s
                .receivers
                .iter()
                .filter(|x| x.host == spec.host)
                .flat_map(|x| x.groups.iter().copied())
                .collect();
            // A sender whose group has raw and UD receivers sends every packet both ways.
            let ways = |sender: usize| -> u64 {
                let g = s.senders[sender].group;
                let has = |t: Transport| {
                    s.receivers
                        .iter()
                        .any(|x| x.transport == t && x.groups.contains(&g))
                };
                u64::from(has(Transport::Raw)) + u64::from(has(Transport::Ud))
            };
            let frames_sent = known_sent.then(|| {
                o.sent
                    .iter()
                    .filter(|x| host_groups.contains(&s.senders[x.sender].group))
                    .map(|x| u64::from(x.packets) * ways(x.sender))
                    .sum()
            });
            let port_rx = run
                .sim
                .with_fabric(|f| f.port_stats(run.ports[h]).map(|p| p.rx_frames))
                .unwrap_or(0);
            let nic = run.sim.nic_stats(run.hosts[h]);
            let complete: Vec<_> = rep.heaps.iter().filter(|x| x.complete).collect();
            let complete_cnts: std::collections::BTreeSet<u64> =
                complete.iter().map(|x| x.cnt).collect();
            let all_cnts: std::collections::BTreeSet<u64> =
                rep.heaps.iter().map(|x| x.cnt).collect();
            Row {
                receiver: r,
                host: spec.host.clone(),
                transport: spec.transport,
                heaps_sent,
                complete: complete_cnts.len() as u64,
                incomplete: (all_cnts.len() - complete_cnts.len()) as u64,
                extra: (rep.heaps.len() - all_cnts.len()) as u64,
                frames_sent,
                port_rx,
                nic_dropped: nic.rx_no_wqe
                    + nic.rx_qkey_violation
                    + nic.rx_unclaimed
                    + nic.rx_too_long
                    + nic.rx_malformed
                    + nic.rx_out_of_sequence,
                rx_frames: rep.packets_received,
                rx_dropped: rep.dropped.values().sum(),
                bytes_complete: complete.iter().map(|x| x.received).sum(),
                last_ns: rep.heaps.iter().map(|x| x.at_ns).max().unwrap_or(0),
            }
        })
        .collect()
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_string(), |v| v.to_string())
}

/// The table as text.
pub fn render(rows: &[Row]) -> String {
    let header = [
        "rx",
        "host",
        "transport",
        "heaps sent",
        "complete",
        "incomplete",
        "missing",
        "extra",
        "frames sent",
        "port rx",
        "fabric lost",
        "nic drop",
        "rx frames",
        "rx drop",
        "Gb/s (sim)",
    ];
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.receiver.to_string(),
                r.host.clone(),
                format!("{:?}", r.transport).to_lowercase(),
                opt(r.heaps_sent),
                r.complete.to_string(),
                r.incomplete.to_string(),
                opt(r.missing()),
                r.extra.to_string(),
                opt(r.frames_sent),
                r.port_rx.to_string(),
                opt(r.fabric_lost()),
                r.nic_dropped.to_string(),
                r.rx_frames.to_string(),
                r.rx_dropped.to_string(),
                format!("{:.3}", r.gbps()),
            ]
        })
        .collect();
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            cells
                .iter()
                .map(|c| c[i].len())
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    let line = |out: &mut String, row: &[String]| {
        let parts: Vec<String> = row
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (c, w))| {
                if i == 1 || i == 2 {
                    format!("{c:<w$}")
                } else {
                    format!("{c:>w$}")
                }
            })
            .collect();
        let _ = writeln!(out, "{}", parts.join("  ").trim_end());
    };
    line(&mut out, &header.map(str::to_string));
    line(
        &mut out,
        &widths.iter().map(|&w| "-".repeat(w)).collect::<Vec<_>>(),
    );
    for c in &cells {
        line(&mut out, c);
    }
    out
}

/// The fabric's counters on one line.
pub fn fabric_line(f: &FabricStats) -> String {
    format!(
        "fabric: {} frames transmitted, {} delivered to ports, {} duplicated, \
         corrupted {} on the wire / {} in the switch / {} by the sender; \
         lost: {} random loss, {} in bursts, {} drop list, {} partition, {} overrun, {} no route; \
         checksum drops: {} FCS, {} IPv4 header, {} UDP checksum, {} ICRC",
        f.transmitted,
        f.delivered,
        f.duplicated,
        f.corrupted_wire,
        f.corrupted_switch,
        f.corrupted_payload,
        f.dropped_loss,
        f.dropped_burst,
        f.dropped_list,
        f.dropped_partition,
        f.dropped_overrun,
        f.dropped_no_route,
        f.dropped_fcs,
        f.dropped_ip_header,
        f.dropped_udp_checksum,
        f.dropped_icrc,
    )
}
