//! Large READs: the responses leave as the link takes them (a turn of
//! `READ_BATCH`, 16, packets at a time), so an 8 MiB READ fits a
//! receiver's small ring; responses lost in the middle are asked for again from the first
//! missing PSN, and the duplicate request is answered from there; the requests after a
//! READ wait for its last response.

use super::*;
use crate::frame::roce::opcode as op;

const MIB: usize = 1 << 20;

/// End 0's first PSN (see `Pair::new`).
const PSN0: u32 = 100;

/// A pair with `mem` bytes a side, MTU 4096, retry_cnt 2; end 1 holds `len` bytes of a
/// pattern at offset 0.
fn big_pair(mem: usize, len: usize) -> (Pair, Vec<u8>) {
    let a = QpAttr {
        path_mtu: Mtu::Mtu4096,
        ..attr(2, 0)
    };
    let p = Pair::with_memory(false, a, mem);
    let data = pattern(len);
    p.nic(1).write(0, &data);
    (p, data)
}

/// A READ of `len` bytes of end 1 at `remote_off` into end 0 at `local_off`.
fn read(p: &Pair, wr_id: u64, local_off: usize, len: u32, remote_off: u64) -> WrCopy {
    let mut w = wr(wr_id, SendOpcode::RdmaRead, &[p.nic(0).sge(local_off, len)]);
    w.rdma = Some((p.nic(1).mem.as_ptr() as u64 + remote_off, p.nic(1).key));
    w
}

fn is_read_response(opcode: u8) -> bool {
    matches!(
        opcode,
        op::READ_RESPONSE_FIRST
            | op::READ_RESPONSE_MIDDLE
            | op::READ_RESPONSE_LAST
            | op::READ_RESPONSE_ONLY
    )
}

/// (READ requests end 0 sent, READ responses end 1 sent).
fn read_counts(p: &Pair) -> (usize, usize) {
    let requests = p
        .log
        .iter()
        .filter(|l| l.0 == 0 && l.2 == op::READ_REQUEST)
        .count();
    let responses = p
        .log
        .iter()
        .filter(|l| l.0 == 1 && is_read_response(l.2))
        .count();
    (requests, responses)
}

#[test]
fn an_8_mib_read_leaves_16_responses_at_a_time_and_fits_a_ring_of_32() {
    // 2048 responses of 4096 bytes. Sent at once, all but 32 would find the receiver's
    // ring full; sent 16 a turn, the wire never holds more than 16 and none is lost.
    let (mut p, data) = big_pair(8 * MIB + 4096, 8 * MIB);
    p.ring = 32;
    p.post(0, read(&p, 1, 0, 8 * MIB as u32, 0));
    p.run();
    assert_eq!(p.overflowed, 0);
    assert_eq!(p.deepest, 16);
    assert_eq!(read_counts(&p), (1, 2048));
    assert_eq!(statuses(&p, 0), [(1, WcStatus::Success)]);
    assert!(p.nic(0).read(0, 8 * MIB) == data, "bytes");
    // The opcodes: FIRST, 2046 MIDDLE, LAST, at consecutive PSNs from the request's.
    let responses: Vec<(u32, u8)> = p
        .log
        .iter()
        .filter(|l| l.0 == 1)
        .map(|l| (l.1, l.2))
        .collect();
    assert_eq!(responses[0], (PSN0, op::READ_RESPONSE_FIRST));
    assert_eq!(responses[2047], (PSN0 + 2047, op::READ_RESPONSE_LAST));
    assert!(responses[1..2047]
        .iter()
        .enumerate()
        .all(|(k, &r)| r == (PSN0 + k as u32 + 1, op::READ_RESPONSE_MIDDLE)));
}

