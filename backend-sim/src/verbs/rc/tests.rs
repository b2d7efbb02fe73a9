//! Two RC (or UC) machines driven against each other in virtual time, as quinn-proto's
//! `Pair` tests drive two connections: no fabric, no frames, no other QPs. Each end has a
//! [`TestNic`] with its own registered memory, receive queue and CQs; packets cross with a
//! fixed latency and can be lost on purpose; timers fire when nothing is in flight.

mod read_stream;

use super::*;
use crate::clock::Nanos;
use crate::frame::roce::RoceHeaders;
use crate::verbs::memory::{MrEntry, MrTable};
use crate::verbs::personality::Personality;
use crate::verbs::wqe::{completion, RecvWqe, SgeList};
use std::cell::Cell;
use std::collections::VecDeque;
use verbs_api::{
    AccessFlags, Completion, EventType, Mtu, QpAttr, SendFlags, SendOpcode, Sge, WcFlags, WcOpcode,
    WcStatus,
};

const LATENCY: Nanos = 1_000;
const QPN: [u32; 2] = [0x11, 0x22];

/// One end's NIC: memory, queues and what the machine put out.
struct TestNic {
    now: Nanos,
    view: QpView,
    mrs: MrTable,
    /// Registered memory (cells: the machine writes through raw pointers into it).
    mem: Box<[Cell<u8>]>,
    key: u32,
    rq: VecDeque<RecvWqe>,
    out: Vec<(RoceHeaders, Vec<u8>)>,
    send_cq: Vec<Completion>,
    recv_cq: Vec<Completion>,
    timers: Vec<(Nanos, u64, u32)>,
    events: Vec<EventType>,
    no_wqe: u64,
    out_of_sequence: u64,
    /// The machine asked for its completer's turn.
    completer_due: bool,
}

impl TestNic {
    /// An end with `bytes` of registered memory.
    fn with_memory(end: usize, uc: bool, attr: QpAttr, bytes: usize) -> Self {
        let mem: Box<[Cell<u8>]> = (0..bytes).map(|_| Cell::new(0)).collect();
        let mut mrs = MrTable::default();
        let key = mrs.register(MrEntry {
            pd: 1,
            addr: mem.as_ptr() as u64,
            len: mem.len() as u64,
            access: AccessFlags::LOCAL_WRITE
                | AccessFlags::REMOTE_WRITE
                | AccessFlags::REMOTE_READ
                | AccessFlags::REMOTE_ATOMIC,
        });
        TestNic {
            now: 0,
            view: QpView {
                qpn: QPN[end],
                state: QpState::Rts,
                uc,
                pd: 1,
                sig_all: true,
                max_send_wr: 64,
                attr: QpAttr {
                    dest_qp_num: QPN[1 - end],
                    ..attr
                },
                personality: Personality::Mlx5,
            },
            mrs,
            mem,
            key,
            rq: VecDeque::new(),
            out: Vec::new(),
            send_cq: Vec::new(),
            recv_cq: Vec::new(),
            timers: Vec::new(),
            events: Vec::new(),
            no_wqe: 0,
            out_of_sequence: 0,
            completer_due: false,
        }
    }

    fn sge(&self, off: usize, len: u32) -> Sge {
        Sge {
            addr: self.mem.as_ptr() as u64 + off as u64,
            length: len,
            lkey: self.key,
        }
    }

    fn write(&self, off: usize, data: &[u8]) {
        for (c, &b) in self.mem[off..off + data.len()].iter().zip(data) {
            c.set(b);
        }
    }

    fn read(&self, off: usize, len: usize) -> Vec<u8> {
        self.mem[off..off + len].iter().map(Cell::get).collect()
    }

    fn post_recv(&mut self, wr_id: u64, off: usize, len: u32) {
        let sge = self.sge(off, len);
        self.rq.push_back(RecvWqe {
            wr_id,
            sges: SgeList::new(&[sge]),
        });
    }
}

