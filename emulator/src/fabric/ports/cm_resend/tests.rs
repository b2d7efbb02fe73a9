//! The resend state machine driven with a virtual clock: each test feeds it the frames
//! an emulated host h1 sends and the frames that reach its port from the VM (remote),
//! at chosen instants, and checks what it answers and what falls due.

use std::net::{IpAddr, Ipv4Addr};

use backend_sim::frame::eth::Mac;

use super::*;
use crate::fabric::ports::cm_frame::captured::{vm_rep, vm_req};

const MS: Nanos = 1_000_000;
/// The REQ's timeout: 2 x `cm_convert_to_ms(18)` + `cm_convert_to_ms(20)`.
const REQ_WAIT: Nanos = 6144 * MS;
/// A REP's: `cm_convert_to_ms(20)` (the REQ's local CM response timeout).
const REP_WAIT: Nanos = 4096 * MS;

fn ip(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

fn h1() -> (Mac, Ipv4Addr) {
    (Mac([2, 0, 10, 100, 0, 1]), ip("10.100.0.1"))
}

fn vm() -> (Mac, Ipv4Addr) {
    (Mac([2, 0, 10, 100, 0, 20]), ip("10.100.0.20"))
}

/// Host `h` as a datagram's end: over IPv4, or over IPv6 its link-local address.
fn end((mac, ip): (Mac, Ipv4Addr), v6: bool) -> (Mac, IpAddr) {
    if v6 {
        (mac, netwire::ipv6::link_local_of_mac(mac.0).into())
    } else {
        (mac, ip.into())
    }
}

/// A frame h1 sends to the VM.
fn out(tid: u64, msg: Msg) -> Vec<u8> {
    cm_frame::frame(
        end(h1(), false),
        end(vm(), false),
        0,
        &Mad { tid, msg }.encode(),
    )
}

/// A frame the VM sends to h1.
fn inc(tid: u64, msg: Msg) -> Vec<u8> {
    cm_frame::frame(
        end(vm(), false),
        end(h1(), false),
        0,
        &Mad { tid, msg }.encode(),
    )
}

/// The VM's captured REQ, as the Mad (comm id 0xbac97c30, CM response timeouts 20, 15
/// retries, local ACK timeout 19).
fn the_vms_req() -> Mad {
    let f = vm_req();
    let (_, _, _, mad) = cm_frame::parse_frame(&f).unwrap();
    Mad::decode(mad).unwrap()
}

/// h1's REQ (comm id 1), the VM's REQ's values.
fn h1s_req() -> Vec<u8> {
    let Msg::Req(mut r) = the_vms_req().msg else {
        unreachable!()
    };
    r.local_comm_id = 1;
    out(1, Msg::Req(r))
}

/// What h1's id 1 is told when its retries toward the VM's id `remote` are spent.
fn timed_out(remote: u32) -> m::Decoded {
    (
        Address::Endpoint(Endpoint {
            host: h1().1,
            id: 1,
        }),
        Endpoint {
            host: vm().1,
            id: remote,
        },
        Message::Rej {
            reason: SEND_TIMEOUT,
            private_data: Vec::new(),
        },
    )
}

fn rep(local: u32, remote: u32) -> Msg {
    Msg::Rep(vm_rep(local, remote))
}

fn resend(frame: &[u8]) -> Action {
    Action::Resend {
        host: h1().1,
        frame: frame.to_vec(),
    }
}

#[test]
fn cm_times_as_the_kernel_converts_them() {
    assert_eq!(convert(20), 4096 * MS);
    assert_eq!(convert(18), 1024 * MS);
    assert_eq!(convert(3), MS);
    // rxe's ACK delay 15 and RoCE's packet life time 18: the REQ's local ACK timeout.
    assert_eq!(ack_timeout(15, 18), 19);
    assert_eq!(ack_timeout(19, 18), 20);
    assert_eq!(ack_timeout(30, 5), 30);
}

/// h1's REQ lost: sent again after exactly its timeout, then each timeout after that,
/// until the VM's REP; the REP goes to h1's process and nothing is due any more.
#[test]
fn a_lost_req_goes_again_after_its_timeout_until_the_rep() {
    let mut r = Resend::default();
    let req = h1s_req();
    r.sent(0, &req);
    assert_eq!(r.state(h1().1, 1), Some(State::ReqSent));
    assert_eq!(r.next_due(), Some(REQ_WAIT));
    assert_eq!(r.poll(REQ_WAIT - 1), vec![]);
    assert_eq!(r.poll(REQ_WAIT), vec![resend(&req)]);
    assert_eq!(r.next_due(), Some(2 * REQ_WAIT));
    assert_eq!(r.poll(2 * REQ_WAIT), vec![resend(&req)]);
    let t = 2 * REQ_WAIT + 5 * MS;
    assert_eq!(
        r.received(t, h1().1, &inc(1, rep(0x77, 1))),
        Some(Verdict::Pass)
    );
    assert_eq!(r.state(h1().1, 1), Some(State::RepRcvd));
    assert_eq!(r.next_due(), None);
    assert_eq!(r.poll(100 * REQ_WAIT), vec![]);
    // The REP again before h1's RTU: dropped (cm_dup_rep_handler sends nothing yet).
    assert_eq!(
        r.received(t, h1().1, &inc(1, rep(0x77, 1))),
        Some(Verdict::Drop)
    );
    // h1's RTU; a repeated REP then gets the RTU again, with the REQ's transaction id.
    r.sent(t, &out(1, Msg::Rtu(1, 0x77)));
    assert_eq!(r.state(h1().1, 1), Some(State::Established));
    assert_eq!(
        r.received(t, h1().1, &inc(1, rep(0x77, 1))),
        Some(Verdict::Reply {
            to: vm().1,
            mad: Mad {
                tid: 1,
                msg: Msg::Rtu(1, 0x77)
            }
        })
    );
    assert_eq!(
        r.stats,
        ResendStats {
            resent: 2,
            duplicates: 2,
            timed_out: 0,
            stray: 0
        }
    );
    assert_eq!(r.live(), 1);
    // A frame that is no CM MAD for h1 is not the machine's.
    assert_eq!(r.received(t, ip("10.100.0.2"), &vm_req()), None);
}

/// The VM's REQ: its repeats are dropped before and after h1's REP (as
/// `cm_dup_req_handler` drops them); h1's REP goes again after the REQ's local CM
/// response timeout until the RTU; a repeated RTU is dropped.
#[test]
fn a_repeated_req_is_dropped_and_the_rep_goes_again_until_the_rtu() {
    let mut r = Resend::default();
    let req = vm_req();
    assert_eq!(r.received(0, h1().1, &req), Some(Verdict::Pass));
    assert_eq!(r.received(180 * MS, h1().1, &req), Some(Verdict::Drop));
    assert_eq!(r.next_due(), None, "nothing of h1's waits yet");
    let rep = out(0x0000_0002_307c_c9ba, rep(3, 0xbac9_7c30));
    r.sent(MS, &rep);
    assert_eq!(r.state(h1().1, 3), Some(State::RepSent));
    assert_eq!(r.received(2 * MS, h1().1, &req), Some(Verdict::Drop));
    assert_eq!(r.poll(MS + REP_WAIT - 1), vec![]);
    assert_eq!(r.poll(MS + REP_WAIT), vec![resend(&rep)]);
    let rtu = inc(7, Msg::Rtu(0xbac9_7c30, 3));
    assert_eq!(r.received(5000 * MS, h1().1, &rtu), Some(Verdict::Pass));
    assert_eq!(r.state(h1().1, 3), Some(State::Established));
    assert_eq!(r.received(5001 * MS, h1().1, &rtu), Some(Verdict::Drop));
    assert_eq!(r.next_due(), None);
    assert_eq!(
        r.stats,
        ResendStats {
            resent: 1,
            duplicates: 3,
            timed_out: 0,
            stray: 0
        }
    );
}

/// The VM's MRA of h1's REP makes the wait its service timeout plus the path's ACK
/// timeout (`cm_mra_handler`); a second MRA is a duplicate.
#[test]
fn an_mra_lengthens_the_wait_for_the_rtu() {
    let mut r = Resend::default();
    r.received(0, h1().1, &vm_req());
    let rep = out(9, rep(3, 0xbac9_7c30));
    r.sent(0, &rep);
    let mra = inc(9, Msg::Mra(0xbac9_7c30, 3, 1, 24));
    assert_eq!(r.received(10 * MS, h1().1, &mra), Some(Verdict::Drop));
    assert_eq!(r.state(h1().1, 3), Some(State::MraRepRcvd));
    // cm_convert_to_ms(24) + cm_convert_to_ms(19): the REQ's local ACK timeout.
    let wait = (65536 + 2048) * MS;
    assert_eq!(r.next_due(), Some(10 * MS + wait));
    assert_eq!(r.received(11 * MS, h1().1, &mra), Some(Verdict::Drop));
    assert_eq!(r.poll(10 * MS + wait), vec![resend(&rep)]);
    assert_eq!(r.next_due(), Some(10 * MS + 2 * wait));
    assert_eq!(r.stats.duplicates, 1);
}

/// No answer at all: the REQ goes 15 times more (the REQ's 15 CM retries), then h1's id
/// is told it is unreachable (a REJ of reason SEND_TIMEOUT, which its CM reports as
/// RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT) and the connection is forgotten.
#[test]
fn spent_retries_tell_the_emulated_id_it_is_unreachable() {
    let mut r = Resend::default();
    let req = h1s_req();
    r.sent(0, &req);
    let mut now;
    let mut resent = 0;
    let told = loop {
        now = r.next_due().expect("something due");
        let a = r.poll(now);
        assert_eq!(a.len(), 1);
        match &a[0] {
            Action::Resend { frame, .. } => {
                assert_eq!(frame, &req);
                resent += 1;
            }
            Action::Tell { host, from, body } => {
                assert_eq!((*host, *from), (h1().1, vm().1));
                break m::decode(body).unwrap().1;
            }
        }
    };
    assert_eq!(resent, 15);
    assert_eq!(now, 16 * REQ_WAIT);
    assert_eq!(told, timed_out(0));
    assert_eq!((r.live(), r.next_due()), (0, None));
    assert_eq!(r.stats.timed_out, 1);
    // A late REP matches no connection: dropped as cm.c drops it.
    assert_eq!(
        r.received(now, h1().1, &inc(1, rep(0x77, 1))),
        Some(Verdict::Drop)
    );
    assert_eq!(r.stats.stray, 1);
}

/// h1's DREQ: sent again until the DREP; the connection then waits out its timewait
/// (`cm_convert_to_ms` of the path's ACK timeout, 19 here: 2048 ms), answering a repeated
/// DREQ with a DREP, and is forgotten (the bridge is told which remote id). A DREQ for a
/// connection not known gets a DREP at once.
#[test]
fn a_dreq_goes_again_until_the_drep_and_the_timewait_ends_in_pruning() {
    let mut r = Resend::default();
    r.sent(0, &h1s_req());
    r.received(MS, h1().1, &inc(1, rep(0x77, 1)));
    r.sent(MS, &out(1, Msg::Rtu(1, 0x77)));
    let dreq = out(1, Msg::Dreq(1, 0x77, 0x11));
    r.sent(10 * MS, &dreq);
    assert_eq!(r.state(h1().1, 1), Some(State::DreqSent));
    assert_eq!(r.poll(10 * MS + REQ_WAIT), vec![resend(&dreq)]);
    let t = 10 * MS + REQ_WAIT + MS;
    assert_eq!(
        r.received(t, h1().1, &inc(5, Msg::Drep(0x77, 1))),
        Some(Verdict::Pass)
    );
    assert_eq!(r.state(h1().1, 1), Some(State::Timewait));
    let end = t + 2048 * MS;
    assert_eq!(r.next_due(), Some(end));
    assert_eq!(
        r.received(t + MS, h1().1, &inc(6, Msg::Dreq(0x77, 1, 0x13))),
        Some(Verdict::Reply {
            to: vm().1,
            mad: Mad {
                tid: 6,
                msg: Msg::Drep(1, 0x77)
            }
        })
    );
    assert_eq!(r.take_forgotten(), vec![]);
    assert_eq!(r.poll(end - 1), vec![]);
    assert_eq!(r.live(), 1);
    assert_eq!(r.poll(end), vec![]);
    assert_eq!((r.live(), r.next_due()), (0, None));
    assert_eq!(r.take_forgotten(), vec![(vm().1, 0x77)]);
    assert_eq!(
        r.received(end, h1().1, &inc(8, Msg::Dreq(0x77, 1, 0x13))),
        Some(Verdict::Reply {
            to: vm().1,
            mad: Mad {
                tid: 8,
                msg: Msg::Drep(1, 0x77)
            }
        })
    );
    assert_eq!(
        r.stats,
        ResendStats {
            resent: 1,
            duplicates: 2,
            timed_out: 0,
            stray: 0
        }
    );
}

/// The VM's REQ rejected by h1: forgotten at once (cm_send_rej_locked in REQ_RCVD goes
/// back to idle). The VM's REQ again after a DREQ from the VM closed the connection: a
/// new request (the connection in timewait is out of cm.c's remote id table).
#[test]
fn a_rejected_request_is_forgotten_and_a_req_in_timewait_is_a_new_one() {
    let mut r = Resend::default();
    let req = vm_req();
    r.received(0, h1().1, &req);
    let rej = Rej {
        local_comm_id: 3,
        remote_comm_id: 0xbac9_7c30,
        message_rejected: RESPONSE_REQ,
        reason: 28,
        ari: Vec::new(),
        private_data: Vec::new(),
    };
    r.sent(MS, &out(2, Msg::Rej(rej)));
    assert_eq!(r.live(), 0);
    assert_eq!(r.take_forgotten(), vec![(vm().1, 0xbac9_7c30)]);
    // Again, accepted this time, then disconnected by the VM.
    r.received(2 * MS, h1().1, &req);
    r.sent(3 * MS, &out(2, rep(3, 0xbac9_7c30)));
    r.received(4 * MS, h1().1, &inc(2, Msg::Rtu(0xbac9_7c30, 3)));
    assert_eq!(
        r.received(5 * MS, h1().1, &inc(3, Msg::Dreq(0xbac9_7c30, 3, 0x12))),
        Some(Verdict::Pass)
    );
    assert_eq!(r.state(h1().1, 3), Some(State::DreqRcvd));
    r.sent(6 * MS, &out(3, Msg::Drep(3, 0xbac9_7c30)));
    assert_eq!(r.state(h1().1, 3), Some(State::Timewait));
    // The timewait: the REQ's local ACK timeout (19), 2048 ms.
    assert_eq!(r.next_due(), Some(6 * MS + 2048 * MS));
    assert_eq!(r.received(7 * MS, h1().1, &req), Some(Verdict::Pass));
    assert_eq!((r.state(h1().1, 3), r.live()), (None, 1));
    assert_eq!(r.take_forgotten(), vec![(vm().1, 0xbac9_7c30)]);
    assert_eq!(r.next_due(), None);
    assert_eq!(r.stats, ResendStats::default());
}

/// h1's DREQ never answered: 15 resends (6144 ms apart, the REQ's timeout), then h1's id
/// is told (a REJ of reason SEND_TIMEOUT: its CM reports DISCONNECTED, -ETIMEDOUT, as
/// cma.c does for IB_CM_DREQ_ERROR) and the connection waits out its timewait before it
/// is forgotten.
#[test]
fn a_dreq_never_answered_ends_in_a_drep_for_the_emulated_id_and_timewait() {
    let mut r = Resend::default();
    r.sent(0, &h1s_req());
    r.received(MS, h1().1, &inc(1, rep(0x77, 1)));
    r.sent(MS, &out(1, Msg::Rtu(1, 0x77)));
    let dreq = out(1, Msg::Dreq(1, 0x77, 0x11));
    r.sent(0, &dreq);
    let mut actions = Vec::new();
    while r.state(h1().1, 1) == Some(State::DreqSent) {
        let now = r.next_due().expect("something due");
        actions.extend(r.poll(now).into_iter().map(|a| (now, a)));
    }
    assert_eq!(actions.len(), 16);
    for (k, (t, a)) in actions[..15].iter().enumerate() {
        assert_eq!((*t, a), ((k as u64 + 1) * REQ_WAIT, &resend(&dreq)));
    }
    let (t, Action::Tell { host, from, body }) = &actions[15] else {
        panic!("the id told: {:?}", actions[15])
    };
    assert_eq!((*t, *host, *from), (16 * REQ_WAIT, h1().1, vm().1));
    assert_eq!(m::decode(body).unwrap().1, timed_out(0x77));
    // cm_rep_handler's ACK timeout: cm_ack_timeout(15, 19 - 1) = 19, 2048 ms.
    assert_eq!(r.state(h1().1, 1), Some(State::Timewait));
    assert_eq!(r.next_due(), Some(16 * REQ_WAIT + 2048 * MS));
    assert_eq!(r.poll(16 * REQ_WAIT + 2048 * MS), vec![]);
    assert_eq!(r.take_forgotten(), vec![(vm().1, 0x77)]);
    assert_eq!((r.live(), r.stats.resent, r.stats.timed_out), (0, 15, 1));
}

/// A connection between link-local addresses: its MADs travel over IPv6 and are the
/// same connection's, by the hosts their link-local addresses stand for (h1's REQ lost
/// goes again; the VM's REP over IPv6 ends the wait).
#[test]
fn a_link_local_connections_mads_over_ipv6_are_tracked_as_its_hosts() {
    let Msg::Req(mut req) = the_vms_req().msg else {
        unreachable!()
    };
    req.local_comm_id = 1;
    let mad = |tid, msg| Mad { tid, msg }.encode();
    let req6 = cm_frame::frame(end(h1(), true), end(vm(), true), 0, &mad(1, Msg::Req(req)));
    assert_eq!(
        cm_frame::parse_hosts(&req6).map(|(s, d, v6, _)| (s, d, v6)),
        Some((h1().1, vm().1, true))
    );
    let mut r = Resend::default();
    r.sent(0, &req6);
    assert_eq!(r.state(h1().1, 1), Some(State::ReqSent));
    assert_eq!(r.poll(REQ_WAIT), vec![resend(&req6)]);
    let rep6 = cm_frame::frame(end(vm(), true), end(h1(), true), 0, &mad(1, rep(0x77, 1)));
    assert_eq!(
        r.received(REQ_WAIT + MS, h1().1, &rep6),
        Some(Verdict::Pass)
    );
    assert_eq!(r.state(h1().1, 1), Some(State::RepRcvd));
    assert_eq!(r.next_due(), None);
}

/// h1's SIDR REQ goes again every 4096 ms, 15 times (cma.c's SIDR timeout and
/// `CMA_MAX_CM_RETRIES`); then h1's id is told with a SIDR REP of status -ETIMEDOUT
/// (`IB_CM_SIDR_REQ_ERROR`). The VM's SIDR REQ repeated before h1 answers is dropped.
#[test]
fn a_sidr_req_is_resent_then_times_out_and_a_repeated_one_is_dropped() {
    use crate::fabric::ports::cm_frame::CmaHdr;
    use crate::fabric::ports::cm_sidr;
    use crate::rdmacm::core::messages::Service;
    let service = Service {
        ip: vm().1,
        port: 7174,
        ps: 0x0111,
    };
    let hdr = CmaHdr {
        src: "10.100.0.1:41000".parse().unwrap(),
        dst: vm().1.into(),
    };
    let frame = out(4, Msg::SidrReq(cm_sidr::req(4, service, &hdr, &[])));
    let mut r = Resend::default();
    r.sent(0, &frame);
    assert_eq!((r.live(), r.next_due()), (1, Some(4096 * MS)));
    for n in 1..=15 {
        assert_eq!(
            r.poll(n * 4096 * MS),
            vec![Action::Resend {
                host: h1().1,
                frame: frame.clone()
            }]
        );
    }
    let [Action::Tell { host, from, body }] = &r.poll(16 * 4096 * MS)[..] else {
        panic!("told")
    };
    assert_eq!((*host, *from), (h1().1, vm().1));
    let (_, (to, _, msg)) = m::decode(body).unwrap();
    assert_eq!(
        to,
        Address::Endpoint(Endpoint {
            host: h1().1,
            id: 4
        })
    );
    assert_eq!(msg, cm_sidr::timed_out());
    assert_eq!((r.stats.resent, r.stats.timed_out, r.live()), (15, 1, 0));
    // The VM's SIDR REQ, twice.
    let theirs = inc(9, Msg::SidrReq(cm_sidr::req(0x77, service, &hdr, &[])));
    assert_eq!(r.received(0, h1().1, &theirs), Some(Verdict::Pass));
    assert_eq!(r.received(1, h1().1, &theirs), Some(Verdict::Drop));
    assert_eq!(r.stats.duplicates, 1);
}
