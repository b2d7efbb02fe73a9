//! Reading a fabric capture's RoCE frames with tshark, and counting the data packets a
//! stack sent again (its retransmissions), for the wire steps.

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Stdio};

use super::common::Error;

/// One RoCE frame of a capture: source MAC, destination QP, PSN and opcode, as tshark
/// prints them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoceFrame {
    /// The Ethernet source.
    pub src: String,
    /// BTH destination QP (hex, as tshark prints it).
    pub dest_qp: String,
    /// BTH PSN.
    pub psn: String,
    /// BTH opcode (decimal).
    pub opcode: String,
}

/// The RoCE frames of `pcap`, in capture order.
///
/// # Errors
/// tshark cannot run or fails.
pub fn roce_frames(pcap: &Path) -> Result<Vec<RoceFrame>, Error> {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(pcap)
        .args(["-Y", "infiniband", "-T", "fields"])
        .args(["-e", "eth.src", "-e", "infiniband.bth.destqp"])
        .args(["-e", "infiniband.bth.psn", "-e", "infiniband.bth.opcode"])
        .stderr(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run tshark: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "tshark -r {} failed ({})",
            pcap.display(),
            out.status
        ));
    }
    Ok(parse_fields(&String::from_utf8_lossy(&out.stdout)))
}

fn parse_fields(text: &str) -> Vec<RoceFrame> {
    text.lines()
        .filter_map(|l| match l.split('\t').collect::<Vec<_>>()[..] {
            [src, qp, psn, op] => Some(RoceFrame {
                src: src.into(),
                dest_qp: qp.into(),
                psn: psn.into(),
                opcode: op.into(),
            }),
            _ => None,
        })
        .collect()
}

/// The BTH opcode of an RC ACKNOWLEDGE (IBA table 38), which carries no data.
const RC_ACK: &str = "17";

/// Data packets (acknowledges aside) sent again by `mac`: those with the same destination
/// QP, PSN and opcode as an earlier frame from it.
pub fn resent(frames: &[RoceFrame], mac: &str) -> usize {
    let mut seen: HashMap<(&str, &str, &str), usize> = HashMap::new();
    for f in frames {
        if f.src == mac && f.opcode != RC_ACK {
            *seen.entry((&f.dest_qp, &f.psn, &f.opcode)).or_default() += 1;
        }
    }
    seen.values().map(|n| n - 1).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resent_counts_repeated_data_packets_of_one_sender() {
        let frames = parse_fields(
            "a\t0x11\t1\t4\na\t0x11\t1\t4\na\t0x11\t1\t17\na\t0x11\t1\t17\nb\t0x11\t1\t4\na\t0x11\t2\t4\nshort\tline\n",
        );
        assert_eq!(frames.len(), 6);
        assert_eq!(resent(&frames, "a"), 1);
        assert_eq!(resent(&frames, "b"), 0);
    }
}