impl Nic for TestNic {
    fn now(&self) -> Nanos {
        self.now
    }
    fn qp(&self) -> QpView {
        self.view
    }
    fn path_mtu(&self) -> usize {
        self.view.attr.path_mtu.bytes() as usize
    }
    fn mrs(&self) -> &MrTable {
        &self.mrs
    }
    fn mrs_mut(&mut self) -> &mut MrTable {
        &mut self.mrs
    }
    fn local_status(&self, s: WcStatus) -> WcStatus {
        s
    }
    fn take_recv(&mut self) -> Option<(RecvWqe, u32)> {
        self.rq.pop_front().map(|w| (w, 1))
    }
    fn untake_recv(&mut self, w: RecvWqe) {
        self.rq.push_front(w);
    }
    fn transmit(&mut self, h: RoceHeaders, payload: &[u8]) -> usize {
        self.out.push((h, payload.to_vec()));
        // Ethernet, IPv4, UDP, BTH and ICRC around the payload (the AETH not counted).
        payload.len() + 58
    }
    fn wire_ns(&self, bytes: usize) -> Nanos {
        crate::fabric::link::LinkConfig::default().serialization_ns(bytes)
    }
    fn complete_send(&mut self, wc: Completion) {
        self.send_cq.push(wc);
    }
    fn retire_unsignaled(&mut self) {}
    fn completer_due(&mut self) {
        self.completer_due = true;
    }
    fn complete_recv(&mut self, wc: Completion, _solicited: bool) {
        self.recv_cq.push(wc);
    }
    fn set_timer(&mut self, at: Nanos, kind: Timer, gen: u32) {
        self.timers.push((at, kind as u64, gen));
    }
    fn event(&mut self, e: EventType) {
        self.events.push(e);
    }
    fn enter_error(&mut self) -> bool {
        if self.view.state == QpState::Err {
            return false;
        }
        self.view.state = QpState::Err;
        for w in self.rq.drain(..) {
            let c = completion(w.wr_id, WcStatus::WrFlushErr, WcOpcode::Recv, self.view.qpn);
            self.recv_cq.push(c);
        }
        true
    }
    fn count(&mut self, c: Count) {
        match c {
            Count::NoWqe => self.no_wqe += 1,
            Count::OutOfSequence => self.out_of_sequence += 1,
        }
    }
}

/// Two ends and the packets between them.
struct Pair {
    now: Nanos,
    ends: [(RcState, TestNic); 2],
    /// (arrival, to, headers, payload), in send order.
    wire: VecDeque<(Nanos, usize, RoceHeaders, Vec<u8>)>,
    /// Packets sent so far (both ways), and which of them to lose.
    sent: usize,
    lose: Vec<usize>,
    /// (end, BTH PSN, BTH opcode) of every packet sent, lost or not, in send order.
    log: Vec<(usize, u32, u8)>,
    /// Most packets the wire holds toward one end (the receiver's ring); what comes
    /// beyond is dropped and counted in `overflowed`.
    ring: usize,
    overflowed: usize,
    /// Most packets the wire held at once.
    deepest: usize,
}

fn attr(retry: u8, rnr: u8) -> QpAttr {
    QpAttr {
        path_mtu: Mtu::Mtu1024,
        timeout: 14,
        retry_cnt: retry,
        rnr_retry: rnr,
        min_rnr_timer: 1,
        qp_access_flags: AccessFlags::REMOTE_WRITE
            | AccessFlags::REMOTE_READ
            | AccessFlags::REMOTE_ATOMIC,
        ..QpAttr::default()
    }
}

impl Pair {
    fn new(uc: bool, attr: QpAttr) -> Self {
        Self::with_memory(uc, attr, 65536)
    }

    /// A pair whose ends have `bytes` of registered memory each.
    fn with_memory(uc: bool, attr: QpAttr, bytes: usize) -> Self {
        let end = |i: usize| {
            let mut rc = RcState::default();
            rc.set_rq_psn(100 * i as u32);
            rc.set_sq_psn(100 * (1 - i) as u32);
            rc.set_retries(attr.retry_cnt, attr.rnr_retry);
            (rc, TestNic::with_memory(i, uc, attr, bytes))
        };
        Pair {
            now: 0,
            ends: [end(0), end(1)],
            wire: VecDeque::new(),
            sent: 0,
            lose: Vec::new(),
            log: Vec::new(),
            ring: usize::MAX,
            overflowed: 0,
            deepest: 0,
        }
    }

    fn nic(&self, i: usize) -> &TestNic {
        &self.ends[i].1
    }

