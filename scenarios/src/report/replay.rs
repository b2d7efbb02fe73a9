//! `scenario replay FILE.pcap`: a recorded observation through the simulated verbs
//! receiver. The capture's UDP datagrams to one destination are re-sent, at their
//! recorded spacing, from a simulated "recorder" host to a multicast group that one raw
//! receiver (mlx5 personality, the runner's receiver configuration) subscribes to; the
//! fabric's faults (loss, reordering, duplication) apply on the way.

use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::Path;

use backend_sim::frame::eth::Mac;
use backend_sim::frame::UdpFrameSpec;
use backend_sim::pcap::{PcapFile, PcapRecord};
use spead::pcap::{Filter, PcapSource};

use super::simrun::{self, Options, ReplaySource, Run};
use super::table;
use crate::model::{Faults, Group, Host, Nic, Receiver, Scenario, Sender, Transport};
use crate::runner::drive::RunError;

/// Replay settings (the command line's).
#[derive(Debug, Clone, Default)]
pub struct ReplayArgs {
    /// Seed of the fabric's random faults.
    pub seed: u64,
    /// Loss probability per frame.
    pub loss: f64,
    /// Reordering window, in frames.
    pub reorder: u32,
    /// Duplication probability per frame.
    pub dup: f64,
    /// The destination to keep; default: the first datagram's.
    pub group: Option<SocketAddrV4>,
}

/// What a replay did.
#[derive(Debug)]
pub struct Replayed {
    /// The scenario it built (hosts, group, receiver, faults).
    pub scenario: Scenario,
    /// The run.
    pub run: Run,
    /// The destination taken from the capture.
    pub source: SocketAddrV4,
    /// The group the datagrams were sent to in the simulation.
    pub group: SocketAddrV4,
    /// Datagrams kept / in the file.
    pub kept: usize,
    /// UDP datagrams in the file.
    pub datagrams: usize,
    /// The report (deterministic).
    pub text: String,
}

fn bad(e: impl std::fmt::Display) -> RunError {
    RunError::File(e.to_string())
}

