//! The checks of a run's capture: tshark decodes every frame (none malformed); netwire
//! verifies the ICRC of each RoCE frame. (Listing the RoCE frames and counting the data
//! packets sent again is `crate::cmd::roce_capture`'s, shared with the split step.)

use std::collections::BTreeMap;
use std::io::BufReader;
use std::path::Path;
use std::process::{Command, Stdio};

use netwire::frame::FrameView;
use netwire::pcap::PcapReader;
use netwire::roce::{icrc_ok, parse_roce};

use crate::cmd::common::Error;

/// No malformed frame in `pcap`, by tshark.
pub fn no_malformed(pcap: &Path) -> Result<(), Error> {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(pcap)
        // Not RPC-over-RDMA's guess at what an RC SEND carries: it takes perftest's 4-byte
        // SENDs of `-R` (rdma_cm) for RPC messages and calls them malformed; the frames
        // themselves decode. Nor the InfiniBand dissector's guess that a payload holds an
        // encapsulated packet (`identify_payload`): it read the 2-byte READ responses of
        // `ib_read_lat` (payload 00 65, then the pad) as a header of Ethertype 0x0065 and
        // called them malformed, though they decode as RC RDMA Read Response Only.
        .args([
            "--disable-heuristic",
            "rpcrdma_infiniband",
            "-o",
            "infiniband.identify_payload:FALSE",
            "-Y",
            "_ws.malformed",
        ])
        .stderr(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run tshark: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || !text.trim().is_empty() {
        return Err(format!(
            "tshark finds malformed frames in {} ({}):\n{text}",
            pcap.display(),
            out.status
        ));
    }
    Ok(())
}

/// What one source MAC sent of a capture's RoCE frames, each read by netwire.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sent {
    /// RoCE v2 frames over IPv4.
    pub v4: usize,
    /// RoCE v2 frames over IPv6.
    pub v6: usize,
    /// Of those over IPv6: UD SEND_ONLY datagrams to a QP other than QP1 (a UD QP's own).
    pub v6_ud: usize,
    /// Of those over IPv6: datagrams to QP1 (the connection manager's MADs).
    pub v6_mads: usize,
    /// Frames with a bad ICRC (computed as rxe's `rxe_icrc.c` does).
    pub bad: usize,
}

/// The RoCE frames of a capture by source MAC.
pub type IcrcCounts = BTreeMap<String, Sent>;

/// The UD SEND_ONLY opcode (IBA table 38).
const UD_SEND_ONLY: u8 = 0x64;

/// Reads `pcap` with netwire and checks the ICRC of every RoCE frame.
///
/// # Errors
/// The capture cannot be read, or a frame cannot be parsed.
pub fn icrc_counts(pcap: &Path) -> Result<IcrcCounts, Error> {
    let f = std::fs::File::open(pcap).map_err(|e| format!("{}: {e}", pcap.display()))?;
    let mut r =
        PcapReader::new(BufReader::new(f)).map_err(|e| format!("{}: {e}", pcap.display()))?;
    let mut counts = IcrcCounts::new();
    let mut n = 0usize;
    while let Some(rec) = r
        .next_record()
        .map_err(|e| format!("{}: {e}", pcap.display()))?
    {
        n += 1;
        if rec.data.len() < rec.orig_len as usize {
            return Err(format!("{}: frame {n} was cut short", pcap.display()));
        }
        let Ok(view) = FrameView::parse(rec.data) else {
            continue; // not IP (ARP ...) or not a frame netwire reads; tshark judged it
        };
        let (Some(range), true) = (view.ip_range(), view.is_roce()) else {
            continue;
        };
        let c = counts.entry(view.eth.src.to_string()).or_default();
        if view.ipv6.is_some() {
            c.v6 += 1;
            let bth = view
                .udp_payload()
                .and_then(|p| parse_roce(&rec.data[p]).ok())
                .map(|p| p.headers.bth);
            match bth {
                Some(b) if b.dest_qp == 1 => c.v6_mads += 1,
                Some(b) if b.opcode == UD_SEND_ONLY => c.v6_ud += 1,
                _ => {}
            }
        } else {
            c.v4 += 1;
        }
        if !icrc_ok(&rec.data[range]) {
            c.bad += 1;
        }
    }
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// rxe's own frames (captured in the Soft-RoCE VM: netwire's test data) verify, and a
    /// frame with one payload bit flipped is counted bad.
    #[test]
    fn icrc_counts_reads_rxes_captures_and_finds_a_flipped_bit() {
        let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../netwire/tests/data");
        let counts = icrc_counts(&data.join("rxe_rocev2_ipv6.pcap")).expect("read");
        // Each of the two ends: 3 RC SENDs, 3 acknowledges and 3 UD datagrams to QP 0x12
        // (netwire/tests/data/README.md), all over IPv6.
        assert_eq!(counts.len(), 2);
        let each = Sent {
            v4: 0,
            v6: 9,
            v6_ud: 3,
            v6_mads: 0,
            bad: 0,
        };
        assert!(counts.values().all(|c| *c == each), "{counts:?}");

        // The same capture with the last byte before each RoCE frame's ICRC flipped.
        let f = std::fs::File::open(data.join("rxe_rocev2_ipv6.pcap")).expect("open");
        let mut r = PcapReader::new(BufReader::new(f)).expect("pcap");
        let out = std::env::temp_dir().join(format!("interop-icrc-{}.pcap", std::process::id()));
        {
            let mut w =
                netwire::pcap::PcapWriter::new(std::fs::File::create(&out).expect("create"))
                    .expect("writer");
            while let Some(rec) = r.next_record().expect("record") {
                let mut d = rec.data.to_vec();
                if FrameView::parse(&d).is_ok_and(|v| v.is_roce()) {
                    let at = d.len() - 5;
                    d[at] ^= 1;
                }
                w.write(rec.ts_ns, &d).expect("write");
            }
        }
        let bad = icrc_counts(&out).expect("read");
        let _ = std::fs::remove_file(&out);
        assert_eq!(
            bad.values().map(|c| c.bad).sum::<usize>(),
            bad.values().map(|c| c.v4 + c.v6).sum::<usize>()
        );
    }
}