    fn nic_mut(&mut self, i: usize) -> &mut TestNic {
        &mut self.ends[i].1
    }

    fn post(&mut self, i: usize, wr: WrCopy) {
        let (rc, nic) = &mut self.ends[i];
        nic.now = self.now;
        rc.post(nic, wr).unwrap();
        self.collect();
    }

    /// Moves what the ends sent onto the wire (minus the losses).
    fn collect(&mut self) {
        for from in 0..2 {
            for (h, p) in std::mem::take(&mut self.ends[from].1.out) {
                self.log.push((from, h.bth.psn, h.bth.opcode));
                let queued = self.wire.iter().filter(|w| w.1 == 1 - from).count();
                if queued >= self.ring {
                    self.overflowed += 1;
                } else if !self.lose.contains(&self.sent) {
                    self.wire.push_back((self.now + LATENCY, 1 - from, h, p));
                    self.deepest = self.deepest.max(self.wire.len());
                }
                self.sent += 1;
            }
        }
    }

    /// Takes a completer's turn a machine asked for, else the next packet or, with none
    /// in flight, the earliest timer. False when nothing is left.
    fn step(&mut self) -> bool {
        if let Some(i) = (0..2).find(|&i| self.ends[i].1.completer_due) {
            let (rc, nic) = &mut self.ends[i];
            nic.completer_due = false;
            nic.now = self.now;
            rc.on_completer(nic);
        } else if let Some((at, to, h, p)) = self.wire.pop_front() {
            self.now = self.now.max(at);
            let (rc, nic) = &mut self.ends[to];
            nic.now = self.now;
            rc.on_packet(
                nic,
                &RocePacket {
                    headers: h,
                    payload: &p,
                },
            );
        } else {
            let next = (0..2)
                .flat_map(|i| self.ends[i].1.timers.iter().map(move |t| (t.0, i)))
                .min();
            let Some((at, i)) = next else {
                return false;
            };
            let nic = &mut self.ends[i].1;
            let k = nic.timers.iter().position(|t| t.0 == at).unwrap();
            let (_, kind, gen) = nic.timers.remove(k);
            self.now = self.now.max(at);
            let (rc, nic) = &mut self.ends[i];
            nic.now = self.now;
            rc.on_timer(nic, kind, gen);
        }
        self.collect();
        true
    }

    fn run(&mut self) {
        for _ in 0..100_000 {
            if !self.step() {
                return;
            }
        }
        panic!("the pair did not go idle");
    }
}

fn wr(wr_id: u64, opcode: SendOpcode, sges: &[Sge]) -> WrCopy {
    WrCopy {
        wr_id,
        opcode,
        flags: SendFlags::SIGNALED,
        imm: 0,
        sges: SgeList::new(sges),
        rdma: None,
        atomic: None,
        ud: None,
        inline: None,
        inv: None,
        bind: None,
    }
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + 3) as u8).collect()
}

/// A pair whose end 0 holds `len` bytes of a pattern at offset 0 and whose end 1 has one
/// receive posted (`wr_id` at `off`, 4096 bytes).
fn pair_with_data(uc: bool, attr: QpAttr, len: usize, wr_id: u64, off: usize) -> (Pair, Vec<u8>) {
    let mut p = Pair::new(uc, attr);
    let data = pattern(len);
    p.nic(0).write(0, &data);
    p.nic_mut(1).post_recv(wr_id, off, 4096);
    (p, data)
}

/// (wr_id, status) of every send completion of end `i`, in order.
fn statuses(p: &Pair, i: usize) -> Vec<(u64, WcStatus)> {
    p.nic(i)
        .send_cq
        .iter()
        .map(|c| (c.wr_id, c.status))
        .collect()
}