/// Replays `path`.
///
/// # Errors
/// An unreadable capture, one without matching UDP datagrams, or a run error.
pub fn replay(path: &Path, args: &ReplayArgs) -> Result<Replayed, RunError> {
    let mut src =
        PcapSource::open(path, Filter::ANY).map_err(|e| bad(format!("{}: {e}", path.display())))?;
    let mut datagrams = Vec::new();
    while let Some(d) = src
        .next_datagram()
        .map_err(|e| bad(format!("{}: {e}", path.display())))?
    {
        datagrams.push((d.ts_ns, d.src, d.dst, d.payload.to_vec()));
    }
    let total = datagrams.len();
    let source = match args.group {
        Some(g) => g,
        None => datagrams
            .first()
            .map(|d| d.2)
            .ok_or_else(|| bad(format!("{}: no UDP datagrams", path.display())))?,
    };
    datagrams.retain(|d| d.2 == source);
    if datagrams.is_empty() {
        return Err(bad(format!(
            "{}: no UDP datagrams to {source}",
            path.display()
        )));
    }
    let group = if source.ip().is_multicast() {
        source
    } else {
        SocketAddrV4::new(Ipv4Addr::new(239, 10, 0, 1), source.port())
    };
    let max_payload = datagrams.iter().map(|d| d.3.len()).max().unwrap_or(0);
    let hosts = vec![
        Host {
            name: "recorder".into(),
            ip: Ipv4Addr::new(10, 0, 0, 1),
            nic: Nic::Mlx5,
        },
        Host {
            name: "rx".into(),
            ip: Ipv4Addr::new(10, 0, 0, 2),
            nic: Nic::Mlx5,
        },
    ];
    let scenario = Scenario {
        name: format!(
            "replay of {}",
            path.file_name().map_or_else(
                || path.display().to_string(),
                |n| n.to_string_lossy().into_owned()
            )
        ),
        seed: args.seed,
        hosts,
        groups: vec![Group {
            addr: *group.ip(),
            port: group.port(),
        }],
        // A sender of no heaps: it sizes the receiver's buffers for the capture's
        // largest datagram, exactly as a sender of that packet size would.
        senders: vec![Sender {
            host: "recorder".into(),
            group: 0,
            heaps: 0,
            heap_size: 1,
            items: 1,
            packet_size: ((max_payload + 7) & !7).clamp(64, 9000),
            rate: 0.0,
            substreams: 1,
        }],
        receivers: vec![Receiver {
            host: "rx".into(),
            transport: Transport::Raw,
            groups: vec![0],
            max_heaps: 4,
            substreams: 1,
            buffer_slots: 4096,
            consumer_delay_ns: 0,
        }],
        faults: Faults {
            loss: args.loss,
            dup: args.dup,
            reorder_window: args.reorder,
            ..Faults::default()
        },
    };
    scenario.validate()?;
    let src_mac = Mac([0x02, 0x00, 10, 0, 0, 1]);
    let records: Vec<PcapRecord> = datagrams
        .iter()
        .map(|(ts, from, _, payload)| {
            let data = UdpFrameSpec::new(
                src_mac,
                Mac::for_ipv4_multicast(*group.ip()),
                (Ipv4Addr::new(10, 0, 0, 1), from.port()),
                (*group.ip(), group.port()),
            )
            .build(payload);
            PcapRecord {
                ts_ns: *ts,
                orig_len: data.len() as u32,
                data,
            }
        })
        .collect();
    let pcap = PcapFile {
        link_type: 1,
        snaplen: 65535,
        records,
    };
    let kept = pcap.records.len();
    let run = simrun::run(
        &scenario,
        &Options {
            capture: None,
            replay: Some((ReplaySource::Records(pcap), 0)),
            progress: false,
        },
    )?;
    let mut text = String::new();
    let _ = writeln!(
        text,
        "{}: {kept} of {total} UDP datagrams (to {source}) replayed to {group} from host recorder; seed {}, loss {}, reorder window {}, dup {}",
        path.display(),
        args.seed,
        args.loss,
        args.reorder,
        args.dup
    );
    if source != group {
        let _ = writeln!(
            text,
            "(unicast destination {source} re-addressed to multicast group {group})"
        );
    }
    let _ = writeln!(
        text,
        "simulated time {:.3} ms; trace hash {:016x}\n",
        run.sim.now() as f64 / 1e6,
        run.outcome.trace_hash.unwrap_or(0)
    );
    text.push_str(&table::render(&table::rows(&scenario, &run, false)));
    let _ = writeln!(
        text,
        "{}",
        table::fabric_line(&run.sim.with_fabric(|f| f.stats()))
    );
    let rep = &run.outcome.receivers[0];
    let _ = writeln!(text, "heaps (counter: bytes received / heap length):");
    for h in &rep.heaps {
        let _ = writeln!(
            text,
            "  {:>8}: {} / {} {}",
            h.cnt,
            h.received,
            h.heap_len,
            if h.complete { "complete" } else { "INCOMPLETE" }
        );
    }
    if !rep.dropped.is_empty() {
        let _ = writeln!(text, "receiver drops by cause: {:?}", rep.dropped);
    }
    Ok(Replayed {
        scenario,
        run,
        source,
        group,
        kept,
        datagrams: total,
        text,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/data")
            .join(name)
    }

    fn heaps(r: &Replayed) -> Vec<(u64, bool, u64)> {
        r.run.outcome.receivers[0]
            .heaps
            .iter()
            .map(|h| (h.cnt, h.complete, h.received))
            .collect()
    }

    /// The spead2 recordings (README in tests/data): heaps 1-5 on port 7148, the first
    /// with descriptors; heaps 1001-1003 on 7149 (SPEAD-64-40). Every container and link
    /// type gives the same heaps through the simulated verbs receiver.
    #[test]
    fn spead2_recordings_replay_through_the_verbs_receiver() {
        let want: Vec<(u64, bool, u64)> = vec![
            (1, true, 11138),
            (2, true, 10368),
            (3, true, 10368),
            (4, true, 10368),
            (5, true, 10368),
        ];
        for name in [
            "spead2_lo_eth.pcap",
            "spead2_any_sll.pcap",
            "spead2_any_sll2.pcap",
            "spead2_lo.pcapng",
        ] {
            let r = replay(&fixture(name), &ReplayArgs::default()).unwrap();
            assert_eq!(r.datagrams, 45, "{name}");
            assert_eq!(r.kept, 41, "{name}");
            assert_eq!(r.source, SocketAddrV4::new(Ipv4Addr::LOCALHOST, 7148));
            assert_eq!(heaps(&r), want, "{name}");
            assert!(r.text.contains("re-addressed"), "{name}");
        }
        let side = replay(
            &fixture("spead2_lo_eth.pcap"),
            &ReplayArgs {
                group: Some(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 7149)),
                ..ReplayArgs::default()
            },
        )
        .unwrap();
        assert_eq!(
            heaps(&side),
            vec![(1001, true, 582), (1002, true, 300), (1003, true, 300)]
        );
    }

    #[test]
    fn faults_on_a_replay_are_seeded_and_never_make_wrong_heaps_complete() {
        let args = ReplayArgs {
            seed: 3,
            loss: 0.05,
            reorder: 4,
            dup: 0.05,
            group: None,
        };
        let a = replay(&fixture("spead2_lo_eth.pcap"), &args).unwrap();
        let b = replay(&fixture("spead2_lo_eth.pcap"), &args).unwrap();
        assert_eq!(a.text, b.text);
        assert_eq!(a.run.outcome, b.run.outcome);
        let f = a.run.sim.with_fabric(|f| f.stats());
        assert!(f.dropped_loss > 0);
        for h in &a.run.outcome.receivers[0].heaps {
            if h.complete {
                assert_eq!(h.received, if h.cnt == 1 { 11138 } else { 10368 });
            }
        }
        assert!(replay(&fixture("README.md"), &args).is_err());
    }
}
