//! `spead-recv pcap:...` as a tool: the captures in `tests/data` (real spead2 traffic)
//! print the heaps spead2's own pcap reader assembles, and a capture cut short gives
//! the heaps before the cut, a clear error and exit status 1.

use workspace_tests::data;
use workspace_tests::spead2::{run_tool, summarize_tool_output};

const RECV: &str = env!("CARGO_BIN_EXE_spead-recv");

const ETH: &str = "spead2_lo_eth.pcap";
const SLL: &str = "spead2_any_sll.pcap";
const PCAPNG: &str = "spead2_lo.pcapng";

#[test]
fn the_spead_recv_tool_prints_spead2_heaps() {
    for (file, filter, bpf) in [
        (ETH, "", ""),
        (SLL, "?*:7148", "udp dst port 7148"),
        (PCAPNG, "?127.0.0.1:7149", "udp dst port 7149"),
    ] {
        let path = data(file);
        let out = std::process::Command::new(RECV)
            .arg(format!("pcap:{}{filter}", path.display()))
            .arg("--json")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let (heaps, stats) = summarize_tool_output(&String::from_utf8(out.stdout).unwrap());
        let (theirs, their_stats) = summarize_tool_output(&run_tool(
            &["recv-pcap", path.to_str().unwrap(), bpf, "4"],
            b"",
        ));
        let their_stats = their_stats.expect("spead2 counters");
        assert_eq!(heaps, theirs, "{file}{filter}");
        let stats = stats.unwrap();
        for name in ["heaps", "packets", "single_packet_heaps"] {
            assert_eq!(stats[name], their_stats[name], "{file}{filter}: {name}");
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("0 dropped"), "{stderr}");
    }
    // A cut capture: heaps before the cut, then a clear error and exit status 1.
    let bytes = std::fs::read(data(ETH)).unwrap();
    let cut = workspace_tests::spead2::temp_path("tool-cut.pcap");
    std::fs::write(&cut, &bytes[..30_000]).unwrap();
    let out = std::process::Command::new(RECV)
        .arg(format!("pcap:{}", cut.display()))
        .arg("--json")
        .output()
        .unwrap();
    std::fs::remove_file(&cut).unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("file truncated at byte 28934"), "{stderr}");
    let (heaps, _) = summarize_tool_output(&String::from_utf8(out.stdout).unwrap());
    assert_eq!(
        heaps.iter().map(|h| h.0).collect::<Vec<_>>(),
        [1, 1001, 2, 1002]
    );
}