#[test]
fn a_three_packet_send_arrives_whole_and_completes_on_both_ends() {
    let (mut p, data) = pair_with_data(false, attr(7, 7), 2500, 9, 4096);
    let mut w = wr(1, SendOpcode::SendWithImm, &[p.nic(0).sge(0, 2500)]);
    w.imm = 0xabcd;
    p.post(0, w);
    p.run();
    // 2500 bytes at a 1024-byte MTU: FIRST, MIDDLE, LAST, and one ACK back.
    assert_eq!(p.sent, 4);
    let rx = &p.nic(1).recv_cq;
    assert_eq!(rx.len(), 1);
    assert_eq!(
        (rx[0].wr_id, rx[0].status, rx[0].opcode, rx[0].byte_len),
        (9, WcStatus::Success, WcOpcode::Recv, 2500)
    );
    assert_eq!(
        (rx[0].imm_data, rx[0].wc_flags),
        (0xabcd, WcFlags::WITH_IMM)
    );
    assert_eq!(rx[0].src_qp, QPN[0]);
    assert_eq!(p.nic(1).read(4096, 2500), data);
    let tx = &p.nic(0).send_cq;
    assert_eq!(tx.len(), 1);
    assert_eq!(
        (tx[0].wr_id, tx[0].status, tx[0].opcode, tx[0].byte_len),
        (1, WcStatus::Success, WcOpcode::Send, 2500)
    );
    // The ACK came back after two crossings; nothing is left armed that fires usefully.
    assert_eq!(p.nic(0).out_of_sequence + p.nic(1).out_of_sequence, 0);
}

#[test]
fn a_lost_middle_packet_is_nakked_and_resent_and_delivered_once() {
    let (mut p, data) = pair_with_data(false, attr(7, 7), 3000, 5, 8192);
    p.lose = vec![1]; // the MIDDLE packet of the first transmission
    p.post(0, wr(1, SendOpcode::Send, &[p.nic(0).sge(0, 3000)]));
    p.run();
    // LAST arrives out of sequence: one PSN NAK, then go-back-N resends from the PSN the
    // NAK names (rxe_req.c `req_retry` resumes inside the message): MIDDLE and LAST.
    assert_eq!(p.nic(1).out_of_sequence, 1);
    assert_eq!(p.sent, 3 + 1 + 2 + 1);
    let from_requester: Vec<u32> = p.log.iter().filter(|l| l.0 == 0).map(|l| l.1).collect();
    assert_eq!(from_requester, [100, 101, 102, 101, 102]);
    let rx = &p.nic(1).recv_cq;
    assert_eq!(rx.len(), 1);
    assert_eq!((rx[0].wr_id, rx[0].byte_len), (5, 3000));
    assert_eq!(p.nic(1).read(8192, 3000), data);
    assert_eq!(p.nic(0).send_cq.len(), 1);
    assert_eq!(p.nic(0).send_cq[0].status, WcStatus::Success);
}

#[test]
fn rdma_write_read_and_fetch_add_reach_the_peers_memory() {
    let mut p = Pair::new(false, attr(7, 7));
    let data = pattern(1500);
    p.nic(0).write(0, &data);
    let remote = p.nic(1).mem.as_ptr() as u64;
    let rkey = p.nic(1).key;
    let mut write = wr(1, SendOpcode::RdmaWrite, &[p.nic(0).sge(0, 1500)]);
    write.rdma = Some((remote + 1000, rkey));
    p.post(0, write);
    let mut read = wr(2, SendOpcode::RdmaRead, &[p.nic(0).sge(20_000, 1500)]);
    read.rdma = Some((remote + 1000, rkey));
    p.post(0, read);
    p.nic(1).write(40_000, &5u64.to_ne_bytes());
    let mut faa = wr(3, SendOpcode::AtomicFetchAndAdd, &[p.nic(0).sge(30_000, 8)]);
    faa.atomic = Some((remote + 40_000, rkey, 37, 0));
    p.post(0, faa);
    p.run();
    assert_eq!(p.nic(1).read(1000, 1500), data);
    assert_eq!(p.nic(0).read(20_000, 1500), data);
    assert_eq!(p.nic(1).read(40_000, 8), 42u64.to_ne_bytes());
    assert_eq!(p.nic(0).read(30_000, 8), 5u64.to_ne_bytes());
    let done: Vec<_> = p
        .nic(0)
        .send_cq
        .iter()
        .map(|c| (c.wr_id, c.status, c.opcode, c.byte_len))
        .collect();
    assert_eq!(
        done,
        [
            (1, WcStatus::Success, WcOpcode::RdmaWrite, 1500),
            (2, WcStatus::Success, WcOpcode::RdmaRead, 1500),
            (3, WcStatus::Success, WcOpcode::FetchAdd, 8),
        ]
    );
    assert!(p.nic(1).recv_cq.is_empty(), "RDMA consumes no receive");
}

