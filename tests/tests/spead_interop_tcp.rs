//! spead2 and we exchange heaps over TCP on 127.0.0.1 (packets back to back).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};

use spead::json::heap_json;
use spead::recv::{Stream, StreamConfig};
use spead::send::{GroupMode, HeapReference, RateLimiter};
use spead::transport::{ByteStreamReader, PacketWriter, Sender};
use workspace_tests::spead2::{
    our_receive, spawn_tool, stream_specs, summarize, summarize_tool_output, HeapSpec, HeapSummary,
};

fn expected(specs: &[HeapSpec]) -> Vec<HeapSummary> {
    let bytes: Vec<u8> = specs.iter().flat_map(HeapSpec::our_bytes).collect();
    summarize(&our_receive(&bytes, StreamConfig::default()).0)
}

#[test]
fn spead2_sends_to_us_over_tcp() {
    let specs = stream_specs(41, 30, 8192);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut child = spawn_tool(&["send-tcp", &port.to_string()]);
    child
        .stdin
        .take()
        .unwrap()
        .write_all(&serde_json::to_vec(&specs).unwrap())
        .unwrap();
    let (conn, _) = listener.accept().unwrap();
    let mut stream = Stream::new(StreamConfig::default());
    ByteStreamReader::new(conn, 9200).run(&mut stream).unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(child.wait().unwrap().success(), "spead2 failed: {err}");
    assert!(stream.is_stopped());
    let mut heaps = Vec::new();
    while let Some(h) = stream.pop_heap() {
        heaps.push(heap_json(&h));
    }
    assert_eq!(summarize(&heaps), expected(&specs));
}

#[test]
fn we_send_to_spead2_over_tcp() {
    let specs = stream_specs(42, 30, 1472);
    let mut child = spawn_tool(&["recv-tcp", "4"]);
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let port = serde_json::from_str::<serde_json::Value>(&line).unwrap()["port"]
        .as_u64()
        .unwrap();
    let conn = TcpStream::connect(("127.0.0.1", port as u16)).unwrap();
    let mut sender = Sender::new(
        PacketWriter::new(std::io::BufWriter::new(conn)),
        1472,
        RateLimiter::new(0.0, 65536, 1.05),
        GroupMode::Serial,
    );
    let heaps: Vec<_> = specs.iter().map(HeapSpec::to_heap).collect();
    for (spec, heap) in specs.iter().zip(&heaps) {
        sender
            .send_heaps(&[HeapReference {
                heap,
                cnt: spec.cnt,
                substream: 0,
            }])
            .unwrap();
    }
    drop(sender);
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    assert!(child.wait().unwrap().success());
    let (theirs, _) = summarize_tool_output(&rest);
    assert_eq!(theirs, expected(&specs));
}
