//! spead2 and we exchange heaps over UDP on 127.0.0.1 (loopback only).
//!
//! Not flaky by construction: large socket buffers, a modest rate (20 MB/s), and the
//! receiver is bound before the sender starts. The deadline below is a hang guard, not
//! a timing assertion.

use std::time::{Duration, Instant};

use spead::json::heap_json;
use spead::recv::{Stream, StreamConfig};
use spead::send::{GroupMode, HeapReference, RateLimiter};
use spead::transport::{Sender, UdpReceiver, UdpRecvConfig, UdpSendConfig, UdpSender};
use workspace_tests::spead2::{
    expect_tool_success, our_summary, send_each, spawn_sending_tool, stream_specs, summarize,
    HeapSpec, ReceivingTool,
};

const RATE: f64 = 20e6;
const HANG_GUARD: Duration = Duration::from_secs(120);

/// A UDP sender to the tool on 127.0.0.1 at `port`, over `substreams` substreams (all to
/// that port), at [`RATE`], of packets up to `packet` bytes.
fn sender_to(port: u16, substreams: usize, packet: usize) -> Sender<UdpSender> {
    let dest = format!("127.0.0.1:{port}").parse().unwrap();
    let mut cfg = UdpSendConfig::new(vec![dest; substreams]);
    cfg.buffer_size = 1 << 20;
    let limiter = RateLimiter::new(RATE, 65536, 1.05);
    Sender::new(
        UdpSender::new(&cfg).unwrap(),
        packet,
        limiter,
        GroupMode::RoundRobin,
    )
}

#[test]
fn spead2_sends_to_us() {
    for (seed, packet) in [(11u64, 1472usize), (12, 8972)] {
        let specs = stream_specs(seed, 40, packet);
        let mut cfg = UdpRecvConfig::new("127.0.0.1:0".parse().unwrap());
        cfg.buffer_size = 32 << 20;
        let mut rx = UdpReceiver::bind(&cfg).unwrap();
        let port = rx.local_addr().unwrap().port();
        let child = spawn_sending_tool(&["send-udp", &port.to_string(), &RATE.to_string()], &specs);
        let mut stream = Stream::new(StreamConfig::default());
        let start = Instant::now();
        while !stream.is_stopped() {
            assert!(start.elapsed() < HANG_GUARD, "no stop heap from spead2");
            rx.pump(&mut stream).unwrap();
        }
        expect_tool_success(child);
        let mut heaps = Vec::new();
        while let Some(h) = stream.pop_heap() {
            assert!(h.complete);
            heaps.push(heap_json(&h));
        }
        assert_eq!(summarize(&heaps), our_summary(&specs));
        let st = stream.stats();
        assert_eq!(st.packets_malformed + st.incomplete_heaps_evicted, 0);
        assert!(st.batches > 0 && st.max_batch >= 1);
    }
}

#[test]
fn we_send_to_spead2() {
    for (seed, packet) in [(21u64, 1472usize), (22, 8972)] {
        let specs = stream_specs(seed, 40, packet);
        let tool = ReceivingTool::spawn(&["recv-udp", "4"]);
        let mut sender = sender_to(tool.port, 1, packet);
        send_each(&mut sender, &specs);
        let (theirs, stats) = tool.finish();
        assert_eq!(theirs, our_summary(&specs));
        let stats = stats.unwrap();
        assert_eq!(stats["incomplete_heaps_evicted"], 0);
        assert_eq!(stats["heaps"].as_u64().unwrap(), specs.len() as u64 - 1);
    }
}

#[test]
fn interleaved_heaps_and_substreams_reach_spead2() {
    // Four heaps interleaved round robin: spead2 needs max_heaps >= 4 to keep them all.
    let specs = stream_specs(31, 16, 1472);
    let tool = ReceivingTool::spawn(&["recv-udp", "8"]);
    // Two substreams that happen to share a destination address.
    let mut sender = sender_to(tool.port, 2, 1472);
    let heaps: Vec<_> = specs.iter().map(HeapSpec::to_heap).collect();
    let (body, stop) = specs.split_at(specs.len() - 1);
    for chunk in body.iter().zip(&heaps).collect::<Vec<_>>().chunks(4) {
        let refs: Vec<HeapReference<'_>> = chunk
            .iter()
            .map(|(s, h)| HeapReference {
                heap: h,
                cnt: s.cnt,
                substream: (s.cnt % 2) as usize,
            })
            .collect();
        sender.send_heaps(&refs).unwrap();
    }
    let stop_heap = stop[0].to_heap();
    sender
        .send_heaps(&[HeapReference {
            heap: &stop_heap,
            cnt: stop[0].cnt,
            substream: 0,
        }])
        .unwrap();
    let (mut theirs, _) = tool.finish();
    theirs.sort_by_key(|h| h.0);
    assert_eq!(theirs, our_summary(&specs));
}