#[test]
fn rnr_naks_wait_out_the_timer_and_give_up_after_rnr_retry() {
    // rnr_retry 2: the first try and two retries find no receive, then the WQE fails.
    let mut p = Pair::new(false, attr(7, 2));
    p.post(0, wr(1, SendOpcode::Send, &[p.nic(0).sge(0, 10)]));
    p.run();
    assert_eq!(p.nic(1).no_wqe, 3);
    let done = statuses(&p, 0);
    assert_eq!(done, [(1, WcStatus::RnrRetryExcErr)]);
    assert_eq!(p.nic(0).view.state, QpState::Err);
    // min_rnr_timer 1 is 10 us per wait: two waits passed in virtual time.
    assert!(p.now >= 2 * 10_000, "now {}", p.now);
}

#[test]
fn a_receive_posted_during_the_rnr_wait_is_used_by_the_retry() {
    let mut p = Pair::new(false, attr(7, 7));
    p.nic(0).write(0, b"late");
    p.post(0, wr(1, SendOpcode::Send, &[p.nic(0).sge(0, 4)]));
    // The SEND reaches the responder and is RNR-NAKed; the NAK reaches the requester.
    assert!(p.step());
    assert!(p.step());
    assert_eq!(p.nic(1).no_wqe, 1);
    p.nic_mut(1).post_recv(77, 100, 64);
    p.run();
    assert_eq!(p.nic(1).read(100, 4), b"late");
    assert_eq!(p.nic(1).recv_cq[0].wr_id, 77);
    assert_eq!(p.nic(0).send_cq[0].status, WcStatus::Success);
}

#[test]
fn an_unanswered_request_fails_with_retry_exceeded_after_retry_cnt_timeouts() {
    let mut p = Pair::new(false, attr(2, 7));
    p.nic_mut(1).post_recv(1, 0, 64);
    p.lose = (0..100).collect(); // a dead link
    p.post(0, wr(1, SendOpcode::Send, &[p.nic(0).sge(0, 8)]));
    p.run();
    // The first transmission and two retries.
    assert_eq!(p.sent, 3);
    assert_eq!(p.nic(0).send_cq.len(), 1);
    assert_eq!(p.nic(0).send_cq[0].status, WcStatus::RetryExcErr);
    // timeout 14 is 4.096 us << 14 = 67.1 ms per try.
    assert_eq!(p.now, 3 * (4096 << 14));
}

#[test]
fn read_responses_give_the_retries_back() {
    // retry_cnt 1: each read loses its first response and needs one retry. A completed
    // read is progress (rxe_comp.c resets the retry counters on every READ response), so
    // the second read has its retry again; before, it failed with RETRY_EXC_ERR (perftest's
    // ib_read_bw with 128 reads outstanding, a timeout now and then, failed with status 12).
    let mut p = Pair::new(false, attr(1, 0));
    let data = pattern(512);
    p.nic(1).write(1000, &data);
    let remote = p.nic(1).mem.as_ptr() as u64;
    let rkey = p.nic(1).key;
    // Packets: 0 READ 1, 1 its response (lost), 2 READ 1 again, 3 its response, 4 READ 2,
    // 5 its response (lost), 6 READ 2 again, 7 its response.
    p.lose = vec![1, 5];
    for (id, off) in [(1, 0), (2, 4096)] {
        let mut read = wr(id, SendOpcode::RdmaRead, &[p.nic(0).sge(off, 512)]);
        read.rdma = Some((remote + 1000, rkey));
        p.post(0, read);
        p.run();
        assert_eq!(p.nic(0).read(off, 512), data, "read {id}");
    }
    assert_eq!(p.sent, 8);
    assert_eq!(
        statuses(&p, 0),
        [(1, WcStatus::Success), (2, WcStatus::Success)]
    );
}

