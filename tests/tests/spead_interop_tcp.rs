//! spead2 and we exchange heaps over TCP on 127.0.0.1 (packets back to back).

use std::net::{TcpListener, TcpStream};

use spead::json::heap_json;
use spead::recv::{Stream, StreamConfig};
use spead::send::{GroupMode, RateLimiter};
use spead::transport::{ByteStreamReader, PacketWriter, Sender};
use workspace_tests::spead2::{
    expect_tool_success, our_summary, send_each, spawn_sending_tool, stream_specs, summarize,
    ReceivingTool,
};

#[test]
fn spead2_sends_to_us_over_tcp() {
    let specs = stream_specs(41, 30, 8192);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let child = spawn_sending_tool(&["send-tcp", &port.to_string()], &specs);
    let (conn, _) = listener.accept().unwrap();
    let mut stream = Stream::new(StreamConfig::default());
    ByteStreamReader::new(conn, 9200).run(&mut stream).unwrap();
    expect_tool_success(child);
    assert!(stream.is_stopped());
    let mut heaps = Vec::new();
    while let Some(h) = stream.pop_heap() {
        heaps.push(heap_json(&h));
    }
    assert_eq!(summarize(&heaps), our_summary(&specs));
}

#[test]
fn we_send_to_spead2_over_tcp() {
    let specs = stream_specs(42, 30, 1472);
    let tool = ReceivingTool::spawn(&["recv-tcp", "4"]);
    let conn = TcpStream::connect(("127.0.0.1", tool.port)).unwrap();
    let mut sender = Sender::new(
        PacketWriter::new(std::io::BufWriter::new(conn)),
        1472,
        RateLimiter::new(0.0, 65536, 1.05),
        GroupMode::Serial,
    );
    send_each(&mut sender, &specs);
    drop(sender);
    let (theirs, _) = tool.finish();
    assert_eq!(theirs, our_summary(&specs));
}
