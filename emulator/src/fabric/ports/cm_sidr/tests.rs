//! The SIDR MADs laid out byte by byte as the kernel's `struct cm_sidr_req_msg` and
//! `struct cm_sidr_rep_msg` (cm_msgs.h, the offsets of ibta_vol1_c12.h Tables 119 and
//! 120), and the SIDR state's resends and repeats.

use super::*;
use crate::fabric::ports::cm_mad::{Mad, Msg};

fn ip(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

/// `udaddy -p 7174`'s service on 10.100.0.20 (RDMA_PS_UDP 0x0111).
fn udaddy() -> Service {
    Service {
        ip: ip("10.100.0.20"),
        port: 7174,
        ps: 0x0111,
    }
}

fn hdr() -> CmaHdr {
    CmaHdr {
        src: "10.100.0.1:40000".parse().unwrap(),
        dst: ip("10.100.0.20").into(),
    }
}

#[test]
fn a_sidr_req_is_laid_out_as_cm_sidr_req_msg() {
    let r = req(0x0102_0304, udaddy(), &hdr(), &[0xa5; 4]);
    let b = Mad {
        tid: 0x0102_0304,
        msg: Msg::SidrReq(r.clone()),
    }
    .encode();
    // The MAD header: base version 1, class CM, class version 2, SEND; the attribute.
    assert_eq!(&b[..4], &[1, 0x07, 2, 3]);
    assert_eq!(&b[8..16], &[0, 0, 0, 0, 1, 2, 3, 4]);
    assert_eq!(&b[16..18], &[0x00, 0x17]);
    // RequestID, P_Key, reserved, ServiceID.
    assert_eq!(&b[24..28], &[1, 2, 3, 4]);
    assert_eq!(&b[28..30], &[0xff, 0xff]);
    assert_eq!(&b[30..32], &[0, 0]);
    assert_eq!(&b[32..40], &[0, 0, 0, 0, 0x01, 0x11, 0x1c, 0x06]);
    // The private data: struct cma_hdr (version 0, IP version 4, the source port, the
    // IPv4 addresses in the last 4 of 16 bytes), then the program's.
    assert_eq!(&b[40..44], &[0, 0x40, 0x9c, 0x40]);
    assert_eq!(&b[56..60], &[10, 100, 0, 1]);
    assert_eq!(&b[72..76], &[10, 100, 0, 20]);
    assert_eq!(&b[76..80], &[0xa5; 4]);
    assert!(b[80..].iter().all(|&x| x == 0));
    let Msg::SidrReq(back) = Mad::decode(&b).unwrap().msg else {
        panic!("a SIDR REQ")
    };
    assert_eq!(back.private_data.len(), 216);
    assert_eq!(
        (back.request_id, back.pkey, back.service_id),
        (0x0102_0304, 0xffff, 0x0111_1c06)
    );
    let (service, msg) = req_message(&back, |h| match h.dst {
        std::net::IpAddr::V4(v4) => Some(v4),
        std::net::IpAddr::V6(_) => None,
    })
    .unwrap();
    assert_eq!(service, udaddy());
    let mut data = vec![0xa5; 4];
    data.resize(216 - CMA_HDR_LEN, 0);
    assert_eq!(
        msg,
        Message::SidrReq {
            service,
            src: "10.100.0.1:40000".parse().unwrap(),
            dst: "10.100.0.20:7174".parse().unwrap(),
            private_data: data,
        }
    );
}

#[test]
fn a_sidr_rep_is_laid_out_as_cm_sidr_rep_msg() {
    let r = rep(7, 0x0111_1c06, 0, 0x00ab_cdef, 0x0123_4567, vec![0x5a; 3]).unwrap();
    let b = Mad {
        tid: 9,
        msg: Msg::SidrRep(r),
    }
    .encode();
    assert_eq!(&b[16..18], &[0x00, 0x18]);
    // RequestID, Status, AdditionalInformationLength, VendorID (0), QPN, VendorID.
    assert_eq!(&b[24..28], &[0, 0, 0, 7]);
    assert_eq!(&b[28..32], &[0, 0, 0, 0]);
    assert_eq!(&b[32..36], &[0xab, 0xcd, 0xef, 0]);
    // ServiceID, Q_Key, AdditionalInformation (72 bytes), PrivateData (136).
    assert_eq!(&b[36..44], &[0, 0, 0, 0, 0x01, 0x11, 0x1c, 0x06]);
    assert_eq!(&b[44..48], &[0x01, 0x23, 0x45, 0x67]);
    assert!(b[48..120].iter().all(|&x| x == 0));
    assert_eq!(&b[120..123], &[0x5a; 3]);
    assert_eq!(256 - 120, 136);
    let Msg::SidrRep(back) = Mad::decode(&b).unwrap().msg else {
        panic!("a SIDR REP")
    };
    let mut data = vec![0x5a; 3];
    data.resize(136, 0);
    assert_eq!(
        rep_message(back),
        Message::SidrRep {
            status: 0,
            qpn: 0x00ab_cdef,
            qkey: 0x0123_4567,
            private_data: data,
        }
    );
    // A rejection (IB_SIDR_REJECT) keeps its status; a negative one has no MAD.
    let rej = rep(7, 1, 2, 0, 0, vec![]).unwrap();
    assert_eq!(rej.status, 2);
    assert!(rep(7, 1, -110, 0, 0, vec![]).is_err());
}

const MS: Nanos = 1_000_000;

#[test]
fn a_sidr_req_goes_again_every_4096_ms_15_times_then_times_out() {
    assert_eq!(SIDR_TIMEOUT, 4096 * MS);
    let (h1, vm) = (ip("10.100.0.1"), ip("10.100.0.20"));
    let r = req(5, udaddy(), &hdr(), &[]);
    let mut s = Sidr::default();
    s.sent_req(0, h1, vm, &r, b"frame");
    assert_eq!(s.next_due(), Some(4096 * MS));
    assert!(s.poll(4096 * MS - 1).is_empty());
    let mut t = 0;
    for _ in 0..15 {
        t += 4096 * MS;
        assert_eq!(
            s.poll(t),
            vec![Due::Again {
                host: h1,
                frame: b"frame".to_vec()
            }]
        );
    }
    t += 4096 * MS;
    assert_eq!(
        s.poll(t),
        vec![Due::GaveUp {
            host: h1,
            request_id: 5,
            remote: vm
        }]
    );
    assert_eq!((s.live(), s.next_due()), (0, None));
    assert_eq!(
        timed_out(),
        Message::SidrRep {
            status: -libc::ETIMEDOUT,
            qpn: 0,
            qkey: 0,
            private_data: vec![]
        }
    );
}

#[test]
fn the_sidr_rep_ends_the_wait_and_a_second_is_stray() {
    let (h1, vm) = (ip("10.100.0.1"), ip("10.100.0.20"));
    let mut s = Sidr::default();
    s.sent_req(0, h1, vm, &req(5, udaddy(), &hdr(), &[]), b"f");
    let answer = rep(5, 0x0111_1c06, 0, 0x11, 0x0123_4567, vec![]).unwrap();
    let other = rep(6, 0x0111_1c06, 0, 0x11, 0x0123_4567, vec![]).unwrap();
    assert_eq!(s.received_rep(h1, vm, &other), Seen::Stray);
    assert_eq!(s.received_rep(h1, vm, &answer), Seen::New);
    assert_eq!(s.received_rep(h1, vm, &answer), Seen::Stray);
    assert_eq!((s.live(), s.next_due()), (0, None));
    assert!(s.poll(100_000 * MS).is_empty());
}

#[test]
fn a_repeated_sidr_req_is_dropped_until_answered() {
    let (h1, vm) = (ip("10.100.0.1"), ip("10.100.0.20"));
    let mut s = Sidr::default();
    let r = req(0x77, udaddy(), &hdr(), &[]);
    assert_eq!(s.received_req(h1, vm, &r), Seen::New);
    assert_eq!(s.received_req(h1, vm, &r), Seen::Duplicate);
    assert_eq!(s.live(), 1);
    s.sent_rep(vm, 0x77);
    assert_eq!(s.live(), 0);
    // cm_send_sidr_rep_locked erased it: a later SIDR REQ is a new one.
    assert_eq!(s.received_req(h1, vm, &r), Seen::New);
}