#[test]
fn a_read_retry_asks_only_for_the_responses_missing() {
    // A read of four packets (MTU 1024) loses its third response. The retry asks for the
    // last 2048 bytes from the PSN of the one missing (rxe's req_retry), so two more
    // responses come, not four; the data is whole.
    let mut p = Pair::new(false, attr(1, 0));
    let data = pattern(4096);
    p.nic(1).write(8192, &data);
    let remote = p.nic(1).mem.as_ptr() as u64;
    let rkey = p.nic(1).key;
    // Packets: 0 READ, 1-4 its responses (3 lost), 5 the retry, 6-7 its two responses.
    p.lose = vec![3];
    let mut read = wr(1, SendOpcode::RdmaRead, &[p.nic(0).sge(0, 4096)]);
    read.rdma = Some((remote + 8192, rkey));
    p.post(0, read);
    p.run();
    assert_eq!(p.nic(0).read(0, 4096), data);
    assert_eq!(p.sent, 8);
    assert_eq!(statuses(&p, 0), [(1, WcStatus::Success)]);
}

#[test]
fn uc_loses_a_message_with_a_gap_and_resynchronises_on_the_next() {
    let (mut p, data) = pair_with_data(true, attr(0, 0), 2048, 1, 4096);
    p.nic_mut(1).post_recv(2, 12288, 4096);
    p.lose = vec![0]; // FIRST of the first message
    p.post(0, wr(1, SendOpcode::Send, &[p.nic(0).sge(0, 2048)]));
    p.post(0, wr(2, SendOpcode::Send, &[p.nic(0).sge(0, 2048)]));
    p.run();
    // No ACKs on UC; the LAST of message 1 is out of sequence and dropped.
    assert_eq!(p.sent, 4);
    assert_eq!(p.nic(1).out_of_sequence, 1);
    let rx = &p.nic(1).recv_cq;
    assert_eq!(rx.len(), 1);
    assert_eq!((rx[0].wr_id, rx[0].byte_len), (1, 2048));
    assert_eq!(p.nic(1).read(4096, 2048), data);
    // The sender completed both (UC completes once sent, in the completer's turn).
    assert_eq!(p.nic(0).send_cq.len(), 2);
}

#[test]
fn an_rnr_failure_lands_on_the_wqe_that_was_refused_not_a_later_one() {
    // A is received but its ACK is lost; B finds no receive and is RNR-NAKed with
    // rnr_retry 0; that NAK acknowledges A implicitly, so A completes first and B fails.
    let mut p = Pair::new(false, attr(7, 0));
    p.nic_mut(1).post_recv(1, 0, 64);
    p.lose = vec![3]; // SEND A, SEND B, SEND C, then the ACK of A
    for id in [10, 11, 12] {
        p.post(0, wr(id, SendOpcode::Send, &[p.nic(0).sge(0, 8)]));
    }
    p.run();
    let done = statuses(&p, 0);
    assert_eq!(
        done,
        [
            (10, WcStatus::Success),
            (11, WcStatus::RnrRetryExcErr),
            (12, WcStatus::WrFlushErr)
        ]
    );
}

#[test]
fn a_psn_sequence_nak_takes_a_retry_and_fails_the_wqe_when_none_is_left() {
    // SEND 1 is lost; SEND 2 draws a PSN sequence error NAK. With retry_cnt 1 the NAK
    // takes the retry and both are sent again; with 0 the first fails (rxe_comp.c).
    for (retry, want) in [
        (1, vec![(1, WcStatus::Success), (2, WcStatus::Success)]),
        (
            0,
            vec![(1, WcStatus::RetryExcErr), (2, WcStatus::WrFlushErr)],
        ),
    ] {
        let mut p = Pair::new(false, attr(retry, 0));
        p.nic_mut(1).post_recv(10, 0, 64);
        p.nic_mut(1).post_recv(11, 64, 64);
        p.lose = vec![0];
        p.post(0, wr(1, SendOpcode::Send, &[p.nic(0).sge(0, 8)]));
        p.post(0, wr(2, SendOpcode::Send, &[p.nic(0).sge(8, 8)]));
        p.run();
        assert_eq!(statuses(&p, 0), want, "retry_cnt {retry}");
        assert_eq!(p.nic(1).out_of_sequence, 1);
    }
}

/// The PSNs end 0 sent, in order.
fn requester_psns(p: &Pair) -> Vec<u32> {
    p.log.iter().filter(|l| l.0 == 0).map(|l| l.1).collect()
}