#[test]
fn an_8_mib_read_that_loses_middle_responses_asks_for_the_rest_from_the_first_missing() {
    // Packets: 0 the READ, 1..=2048 its responses; response 699 (packet 700) is lost, so
    // the requester takes 699 and lets the 1348 after it go by, each of them starting
    // the ACK timer again; when they stop, the timer asks again for the rest: a READ at
    // PSN 699 for 1349 packets (packet 2049), answered from that PSN (packets 2050..=3398,
    // a duplicate request replayed from where it asks); its 301st response (packet 2350,
    // PSN 999) is lost too, and a third READ (packet 3399) asks for the last 1049.
    let (mut p, data) = big_pair(8 * MIB + 4096, 8 * MIB);
    p.lose = vec![700, 2350];
    p.post(0, read(&p, 1, 0, 8 * MIB as u32, 0));
    p.run();
    assert_eq!(p.sent, 1 + 2048 + 1 + 1349 + 1 + 1049);
    assert_eq!(read_counts(&p), (3, 2048 + 1349 + 1049));
    let requests: Vec<u32> = p
        .log
        .iter()
        .filter(|l| l.0 == 0 && l.2 == op::READ_REQUEST)
        .map(|l| l.1)
        .collect();
    assert_eq!(requests, [PSN0, PSN0 + 699, PSN0 + 999]);
    assert_eq!(statuses(&p, 0), [(1, WcStatus::Success)]);
    assert!(p.nic(0).read(0, 8 * MIB) == data, "bytes");
}

#[test]
fn requests_after_a_read_wait_for_its_last_response() {
    // A READ of 64 KiB (64 responses at MTU 1024: four turns) and a WRITE posted right
    // after it: the WRITE reaches the responder while the READ is being answered, waits,
    // and is acknowledged after the READ's last response, so the responses stay in PSN
    // order; both complete and the bytes are where they belong.
    let mut p = Pair::with_memory(false, attr(2, 0), 256 << 10);
    let data = pattern(64 << 10);
    p.nic(1).write(0, &data);
    p.nic(0).write(128 << 10, b"written");
    p.post(0, read(&p, 1, 0, 64 << 10, 0));
    let mut write = wr(2, SendOpcode::RdmaWrite, &[p.nic(0).sge(128 << 10, 7)]);
    write.rdma = Some((p.nic(1).mem.as_ptr() as u64 + (192 << 10), p.nic(1).key));
    p.post(0, write);
    p.run();
    let from_responder: Vec<(u32, u8)> = p
        .log
        .iter()
        .filter(|l| l.0 == 1)
        .map(|l| (l.1, l.2))
        .collect();
    assert_eq!(from_responder.len(), 65);
    assert!(from_responder[..64].iter().all(|r| is_read_response(r.1)));
    assert_eq!(from_responder[64], (PSN0 + 64, op::ACKNOWLEDGE));
    assert_eq!(
        statuses(&p, 0),
        [(1, WcStatus::Success), (2, WcStatus::Success)]
    );
    assert!(p.nic(0).read(0, 64 << 10) == data, "bytes read");
    assert_eq!(p.nic(1).read(192 << 10, 7), b"written");
}

#[test]
fn a_read_request_the_same_as_one_queued_is_answered_once() {
    // READ 1 of 64 KiB (64 responses at MTU 1024, four turns) and READ 2 of 4 KiB; while
    // READ 1 is being answered, READ 2's request comes three times (the first and two
    // copies, as two retries would send it before the responder reached it): it is
    // queued once and answered once, 4 responses, not 12. (Two reads outstanding.)
    let a = QpAttr {
        max_rd_atomic: 2,
        max_dest_rd_atomic: 2,
        ..attr(2, 0)
    };
    let mut p = Pair::with_memory(false, a, 256 << 10);
    let data = pattern(68 << 10);
    p.nic(1).write(0, &data);
    p.post(0, read(&p, 1, 0, 64 << 10, 0));
    p.post(0, read(&p, 2, 128 << 10, 4 << 10, 64 << 10));
    let copy = p
        .wire
        .back()
        .cloned()
        .expect("READ 2's request on the wire");
    assert_eq!(copy.2.bth.opcode, op::READ_REQUEST);
    p.wire.push_back(copy.clone());
    p.wire.push_back(copy);
    p.run();
    assert_eq!(read_counts(&p), (2, 64 + 4));
    assert_eq!(p.nic(1).out_of_sequence, 2);
    assert_eq!(
        statuses(&p, 0),
        [(1, WcStatus::Success), (2, WcStatus::Success)]
    );
    assert!(
        p.nic(0).read(0, 64 << 10) == data[..64 << 10],
        "READ 1's bytes"
    );
    assert!(
        p.nic(0).read(128 << 10, 4 << 10) == data[64 << 10..],
        "READ 2's bytes"
    );
}