#[test]
fn a_second_psn_nak_during_a_retry_waits_for_the_timer_on_rxe_and_not_on_mlx5() {
    // Four packets (PSN 100..103); the first PSN 101 is lost, so PSN 102 draws a NAK
    // and the retry resends 101..103, of which 102 is lost too: PSN 103 draws a second
    // NAK. rxe starts no retry while one is under way (no ACK came since; rxe_comp.c
    // `comp.started_retry`), so the ACK timer resends 102..; mlx5 answers the NAK.
    for (personality, waits) in [(Personality::Rxe, true), (Personality::Mlx5, false)] {
        let (mut p, data) = pair_with_data(false, attr(7, 7), 4000, 5, 8192);
        p.nic_mut(0).view.personality = personality;
        // Sent: 0-3 the four packets, 4 the NAK, 5-7 the retry (6 is PSN 102).
        p.lose = vec![1, 6];
        p.post(0, wr(1, SendOpcode::Send, &[p.nic(0).sge(0, 4000)]));
        while p.nic(0).send_cq.is_empty() {
            assert!(p.step(), "{personality:?}: idle before the completion");
        }
        let done_at = p.now;
        p.run();
        assert_eq!(
            requester_psns(&p),
            [100, 101, 102, 103, 101, 102, 103, 102, 103],
            "{personality:?}"
        );
        assert!(p.nic(1).read(8192, 4000) == data, "{personality:?}: bytes");
        assert_eq!(statuses(&p, 0), [(1, WcStatus::Success)]);
        let timeout = 4096 << 14;
        assert_eq!(
            done_at >= timeout,
            waits,
            "{personality:?}: done at {done_at}"
        );
    }
}

#[test]
fn a_read_whose_response_is_lost_asks_again_for_the_rest_only() {
    // A READ of 3000 bytes: three responses (PSN 100..102); the second is lost, so the
    // ACK timer asks again from the bytes after the first response (rxe_req.c
    // `req_retry`: iova and length move on by the packets received).
    let mut p = Pair::new(false, attr(7, 7));
    let data = pattern(3000);
    p.nic(1).write(1000, &data);
    let mut w = wr(1, SendOpcode::RdmaRead, &[p.nic(0).sge(0, 3000)]);
    w.rdma = Some((p.nic(1).mem.as_ptr() as u64 + 1000, p.nic(1).key));
    p.lose = vec![2]; // request, response 100, response 101 (lost), response 102
    p.post(0, w);
    p.run();
    assert!(p.nic(0).read(0, 3000) == data, "bytes");
    assert_eq!(statuses(&p, 0), [(1, WcStatus::Success)]);
    let requests: Vec<(u32, u8)> = p
        .log
        .iter()
        .filter(|l| l.0 == 0)
        .map(|l| (l.1, l.2))
        .collect();
    assert_eq!(requests, [(100, 0x0c), (101, 0x0c)]);
}

#[test]
fn reads_and_atomics_beyond_max_rd_atomic_wait_for_a_response() {
    // max_rd_atomic 2: three FETCH_ADDs and a SEND posted at once; the third atomic and
    // the SEND behind it go out only after the first atomic's response (rxe_req.c
    // `rd_atomic`). Each returns the value before it.
    let mut a = attr(7, 7);
    a.max_rd_atomic = 2;
    a.max_dest_rd_atomic = 2;
    let mut p = Pair::new(false, a);
    p.nic_mut(1).post_recv(9, 0, 64);
    let remote = p.nic(1).mem.as_ptr() as u64;
    for i in 0..3u64 {
        let mut w = wr(
            i,
            SendOpcode::AtomicFetchAndAdd,
            &[p.nic(0).sge(8 * i as usize, 8)],
        );
        w.atomic = Some((remote + 1024, p.nic(1).key, 1, 0));
        p.post(0, w);
    }
    p.post(0, wr(3, SendOpcode::Send, &[p.nic(0).sge(64, 8)]));
    // Before anything crossed, two requests are out.
    assert_eq!(requester_psns(&p), [100, 101]);
    p.run();
    assert_eq!(requester_psns(&p), [100, 101, 102, 103]);
    let order: Vec<usize> = p.log.iter().map(|l| l.0).collect();
    // Two requests, their two responses, then the third atomic and the SEND, then theirs.
    assert_eq!(order, [0, 0, 1, 1, 0, 0, 1, 1]);
    let olds: Vec<u64> = (0..3)
        .map(|i| u64::from_ne_bytes(p.nic(0).read(8 * i, 8).try_into().unwrap()))
        .collect();
    assert_eq!(olds, [0, 1, 2]);
    assert_eq!(statuses(&p, 0).len(), 4);
}

#[test]
fn a_retry_across_the_psn_wrap_resumes_at_the_nakked_psn() {
    // A 4-packet SEND from PSN 0xfffffe (0xfffffe, 0xffffff, 0, 1); 0xffffff is lost, the
    // NAK names it, and the retry resends 0xffffff, 0 and 1: the acknowledged PSN is
    // compared in the 24-bit space from where the SEND started.
    let (mut p, data) = pair_with_data(false, attr(7, 7), 4000, 5, 8192);
    p.nic_mut(0).view.personality = Personality::Rxe;
    p.ends[0].0.set_sq_psn(0xff_fffe);
    p.ends[1].0.set_rq_psn(0xff_fffe);
    p.lose = vec![1];
    p.post(0, wr(1, SendOpcode::Send, &[p.nic(0).sge(0, 4000)]));
    p.run();
    assert_eq!(
        requester_psns(&p),
        [0xff_fffe, 0xff_ffff, 0, 1, 0xff_ffff, 0, 1]
    );
    assert!(p.nic(1).read(8192, 4000) == data, "bytes");
    assert_eq!(statuses(&p, 0), [(1, WcStatus::Success)]);
}

#[test]
fn rxe_sends_at_most_128_psns_beyond_the_first_unacknowledged_and_mlx5_sends_all() {
    // Twelve SENDs of 16 packets (PSN 100 on): rxe starts a WQE only while its first PSN
    // is at most 128 beyond the first unacknowledged one (rxe_req.c
    // RXE_MAX_UNACKED_PSNS), so nine (PSN 100..243) go before any ACK; mlx5 sends all.
    for (personality, first_burst) in [(Personality::Rxe, 9 * 16), (Personality::Mlx5, 12 * 16)] {
        let mut p = Pair::new(false, attr(7, 7));
        p.nic_mut(0).view.personality = personality;
        for i in 0..12 {
            p.nic_mut(1).post_recv(i, 0, 16 * 1024);
        }
        for i in 0..12 {
            p.post(0, wr(i, SendOpcode::Send, &[p.nic(0).sge(0, 16 * 1024)]));
        }
        assert_eq!(requester_psns(&p).len(), first_burst, "{personality:?}");
        p.run();
        assert_eq!(requester_psns(&p).len(), 12 * 16, "{personality:?}");
        assert_eq!(statuses(&p, 0).len(), 12, "{personality:?}");
        assert_eq!(p.nic(1).recv_cq.len(), 12, "{personality:?}");
    }
}

#[test]
fn an_atomic_response_past_a_lost_one_is_not_taken_and_both_go_again() {
    // max_rd_atomic 2: the response to the first FETCH_ADD is lost and the second's
    // arrives. It is not taken (rxe completes in order; taking it would let a third
    // atomic out while the responder still holds the first for a replay): the requester
    // retries both, the responder answers both from what it did, then the third goes.
    let mut a = attr(7, 7);
    a.max_rd_atomic = 2;
    a.max_dest_rd_atomic = 2;
    let mut p = Pair::new(false, a);
    p.nic_mut(0).view.personality = Personality::Rxe;
    let remote = p.nic(1).mem.as_ptr() as u64;
    for i in 0..3u64 {
        let mut w = wr(
            i,
            SendOpcode::AtomicFetchAndAdd,
            &[p.nic(0).sge(8 * i as usize, 8)],
        );
        w.atomic = Some((remote + 1024, p.nic(1).key, 1, 0));
        p.post(0, w);
    }
    p.lose = vec![2]; // requests 0 and 1, then the first response
    p.run();
    assert_eq!(requester_psns(&p), [100, 101, 100, 101, 102]);
    let olds: Vec<u64> = (0..3)
        .map(|i| u64::from_ne_bytes(p.nic(0).read(8 * i, 8).try_into().unwrap()))
        .collect();
    assert_eq!(olds, [0, 1, 2]);
    assert_eq!(
        u64::from_ne_bytes(p.nic(1).read(1024, 8).try_into().unwrap()),
        3,
        "each atomic executed once"
    );
    assert_eq!(statuses(&p, 0).len(), 3);
}
